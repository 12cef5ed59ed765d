"""storage_align's check after later steps: a request that padding meets whatever the
compaction makes of the buffer (the axis before the innermost, a constant innermost length)
is not re-checked by compacting the function; others still are (test_soundness_memory)."""

from __future__ import annotations

import numpy as np

import sched
from sched import compute as te


def matmul(n=64):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def test_storage_align_on_the_axis_before_the_innermost_does_not_compact(monkeypatch):
    # padding the innermost length always meets such a request: later steps need not run
    # the lowering's compaction to check it
    import sched.lower.compact_buffers as compact

    sch = sched.Schedule(matmul(32))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, [None, 8])
    ko, ki = sch.split(k, [None, 8])
    sch.reorder(io, ko, ii, j, ki)
    shared = sch.cache_read(block, 0, "shared")
    sch.compute_at(shared, ko)
    sch.storage_align(shared, 0, axis=-2, factor=32, offset=8)

    def refuse(*args, **kwargs):
        raise AssertionError("compact_buffers ran")
    monkeypatch.setattr(compact, "compact_buffers", refuse)
    sch.split(j, [None, 8])
    monkeypatch.undo()
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((32, 32)).astype(np.float32) for _ in range(2))
    c = np.zeros((32, 32), np.float32)
    sched.build(sch.func, target="c")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_rfactor_keeps_the_alignment_of_the_buffer_it_was_asked_of():
    # the request (of C, the block's first write) went to the partial block, whose first
    # write is C_rf: rfactor was refused over a buffer the user never aligned (helper-133)
    A = te.placeholder((12, 9), name="A")
    B = te.placeholder((9, 20), name="B")
    C = te.ops.matmul(A, B)
    D = te.compute((12, 20), lambda i, j: C[i, j] + 1.0, name="D")
    sch = sched.Schedule(te.create_prim_func([A, B, D]))
    sch.storage_align(sch.get_block("C"), 0, 0, 16, 3)
    sch.rfactor(sch.get_loops(sch.get_block("C"))[2], 0)
    script = sch.mod.script()
    assert script.count('T.block_attr({"buffer_dim_align": "[[0, 0, 16, 3]]"})') == 1
    assert script.index('T.block("C_rf")') < script.index('T.block("C")') \
        < script.index("buffer_dim_align")
    rng = np.random.default_rng(3)
    a, b = rng.random((12, 9), dtype=np.float32), rng.random((9, 20), dtype=np.float32)
    d = np.zeros((12, 20), "float32")
    sched.build(sch.mod, target="c")(a, b, d)
    np.testing.assert_allclose(d, a @ b + 1, rtol=1e-5)

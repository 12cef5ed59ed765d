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

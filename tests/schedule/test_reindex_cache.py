"""reindex_cache_read / reindex_cache_write: caches laid out by an index map of the block's
iteration variables (the IR, the numbers on the C target, the trace, and the refusals)."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.schedule.trace import Trace


def _matmul():
    A = te.placeholder((16, 12), name="A")
    B = te.placeholder((12, 8), name="B")
    return te.create_prim_func([A, B, te.ops.matmul(A, B)])


def test_read_and_write_caches_follow_their_maps_and_match_numpy():
    func = _matmul()
    sch = sched.Schedule(func)
    block = sch.get_block("C")
    read = sch.reindex_cache_read(block, "A", "shared", lambda vi, vj, vk: (vk, vi))
    write = sch.reindex_cache_write(block, 0, "local", lambda vi, vj, vk: (vj // 4, vi, vj % 4))
    assert (read.name, write.name) == ("A_shared", "C_local")
    text = sch.func.script()
    assert 'A_shared = T.alloc_buffer((12, 16), "float32", scope="shared")' in text
    assert 'C_local = T.alloc_buffer((2, 16, 4), "float32", scope="local")' in text
    assert "A_shared[v1, v0] = A[v0, v1]" in text
    assert "C_local[v_j // 4, v_i, v_j % 4] + A_shared[v_k, v_i] * B[v_k, v_j]" in text
    assert text.index('T.block("A_shared")') < text.index('T.block("C")') < \
        text.index('T.block("C_local")')
    assert sched.parse(text) == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 12)).astype(np.float32)
    b = rng.standard_normal((12, 8)).astype(np.float32)
    out = np.full((16, 8), np.nan, np.float32)
    sched.build(sch.func, target="c")(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


def test_a_map_onto_a_padded_box_matches_numpy():
    # 10 rows in blocks of 4: the cache is (3, 4, 6), its two last rows padding
    X = te.placeholder((10, 6), name="X")
    Y = te.compute((10, 6), lambda i, j: X[i, j] * 2.0, name="Y")
    sch = sched.Schedule(te.create_prim_func([X, Y]))
    sch.reindex_cache_read(sch.get_block("Y"), 0, "global", lambda i, j: (i // 4, i % 4, j))
    assert 'X_global = T.alloc_buffer((3, 4, 6), "float32")' in sch.func.script()
    x = np.random.default_rng(1).standard_normal((10, 6)).astype(np.float32)
    y = np.zeros((10, 6), np.float32)
    sched.build(sch.func, target="c")(x, y)
    np.testing.assert_allclose(y, x * 2)


def test_a_map_using_a_variable_the_access_does_not_use_is_refused():
    sch = sched.Schedule(_matmul())
    with pytest.raises(ScheduleError, match=r"reindex_cache_read: argument 4, 'index_map' "
                       r"lambda vi, vj, vk: \(vj, vk\) uses vj, which do\(es\) not index 'A'"):
        sch.reindex_cache_read(sch.get_block("C"), "A", "shared", lambda vi, vj, vk: (vj, vk))
    with pytest.raises(ScheduleError, match="expected a map of the 3 iteration variables of "
                       "block 'C'"):
        sch.reindex_cache_read(sch.get_block("C"), "A", "shared", lambda vi, vk: (vk, vi))
    with pytest.raises(ScheduleError, match="unknown storage scope 'texture'"):
        sch.reindex_cache_read(sch.get_block("C"), "A", "texture", lambda vi, vj, vk: (vi, vk))


def test_two_access_patterns_are_refused_with_the_reason():
    X = te.placeholder((9,), name="X")
    Y = te.compute((8,), lambda i: X[i] + X[i + 1], name="Y")
    sch = sched.Schedule(te.create_prim_func([X, Y]))
    before = sch.func
    with pytest.raises(ScheduleError, match="reindex_cache_read: block 'Y' accesses 'X' at 2 "
                       "index pattern"):
        sch.reindex_cache_read(sch.get_block("Y"), "X", "local", lambda i: (i,))
    assert sch.func is before and len(sch.trace) == 1          # get_block alone

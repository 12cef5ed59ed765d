"""The cache primitives never read uninitialised memory or outside a buffer (issue 9): a
cache_write of a block that reads what it writes fills the cache first (item 16), a cache_read
of a guarded stencil copies only the buffer (item 17), storage_align is checked at the step
(item 26)."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.interpreter import interpret
from sched.ir.parser import parse
from tests.schedule.conftest import run_c

RNG = np.random.default_rng(16)

SCAN = '''
@T.prim_func
def main(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(15):
        with T.block("C"):
            vi = T.axis.spatial(15, i)
            C[vi + 1] = C[vi] + A[vi + 1]
'''

IN_PLACE = '''
@T.prim_func
def main(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = C[vi] + A[vi]
'''

INIT_READS_OLD_VALUE = '''
@T.prim_func
def main(A: T.Buffer((16, 4), "float32"), C: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 4):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = C[vi] * T.float32(2)
            C[vi] = C[vi] + A[vi, vk]
'''

REDUCTION = INIT_READS_OLD_VALUE.replace("C[vi] = C[vi] * T.float32(2)", "C[vi] = T.float32(0)")


def _scan(a, c):
    c = c.copy()
    for i in range(15):
        c[i + 1] = c[i] + a[i + 1]
    return c


def _init_reads_old_value(a, c):
    return c * 2 + a.sum(axis=1)


@pytest.mark.parametrize("source, shape, expected", [
    (SCAN, (16,), _scan),
    (IN_PLACE, (16,), lambda a, c: c + a),
    (INIT_READS_OLD_VALUE, (16, 4), _init_reads_old_value),
], ids=["scan", "in-place", "init-reads-old-value"])
@pytest.mark.parametrize("scope", ["global", "local"])
def test_cache_write_of_a_block_reading_old_values_fills_the_cache_first(source, shape,
                                                                        expected, scope):
    sch = sched.Schedule(parse(source))
    sch.cache_write(sch.get_block("C"), 0, scope)
    assert f'T.block("C_{scope}_fill")' in sch.func.script()
    a = RNG.standard_normal(shape).astype("float32")
    c = RNG.standard_normal(16).astype("float32")
    _, out = run_c(sch.func, a, c)
    np.testing.assert_allclose(out, expected(a, c), rtol=1e-5, atol=1e-6)
    out = c.copy()
    interpret(sch.func, a.copy(), out)
    np.testing.assert_allclose(out, expected(a, c), rtol=1e-5, atol=1e-6)


def test_cache_write_of_a_reduction_with_its_init_needs_no_fill():
    sch = sched.Schedule(parse(REDUCTION))
    sch.cache_write(sch.get_block("C"), 0, "local")
    assert "_fill" not in sch.func.script()
    a = RNG.standard_normal((16, 4)).astype("float32")
    _, c = run_c(sch.func, a, np.full(16, 7, "float32"))
    np.testing.assert_allclose(c, a.sum(axis=1), rtol=1e-5)


GUARDED_STENCIL = '''
@T.prim_func
def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = T.if_then_else(vi >= 1 and vi < 15, A[vi - 1] + A[vi + 1], T.float32(0))
'''

SYMBOLIC_GUARDED_STENCIL = '''
@T.prim_func
def main(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            B[vi] = T.if_then_else(vi >= 1 and vi < n - 1, A[vi - 1] + A[vi + 1], T.float32(0))
'''


@pytest.mark.parametrize("source", [GUARDED_STENCIL, SYMBOLIC_GUARDED_STENCIL],
                         ids=["constant", "symbolic"])
def test_cache_read_of_a_guarded_stencil_copies_only_the_buffer(source):
    sch = sched.Schedule(parse(source))
    sch.cache_read(sch.get_block("B"), 0, "global")
    a = RNG.standard_normal(16).astype("float32")
    expected = np.zeros(16, "float32")
    expected[1:15] = a[:14] + a[2:]
    b = np.zeros(16, "float32")
    interpret(sch.func, a.copy(), b)            # raises on an access outside a buffer
    np.testing.assert_allclose(b, expected, rtol=1e-6)
    _, b = run_c(sch.func, a, np.zeros(16, "float32"))
    np.testing.assert_allclose(b, expected, rtol=1e-6)


THREE_D = '''
@T.prim_func
def main(A: T.Buffer((2, 4, 6), "float32"), C: T.Buffer((2, 4, 6), "float32")):
    with T.block("root"):
        B = T.alloc_buffer((2, 4, 6), "float32")
        for i, j, k in T.grid(2, 4, 6):
            with T.block("B"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                B[vi, vj, vk] = A[vi, vj, vk] * T.float32(2)
        for i, j, k in T.grid(2, 4, 6):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSS", [i, j, k])
                C[vi, vj, vk] = B[vi, vj, vk] + T.float32(1)
'''


def test_storage_align_refuses_a_stride_no_padding_reaches():
    sch = sched.Schedule(parse(THREE_D))
    block = sch.get_block("B")
    sch.storage_align(block, 0, axis=1, factor=4, offset=0)   # pads the last dim to 8
    with pytest.raises(ScheduleError, match="storage_align: storage_align of 'B': no padding "
                       "of dimension 1 gives axis 0 a stride 4 \\* n \\+ 1"):
        sch.storage_align(block, 0, axis=0, factor=4, offset=1)   # 8 * m is never 1 mod 4
    a = RNG.standard_normal((2, 4, 6)).astype("float32")
    _, c = run_c(sch.func, a, np.zeros((2, 4, 6), "float32"))
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


SYMBOLIC_COPY = '''
@T.prim_func
def main(a: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, n), "float32")
    C = T.match_buffer(c, (n, n), "float32")
    for i, j in T.grid(n, n):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] + T.float32(1)
'''


def test_storage_align_refuses_a_symbolic_dimension_at_the_step():
    sch = sched.Schedule(parse(SYMBOLIC_COPY))
    cache = sch.cache_read(sch.get_block("C"), 0, "global")
    with pytest.raises(ScheduleError, match="symbolic length n"):
        sch.storage_align(cache, 0, axis=0, factor=16, offset=1)


def test_storage_align_of_a_compacted_tile_of_a_symbolic_buffer_is_kept():
    sch = sched.Schedule(parse(SYMBOLIC_COPY))
    cache = sch.cache_read(sch.get_block("C"), 0, "global")
    i, j = sch.get_loops(sch.get_block("C"))
    i0, _ = sch.split(i, [None, 4])
    j0, _ = sch.split(j, [None, 4])
    sch.reorder(i0, j0)
    sch.compute_at(cache, j0)                   # compacted to a constant 4 x 4 tile
    sch.storage_align(cache, 0, axis=0, factor=16, offset=1)
    n = 10
    a = RNG.standard_normal((n, n)).astype("float32")
    _, c = run_c(sch.func, a, np.zeros((n, n), "float32"))
    np.testing.assert_allclose(c, a + 1, rtol=1e-6)

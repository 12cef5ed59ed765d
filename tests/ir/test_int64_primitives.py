"""Functions with `T.int64` extents go through every schedule primitive (issue 9, item 9):
index arithmetic mixing int32 and int64 promotes to int64, as in TVM, instead of raising
`TypeError: 'mul' on int32 and int64`. Each schedule is checked by the verifier, a print/parse
round trip, and numbers against numpy on the C target."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched.ir import IntImm, Var
from sched.ir.nodes import Cast, binary
from sched.ir.parser import parse
from sched.ir.verify import verify
from tests.schedule.conftest import run_c

SOURCE = '''
@T.prim_func
def main(A: T.Buffer((T.int64(16), T.int64(12)), "float32"),
         B: T.Buffer((T.int64(16),), "float32")):
    with T.block("root"):
        C = T.alloc_buffer((T.int64(16), T.int64(12)), "float32")
        for i, k in T.grid(T.int64(16), T.int64(12)):
            with T.block("C"):
                vi, vk = T.axis.remap("SS", [i, k])
                C[vi, vk] = A[vi, vk] * T.float32(2)
        for i, k in T.grid(T.int64(16), T.int64(12)):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + C[vi, vk]
'''


def _split_k(s):
    return s.split(s.get_loops(s.get_block("B"))[1], [None, 4])


SCHEDULES = {
    "split": _split_k,
    "fuse": lambda s: s.fuse(*s.get_loops(s.get_block("B"))),
    "reorder": lambda s: s.reorder(*reversed(s.get_loops(s.get_block("C")))),
    "compute_at": lambda s: s.compute_at(s.get_block("C"), s.get_loops(s.get_block("B"))[0]),
    "reverse_compute_at": lambda s: s.reverse_compute_at(s.get_block("B"),
                                                         s.get_loops(s.get_block("C"))[0]),
    "compute_inline": lambda s: s.compute_inline(s.get_block("C")),
    "cache_read": lambda s: s.cache_read(s.get_block("B"), 0, "shared"),
    "cache_write": lambda s: s.cache_write(s.get_block("C"), 0, "local"),
    "rfactor": lambda s: s.rfactor(_split_k(s)[1], 0),
    "decompose_reduction": lambda s: s.decompose_reduction(s.get_block("B"),
                                                           s.get_loops(s.get_block("B"))[0]),
    "tile_and_cache": lambda s: (
        s.compute_at(s.cache_read(s.get_block("B"), 0, "local"), _split_k(s)[0])),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_int64_extents_schedule_and_run(name):
    sch = sched.Schedule(parse(SOURCE))
    SCHEDULES[name](sch)
    func = sch.func
    verify(func)
    assert parse(func.script()) == func
    a = np.random.default_rng(0).standard_normal((16, 12)).astype("float32")
    _, b = run_c(func, a, np.zeros(16, "float32"))
    np.testing.assert_allclose(b, (a * 2).sum(axis=1), rtol=1e-5)


def test_mixed_int_widths_promote_to_the_wider():
    i, n = Var("i"), Var("n", "int64")
    product = i * n
    assert product.dtype == "int64" and product.a == Cast("int64", i)
    assert (n + 1).b == IntImm(1, "int64")
    assert binary("add", IntImm(3), n).a == IntImm(3, "int64")
    mixed = binary("add", i, Var("x", "float32"))       # TVM's int -> float promotion
    assert mixed.dtype == "float32" and mixed.a == Cast("float32", i)


SYMBOLIC_SOURCE = '''
@T.prim_func
def main(a: T.handle, b: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n, T.int64(12)), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i, k in T.grid(n, T.int64(12)):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk] * T.float32(2)
'''

SYMBOLIC_SCHEDULES = {
    "split": lambda s: s.split(s.get_loops(s.get_block("B"))[0], [None, 4]),
    "fuse": lambda s: s.fuse(*s.get_loops(s.get_block("B"))),
    "rfactor": lambda s: s.rfactor(_split_k(s)[1], 0),
    "cache_read": lambda s: s.cache_read(s.get_block("B"), 0, "global"),
    "cache_write": lambda s: s.cache_write(s.get_block("B"), 0, "global"),
    "decompose_reduction": lambda s: s.decompose_reduction(s.get_block("B"),
                                                           s.get_loops(s.get_block("B"))[0]),
    "tile_and_cache": lambda s: s.compute_at(
        s.cache_read(s.get_block("B"), 0, "local"),
        s.split(s.get_loops(s.get_block("B"))[0], [None, 4])[0]),
}


@pytest.mark.parametrize("name", sorted(SYMBOLIC_SCHEDULES))
def test_int64_symbolic_dims_schedule_and_run(name):
    sch = sched.Schedule(parse(SYMBOLIC_SOURCE))
    SYMBOLIC_SCHEDULES[name](sch)
    verify(sch.func)
    assert parse(sch.func.script()) == sch.func
    a = np.random.default_rng(1).standard_normal((10, 12)).astype("float32")
    _, b = run_c(sch.func, a, np.zeros(10, "float32"))
    np.testing.assert_allclose(b, (a * 2).sum(axis=1), rtol=1e-5)

"""Views and block-local buffers under the schedule primitives (issue 9, item 25):
`T.decl_buffer` inside a block is a buffer of that block; cache_read caches a view read by a
block, and refuses, with the fix, a block that reaches the storage through several buffers or
a view it declares itself."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.interpreter import interpret
from sched.ir.parser import parse
from sched.ir.verify import verify
from tests.schedule.conftest import run_c

RNG = np.random.default_rng(25)

DECL_IN_BLOCK = '''
@T.prim_func
def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            tmp = T.decl_buffer((1,), "float32")
            tmp[0] = A[vi] * T.float32(2)
            B[vi] = tmp[0] + T.float32(1)
'''


def test_decl_buffer_inside_a_block_is_a_buffer_of_the_block():
    func = parse(DECL_IN_BLOCK)
    assert parse(func.script()) == func
    sch = sched.Schedule(func)
    block = sch.get_block("B")
    assert [r.buffer.name for r in sch.func.body.block.body.body.block.reads] == ["A"]
    (i,) = sch.get_loops(block)
    sch.split(i, [None, 4])
    sch.cache_read(block, 0, "global")
    verify(sch.func)
    a = RNG.standard_normal(16).astype("float32")
    _, b = run_c(sch.func, a, np.zeros(16, "float32"))
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)
    b = np.zeros(16, "float32")
    interpret(sch.func, a.copy(), b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


VIEW_AT_START = '''
@T.prim_func
def main(A: T.Buffer((16,), "float32"), B: T.Buffer((4, 4), "float32")):
    A_2d = T.Buffer((4, 4), "float32", data=A.data)
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A_2d[vi, vj] * T.float32(2)
'''


def test_cache_read_of_a_view_declared_at_the_start():
    sch = sched.Schedule(parse(VIEW_AT_START))
    sch.cache_read(sch.get_block("B"), 0, "global")
    assert parse(sch.func.script()) == sch.func
    a = RNG.standard_normal(16).astype("float32")
    b = np.zeros((4, 4), "float32")
    interpret(sch.func, a.copy(), b)
    np.testing.assert_allclose(b, (a * 2).reshape(4, 4), rtol=1e-6)


VIEW_IN_BLOCK = '''
@T.prim_func
def main(A: T.Buffer((4, 4), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            A_flat = T.decl_buffer((16,), "float32", data=A.data)
            B[vi] = A_flat[vi] * T.float32(2)
'''

TWO_VIEWS = '''
@T.prim_func
def main(A: T.Buffer((4, 4), "float32"), B: T.Buffer((16,), "float32")):
    A_flat = T.Buffer((16,), "float32", data=A.data)
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            T.reads(A[0:4, 0:4])
            T.writes(B[vi])
            B[vi] = A_flat[vi] * T.float32(2)
'''


@pytest.mark.parametrize("source, message", [
    (VIEW_IN_BLOCK, "'A_flat' is declared inside block 'B' \\(T.decl_buffer\\).*declare the "
                    "view at the function's start"),
    (TWO_VIEWS, "block 'B' accesses the storage of 'A' through A_flat too"),
], ids=["view-declared-in-the-block", "two-views"])
def test_cache_read_refuses_what_a_cache_could_not_serve(source, message):
    sch = sched.Schedule(parse(source))
    with pytest.raises(ScheduleError, match=message):
        sch.cache_read(sch.get_block("B"), 0, "global")

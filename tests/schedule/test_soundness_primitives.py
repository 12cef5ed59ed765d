"""Schedule primitives that accepted a schedule computing another result, or misapplied a
handle (issue 9): compute_inline into predicates and bindings (item 4), handles of another
Schedule (item 14), fresh names for the copy blocks of the cache primitives (item 24)."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.ir.parser import parse
from sched.ir.verify import verify
from sched.script import T
from tests.schedule.conftest import run_c

RNG = np.random.default_rng(9)

# D runs where B > 0: inlining B must rewrite the predicate, which would read a B no one writes
PREDICATE_READS_PRODUCER = '''
@T.prim_func
def main(A: T.Buffer((16,), "float32"), D: T.Buffer((16,), "float32")):
    with T.block("root"):
        B = T.alloc_buffer((16,), "float32")
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                B[vi] = A[vi] * T.float32(2)
        for i in range(16):
            with T.block("D"):
                vi = T.axis.spatial(16, i)
                T.where(B[i] > T.float32(0))
                D[vi] = A[vi] + T.float32(1)
'''

# D's binding reads the index buffer P that block P computes
BINDING_READS_PRODUCER = '''
@T.prim_func
def main(A: T.Buffer((16,), "float32"), D: T.Buffer((16,), "float32")):
    with T.block("root"):
        P = T.alloc_buffer((16,), "int32")
        for i in range(16):
            with T.block("P"):
                vi = T.axis.spatial(16, i)
                P[vi] = 15 - vi
        for i in range(16):
            with T.block("D"):
                vi = T.axis.spatial(16, P[i])
                D[vi] = A[vi] + T.float32(1)
'''


def test_compute_inline_rewrites_the_consumer_predicate():
    sch = sched.Schedule(parse(PREDICATE_READS_PRODUCER))
    sch.compute_inline(sch.get_block("B"))
    assert "B[" not in sch.func.script()
    a = RNG.standard_normal(16).astype("float32")
    _, d = run_c(sch.func, a, np.zeros(16, "float32"))
    np.testing.assert_allclose(d, np.where(a * 2 > 0, a + 1, 0))


def test_compute_inline_rewrites_the_consumer_bindings():
    sch = sched.Schedule(parse(BINDING_READS_PRODUCER))
    sch.compute_inline(sch.get_block("P"))
    assert "P[" not in sch.func.script()
    verify(sch.func)
    a = RNG.standard_normal(16).astype("float32")
    _, d = run_c(sch.func, a, np.zeros(16, "float32"))
    np.testing.assert_allclose(d, a + 1)


def test_reverse_compute_inline_refuses_a_consumer_with_data_dependent_bindings():
    source = BINDING_READS_PRODUCER.replace('T.alloc_buffer((16,), "int32")',
                                            'T.alloc_buffer((16,), "int32")\n'
                                            '        E = T.alloc_buffer((16,), "float32")')
    source = source.replace("D[vi] = A[vi] + T.float32(1)", "D[vi] = A[vi] + T.float32(1)\n"
                            "        for i in range(16):\n"
                            "            with T.block(\"E\"):\n"
                            "                vi = T.axis.spatial(16, P[i])\n"
                            "                E[vi] = D[vi]")
    sch = sched.Schedule(parse(source))
    with pytest.raises(ScheduleError, match="bindings of block 'E' load P"):
        sch.reverse_compute_inline(sch.get_block("E"))


MATMUL_LIKE = '''
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
'''


def test_a_handle_of_another_schedule_is_refused():
    first = sched.Schedule(parse(MATMUL_LIKE))
    second = sched.Schedule(parse(MATMUL_LIKE))
    i, _ = first.get_loops(first.get_block("B"))
    with pytest.raises(ScheduleError, match="belongs to another Schedule; get handles from "
                       r"this schedule with sch.get_loops\(...\)"):
        second.split(i, [None, 2])
    with pytest.raises(ScheduleError, match="block handle .* belongs to another Schedule"):
        second.get_loops(first.get_block("B"))
    assert len(second.trace) == 0


def test_a_copy_accepts_the_handles_made_before_it_only():
    sch = sched.Schedule(parse(MATMUL_LIKE))
    i, j = sch.get_loops(sch.get_block("B"))
    other = sch.copy()
    io, _ = other.split(i, [None, 2])          # made before the copy: valid there
    with pytest.raises(ScheduleError, match="belongs to another Schedule"):
        sch.parallel(io)                        # made by the copy: not the original's
    sch.split(j, [None, 4])                     # the original is unchanged by the copy's steps
    replayed = other.trace.apply(parse(MATMUL_LIKE))
    assert replayed.func == other.func


SYMBOLIC_V0 = '''
@T.prim_func
def main(a: T.handle, b: T.handle):
    v0 = T.int32()
    A = T.match_buffer(a, (v0, 8), "float32")
    B = T.match_buffer(b, (v0, 8), "float32")
    for i, j in T.grid(v0, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)
'''

BUFFER_V0 = '''
@T.prim_func
def main(v0: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = v0[vi, vj] + T.float32(1)
'''


@pytest.mark.parametrize("source", [SYMBOLIC_V0, BUFFER_V0], ids=["symbolic-dim", "buffer"])
@pytest.mark.parametrize("primitive", ["cache_read", "cache_write"])
def test_cache_copy_blocks_take_fresh_variable_names(source, primitive):
    func = parse(source)
    sch = sched.Schedule(func)
    getattr(sch, primitive)(sch.get_block("B"), 0, "global")
    verify(sch.func)
    assert parse(sch.func.script()) == sch.func
    n = 8
    a = RNG.standard_normal((n, 8)).astype("float32")
    _, b = run_c(sch.func, a, np.zeros((n, 8), "float32"))
    np.testing.assert_allclose(b, a + 1)


PREDICATE_READS_PARAMETER = '''
@T.prim_func
def main(A: T.Buffer((16,), "float32"), D: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("D"):
            vi = T.axis.spatial(16, i)
            T.where(A[i] > T.float32(0))
            D[vi] = A[vi] + T.float32(1)
'''


def test_a_predicate_reading_a_parameter_is_a_read_of_its_block():
    func = parse(PREDICATE_READS_PARAMETER)
    realize = func.body.block.body.body
    assert [r.buffer.name for r in realize.block.reads] == ["A"]
    assert parse(func.script()) == func
    sch = sched.Schedule(func)
    a = RNG.standard_normal(16).astype("float32")
    _, d = run_c(sch.func, a, np.zeros(16, "float32"))
    np.testing.assert_allclose(d, np.where(a > 0, a + 1, 0))


@T.prim_func
def _uint8_index(A: T.Buffer((64,), "uint8"), X: T.Buffer((256,), "float32"),
                 C: T.Buffer((64,), "float32")):
    B = T.alloc_buffer((64,), "uint8")
    for i in range(64):
        with T.block("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = A[vi] - T.uint8(200)
    for i in range(64):
        with T.block("C"):
            vi = T.axis.spatial(64, i)
            C[vi] = X[B[vi]]


def test_an_unsigned_index_minus_a_constant_inlines():
    # audit, helper-95: the read region of X[A[vi] - 200] was written A[vi] + -200, no uint8
    # constant (a raw TypeError from compute_inline, and at the parse of the inlined form)
    sch = sched.Schedule(_uint8_index)
    with pytest.warns(UserWarning):         # the index is data: the whole of X is read
        sch.compute_inline(sch.get_block("B"))
    a = (np.arange(64) * 4).astype(np.uint8)
    x = np.random.default_rng(0).random(256, dtype=np.float32)
    for func in (sch.func, sched.parse(sch.func.script())):
        c = np.full(64, np.nan, np.float32)
        sched.build(func, target="c")(a, x, c)
        np.testing.assert_array_equal(c, x[a - np.uint8(200)])


@T.prim_func
def _init_reads_the_reduce_variable(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 8):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = A[vi, vk]
            C[vi] = C[vi] + A[vi, vk]


def test_decompose_reduction_of_an_init_reading_a_reduce_variable_is_refused():
    # audit, helper-95: the init block lost vk: an isl syntax error
    sch = sched.Schedule(_init_reads_the_reduce_variable)
    i, _ = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match="the init of block 'C' reads the reduce variable "
                                            "'vk'"):
        sch.decompose_reduction(sch.get_block("C"), i)
    # blockized, the init stays in the nested block (helper-97: the same isl error)
    sch = sched.Schedule(_init_reads_the_reduce_variable)
    i, k = sch.get_loops(sch.get_block("C"))
    ko, ki = sch.split(k, factors=[2, 4])
    outer = sch.blockize(ki)
    with pytest.raises(ScheduleError, match="the init of block 'C' reads the reduce variable "
                                            "'vk'"):
        sch.decompose_reduction(outer, ko)


def test_rfactor_of_an_init_reading_a_reduce_variable_is_refused():
    # audit, helper-99: a VerifyError ("vk used outside its scope") from the step's check
    sch = sched.Schedule(_init_reads_the_reduce_variable)
    _, k = sch.get_loops(sch.get_block("C"))
    _, inner = sch.split(k, factors=[2, 4])
    with pytest.raises(ScheduleError, match="rfactor: the init of block 'C' reads the reduce "
                                            "variable 'vk'"):
        sch.rfactor(inner, 0)

"""A compile error names the schedule step that made the offending lines (issue 12 item 6):
an intrinsic the compiler does not know is forced into the generated code, and the error of
gcc (C target), g++ (cuda-emu) and NVRTC (cuda) names block 'B' and the step that bound its
loop, not the steps of the other block."""

from __future__ import annotations

import pytest

import sched
from sched import compute as te
from sched.c import dtypes
from sched.errors import BuildError
from sched.schedule.blame import narrow_compile_error


@pytest.fixture
def unsupported_exp(monkeypatch):
    """exp generated as a call of an identifier no compiler knows."""
    real = dtypes.math_call

    def math_call(op, args, dtype):
        if op == "exp":
            return f"(sched_unsupported_exp * ({args[0]}))"
        return real(op, args, dtype)

    monkeypatch.setattr(dtypes, "math_call", math_call)


def two_blocks():
    n = 256
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: te.exp(A[i]), name="B")
    C = te.compute((n,), lambda i: A[i] + 1.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, B, C]))
    for name in ("B", "C"):
        (i,) = sch.get_loops(sch.get_block(name))
        outer, inner = sch.split(i, factors=[None, 64])
        sch.bind(outer, "blockIdx.x")
        sch.bind(inner, "threadIdx.x")
    return sch


@pytest.mark.parametrize("target", ["c", "cuda-emu", "cuda"])
def test_compile_error_names_the_step_that_made_the_offending_line(target, unsupported_exp):
    with pytest.raises(BuildError) as raised:
        sched.build(two_blocks(), target=target, arch="sm_80" if target == "cuda" else None)
    message = str(raised.value)
    assert "sched_unsupported_exp" in message
    assert "block 'B', loop 'i_0', loop 'i_1_1'; the step that last changed them is step 5 " \
           "of 10:\n    sch.bind(l3, 'threadIdx.x')        (it changed block 'B', loop " \
           "'i_1_1')\n  (loop 'i_0' last changed by step 4: sch.bind(l2, 'blockIdx.x'))" \
        in message
    assert "block 'C'" not in message.split("the offending lines come from")[1]


def test_lines_of_an_unscheduled_block_come_from_the_function_as_written():
    sch = two_blocks()
    message = ">   12 |     C[i_1_0 * 64 + i_1_1_1] = A[i_1_0 * 64 + i_1_1_1] + 1.0f;"
    narrowed = narrow_compile_error(message, sch.original_func, sch.trace, sch.func)
    assert "step 10 of 10:\n    sch.bind(l7, 'threadIdx.x')" in narrowed
    fresh = sched.Schedule(sch.func)
    fresh.get_block("C")
    narrowed = narrow_compile_error(message, fresh.original_func, fresh.trace, fresh.func)
    assert narrowed.startswith("the offending lines come from the function as written (line "
                               "12: block 'C', loop 'i_1_0', loop 'i_1_1_1')")


def test_a_message_without_marked_lines_is_left_alone():
    sch = two_blocks()
    assert narrow_compile_error("gcc: out of memory", sch.original_func, sch.trace,
                                sch.func) is None


@pytest.mark.parametrize("target", ["c", "cuda"])
def test_an_extern_call_of_the_function_as_written_is_not_blamed_on_a_step(target):
    # the undefined function is the user's call, not something a step made: the step that
    # last bound the block's loops is not named
    from sched.script import T

    @T.prim_func
    def calls(A: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):
        for i in range(64):
            with T.block("C"):
                vi = T.axis.remap("S", [i])
                C[vi] = T.call_extern("float32", "sched_test_missing_fn", A[vi])

    sch = sched.Schedule(calls)
    outer, inner = sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, 32])
    sch.bind(outer, "blockIdx.x")
    sch.bind(inner, "threadIdx.x")
    with pytest.raises(BuildError, match="the offending lines call 'sched_test_missing_fn', "
                                         "which the function as written calls") as caught:
        sched.build(sch, target=target, arch="sm_80" if target == "cuda" else None)
    assert "the step that last changed them" not in str(caught.value)

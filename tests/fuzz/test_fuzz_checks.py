"""The fuzzer's checks catch what they are for: a wrong schedule made by hand (bypassing the
legality checks) is reported, a right one is not."""

from __future__ import annotations

import dataclasses

import pytest

import sched
from sched.ir import IRMutator
from tests.fuzz.check import Finding, check_c, check_interpreted, oracle
from tests.fuzz.programs import Program

SCAN = sched.parse("""
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = T.if_then_else(vi > 0, B[vi - 1], T.float32(0)) + A[vi]
""")


class _MarkLoops(IRMutator):
    def __init__(self, kind: str, tag: str | None = None) -> None:
        self.kind, self.tag = kind, tag

    def visit_For(self, loop):
        loop = self.visit_children(loop)
        return dataclasses.replace(loop, kind=self.kind, thread_tag=self.tag)


def marked(func, kind: str, tag: str | None = None):
    return dataclasses.replace(func, body=_MarkLoops(kind, tag).visit(func.body))


def test_a_racy_parallel_scan_is_a_finding():
    program = Program(SCAN, {})
    expected = oracle(program)
    check_interpreted(program, SCAN, expected, [])          # the original is its own result
    for wrong in (marked(SCAN, "parallel"), marked(SCAN, "thread_binding", "threadIdx.x")):
        with pytest.raises(Finding, match="interpreted in reverse order: buffer B differs"):
            check_interpreted(program, wrong, expected, ["# loop made concurrent by hand"])


def test_a_wrong_c_result_is_a_finding():
    program = Program(SCAN, {})
    expected = oracle(program)
    check_c(program, SCAN, expected, [])
    wrong = sched.parse(SCAN.script().replace("+ A[vi]", "+ A[vi] * T.float32(2)"))
    with pytest.raises(Finding, match="built for C: buffer B differs"):
        check_c(program, wrong, expected, [])


def test_a_racy_gpu_schedule_is_a_finding_on_the_c_target():
    program = Program(SCAN, {})
    expected = oracle(program)
    wrong = marked(SCAN, "thread_binding", "threadIdx.x")
    with pytest.raises(Finding, match="SCHED_THREAD_ORDER=reverse") as found:
        check_c(program, wrong, expected, ["# loop bound to threadIdx.x by hand"])
    # the reproducer runs what the check ran: the threads reversed, the races unchecked (a
    # finding whose reproducer built with the defaults was refused at build, not replayed)
    assert 'os.environ["SCHED_THREAD_ORDER"] = "reverse"\n' \
        'sched.build(sch.func, target="c", check_races=False)(*got)' in str(found.value)


def test_values_are_compared_exactly_below_two_to_the_24():
    import numpy as np

    from tests.fuzz.check import same_values

    small = np.array([1.0, -3.0, 7.0], np.float32)
    assert same_values(small, small.copy())
    assert not same_values(small, small + np.float32(1))
    # past 2^24, float32 rounds: an FMA's last bits may differ, a wrong value may not
    large = np.array([3.9546031e11, -1.7e10, 2.0], np.float32)
    assert same_values(large, large * np.float32(1 + 2e-7))
    assert not same_values(large, large * np.float32(1.01))
    assert not same_values(large, np.where(np.arange(3) == 2, np.float32(np.nan), large))

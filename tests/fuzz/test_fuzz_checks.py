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
    with pytest.raises(Finding, match="SCHED_THREAD_ORDER=reverse"):
        check_c(program, wrong, expected, ["# loop bound to threadIdx.x by hand"])

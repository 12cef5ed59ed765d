"""Legality answers on named cases, and the refusal message: the dependence with a concrete
pair of instances, the IR with the loop marked, and the alternatives."""

from __future__ import annotations

import dataclasses

import pytest

from sched import compute as te
from sched.errors import ScheduleError
from sched.ir import (
    Buffer,
    BufferStore,
    For,
    IntImm,
    IRMutator,
    Var,
)
from sched.polyhedral import check_order, check_parallel
from sched.polyhedral.legality import schedule_error
from tests.polyhedral.test_dependences import matmul, one_block_func


def prefix_sum():
    A = Buffer("A", (IntImm(10),))
    vi = Var("vi")
    return one_block_func("S", (A,), BufferStore(A, A[vi - 1] + A[vi], (vi,)))


def reversed_loop(func):
    """Loop i runs backwards: the block binding becomes start + extent - 1 - (i - start)."""
    class Reverse(IRMutator):
        def visit_BlockRealize(self, realize):
            if realize.block.name == "root":
                return self.visit_children(realize)
            (value,) = realize.iter_values
            return dataclasses.replace(realize, iter_values=(IntImm(10) - value,))
    return Reverse().visit(func)


def test_prefix_sum_loop_is_not_parallel():
    # each iteration reads what the previous one wrote
    violation = check_parallel(prefix_sum(), "S", "i")
    assert violation is not None
    assert "loop 'i' carries a flow dependence of block S" in violation.reason
    assert "S[vi=2] reads A[1] written by S[vi=1]" in str(violation)


def test_reversing_the_prefix_sum_is_refused():
    violation = check_order(prefix_sum(), reversed_loop(prefix_sum()))
    assert violation is not None and "reads A[" in str(violation)


def test_elementwise_loop_is_parallel():
    A = te.placeholder((8,), name="A")
    func = te.create_prim_func([A, te.compute((8,), lambda i: A[i] + 1.0, name="B")])
    assert check_parallel(func, "B", "i") is None


def test_matmul_reduce_loop_may_move_but_not_run_in_parallel():
    func = matmul()

    class KOutermost(IRMutator):
        def visit_For(self, loop: For):
            if loop.loop_var.name != "i":
                return loop
            j_loop = loop.body
            k_loop = j_loop.body
            return dataclasses.replace(k_loop, body=dataclasses.replace(
                loop, body=dataclasses.replace(j_loop, body=k_loop.body)))
    reordered = KOutermost().visit(func)
    assert [lp.loop_var.name for lp in _loops(reordered)] == ["k", "i", "j"]
    assert check_order(func, reordered) is None
    assert check_parallel(func, "C", "i") is None
    violation = check_parallel(func, "C", "k")
    assert "loop 'k' carries a reduction of block C" in violation.reason


def _loops(func):
    from sched.ir import collect
    return collect(func.body, For)


def test_refusal_message_has_dependence_marked_ir_and_alternatives():
    func = matmul()
    error = schedule_error("parallel", check_parallel(func, "C", "k"), func, loop="k",
                           alternatives=("sch.rfactor(k, factor_axis=0)",))
    assert isinstance(error, ScheduleError)
    message = str(error)
    assert message.startswith("parallel: loop 'k' carries a reduction of block C")
    assert "violated dependence: flow dependence on 'C': C[v_i=" in message
    assert "for i, j, k in T.grid(6, 4, 5):  # <-- loop 'k'" in message
    assert "legal alternatives:\n    sch.rfactor(k, factor_axis=0)" in message
    cheap = schedule_error("parallel", check_parallel(func, "C", "k"), func, render=False)
    assert str(cheap) == "parallel: loop 'k' carries a reduction of block C"


def test_unknown_block_or_loop_is_a_clear_error():
    with pytest.raises(ValueError, match="no block named 'D'"):
        check_parallel(matmul(), "D", "i")
    with pytest.raises(ValueError, match="not under a loop named 'q'"):
        check_parallel(matmul(), "C", "q")

"""rfactor keeps the meaning of a reduction only when its reduce loops run each point of the
reduce domain once, the init's first (issue 9, items 5 and 19); decompose_reduction is held to
the same by its dependence check."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.ir.parser import parse
from tests.schedule.conftest import run_c

RNG = np.random.default_rng(5)

REDUCTION = '''
@T.prim_func
def main(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16,), "float32")):
    for i, k in T.grid(16, 16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            vk = T.axis.reduce(16, BINDING)
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk]
'''


def _rfactor(binding: str):
    sch = sched.Schedule(parse(REDUCTION.replace("BINDING", binding)))
    _, k = sch.get_loops(sch.get_block("C"))
    _, ki = sch.split(k, [None, 4])
    sch.rfactor(ki, 0)
    return sch


@pytest.mark.parametrize("binding, message", [
    ("(k * k) // 2", "not affine in its loops"),
    ("k // 2", "more than once"),
    ("15 - k", "do not start each reduction at the first point of the reduce domain"),
])
def test_rfactor_refuses_a_reduce_binding_that_is_not_one_to_one_from_the_start(binding,
                                                                                message):
    with pytest.raises(ScheduleError, match=message):
        _rfactor(binding)


@pytest.mark.parametrize("binding", ["k", "(k * 5) % 16"])
def test_rfactor_of_a_bijective_binding_starting_at_the_init_is_kept(binding):
    sch = _rfactor(binding)
    a = RNG.standard_normal((16, 16)).astype("float32")
    _, c = run_c(sch.func, a, np.zeros(16, "float32"))
    np.testing.assert_allclose(c, a.sum(axis=1), rtol=1e-5)


def test_decompose_reduction_refuses_a_reversed_binding():
    sch = sched.Schedule(parse(REDUCTION.replace("BINDING", "15 - k")))
    i, _ = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError):
        sch.decompose_reduction(sch.get_block("C"), i)


@pytest.mark.parametrize("binding, message", [
    ("k // 2", "more than once"),
    ("(k * k) // 2", "not affine in its loops"),
])
def test_decompose_reduction_refuses_an_init_that_runs_more_than_once(binding, message):
    sch = sched.Schedule(parse(REDUCTION.replace("BINDING", binding)))
    i, _ = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match=message):
        sch.decompose_reduction(sch.get_block("C"), i)


def test_decompose_reduction_of_a_plain_binding_is_kept():
    sch = sched.Schedule(parse(REDUCTION.replace("BINDING", "k")))
    i, k = sch.get_loops(sch.get_block("C"))
    init = sch.decompose_reduction(sch.get_block("C"), i)
    assert init.name == "C_init"
    a = RNG.standard_normal((16, 16)).astype("float32")
    _, c = run_c(sch.func, a, np.full(16, 3, "float32"))
    np.testing.assert_allclose(c, a.sum(axis=1), rtol=1e-5)


NESTED = '''
@T.prim_func
def main(A: T.Buffer((8, 16), "float32"), C: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("outer"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi, 0:16])
            T.writes(C[vi])
            for k in range(16):
                with T.block("C"):
                    vj = T.axis.spatial(8, vi)
                    vk = T.axis.reduce(16, BINDING)
                    T.reads(A[vj, vk])
                    T.writes(C[vj])
                    with T.init():
                        C[vj] = T.float32(0)
                    C[vj] = C[vj] + A[vj, vk]
'''


@pytest.mark.parametrize("step", ["decompose_reduction", "rfactor"])
def test_a_reduction_nested_in_a_block_binds_the_outer_variables_as_parameters(step):
    sch = sched.Schedule(parse(NESTED.replace("BINDING", "k")))
    (k,) = sch.get_loops(sch.get_block("C"))     # the loops inside "outer", as in TVM
    if step == "rfactor":
        sch.rfactor(sch.split(k, [None, 4])[1], 0)
    else:
        sch.decompose_reduction(sch.get_block("C"), k)
    a = RNG.standard_normal((8, 16)).astype("float32")
    _, c = run_c(sch.func, a, np.full(8, 5, "float32"))
    np.testing.assert_allclose(c, a.sum(axis=1), rtol=1e-5)


def test_a_nested_reversed_reduction_is_refused():
    sch = sched.Schedule(parse(NESTED.replace("BINDING", "15 - k")))
    (k,) = sch.get_loops(sch.get_block("C"))     # the loops inside "outer", as in TVM
    with pytest.raises(ScheduleError, match="do not start each reduction at the first point"):
        sch.decompose_reduction(sch.get_block("C"), k)

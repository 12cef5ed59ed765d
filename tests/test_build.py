"""sched.build: targets."""

from __future__ import annotations

import pytest

import sched
from tests.lower.block_ir import add_2d


def test_cuda_build_of_an_unbound_function_no_default_fits_says_to_bind_its_loops():
    from sched import compute as te

    X = te.placeholder((8, 48), name="X")
    softmax = te.create_prim_func([X, te.ops.softmax(X)], name="softmax")
    # row reductions have no GPU rule yet (they need cross-thread reductions)
    with pytest.raises(sched.ScheduleError, match=r"no default cuda schedule applies to "
                                                  r"'softmax'.*bind its loops"):
        sched.build(softmax, target="cuda", arch="sm_90")


def test_tvm_target_string_names_the_arch():
    from sched.targets import parse_target

    assert parse_target("cuda -arch=sm_80", None) == ("cuda", "sm_80")
    with pytest.raises(ValueError, match="unknown target option '-mcpu=x'"):
        parse_target("cuda -mcpu=x", None)


def test_unknown_target_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown target 'llvm': expected one of 'c', 'cuda'"):
        sched.build(add_2d(), target="llvm")


def test_build_takes_a_prim_func():
    with pytest.raises(TypeError, match="expected a PrimFunc"):
        sched.build("not a function")

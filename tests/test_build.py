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


def test_cuda_emu_is_a_build_target_and_not_a_tuning_one():
    from sched.targets import BUILD_TARGETS, parse_target

    assert parse_target("cuda-emu", None, BUILD_TARGETS) == ("cuda-emu", None)
    with pytest.raises(ValueError, match=r"unknown target 'cuda-emu': expected one of 'c', "
                                         r"'cuda'$"):
        parse_target("cuda-emu", None)
    with pytest.raises(ValueError, match=r"unknown target 'cuda-emu'"):
        sched.tune(add_2d(), target="cuda-emu", trials=1)


def test_sanitize_and_thread_order_are_refused_where_they_do_not_apply():
    with pytest.raises(ValueError, match=r"sanitize applies to the \"cuda-emu\" target only, "
                                         r"not 'c'"):
        sched.build(add_2d(), target="c", sanitize="thread")
    with pytest.raises(ValueError, match=r"thread_order applies to the C target only \(the "
                                         r"emulator runs a block's threads at once"):
        sched.build(add_2d(), target="cuda-emu", thread_order="reverse")


def test_cuda_emu_build_of_an_unbound_function_gets_the_default_schedule():
    import numpy as np

    with pytest.warns(UserWarning, match="applied the default schedule"):
        kernel = sched.build(add_2d(), target="cuda-emu")
    assert "threadIdx" in kernel.source and "EmulatedKernel" in repr(kernel)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((16, 8)).astype(np.float32) for _ in range(2))
    c = np.zeros((16, 8), np.float32)
    kernel(a, b, c)
    np.testing.assert_array_equal(c, a + b)

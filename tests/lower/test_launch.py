"""LaunchConfig: grid extents evaluated from symbolic dims at each call."""

from __future__ import annotations

import pytest

from sched.ir import Cast, IntImm, Var
from sched.ir.nodes import BinaryOp
from sched.lower.launch import LaunchConfig, evaluate_int

n, m = Var("n"), Var("m")


def test_evaluate_int_uses_floor_division_and_modulo():
    assert evaluate_int((n + 127) // 128, {n: 1000}) == 8
    assert evaluate_int(n // 4, {n: -7}) == -2
    assert evaluate_int(n % 4, {n: -7}) == 1
    assert evaluate_int(BinaryOp("min", n * 2, m - 1), {n: 5, m: 4}) == 3
    assert evaluate_int(BinaryOp("max", n, m), {n: 5, m: 9}) == 9
    assert evaluate_int(Cast("int64", n), {n: 3}) == 3


def test_evaluate_int_refuses_unbound_variables_and_other_nodes():
    with pytest.raises(ValueError, match=r"variable 'm' has no value \(bound: n\)"):
        evaluate_int(n + m, {n: 1})
    with pytest.raises(ValueError, match="division by zero"):
        evaluate_int(n // m, {n: 1, m: 0})
    with pytest.raises(TypeError, match="cannot evaluate BinaryOp"):
        evaluate_int(n < m, {n: 1, m: 2})


def test_grid_from_symbolic_dims():
    launch = LaunchConfig(grid=((n + 31) // 32, (m + 31) // 32, 1), block=(32, 32, 1))
    assert launch.grid == ((n + 31) // 32, (m + 31) // 32, IntImm(1))
    assert launch.grid_dims({n: 100, m: 64}) == (4, 2, 1)
    assert launch.grid_dims({n: 0, m: 64}) == (0, 2, 1)
    assert launch.threads_per_block == 1024


def test_grid_beyond_cuda_limits_says_what_to_bind():
    launch = LaunchConfig(grid=(1, n, 1), block=(128, 1, 1))
    with pytest.raises(ValueError, match=r"grid extent y = n is 70000 \(n = 70000\): it must "
                                         r"lie in \[0, 65535\]; bind .* to blockIdx.x"):
        launch.grid_dims({n: 70000})


def test_block_of_more_than_1024_threads_is_refused():
    with pytest.raises(ValueError, match=r"block \(64, 32, 1\) has 2048 threads, more than "
                                         r"CUDA's 1024"):
        LaunchConfig(grid=(1, 1, 1), block=(64, 32, 1))


def test_bad_extents_are_refused():
    with pytest.raises(ValueError, match="block extents must be positive ints"):
        LaunchConfig(grid=(1, 1, 1), block=(0, 1, 1))
    with pytest.raises(TypeError, match="grid extent must be an IR expression or an int"):
        LaunchConfig(grid=(1.5, 1, 1), block=(1, 1, 1))
    with pytest.raises(ValueError, match="dynamic_shared_bytes must be an int >= 0"):
        LaunchConfig(grid=(1, 1, 1), block=(1, 1, 1), dynamic_shared_bytes=-1)

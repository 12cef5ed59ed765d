"""LaunchConfig: grid extents evaluated from symbolic dims at each call."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.ir import Cast, IntImm, Var
from sched.ir.nodes import BinaryOp, FloatImm, Not, Select
from sched.lower.launch import LaunchConfig, evaluate_int
from tests.conftest import assert_close

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
    with pytest.raises(TypeError, match="cannot evaluate FloatImm"):
        evaluate_int(FloatImm(1.5, "float32"), {})


def test_evaluate_int_takes_piecewise_sizes():
    """A padded layout over a symbolic dim sizes a dim `T.if_then_else(n >= 4, 4, n)`, and
    compute_at's last tile is piecewise: a grid over them was a TypeError at every call on
    cuda-emu and cuda (audit helper-50)."""
    piecewise = Select(n >= 4, IntImm(4), n)
    assert [evaluate_int(piecewise, {n: v}) for v in (2, 4, 9)] == [2, 4, 4]
    assert evaluate_int(Select(Not(n == m), n, m * 10), {n: 3, m: 3}) == 30
    assert evaluate_int(Cast("int32", (n < m) & (m <= 5)), {n: 1, m: 5}) == 1
    assert evaluate_int(Cast("int32", (n < m) | (m > 5)), {n: 7, m: 5}) == 0


def test_a_padded_symbolic_layout_bound_to_blocks_runs_on_cuda_emu():
    nn, mm = te.var("n"), te.var("m")
    A = te.placeholder((nn, mm), name="A")
    B = te.compute((nn, mm), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((nn, mm), lambda i, j: B[i, j] + 1.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (i // 4, j, i % 4),
                         pad_value=0.0)
    for name in ("B_pad", "B", "C"):
        loops = sch.get_loops(sch.get_block(name))
        outer, inner = sch.split(loops[-1], [None, 32])
        sch.bind(loops[0], "blockIdx.x")
        sch.bind(outer, "blockIdx.y")
        sch.bind(inner, "threadIdx.x")
    assert "T.min(4, n)" in sch.func.script().replace("T.int64(4)", "4")
    kernel = sched.build(sch.func, target="cuda-emu")
    for rows in (3, 10):
        a = np.random.default_rng(rows).standard_normal((rows, 3)).astype("float32")
        c = np.zeros_like(a)
        kernel(a, c)
        assert_close(c, a * 2 + 1)


def test_grid_from_symbolic_dims():
    launch = LaunchConfig(grid=((n + 31) // 32, (m + 31) // 32, 1), block=(32, 32, 1))
    assert launch.grid == ((n + 31) // 32, (m + 31) // 32, IntImm(1))
    assert launch.grid_dims({n: 100, m: 64}) == (4, 2, 1)
    assert launch.grid_dims({n: 0, m: 64}) == (0, 2, 1)
    assert launch.threads_per_block == 1024


def test_a_negative_grid_extent_is_an_empty_launch():
    # range(2, n) bound to blockIdx.x at n = 1: an empty loop, refused on cuda-emu (helper-158)
    f = sched.parse("""
@T.prim_func
def f(a: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    for i in T.thread_binding(2, n, thread="blockIdx.x"):
        with T.block("A"):
            vi = T.axis.spatial(n, i)
            A[vi] = T.float32(1)
""")
    assert LaunchConfig(grid=(n - 2, 1, 1), block=(1, 1, 1)).grid_dims({n: 1}) == (0, 1, 1)
    for target in ("c", "cuda-emu"):
        a = np.zeros(1, np.float32)
        sched.build(f, target=target)(a)
        np.testing.assert_array_equal(a, [0])


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

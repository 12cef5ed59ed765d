"""Affine bounds of non-affine bindings (polyhedral/binding_ranges.py): a fused tile's
`v0 = i_0 * 4 + f // k` stays within its tile's rows, so fusing a cooperative copy of a
symbolic-width tile keeps its parallel or blockIdx loop legal (audit helper-178), while a
binding that reaches the next tile is still refused."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.ir.nodes import IntImm, Var
from sched.polyhedral.binding_ranges import binding_range
from sched.polyhedral.statements import Loop
from tests.conftest import assert_close


def _loop(var, extent):
    return Loop(var, IntImm(0, "int32"), extent, 0, "serial", None)


def _values(found, **env):
    return None if found is None else tuple(eval(text, {}, env) for text in found)


def test_ranges_of_divisions_by_symbolic_dims():
    i, f, k, m = Var("i"), Var("f"), Var("k"), Var("m")
    loops = [_loop(i, m), _loop(f, k * 4)]
    true = IntImm(1, "bool")
    at = {"i": 3, "k": 5, "m": 9}
    assert _values(binding_range(i * 4 + f // k, loops, true, (k, m)), **at) == (12, 15)
    assert _values(binding_range(f % k, loops, true, (k, m)), **at) == (0, 4)
    assert _values(binding_range(f // m, loops, true, (k, m)), **at) == (0, 19)
    # a divisor that is not a symbolic dim; a product of loops
    assert binding_range(f // i, loops, true, (k, m)) is None
    assert binding_range(i * f, loops, true, (k, m)) is None
    # below a bound the predicate gives: the split of a fused loop
    f0, f1 = Var("f0"), Var("f1")
    split = [_loop(f0, (k * 4 + 3) // 4), _loop(f1, IntImm(4, "int32"))]
    x = f0 * 4 + f1
    floor = math.floor      # isl's floor((a) / b) in the texts
    assert _values(binding_range(x // k, split, true, (k,)), k=5, floor=floor) == (0, 19)
    assert _values(binding_range(x // k, split, x < k * 4, (k,)), k=5) == (0, 3)
    exact = [_loop(f0, k), _loop(f1, IntImm(4, "int32"))]
    assert _values(binding_range(x // k, exact, true, (k,)), k=5) == (0, 3)
    # a dividend that may be negative has no bound from it
    assert binding_range((f1 - 2) // k, split, (f1 - 2) < k * 4, (k,)) is None


def _cooperative_copy(gpu: bool):
    """A matmul's (4 x k) row tile of A copied under its row-tile loop, the copy's loops
    fused (k symbolic): TVM's cooperative fetch on dynamic shapes."""
    k = te.var("k")
    A = te.placeholder((te.var("m"), k), "float32", name="A")
    B = te.placeholder((k, 7), "float32", name="B")
    r = te.reduce_axis((0, k), name="r")
    C = te.compute((A.shape[0], 7), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    sch = sched.Schedule(te.create_prim_func([A, B, C]))
    block = sch.get_block("C")
    i, j, _ = sch.get_loops(block)
    io, ii = sch.split(i, [None, 4])
    if gpu:
        sch.bind(io, "blockIdx.x")
        sch.bind(ii, "threadIdx.x")
    else:
        sch.parallel(io)
    cache = sch.cache_read(block, 0, "shared" if gpu else "global")
    sch.compute_at(cache, io)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sched.errors.ConservativeAnalysisWarning)
        fused = sch.fuse(*sch.get_loops(cache)[1:])
        if gpu:
            sch.bind(sch.split(fused, [None, 4])[1], "threadIdx.x")
    return sch


@pytest.mark.parametrize("gpu", [False, True])
def test_a_fused_copy_of_a_symbolic_tile_keeps_its_concurrent_loop(gpu):
    # (on the GPU a shared tile of symbolic size does not build yet: the C target runs it)
    sch = _cooperative_copy(gpu)
    assert "// k" in sch.func.script()
    rng = np.random.default_rng(0)
    kernel = sched.build(sch.func, target="c")
    for m, k in ((9, 5), (1, 1), (8, 3)):
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, 7)).astype(np.float32)
        c = np.zeros((m, 7), np.float32)
        kernel(a, b, c)
        assert_close(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def _tiled_rows(rows: int = 4, guarded: bool = True, accumulate: bool = False,
                guard: str = "i_0 * 4 + f // k < m"):
    """B over tiles of 4 of its m rows, each tile's `rows` rows as one loop over `rows * k`
    (a fused copy's binding `i_0 * 4 + f // k`), with or without the predicate `guard` (a
    split writes the default); `accumulate`: B += A (two tiles updating one row race), else
    B = A + 1."""
    where = f"                T.where({guard})\n" if guarded else ""
    value = "B[v0, v1] + A[v0, v1]" if accumulate else "A[v0, v1] + T.float32(1)"
    return sched.parse(f"""
@T.prim_func
def f(a: T.handle, b: T.handle):
    m = T.int32()
    k = T.int32()
    A = T.match_buffer(a, (m, k), "float32")
    B = T.match_buffer(b, (m, k), "float32")
    for i_0 in range((m + 3) // 4):
        for f in range({rows} * k):
            with T.block("B"):
                v0 = T.axis.spatial(m, i_0 * 4 + f // k)
                v1 = T.axis.spatial(k, f % k)
{where}                B[v0, v1] = {value}
""")


def test_rows_within_the_tile_run_in_parallel_and_rows_past_it_are_refused():
    sch = sched.Schedule(_tiled_rows(4, accumulate=True))
    sch.parallel(sch.get_loops(sch.get_block("B"))[0])
    kernel = sched.build(sch.func, target="c")
    rng = np.random.default_rng(1)
    for m, k in ((9, 5), (13, 7)):
        a, b = (rng.standard_normal((m, k)).astype(np.float32) for _ in range(2))
        expected = a + b
        kernel(a, b)
        assert_close(b, expected)
    # five rows per tile: row 4 of one tile is row 0 of the next, updated by both
    sch = sched.Schedule(_tiled_rows(5, accumulate=True))
    with pytest.raises(sched.ScheduleError, match="loop 'i_0' carries a flow dependence"):
        sch.parallel(sch.get_loops(sch.get_block("B"))[0])


def test_a_binding_past_its_domain_is_unproven_and_its_predicate_proves_it():
    """Without its T.where the last tile binds v0 past m: the model took v0 inside [0, m)
    and proved B[v0, v1] in bounds, and the kernel wrote 15 floats past B (audit
    helper-179). It is unproven now: strict refuses it, a build warns; with the predicate
    (what split writes) the binding's `value < m` proves it."""
    from sched.polyhedral.in_bounds import OutOfBoundsError

    with pytest.raises(OutOfBoundsError, match="binds v0: a binding the model cannot read"):
        sched.build(_tiled_rows(guarded=False), target="c", check_bounds="strict")
    with pytest.warns(UserWarning, match="binds v0, a binding that is not affine"):
        sched.build(_tiled_rows(guarded=False), target="c")
    kernel = sched.build(_tiled_rows(guarded=True), target="c", check_bounds="strict")
    a = np.random.default_rng(2).standard_normal((9, 5)).astype(np.float32)
    storage = np.full(45 + 16, -1, np.float32)
    kernel(a, storage[:45].reshape(9, 5))
    assert_close(storage[:45].reshape(9, 5), a + 1)
    assert (storage[45:] == -1).all()


@pytest.mark.parametrize("guard", ["m > i_0 * 4 + f // k", "i_0 * 4 + f // k <= m - 1",
                                   "m - 1 >= i_0 * 4 + f // k"])
def test_other_spellings_of_the_guard_prove_the_binding(guard):
    kernel = sched.build(_tiled_rows(guard=guard), target="c", check_bounds="strict")
    a = np.random.default_rng(3).standard_normal((9, 5)).astype(np.float32)
    storage = np.full(45 + 16, -1, np.float32)
    kernel(a, storage[:45].reshape(9, 5))
    assert_close(storage[:45].reshape(9, 5), a + 1)
    assert (storage[45:] == -1).all()


def test_a_split_of_the_fused_loop_keeps_the_parallel_tile_loop():
    # the split's outer extent was `4 * k // 4`, whose bound has no factor k: f // k seemed
    # to reach 4k - 1 and the split under a parallel i_0 was refused (audit helper-185)
    sch = sched.Schedule(_tiled_rows(4, accumulate=True))
    i_0, f = sch.get_loops(sch.get_block("B"))
    sch.parallel(i_0)
    sch.split(f, [None, 4])
    assert "for f_0, f_1 in T.grid(k, 4)" in sch.func.script()
    kernel = sched.build(sch.func, target="c")
    rng = np.random.default_rng(4)
    for m, k in ((9, 5), (4, 1)):
        a, b = (rng.standard_normal((m, k)).astype(np.float32) for _ in range(2))
        expected = a + b
        kernel(a, b)
        assert_close(b, expected)


def test_an_int8_guard_that_wraps_proves_nothing():
    # `i * T.int8(2) < T.int8(100)` holds at i = 64..99, where the int8 product wraps below
    # 0, while the index is computed wide: B[128..198] were written under strict (audit
    # helper-185); the int8 binding and the int8 guard are unproven now
    from sched.polyhedral.in_bounds import OutOfBoundsError, bounds_report

    func = sched.parse("""
@T.prim_func
def f(A: T.Buffer((100,), "float32"), B: T.Buffer((100,), "float32")):
    for i in range(T.int8(100)):
        with T.block("B"):
            v0 = T.axis.spatial(100, i * T.int8(2))
            T.where(i * T.int8(2) < T.int8(100))
            B[v0] = A[v0] + T.float32(1)
""")
    assert bounds_report(func).unproven
    with pytest.raises(OutOfBoundsError, match="binds v0"):
        sched.build(func, target="c", check_bounds="strict")
    i = Var("i", "int8")
    loops = [_loop(i, IntImm(100, "int8"))]
    assert binding_range(i * IntImm(2, "int8") + i // IntImm(3, "int8"), loops,
                         IntImm(1, "bool"), ()) is None

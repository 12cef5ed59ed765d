"""Reduction primitives: decompose_reduction and rfactor: the IR after each, trace round-trips,
numbers on the C target, and every refusal."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.schedule import Trace
from sched.script import T
from tests.conftest import assert_close
from tests.schedule.conftest import run_c


def row_sum(rows=4, cols=6, reducer="sum"):
    A = te.placeholder((rows, cols), name="A")
    k = te.reduce_axis((0, cols), name="k")
    combine = getattr(te, reducer)
    return te.create_prim_func([A, te.compute((rows,), lambda i: combine(A[i, k], axis=k),
                                              name="B")])


def matmul(m=37, n=23, k=19):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    return te.create_prim_func([A, B, te.ops.matmul(A, B)])


def matmul_inputs(rng, m=37, n=23, k=19):
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    return a, b, np.full((m, n), np.nan, np.float32)


def assert_equal_ir(func, expected):
    """Structural equality with an expected script (whose function name does not matter)."""
    assert func == dataclasses.replace(expected, name=func.name), func.script()


def assert_replays(sch, func):
    assert sch.trace.apply(func).func == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func


@T.prim_func
def row_sum_init_hoisted_out_of_i(A: T.Buffer((4, 6), "float32"),
                                  B: T.Buffer((4,), "float32")):
    with T.block("root"):
        for i_init in range(4):
            with T.block("B_init"):
                v_i = T.axis.remap("S", [i_init])
                T.reads()
                T.writes(B[v_i])
                B[v_i] = T.float32(0.0)
        for i, k in T.grid(4, 6):
            with T.block("B_update"):
                v_i, v_k = T.axis.remap("SR", [i, k])
                T.reads(A[v_i, v_k], B[v_i])
                T.writes(B[v_i])
                B[v_i] = B[v_i] + A[v_i, v_k]


@T.prim_func
def row_sum_init_inside_i(A: T.Buffer((4, 6), "float32"), B: T.Buffer((4,), "float32")):
    with T.block("root"):
        for i in range(4):
            with T.block("B_init"):
                v_i = T.axis.remap("S", [i])
                T.reads()
                T.writes(B[v_i])
                B[v_i] = T.float32(0.0)
            for k in range(6):
                with T.block("B_update"):
                    v_i, v_k = T.axis.remap("SR", [i, k])
                    T.reads(A[v_i, v_k], B[v_i])
                    T.writes(B[v_i])
                    B[v_i] = B[v_i] + A[v_i, v_k]


@T.prim_func
def row_sum_rfactor_inner(A: T.Buffer((4, 6), "float32"), B: T.Buffer((4,), "float32")):
    with T.block("root"):
        B_rf = T.alloc_buffer((2, 4), "float32")
        for i, k_0, k_1 in T.grid(4, 3, 2):
            with T.block("B_rf"):
                v_k_1, v_i, v_k_0 = T.axis.remap("SSR", [k_1, i, k_0])
                T.reads(A[v_i, v_k_0 * 2 + v_k_1], B_rf[v_k_1, v_i])
                T.writes(B_rf[v_k_1, v_i])
                with T.init():      # a float sum's identity: -0.0 (TVM's rfactor: 0.0)
                    B_rf[v_k_1, v_i] = T.float32(-0.0)
                B_rf[v_k_1, v_i] = B_rf[v_k_1, v_i] + A[v_i, v_k_0 * 2 + v_k_1]
        for i_1, k_1_1 in T.grid(4, 2):
            with T.block("B"):
                v_k_1, v_i = T.axis.remap("RS", [k_1_1, i_1])
                T.reads(B_rf[v_k_1, v_i], B[v_i])
                T.writes(B[v_i])
                with T.init():
                    B[v_i] = T.float32(0.0)
                B[v_i] = B[v_i] + B_rf[v_k_1, v_i]


# --------------------------------------------------------------------------------------------
# decompose_reduction


def test_decompose_reduction_at_outer_loop_gives_init_loops_before_it():
    sch = sched.Schedule(row_sum())
    i, _ = sch.get_loops(sch.get_block("B"))
    init = sch.decompose_reduction(sch.get_block("B"), i)
    assert init.name == "B_init"
    assert_equal_ir(sch.func, row_sum_init_hoisted_out_of_i)
    assert_replays(sch, row_sum())


def test_decompose_reduction_at_reduce_loop_puts_init_inside_spatial_loops():
    sch = sched.Schedule(row_sum())
    _, k = sch.get_loops(sch.get_block("B"))
    sch.decompose_reduction(sch.get_block("B"), k)
    assert_equal_ir(sch.func, row_sum_init_inside_i)
    assert sched.parse(sch.func.script()) == sch.func
    assert_replays(sch, row_sum())


def test_decompose_reduction_of_split_matmul_matches_numpy(rng):
    sch = sched.Schedule(matmul())
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, factors=[None, 8])
    ko, ki = sch.split(k, factors=[None, 4])
    sch.reorder(io, j, ko, ii, ki)
    sch.decompose_reduction(block, ko)
    text = sch.func.script()
    # the init loops copy i_0 (outside ko, kept) and i_1, j (inside or at ko, copied)
    assert "for i_1_init in range(8):" in text and "T.init()" not in text
    assert "T.where(i_0 * 8 + i_1_init < 37)" in text
    a, b, c = matmul_inputs(rng)
    assert_close(run_c(sch.func, a, b, c)[2], a @ b)
    assert_replays(sch, matmul())


# decompose_reduction at a loop inside a reduce loop would run the init in every iteration of it
def test_decompose_reduction_refuses_loop_inside_a_reduce_loop():
    sch = sched.Schedule(matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.reorder(i, k, j)
    with pytest.raises(ScheduleError, match=r"decompose_reduction: loop 'j' is inside the reduce "
                       r"loop\(s\) k of block 'C'") as error:
        sch.decompose_reduction(sch.get_block("C"), j)
    assert "sch.decompose_reduction(C, k)" in str(error.value)
    assert len(sch.trace) == 3 + 0 + 1            # get_block, get_loops, reorder, get_block


# a loop that is not around the block has no place for the block's init
def test_decompose_reduction_refuses_loop_not_around_the_block():
    A = te.placeholder((4, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    C = te.compute((4,), lambda i: B[i] * 2.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    (i_c,) = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match="loop 'i_1' is not around block 'B'; the loops "
                       "around it are i, k"):
        sch.decompose_reduction(sch.get_block("B"), i_c)


# an elementwise block has no init to hoist
def test_decompose_reduction_refuses_a_block_that_is_not_a_reduction():
    A = te.placeholder((4,), name="A")
    sch = sched.Schedule(te.create_prim_func([A, te.compute((4,), lambda i: A[i] + 1.0,
                                                            name="B")]))
    (i,) = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match="block 'B' is not a reduction: it has no reduce"):
        sch.decompose_reduction(sch.get_block("B"), i)


# once decomposed, the update block has no init left
def test_decompose_reduction_refuses_a_block_decomposed_already():
    sch = sched.Schedule(row_sum())
    block = sch.get_block("B")
    _, k = sch.get_loops(block)
    sch.decompose_reduction(block, k)
    with pytest.raises(ScheduleError, match=r"block 'B_update' has no init \(T.init\) to "
                       r"decompose"):
        sch.decompose_reduction(block, k)


# as in TVM: the update is renamed <name>_update and the handle to the block follows it
def test_decompose_reduction_renames_the_update_and_the_handle_follows():
    sch = sched.Schedule(matmul())
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    copy = sch.copy()
    init = sch.decompose_reduction(block, k)
    assert (init.name, sched.schedule.state.block_names(sch.func)) == ("C_init",
                                                                        ["C_init", "C_update"])
    with pytest.raises(ScheduleError, match="no block named 'C'; the blocks are 'C_init', "
                       "'C_update'"):
        sch.get_block("C")
    assert [lp.name for lp in sch.get_loops(block)] == ["i", "j", "k"]
    sch.split(k, factors=[None, 4])               # the handle reaches the update's loops
    assert [lp.name for lp in sch.get_loops(sch.get_block("C_update"))] == \
        ["i", "j", "k_0", "k_1"]
    sch.unroll(sch.get_loops(block)[-1])
    # the copy made before the step still sees C (and its handle there is still C)
    assert [lp.name for lp in copy.get_loops(block)] == ["i", "j", "k"]
    assert_replays(sch, matmul())


# a taken <name>_update gets a fresh suffix, as the init does
def test_decompose_reduction_update_name_is_fresh():
    sch = sched.Schedule(row_sum())
    sch.get_block("B")
    func = sch.func
    taken = sched.parse(func.script().replace('T.block("B")', 'T.block("B_update")'))
    sch = sched.Schedule(taken)
    block = sch.get_block("B_update")
    sch.decompose_reduction(block, sch.get_loops(block)[0])
    assert sched.schedule.state.block_names(sch.func) == ["B_update_init", "B_update_update"]


@T.prim_func
def overwrite_then_reduce(A: T.Buffer((4, 4), "float32"), C: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("E"):
            vi = T.axis.spatial(4, i)
            C[vi] = T.float32(5)
        for k in range(4):
            with T.block("C"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    C[vi] = T.float32(0)
                C[vi] = C[vi] + A[vi, vk]


# hoisting C's init out of loop i would run it before E's write, which the init overwrites
def test_decompose_reduction_refuses_moving_the_init_before_a_write_it_overwrites():
    sch = sched.Schedule(overwrite_then_reduce)
    i, k = sch.get_loops(sch.get_block("C"))
    before = sch.func
    with pytest.raises(ScheduleError, match=r"(?s)the new order runs C before E.*output "
                       r"dependence on 'C': C \(init\)\[vi=0, vk=0\] writes C\[0\] written "
                       r"before by E\[vi=0\]"):
        sch.decompose_reduction(sch.get_block("C"), i)
    assert sch.func is before
    sch.decompose_reduction(sch.get_block("C"), k)     # inside i, after E: legal


def test_decompose_reduction_under_a_split_that_does_not_divide_takes_the_first_point(rng):
    """A split by 8 of a reduction over n leaves the last points of some elements out (the
    predicate), never their first: the init is hoisted with the predicate at the first
    point (audit, helper-38: refused as "the init may never run", an rfactor block too)."""
    n = te.var("n")
    A = te.placeholder((4, n), name="A")
    k = te.reduce_axis((0, n), name="k")
    func = te.create_prim_func([A, te.compute((4,), lambda i: te.sum(A[i, k], axis=k),
                                              name="B")])
    sch = sched.Schedule(func)
    _, kl = sch.get_loops(sch.get_block("B"))
    sch.split(kl, factors=[None, 8])
    rf = sch.rfactor(sch.get_loops(sch.get_block("B"))[2], 0)
    sch.decompose_reduction(rf, sch.get_loops(rf)[1])
    script = sch.func.script()
    assert "for k_1_init in range(8):" in script and "T.where(k_1_init < n)" in script
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func
    kernel = sched.build(sch.func, target="c")
    for size in (1, 3, 8, 9, 20):
        a = rng.standard_normal((4, size), np.float32)
        b = np.full(4, np.nan, np.float32)
        kernel(a, b)
        assert_close(b, a.sum(1))


def test_decompose_reduction_refuses_a_predicate_that_skips_the_first_point():
    """An element whose first reduce point does not run never ran its init: hoisting it
    would start the sum from 0 where the original accumulated onto what was there."""
    @T.prim_func
    def skip_first(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4,), "float32")):
        for i, k in T.grid(4, 8):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                T.where(k >= 2)
                with T.init():
                    B[vi] = T.float32(0.0)
                B[vi] = B[vi] + A[vi, vk]

    sch = sched.Schedule(skip_first)
    with pytest.raises(ScheduleError, match="skip the first point of the reduce domain"):
        sch.decompose_reduction(sch.get_block("B"), sch.get_loops(sch.get_block("B"))[1])


# --------------------------------------------------------------------------------------------
# rfactor


def test_rfactor_of_inner_split_loop_gives_partial_and_combining_blocks():
    sch = sched.Schedule(row_sum())
    _, k = sch.get_loops(sch.get_block("B"))
    _, ki = sch.split(k, factors=[None, 2])
    rf = sch.rfactor(ki, factor_axis=0)
    assert rf.name == "B_rf"
    assert_equal_ir(sch.func, row_sum_rfactor_inner)
    assert_replays(sch, row_sum())


def test_rfactor_then_parallel_sum_matches_numpy(rng):
    sch = sched.Schedule(row_sum(rows=9, cols=103))
    i, k = sch.get_loops(sch.get_block("B"))
    ko, _ = sch.split(k, factors=[None, 16])
    sch.rfactor(ko, factor_axis=1)
    sch.parallel(ko)          # a spatial loop of B_rf now
    assert "T.alloc_buffer((9, 7), \"float32\")" in sch.func.script()
    kernel = sched.build(sch.func, target="c")
    assert "#pragma omp parallel for" in kernel.source
    a, b = rng.standard_normal((9, 103), np.float32), np.full(9, np.nan, np.float32)
    kernel(a, b)
    assert_close(b, a.sum(axis=1), rtol=1e-4, atol=1e-4)
    assert_replays(sch, row_sum(rows=9, cols=103))


def test_rfactor_then_parallel_matmul_matches_numpy(rng):
    sch = sched.Schedule(matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    ko, ki = sch.split(k, factors=[None, 4])
    sch.reorder(ki, i, j, ko)
    sch.rfactor(ki, factor_axis=-1)
    sch.parallel(ki)
    assert "C_rf = T.alloc_buffer((37, 23, 4), \"float32\")" in sch.func.script()
    a, b, c = matmul_inputs(rng)
    assert_close(run_c(sch.func, a, b, c)[2], a @ b)
    assert_replays(sch, matmul())


def test_rfactor_of_a_split_larger_than_the_extent_guards_the_combination(rng):
    sch = sched.Schedule(row_sum(rows=4, cols=5))
    _, k = sch.get_loops(sch.get_block("B"))
    _, ki = sch.split(k, factors=[None, 8])
    sch.rfactor(ki, factor_axis=0)
    # partial results 5..7 are never written: the combining block must not read them
    assert "T.where(k_1_1 < 5)" in sch.func.script()
    a = rng.standard_normal((4, 5), np.float32)
    assert_close(run_c(sch.func, a, np.zeros(4, np.float32))[1], a.sum(axis=1))


@pytest.mark.parametrize("reducer, reference", [("max", np.max), ("min", np.min)])
def test_rfactor_starts_partial_results_from_the_identity(rng, reducer, reference):
    sch = sched.Schedule(row_sum(rows=3, cols=10, reducer=reducer))
    _, k = sch.get_loops(sch.get_block("B"))
    ko, _ = sch.split(k, factors=[None, 3])
    sch.rfactor(ko, factor_axis=0)
    a = rng.standard_normal((3, 10), np.float32)
    np.testing.assert_array_equal(run_c(sch.func, a, np.zeros(3, np.float32))[1],
                                  reference(a, axis=1))


# a spatial loop carries no reduction to factor
def test_rfactor_refuses_a_spatial_loop():
    sch = sched.Schedule(matmul())
    i, _, _ = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match="rfactor: loop 'i' is not a reduce loop of block "
                       "'C' .* its reduce loops are k") as error:
        sch.rfactor(i, factor_axis=0)
    assert "sch.rfactor(k, factor_axis=0)" in str(error.value)


# an elementwise block is not a reduction
def test_rfactor_refuses_a_block_that_is_not_a_reduction():
    A = te.placeholder((8,), name="A")
    sch = sched.Schedule(te.create_prim_func([A, te.compute((8,), lambda i: A[i] + 1.0,
                                                            name="B")]))
    (i,) = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match="block 'B' is not a reduction"):
        sch.rfactor(i, factor_axis=0)


@T.prim_func
def decaying_sum(A: T.Buffer((4, 6), "float32"), B: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 6):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] * T.float32(0.5) + A[vi, vk]


# B = B * 0.5 + A is not `B op value`: partial results could not be combined
def test_rfactor_refuses_a_non_associative_update():
    sch = sched.Schedule(decaying_sum)
    _, k = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=r"block 'B' is not an associative update .*its "
                       r"body is `B\[vi\] = B\[vi\] \* T.float32\(0.5\) \+ A\[vi, vk\]`"):
        sch.rfactor(k, factor_axis=0)


# the new dimension must go somewhere in the buffer
def test_rfactor_refuses_a_factor_axis_out_of_range():
    sch = sched.Schedule(row_sum())
    _, k = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=r"argument 2, 'factor_axis' to rfactor: expected an "
                       r"int in \[-2, 1\] .* got 2"):
        sch.rfactor(k, factor_axis=2)


# a fused loop of i and k binds a spatial and a reduce variable at once
def test_rfactor_refuses_a_loop_binding_both_kinds():
    sch = sched.Schedule(row_sum())
    i, k = sch.get_loops(sch.get_block("B"))
    fused = sch.fuse(i, k)
    with pytest.raises(ScheduleError, match="loop\\(s\\) i_k_fused bind both spatial and reduce "
                       "iteration variables"):
        sch.rfactor(fused, factor_axis=0)


@T.prim_func
def reduce_loop_shared_with_a_copy(A: T.Buffer((4, 6), "float32"),
                                   B: T.Buffer((4,), "float32"), D: T.Buffer((4, 2), "float32")):
    for i, k0 in T.grid(4, 2):
        for k1 in range(3):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                vk = T.axis.reduce(6, k0 * 3 + k1)
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]
        with T.block("D"):
            vi, vk0 = T.axis.remap("SS", [i, k0])
            D[vi, vk0] = A[vi, vk0]


# loop k0 also runs block D: the write-back of the partial results has no place inside it
def test_rfactor_refuses_a_reduce_loop_that_holds_another_block():
    sch = sched.Schedule(reduce_loop_shared_with_a_copy)
    _, _, k1 = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match="reduce loop\\(s\\) k0 of block 'B' also hold "
                       "block\\(s\\) D"):
        sch.rfactor(k1, factor_axis=0)


# loop i runs the reduction B and its consumer C: which block's partial results?
def test_rfactor_refuses_a_loop_over_several_blocks():
    A = te.placeholder((4, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    C = te.compute((4,), lambda i: B[i] * 2.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(sch.get_block("C"), i)
    with pytest.raises(ScheduleError, match=r"loop 'i' holds 2 blocks \(B, C\); rfactor needs "
                       r"a loop over one reduction block"):
        sch.rfactor(i, factor_axis=0)


def test_rfactor_orders_the_partial_blocks_variables_as_tvm(rng):
    """v_rf first, then the block's own in their order with a reduce variable replaced where
    it stood (audit helper-42: sched put the new reduce variables last, so the loops
    reverse_compute_at makes came in another order than a TVM script unpacks them)."""
    @T.prim_func
    def reduce_first(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8,), "float32")):
        for i, k in T.grid(8, 64):
            with T.block("B"):
                vk, vi = T.axis.remap("RS", [k, i])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]

    sch = sched.Schedule(reduce_first)
    i, k = sch.get_loops(sch.get_block("B"))
    sch.reorder(k, i)
    ko, ki = sch.split(k, [16, None])
    sch.reorder(ko, ki, i)
    rf = sch.rfactor(ko, 0)
    assert [(iv.var.name, iv.kind) for iv in sch.get(rf).iter_vars] == \
        [("v_k_0", "spatial"), ("v_k_1", "reduce"), ("vi", "spatial")]
    a = rng.standard_normal((8, 64), np.float32)
    assert_close(run_c(sch.func, a, np.zeros(8, np.float32))[1], a.sum(1))


def test_rfactor_of_a_symbolic_reduction_split_by_an_outer_factor_says_how():
    """[3, None] over a symbolic extent binds k_0 * ((m + 2) // 3) + k_1 (not affine):
    refused, saying that a constant inner factor keeps it affine; that one runs (audit
    helper-49: the refusal offered nothing)."""
    m = te.var("m")
    X = te.placeholder((4, m), name="X")
    k = te.reduce_axis((0, m), name="k")
    func = te.create_prim_func([X, te.compute((4,), lambda i: te.sum(X[i, k], axis=k),
                                              name="S")])
    sch = sched.Schedule(func)
    outer, _ = sch.split(sch.get_loops(sch.get_block("S"))[1], [3, None])
    with pytest.raises(ScheduleError, match=r"split by a constant inner factor "
                                            r"\(sch.split\(k, \[None, 4\]\)"):
        sch.rfactor(outer, 0)
    sch = sched.Schedule(func)
    outer, _ = sch.split(sch.get_loops(sch.get_block("S"))[1], [None, 4])
    sch.rfactor(outer, 0)
    kernel = sched.build(sch.func, target="c")
    for size in (1, 7, 12):
        x = np.random.default_rng(size).standard_normal((4, size)).astype(np.float32)
        out = np.zeros(4, np.float32)
        kernel(x, out)
        np.testing.assert_allclose(out, x.sum(1), rtol=1e-5, atol=1e-5)


NEGATIVE_ZERO_SUM = """
@T.prim_func
def main(A: T.Buffer((2, 8), "float32"), B: T.Buffer((2,), "float32")):
    for i, k in T.grid(2, 8):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(-0.0)
            B[vi] = B[vi] + A[vi, vk]
"""


@pytest.mark.parametrize("how", ["rfactor", "threads"])
def test_a_sum_of_negative_zeros_stays_negative_zero_when_factored(how):
    # audit (helper-87): rfactor's partial sums started from +0.0, and +0.0 + -0.0 is +0.0:
    # a sum of -0.0 terms from an init of -0.0 came out +0.0
    sch = sched.Schedule(sched.parse(NEGATIVE_ZERO_SUM))
    _, k = sch.get_loops(sch.get_block("B"))
    if how == "rfactor":
        _, k_inner = sch.split(k, [None, 4])
        sch.rfactor(k_inner, 0)
        runs = {"c": sched.build(sch, target="c")}
    else:
        sch.bind(sch.get_loops(sch.get_block("B"))[0], "blockIdx.x")
        sch.bind(k, "threadIdx.x")
        runs = {"c": sched.build(sch, target="c"), "cuda-emu": sched.build(sch, target="cuda-emu")}
    runs["interpret"] = lambda *args: sched.interpret(sch.func, *args)
    a = np.full((2, 8), -0.0, np.float32)
    for name, run in runs.items():
        b = np.ones(2, np.float32)
        run(a, b)
        assert (b == 0).all() and np.signbit(b).all(), (name, b)


def test_no_rfactor_advice_for_a_loop_rfactor_refuses():
    # audit (helper-87): parallel of a fused spatial-and-reduce loop, and of the loop of a
    # blockized block's reduce variable, advised sch.rfactor(loop), which rfactor refuses
    for make in ("fused", "blockized", "plain"):
        sch = sched.Schedule(row_sum(rows=4, cols=8))
        i, k = sch.get_loops(sch.get_block("B"))
        if make == "fused":
            loop = sch.fuse(i, k)
        elif make == "blockized":
            loop, k_inner = sch.split(k, [2, 4])
            sch.blockize(k_inner)
        else:
            loop = k
        with pytest.raises(ScheduleError) as error:
            sch.parallel(loop)
        assert ("sch.rfactor(" in str(error.value)) == (make == "plain"), make


@T.prim_func
def _sum_over_an_unindexed_spatial_axis(A: T.Buffer((4, 3, 5), "float32"),
                                        C: T.Buffer((4,), "float32")):
    for i, j, k in T.grid(4, 3, 5):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vj, vk]


def test_parallel_of_a_spatial_loop_that_no_output_index_holds_says_so():
    # the refusal blamed a binding "the analysis cannot follow exactly (not affine)"; every
    # binding is affine, vj just indexes nothing C is written at (audit helper-162)
    sch = sched.Schedule(_sum_over_an_unindexed_spatial_axis)
    _, j, _ = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match="update the same elements of the reduction of "
                                            "block C: the loop binds its variable vj, which "
                                            "no index of what it writes holds"):
        sch.parallel(j)


def test_rfactor_of_a_split_of_fused_symbolic_reduce_loops_names_the_fuse():
    # the refusal advised a constant inner factor, which the split had (audit helper-165)
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), "float32", name="A")
    k, ll = te.reduce_axis((0, n), name="k"), te.reduce_axis((0, m), name="l")
    C = te.compute((1,), lambda z: te.sum(A[k, ll], axis=[k, ll]), name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    _, k_loop, l_loop = sch.get_loops(sch.get_block("C"))
    _, inner = sch.split(sch.fuse(k_loop, l_loop), [None, 4])
    with pytest.raises(ScheduleError, match=r"A fuse of loops of symbolic extents \(n \* m "
                                            r"iterations\) is not affine however it is split"):
        sch.rfactor(inner, 0)

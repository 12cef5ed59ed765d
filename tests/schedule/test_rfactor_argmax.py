"""rfactor of two-buffer reducers (argmax, argmin over (index, value)), written as TVM prints
them: the numbers against numpy on the C target (with many ties, and NaNs where the reducer
lets a NaN win), the printed IR, the refusals that keep results (a first-wins reducer factored
over an inner reduce loop, a reducer over floats that a NaN takes out of order), and the
dependence analysis never reordering such a reduction."""

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.schedule.trace import Trace
from sched.script import T


@T.prim_func
def argmax_first(A: T.Buffer((8, 32), "float32"), idx: T.Buffer((8,), "int32"),
                 val: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 32):
        with T.block("argmax"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.reads(idx[vi], val[vi], A[vi, vk])
            T.writes(idx[vi], val[vi])
            with T.init():
                idx[vi] = -1
                val[vi] = T.min_value("float32")
            v_idx: T.int32 = T.Select(val[vi] >= A[vi, vk], idx[vi], vk)
            v_val: T.float32 = T.Select(val[vi] >= A[vi, vk], val[vi], A[vi, vk])
            idx[vi] = v_idx
            val[vi] = v_val


# argmax as numpy's: the first of equal values, and the first NaN (a NaN held is kept)
@T.prim_func
def argmax_first_nan(A: T.Buffer((8, 32), "float32"), idx: T.Buffer((8,), "int32"),
                     val: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 32):
        with T.block("argmax"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.reads(idx[vi], val[vi], A[vi, vk])
            T.writes(idx[vi], val[vi])
            with T.init():
                idx[vi] = -1
                val[vi] = T.min_value("float32")
            keep: T.bool = val[vi] >= A[vi, vk] or val[vi] != val[vi]
            v_idx: T.int32 = T.Select(keep, idx[vi], vk)
            v_val: T.float32 = T.Select(keep, val[vi], A[vi, vk])
            idx[vi] = v_idx
            val[vi] = v_val


# argmin, ties to the smaller index: commutative, any reduce loop may be factored (over
# integers: over floats a NaN takes it out of order)
@T.prim_func
def argmin_smallest(A: T.Buffer((8, 30), "int32"), idx: T.Buffer((8,), "int32"),
                    val: T.Buffer((8,), "int32")):
    for i, k in T.grid(8, 30):
        with T.block("arg"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                idx[vi] = -1
                val[vi] = T.max_value("int32")
            v_idx: T.int32 = T.Select(val[vi] < A[vi, vk] or (val[vi] == A[vi, vk] and
                                                              idx[vi] < vk), idx[vi], vk)
            v_val: T.int32 = T.Select(val[vi] < A[vi, vk], val[vi], A[vi, vk])
            idx[vi] = v_idx
            val[vi] = v_val


def _run(func, a):
    idx, val = np.zeros(a.shape[0], np.int32), np.zeros(a.shape[0], a.dtype)
    sched.build(func, target="c")(a, idx, val)
    return idx, val


def _tied(shape, seed=0, dtype=np.float32):
    """Values in 0..3: every row has many ties (numpy's argmax/argmin take the first)."""
    return np.random.default_rng(seed).integers(0, 4, shape).astype(dtype)


def _with_nan_after_a_maximum(a):
    """Rows 0-2 with a NaN after a larger value in an earlier chunk (`>=` alone would
    forget the 50 unscheduled and bring it back once partial results are combined); row 3
    with two NaNs."""
    a = a.copy()
    a[0, 3], a[0, 20] = 50, np.nan
    a[1, 0], a[1, 31] = 50, np.nan
    a[2, 9], a[2, 10] = np.nan, 50
    a[3, 12], a[3, 30] = np.nan, np.nan
    return a


def test_argmax_rfactor_of_the_outer_reduce_loop_matches_numpy_on_ties_and_nans():
    sch = sched.Schedule(argmax_first_nan)
    _, k = sch.get_loops(sch.get_block("argmax"))
    ko, _ = sch.split(k, factors=[4, 8])
    rf = sch.rfactor(ko, factor_axis=0)
    sch.parallel(sch.get_loops(rf)[0])
    text = sch.func.script()
    assert 'idx_rf = T.alloc_buffer((4, 8), "int32")' in text
    assert 'val_rf = T.alloc_buffer((4, 8), "float32")' in text
    assert 'T.block("argmax_rf")' in text
    assert ("T.if_then_else(val[vi] >= val_rf[v_k_0, vi] or val[vi] != val[vi], idx[vi], "
            "idx_rf[v_k_0, vi])") in text
    assert sched.parse(text) == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(argmax_first_nan).func == sch.func
    for seed in range(3):
        for a in (_tied((8, 32), seed), _with_nan_after_a_maximum(_tied((8, 32), seed))):
            idx, val = _run(sch.func, a)
            np.testing.assert_array_equal(idx, a.argmax(axis=1))   # the first maximum, NaN
            np.testing.assert_array_equal(val, a.max(axis=1))
            np.testing.assert_array_equal(idx, _run(argmax_first_nan, a)[0])


def test_argmax_over_floats_with_a_bare_comparison_is_not_factored():
    # a NaN resets `>=` alone: unscheduled, row 0 answers the maximum after its NaN at 20;
    # partial results over k_0 would bring back the 50 at 3
    a = _with_nan_after_a_maximum(_tied((8, 32)))
    assert _run(argmax_first, a)[0][0] > 20
    sch = sched.Schedule(argmax_first)
    _, k = sch.get_loops(sch.get_block("argmax"))
    ko, _ = sch.split(k, factors=[4, 8])
    before = sch.func
    with pytest.raises(ScheduleError, match=r"rfactor: block 'argmax' \(argmax \(first of "
                       r"equal values wins ties\) over idx, val\) compares float32 values, "
                       r"and with a NaN \(val\[vi\] >= NaN and NaN >= val\[vi\] are both "
                       r"false\).*keep the accumulators where `val\[vi\] >= A\[vi, vk\] or "
                       r"val\[vi\] != val\[vi\]`"):
        sch.rfactor(ko, factor_axis=0)
    assert sch.func is before


def test_argmax_rfactor_of_an_inner_reduce_loop_is_refused():
    # partial results over k_1 hold indices k_1, k_1 + 8, ...: combined in k_1 order, the
    # first maximum of a row would lose to a later one in a smaller k_1
    sch = sched.Schedule(argmax_first_nan)
    _, k = sch.get_loops(sch.get_block("argmax"))
    _, ki = sch.split(k, factors=[4, 8])
    before = sch.func
    with pytest.raises(ScheduleError, match=r"keeps the first of equal values in iteration "
                       r"order: combining partial results over loop 'k_1', inside reduce loop "
                       r"'k_0', would pick another index on ties"):
        sch.rfactor(ki, factor_axis=0)
    assert sch.func is before


@T.prim_func
def argmax_smallest_one_condition(A: T.Buffer((8, 30), "int32"),
                                  idx: T.Buffer((8,), "int32"), val: T.Buffer((8,), "int32")):
    for i, k in T.grid(8, 30):
        with T.block("arg"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                idx[vi] = -1
                val[vi] = T.min_value("int32")
            keep: T.bool = val[vi] > A[vi, vk] or (val[vi] == A[vi, vk] and idx[vi] < vk)
            v_idx: T.int32 = T.Select(keep, idx[vi], vk)
            v_val: T.int32 = T.Select(keep, val[vi], A[vi, vk])
            idx[vi] = v_idx
            val[vi] = v_val


@pytest.mark.parametrize("func", [argmin_smallest, argmax_smallest_one_condition])
def test_breaking_ties_by_index_factors_any_reduce_loop(func):
    arg = np.argmin if func is argmin_smallest else np.argmax
    for inner in (False, True):
        sch = sched.Schedule(func)
        _, k = sch.get_loops(sch.get_block("arg"))
        parts = sch.split(k, factors=[None, 4])        # 30 = 7 * 4 + 2: a predicate too
        sch.rfactor(parts[1] if inner else parts[0], factor_axis=1)
        for seed in range(3):
            a = _tied((8, 30), seed, np.int32)
            idx, _ = _run(sch.func, a)
            np.testing.assert_array_equal(idx, arg(a, axis=1))


def test_a_two_buffer_reduction_is_not_reordered_as_an_associative_update():
    sch = sched.Schedule(argmax_first)
    _, k = sch.get_loops(sch.get_block("argmax"))
    ko, ki = sch.split(k, factors=[4, 8])
    with pytest.raises(ScheduleError, match="reorder: the new order runs argmax before argmax"):
        sch.reorder(ki, ko)


@T.prim_func
def argmax_from_five(A: T.Buffer((4, 16), "int32"), idx: T.Buffer((4,), "int32"),
                     val: T.Buffer((4,), "int32")):
    for i, k in T.grid(4, 16):
        with T.block("argmax"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                idx[vi] = 5
                val[vi] = A[vi, 5]
            v_idx: T.int32 = T.Select(val[vi] > A[vi, vk] or (val[vi] == A[vi, vk] and
                                                              idx[vi] < vk), idx[vi], vk)
            v_val: T.int32 = T.Select(val[vi] > A[vi, vk], val[vi], A[vi, vk])
            idx[vi] = v_idx
            val[vi] = v_val


def test_the_partial_results_start_from_the_blocks_own_init():
    sch = sched.Schedule(argmax_from_five)
    _, k = sch.get_loops(sch.get_block("argmax"))
    _, ki = sch.split(k, factors=[None, 4])
    sch.rfactor(ki, factor_axis=0)
    assert "idx_rf[v_k_1, vi] = 5" in sch.func.script()
    a = _tied((4, 16), 1, np.int32)
    np.testing.assert_array_equal(_run(sch.func, a)[0], _run(argmax_from_five, a)[0])

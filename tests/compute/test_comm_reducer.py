"""te.comm_reducer: reducers of one value or several (argmax, argmin over (index, value)),
their block as TVM writes it, the numbers on the C target against numpy (ties included), and
rfactor accepting what it can prove and refusing the rest."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import DSLError, ScheduleError


def _arg_reducer(kind: str, ties: str, nan_wins: bool = True):
    """argmax/argmin; ties "first" (`>=`: the first in iteration order wins; with `nan_wins`
    a NaN held is kept, as numpy's argmax: the form rfactor proves over floats) or "index"
    (the smaller index wins: commutative; rfactor proves it over integers)."""
    def fcombine(x, y):
        if ties == "first":
            keep = x[1] >= y[1] if kind == "argmax" else x[1] <= y[1]
            if nan_wins:
                keep = te.any(keep, te.not_equal(x[1], x[1]))
        else:
            better = x[1] > y[1] if kind == "argmax" else x[1] < y[1]
            keep = te.any(better, te.all(te.equal(x[1], y[1]), x[0] < y[0]))
        value_keep = keep if ties == "first" else better
        return te.if_then_else(keep, x[0], y[0]), te.if_then_else(value_keep, x[1], y[1])

    def fidentity(t0, t1):
        return -1, te.min_value(t1) if kind == "argmax" else te.max_value(t1)
    return te.comm_reducer(fcombine, fidentity, name=kind)


def _arg_func(kind: str, ties: str, rows=8, cols=32, dtype="float32", nan_wins=True):
    A = te.placeholder((rows, cols), dtype, name="A")
    k = te.reduce_axis((0, cols), name="k")
    reducer = _arg_reducer(kind, ties, nan_wins)
    idx, val = te.compute((rows,), lambda i: reducer((k, A[i, k]), axis=k), name="T")
    return te.create_prim_func([A, idx, val])


def _run(func, a):
    idx, val = np.zeros(a.shape[0], np.int32), np.zeros(a.shape[0], a.dtype)
    sched.build(func, target="c")(a, idx, val)
    return idx, val


def _tied(shape, seed, dtype=np.float32):
    return np.random.default_rng(seed).integers(0, 4, shape).astype(dtype)


def _with_nans(a, seed):
    """`a` with NaNs in some rows (a later large value too: numpy answers the first NaN)."""
    a = a.copy()
    rng = np.random.default_rng(seed)
    for row in rng.choice(a.shape[0], a.shape[0] // 2, replace=False):
        a[row, rng.integers(a.shape[1])] = np.nan
        a[row, rng.integers(a.shape[1])] = 100.0
    return a


def test_argmax_block_is_written_as_tvm_prints_it_and_reads_back():
    func = _arg_func("argmax", "first", nan_wins=False)
    text = func.script()
    assert 'T_v0: T.Buffer((8,), "int32"), T_v1: T.Buffer((8,), "float32")' in text
    assert "T_v0[v_i] = -1" in text and "T_v1[v_i] = T.float32(-3.4028234663852886e+38)" in text
    assert "v_T_v0: T.int32 = T.if_then_else(T_v1[v_i] >= A[v_i, v_k], T_v0[v_i], v_k)" in text
    assert sched.parse(text) == func
    a = _tied((8, 32), 0)
    idx, val = _run(func, a)
    np.testing.assert_array_equal(idx, a.argmax(axis=1))
    np.testing.assert_array_equal(val, a.max(axis=1))


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_first_wins_rfactor_of_the_outer_loop_matches_numpy(kind):
    sch = sched.Schedule(_arg_func(kind, "first"))
    _, k = sch.get_loops(sch.get_block("T"))
    ko, ki = sch.split(k, factors=[None, 8])
    with pytest.raises(ScheduleError, match="keeps the first of equal values"):
        sch.rfactor(ki, factor_axis=0)
    sch.rfactor(ko, factor_axis=0)
    for seed in range(3):
        for a in (_tied((8, 32), seed), _with_nans(_tied((8, 32), seed), seed)):
            expected = a.argmax(axis=1) if kind == "argmax" else a.argmin(axis=1)
            np.testing.assert_array_equal(_run(sch.func, a)[0], expected)


@pytest.mark.parametrize(("kind", "ties"), [("argmax", "first"), ("argmin", "first"),
                                            ("argmax", "index"), ("argmin", "index")])
def test_rfactor_refuses_a_float_reducer_that_a_nan_takes_out_of_order(kind, ties):
    # with `>=` alone a NaN resets the row: [.., 50 at 3, .., NaN at 20, ..] gives the
    # maximum after index 20 unscheduled and 3 once partial results are combined
    sch = sched.Schedule(_arg_func(kind, ties, nan_wins=False))
    _, k = sch.get_loops(sch.get_block("T"))
    ko, _ = sch.split(k, factors=[2, None])
    before = sch.func
    with pytest.raises(ScheduleError, match=r"compares float32 values, and with a NaN .* "
                       r"a row's result depends on the order its values are combined in.* "
                       r"!= T_v1\[v_i\]`"):
        sch.rfactor(ko, factor_axis=0)
    assert sch.func is before


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_smallest_index_rfactor_of_the_inner_loop_matches_numpy(kind):
    sch = sched.Schedule(_arg_func(kind, "index", cols=30, dtype="int32"))
    _, k = sch.get_loops(sch.get_block("T"))
    _, ki = sch.split(k, factors=[None, 4])
    rf = sch.rfactor(ki, factor_axis=1)
    sch.parallel(sch.get_loops(rf)[0])
    for seed in range(3):
        a = _tied((8, 30), seed, np.int32)
        expected = a.argmax(axis=1) if kind == "argmax" else a.argmin(axis=1)
        np.testing.assert_array_equal(_run(sch.func, a)[0], expected)


def test_one_value_reducer_with_where():
    product = te.comm_reducer(lambda x, y: x * y, lambda t: 1.0, name="product")
    A = te.placeholder((4, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    P = te.compute((4,), lambda i: product(A[i, k], axis=k, where=k < 5), name="P")
    sch = sched.Schedule(te.create_prim_func([A, P]))
    _, kk = sch.get_loops(sch.get_block("P"))
    _, ki = sch.split(kk, factors=[None, 2])
    sch.rfactor(ki, factor_axis=0)               # x * y: an associative update
    a = np.random.default_rng(1).uniform(0.5, 1.5, (4, 6)).astype(np.float32)
    out = np.zeros(4, np.float32)
    sched.build(sch.func, target="c")(a, out)
    np.testing.assert_allclose(out, a[:, :5].prod(axis=1), rtol=1e-5)


def test_a_reducer_starts_from_init_as_tvms_does():
    # TVM's reducer(source, axis, where=None, init=None): a raw TypeError here (audit
    # helper-123); a product from 2, rfactor's partials from the identity 1
    product = te.comm_reducer(lambda x, y: x * y, lambda t: 1.0, name="product")
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    P = te.compute((4,), lambda i: product(A[i, k], axis=k, init=te.const(2.0, "float32")),
                   name="P")
    sch = sched.Schedule(te.create_prim_func([A, P]))
    assert "P[v_i] = T.float32(2.0)" in sch.mod.script()
    _, ki = sch.split(sch.get_loops(sch.get_block("P"))[1], factors=[None, 4])
    sch.rfactor(ki, factor_axis=0)
    a = np.random.default_rng(2).uniform(0.5, 1.5, (4, 8)).astype(np.float32)
    out = np.zeros(4, np.float32)
    sched.build(sch.func, target="c")(a, out)
    np.testing.assert_allclose(out, 2 * a.prod(axis=1), rtol=1e-5)


def test_argmax_from_an_init_pair():
    A = te.placeholder((6, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    start = (te.const(-7, "int32"), te.const(0.5, "float32"))
    idx, val = te.compute((6,), lambda i: _arg_reducer("argmax", "first")(
        (k, A[i, k]), axis=k, init=start), name="T")
    a = np.random.default_rng(3).uniform(0, 1, (6, 8)).astype(np.float32)
    got_idx, got_val = _run(te.create_prim_func([A, idx, val]), a)
    above = a.max(axis=1) > 0.5
    np.testing.assert_array_equal(got_idx, np.where(above, a.argmax(axis=1), -7))
    np.testing.assert_array_equal(got_val, np.maximum(a.max(axis=1), np.float32(0.5)))
    with pytest.raises(DSLError, match="init= gives 1 value"):
        _arg_reducer("argmax", "first")((k, A[0, k]), axis=k, init=0.0)


def test_rfactor_refuses_a_reducer_it_cannot_prove():
    # keeps the value of the larger magnitude: associative perhaps, but not one rfactor knows
    def fcombine(x, y):
        keep = te.abs(x[1]) >= te.abs(y[1])
        return te.if_then_else(keep, x[0], y[0]), te.if_then_else(keep, x[1], y[1])
    reducer = te.comm_reducer(fcombine, lambda t0, t1: (-1, 0.0), name="argabsmax")
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    idx, val = te.compute((4,), lambda i: reducer((k, A[i, k]), axis=k), name="T")
    sch = sched.Schedule(te.create_prim_func([A, idx, val]))
    _, kk = sch.get_loops(sch.get_block("T"))
    with pytest.raises(ScheduleError, match="is not an associative update .* nor an "
                       "argmax/argmin pair"):
        sch.rfactor(kk, factor_axis=0)


def test_comm_reducer_mistakes_are_reported():
    pair = te.comm_reducer(lambda x, y: x[0] + y[0], lambda t0, t1: (0, 0.0), name="bad")
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    T = te.compute((4,), lambda i: pair((k, A[i, k]), axis=k), name="T")
    with pytest.raises(DSLError, match="fcombine gives 1 values for 2 accumulated ones"):
        te.create_prim_func([A, *T])
    with pytest.raises(DSLError, match="both must be functions"):
        te.comm_reducer(None, lambda t: 0)


def test_argmax_with_where_rfactor_and_decomposed_partials_matches_numpy():
    A = te.placeholder((8, 32), name="A")
    k = te.reduce_axis((0, 32), name="k")
    argmax = _arg_reducer("argmax", "first")
    idx, val = te.compute((8,), lambda i: argmax((k, A[i, k]), axis=k,
                                                 where=te.not_equal(k % 3, 1)), name="T")
    sch = sched.Schedule(te.create_prim_func([A, idx, val]))
    _, kk = sch.get_loops(sch.get_block("T"))
    ko, _ = sch.split(kk, factors=[4, 8])
    rf = sch.rfactor(ko, factor_axis=0)
    init = sch.decompose_reduction(rf, sch.get_loops(rf)[2])
    assert init.name == "T_rf_init"
    sch.parallel(sch.get_loops(rf)[0])
    for a in (_tied((8, 32), 2), _with_nans(_tied((8, 32), 2), 2)):
        masked = np.where(np.arange(32) % 3 != 1, a, -np.inf)
        np.testing.assert_array_equal(_run(sch.func, a)[0], masked.argmax(axis=1))


def test_where_given_a_python_bool_is_refused():
    # a constant where=, or `!=` between expressions of different dtypes (no comparison built)
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    with pytest.raises(DSLError, match=r"where= is the Python bool True: .*te.not_equal"):
        _arg_reducer("argmax", "first")((k, A[0, k]), axis=k, where=True)
    with pytest.raises(DSLError, match="te.sum: where= is the Python bool"):
        te.sum(A[0, k], axis=k, where=k != te.const(1, "int64"))


def test_where_k_not_equal_to_a_number_is_a_condition():
    # `k != 1` builds the comparison, as in TVM (it was Python's object comparison: True)
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    total = te.compute((4,), lambda i: te.sum(A[i, k], axis=k, where=k != 1), name="S")
    a = np.arange(32, dtype="float32").reshape(4, 8)
    s = np.zeros(4, "float32")
    sched.build(te.create_prim_func([A, total]), target="c")(a, s)
    np.testing.assert_array_equal(s, a.sum(axis=1) - a[:, 1])


def _argmax_on_threads():
    """argmax of 256 columns: 32 threads each reduce a chunk of 8 into shared memory (the
    outer reduce loop factored), then the block combines the chunks in order."""
    A = te.placeholder((8, 256), name="A")
    k = te.reduce_axis((0, 256), name="k")
    idx, val = te.compute((8,), lambda i: _arg_reducer("argmax", "first")((k, A[i, k]),
                                                                          axis=k), name="T")
    sch = sched.Schedule(te.create_prim_func([A, idx, val]))
    _, kk = sch.get_loops(sch.get_block("T"))
    ko, _ = sch.split(kk, factors=[32, None])
    rf = sch.rfactor(ko, factor_axis=0)
    i, ko, _ = sch.get_loops(rf)
    sch.reverse_compute_at(sch.get_block("T"), i)
    sch.set_scope(rf, 0, "shared")
    sch.set_scope(rf, 1, "shared")
    sch.bind(i, "blockIdx.x")
    sch.bind(ko, "threadIdx.x")
    return sch


def test_argmax_on_threads_reads_the_partials_after_a_barrier():
    # the block reads every thread's partial (index, value) in let values: after a barrier.
    # The combining loop runs outside the thread loop, so in every thread, each updating
    # T_v0[i] and T_v1[i] in global memory (ThreadSanitizer reports the race on cuda-emu):
    # build refuses it; built anyway, the barrier is still where it must be
    with pytest.raises(sched.BuildError, match="block 'T' runs outside the threadIdx loops"):
        sched.build(_argmax_on_threads().func, target="cuda", arch="sm_90")
    source = sched.build(_argmax_on_threads().func, target="cuda", arch="sm_90",
                         check_races=False).source
    assert source.index("__syncthreads();") < source.index("const int32_t v_T_v0_1 =")


@pytest.mark.parametrize(("dtype", "hint"), [
    ("int32", r"sch.rfactor\(k, factor_axis=0\)  # \(the outer part of a split reduce loop "
              r"for a first-wins reducer\) then bind the new loop"),
    ("float32", r"rfactor takes it over floats once it keeps a NaN it holds")])
def test_binding_an_argmax_reduce_loop_to_threads_says_why_and_what_to_do(dtype, hint):
    # audit (helper-27): the refusal spoke of global memory only, as if a shared output
    # would do; a cross-thread reduction takes one associative update
    sch = sched.Schedule(_arg_func("argmax", "index", dtype=dtype))
    i, k = sch.get_loops(sch.get_block("T"))
    sch.bind(i, "blockIdx.x")
    with pytest.raises(ScheduleError, match=r"(?s)block 'T' reduces with argmax \(smallest "
                       r"index wins ties\): concurrent iterations cannot share its "
                       r"accumulators, and a cross-thread reduction takes one associative "
                       r"update \(\+, \*, min, max\) only.*" + hint):
        sch.bind(k, "threadIdx.x")

"""rfactor of te.comm_reducer reducers beyond argmax/argmin: a product, accumulators reduced
each on their own ((sum, sum of squares), (min, max)), the (max, scaled sum) of logsumexp; the
partial results start from the reducer's identity, whatever the block's init; reducers sched
cannot prove are refused."""

import re

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.script import T

ROWS, COLS = 8, 32


def _func(reducer, incoming, outputs=2):
    A = te.placeholder((ROWS, COLS), name="A")
    k = te.reduce_axis((0, COLS), name="k")
    out = te.compute((ROWS,), lambda i: reducer(incoming(A, i, k), axis=k), name="R")
    return te.create_prim_func([A, *(out if outputs > 1 else [out])])


def _rfactored(func, which: int):
    sch = sched.Schedule(func)
    i, k = sch.get_loops(sch.get_block("R"))
    loops = sch.split(k, [None, 4])
    sch.rfactor(loops[which], 0)
    return sch


def _outputs(func, a, count):
    outs = [np.zeros(ROWS, "float32") for _ in range(count)]
    sched.build(func, target="c")(a, *outs)
    return outs


A_VALUES = np.random.default_rng(3).standard_normal((ROWS, COLS)).astype("float32")

product = te.comm_reducer(lambda x, y: x * y, lambda t: te.cast(1, t), name="product")
sum_sumsq = te.comm_reducer(lambda x, y: (x[0] + y[0], x[1] + y[1]),
                            lambda t0, t1: (te.cast(0, t0), te.cast(0, t1)), name="sum_sumsq")
min_max = te.comm_reducer(lambda x, y: (te.min(x[0], y[0]), te.max(y[1], x[1])),
                          lambda t0, t1: (te.max_value(t0), te.min_value(t1)), name="min_max")


def _lse_combine(x, y):
    m = te.max(x[0], y[0])
    return m, x[1] * te.exp(x[0] - m) + y[1] * te.exp(y[0] - m)


logsumexp = te.comm_reducer(_lse_combine, lambda t0, t1: (te.min_value(t0), te.cast(0, t1)),
                            name="logsumexp")

CASES = {
    "product": (product, lambda A, i, k: A[i, k] * 0.5 + 1.0, 1,
                lambda a: [np.prod(a * 0.5 + 1.0, axis=1)]),
    "sum_sumsq": (sum_sumsq, lambda A, i, k: (A[i, k], A[i, k] * A[i, k]), 2,
                  lambda a: [a.sum(1), (a * a).sum(1)]),
    "min_max": (min_max, lambda A, i, k: (A[i, k], A[i, k]), 2,
                lambda a: [a.min(1), a.max(1)]),
    "logsumexp": (logsumexp, lambda A, i, k: (A[i, k], te.cast(1.0, "float32")), 2,
                  lambda a: [a.max(1), np.exp(a - a.max(1, keepdims=True)).sum(1)]),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("which", [0, 1])
def test_rfactor_of_comm_reducer_matches_numpy(name, which):
    reducer, incoming, count, expected = CASES[name]
    func = _func(reducer, incoming, count)
    sch = _rfactored(func, which)
    assert 'T.block("R_rf")' in sch.func.script()
    for got, want in zip(_outputs(sch.func, A_VALUES, count), expected(A_VALUES)):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
    assert sched.parse(sch.func.script()) == sch.func


# the init is not the identity: the result is init (+) everything, so the partial results
# must start from the identity (0), not from a copy of the init
@T.prim_func
def sums_from_one(A: T.Buffer((8, 32), "float32"), S: T.Buffer((8,), "float32"),
                  Q: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 32):
        with T.block("R"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = T.float32(1)
                Q[vi] = T.float32(1)
            v_s: T.float32 = S[vi] + A[vi, vk]
            v_q: T.float32 = A[vi, vk] * A[vi, vk] + Q[vi]
            S[vi] = v_s
            Q[vi] = v_q


def test_partial_results_start_from_the_identity_not_the_init():
    sch = _rfactored(sums_from_one, 1)
    text = sch.func.script()
    assert re.search(r"S_rf\[v_k_1, vi\] = T.float32\(0.0\)", text), text
    s, q = _outputs(sch.func, A_VALUES, 2)
    np.testing.assert_allclose(s, 1 + A_VALUES.sum(1), rtol=2e-5)
    np.testing.assert_allclose(q, 1 + (A_VALUES ** 2).sum(1), rtol=2e-5)


# a linear recurrence (x0 * y1 + y0, x1 * y1) is associative but not commutative, and sched
# does not prove it: refused, naming the reducers it knows
@T.prim_func
def recurrence(A: T.Buffer((8, 32), "float32"), S: T.Buffer((8,), "float32"),
               P: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 32):
        with T.block("R"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = T.float32(0)
                P[vi] = T.float32(1)
            v_s: T.float32 = S[vi] * A[vi, vk] + A[vi, vk]
            v_p: T.float32 = P[vi] * A[vi, vk]
            S[vi] = v_s
            P[vi] = v_p


def test_rfactor_refuses_a_reducer_it_cannot_prove():
    sch = sched.Schedule(recurrence)
    i, k = sch.get_loops(sch.get_block("R"))
    with pytest.raises(ScheduleError, match="rfactor: block 'R' is not an associative update"):
        sch.rfactor(k, 0)


def test_logsumexp_from_minus_infinity_is_refused_naming_its_identity():
    # partial results start from (lowest finite, 0), which is not neutral for a masked -inf:
    # a fully masked row's max became -3.4e38 and NaN sums numbers (audit helper-174)
    from_inf = te.comm_reducer(_lse_combine,
                               lambda t0, t1: (te.cast(float("-inf"), t0), te.cast(0, t1)),
                               name="lse_inf")
    func = _func(from_inf, lambda A, i, k: (A[i, k], te.cast(1.0, "float32")), 2)
    with pytest.raises(ScheduleError, match=r"starts from \(T.float32\(\"-inf\"\).*not from "
                                            r"its identity"):
        _rfactored(func, 1)


@T.prim_func
def _sum_into_one_element(A: T.Buffer((8, 16), "float32"), B: T.Buffer((1,), "float32")):
    for i, k in T.grid(8, 16):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            B[0] = B[0] + A[vi, vk]


def test_rfactor_of_a_reduction_several_spatial_instances_update_is_refused():
    # every vi updates B[0]: the partial results kept the last row (8 times its sum) where
    # the unscheduled kernel sums all rows (audit helper-174)
    sch = sched.Schedule(_sum_into_one_element)
    with pytest.raises(ScheduleError, match="updates one element of its output from several "
                                            "spatial instances"):
        sch.rfactor(sch.get_loops(sch.get_block("B"))[1], 0)


def test_the_output_check_reads_named_variables_and_int32_casts_of_int64_axes():
    # a spatial variable named NaN or max reached isl by its raw name: rfactor accepted the
    # shared-output case (NaN) or raised an isl syntax error (max); an int32 cast of int64
    # axes, as TVM prints int64 IR, was refused as shared (audit helper-175)
    shared = sched.parse('''
@T.prim_func
def f(A: T.Buffer((8, 16), "float32"), B: T.Buffer((1,), "float32")):
    for i, k in T.grid(8, 16):
        with T.block("B"):
            NaN, vk = T.axis.remap("SR", [i, k])
            B[0] = B[0] + A[NaN, vk]
''')
    sch = sched.Schedule(shared)
    with pytest.raises(ScheduleError, match="from several spatial instances"):
        sch.rfactor(sch.get_loops(sch.get_block("B"))[1], 0)
    cast = sched.parse('''
@T.prim_func
def f(A: T.Buffer((8, 3, 16), "float32"), B: T.Buffer((24,), "float32")):
    for i, j, k in T.grid(T.int64(8), T.int64(3), T.int64(16)):
        with T.block("B"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                B[T.Cast("int32", vi * T.int64(3) + vj)] = T.float32(0)
            B[T.Cast("int32", vi * T.int64(3) + vj)] = B[T.Cast("int32", vi * T.int64(3) + vj)] \\
                + A[T.Cast("int32", vi), T.Cast("int32", vj), T.Cast("int32", vk)]
''')
    sch = sched.Schedule(cast)
    sch.rfactor(sch.split(sch.get_loops(sch.get_block("B"))[2], [None, 4])[1], 0)
    a = np.random.default_rng(0).standard_normal((8, 3, 16)).astype("float32")
    b = np.zeros(24, np.float32)
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_allclose(b, a.sum(2).reshape(24), rtol=1e-5, atol=1e-5)

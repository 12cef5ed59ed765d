"""Constant folding computes what the targets compute (audit, helper-33: the C target gave
`A[i] + 1.0f` for `A[i] + min(1, NaN)`, compared a wrapped int32 sum as the unbounded one, and
folded float `//` with `floor(x / y)`); the interpreter, which does not fold, is the oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.ir.nodes import BinaryOp, Call, Cast, FloatImm, IntImm, Select, StringImm, Var
from sched.ir.simplify import simplify, wrap
from sched.script import T

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("op, x, y", [("min", 1.0, NAN), ("max", 1.0, NAN), ("min", NAN, 1.0),
                                       ("max", NAN, 1.0), ("min", 0.0, -0.0),
                                       ("max", -0.0, 0.0)])
def test_min_and_max_of_float_constants_as_the_targets_helpers(op, x, y):
    folded = simplify(BinaryOp(op, FloatImm(x, "float32"), FloatImm(y, "float32")))
    expected = y if math.isnan(y) or (y < x if op == "min" else y > x) else x   # NaN wins
    assert isinstance(folded, FloatImm)
    assert math.isnan(folded.value) if math.isnan(expected) else \
        (folded.value, math.copysign(1, folded.value)) == (expected, math.copysign(1, expected))


@pytest.mark.parametrize("dtype, op, x, y", [
    ("int32", "add", 2 ** 31 - 1, 1), ("int8", "mul", 100, 2), ("uint8", "sub", 0, 1),
    ("int64", "add", 2 ** 63 - 1, 1), ("uint32", "sub", 0, 1), ("int16", "mul", 300, 300),
    ("int32", "floordiv", -2 ** 31, -1)])
def test_an_integer_result_outside_the_dtype_is_not_folded(dtype, op, x, y):
    # as data it wraps, as an index the lowering computes it in int64: kept for either
    node = BinaryOp(op, IntImm(x, dtype), IntImm(y, dtype))
    assert simplify(node) == node


def test_integer_results_inside_the_dtype_fold_and_casts_wrap():
    assert simplify(BinaryOp("mul", IntImm(100, "int16"), IntImm(300, "int16"))) == \
        IntImm(30000, "int16")
    assert simplify(Cast("int8", IntImm(300, "int32"))) == IntImm(44, "int8")
    assert simplify(Cast("uint8", IntImm(-1, "int32"))) == IntImm(255, "uint8")
    assert wrap(2 ** 31, "int32") == -2 ** 31 and wrap(-1, "uint64") == 2 ** 64 - 1
    assert simplify(Cast("float32", FloatImm(0.1, "float64"))).value == float(np.float32(0.1))


@pytest.mark.parametrize("x, y", [(1.0, 0.1), (-5.0, INF), (INF, 1.0), (NAN, 2.0), (7.5, -2.0)])
def test_float_floor_division_and_modulo_of_constants_as_numpy(x, y):
    for op, numpy_op in (("floordiv", np.floor_divide), ("floormod", np.remainder)):
        folded = simplify(BinaryOp(op, FloatImm(x, "float32"), FloatImm(y, "float32")))
        with np.errstate(all="ignore"):
            expected = float(numpy_op(np.float32(x), np.float32(y)))
        assert isinstance(folded, FloatImm)
        assert folded.value == expected or (math.isnan(expected) and math.isnan(folded.value))


def test_folded_constants_compute_what_the_interpreter_computes():
    A = te.placeholder((2,), "int32", name="A")
    wrapped = BinaryOp("add", IntImm(2 ** 31 - 1, "int32"), IntImm(1, "int32"))
    less = Select(BinaryOp("lt", wrapped, IntImm(1, "int32")), IntImm(1, "int32"),
                  IntImm(0, "int32"))
    B = te.compute((2,), lambda i: A[i] + less, name="B")
    F = te.compute((2,), lambda i: te.cast(A[i], "float32") + BinaryOp(
        "min", FloatImm(1.0, "float32"), FloatImm(NAN, "float32")), name="F")
    func = te.create_prim_func([A, B, F])
    a = np.array([3, -4], np.int32)
    for run in (lambda *args: sched.interpret(func, *args), sched.build(func, target="c")):
        b, f = np.zeros(2, np.int32), np.zeros(2, np.float32)
        run(a, b, f)
        np.testing.assert_array_equal(b, a + 1)      # the int32 sum wrapped: less than 1
        assert np.isnan(f).all()


def test_float_identities_keep_floor_and_the_sign_of_zero():
    # audit, helper-35: x // 1.0 became x (2.5 // 1 is 2) and x + 0.0 became x (-0.0 + 0.0
    # is 0.0: 1 / (x + 0.0) turned from inf to -inf)
    x = Var("x", "float32")
    kept = [BinaryOp("floordiv", x, FloatImm(1.0, "float32")),
            BinaryOp("add", x, FloatImm(0.0, "float32")),
            BinaryOp("add", FloatImm(0.0, "float32"), x),
            BinaryOp("sub", x, FloatImm(-0.0, "float32"))]
    for node in kept:
        assert simplify(node) == node, node.script()
    for node in (BinaryOp("add", x, FloatImm(-0.0, "float32")),
                 BinaryOp("sub", x, FloatImm(0.0, "float32")),
                 BinaryOp("mul", x, FloatImm(1.0, "float32")),
                 BinaryOp("div", x, FloatImm(1.0, "float32"))):
        assert simplify(node) == x, node.script()
    i = Var("i", "int32")
    assert simplify(BinaryOp("floordiv", i, IntImm(1, "int32"))) == i
    assert simplify(BinaryOp("add", IntImm(0, "int32"), i)) == i


def test_float_constants_fold_as_the_targets_read_them():
    # T.float32(0.1) is the float32 nearest 0.1 (the C literal, the interpreter); an int64
    # constant converts to float32 in one rounding, not two through float64
    point_one = FloatImm(0.1, "float32")
    assert simplify(BinaryOp("eq", point_one, FloatImm(float(np.float32(0.1)), "float32"))) \
        == IntImm(1, "bool")
    assert simplify(Cast("float64", point_one)).value == float(np.float32(0.1))
    for value, dtype in ((2 ** 60 + 2 ** 36 + 1, "int64"), (2 ** 62 + 2 ** 38 + 1, "uint64")):
        folded = simplify(Cast("float32", IntImm(value, dtype)))
        assert folded.value == float(np.array(value, dtype).astype(np.float32))


def test_opaque_calls_are_not_folded_away_or_merged():
    f = Call("call_extern", (StringImm("rand_int"),), "int32")
    for node in (BinaryOp("sub", f, f), BinaryOp("mul", f, IntImm(0, "int32")),
                 BinaryOp("max", f, f)):
        assert simplify(node) == node, node.script()


def _div(a, b):
    return BinaryOp("floordiv", a, b)


def _mod(a, b):
    return BinaryOp("floormod", a, b)


@pytest.mark.parametrize("d", [Var("m"), IntImm(-3), IntImm(7)])
@pytest.mark.parametrize("form", range(4))
def test_quotient_times_divisor_plus_remainder_is_the_dividend(d, form):
    # the flat index of B[f // m, f % m]; floor division: true for every divisor but 0
    x = BinaryOp("add", BinaryOp("mul", Var("f"), IntImm(64)), Var("t"))
    product = BinaryOp("mul", _div(x, d), d) if form % 2 else BinaryOp("mul", d, _div(x, d))
    total = BinaryOp("add", product, _mod(x, d)) if form < 2 else \
        BinaryOp("add", _mod(x, d), product)
    assert simplify(total, positive=[Var("m")]) == x
    for f, t, dv in [(3, 5, 7), (-2, 9, -3), (0, -1, 4)]:
        assert (f * 64 + t) // dv * dv + (f * 64 + t) % dv == f * 64 + t     # (Python: floor)


@pytest.mark.parametrize("total", [
    BinaryOp("add", BinaryOp("mul", _div(Var("f"), Var("m")), Var("m")), _mod(Var("f"), Var("n"))),
    BinaryOp("add", BinaryOp("mul", _div(Var("f"), Var("m")), Var("n")), _mod(Var("f"), Var("m"))),
    BinaryOp("add", BinaryOp("mul", _div(Var("g"), Var("m")), Var("m")), _mod(Var("f"), Var("m"))),
])
def test_other_sums_of_quotients_and_remainders_are_kept(total):
    assert simplify(total) == total


def test_a_divisor_that_may_be_zero_keeps_the_sum():
    # x // 0 and x % 0 are 0 in sched: with a scalar s of 0 the sum is 0, not x (audit
    # helper-46: the C target gave x where the interpreter gave 0)
    x, s = Var("x"), Var("s")
    total = BinaryOp("add", BinaryOp("mul", _div(x, s), s), _mod(x, s))
    assert simplify(total) == total
    assert simplify(total, positive=[Var("m")]) == total
    zero = BinaryOp("add", BinaryOp("mul", _div(x, IntImm(0)), IntImm(0)), _mod(x, IntImm(0)))
    assert simplify(zero) != x


def test_a_scalar_divisor_of_zero_computes_zero_on_every_target():
    @T.prim_func
    def recombine(a: T.handle, b: T.handle, s: T.int32):
        n = T.int32()
        A = T.match_buffer(a, (n,), "int32")
        B = T.match_buffer(b, (n,), "int32")
        for i in range(n):
            with T.block("B"):
                vi = T.axis.spatial(n, i)
                B[vi] = A[vi] // s * s + A[vi] % s

    a = np.arange(-3, 5, dtype="int32")
    for s in (0, 3, -2):
        expected = np.zeros(8, "int32")
        sched.interpret(recombine, a, expected, s)
        got = np.zeros(8, "int32")
        sched.build(recombine, target="c")(a, got, s)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(expected, a if s else np.zeros(8, "int32"))

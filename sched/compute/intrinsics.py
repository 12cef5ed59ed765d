"""Math intrinsics, selection and casts of the compute DSL (TVM's `te`/`tir` spellings)."""

from __future__ import annotations

import builtins

from sched.errors import DSLError
from sched.ir import bit_intrinsics, builders
from sched.ir.dtype import is_float
from sched.ir.nodes import Call, Cast, Expr, Select, convert, logical_and, logical_or
from sched.ir.nodes import equal as equal
from sched.ir.nodes import not_equal as not_equal


def _math(op: str, *args) -> Call:
    exprs = [convert(a) for a in args]
    dtype = exprs[0].dtype
    exprs = [convert(a, dtype) for a in args]
    if not is_float(dtype):
        raise DSLError(f"te.{op} needs a floating-point operand, got {dtype}: "
                       f"cast it first with te.cast(x, 'float32')")
    if builtins.any(e.dtype != dtype for e in exprs):
        raise DSLError(f"te.{op}: operands differ in dtype ({', '.join(e.dtype for e in exprs)})")
    return Call(op, tuple(exprs), dtype)


def exp(x) -> Call: return _math("exp", x)
def log(x) -> Call: return _math("log", x)
def sqrt(x) -> Call: return _math("sqrt", x)
def rsqrt(x) -> Call: return _math("rsqrt", x)
def tanh(x) -> Call: return _math("tanh", x)
def erf(x) -> Call: return _math("erf", x)
def sigmoid(x) -> Call: return _math("sigmoid", x)
def power(x, y) -> Call:
    try:
        return builders.power(x, y)
    except TypeError as error:
        raise DSLError(f"te.power: {error}") from None
def exp2(x) -> Call: return _math("exp2", x)
def log2(x) -> Call: return _math("log2", x)
def log10(x) -> Call: return _math("log10", x)
def log1p(x) -> Call: return _math("log1p", x)
def sin(x) -> Call: return _math("sin", x)
def cos(x) -> Call: return _math("cos", x)
def tan(x) -> Call: return _math("tan", x)
def asin(x) -> Call: return _math("asin", x)
def acos(x) -> Call: return _math("acos", x)
def atan(x) -> Call: return _math("atan", x)
def sinh(x) -> Call: return _math("sinh", x)
def cosh(x) -> Call: return _math("cosh", x)
def atan2(y, x) -> Call: return _math("atan2", y, x)
def fmod(x, y) -> Call: return _math("fmod", x, y)
def hypot(x, y) -> Call: return _math("hypot", x, y)
def copysign(x, y) -> Call: return _math("copysign", x, y)


def _bit_intrinsic(build, *args) -> Expr:
    """`build(*args)` of sched/ir/bit_intrinsics.py, a wrong dtype as a DSLError."""
    try:
        return build(*args)
    except TypeError as error:
        raise DSLError(str(error)) from None


def reinterpret(dtype: str, x) -> Expr:
    """The bits of `x` as a `dtype` value of the same width (TVM's `tir.reinterpret`)."""
    return _bit_intrinsic(bit_intrinsics.reinterpret, dtype, convert(x))


def popcount(x) -> Expr:
    """The number of 1 bits of integer `x`, of x's dtype."""
    return _bit_intrinsic(bit_intrinsics.popcount, convert(x))


def clz(x) -> Expr:
    """The number of leading 0 bits of integer `x` (its width for 0), int32."""
    return _bit_intrinsic(bit_intrinsics.clz, convert(x))


def ldexp(x, e) -> Expr:
    """`x * 2**e` of a float `x` and an int32 `e`."""
    return _bit_intrinsic(bit_intrinsics.ldexp, convert(x), e)


def q_multiply_shift(x, y, q, s) -> Expr:
    """TVM's fixed-point `round(x * y * 2**(s - q))` of int32 values (halves up)."""
    return _bit_intrinsic(bit_intrinsics.q_multiply_shift, x, y, q, s)


def abs(x) -> Expr:  # noqa: A001 - TVM's spelling
    x = convert(x)
    if is_float(x.dtype):
        return _math("abs", x)
    return Select(x < 0, -x, x)


def const(value, dtype: str | None = None) -> Expr:
    """The constant `value` of `dtype` (TVM's `te.const`; by default int32 for an int, int64
    past int32, float32 for a float, bool for a bool): `te.const(0.5, "float16")`."""
    from sched.ir.nodes import const as make
    from sched.ir.nodes import convert

    if dtype is None:
        return convert(value)
    return make(value, dtype)


def cast(x, dtype: str) -> Expr:
    """`x` converted to `dtype`."""
    return convert(x).astype(dtype)


def if_then_else(condition, true_value, false_value) -> Select:
    """`true_value` where `condition` holds, else `false_value` (numbers take the other
    branch's dtype; branches of different dtypes are promoted as TVM's operands are). A Python
    bool as the condition is refused: `a == b` between expressions builds the comparison
    (sched/ir/equality.py) except where their dtypes differ, which gives the bool False."""
    if isinstance(condition, bool):
        raise DSLError(f"if_then_else: the condition is the Python bool {condition}: a "
                       f"constant, or `==` / `!=` between expressions of different dtypes "
                       f"(never equal as objects); cast one (te.cast) or write "
                       f"te.equal(a, b) / te.not_equal(a, b)")
    condition = convert(condition)
    if condition.dtype != "bool":
        raise DSLError(f"if_then_else: the condition must be a comparison, got {condition.dtype}")
    if isinstance(true_value, Expr) or hasattr(true_value, "as_expr"):
        true_value = convert(true_value)
        false_value = convert(false_value, builders.literal_dtype(false_value, true_value.dtype))
    else:
        false_value = convert(false_value)
        true_value = convert(true_value, builders.literal_dtype(true_value, false_value.dtype))
    if true_value.dtype != false_value.dtype:      # matched as TVM's binary operators are
        dtype = builders.promoted(true_value.dtype, false_value.dtype)
        if dtype is None:
            raise DSLError(f"if_then_else: branches differ in dtype ({true_value.dtype}, "
                           f"{false_value.dtype}): cast one of them")
        true_value, false_value = (builders.cast_to(v, dtype) for v in (true_value, false_value))
    return Select(condition, true_value, false_value)


def all(*conditions) -> Expr:  # noqa: A001
    """Every condition holds."""
    return logical_and(*conditions)


def any(*conditions) -> Expr:  # noqa: A001
    """Some condition holds."""
    return logical_or(*conditions)


__all__ = ["abs", "acos", "all", "any", "asin", "atan", "atan2", "cast", "clz", "copysign",
           "cos", "cosh", "equal", "erf", "exp", "exp2", "fmod", "hypot", "if_then_else",
           "ldexp", "log", "log10", "log1p", "log2", "not_equal", "popcount", "power",
           "q_multiply_shift", "reinterpret", "rsqrt", "sigmoid", "sin", "sinh", "sqrt", "tan",
           "tanh", "Cast"]

"""TVM's intrinsics on the bits of a value: `T.reinterpret`, `T.popcount`, `T.clz`, `T.ldexp`
and `T.q_multiply_shift`; each builder checks its operands' dtypes (the parser, the compute DSL
and the verifier share the rules) and raises TypeError saying how to fix the call.

Semantics, the same on every target (interpreter, C, CUDA):

- `T.reinterpret("float32", x)`: the bits of x read as a value of another dtype of the same
  width (float32 <-> int32/uint32, float16/bfloat16 <-> int16/uint16, float64 <->
  int64/uint64, int8 <-> uint8...); of x's own dtype, x itself (as TVM's). A 16-bit float is
  computed in float32 and rounded to its dtype first (as where it is stored); NaN payloads of
  16-bit floats may not survive that (the targets convert through float32).
- `T.popcount(x)`: the number of 1 bits of x's two's complement pattern in x's width, of
  x's dtype (TVM's: `popcount(T.int8(-1))` is 8).
- `T.clz(x)`: the number of leading 0 bits of x's pattern in x's width, int32 (TVM's dtype).
  `clz(0)` is the width (32 for int32), as CUDA's `__clz`; TVM leaves it undefined and
  GCC's `__builtin_clz(0)` is undefined, so no target calls that with 0.
- `T.ldexp(x, e)`: x * 2**e for a float x and an int32 e, rounded once (libm's and CUDA's
  `ldexp`, numpy's `np.ldexp`): beyond the dtype's range inf, below it a subnormal or 0
  (CUDA with `fast_math` flushes subnormal results to 0).
- `T.q_multiply_shift(x, y, q, s)`: TVM's fixed-point multiplication of int32 values,
  written as the IR TVM's default lowering (`src/target/intrin_rule.cc`, FLegalize) writes:
  with ls = max(s, 0) and rs = max(-s, 0), in int64,
  `int32(((int64(x) << ls) * int64(y) + (1 << (rs + q - 1))) >> (rs + q))`.
  For 1 <= q <= 32 and q - s <= 62 that is round(x * y * 2**(s - q)), halves rounded up
  (toward +inf: -2.5 -> -2, 2.5 -> 3), wrapped to int32, for every int32 x and y: an int64
  product that wraps (s > 0) keeps the low bits the result takes. TVM's lowering leaves
  undefined what sched defines with its own arithmetic (int64 wraps; a shift count of 64 or
  more gives 0, or -1 for a negative value, as numpy's), which matters only beyond q - s =
  62. TVM's shortcut for the constant y = 1 << 30 (`x << (s - 1)` in int32, which assumes
  q = 31 and is undefined for s = 1) is not taken: for q = 31 the results are the same
  wherever it is defined and its int32 rounding step does not overflow. q must be positive
  (TVM: "Needs to be > 0"); a constant q <= 0 is refused.
"""

from __future__ import annotations

from sched.ir.dtype import bits, is_float, is_int
from sched.ir.nodes import (
    BIT_FUNCTIONS,
    REINTERPRET,
    Call,
    Cast,
    Expr,
    IntImm,
    binary,
    const,
    convert,
    integer_call,
)
from sched.ir.simplify import simplify

_WIDE = "int64"


def reinterpret(dtype: str, value: Expr) -> Expr:
    """The bits of `value` as a `dtype` value: `T.reinterpret(dtype, value)`."""
    source = value.dtype
    if dtype == source:
        return value
    problem = _reinterpret_problem(dtype, source)
    if problem is not None:
        raise TypeError(problem)
    return Call(REINTERPRET, (value,), dtype)


def _reinterpret_problem(dtype: str, source: str) -> str | None:
    """Why a `source` value cannot be reinterpreted as `dtype`, or None."""
    if "bool" in (dtype, source):
        return (f"T.reinterpret: a bool has no bit pattern to reinterpret ({source} as "
                f"{dtype}): convert it with T.Cast(\"{dtype}\", x)")
    if bits(dtype) != bits(source):
        same = [d for d in ("float16", "bfloat16", "float32", "float64", "int8", "int16",
                            "int32", "int64", "uint8", "uint16", "uint32", "uint64")
                if bits(d) == bits(source) and d != source]
        return (f"T.reinterpret: {source} ({bits(source)} bits) cannot be reinterpreted as {dtype} "
                f"({bits(dtype)} bits): the widths differ. A {source} reinterprets as "
                f"{', '.join(same)}; to convert the value instead, use "
                f"T.Cast(\"{dtype}\", x)")
    return None


def popcount(x: Expr) -> Call:
    """The number of 1 bits of integer `x` (in x's width), of x's dtype."""
    _check_integer("popcount", x)
    return Call("popcount", (x,), x.dtype)


def clz(x: Expr) -> Call:
    """The number of leading 0 bits of integer `x` in x's width (the width for 0), int32."""
    _check_integer("clz", x)
    return Call("clz", (x,), "int32")


def _check_integer(name: str, x: Expr) -> None:
    if not is_int(x.dtype):
        hint = f": T.{name}(T.reinterpret(\"{_same_width_int(x.dtype)}\", x)) counts its " \
               f"bits" if is_float(x.dtype) else ": cast it first (T.Cast(\"int32\", x))"
        raise TypeError(f"T.{name} counts the bits of an integer, got {x.dtype}{hint}")


def _same_width_int(dtype: str) -> str:
    return f"int{bits(dtype)}"


def ldexp(x: Expr, exponent) -> Call:
    """`x * 2**exponent` of a float `x` and an int32 `exponent` (a Python int converts)."""
    exponent = convert(exponent, "int32")
    if not is_float(x.dtype):
        raise TypeError(f"T.ldexp scales a float by a power of 2, got {x.dtype}: cast it "
                        f"first (T.Cast(\"float32\", x))")
    if exponent.dtype != "int32":
        raise TypeError(f"T.ldexp takes an int32 exponent, got {exponent.dtype}: cast it "
                        f"(T.Cast(\"int32\", e))")
    return Call("ldexp", (x, exponent), x.dtype)


def call_problem(call: Call) -> str | None:
    """What is wrong with the operands of a bit intrinsic or ldexp call (the verifier's
    check), or None."""
    args = call.args
    if call.op == REINTERPRET:
        if len(args) != 1:
            return f"T.reinterpret takes one value, got {len(args)}"
        return _reinterpret_problem(call.dtype, args[0].dtype) if \
            call.dtype != args[0].dtype else None
    if call.op in BIT_FUNCTIONS:
        result = "int32" if call.op == "clz" else args[0].dtype if args else None
        if len(args) != 1 or not is_int(args[0].dtype) or call.dtype != result:
            return (f"T.{call.op} takes one integer and gives "
                    f"{'int32' if call.op == 'clz' else 'its dtype'}, got "
                    f"({', '.join(a.dtype for a in args)}) -> {call.dtype}")
        return None
    if call.op == "ldexp":
        if len(args) != 2 or not is_float(call.dtype) or args[0].dtype != call.dtype \
                or args[1].dtype != "int32":
            return (f"T.ldexp takes a float and an int32 and gives the float's dtype, got "
                    f"({', '.join(a.dtype for a in args)}) -> {call.dtype}")
    return None


def q_multiply_shift(x, y, q, s) -> Expr:
    """TVM's `q_multiply_shift(x, y, q, s)` of int32 operands, as the int64 arithmetic of its
    default lowering (see the module's docstring), folded where q and s are constants."""
    x, y, q, s = (convert(v, "int32") for v in (x, y, q, s))
    wrong = [f"{name} is {v.dtype}" for name, v in zip("xyqs", (x, y, q, s))
             if v.dtype != "int32"]
    if wrong:
        raise TypeError(f"T.q_multiply_shift takes int32 operands (x, y, q, s), but "
                        f"{', '.join(wrong)}: cast them first (T.Cast(\"int32\", v))")
    if isinstance(q, IntImm) and q.value <= 0:
        raise TypeError(f"T.q_multiply_shift: q, the number of fractional bits, must be "
                        f"positive, got {q.value}")
    zero = const(0, _WIDE)
    shift = Cast(_WIDE, s)
    left = simplify(binary("max", shift, zero))
    right = simplify(binary("add", binary("max", binary("sub", zero, shift), zero),
                         Cast(_WIDE, q)))
    wide_x = Cast(_WIDE, x)
    shifted = wide_x if left == zero else integer_call("shift_left", wide_x, left)
    product = binary("mul", shifted, Cast(_WIDE, y))
    rounded = binary("add", product, _half_unit(right))
    return simplify(Cast("int32", integer_call("shift_right", rounded, right)))


def _half_unit(right: Expr) -> Expr:
    """`1 << (right - 1)` in int64 (numpy's shift: 0 for a count outside [0, 64)), a
    constant where `right` is one."""
    if isinstance(right, IntImm):
        count = right.value - 1
        value = 1 << count if 0 <= count < 64 else 0
        return const(value - (1 << 64) if value >= 1 << 63 else value, _WIDE)
    return integer_call("shift_left", const(1, _WIDE), simplify(binary("sub", right,
                                                                       const(1, _WIDE))))

"""TVM's other spellings of arithmetic (`T.truncdiv`, `T.truncmod`, `T.Div`, `T.Mod`,
`T.FloorDiv`, `T.FloorMod`, `T.ceildiv`, `T.fabs`, `T.isnan`, `T.isinf`, `T.isfinite`,
`T.trunc`, `T.nearbyint`, `T.exp10`, `T.indexdiv`, `T.indexmod`): read as sched's own
nodes, and printed in those (`T.truncmod(a, b)` prints as `a - a / b * b` on integers).
"""

from __future__ import annotations

import math

from sched.ir.dtype import is_int
from sched.ir.nodes import Call, Expr, IntImm, Select, binary, const


def _integers(a: Expr, b: Expr) -> None:
    if not (is_int(a.dtype) and is_int(b.dtype)):
        raise TypeError(f"integer operands only, got {a.dtype} (for floats write a / b, or "
                        f"T.floor / T.ceil of it)")


def _truncdiv(a: Expr, b: Expr) -> Expr:
    """Division rounding toward zero: C's `/` on integers, the IR's `div` of ints."""
    _integers(a, b)
    return binary("div", a, b)


def _truncmod(a: Expr, b: Expr) -> Expr:
    """The remainder of `_truncdiv` (C's `%`): `a - truncdiv(a, b) * b`, and 0 where b is 0,
    as every integer `/`, `//` and `%` by 0 gives (the formula gave a: audit helper-115)."""
    remainder = binary("sub", a, binary("mul", _truncdiv(a, b), b))
    if isinstance(b, IntImm) and b.value != 0:
        return remainder
    return Select(binary("eq", b, const(0, b.dtype)), const(0, remainder.dtype), remainder)


def _ceildiv(a: Expr, b: Expr) -> Expr:
    """TVM's `ceildiv`: `(a + b - 1) // b` on integers, `ceil(a / b)` on floats."""
    if is_int(a.dtype):
        return binary("floordiv", binary("sub", binary("add", a, b), const(1, a.dtype)), b)
    return Call("ceil", (binary("div", a, b),), a.dtype)


def _trunc(a: Expr) -> Expr:
    """Rounding toward zero: floor of a value >= 0, ceil of the others (NaN stays NaN)."""
    if is_int(a.dtype):
        return a
    return Select(binary("ge", a, const(0, a.dtype)), Call("floor", (a,), a.dtype),
                  Call("ceil", (a,), a.dtype))


def _magnitude_test(a: Expr, op: str) -> Expr:
    """`abs(a) op inf`: T.isinf (op "eq") or T.isfinite ("lt", false for NaN); an integer is
    always finite."""
    if is_int(a.dtype):
        return const(op == "lt", "bool")
    return binary(op, Call("abs", (a,), a.dtype), const(math.inf, a.dtype))


# T.<name> of TVM's that sched writes with its own nodes (printed in those): (arity, build)
SPELLED = {
    "FloorDiv": (2, lambda a, b: binary("floordiv", a, b)),
    "FloorMod": (2, lambda a, b: binary("floormod", a, b)),
    "truncdiv": (2, _truncdiv), "Div": (2, lambda a, b: binary("div", a, b)),
    "truncmod": (2, _truncmod), "Mod": (2, _truncmod),
    "ceildiv": (2, _ceildiv),
    "fabs": (1, lambda a: Call("abs", (a,), a.dtype)),
    "isnan": (1, lambda a: binary("ne", a, a)),
    "isinf": (1, lambda a: _magnitude_test(a, "eq")),
    "isfinite": (1, lambda a: _magnitude_test(a, "lt")),
    "nearbyint": (1, lambda a: Call("round", (a,), a.dtype)),      # both half to even
    "exp10": (1, lambda a: Call("pow", (const(10, a.dtype), a), a.dtype)),
    "indexdiv": (2, lambda a, b: binary("floordiv", a, b)),         # TVM's index division
    "indexmod": (2, lambda a, b: binary("floormod", a, b)),
    "trunc": (1, _trunc),
}

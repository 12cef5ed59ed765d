"""Local rewrites of expressions: constant folding and identities, bottom-up, as a rule table.

This is the cheap simplifier every layer may call (the DSL, the parser, the passes). It never
reasons about ranges or divisibility: affine simplification of index expressions, which needs
that, is done by isl in `sched/lower/simplify_indices.py`.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from sched.ir.dtype import bits, is_float, is_int, max_value, min_value
from sched.ir.functor import IRMutator, collect
from sched.ir.nodes import (
    IMPURE_CALLS,
    BinaryOp,
    BufferLoad,
    Call,
    Cast,
    Expr,
    FloatImm,
    IntImm,
    Not,
    Select,
    const,
)


def _value(e: Expr):
    """A constant's value as the targets read it: a float constant rounded to its dtype
    (`T.float32(0.1)` is the float32 nearest 0.1, as the C literal and the interpreter have
    it)."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, FloatImm) and e.dtype != "bfloat16":      # (bfloat16: not folded)
        if e.dtype == "float64":
            return e.value
        with np.errstate(over="ignore"):             # beyond the type: inf, as C's literal
            return float({"float16": np.float16}.get(e.dtype, np.float32)(e.value))
    return None


def _pure(e: Expr) -> bool:
    """Whether `e` makes no opaque call (one that may have an effect or another value each
    time: `f() - f()` is not 0)."""
    return not any(call.op in IMPURE_CALLS for call in collect(e, Call))


def _droppable(e: Expr) -> bool:
    """Whether integer arithmetic may drop `e` (`e * 0`, `e - e`, `e % 1` are 0): it makes no
    opaque call and reads no data (no load, no call). Integer arithmetic on data wraps in its
    type, also inside an index, where index arithmetic alone is exact (README, "Indices"):
    `(vi * 2**30 + A[vi] * 0) // 2**30` wraps, and without `A[vi] * 0` it is vi (audit
    helper-122: the C target stored to C[vi] where the interpreter stored to C[0])."""
    return _pure(e) and not collect(e, BufferLoad) and not collect(e, Call)


def _offset(e: Expr) -> tuple[Expr, int]:
    """`e` as (x, c) with `e` = x + c (c = 0 where it adds no constant)."""
    if isinstance(e, BinaryOp) and e.op in ("add", "sub") and isinstance(e.b, IntImm):
        return e.a, e.b.value if e.op == "add" else -e.b.value
    return e, 0


def _same_base(a: Expr, b: Expr) -> bool:
    """Whether `a` and `b` are one expression reading no data plus two constants (a window's
    `(vi * 2 + 6) - (vi * 2 + 4)`: audit helper-126), whose difference fits their type."""
    (x, c), (y, d) = _offset(a), _offset(b)
    return bool(c or d) and x == y and _droppable(x) and _fits(c - d, a.dtype)


def _fold(op: str, x, y, dtype: str):
    """`x op y` for two constants of `dtype` with the IR's semantics, as the targets compute
    it, or None where it is not folded: a division by zero; an integer result outside the
    dtype (as data it wraps, as an index the lowering computes it in int64: the expression
    is kept for the one that applies, sched/lower/wide_integers.py); 16-bit floats (computed
    in float32 and rounded where stored, which one constant cannot say)."""
    if op in ("floordiv", "floormod", "div") and y == 0:
        return None
    if op == "div" and not is_float(dtype):
        return None
    if op in ("min", "max"):              # as the targets' helpers: NaN wins, else a on ties
        wins = y < x if op == "min" else y > x
        return y if (is_float(dtype) and math.isnan(y)) or wins else x
    if op in _COMPARE:
        return _COMPARE[op](x, y)
    if op in ("and", "or"):
        return (bool(x) and bool(y)) if op == "and" else (bool(x) or bool(y))
    if is_float(dtype):
        return _fold_float(op, x, y, dtype)
    value = {"add": x + y, "sub": x - y, "mul": x * y}.get(op)
    if value is None:                      # floor division and modulo, as Python's
        value = x // y if op == "floordiv" else x % y
    return value if min_value(dtype) <= value <= max_value(dtype) else None


_COMPARE = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
            "gt": operator.gt, "ge": operator.ge}
_FLOAT_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
              "floordiv": np.floor_divide, "floormod": np.remainder}


def _fold_float(op: str, x: float, y: float, dtype: str) -> float | None:
    """A float operation on constants in the dtype's own precision (float32 rounds at each
    operation), `//` and `%` numpy's as on the targets; None for the 16-bit floats."""
    if dtype not in ("float32", "float64"):
        return None
    real = np.float32 if dtype == "float32" else np.float64
    with np.errstate(all="ignore"):
        return float(_FLOAT_OPS[op](real(x), real(y)))


def _numpy_type(dtype: str):
    return np.float64 if is_float(dtype) else np.bool_ if dtype == "bool" else np.dtype(dtype)


def _fits(value: int, dtype: str) -> bool:
    return min_value(dtype) <= value <= max_value(dtype)


def wrap(value: int, dtype: str) -> int:
    """`value` wrapped to integer `dtype` (two's complement), as a conversion does."""
    span = 1 << bits(dtype)
    value %= span
    return value - span if dtype.startswith("int") and value >= span // 2 else value


def _is_signed_zero(e: Expr, negative: bool) -> bool:
    """Whether `e` is the float constant -0.0 (`negative`) or 0.0."""
    return isinstance(e, FloatImm) and e.value == 0 and \
        (math.copysign(1.0, e.value) < 0) == negative


def _is(e: Expr, value) -> bool:
    return _value(e) == value and not isinstance(_value(e), bool)


def _rewrite_binary(node: BinaryOp, positive: frozenset = frozenset()) -> Expr:
    a, b, op = node.a, node.b, node.op
    va, vb = _value(a), _value(b)
    if va is not None and vb is not None:
        folded = _fold(op, va, vb, a.dtype)
        if folded is not None and (is_float(a.dtype) or not isinstance(folded, float)):
            return const(folded, node.dtype)
    integer = not is_float(a.dtype)
    # the zero that leaves x as it is: for floats only x + (-0.0) and x - 0.0 (0.0 + -0.0 is
    # 0.0); x * 1 and x / 1 are x for floats too, x // 1 is not (2.5 // 1 is 2)
    plus_zero = _is(b, 0) if integer else _is_signed_zero(b, negative=True)
    minus_zero = _is(b, 0) if integer else _is_signed_zero(b, negative=False)
    # (condition, result): results are built only for the rule that matches
    rules = (
        (lambda: op == "add" and plus_zero, lambda: a),                      # x + 0 -> x
        (lambda: op == "add" and integer and _is(a, 0), lambda: b),          # 0 + x -> x
        (lambda: op == "sub" and minus_zero, lambda: a),                     # x - 0 -> x
        (lambda: op == "sub" and integer and a == b and _droppable(a),
         lambda: const(0, a.dtype)),                                         # x - x -> 0
        (lambda: op == "sub" and integer and _same_base(a, b),               # (x + 6) -
         lambda: const(_offset(a)[1] - _offset(b)[1], a.dtype)),             # (x + 4) -> 2
        (lambda: op == "mul" and _is(b, 1), lambda: a),                      # x * 1 -> x
        (lambda: op == "mul" and _is(a, 1), lambda: b),                      # 1 * x -> x
        (lambda: op == "mul" and integer and (_is(a, 0) and _droppable(b)
                                              or _is(b, 0) and _droppable(a)),
         lambda: const(0, a.dtype)),                                         # x * 0 -> 0
        (lambda: (op == "div" or op == "floordiv" and integer) and _is(b, 1),
         lambda: a),                                                         # x // 1 -> x
        (lambda: op == "floormod" and integer and _is(b, 1) and _droppable(a),
         lambda: const(0, a.dtype)),                                         # x % 1 -> 0
        (lambda: op in ("min", "max") and a == b and _pure(a), lambda: a),   # max(x, x) -> x
        (lambda: op == "and" and va == 1, lambda: b),                        # True and x -> x
        (lambda: op == "and" and vb == 1, lambda: a),                        # x and True -> x
        (lambda: op == "or" and va == 0, lambda: b),                         # False or x -> x
        (lambda: op == "or" and vb == 0, lambda: a),                         # x or False -> x
    )
    for matches, result in rules:
        if matches():
            return result()
    if integer and op == "add":
        whole = _quotient_and_remainder(a, b, positive)
        if whole is not None:
            return whole
    # x + (-c) -> x - c, x - (-c) -> x + c (integers)
    if integer and op in ("add", "sub") and vb is not None and vb < 0 \
            and not isinstance(a, IntImm) and _fits(-vb, a.dtype):
        return BinaryOp("sub" if op == "add" else "add", a, const(-vb, a.dtype))
    # (x + c1) + c2 -> x + (c1 + c2), likewise with -, so offsets collect in one constant
    if integer and op in ("add", "sub") and vb is not None and isinstance(a, BinaryOp) \
            and a.op in ("add", "sub") and _value(a.b) is not None:
        total = (a.b.value if a.op == "add" else -a.b.value) + (vb if op == "add" else -vb)
        if total == 0:
            return a.a
        if _fits(abs(total), a.dtype):
            return BinaryOp("add" if total > 0 else "sub", a.a, const(abs(total), a.dtype))
    return node


def _quotient_and_remainder(a: Expr, b: Expr, positive: frozenset) -> Expr | None:
    """`x` for `(x // d) * d + x % d` (either term first, either factor first) where `d` is
    nonzero: a nonzero constant or a product of variables of `positive` (symbolic dims, at
    least 1 at every call). The flat index of `B[vi, vj]` where fused loops of symbolic
    extents bind `vi = f // m, vj = f % m` is `f`. Not for another divisor: `x // 0` and
    `x % 0` are 0 in sched (a scalar parameter or a loaded value may be 0). Nor where `x`
    reads data: that arithmetic wraps, and a product of dims past 2**32 wraps to 0 (audit
    helper-124: `X[i] // (n * m) * (n * m) + X[i] % (n * m)` at n = m = 65536 is 0). None
    for any other sum."""
    for product, remainder in ((a, b), (b, a)):
        if not (isinstance(product, BinaryOp) and product.op == "mul"
                and isinstance(remainder, BinaryOp) and remainder.op == "floormod"):
            continue
        x, d = remainder.a, remainder.b
        for quotient, factor in ((product.a, product.b), (product.b, product.a)):
            if isinstance(quotient, BinaryOp) and quotient.op == "floordiv" and \
                    quotient.a == x and quotient.b == d and factor == d and _droppable(x) and \
                    _nonzero(d, positive):
                return x
    return None


def _nonzero(d: Expr, positive: frozenset) -> bool:
    if isinstance(d, IntImm):
        return d.value != 0
    if isinstance(d, Cast):     # widened (an int64 index of an int32 dim): the same value
        return is_int(d.dtype) and is_int(d.value.dtype) and \
            bits(d.dtype) >= bits(d.value.dtype) and _nonzero(d.value, positive)
    if isinstance(d, BinaryOp) and d.op == "mul":
        return _nonzero(d.a, positive) and _nonzero(d.b, positive)
    return d in positive


class _Simplifier(IRMutator):
    def __init__(self, positive: frozenset = frozenset()) -> None:
        super().__init__()
        self.positive = positive

    def visit_BinaryOp(self, node: BinaryOp) -> Expr:
        return _rewrite_binary(self.visit_children(node), self.positive)

    def visit_Not(self, node: Not) -> Expr:
        node = self.visit_children(node)
        if isinstance(node.a, IntImm):                           # not True -> False
            return const(not node.a.value, "bool")
        if isinstance(node.a, Not):                              # not not x -> x
            return node.a.a
        return node

    def visit_Select(self, node: Select) -> Expr:
        node = self.visit_children(node)
        if isinstance(node.condition, IntImm):                   # select(True, a, b) -> a
            return node.true_value if node.condition.value else node.false_value
        return node

    def visit_Cast(self, node: Cast) -> Expr:
        node = self.visit_children(node)
        if node.value.dtype == node.dtype:                       # cast<T>(x: T) -> x
            return node.value
        value = _value(node.value)
        if value is None or (is_int(node.dtype) and isinstance(value, float)) or \
                node.dtype in ("float16", "bfloat16"):
            return node
        if is_int(node.dtype):                                   # int -> int wraps
            return const(wrap(int(value), node.dtype), node.dtype)
        if node.dtype == "float32":      # rounded once, from the source's own type
            with np.errstate(over="ignore"):
                return const(float(np.array(value, _numpy_type(node.value.dtype))
                                   .astype(np.float32)), node.dtype)
        return const(value, node.dtype)                          # cast<T>(c) -> T(c)


def simplify(node, positive=()):
    """`node` (an expression or any IR) with constants folded and identities applied.
    `positive`: variables known to be at least 1 (a function's symbolic dims, checked at
    every call), for the identities that need a nonzero divisor."""
    return _Simplifier(frozenset(positive)).visit(node)

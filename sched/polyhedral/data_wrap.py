"""Data arithmetic as the model reads it: a condition inside a stored value (a
`T.if_then_else` of what a store writes) is data, whose int32 sums, differences, products,
left shifts and divisions (INT32_MIN // -1) the kernel computes modulo 2**32, as numpy does,
where an index computes them exactly (sched/lower/wide_integers.py). `wrapping_int32` marks
each such operation that may leave int32 over the variables' ranges with `isl_expr.WRAP32`,
which `to_isl` reads modulo 2**32; the access model (accesses.py) and decompose_padding ask
it.

    wrapping_int32(vi * 2**30 < 0, {vi: (0, 7)})      # WRAP32(vi * 2**30) < 0
"""

from __future__ import annotations

from sched.ir.dtype import INDEX_DTYPE, is_int, max_value, min_value
from sched.ir.intervals import combine_ranges, integer_operation
from sched.ir.nodes import BinaryOp, Call, Cast, Expr, IntImm, Not, Select, Var
from sched.polyhedral.isl_expr import WRAP32


def wrapping_int32(expr: Expr, ranges: dict) -> Expr:
    """`expr`, computed as data (a condition in what a store writes: the kernel computes its
    int32 arithmetic modulo 2**32, as numpy does, where an index computes it exactly), with
    each int32 sum, difference, product or left shift whose value may leave int32 marked so
    that `to_isl` reads it modulo 2**32 (a call `WRAP32` of it, which no IR of a program
    holds). `ranges` gives the variables' values (`interval`'s form; a variable without one
    may take any value of its type). Audit helper-143: `T.if_then_else(vi * 2**30 < 0,
    A[vi + 10**8], A[vi])` was read as never taking the far branch, which the kernel takes
    at vi = 2."""
    return _wrapping(expr, ranges)[0]


def _wrapping(expr: Expr, ranges: dict) -> tuple[Expr, tuple[int, int] | None]:
    """(`expr` marked as wrapping_int32 says, the range of the value the kernel computes for
    it; None for one that is not an integer)."""
    every = (min_value(expr.dtype), max_value(expr.dtype)) if is_int(expr.dtype) else None
    if isinstance(expr, IntImm):
        return expr, (expr.value, expr.value) if is_int(expr.dtype) else None
    if isinstance(expr, Var):
        return expr, ranges.get(expr, every)
    if isinstance(expr, Not):
        inner = _wrapping(expr.a, ranges)[0]
        return (expr if inner is expr.a else Not(inner)), None
    if isinstance(expr, Cast):
        inner, found = _wrapping(expr.value, ranges)
        node = expr if inner is expr.value else Cast(expr.dtype, inner)
        keeps = found is not None and every is not None and \
            every[0] <= found[0] and found[1] <= every[1]
        return node, found if keeps else every
    if isinstance(expr, Select):
        condition = _wrapping(expr.condition, ranges)[0]
        (a, ra), (b, rb) = (_wrapping(v, ranges) for v in (expr.true_value, expr.false_value))
        same = condition is expr.condition and a is expr.true_value and b is expr.false_value
        node = expr if same else Select(condition, a, b)
        return node, None if ra is None or rb is None else (min(ra[0], rb[0]),
                                                            max(ra[1], rb[1]))
    if isinstance(expr, BinaryOp):
        (a, ra), (b, rb) = _wrapping(expr.a, ranges), _wrapping(expr.b, ranges)
        node = expr if a is expr.a and b is expr.b else BinaryOp(expr.op, a, b)
    elif isinstance(expr, Call):
        args = tuple(_wrapping(arg, ranges) for arg in expr.args)
        node = expr if all(a is b for (a, _), b in zip(args, expr.args)) else \
            Call(expr.op, tuple(a for a, _ in args), expr.dtype)
        if expr.op != "shift_left" or len(args) != 2:
            # (its arguments marked: `T.shift_right(vi * 2**30, 30)` read its product
            # exactly, audit helper-147)
            return node, every
        ra, rb = args[0][1], (0, 0)
    else:
        return expr, every
    operation = integer_operation(node)
    if operation is None or every is None or ra is None or rb is None:
        return node, every
    op, _, power = operation
    found = combine_ranges(op, ra, rb if isinstance(node, BinaryOp) else
                           (power.value, power.value))
    if found is not None and every[0] <= found[0] and found[1] <= every[1]:
        return node, found
    if expr.dtype == INDEX_DTYPE and op in ("add", "sub", "mul", "floordiv", "div"):
        # (a division leaves int32 at INT32_MIN // -1, which wraps: audit helper-166)
        return Call(WRAP32, (node,), INDEX_DTYPE), every
    return node, every

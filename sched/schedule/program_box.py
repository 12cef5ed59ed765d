"""A box of a buffer as the program's own index expressions: where isl writes a bound of a box
piecewise (`T.if_then_else(ty <= 1, 0, 32)` for `ty // 2 * 32` over ty in [0, 4)), which
the polyhedral model cannot read back as a binding, the least index is the access's own
expression at the relaxed loops' first iteration, when isl proves it the least over the box,
and the extent the least constant isl proves covers it.
"""

from __future__ import annotations

from sched.ir.functor import substitute
from sched.ir.nodes import Expr, IntImm, Range, Var
from sched.ir.simplify import simplify
from sched.polyhedral.expr_equality import holds_on_box


def program_box(accesses: list[tuple[list[Expr], dict[Var, Range]]], fixed: dict[Var, Range],
                ndim: int) -> tuple[Range, ...] | None:
    """Per dimension, (least index, constant extent) over `accesses` (each: its index
    expressions in loop variables, and the loops relaxed for it with their ranges; `fixed`
    the other loops' ranges), when every access gives the same one; None otherwise."""
    if not accesses:
        return None
    box = []
    for dim in range(ndim):
        found = None
        for exprs, relaxed in accesses:
            expr = exprs[dim]
            low = simplify(substitute(expr, {v: r.min for v, r in relaxed.items()}))
            ranges = {**fixed, **relaxed}
            extent = _constant_extent(expr, low, ranges)
            if extent is None or holds_on_box(expr, ">=", low, ranges) is not True:
                return None
            candidate = Range(low, IntImm(extent, low.dtype))
            if found is not None and candidate != found:
                return None
            found = candidate
        box.append(found)
    return tuple(box)


def _constant_extent(expr: Expr, low: Expr, ranges: dict) -> int | None:
    """The least c with `expr < low + c` on the box, when isl proves one below 2**20."""
    high = 1
    while high < 2 ** 20:
        if holds_on_box(expr, "<", low + IntImm(high, low.dtype), ranges) is True:
            break
        high *= 2
    else:
        return None
    lo = high // 2
    while lo + 1 < high:          # the least c in (lo, high]
        mid = (lo + high) // 2
        if holds_on_box(expr, "<", low + IntImm(mid, low.dtype), ranges) is True:
            high = mid
        else:
            lo = mid
    return high

"""The box a block's declared region covers while some loops run in full, as expressions of
the variables outside them, by isl: what blockize needs for a loop inside another block,
where the polyhedral model's boxes are in the loops around that block (which the new block
may not name) and the enclosing block's variables are what the box must be written in.

    C_warp[v_i // 16, ...] with v_i = v_i_0 * 16 + i_1, i_1 in [0, 16)
        -> C_warp[v_i_0:v_i_0 + 1, ...]

Quasi-affine indices (the `// 16`, `% 8` of a warp layout) are exact; anything isl cannot
read gives None (the caller covers the whole buffer).
"""

from __future__ import annotations

import islpy as isl

from sched.ir.functor import free_vars, substitute
from sched.ir.nodes import BufferRegion, Expr, For, IntImm, Range, Var
from sched.ir.simplify import simplify
from sched.polyhedral.isl_expr import (
    NotAffine,
    isl_name,
    pw_aff_to_expr,
    range_constraint,
    to_isl,
)
from sched.polyhedral.isl_text import read_set


def relaxed_region(region: BufferRegion, bindings: dict[Var, Expr], loops: list[For],
                   outer: dict[Var, Range]) -> tuple[Range, ...] | None:
    """The box of `region` (in a block's variables, bound by `bindings`) over every iteration
    of `loops`, in the variables of `outer` (their ranges are the context), or None."""
    relaxed = {lp.loop_var for lp in loops}
    constraints = [range_constraint(lp.loop_var, lp.min, lp.extent) for lp in loops]
    context = [range_constraint(var, dom.min, dom.extent) for var, dom in outer.items()]
    if None in constraints or None in context:
        return None
    box = []
    for r in region.region:
        low = simplify(substitute(r.min, bindings))
        high = simplify(substitute(r.min + r.extent - IntImm(1, r.extent.dtype), bindings))
        used = set(free_vars(low)) | set(free_vars(high))
        if not used <= relaxed | set(outer):
            return None
        found = _bounds(low, high, relaxed, constraints, outer, context)
        if found is None:
            return None
        box.append(found)
    return tuple(box)


def _bounds(low: Expr, high: Expr, relaxed: set[Var], constraints: list[str],
            outer: dict[Var, Range], context: list[str]) -> Range | None:
    lo, hi = to_isl(low), to_isl(high)
    if lo is None or hi is None:
        return None
    params = ", ".join(isl_name(v) for v in outer)
    inner = ", ".join(isl_name(v) for v in relaxed)
    where = " and ".join(constraints) or "true"
    given = " and ".join(context) or "true"

    def extreme(expr: str, pick: str) -> isl.PwAff:
        values = read_set(f"[{params}] -> {{ [__value] : exists ({inner or '__none'} : "
                         f"{where} and __value = {expr}) and {given} }}")
        return values.dim_min(0) if pick == "min" else values.dim_max(0)

    try:
        first, last = extreme(lo, "min"), extreme(hi, "max")
        domain = read_set(f"[{params}] -> {{ : {given} }}")
        extent = last.sub(first).add(isl.PwAff(f"[{params}] -> {{ [(1)] }}"))
        variables = {isl_name(v): v for v in outer}
        start = pw_aff_to_expr(first, domain, variables)
        size = pw_aff_to_expr(extent, domain, variables)
    except (NotAffine, KeyError, isl.Error):
        return None
    return Range(start, size)

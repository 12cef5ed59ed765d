"""The bindings of a block's iteration variables as constraints of the polyhedral model
(statements.py): an affine binding is an equation, a piecewise-affine one (selects over
affine pieces) one disjunct per piece, and a non-affine one lets its variable take any value
in its domain within the bounds its terms and the block's predicate give
(binding_ranges.py), its runs told apart by the affine arguments of the binding
(injective_bindings.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from sched.ir.dtype import is_int, max_value, min_value
from sched.ir.functor import collect, substitute
from sched.ir.intervals import interval, loop_ranges, parameter_ranges
from sched.ir.nodes import BlockRealize, BufferLoad, Cast, Expr, PrimFunc
from sched.polyhedral.binding_ranges import binding_range, predicate_limits
from sched.polyhedral.injective_bindings import affine_arguments, determining_variables
from sched.polyhedral.isl_expr import isl_name, keeps_values, to_isl, to_isl_comparison


def block_bindings(func: PrimFunc, realize: BlockRealize, loops: list, env: dict, note):
    """(per iteration variable: (iter var, value, lo, extent) in isl text; constraints on
    the iteration variables; the same on the values, in loop variables; the instance keys
    of the non-affine bindings; the positions of the variables that give the keys back, or
    None: injective_bindings.py; the non-affine bindings: (iter var, whether it loads, the
    limits proven for it)) of `realize` under `loops`, the variables of `env` substituted;
    `note(message)` records an over-approximation."""
    block = realize.block
    bindings, own, in_domain, keys, loose = [], [], [], [], []
    loop_vars = {loop.var for loop in loops}
    predicate = substitute(realize.predicate, env)
    ranges = None
    for iter_var, value in zip(block.iter_vars, realize.iter_values):
        name = isl_name(iter_var.var)
        # (a nested block's domain may use the variables of the blocks around it)
        lo = to_isl(substitute(iter_var.dom.min, env))
        extent = to_isl(substitute(iter_var.dom.extent, env))
        value = substitute(value, env)
        bound = to_isl(value)
        if bound is None and _narrowed(value) is not None:
            ranges = ranges if ranges is not None else loop_ranges(
                [(lp.var, lp.min, lp.extent) for lp in loops], parameter_ranges(func))
            bound = _exactly_narrowed(value, ranges)
        if bound is None and to_isl_comparison(name, "=", value) is not None:
            bound = PiecewiseBinding(value)
        bindings.append((iter_var, bound, lo, extent))
        if lo is not None and extent is not None:
            own.append(f"{lo} <= {name} < {lo} + {extent}")
            if bound is not None:
                in_domain.append(binding_in_range(bound, lo, extent))
        if bound is not None:
            own.append(binding_equals(bound, name))
            continue
        limits = [f"{name} < {to_isl(bound)}" for x, bound in predicate_limits(predicate)
                  if x == value and to_isl(bound) is not None]  # (a fused loop's split)
        found = binding_range(value, loops, predicate, func.symbolic_vars)
        if found is not None:       # its affine bounds (binding_ranges.py)
            limits.append(f"{found[0]} <= {name} <= {found[1]}")
        own += limits
        loose.append((iter_var, bool(collect(value, BufferLoad)), tuple(limits)))
        arguments = [to_isl(a) for a in affine_arguments(value, loop_vars)]
        keys += [a for a in arguments if a not in keys]
    determined = None
    if keys:
        values = [substitute(v, env) for v in realize.iter_values]
        determined = determining_variables(values, keys, func.symbolic_vars)
        given_back = "" if determined is None else (
            f", which {', '.join(block.iter_vars[p].var.name for p in determined[0])}"
            f"{''.join(f', {keys[g]}' for g in determined[1])} give back (runs at equal "
            f"values are one run)")
        for (iter_var, bound, _, _), value in zip(bindings, values):
            if bound is None:
                arguments = [to_isl(a) for a in affine_arguments(value, loop_vars)]
                note(f"the binding of '{iter_var.var.name}' in block '{block.name}' "
                          f"({value.script()}) is not affine; the model lets it take any "
                          f"value in its domain and tells the block's runs apart by "
                          f"{', '.join(arguments) or 'nothing'}{given_back} (a step that "
                          f"changes those is refused)")
    return bindings, own, in_domain, keys, determined, tuple(loose)




@dataclass(frozen=True)
class PiecewiseBinding:
    """A binding whose value is piecewise affine: selects with affine conditions over affine
    pieces (`T.if_then_else(io <= 1, io * 4, 12 - io * 4) + ax0`, a region's start as isl's
    AST builder wrote it). isl's syntax has no select inside a constraint, so each comparison
    with it is one disjunct per piece (`to_isl_comparison`)."""

    value: Expr


def binding_equals(bound: str | PiecewiseBinding, text: str) -> str:
    """The constraint `text = bound` (`bound`: an affine binding's isl text, or piecewise)."""
    if isinstance(bound, PiecewiseBinding):
        return to_isl_comparison(text, "=", bound.value)
    return f"{text} = {bound}"


def binding_in_range(bound: str | PiecewiseBinding, lo: str, extent: str) -> str:
    """The constraint `lo <= bound < lo + extent`."""
    if isinstance(bound, PiecewiseBinding):
        return (f"({to_isl_comparison(lo, '<=', bound.value)}) and "
                f"({to_isl_comparison(f'({lo}) + ({extent})', '>', bound.value)})")
    return f"{lo} <= {bound} < {lo} + {extent}"


def _narrowed(value: Expr) -> Cast | None:
    """The narrowing cast `value` is, under a widening one where there is one: a split of an
    int16 loop binds `T.Cast("int16", i_0 * 32 + i_1)` (schedule/loops.py)."""
    if isinstance(value, Cast) and isinstance(value.value, Cast) and \
            is_int(value.value.dtype) and keeps_values(value.value.dtype, value.dtype):
        value = value.value     # (uint16 of a negative int16 changes it: audit helper-191)
    if isinstance(value, Cast) and is_int(value.dtype) and is_int(value.value.dtype) and \
            value.dtype not in ("int32", "int64"):
        return value
    return None


def _exactly_narrowed(value: Expr, ranges: dict) -> str | None:
    """`value`'s isl text where it is a narrowing cast of affine int32/int64 arithmetic whose
    values over the loops (`ranges`) all fit the narrow type, so the cast changes none of
    them; else None (audit helper-189: parallel, vectorize and bind of a split int16 loop
    were refused as a non-affine binding)."""
    cast = _narrowed(value)
    text = to_isl(cast.value)
    found = interval(cast.value, ranges) if text is not None else None
    if found is None or not min_value(cast.dtype) <= found[0][0] <= found[0][1] <= \
            max_value(cast.dtype):
        return None
    return text

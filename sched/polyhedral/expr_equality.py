"""Whether two integer index expressions agree at every point of a box of their variables,
decided by isl: used where an access is quasi-affine (`4 * (i % 8) + j % 8 // 2`, the lane of a
warp-register layout) and a syntactic comparison of affine forms cannot see that two spellings
are one function.

    equal_on_box(a, b, {i: Range(0, 16), j: Range(0, 16)})   # True, False or None

None when either expression is not quasi-affine (isl cannot read it) or a bound of the box is
not a constant expression isl reads; variables missing from the box range over all integers.
"""

from __future__ import annotations

from sched.ir.functor import free_vars
from sched.ir.nodes import Expr, Range, Var
from sched.polyhedral.isl_expr import isl_name, range_constraint, to_isl, to_isl_condition
from sched.polyhedral.isl_text import read_set


def equal_on_box(a: Expr, b: Expr, box: dict[Var, Range]) -> bool | None:
    """True when `a == b` for every integer point with each variable of `box` in its range
    (`min <= v < min + extent`, the bounds may use other variables); False when some point
    differs; None when isl cannot read `a`, `b` or a bound."""
    left, right = to_isl(a), to_isl(b)
    if left is None or right is None:
        return None
    names = set()
    constraints = []
    for var, extent in box.items():
        low, size = to_isl(extent.min), to_isl(extent.extent)
        if low is None or size is None:
            return None
        name = isl_name(var)
        constraints.append(f"{low} <= {name} < ({low}) + ({size})")
        names |= {isl_name(v) for v in (*free_vars(extent.min), *free_vars(extent.extent))}
        names.add(name)
    names |= {isl_name(v) for v in (*free_vars(a), *free_vars(b))}
    differ = f"({left}) < ({right}) or ({left}) > ({right})"
    where = " and ".join([*constraints, f"({differ})"])
    points = read_set(f"{{ [{', '.join(sorted(names))}] : {where} }}")
    return points.is_empty()


def same_truth_on_box(a: Expr, b: Expr, box: dict[Var, Range]) -> bool | None:
    """True when the conditions `a` and `b` are both true or both false at every integer
    point of `box` (as in equal_on_box), False when they differ somewhere, None when isl cannot
    read a condition or a bound."""
    left, right = to_isl_condition(a), to_isl_condition(b)
    if left is None or right is None:
        return None
    names, constraints = set(), []
    for var, extent in box.items():
        low, size = to_isl(extent.min), to_isl(extent.extent)
        if low is None or size is None:
            return None
        constraints.append(f"{low} <= {isl_name(var)} < ({low}) + ({size})")
        names |= {isl_name(v) for v in (*free_vars(extent.min), *free_vars(extent.extent))}
        names.add(isl_name(var))
    names |= {isl_name(v) for v in (*free_vars(a), *free_vars(b))}
    space = ", ".join(sorted(names))
    where = " and ".join(constraints) or "true"
    return read_set(f"{{ [{space}] : {where} and ({left}) }}").is_equal(
        read_set(f"{{ [{space}] : {where} and ({right}) }}"))


def first_decides(condition: Expr, at_first: Expr, loops: dict[Var, Range]) -> bool | None:
    """True when `at_first` (`condition` at the first values of `loops`) holds exactly where
    `condition` holds for some values of `loops` in their ranges, for every value of the other
    variables (`k_0 * 32 + k_1 < m` over k_0, k_1 holds somewhere iff `0 < m`); False when
    not, None when isl cannot read a condition or a bound."""
    some, first = to_isl_condition(condition), to_isl_condition(at_first)
    if some is None or first is None:
        return None
    ranges, inner = [], sorted(isl_name(v) for v in loops)
    for var, extent in loops.items():
        low, size = to_isl(extent.min), to_isl(extent.extent)
        if low is None or size is None:
            return None
        ranges.append(f"{low} <= {isl_name(var)} < ({low}) + ({size})")
    outer = sorted({isl_name(v) for v in (*free_vars(condition), *free_vars(at_first))
                    for v in (v,) if v not in loops} |
                   {isl_name(v) for r in loops.values()
                    for v in (*free_vars(r.min), *free_vars(r.extent)) if v not in loops})
    space = ", ".join(outer)
    where = " and ".join([*ranges, f"({some})"])
    somewhere = read_set(f"{{ [{space}] : exists {', '.join(inner)} : {where} }}")
    return somewhere.is_equal(read_set(f"{{ [{space}] : {first} }}"))


def holds_on_box(left: Expr, relation: str, right: Expr, box: dict[Var, Range]) -> bool | None:
    """True when `left <relation> right` (one of `<`, `<=`, `>`, `>=`) at every integer point
    of `box` (as in equal_on_box), False when it fails at some point, None when isl cannot
    read an expression or a bound. A guard that holds on the loops' ranges (`ty // 2 * 32 +
    ax0 < 128` under `ty in [0, 4)`, `ax0 in [0, 32)`) need not be written."""
    negation = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}[relation]
    low, high = to_isl(left), to_isl(right)
    if low is None or high is None:
        return None
    names = {isl_name(v) for v in (*free_vars(left), *free_vars(right))}
    constraints = []
    for var, extent in box.items():
        constraint = range_constraint(var, extent.min, extent.extent)
        if constraint is None:
            return None
        constraints.append(constraint)
        names |= {isl_name(v) for v in (*free_vars(extent.min), *free_vars(extent.extent))}
        names.add(isl_name(var))
    where = " and ".join([*constraints, f"({low}) {negation} ({high})"])
    return read_set(f"{{ [{', '.join(sorted(names))}] : {where} }}").is_empty()

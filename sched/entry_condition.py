"""The condition on a kernel's symbolic dims and integer scalars under which some access
would be out of bounds (`in_bounds.bounds_report`'s conditional violations), written as C by
isl for the generated entry points (`sched.c.entry`, the exported interface), which check it
at every call as `ArgumentBinder.entry_check` does in Python.
"""

from __future__ import annotations

from sched.ir.dtype import is_int
from sched.ir.nodes import PrimFunc, Var


def entry_condition_c(func: PrimFunc) -> tuple[tuple[Var, ...], str] | None:
    """The entry check of `func` (see `ArgumentBinder.entry_check`) as C: the variables (symbolic
    dims and integer scalar parameters) and an expression over `sched_p0, sched_p1, ...` (their
    values, int64, in that order) that is true exactly when some access would be out of
    bounds, written by isl (it may use `floord`, `min` and `max`); None when there is no
    condition. Raises ValueError when isl cannot write it."""
    import islpy as isl

    from sched.polyhedral.in_bounds import bounds_report
    from sched.polyhedral.isl_expr import isl_name

    scalars = [p for p in func.params if isinstance(p, Var) and is_int(p.dtype)]
    by_name = {isl_name(v): v for v in (*func.symbolic_vars, *scalars)}
    conditional = bounds_report(func).conditional
    if not conditional:
        return None
    condition = conditional[0].condition
    for violation in conditional[1:]:          # (one condition over every parameter)
        condition = condition.union(violation.condition)
    condition = _without_unused_params(condition.coalesce())
    names = [condition.get_dim_name(isl.dim_type.param, i)
             for i in range(condition.dim(isl.dim_type.param))]
    if any(name not in by_name for name in names):
        raise ValueError("the entry condition's parameters are not the function's "
                         "symbolic dims and integer scalars")
    for i in range(len(names)):
        condition = condition.set_dim_name(isl.dim_type.param, i, f"sched_p{i}")
    build = isl.AstBuild.from_context(isl.Set.universe(condition.get_space()))
    try:
        text = build.expr_from_set(condition).to_C_str()
    except isl.Error as error:
        raise ValueError(f"isl cannot write the entry condition as C: {error}") from None
    return tuple(by_name[name] for name in names), f"({text})"


def magnitude_checked_scalars(func: PrimFunc) -> list[str]:
    """The names of the int64 scalars whose magnitude calls check (see in_bounds
    BeyondMagnitude), for messages."""
    from sched.polyhedral.scalar_wrap import scalars_that_may_wrap

    return sorted(v.name for v in scalars_that_may_wrap(func))


def entry_condition_function(name: str, result: str, condition: str, count: int) -> str:
    """C source of `static inline <result> <name>(sched_p0, ...)` returning `condition` (from
    entry_condition_c) over `count` int64 values. It computes in 128 bits where the compiler
    has them: an int64 scalar at -2**63 made `p1 + p2 + 3 >= p0` overflow in int64 and
    pass (audit helper-114)."""
    params = ", ".join(f"sched_entry_int sched_p{i}" for i in range(count))
    return "\n".join([
        "#ifdef __SIZEOF_INT128__",
        "typedef __int128 sched_entry_int;",
        "#else",
        "typedef long long sched_entry_int;",
        "#endif",
        "#define floord(n, d) (((n) < 0) ? -((-(n) + (d) - 1) / (d)) : (n) / (d))",
        "#define min(a, b) ((a) < (b) ? (a) : (b))",
        "#define max(a, b) ((a) > (b) ? (a) : (b))",
        f"static inline {result} {name}({params}) {{",
        f"    return {condition};", "}",
        "#undef floord", "#undef min", "#undef max", ""])


def _without_unused_params(condition):
    """`condition` without the isl parameters it does not involve (e.g. a float scalar the
    model carries along), which are then no argument of the C condition."""
    import islpy as isl

    for i in reversed(range(condition.dim(isl.dim_type.param))):
        if not condition.involves_dims(isl.dim_type.param, i, 1):
            condition = condition.project_out(isl.dim_type.param, i, 1)
    return condition

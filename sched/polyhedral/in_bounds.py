"""Proving every access in bounds, with isl: what is proven, what is checked at kernel entry,
and what cannot be proven.

For each access of each statement (in the view's own dimensions, under the statement's domain:
loop bounds, `T.where`, `if` and `T.if_then_else` guards included, so a padding read guarded by
its condition is in bounds), the elements outside the buffer's shape box are computed, and so
are the loop points where a binding leaves its iteration variable's domain (`vi = i + 1` over
`i < 8` with `vi` in `[0, 8)`: the model would silently drop the instance). The parameters
(symbolic dims and integer scalar parameters) of a violation say when it happens:

- never: proven in bounds;
- for every value (always, when every shape is constant): an error at `Schedule(func)` creation
  and at `sched.build`, naming the block, the access and one offending element
  (`check_in_bounds`);
- for some values: a condition on the parameters, tested at each kernel call before the kernel
  runs (`entry_bounds_check`, called by `sched.arguments.ArgumentBinder`), as Halide checks its
  images on entry: a `KernelArgumentError` names the access and the values.

What cannot be proven: an index that is not affine (an indirect index `A[B[i]]`, a product of
two variables) is modelled as the whole dimension, and a statement whose binding, predicate or
enclosing condition is not affine has more instances in the model than it runs; their accesses
are listed in `BoundsReport.unproven` (and refused by `check_in_bounds(func, strict=True)`, which
`sched.build(..., check_bounds="strict")` uses) but not checked: the generated code does not
check bounds at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import islpy as isl

from sched.errors import KernelArgumentError
from sched.ir.functor import collect
from sched.ir.intervals import block_ranges, interval
from sched.ir.memo import identity_cache
from sched.ir.nodes import (
    BIT_FUNCTIONS,
    INT_FUNCTIONS,
    MATH_FUNCTIONS,
    BufferLoad,
    Call,
    IntImm,
    PrimFunc,
    Var,
)
from sched.polyhedral import names
from sched.polyhedral.block_bindings import binding_in_range
from sched.polyhedral.isl_build import integer_val
from sched.polyhedral.isl_expr import INT64_MAGNITUDE, isl_name, to_isl
from sched.polyhedral.isl_text import first_point, read_set
from sched.polyhedral.model import (
    PolyModel,
    Statement,
    ViewAccess,
    build_footprint_model,
)
from sched.polyhedral.scalar_wrap import scalars_that_may_wrap


@dataclass(frozen=True)
class OutOfBounds:
    """An access (or a binding) out of bounds where `condition` (a parameter set) holds."""

    block: str
    what: str             # "reads A[vi + 1]", "binds vi = i + 1"
    example: str          # one offending instance and element
    condition: isl.Set    # the parameter values for which it happens
    always: bool          # for every value of the parameters
    example_at: Callable[[dict[str, int]], str] | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"block '{self.block}' {self.what} out of bounds: {self.example}"

    def happens_at(self, values: dict[str, int]) -> bool:
        """Whether it happens for these parameter values (isl names -> ints)."""
        return not _fix(self.condition, values).is_empty()

    def described(self, values: dict[str, int]) -> str:
        """What happens at these parameter values, for the message of a refused call."""
        return (f"block '{self.block}' {self.what} out of bounds "
                f"({self.example_at(values)}): pass arrays and values for which every access "
                f"is in bounds")


@dataclass(frozen=True)
class BeyondMagnitude(OutOfBounds):
    """An int64 scalar parameter the model reads in index arithmetic, past the magnitude it
    is proven for (`isl_expr.INT64_MAGNITUDE`: sums and products of int64 variables up to
    it are read exactly where they stay below 2**63; past it, the kernel's arithmetic may
    wrap where the model's does not: audit helper-143, `T.min(m * 3, 0)` at m = 2**62 + 1)."""

    def described(self, values: dict[str, int]) -> str:
        return (f"block '{self.block}' {self.what}, whose sums and products the compiler "
                f"reads exactly (so proves the kernel's accesses in bounds) only for values up "
                f"to 2**40 in magnitude: pass a smaller value")


@dataclass(frozen=True)
class BoundsReport:
    """Every violation found, and the accesses that could not be proven in bounds."""

    violations: tuple[OutOfBounds, ...]
    unproven: tuple[str, ...]
    params: tuple[str, ...]
    # of the unproven, those out of bounds at some point where the conditions the model
    # cannot read would hold (an affine index under a data-dependent guard): not checked at
    # run time, so build warns of them
    possible: tuple[str, ...] = ()
    # of the unproven, the accesses whose index is arithmetic of variables and constants the
    # model cannot read (unsigned or narrowing arithmetic, a product of two variables, `% m`):
    # not
    # checked at run time either, so build warns of them (a gather's index, read from
    # memory, is the program's to keep in bounds)
    unread: tuple[str, ...] = ()

    @property
    def always(self) -> tuple[OutOfBounds, ...]:
        return tuple(v for v in self.violations if v.always)

    @property
    def conditional(self) -> tuple[OutOfBounds, ...]:
        return tuple(v for v in self.violations if not v.always)


def _fix(condition: isl.Set, values: dict[str, int]) -> isl.Set:
    for position in range(condition.dim(isl.dim_type.param)):
        name = condition.get_dim_name(isl.dim_type.param, position)
        if name in values:
            condition = condition.fix_val(isl.dim_type.param, position,
                                          integer_val(int(values[name]),
                                                      condition.get_ctx()))
    return condition


def _point(relation, values: dict[str, int] | None = None) -> isl.Point:
    """One point of `relation` (a map as a wrapped set, or a set): the first, for readability,
    where there is one (`first_point`)."""
    found = relation.wrap() if isinstance(relation, isl.Map) else relation
    if values:
        found = _fix(found, values)
    return first_point(found)


def _coordinates(point: isl.Point, count: int, start: int = 0) -> list[int]:
    return [point.get_coordinate_val(isl.dim_type.set, start + d).to_python()
            for d in range(count)]


def _param_values(point: isl.Point, space_set) -> str:
    found = [f"{space_set.get_dim_name(isl.dim_type.param, i)} = "
             f"{point.get_coordinate_val(isl.dim_type.param, i).to_python()}"
             for i in range(space_set.dim(isl.dim_type.param))]
    return f" (with {', '.join(found)})" if found else ""


def _instance(statement: Statement, values: list[int]) -> str:
    inner = ", ".join(f"{iv.var.name}={v}" for iv, v in zip(statement.block.iter_vars, values))
    return f"{statement.block.name}{' (init)' if statement.is_init else ''}[{inner}]"


def _access_text(view: ViewAccess) -> str:
    indices = ", ".join(i.script() for i in view.access.indices)
    return f"{'writes' if view.is_write else 'reads'} {view.buffer.name}[{indices}]"


def _box(model: PolyModel, view: ViewAccess) -> tuple[isl.Set | None, bool]:
    """The buffer's shape box in the view's own space, and whether every dim is affine."""
    buffer = view.buffer
    elements = [names.local("a", d) for d in range(buffer.ndim)]
    extents = [to_isl(dim) for dim in buffer.shape]
    constraints = [f"0 <= {e} < {x}" for e, x in zip(elements, extents) if x is not None]
    box = read_set(f"[{', '.join(model.params)}] -> {{ {names.buffer_tuple(buffer.name)}"
                  f"[{', '.join(elements)}] : {' and '.join(constraints) or 'true'} }}")
    return box, None not in extents


def _access_violation(model, statement, view, context) -> OutOfBounds | None:
    box, _ = _box(model, view)
    if view.relation.range().is_subset(box):
        # every element touched is in the box: a test of the elements alone, milliseconds
        # where subtracting the box from the access took 18 s (a cooperative fetch of a
        # conv2d's halo tile, whose instances' domain keeps divisions as existentials)
        return None
    bad = view.relation.subtract_range(box).intersect_params(context)
    if bad.is_empty():
        return None
    condition = bad.params()
    n_dims = len(statement.dim_names)
    shape = ", ".join(d.script() for d in view.buffer.shape)

    def example(values: dict[str, int] | None = None) -> str:
        point = _point(bad, values)
        instance = _instance(statement, _coordinates(point, n_dims))
        element = _coordinates(point, view.buffer.ndim, n_dims)
        where = "" if values else _param_values(point, bad.wrap())
        return (f"{instance} {'writes' if view.is_write else 'reads'} {view.buffer.name}"
                f"[{', '.join(map(str, element))}]{where}, but {view.buffer.name} has shape "
                f"({shape}{',' if view.buffer.ndim == 1 else ''})")
    return OutOfBounds(statement.block.name, _access_text(view), example(), condition,
                       context.is_subset(condition), example)


def _binding_violations(model, statement, context) -> list[OutOfBounds]:
    """Loop points where an affine binding leaves its iteration variable's domain."""
    found = []
    loops = statement.loop_names()
    for iter_var, bound, lo, extent in statement.bindings:
        if bound is None or lo is None or extent is None:
            continue
        outside = " and ".join(statement.context +
                               [f"not ({binding_in_range(bound, lo, extent)})"])
        bad = read_set(f"[{', '.join(model.params)}] -> {{ [{', '.join(loops)}] : "
                      f"{outside} }}").intersect_params(context)
        if bad.is_empty():
            continue
        domain = f"[{lo}, {extent})" if lo == "0" else f"[{lo}, {lo} + {extent})"

        def example(values: dict[str, int] | None = None, bad=bad, name=iter_var.var.name,
                    domain=domain) -> str:
            point = _point(bad, values)
            at = ", ".join(f"{lp.var.name}={v}" for lp, v in
                           zip(statement.loops, _coordinates(point, len(loops))))
            where = "" if values else _param_values(point, bad)
            return f"at {at}{where} the binding of '{name}' is outside its domain {domain}"
        found.append(OutOfBounds(statement.block.name, f"binds {iter_var.var.name}", example(),
                                 bad.params(), context.is_subset(bad.params()), example))
    return found


def _loose_bindings_outside(model, statement, context) -> list[tuple[str, bool]]:
    """For each non-affine binding (`Statement.loose_bindings`) whose known bounds do not keep
    it in its iteration variable's domain: its description and whether its value reads
    memory. The model takes such a variable as inside its domain, so an access through it
    was proven in bounds where the kernel reads past the buffer (audit helper-179:
    `v0 = i_0 * 4 + f // k` over `f` in `range(4 * k)` past m rows wrote 15 floats past
    B, under strict too)."""
    found = []
    loops = statement.loop_names()
    domains = {iter_var: (lo, extent) for iter_var, _, lo, extent in statement.bindings}
    for iter_var, reads_memory, limits in statement.loose_bindings:
        lo, extent = domains[iter_var]
        name = isl_name(iter_var.var)
        where = f"binds {iter_var.var.name}"
        if lo is None or extent is None:
            found.append((where, reads_memory))
            continue
        outside = " and ".join([*statement.context, *limits,
                                f"not ({lo} <= {name} < {lo} + {extent})"])
        bad = read_set(f"[{', '.join(model.params)}] -> {{ [{', '.join([*loops, name])}] : "
                       f"{outside} }}").intersect_params(context)
        if not bad.is_empty():
            found.append((where, reads_memory))
    return found


def _beyond_magnitude(func: PrimFunc, model: PolyModel, context) -> list[BeyondMagnitude]:
    """For each int64 scalar parameter whose value may pass int64 on the way to an operation
    other than a sum, difference or product in index arithmetic (`scalars_that_may_wrap`),
    the values past INT64_MAGNITUDE (see BeyondMagnitude). Sums, differences and products
    wrap alike on the way: where the exact value is in bounds, so is the kernel's (`vi + off
    + m` at off = -2**63 + 3, m = 2**63 - 1 is vi + 2); another operation on a wrapped value
    is not (`T.min(m * 3, 0)` at m = 2**62 + 1), while one on the scalar itself is exact (a
    `T.Cast("int64", vi) < limit` at limit = 2**63 - 1)."""
    found = []
    for var, block in scalars_that_may_wrap(func).items():
        name = isl_name(var)
        beyond = read_set(f"[{', '.join(model.params)}] -> {{ : {name} > {INT64_MAGNITUDE} "
                          f"or {name} < -{INT64_MAGNITUDE} }}").intersect_params(context)

        def example(values: dict[str, int] | None = None, name=name, var=var) -> str:
            return f"{var.name} = {(values or {}).get(name, INT64_MAGNITUDE + 1)}"
        found.append(BeyondMagnitude(block, f"computes integer arithmetic with {var.name}",
                                     example(), beyond, False, example))
    return found


def _within_shape(load: BufferLoad, ranges: dict) -> bool:
    """Whether every index of `load` stays in its dimension, a constant, over `ranges`."""
    for index, dim in zip(load.indices, load.buffer.shape):
        found = interval(index, ranges)
        if not isinstance(dim, IntImm) or found is None or \
                not 0 <= found[0][0] <= found[0][1] < dim.value:
            return False
    return len(load.indices) == len(load.buffer.shape)


def _reads_data(index) -> bool:
    """Whether `index` loads memory or makes an opaque call (a gather, which the build does
    not warn of); an intrinsic of the loops (a shift, a bitwise operation, `T.abs`) is
    arithmetic (a shift by 32 of int32, `T.bitwise_xor(vi, 16)`, `T.abs(vi - 20)` were not
    warned of, and accessed out of bounds: audit helpers 131, 132)."""
    return bool(collect(index, BufferLoad)) or any(
        call.op not in (*INT_FUNCTIONS, *BIT_FUNCTIONS, *MATH_FUNCTIONS)
        for call in collect(index, Call))


@identity_cache(maxsize=64)
def bounds_report(func: PrimFunc) -> BoundsReport:
    """Every access of `func` checked against its buffer's shape (see the module doc)."""
    model = build_footprint_model(func)
    dims = [f"{isl_name(v)} >= 1" for v in func.symbolic_vars]   # sizes: at least 1
    context = read_set(f"[{', '.join(model.params)}] -> {{ : {' and '.join(dims) or 'true'} }}")
    violations, unproven, possible, unread = [], [], [], []
    for statement in model.statements.values():
        if not statement.is_init:
            for found in _binding_violations(model, statement, context):
                if statement.exact:
                    violations.append(found)
                else:           # a loop bound or condition was widened: maybe never happens
                    unproven.append(f"block '{statement.block.name}' {found.what}: may be "
                                    f"outside its domain ({found.example}); the model "
                                    f"over-approximates where it happens")
                    possible.append(unproven[-1])
        for what, reads_memory in _loose_bindings_outside(model, statement, context):
            where = f"block '{statement.block.name}' {what}"
            unproven.append(f"{where}: a binding the model cannot read (not affine) may "
                            f"leave its domain")
            if not reads_memory:        # (a gather's binding is the program's to keep)
                unread.append(f"{where}, a binding that is not affine, which the compiler "
                              f"does not compare with its domain")
        loads = [x for e in statement.unseen for x in collect(e, BufferLoad)]
        ranges = block_ranges(func, statement.block) if loads else {}
        for load in loads:
            # a load in a binding, a predicate, a loop bound or a condition is no access
            # of the model (audit helper-138: `T.where(A[i + 10**8] > 0)` segfaulted); said
            # unless interval arithmetic keeps it in a constant shape (`T.where(M[i] > 0)`
            # over i < 16 of M's 16: helper-140)
            if _within_shape(load, ranges):
                continue
            where = f"block '{statement.block.name}' loads {load.script()}"
            unproven.append(f"{where} in a binding, predicate, bound or condition")
            unread.append(f"{where} in a binding, predicate, bound or condition, where the "
                          f"compiler does not compare it with the buffer's shape")
        for view in statement.accesses:
            _, affine_shape = _box(model, view)
            found = _access_violation(model, statement, view, context)
            where = f"block '{statement.block.name}' {_access_text(view)}"
            if not view.access.is_affine or not affine_shape:
                unproven.append(f"{where}: an index or a dimension is not affine")
                if affine_shape and not any(_reads_data(i) for i in view.access.indices):
                    unread.append(f"{where}: its index is arithmetic the compiler cannot "
                                  f"read as affine (unsigned or narrowing arithmetic, a "
                                  f"product of two variables, a division or remainder by a "
                                  f"variable)")
            elif found is not None and not (statement.exact and view.access.guards_exact):
                unproven.append(f"{where}: may be out of bounds ({found.example}); the model "
                                f"over-approximates where it happens")
                possible.append(unproven[-1])
            elif found is not None:
                violations.append(found)
    violations += _beyond_magnitude(func, model, context)
    return BoundsReport(tuple(violations), tuple(dict.fromkeys(unproven)), tuple(model.params),
                        tuple(dict.fromkeys(possible)), tuple(dict.fromkeys(unread)))


def check_in_bounds(func: PrimFunc, strict: bool = False) -> OutOfBounds | str | None:
    """The first access of `func` out of bounds for every value of the symbolic dims (with
    constant shapes: at all), or None. With `strict`, an access that cannot be proven in bounds
    is refused too (returned as its description)."""
    report = bounds_report(func)
    if report.always:
        return report.always[0]
    if strict and report.unproven:
        return report.unproven[0]
    return None


class OutOfBoundsError(ValueError):
    """A function accesses memory out of bounds (or, strictly, may)."""


def out_of_bounds_error(func: PrimFunc, found: OutOfBounds | str, where: str) -> ValueError:
    """The error for `found` (see check_in_bounds), raised at `where` (`Schedule`, `build`)."""
    if isinstance(found, str):
        return OutOfBoundsError(f"{where}: function '{func.name}' has an access that cannot be "
                                f"proven in bounds: {found}. Build with check_bounds='static' "
                                f"to accept it unchecked.")
    return OutOfBoundsError(f"{where}: function '{func.name}' accesses memory out of bounds: "
                            f"{found}. Fix the index or the buffer's shape, or guard the access "
                            f"with T.where or an if.")


def entry_bounds_check(func: PrimFunc):
    """A function of the parameter values ({Var: int}) that raises KernelArgumentError when
    some access of `func` would be out of bounds for them, or None when no access depends on
    them (Halide's checks at entry). Results are cached per distinct values."""
    report = bounds_report(func)
    conditional = report.conditional
    if not conditional:
        return None
    checked: set[tuple] = set()

    def check(values: dict[Var, int]) -> None:
        named = {isl_name(var): value for var, value in values.items()
                 if isinstance(value, int) and not isinstance(value, bool)}
        key = tuple(sorted(named.items()))
        if key in checked:
            return
        for violation in conditional:
            if violation.happens_at(named):
                given = ", ".join(f"{var.name} = {value}" for var, value in values.items()
                                  if isl_name(var) in report.params)
                raise KernelArgumentError(f"kernel '{func.name}': with {given}, "
                                          f"{violation.described(named)}")
        checked.add(key)
    return check

"""Whether the loops around a reduction block run each of its instances once, every point of
the reduce domain for each output element, starting at the domain's first point: what
decompose_reduction and rfactor rely on (both run the init once per output element, before
every update). Decided by isl on the loops' bindings, remembered by their texts.
"""

from __future__ import annotations

import functools

import islpy as isl

from sched.errors import ScheduleError
from sched.ir.functor import free_vars, substitute
from sched.ir.intervals import interval, loop_values
from sched.ir.memo import register
from sched.ir.nodes import BlockRealize, Cast, PrimFunc, Var, conjuncts
from sched.polyhedral.domain_boxes import DOMAIN_OPERATIONS, box_by_count
from sched.polyhedral.injective_bindings import affine_arguments, keys_determined
from sched.polyhedral.isl_expr import isl_name, range_constraint, to_isl, to_isl_condition
from sched.polyhedral.isl_text import read_map, read_set, within_operations
from sched.schedule.scope import refusal


def check_init_of_spatial_variables(func: PrimFunc, block, primitive: str,
                                    render: bool = True) -> None:
    """Refuse a block whose init (`T.init`) reads a reduce variable: decompose_reduction's
    init block and rfactor's blocks have none there (audit helpers 95, 97, 99: an isl syntax
    error, a VerifyError)."""
    if block.init is None:
        return
    reduce_vars = {iv.var for iv in block.iter_vars if iv.kind == "reduce"}
    used = sorted(v.name for v in free_vars(block.init) if v in reduce_vars)
    if used:
        raise refusal(primitive, f"the init of block {block.name!r} reads the reduce variable "
                      f"{used[0]!r}, which {primitive}'s blocks, outside the reduction's "
                      f"loops, would not have: write the init of spatial variables alone (the "
                      f"value before the first iteration)", func, None, render)


def check_output_determines_instance(func: PrimFunc, block, indices, primitive: str,
                                     render: bool = True) -> None:
    """Refuse a reduction block whose output element (`indices`, of its spatial variables)
    does not determine its spatial instance: several instances then update one element, and
    the partial results of rfactor (one per element and reduce position, each started from
    the identity) lose all but one of them (audit helper-174: `B[0] = B[0] + A[vi, vk]`
    summed 8 times the last row)."""
    spatial = [iv for iv in block.iter_vars if iv.kind == "spatial"]
    names = [isl_name(iv.var) for iv in spatial]
    ranges = {iv.var: found[0] for iv in spatial
              for found in [loop_values(iv.dom.min, iv.dom.extent, {})] if found is not None}
    texts = [to_isl(_fitting_narrowing(index, ranges)) for index in indices]
    bounds = [range_constraint(iv.var, iv.dom.min, iv.dom.extent) for iv in spatial]
    if None in texts or None in bounds:
        raise refusal(primitive, f"the index of what block {block.name!r} writes is not "
                      f"affine in its spatial variables, so {primitive} cannot prove that each "
                      f"output element has one spatial instance (its partial results would "
                      f"keep one of several); write the index affine (a flat index `vi * m + "
                      f"vj` as a 2-d buffer)", func, None, render)
    params = sorted({isl_name(v) for e in (*indices, *(iv.dom.extent for iv in spatial),
                                           *(iv.dom.min for iv in spatial))
                     for v in free_vars(e)} - set(names))
    relation = read_map(f"[{', '.join(params)}] -> {{ [{', '.join(names)}] -> "
                        f"[{', '.join(texts)}] : {' and '.join(bounds) or 'true'} }}")
    if not relation.is_injective():
        raise refusal(primitive, f"block {block.name!r} updates one element of its output "
                      f"from several spatial instances (its spatial variables do not all "
                      f"index what it writes, one to one): {primitive}'s partial results "
                      f"would keep one of them; make each spatial variable an index of the "
                      f"output, or a reduce variable", func, None, render)


def _fitting_narrowing(index, ranges: dict):
    """`index` without a narrowing cast to int32 whose operand fits int32 over `ranges` (TVM's
    int64 axes index int32 buffers so: audit helper-175)."""
    if isinstance(index, Cast) and index.dtype == "int32" and index.value.dtype == "int64":
        found = interval(index.value, ranges)
        if found is not None and -2**31 <= found[0][0] and found[0][1] < 2**31:
            return index.value
    return index


def check_reduction_runs_once(func: PrimFunc, realize: BlockRealize, loops, primitive: str,
                              render: bool, every_point: bool = True, fixed: int = 0) -> None:
    """Refuse unless the loops run each instance of the reduction block at most once, every
    point of the reduce domain for each output element, the first at the domain's first point
    (isl). rfactor and decompose_reduction rely on it: both run the init once per output
    element, before every update, which is the original's meaning only then. A many-to-one
    binding (`vk = (k * k) // 2`) runs the init again; a reversed one (`vk = 15 - k`) runs it
    after the other updates. Without `every_point`, an element's points after its first may
    be skipped (a predicate of a split that does not divide): decompose_reduction, which
    compares the init's instances and order before and after, asks only that the first point
    runs wherever another does. The first `fixed` loops are asked of one iteration at a time
    (decompose_reduction's init goes under them: a tile loop or a loop binding nothing that
    repeats a recomputed reduction runs it whole each time): their variables are parameters
    in their ranges, and a spatial variable bound by them alone is one value."""
    block = realize.block
    loops, fixed_loops = list(loops[fixed:]), list(loops[:fixed])
    # isl names of our own: loops l<i>, iteration variables v<i>, outer variables p<i>
    # parameters: the function's symbolic dims and scalars, and the variables of the blocks
    # around (fixed in one instance of the scope, where the reduction runs)
    loop_vars = {lp.loop_var for lp in loops}
    used = [v for e in [*[lp.loop_var for lp in fixed_loops], *realize.iter_values,
                        realize.predicate,
                        *[x for lp in [*fixed_loops, *loops] for x in (lp.min, lp.extent)],
                        *[x for iv in block.iter_vars for x in (iv.dom.min, iv.dom.extent)]]
            for v in free_vars(e)]
    outer = list(dict.fromkeys([*func.symbolic_vars,
                                *[p for p in func.params if isinstance(p, Var)],
                                *[v for v in used if v not in loop_vars]]))
    rename = {v: Var(f"p{i}", v.dtype) for i, v in enumerate(outer)}
    rename.update({lp.loop_var: Var(f"l{i}", lp.loop_var.dtype) for i, lp in enumerate(loops)})
    allowed = set(rename.values())
    spatial = [(iv, v) for iv, v in zip(block.iter_vars, realize.iter_values)
               if iv.kind == "spatial" and (not fixed_loops or set(free_vars(v)) & loop_vars)]
    reduce = [(iv, v) for iv, v in zip(block.iter_vars, realize.iter_values)
              if iv.kind == "reduce"]
    names = [f"v{i}" for i in range(len(spatial) + len(reduce))]

    def text(expr) -> str | None:
        expr = substitute(expr, rename)
        return to_isl(expr) if set(free_vars(expr)) <= allowed else None

    def cannot(what: str) -> ScheduleError:
        return refusal(primitive, f"{what} is not affine in its loops: "
                       f"{primitive} cannot prove that each reduction instance runs once, the "
                       f"init first. Where a split of a symbolic extent made it, split by a "
                       f"constant inner factor (sch.split(k, [None, 4]): k_0 * 4 + k_1 is "
                       f"affine; a constant outer factor makes the inner extent symbolic and "
                       f"its product with the outer loop not affine). A fuse of loops of "
                       f"symbolic extents (n * m iterations) is not affine however it is "
                       f"split: split and rfactor one of the loops before fusing",
                       func, None, render)
    dims = " and ".join(f"{rename[v].name} >= 1" for v in func.symbolic_vars) or "true"
    params = f"[{', '.join(rename[v].name for v in outer)}] -> "
    # spatial variables bound to loops of symbolic extents fused (`vx = f // n`): their loops
    # stand for them (see _spatial_loops)
    keyed = [(iv, v) for iv, v in spatial if text(v) is None]
    stand_ins = _spatial_loops(func, keyed, reduce, loops, realize.predicate, text, rename,
                               params, dims) if keyed else ()
    if stand_ins:
        spatial = [(iv, v) for iv, v in spatial if text(v) is not None]
        names = [f"v{i}" for i in range(len(spatial) + len(stand_ins) + len(reduce))]
    constraints = []
    for lp in fixed_loops:
        lo, extent = text(lp.min), text(lp.extent)
        if lo is not None and extent is not None:        # (else: any value, a superset)
            constraints.append(f"{lo} <= {rename[lp.loop_var].name} < {lo} + {extent}")
    for lp in loops:
        lo, extent = text(lp.min), text(lp.extent)
        if lo is None or extent is None:
            if lp.loop_var in stand_ins:
                continue            # a superset of its runs: each runs the reduce loops alike
            raise cannot(f"a bound of loop {lp.loop_var.name!r} around block {block.name!r}")
        constraints.append(f"{lo} <= {rename[lp.loop_var].name} < {lo} + {extent}")
    reduce_box = []                 # the reduce variables' domain (checked)
    s_count = len(spatial) + len(stand_ins)
    for name, loop_var in zip(names[len(spatial):s_count], stand_ins):
        constraints.append(f"{name} = {rename[loop_var].name}")
    for name, (iv, value) in zip(names[:len(spatial)] + names[s_count:], [*spatial, *reduce]):
        lo, extent, bound = text(iv.dom.min), text(iv.dom.extent), text(value)
        if iv.kind == "reduce" and (set(free_vars(iv.dom.min)) | set(free_vars(iv.dom.extent))
                                    ) & loop_vars:
            # (`for k in range(i // 2, n)`: the questions below are about one box of reduce
            # points; this one moves with the loops, and was an isl syntax error)
            raise refusal(primitive, f"the reduce domain of {iv.var.name!r} in block "
                          f"{block.name!r} starts at {iv.dom.min.script()}, which moves with "
                          f"the loops around it: {primitive} checks one box of reduce points "
                          f"for every instance; reduce over a fixed range under a condition "
                          f"(T.where) instead", func, None, render)
        if None in (lo, extent, bound):
            raise cannot(f"the binding {iv.var.name} = {value.script()} of block "
                         f"{block.name!r}")
        if iv.kind == "reduce":
            reduce_box.append(f"{lo} <= {name} < {lo} + {extent}")
        constraints.append(f"{name} = {bound}")
    for condition in conjuncts(realize.predicate):
        converted = to_isl_condition(substitute(condition, rename))
        if converted is None and set(free_vars(condition)) <= set(stand_ins) | set(outer):
            continue                # which stand-in points run: all of their reduce loops
        if converted is None or not set(free_vars(substitute(condition, rename))) <= allowed:
            raise cannot(f"the predicate {condition.script()} of block {block.name!r}")
        constraints.append(converted)
    loop_text = ", ".join(rename[lp.loop_var].name for lp in loops)
    s_names, r_names = names[:s_count], names[s_count:]
    first_text = " and ".join([f"{n} = {text(iv.dom.min)}"
                               for n, (iv, _) in zip(r_names, reduce)] or ["true"])
    problem = _runs_once_problem(params, loop_text, tuple(names), len(s_names),
                                 " and ".join(constraints) or "true", dims,
                                 " and ".join(reduce_box) or "true", first_text,
                                 every_point)
    if problem is not None:
        shown = ", ".join(f"{iv.var.name} = {v.script()}" for iv, v in reduce)
        bound = {v for _, value in (*spatial, *reduce) for v in free_vars(value)}
        repeating = [lp.loop_var.name for lp in loops
                     if lp.loop_var not in bound and lp.loop_var not in stand_ins]
        if problem.startswith("run some instances more than once") and repeating:
            # (a reduction recomputed under a loop of its consumer, compute_at's placement,
            # was blamed on its bindings: audit helper-142)
            inside = f"decompose at a loop inside {repeating[0]!r}, or " \
                if primitive == "decompose_reduction" else ""
            raise refusal(primitive, f"loop {repeating[0]!r} around block {block.name!r} "
                          f"binds none of its iteration variables, so the whole reduction runs "
                          f"again in each of its iterations (recomputed there); {primitive} "
                          f"needs each reduction to run once: {inside}apply it before the "
                          f"step that recomputed the reduction (compute_at)", func, None, render)
        raise refusal(primitive, f"the loops of block {block.name!r} ({shown}) {problem}; "
                      f"{primitive} needs the reduce variables bound one to one onto their "
                      f"domain, the first iteration at its first point (the init's), or the "
                      f"result would change", func, None, render)


@register
@functools.lru_cache(maxsize=1 << 10)
def _runs_once_problem(params: str, loop_text: str, names: tuple[str, ...], spatial: int,
                       constraints: str, dims: str, reduce_box: str,
                       first_text: str, every_point: bool = True) -> str | None:
    """isl's part of `check_reduction_runs_once`, a function of its texts only (so
    remembered by them): why the loops `[loop_text] -> [names]` (the first `spatial` names
    the spatial iteration variables, the others the reduce ones) under `constraints` do not
    run the reduction once per point of `reduce_box` (`every_point`; else at least its first
    point wherever they run one), starting at `first_text`; None when they do."""
    s_names, r_names = names[:spatial], names[spatial:]
    mapping = read_map(f"{params}{{ [{loop_text}] -> [{', '.join(names)}] : {constraints} }}") \
        .intersect_params(read_set(f"{params}{{ : {dims} }}"))
    # the points as a box where counting proves it (an injective map of a loop box): the
    # subset tests below against the range's existentials ran for minutes on TVM's 4096^3
    # mma nests
    points = mapping.range()
    counted = within_operations(DOMAIN_OPERATIONS,
                                lambda: box_by_count(mapping.reverse(), points))
    points = points if counted is None else counted
    instances = points.project_out(isl.dim_type.set, len(s_names), len(r_names))
    full = read_set(f"{params}{{ [{', '.join(names)}] : {reduce_box} }}") \
        .intersect(instances.flat_product(read_set(f"{params}{{ [{', '.join(r_names)}] }}")))
    first_points = read_map(f"{params}{{ [{', '.join(s_names)}] -> [{', '.join(names)}] : "
                           f"{first_text} }}").intersect_domain(instances)
    if not mapping.is_injective():
        return "run some instances more than once (a many-to-one binding)"
    if not points.is_subset(read_set(f"{params}{{ [{', '.join(names)}] : {reduce_box} }}")):
        return "run reduction instances outside the reduce domain"
    if every_point and not full.is_subset(points):
        return "skip some points of the reduce domain (the init may never run)"
    if not every_point and not first_points.range().is_subset(points):
        return ("skip the first point of the reduce domain for some elements whose other "
                "points run (the init there never runs)")
    if not _starts_at_first_point(mapping, first_points, len(s_names)):
        return ("do not start each reduction at the first point of the reduce domain, "
                "where the init runs: the original runs its init after some updates")
    return None


def _starts_at_first_point(mapping: isl.Map, first_points: isl.Map, spatial: int) -> bool:
    """Whether, for each spatial instance, the first loop point (lexicographically) of the
    injective, full `mapping` (loops -> [spatial, reduce]) is the one at its first reduce
    point (`first_points`: spatial -> that point): no loop point at another reduce point
    has the first point's loops at or after it. Asked as one emptiness test in the loops'
    space, where isl's lexmin over the loops of each instance ran for minutes on TVM's
    4096^3 mma nests (fused loops of large extents)."""
    firsts = first_points.range()
    at_first = mapping.intersect_range(firsts)
    elsewhere = mapping.subtract_range(firsts)
    names = mapping.range().get_space()
    to_spatial = isl.Map.universe(isl.Space.map_from_domain_and_range(
        names, names)).project_out(isl.dim_type.out, spatial,
                                   names.dim(isl.dim_type.set) - spatial)
    for d in range(spatial):
        to_spatial = to_spatial.equate(isl.dim_type.in_, d, isl.dim_type.out, d)
    same_instance = elsewhere.apply_range(to_spatial).apply_range(
        at_first.apply_range(to_spatial).reverse())           # loops -> loops of its first
    loops = isl.Set.universe(mapping.get_space().domain())
    return same_instance.intersect(loops.lex_le_set(loops)).is_empty()


def _spatial_loops(func: PrimFunc, keyed, reduce, loops, predicate, text, rename, params: str,
                   dims: str) -> tuple[Var, ...]:
    """The loops that stand for the spatial variables `keyed` (bindings isl cannot read: `vx
    = f // n, vi = f % n` over a loop `f` of extent `n * bs`), or () where they cannot: the
    check then asks of those loops instead of the variables. Sound where the variables give
    the loops back (one loop point per output element: the bindings' affine arguments are
    recovered from them, injective_bindings.py, and the arguments are one-to-one in the
    loops under their affine bounds), and the reduce bindings, the other loops' bounds and
    the affine conditions do not use those loops: each output element's runs are then the
    same runs of the other loops, wherever its loop point is, and whether it runs at all
    (the loops' own bounds, a predicate on them alone) is left out."""
    loop_vars = {lp.loop_var for lp in loops}
    values = [v for _, v in keyed]
    arguments = [a for v in values for a in affine_arguments(v, loop_vars)]
    own = tuple(lp.loop_var for lp in loops
                if any(lp.loop_var in free_vars(v) for v in values))
    elsewhere = [v for _, v in reduce] + [x for lp in loops if lp.loop_var not in own
                                           for x in (lp.min, lp.extent)]
    if any(set(free_vars(x)) & set(own) for x in elsewhere) or \
            any(to_isl_condition(c) is not None and set(free_vars(c)) & set(own)
                for c in conjuncts(predicate)) or \
            not keys_determined(values, [to_isl(a) for a in arguments], func.symbolic_vars):
        return ()
    bounds = []
    for lp in loops:
        lo, extent = text(lp.min), text(lp.extent)
        if lp.loop_var in own and lo is not None and extent is not None:
            bounds.append(f"{lo} <= {rename[lp.loop_var].name} < {lo} + {extent}")
    texts = [text(a) for a in arguments]
    if None in texts or not _one_to_one(
            params, tuple(rename[v].name for v in own), tuple(texts),
            " and ".join(bounds) or "true", dims):
        return ()
    return own


@register
@functools.lru_cache(maxsize=1 << 10)
def _one_to_one(params: str, loops: tuple[str, ...], values: tuple[str, ...], bounds: str,
                dims: str) -> bool:
    """Whether `[loops] -> [values]` under `bounds` is injective (isl)."""
    mapping = read_map(f"{params}{{ [{', '.join(loops)}] -> [{', '.join(values)}] : "
                       f"{bounds} }}").intersect_params(read_set(f"{params}{{ : {dims} }}"))
    return mapping.is_injective()

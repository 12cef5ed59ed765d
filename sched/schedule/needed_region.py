"""The box of a buffer that blocks need under a loop, for compute_at and reverse_compute_at.

`exact_box` asks isl (`polyhedral.buffer_region`) for the box one iteration of a loop touches.
Under a guarded (non-dividing) split that box changes size from iteration to iteration; then
`relaxed_box` spans the accesses with the loops between running in full (TVM's relaxation), on
linear forms of the loop variables, or `largest_extent` takes the largest size isl finds over
the loops (a fused or non-dividing tile's pieces), and `guards` gives the `T.where`
conditions that keep a regenerated loop inside the block's domain.
"""

from __future__ import annotations

import dataclasses

import islpy as isl

from sched.errors import ScheduleError
from sched.ir.functor import collect, free_vars, substitute
from sched.ir.nodes import (
    BinaryOp,
    BlockRealize,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    IntImm,
    PrimFunc,
    Range,
    Var,
    binary,
)
from sched.ir.simplify import simplify
from sched.polyhedral import buffer_region
from sched.polyhedral.isl_expr import (
    isl_name,
    pw_aff_to_expr,
    range_constraint,
    to_isl,
    to_isl_comparison,
)
from sched.polyhedral.isl_text import read_set
from sched.schedule.inlining import block_accesses
from sched.schedule.state import (
    enclosing_loops,
    path_to,
)

# -- the box a block needs under a loop ----------------------------------------------------------


def blocks_under_loop(func: PrimFunc, loop: For, names) -> list[BlockRealize]:
    return [r for r in collect(loop.body, BlockRealize) if r.block.name in names]


def invariant(func: PrimFunc, expr: Expr) -> bool:
    """Whether `expr` uses no loop variable (symbolic dims and scalars only)."""
    allowed = set(func.symbolic_vars) | {p for p in func.params if isinstance(p, Var)}
    return set(free_vars(expr)) <= allowed


def is_thread_loop(loop: For) -> bool:
    return loop.kind == "thread_binding" and (loop.thread_tag or "").startswith("threadIdx")


def exact_box(func: PrimFunc, loop: For, blocks, buffer: str, access: str,
               relax_threads: bool) -> list[Range]:
    """The box of `buffer` that `blocks` (under `loop`) touch in one iteration of `loop` and
    the loops outside it (threadIdx loops varying when `relax_threads`: a shared buffer holds
    what every thread of the block needs)."""
    try:
        boxes = [buffer_region(func, r.block.name, buffer, loop=loop.loop_var.name,
                               access=access, relax_threads=relax_threads,
                               including_loop=True) for r in blocks]
    except ValueError as error:
        raise ScheduleError("compute_at", f"{error}; there is no region to compute at "
                            f"loop {loop.loop_var.name!r}") from None
    if any(to_isl(r.min) is None or to_isl(r.extent) is None for b in boxes for r in b):
        # a bound isl wrote piecewise, which a binding cannot be: the program's own form
        found = _program_form(func, loop, blocks, buffer, access, relax_threads)
        boxes = [found] if found is not None else boxes
    return merged_box(boxes)


def merged_box(boxes) -> list[Range]:
    """The smallest box holding each of `boxes` (per dimension: the least start, the greatest
    end; the same range stays as it is)."""
    box = list(boxes[0])
    for other in boxes[1:]:
        for d, (a, b) in enumerate(zip(box, other)):
            if a != b:
                low = binary("min", a.min, b.min)
                high = binary("max", a.min + a.extent, b.min + b.extent)
                box[d] = Range(low, simplify(high - low))
    return box


def _program_form(func: PrimFunc, loop: For, blocks, buffer: str, access: str,
                  relax_threads: bool):
    """program_box of the accesses of `blocks` to `buffer`: the loops inside `loop` (and
    threadIdx loops when `relax_threads`) relaxed, the others fixed."""
    from sched.schedule.program_box import program_box

    accesses, fixed, ndim = [], {}, None
    for realize in blocks:
        around = enclosing_loops(func, realize)
        position = next(i for i, lp in enumerate(around) if lp is loop)
        relaxed = {lp.loop_var: Range(lp.min, lp.extent) for i, lp in enumerate(around)
                   if i > position or (relax_threads and is_thread_loop(lp))}
        fixed |= {lp.loop_var: Range(lp.min, lp.extent) for lp in around
                  if lp.loop_var not in relaxed}
        env = _bindings_through_blocks(func, realize)
        kind = BufferLoad if access == "read" else BufferStore
        for node in block_accesses(realize.block, kind):
            if node.buffer.name == buffer:
                ndim = len(node.indices)
                accesses.append(([substitute(i, env) for i in node.indices], relaxed))
    return None if ndim is None else program_box(accesses, fixed, ndim)


# -- relaxed boxes: linear forms over the loops between ----------------------------------------


ONE = "1"       # the key of a linear form's constant term (not a node: `node == 1` compares)


def _linear(expr: Expr, inner: set[Var]) -> dict | None:
    """`expr` as {term: coefficient} (term ONE for the constant); a part that is not a sum of
    multiples is a term of its own if it uses no variable of `inner`, else None."""
    if isinstance(expr, IntImm):
        return {ONE: expr.value}
    if isinstance(expr, Var) and expr in inner:
        return {expr: 1}
    if isinstance(expr, BinaryOp) and expr.op in ("add", "sub"):
        a, b = _linear(expr.a, inner), _linear(expr.b, inner)
        if a is None or b is None:
            return None
        return _combine(a, b, 1 if expr.op == "add" else -1)
    if isinstance(expr, BinaryOp) and expr.op == "mul":
        for x, c in ((expr.a, expr.b), (expr.b, expr.a)):
            if isinstance(c, IntImm):
                form = _linear(x, inner)
                return None if form is None else {t: v * c.value for t, v in form.items()}
    return None if set(free_vars(expr)) & inner else {expr: 1}


def _combine(a: dict, b: dict, sign: int) -> dict:
    result = dict(a)
    for term, value in b.items():
        result[term] = result.get(term, 0) + sign * value
    return {t: v for t, v in result.items() if v != 0 or t is ONE}


def _to_expr(form: dict) -> Expr:
    total: Expr | None = None
    for term, value in form.items():
        if term is ONE or value == 0:
            continue
        part = term if value == 1 else term * value
        total = part if total is None else total + part
    constant = form.get(ONE, 0)
    if total is None:
        return IntImm(constant)
    return simplify(total + constant) if constant else total


def _interval(index: Expr, loops: list[For]) -> tuple[dict, dict] | None:
    """The least and greatest value of `index` as linear forms, over the full ranges of
    `loops` (the loops between), or None when it is not linear in them."""
    inner = {lp.loop_var for lp in loops}
    form = _linear(index, inner)
    if form is None:
        return None
    low, high = {ONE: 0}, {ONE: 0}
    for term, value in form.items():
        loop = next((lp for lp in loops if lp.loop_var == term), None)
        if loop is None:
            low, high = _combine(low, {term: value}, 1), _combine(high, {term: value}, 1)
            continue
        first = _linear(loop.min, inner)
        last = _linear(simplify(loop.min + loop.extent - 1), inner)
        if first is None or last is None:
            return None
        ends = [{t: v * value for t, v in f.items()} for f in (first, last)]
        ends = ends if value > 0 else ends[::-1]
        low, high = _combine(low, ends[0], 1), _combine(high, ends[1], 1)
    return low, high


def _bindings_through_blocks(func: PrimFunc, realize: BlockRealize) -> dict:
    """The iteration variables of `realize` and of every block around it, each as an
    expression of loop variables (a nested block's binding may use its outer block's
    variables, which mean nothing outside that block)."""
    env: dict = {}
    for node in [*path_to(func.body, realize), realize]:
        if isinstance(node, BlockRealize):
            env.update({iv.var: substitute(value, env)
                        for iv, value in zip(node.block.iter_vars, node.iter_values)})
    return env


def relaxed_box(func: PrimFunc, loop: For, blocks, buffer: str, write: bool,
                 relax_threads: bool) -> list | None:
    """Per dimension of `buffer`, the (min, extent) its accesses in `blocks` span when the loops
    between `loop` and them run in full (predicates ignored); None where no single linear
    interval holds them."""
    spans: list[list] = []
    for realize in blocks:
        around = enclosing_loops(func, realize)
        between = around[around.index(loop) + 1:]
        if relax_threads:
            between += [lp for lp in around[:around.index(loop) + 1] if is_thread_loop(lp)]
        binding = _bindings_through_blocks(func, realize)
        # and the loops in the block's body, in loop variables (`for k in range(vi + 1)`
        # around `P[vi * 4 + k]`: its region under the block's loop named k, and compute_at
        # was refused as needing a variable not defined there: audit helper-177)
        body_loops = [dataclasses.replace(lp, min=substitute(lp.min, binding),
                                          extent=substitute(lp.extent, binding))
                      for lp in collect(realize.block, For)]
        for access in block_accesses(realize.block, BufferStore if write else BufferLoad):
            if access.buffer.name == buffer:
                spans.append([_interval(substitute(i, binding), [*between, *body_loops])
                              for i in access.indices])
    box = []
    for dim in zip(*spans):
        if any(span is None for span in dim):
            box.append(None)
            continue
        lows = [{t: v for t, v in low.items() if t is not ONE} for low, _ in dim]
        highs = [{t: v for t, v in high.items() if t is not ONE} for _, high in dim]
        if any(x != lows[0] for x in lows) or any(x != highs[0] for x in highs):
            box.append(None)
            continue
        low = min(lo.get(ONE, 0) for lo, _ in dim)
        high = max(hi.get(ONE, 0) for _, hi in dim)
        extent = _combine({**highs[0], ONE: high + 1}, {**lows[0], ONE: low}, -1)
        box.append(Range(_to_expr({**lows[0], ONE: low}), _to_expr(extent)))
    return box


def largest_extent(func: PrimFunc, loop: For, extent: Expr) -> Expr | None:
    """The largest value of `extent` (affine, or pieces of affine ones: the region of one
    iteration of a fused or non-dividing tile) over the ranges of `loop` and the loops around
    it, as an expression of the function's parameters alone (`T.min(n + 2, 6)`); None where
    isl cannot read it. The box from the region's exact start over it
    covers every iteration's region (the guards keep it in the domain)."""
    loops = [*enclosing_loops(func, loop), loop]
    constraints = [range_constraint(lp.loop_var, lp.min, lp.extent) for lp in loops]
    value = to_isl_comparison("e", "=", extent)
    if value is None or any(c is None for c in constraints):
        return None
    loop_names = [isl_name(lp.loop_var) for lp in loops]
    params = [isl_name(v) for v in func.symbolic_vars]
    known = {*loop_names, *params, "e"}
    if any(isl_name(v) not in known for e in (extent, *[x for lp in loops for x in
                                                        (lp.min, lp.extent)])
           for v in free_vars(e)):
        return None
    positive = [f"{p} >= 1" for p in params]
    space = f"[{', '.join(params)}] -> "
    values = read_set(f"{space}{{ [{', '.join(loop_names)}, e] : "
                      f"{' and '.join([*constraints, *positive, value])} }}")
    if values.is_empty():
        return None
    values = values.project_out(isl.dim_type.set, 0, len(loops))
    largest = values.dim_max(0).coalesce()   # pieces of affine functions of the parameters
    context = read_set(f"{space}{{ : {' and '.join(positive) or 'true'} }}")
    return simplify(pw_aff_to_expr(largest, context, {isl_name(v): v
                                                      for v in func.symbolic_vars}))


def _provably(difference: dict) -> bool:
    """Whether a linear form is a constant >= 0."""
    return all(t is ONE for t in difference) and difference.get(ONE, 0) >= 0


def guards(value: Expr, low: Expr, extent: Expr, dom: Range, outer: list[For]) -> list[Expr]:
    """The conditions that keep `value` (`low` plus a loop over `extent`) in `dom`, less those
    that hold in every iteration of the `outer` loops (interval arithmetic on linear forms)."""
    span = _interval(low, outer)
    first, end = (_linear(e, set()) for e in (dom.min, simplify(dom.min + dom.extent)))
    conditions = []
    if span is None or first is None or not _provably(_combine(span[0], first, -1)):
        if not _holds(value, ">=", dom.min, low, extent, outer):
            conditions.append(value >= dom.min)
    last = None if span is None else _combine(span[1], _linear(extent, set()) or {}, 1)
    if last is None or end is None or not _provably(_combine(end, last, -1)):
        end_expr = simplify(dom.min + dom.extent)
        if not _holds(value, "<", end_expr, low, extent, outer):
            conditions.append(value < end_expr)
    return conditions


def _holds(value: Expr, relation: str, bound: Expr, low: Expr, extent: Expr,
           outer: list[For]) -> bool:
    """Whether isl proves `value <relation> bound` on the ranges of the `outer` loops and of
    the new loop (`value` is `low` plus it, over [0, extent)): a quasi-affine `low` (the
    `ty // 2`, `ty % 2` of a fused thread loop) is beyond the linear forms above."""
    from sched.polyhedral.expr_equality import holds_on_box

    box = {lp.loop_var: Range(lp.min, lp.extent) for lp in outer}
    known = set(box) | set(free_vars(low))
    for var in free_vars(value):
        if var not in known:                  # the new loop's variable
            box[var] = Range(IntImm(0, extent.dtype), extent)
    return holds_on_box(value, relation, bound, box) is True

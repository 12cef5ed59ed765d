"""The region of a buffer a block touches under a loop, as a box (per-dimension min and extent).

This is what compute_at, cache_read and cache_write need: how much of a buffer one iteration of
an outer loop reads or writes. The box is written in the loops outside the given loop and the
symbolic dims; it is exact for affine accesses (for a non-rectangular set, the smallest box
around it) and a covering box otherwise.

    region = buffer_region(func, "C", "A", loop="k_outer")
    # (Range(i, 1), Range(k_outer * 8, 8)): each iteration of k_outer reads A[i, 8ko : 8ko + 8]
"""

from __future__ import annotations

import islpy as isl

from sched.ir.builders import const
from sched.ir.memo import BoundedCache
from sched.ir.nodes import PrimFunc, Range, Var
from sched.polyhedral.isl_expr import NotAffine, isl_name, pw_aff_to_expr
from sched.polyhedral.isl_text import read_map
from sched.polyhedral.model import build_model


def buffer_region(func: PrimFunc, block: str, buffer: str, loop: str | None = None,
                  access: str = "any", relax_threads: bool = False,
                  including_loop: bool = False) -> tuple[Range, ...]:
    """The box of `buffer` that block `block` touches in one iteration of the loops outside
    `loop` (the loop named so around the block; None: the whole function), or of `loop` and
    the loops outside it (`including_loop`), reading, writing or both (`access` in "read",
    "write", "any").

    With `relax_threads`, loops bound to threadIdx count as varying even outside `loop`: the
    box covers what all threads of a GPU thread block touch, which is what a "shared" buffer
    must hold. The box may reach elements of iterations a guard (`T.where`) skips: a user that
    writes it must guard too."""
    model = build_model(func)       # the accesses only: no dependence analysis
    statements = model.statements_of_block(block)
    if not statements:
        raise ValueError(f"no block named {block!r}")
    loops = statements[0].loops
    names = [lp.var.name for lp in loops]
    if loop is not None and loop not in names:
        raise ValueError(f"block {block!r} is not under a loop named {loop!r}; its loops are "
                         f"{', '.join(names) or 'none'}")
    outer = () if loop is None else loops[:names.index(loop) + (1 if including_loop else 0)]
    fixed = [position for position, lp in enumerate(outer)
             if not (relax_threads and lp.kind == "thread_binding"
                     and (lp.thread_tag or "").startswith("threadIdx"))]
    outer = tuple(outer[p] for p in fixed)
    relations = [(statement, statement.accesses_of(buffer, access)) for statement in statements]
    relations = [(statement, relation) for statement, relation in relations
                 if relation is not None]
    if not relations:
        raise ValueError(f"block {block!r} does not access buffer {buffer!r}")
    variables = {isl_name(lp.var): lp.var for lp in outer}
    variables |= {isl_name(v): v for v in model.func.symbolic_vars}
    variables |= {isl_name(p): p for p in model.func.params if isinstance(p, Var)}
    shape = next(view.buffer.shape for s in statements for view in s.accesses
                 if view.buffer.name == buffer)
    # the box is a function of these texts (isl's answers are values), remembered: a step
    # leaves most statements as they were, and an autoscheduler replaying traces meets the
    # same statements again
    key = (tuple(model.params), tuple(fixed), tuple(shape), tuple(variables.items()),
           tuple((tuple(s.loop_names()), tuple(s.constraints), s.instance(), str(relation))
                 for s, relation in relations))
    ranges = _BOXES.recall(key)
    if ranges is None:
        ranges = _BOXES.remember(key, _box(model, relations, fixed, variables, shape))
    if isinstance(ranges, str):
        raise ValueError(f"block {block!r} accesses no element of buffer {buffer!r}: its "
                         f"accesses are under conditions that never hold")
    return ranges


# (the texts of the accesses, see buffer_region) -> the box, or "empty"
_BOXES = BoundedCache(1 << 10)


def _box(model, relations, fixed: list[int], variables: dict[str, Var], shape):
    """The box of the accesses `relations` (statement, isl map) in one iteration of the loops
    at positions `fixed` (buffer_region), or "empty" where no access runs."""
    box = None
    for statement, relation in relations:
        touched = _touched_per_outer_iteration(model, statement, relation, fixed)
        box = touched if box is None else box.union(touched)
    if box.is_empty():         # every access sits under a condition that never holds
        return "empty"
    context = box.params()
    ranges = []
    for d in range(box.dim(isl.dim_type.set)):
        try:
            low, high = box.dim_min(d), box.dim_max(d)
        except isl.Error:
            # unbounded: an index the model over-approximates (a loop from `i * i`); the
            # accesses are in the buffer (the bounds check sees to it), so the whole dim
            ranges.append(Range(const(0, shape[d].dtype), shape[d]))
            continue
        extent = high.sub(low).add_constant_val(isl.Val.one(box.get_ctx()))
        try:
            ranges.append(Range(pw_aff_to_expr(low, context, variables),
                                pw_aff_to_expr(extent, context, variables)))
        except NotAffine:      # bounds no IR expression writes (past int64): the whole dim
            ranges.append(Range(const(0, shape[d].dtype), shape[d]))
    return tuple(ranges)


def _touched_per_outer_iteration(model, statement, relation: isl.Map,
                                 fixed: list[int]) -> isl.Set:
    """Elements accessed (`relation`, in the buffer's own dimensions), as a set parametric in
    the loops of `statement` at positions `fixed` (the other loops vary)."""
    params = ", ".join(model.params)
    loop_names = statement.loop_names()
    constraints = " and ".join(statement.constraints) or "true"
    loops_to_instance = read_map(f"[{params}] -> {{ [{', '.join(loop_names)}] -> "
                                 f"{statement.instance()} : {constraints} }}")
    n_params = loops_to_instance.dim(isl.dim_type.param)
    moved = loops_to_instance.apply_range(relation)
    for position in reversed(fixed):           # later positions first: earlier ones stay
        moved = moved.move_dims(isl.dim_type.param, n_params, isl.dim_type.in_, position, 1)
    return moved.range()


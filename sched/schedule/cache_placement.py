"""Where cache_read puts its copy when the buffer is written inside the consumer's loop nest:
as TVM's cache_read does (CacheLocDetector), right before the statement that holds the
consumer, in the innermost sequence that holds both it and every writer, the copy covering
what the consumer reads in one iteration of the loops around that sequence:

    for k_0:                                for k_0:
        A_shared = A[...]      # writer         A_shared = A[...]
        for k_1:                                A_shared_warp = A_shared[box of one k_0]
            C += A_shared ...                   for k_1:
                                                    C += A_shared_warp ...

Why it is right: in each iteration of those loops the copy runs after every writer that runs
before the consumer's statement, and nothing between the copy and the consumer writes the
buffer (no writer is inside the consumer's statement: refused otherwise), so the consumer
reads from the cache what it read from the buffer. The box is polyhedral/'s (exact where the
accesses are affine, the whole buffer otherwise).
"""

from __future__ import annotations

from sched.errors import ScheduleError
from sched.ir.functor import collect, free_vars
from sched.ir.nodes import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    For,
    IntImm,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Var,
)
from sched.polyhedral import buffer_region
from sched.polyhedral.expr_equality import holds_on_box
from sched.polyhedral.isl_expr import to_isl
from sched.schedule.state import path_to

PRIMITIVE = "cache_read"


def copy_place(func: PrimFunc, top: Stmt, consumer: BlockRealize, buffer: Buffer,
               writers: list[Block]) -> tuple[Stmt, tuple[Range, ...] | None]:
    """(the statement of `top` to put the copy before, the box it copies or None for the
    whole region the consumer reads)."""
    consumer_path = [*path_to(top, consumer), consumer]
    common = None
    writer_names = {b.name for b in writers}
    for realize in collect(top, BlockRealize):
        if realize.block.name not in writer_names:
            continue
        path = [*path_to(top, realize), realize]
        shared = 0
        while shared < min(len(path), len(consumer_path)) and \
                path[shared] is consumer_path[shared]:
            shared += 1
        common = shared if common is None else min(common, shared)
    if common is None or common == 0 or common >= len(consumer_path) or \
            not isinstance(consumer_path[common - 1], SeqStmt):
        names = ", ".join(b.name for b in writers)
        raise ScheduleError(PRIMITIVE, f"block(s) {names} write {buffer.name!r} in the loop "
                            f"nest of block {consumer.block.name!r}, and no statement holds "
                            f"the consumer without a writer: the cache could not be filled "
                            f"after them; cache before placing them there (compute_at)")
    anchor = consumer_path[common]
    inside = {r.block.name for r in collect(anchor, BlockRealize)}
    late = [b.name for b in writers if b.name in inside and b.name != consumer.block.name]
    if late:
        raise ScheduleError(PRIMITIVE, f"block(s) {', '.join(late)} write {buffer.name!r} "
                            f"next to block {consumer.block.name!r}, after the cache would be "
                            f"filled; cache before placing them there (compute_at)")
    loops = [node for node in consumer_path[:common] if isinstance(node, For)]
    return anchor, _box(func, consumer, buffer, loops, anchor)


def _clip(r: Range, dim) -> Range:
    from sched.schedule.memory import _clip as clip

    return clip(r, dim)


def _box(func: PrimFunc, consumer: BlockRealize, buffer: Buffer, loops: list[For],
         anchor: Stmt) -> tuple[Range, ...] | None:
    """The box of `buffer` the consumer reads in one iteration of `loops` (and the loops
    outside them), where it is written in those loops' variables; None otherwise."""
    if not loops:
        return None
    from sched.schedule.memory import _hull  # (memory imports this module)

    box = None
    for realize in collect(consumer, BlockRealize):    # a blockized consumer's nested blocks
        if not any(r.buffer == buffer for r in realize.block.reads):
            continue
        try:
            found = buffer_region(func, realize.block.name, buffer.name,
                                  loops[-1].loop_var.name, "read", including_loop=True)
        except ValueError:
            continue                     # declares the region, accesses none of its own
        if len(found) != buffer.ndim:
            return None
        box = found if box is None else _hull(box, found)
    if box is None:
        return None
    if any(to_isl(r.min) is None or to_isl(r.extent) is None for r in box):
        # isl wrote a bound piecewise (`T.if_then_else(ty <= 1, 0, 32)`), which the model
        # of the copy's bindings cannot read: the program's own index at the loops' first
        # iteration, where isl proves it the least (`ty // 2 * 32`)
        box = _program_box(consumer, buffer, loops, anchor) or box
    allowed: set[Var] = {lp.loop_var for lp in loops} | set(func.symbolic_vars) | \
        {p for p in func.params if isinstance(p, Var)}
    named = {v for r in box for v in (*free_vars(r.min), *free_vars(r.extent))}
    if not named <= allowed:
        return None
    ranges = {lp.loop_var: Range(lp.min, lp.extent) for lp in loops}
    return tuple(r if _inside(r, dim, ranges) else _clip(r, dim)
                 for r, dim in zip(box, buffer.shape))


def _inside(r: Range, dim, ranges: dict) -> bool:
    """Whether isl proves `r` within [0, dim) on the loops' ranges (a guarded access's box may
    reach past the buffer, which the copy must not; where it cannot, the box is clipped)."""
    zero = IntImm(0, r.min.dtype)
    return holds_on_box(r.min, ">=", zero, ranges) is True and \
        holds_on_box(r.min + r.extent, "<=", dim, ranges) is True


def _program_box(consumer: BlockRealize, buffer: Buffer, loops: list[For],
                 anchor: Stmt) -> tuple[Range, ...] | None:
    """program_box of the consumer's reads of `buffer` (its nested blocks' too), the loops
    from `anchor` down relaxed, `loops` fixed."""
    from sched.ir.functor import substitute
    from sched.schedule.inlining import block_accesses
    from sched.schedule.program_box import program_box

    fixed = {lp.loop_var: Range(lp.min, lp.extent) for lp in loops}
    between = {node.loop_var: Range(node.min, node.extent)
               for node in path_to(anchor, consumer) if isinstance(node, For)}
    accesses: list[tuple] = []
    for realize in collect(consumer, BlockRealize):
        loads = [load for load in block_accesses(realize.block, BufferLoad)
                 if load.buffer == buffer]
        if not loads:
            continue
        env: dict[Var, object] = {}
        relaxed: dict[Var, Range] = dict(between)
        for node in [*path_to(consumer, realize), realize]:
            if isinstance(node, For):
                relaxed[node.loop_var] = Range(node.min, node.extent)
            elif isinstance(node, BlockRealize):
                env.update({iv.var: substitute(v, env) for iv, v in
                            zip(node.block.iter_vars, node.iter_values)})
        accesses += [([substitute(i, env) for i in load.indices], relaxed) for load in loads]
    return program_box(accesses, fixed, buffer.ndim)

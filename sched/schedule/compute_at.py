"""compute_at and reverse_compute_at as pure functions (the Schedule methods are in
placement.py): move a block under a loop of its neighbour and regenerate its loops.

compute_at moves a producer under a loop of its consumers and regenerates the producer's loops
so that, per iteration of that loop and the loops outside it, it computes exactly the box of its
buffer that the consumers there read (`polyhedral.buffer_region`); reverse_compute_at moves a
consumer under a loop of its producers to cover what they wrote there. Blocks keep their
iteration variables, so the statement instances are those of the old function and
`polyhedral.check_order` decides legality. A moved block may run an instance in several
iterations (recomputation, as in Halide's compute_at): each of its runs must come after what it
reads, which `_violation` asks of the first run; a consumer must run each instance once; and
every block run more than once must run idempotently (`legality.RUNS_RULE`): a block whose
instances the original already runs several times, not idempotently, does not move.

The box of a consumer under a guarded (non-dividing) split is not the same size in every
iteration: the new loops then cover the box the accesses span when the loops between run in
full (TVM's relaxation), under a `T.where` guard that keeps the iterations in the block's domain
(the new loops and their guards: moved_nest.py).
"""

from __future__ import annotations

import dataclasses
import time

from sched.errors import ScheduleError
from sched.ir.functor import collect, free_vars, substitute
from sched.ir.nodes import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Var,
    seq,
)
from sched.polyhedral import build_model, check_order, check_schedule
from sched.polyhedral.dependences import first_runs
from sched.polyhedral.isl_text import within_operations
from sched.polyhedral.legality import Violation, check_runs, schedule_error
from sched.schedule.inlining import block_accesses, neighbours, remove_block
from sched.schedule.moved_nest import new_nest
from sched.schedule.needed_region import (
    blocks_under_loop,
    exact_box,
    invariant,
    largest_extent,
    merged_box,
    relaxed_box,
)
from sched.schedule.state import (
    enclosing_loops,
    find_block,
    find_loop,
    path_to,
    refuse_other_views,
    replace,
)

# -- compute_at and reverse_compute_at ---------------------------------------------------------


def _check_nesting(func: PrimFunc, realize: BlockRealize, loop: For, primitive: str,
                   alternatives) -> None:
    name, loop_name = realize.block.name, loop.loop_var.name
    if any(lp is loop for lp in enclosing_loops(func, realize)):
        raise ScheduleError(primitive, f"block {name!r} is already under loop {loop_name!r}: "
                            f"give a loop of another block's nest",
                            alternatives=alternatives())
    if path_to(realize, loop) is not None:
        raise ScheduleError(primitive, f"loop {loop_name!r} is inside block {name!r}")
    scopes = [[n for n in path_to(func.body, node) if isinstance(n, Block)][-1]
              for node in (realize, loop)]
    if scopes[0] is not scopes[1]:
        raise ScheduleError(primitive, f"block {name!r} and loop {loop_name!r} are in different "
                            f"blocks: a block moves only within the block that holds it")


def _sources(block, here: list[BlockRealize], reverse: bool, primitive: str) -> dict:
    """For each iteration variable the moved block gets from a neighbour's box: (buffers, dim)
    (several buffers for a tuple reduction, one otherwise).

    compute_at: the spatial variables that index the buffer the block writes (reduce variables
    keep their full domain). reverse_compute_at: the variables that index a buffer the producers
    under the loop write (the others, like a broadcast dimension, keep their full domain)."""
    own = {iv.var for iv in block.iter_vars}
    if collect(block.body, BlockRealize):
        raise ScheduleError(primitive, f"block {block.name!r} holds blocks (blockize made it): "
                            f"{primitive} sizes the instances to run from the indices of a "
                            f"block's own stores and loads; move the inner block first, then "
                            f"blockize (sch.{primitive}(inner, loop); sch.blockize(...))")
    if reverse:
        written = {r.buffer.name for p in here for r in p.block.writes}
        found: dict[Var, tuple[tuple[Buffer, ...], int]] = {}
        for load in block_accesses(block, BufferLoad):
            if load.buffer.name in written:
                for d, index in enumerate(load.indices):
                    if index in own and index not in found:
                        found[index] = ((load.buffer,), d)
        return found
    # a tuple reduction (TOPI's layer norm: A_red_temp_v0, A_red_temp_v1) writes several
    # buffers, each at the same indices: the instances to run are those whose elements of
    # any of them the consumers read (the union of the boxes, _needed_box)
    buffers = tuple(dict.fromkeys(w.buffer for w in block.writes))
    stores = {s.indices for s in collect(block.body, BufferStore) if s.buffer in buffers}
    if len(buffers) > 1 and len(stores) != 1:
        raise ScheduleError(primitive, f"block {block.name!r} writes "
                            f"{', '.join(b.name for b in buffers)} at different indices; "
                            f"compute_at moves a block that writes one buffer, or several at "
                            f"the same indices")
    indices = next(iter(stores), ())
    found = {index: (buffers, d) for d, index in enumerate(indices) if index in own}
    in_indices = {v for index in indices for v in free_vars(index)}
    names = ", ".join(repr(b.name) for b in buffers)
    for iv in block.iter_vars:
        # a variable in an affine store index (D[15 - vi]) is sized by _iteration_ranges
        if iv.kind == "spatial" and (len(stores) != 1 or iv.var not in in_indices):
            raise ScheduleError(primitive, f"block {block.name!r} does not store "
                                f"{names} at its spatial iteration variables "
                                f"({iv.var.name!r} is not an index of every store), so the "
                                f"region its consumers read does not say which instances to run")
    return found


def _iteration_ranges(func, realize, loop, here, reverse, primitive) -> list:
    """(min, extent) of each iteration variable of the moved block, and whether they come
    from a box (which may leave the block's domain) rather than the domain itself."""
    block = realize.block
    sources = _sources(block, here, reverse, primitive)
    exact: dict[tuple, list[Range]] = {}
    relaxed: dict[tuple, list] = {}
    result = []
    preimage = None
    for iv in block.iter_vars:
        if iv.var not in sources and _indexes_neighbours(block, here, iv.var, reverse):
            # indices that are not the variable itself (B[i * 4 + j], D[15 - vi]): the
            # instances one iteration makes available or needs, as isl finds them
            if preimage is None:
                from sched.schedule.preimage import preimage_ranges

                preimage = preimage_ranges(func, loop, realize, here, reverse)
            if iv.var in preimage:
                result.append((*preimage[iv.var], True))
                continue
            if not reverse and iv.kind == "spatial":
                raise ScheduleError(primitive, f"block {block.name!r} stores at indices of "
                                    f"{iv.var.name!r} whose instances under loop "
                                    f"{loop.loop_var.name!r} have no constant-extent range "
                                    f"(transform_block_layout can make it store at its "
                                    f"variables)")
        if iv.var not in sources:
            result.append((iv.dom.min, iv.dom.extent, False))
            continue
        buffers, d = sources[iv.var]
        buffer = buffers[0]
        if buffers not in exact:
            exact[buffers] = _needed_box(func, loop, here, buffers, reverse)
        box = exact[buffers][d]
        if invariant(func, box.extent):
            result.append((box.min, box.extent, True))
            continue
        if buffers not in relaxed:
            relaxed[buffers] = [None] * buffer.ndim if len(buffers) > 1 else relaxed_box(
                func, loop, _users(here, buffer, reverse), buffer.name, reverse,
                buffer.scope == "shared")
        bound = relaxed[buffers][d]
        if bound is None or not invariant(func, bound.extent):
            largest = largest_extent(func, loop, box.extent)
            if largest is None:
                raise ScheduleError(primitive, f"dimension {d} of the region of "
                                    f"{buffer.name!r} under loop {loop.loop_var.name!r} has the "
                                    f"extent {box.extent.script()}, which changes with the "
                                    f"loops and has no bound that does not (sched bounds "
                                    f"linear forms and affine pieces); compute it at a loop "
                                    f"further out, or split so that the tiles divide")
            bound = Range(box.min, largest)
        result.append((bound.min, bound.extent, True))
    return result


def _users(here: list[BlockRealize], buffer: Buffer, reverse: bool) -> list[BlockRealize]:
    """The blocks of `here` that write (`reverse`) or read `buffer`."""
    return [r for r in here if any(x.buffer.name == buffer.name for x in
                                   (r.block.writes if reverse else r.block.reads))]


def _needed_box(func: PrimFunc, loop: For, here: list[BlockRealize], buffers, reverse: bool
                ) -> list[Range]:
    """The box of the moved block's buffer(s) that the blocks `here` touch in one iteration
    of `loop` (exact_box), the union over several buffers stored at the same indices."""
    access = "write" if reverse else "read"
    return merged_box([exact_box(func, loop, users, buffer.name, access,
                                 buffer.scope == "shared")
                       for buffer in buffers if (users := _users(here, buffer, reverse))])


def _indexes_neighbours(block, here: list[BlockRealize], var: Var, reverse: bool) -> bool:
    """Whether `var` is in an index, other than itself alone, of a load of `block` from a
    buffer one of `here` writes (`reverse`), or of a store of `block` to one they read."""
    kind = BufferLoad if reverse else BufferStore
    touched = {r.buffer.name for p in here
               for r in (p.block.writes if reverse else p.block.reads)}
    return any(index != var and var in free_vars(index)
               for access in block_accesses(block, kind) if access.buffer.name in touched
               for index in access.indices)


def _place(func: PrimFunc, realize, loop_name: str, nest: Stmt, names, reverse,
           index: int | None = None) -> PrimFunc:
    """`func` with the block's old nest removed and `nest` in the body of the loop: before the
    first statement holding a consumer, or after the last holding a producer (`index` None).

    `index` (TVM's) picks the position among the statements of the loop's body instead:
    -1 the last possible one, -2 the first, or a position within those two. The possible
    positions are between the statements holding the moved block's producers and those
    holding its consumers; the dependence check that follows judges the result anyway."""
    primitive = "reverse_compute_at" if reverse else "compute_at"
    block_name = realize.block.name
    producers, consumers = (neighbours(func, block_name, kind)
                            for kind in ("producers", "consumers"))
    func = remove_block(func, realize)
    loop = find_loop(func, loop_name, primitive)
    children = list(loop.body.stmts) if isinstance(loop.body, SeqStmt) else [loop.body]
    held = [{r.block.name for r in collect(child, BlockRealize)} for child in children]

    def positions(blocks) -> list[int]:
        return [i for i, names in enumerate(held) if not names.isdisjoint(blocks)]
    first = max(positions(producers), default=-1) + 1
    last = min(positions(consumers), default=len(children))
    default = positions(names)[-1] + 1 if reverse else positions(names)[0]
    if index is None:
        position = default
    elif index in (-1, -2):
        position = last if index == -1 else first
    elif isinstance(index, int) and not isinstance(index, bool) and first <= index <= last:
        position = index
    else:
        raise ScheduleError(primitive, f"argument 'index' to {primitive}: expected -1 (the last "
                            f"possible position), -2 (the first) or a position in [{first}, "
                            f"{last}] of the {len(children)} statements in the body of loop "
                            f"{loop_name!r} (between the producers and the consumers of block "
                            f"{block_name!r}), got {index!r}")
    children.insert(position, nest)
    return replace(func, loop, dataclasses.replace(loop, body=seq(*children)))


def _partial_reduction(here: list[BlockRealize], loop: For) -> str | None:
    """The reason a consumer may not go under `loop`: a reduce loop of a producer there."""
    for producer in here:
        for iv, value in zip(producer.block.iter_vars, producer.iter_values):
            if iv.kind == "reduce" and loop.loop_var in free_vars(value):
                return (f"loop {loop.loop_var.name!r} is a reduce loop of producer "
                        f"{producer.block.name!r}: under it the consumer would read a partial "
                        f"result (a consumer goes after the reduce loops of its producer)")
    return None


def move_under(func: PrimFunc, block: str, loop_name: str, preserve_unit_loops: bool = False,
               reverse: bool = False, render: bool = True, suggest: bool = True,
               index: int | None = None) -> PrimFunc:
    """compute_at (or, with `reverse`, reverse_compute_at) of `block` under `loop_name`."""
    primitive = "reverse_compute_at" if reverse else "compute_at"
    kind = "producers" if reverse else "consumers"
    realize = find_block(func, block, primitive)
    loop = find_loop(func, loop_name, primitive)

    def alternatives() -> tuple[str, ...]:
        return _legal_loops(func, block, reverse) if render and suggest else ()
    _check_nesting(func, realize, loop, primitive, alternatives)
    exchanged = neighbours(func, block, kind)
    here = blocks_under_loop(func, loop, exchanged)
    if not here:
        listed = ", ".join(repr(n) for n in exchanged) or "none"
        raise ScheduleError(primitive, f"no {kind[:-1]} of block {block!r} is under loop "
                            f"{loop_name!r} (its {kind}: {listed})", render=render,
                            alternatives=alternatives())
    for region in realize.block.reads if reverse else realize.block.writes:
        # the region the moved block must cover is found through the buffer it names
        refuse_other_views(func, region.buffer, primitive, "sizing the moved block's loops")
    ranges = _iteration_ranges(func, realize, loop, here, reverse, primitive)
    _check_in_scope(func, loop, ranges, primitive)
    nest = new_nest(func, realize, loop, ranges, preserve_unit_loops)
    nest = _through_enclosing_block(func, loop, nest, block, primitive)
    new_func = _place(func, realize, loop_name, nest, exchanged, reverse, index)
    violation = _violation(func, new_func, block, loop, here, reverse)
    if violation is not None:
        # (past the isl budget, asking every other loop would cost as much again: 90 s for
        # one refusal, audit helper-193)
        raise schedule_error(primitive, violation, func, loop=loop_name, render=render,
                             alternatives=() if violation.over_budget else alternatives())
    return new_func


def _through_enclosing_block(func: PrimFunc, loop: For, nest: Stmt, block: str,
                             primitive: str) -> Stmt:
    """`nest` (the moved block's new loops and bindings, found in terms of every loop around
    `loop`) using, for a loop outside the block that holds `loop`, that block's iteration
    variable bound to it (`vo = x`: x becomes vo), as block isolation requires: a block's
    bindings, predicate and loops inside another block see only that block's variables and
    the loops inside it. Refused when such a loop has no iteration variable bound to it."""
    path = path_to(func.body, loop) or []
    holders = [i for i, node in enumerate(path) if isinstance(node, BlockRealize)]
    if not holders:
        return nest
    holder = path[holders[-1]]
    outside = {node.loop_var for node in path[:holders[-1]] if isinstance(node, For)}
    mapping = {value: iv.var for iv, value in zip(holder.block.iter_vars, holder.iter_values)
               if isinstance(value, Var) and value in outside}

    def rewrite(stmt: Stmt) -> Stmt:
        if isinstance(stmt, For):
            return dataclasses.replace(stmt, min=substitute(stmt.min, mapping),
                                       extent=substitute(stmt.extent, mapping),
                                       body=rewrite(stmt.body))
        values = tuple(substitute(v, mapping) for v in stmt.iter_values)
        return dataclasses.replace(stmt, iter_values=values,
                                   predicate=substitute(stmt.predicate, mapping))
    nest = rewrite(nest)
    used = set()
    stmt = nest
    while isinstance(stmt, For):
        used |= set(free_vars(stmt.min)) | set(free_vars(stmt.extent))
        stmt = stmt.body
    used |= {v for value in (*stmt.iter_values, stmt.predicate) for v in free_vars(value)}
    unbound = sorted(v.name for v in used & outside)
    if unbound:
        raise ScheduleError(primitive, f"under loop {loop.loop_var.name!r} block {block!r} "
                            f"would depend on {', '.join(repr(n) for n in unbound)}, a loop "
                            f"outside the block {holder.block.name!r} that holds it, which "
                            f"binds no iteration variable to it as is; bind one "
                            f"(T.axis.spatial(extent, loop)) or place the block elsewhere")
    return nest


def _check_in_scope(func: PrimFunc, loop: For, ranges, primitive: str) -> None:
    """The moved block's loops may use only what is defined where they go: the loops around
    and including `loop`, symbolic dims and scalar parameters (an internal error otherwise,
    reported as a refusal rather than a malformed function)."""
    allowed = {lp.loop_var for lp in enclosing_loops(func, loop)} | {loop.loop_var}
    allowed |= set(func.symbolic_vars) | {p for p in func.params if isinstance(p, Var)}
    for low, extent, _ in ranges:
        unknown = (set(free_vars(low)) | set(free_vars(extent))) - allowed
        if unknown:
            names = ", ".join(sorted(v.name for v in unknown))
            raise ScheduleError(primitive, f"the region the block needs under loop "
                                f"{loop.loop_var.name!r} depends on {names}, which is not "
                                f"defined there; place the block under another loop")


# isl operations (about a second) a refusal already decided may spend on finding the
# dependence it breaks, for its message
EXAMPLE_OPERATIONS = 2_000_000


def _violation(func: PrimFunc, new_func: PrimFunc, block: str, loop: For, here,
               reverse: bool) -> Violation | None:
    """Why `new_func` is not a legal move of `block` under `loop`, or None.

    A block may run an instance several times (recomputation) only idempotently (RUNS_RULE,
    `check_runs`); then its first run (the lexicographic minimum of its schedule) stands for
    it, and check_order checks the dependences on first runs. A consumer must run each
    instance once. A rule that names the cause (a partial reduction, a second run that would
    overwrite another block's writes) is the reason when it applies."""
    loop_name, kind = loop.loop_var.name, "producers" if reverse else "consumers"
    rule = _partial_reduction(here, loop) if reverse else None
    model = build_model(new_func)
    if rule is not None:     # refused: name the cause, with a dependence it breaks where isl
        # finds one in EXAMPLE_OPERATIONS (the whole schedule's order took a fuzz hunt's
        # example over 10 minutes: only the message's example rests on it)
        violation = within_operations(
            EXAMPLE_OPERATIONS, lambda: check_schedule(func, first_runs(model.schedule)))
        return dataclasses.replace(violation or Violation(rule), reason=rule)
    runs = check_runs(build_model(func), model, allow_recompute=True)
    if runs is not None:     # a block run more than once, not idempotently (RUNS_RULE)
        return Violation(_rerun_clobbers(new_func, block, loop_name) or runs.reason)
    violation = check_order(func, new_func, allow_recompute=True, allow_dead=not reverse)
    if violation is not None and violation.dependence is None:
        covered = ("the instances that read what its producers write there" if reverse else
                   "what its consumers there read")
        rule = rule or (f"under loop {loop_name!r}, block {block!r} would run only {covered}, "
                        f"which differs from what it runs now ({violation.reason})")
    runs_once = all(s.runs_once for s in model.statements_of_block(block))
    if violation is None and reverse and not runs_once:
        rule = rule or (f"block {block!r} would run some instances in more than one "
                        f"iteration of loop {loop_name!r}: its {kind} there do not "
                        f"determine which instances to run")
    if rule is not None:
        return dataclasses.replace(violation or Violation(rule), reason=rule)
    return violation


def _rerun_clobbers(func: PrimFunc, block: str, loop_name: str) -> str | None:
    """A block run again (recomputed) rewrites what it wrote: harmless unless another block
    writes the same buffer in between (an init under its own reduction's loops would reset
    the partial sums)."""
    realizes = {r.block.name: r.block for r in collect(func.body, BlockRealize)}
    written = {region.buffer.name for region in realizes[block].writes}
    for name, other in realizes.items():
        shared = written & {region.buffer.name for region in other.writes}
        if name not in (block, "root") and shared:
            return (f"under loop {loop_name!r}, block {block!r} would run some instances more "
                    f"than once, but block {name!r} also writes {sorted(shared)[0]!r}: a "
                    f"second run would overwrite what {name!r} wrote")
    return None


# how long a refusal may spend finding the loops the block could go under instead (audit
# helper-104: 41 s, over symbolic shapes after transform_layout and cache_read)
ALTERNATIVES_SECONDS = 2.0


def _legal_loops(func: PrimFunc, block: str, reverse: bool) -> tuple[str, ...]:
    """Each loop the block may go under, as the call that moves it there."""
    primitive = "reverse_compute_at" if reverse else "compute_at"
    others = neighbours(func, block, "producers" if reverse else "consumers")
    own = enclosing_loops(func, find_block(func, block))
    candidates: dict[str, None] = {}
    for realize in collect(func.body, BlockRealize):
        if realize.block.name in others:
            for lp in enclosing_loops(func, realize):
                if not any(lp is x for x in own):
                    candidates[lp.loop_var.name] = None
    legal = []
    start = time.monotonic()
    for name in candidates:
        if time.monotonic() - start > ALTERNATIVES_SECONDS:
            break                 # a suggestion, not the answer: the refusal waits no longer
        try:
            move_under(func, block, name, reverse=reverse, render=False, suggest=False)
        except ScheduleError:
            continue
        legal.append(f"sch.{primitive}({block}, {name})")
    return tuple(legal)


def compute_at(func: PrimFunc, block: str, loop: str, preserve_unit_loops: bool = False,
               render: bool = True) -> PrimFunc:
    """Move producer `block` under `loop` of its consumers (see Schedule.compute_at)."""
    return move_under(func, block, loop, preserve_unit_loops, reverse=False, render=render)


def reverse_compute_at(func: PrimFunc, block: str, loop: str, preserve_unit_loops: bool = False,
                       render: bool = True) -> PrimFunc:
    """Move consumer `block` under `loop` of its producers (see Schedule.reverse_compute_at)."""
    return move_under(func, block, loop, preserve_unit_loops, reverse=True, render=render)

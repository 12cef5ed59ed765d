"""Instances that run more than once (RUNS_RULE): a binding such as `vr = p % 4`, or a producer
that compute_at recomputes. The order checks judge dependences on first runs; this module makes
that sound by keeping every other run where it may not be dropped or moved.
"""

from __future__ import annotations

import functools

import islpy as isl

from sched.ir.extern import is_opaque
from sched.ir.memo import register
from sched.polyhedral.dependences import (
    first_runs,
    last_runs,
    maps,
)
from sched.polyhedral.first_run_flows import first_runs_stand_for_runs
from sched.polyhedral.model import Statement
from sched.polyhedral.pairs import order_key, schedule_map
from sched.polyhedral.violation import Violation

RUNS_RULE = """\
An instance that runs more than once is modelled by its first run. That is exact when its runs
are idempotent: nothing it reads is written from its first run to its last (by itself or any
other block), and nothing it writes is written by another run in between; then every run
computes and stores the same values, and only the first matters to the others. A step may
- not make a block that ran each instance once run some more than once (unless compute_at
  asks for it), nor create runs that are not idempotent;
- not change the runs of a block whose runs are not idempotent in the original (a user's
  `vr = p % 4` over `p < 8` accumulating into its output): it stays where it is, with its
  loops, since a step could change how often each instance runs.
A write between a block's runs to what it reads is harmless when it is a later run of an
instance of another block whose runs are idempotent and whose first run came before the
reader's first: from that first run to its last, only its runs write those elements, all the
same value, which the reader's first run read too (two-level staging: a fragment loaded per
warp from a shared tile that each warp refills with the same values).
Under a loop whose iterations run at once, the runs in different iterations of a buffer
private to an iteration (each has its own copy) may be overwritten in between: what the runs
read must stay the same, so each stores the values of its first run in its own copy."""


def repeated_instance(statement: Statement) -> str | None:
    """An instance of `statement` that runs more than once, as text, or None if none does."""
    if statement.runs_once:
        return None
    schedule = statement.schedule
    again = schedule.subtract(first_runs(schedule)).domain()
    point = again.sample_point()
    values = [point.get_coordinate_val(isl.dim_type.set, d).to_python()
              for d in range(len(statement.block.iter_vars))]
    inner = ", ".join(f"{iv.var.name}={v}" for iv, v in zip(statement.block.iter_vars, values))
    return f"{statement.block.name}{' (init)' if statement.is_init else ''}[{inner}]"


def stores_one_value_in_any_order(model, statement: Statement) -> bool:
    """Whether every run of each instance of `statement` stores the same values whatever
    the order of its runs among other statements' runs, and what it stores stays: its block
    reads only storages no statement of the function writes (a copy of an input), sees every
    load it makes (none in a bound, a condition or a binding), is no opaque call, is the only
    block writing its storages, and its runs are idempotent in the function's order
    (RUNS_RULE: no other instance writes its elements between them). A block's body is a
    function of its iteration variables and of what it reads, so the runs of one instance
    then store one value. (RUNS_RULE alone asks it of the function's order only: there the
    runs of a copy whose input another statement rewrites between them may differ in
    another order.)"""
    if is_opaque(statement.block) or statement.unseen:
        return False
    written = set(model.writers_of_storages())
    if any(model.storages[m.get_tuple_name(isl.dim_type.out)] in written
           for m in maps(statement.reads)):
        return False
    # the only writer of what it writes, and nothing between its runs in the function's
    # order (another instance: audit helper-66 found another block's store between two runs
    # of a copy, which a read after the first run in the threads' program then saw)
    others = model.writers_of_storages([s for s in model.statements.values()
                                        if s.block.name != statement.block.name])
    own = {model.storages[m.get_tuple_name(isl.dim_type.out)] for m in maps(statement.writes)}
    return not own & set(others) and runs_are_idempotent(model, statement)


def runs_are_idempotent(model, statement: Statement,
                        assumed: frozenset[str] = frozenset(),
                        overwritable: frozenset[str] = frozenset()) -> bool:
    """Whether the runs of each instance of `statement` are idempotent (RUNS_RULE); kept
    with the (cached) model, which the next step's check reads again.

    A write between its runs by a rerun of another statement counts as harmless only when
    that statement's runs are idempotent, asked here with `statement` (and the statements
    `assumed`, those asking already) left out of that relaxation: no proof rests on itself.
    Writes by other runs between its runs to the buffers (isl tuples) `overwritable` are not
    asked about: what it reads must still stay the same, so every run stores the same values
    (the buffers private to an iteration of a concurrent loop: concurrency.py)."""
    if statement.runs_once:
        return True
    if is_opaque(statement.block):
        return False                 # an opaque call may do anything each time it runs
    key = ("runs_are_idempotent", statement.name, assumed, overwritable)
    if key not in model.derived:
        model.derived[key] = _runs_are_idempotent(model, statement, assumed | {statement.name},
                                                  overwritable)
    return model.derived[key]


def _runs_are_idempotent(model, statement: Statement, assumed: frozenset[str],
                         overwritable: frozenset[str]) -> bool:
    """Pair by pair with every statement that writes what `statement` touches: nothing it
    reads is written from its first run to its last (but by the later runs of an idempotent
    statement's instance that first ran before it), and nothing it writes is written between
    them by another run (but in `overwritable`). Each pair is asked in its canonical time
    form (pairs.py: the order of the two statements' runs is kept), remembered by content."""
    touched = _tuples(statement.reads) | _tuples(statement.writes)
    reads, writes = _texts_by_tuple(statement.reads), _texts_by_tuple(statement.writes)
    for buffer in overwritable:
        writes.pop(buffer, None)
    for other in model.statements.values():
        for buffer, written in _texts_by_tuple(other.writes).items():
            if buffer not in touched:
                continue
            if buffer not in reads and buffer not in writes:
                continue                         # written, overwritable, not read
            order = order_key(statement, other)
            itself = other is statement
            if _idempotent_against(order, written, reads.get(buffer), writes.get(buffer),
                                   itself, rerun_writer=False):
                continue
            if itself or other.runs_once or other.name in assumed or reads.get(buffer) is None:
                return False
            if not _idempotent_against(order, written, reads.get(buffer), writes.get(buffer),
                                       itself, rerun_writer=True):
                return False
            if not runs_are_idempotent(model, other, assumed):
                return False
    return True


def _tuples(relation: isl.UnionMap) -> set[str]:
    return {m.get_tuple_name(isl.dim_type.out) for m in maps(relation)}


def written_tuples(statement: Statement) -> set[str]:
    """The isl tuples of the storages `statement` writes."""
    return _tuples(statement.writes)


def _texts_by_tuple(relation: isl.UnionMap) -> dict[str, str]:
    return {m.get_tuple_name(isl.dim_type.out): str(m) for m in maps(relation)}


@register
@functools.lru_cache(maxsize=1 << 12)
def _idempotent_against(order: tuple, written: str, reads: str | None, writes: str | None,
                        itself: bool, rerun_writer: bool) -> bool:
    """Whether the runs of the statement (`order[0]`) stay idempotent against the writes
    `written` (instance -> element) of the statement `order[1]` (the same one when `itself`):
    no element it `reads` is written from its first run to its last, no element it `writes`
    is written strictly between them by another run. With `rerun_writer` (the caller has
    proven the other statement's runs idempotent), a write by a run of an instance whose
    first run came before the statement's first run is not counted (RUNS_RULE)."""
    source_key, other_key, params = order
    if reads is None and itself and _writes_each_element_once(written):
        # another run between its first and its last writes an element of another instance
        return True
    runs = schedule_map(*source_key, params)
    first, last = first_runs(runs), last_runs(runs)
    times = isl.Set.universe(runs.get_space().range())
    window = first.apply_range(times.lex_le_set(times)).intersect(
        last.apply_range(times.lex_gt_set(times)))             # [first run, last run)
    other_runs = schedule_map(*other_key, params)
    if _one_instance_per_time(other_key, params):
        return _idempotent_by_instances(first, last, window, other_runs, written, reads, writes,
                                        itself, rerun_writer)
    time_writes = other_runs.reverse().apply_range(isl.Map(written))
    read_window = window
    if rerun_writer:            # statement -> the runs of writers that first ran before it
        rewrites = first.apply_range(times.lex_gt_set(times)).apply_range(
            first_runs(other_runs).reverse()).apply_range(other_runs)
        read_window = window.subtract(rewrites)
    if reads is not None and not read_window.apply_range(time_writes).intersect(
            isl.Map(reads)).is_empty():
        return False                 # a later run would read another value
    if writes is None:
        return True
    between = window.subtract(first)
    if itself:
        between = between.subtract(runs)                       # not its own runs
    return between.apply_range(time_writes).intersect(isl.Map(writes)).is_empty()


def _idempotent_by_instances(first, last, window, other_runs, written: str, reads: str | None,
                             writes: str | None, itself: bool, rerun_writer: bool) -> bool:
    """_idempotent_against asked of the writer's instances instead of its run times, where
    each time is a run of one writer instance (so "the time is a run of a writer that first
    ran before" is "the instance running then first ran before"): intersections only, no
    subtraction of run-time sets, whose complements cost seconds on quasi-affine schedules (a
    tensor-core schedule's fetches: 13 s a pair against 0.02 s)."""
    writers_in = window.apply_range(other_runs.reverse())      # x -> writers running in it
    if reads is not None:
        rereads = writers_in.intersect(isl.Map(reads).apply_range(isl.Map(written).reverse()))
        if rerun_writer:        # only writers whose first run is not before the statement's
            rereads = rereads.intersect(first.lex_le_map(first_runs(other_runs)))
        if not rereads.is_empty():
            return False             # a later run would read another value
    if writes is None:
        return True
    times = isl.Set.universe(first.get_space().range())
    strictly = first.apply_range(times.lex_lt_set(times)).intersect(
        last.apply_range(times.lex_gt_set(times)))             # (first run, last run)
    writers_between = strictly.apply_range(other_runs.reverse())
    if itself:                   # another instance: not its own runs
        instances = isl.Set.universe(first.get_space().domain())
        writers_between = writers_between.intersect(
            instances.lex_lt_set(instances).union(instances.lex_gt_set(instances)))
    overwrites = isl.Map(writes).apply_range(isl.Map(written).reverse())
    return writers_between.intersect(overwrites).is_empty()


@register
@functools.lru_cache(maxsize=1 << 12)
def _one_instance_per_time(key: tuple, params: str) -> bool:
    """Whether no two instances of the statement scheduled by `key` run at one time."""
    return schedule_map(*key, params).reverse().is_single_valued()


@register
@functools.lru_cache(maxsize=1 << 12)
def _writes_each_element_once(written: str) -> bool:
    """Whether no two instances write one element (the write map `written` is injective)."""
    return isl.Map(written).is_injective()


def _padded(schedule: isl.Map, width: int) -> isl.Map:
    """`schedule` with time vectors padded with 0 to `width` entries."""
    extra = width - schedule.dim(isl.dim_type.out)
    if extra <= 0:
        return schedule
    schedule = schedule.add_dims(isl.dim_type.out, extra)
    for d in range(width - extra, width):
        schedule = schedule.fix_val(isl.dim_type.out, d, 0)
    return schedule


def _width(old_model, new_model) -> int:
    return max(len(st.time) for model in (old_model, new_model)
               for st in model.statements.values())


def _same_runs(old: Statement, new: Statement, width: int) -> bool:
    """Whether `new` runs each instance at the same times as `old`."""
    return _padded(old.schedule, width).is_equal(_padded(new.schedule, width))


def _others_keep_their_place(old_model, new_model, name: str, width: int) -> bool:
    """Whether every instance of another statement that touches an element the statement
    `name` touches stays on the same side of each of its runs (whose times are unchanged)."""
    statement = old_model.statements[name]
    conflicts = None
    for x in old_model.statements.values():
        if x.name == name:
            continue
        pairs = x.writes.apply_range(statement.reads.union(statement.writes).reverse()).union(
            x.reads.apply_range(statement.writes.reverse()))
        conflicts = pairs if conflicts is None else conflicts.union(pairs)
    if conflicts is None or conflicts.is_empty():
        return True
    runs = isl.UnionMap.from_map(_padded(statement.schedule, width))
    times = isl.Set.universe(_padded(statement.schedule, width).get_space().range())
    later = isl.UnionMap.from_map(times.lex_lt_set(times))

    def sides(model) -> isl.UnionMap:
        others = None
        for x in model.statements.values():
            if x.name == name:
                continue
            first = first_runs(x.schedule)
            part = isl.UnionMap.from_map(_padded(first, width))
            others = part if others is None else others.union(part)
        before = others.apply_range(later)         # x -> the times after x's (first) run
        return conflicts.apply_range(runs).intersect(before)
    return sides(old_model).is_equal(sides(new_model))


def check_runs(old_model, new_model, allow_recompute: bool = False) -> Violation | None:
    """Whether the runs of every statement in `new_model` are allowed (RUNS_RULE), given its
    runs in `old_model`."""
    width = _width(old_model, new_model)
    for name, new in new_model.statements.items():
        old = old_model.statements.get(name)
        if old is None:
            continue
        # whether some instance runs more than once (repeated_instance is not None), the
        # instance itself found only for a refusal's message
        old_again, new_again = not old.runs_once, not new.runs_once
        if not old_again and not new_again:
            continue
        block = new.block.name
        if old_again:
            if not runs_are_idempotent(old_model, old) and \
                    not first_runs_stand_for_runs(old_model, block):
                if _same_runs(old, new, width):
                    if _others_keep_their_place(old_model, new_model, name, width):
                        continue
                    return Violation(
                        f"block {block!r} runs some instances more than once "
                        f"({repeated_instance(old)} "
                        f"among them) and its runs are not idempotent: another block that "
                        f"touches what it touches must stay on the same side of each of its "
                        f"runs")
                return Violation(
                    f"block {block!r} runs some instances more than once "
                    f"({repeated_instance(old)} among them) and its runs are not idempotent "
                    f"(a later run reads or overwrites "
                    f"what an earlier one or another block wrote in between): a step must not "
                    f"move it or change its loops, since that could change how often each "
                    f"instance runs")
        if new_again:
            if not old_again and not allow_recompute:
                return Violation(f"the new loops run some instances of block {block!r} more "
                                 f"than once ({repeated_instance(new)} among them)")
            if not runs_are_idempotent(new_model, new) and \
                    not first_runs_stand_for_runs(new_model, block):
                # (over-approximated bindings may run an instance more than once only in the
                # model: helper-172, a matmul under a fused symbolic nest runs each once)
                conservative = "" if new.exact else (
                    " (conservative: a binding or condition of the block is not affine, and "
                    "the model lets it take more values than it does; with constant extents, "
                    "or loops not fused over symbolic ones, the step may be accepted)")
                return Violation(
                    f"the new loops run some instances of block {block!r} more than once "
                    f"({repeated_instance(new)} among them), and a later run would not "
                    f"compute what the first did (it reads or overwrites what is written in "
                    f"between){conservative}")
    return None



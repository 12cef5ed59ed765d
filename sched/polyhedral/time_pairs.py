"""Pairs of runs in time, for the concurrency rule (concurrency.py): which runs of a dependence
are in different iterations of a loop (or of two loops bound to one axis), and whether such
runs are in order in each thread's own program (where a barrier can order them).

Every answer is an isl question on time vectors, remembered by its key (the dependence's
texts and the positions compared), so the rule asks each one once per content.
"""

from __future__ import annotations

import functools

import islpy as isl

from sched.ir.memo import register
from sched.polyhedral import names
from sched.polyhedral.dependences import Dependence
from sched.polyhedral.isl_text import read_map, within_operations
from sched.polyhedral.pairs import relation_of, schedule_map


@functools.lru_cache(maxsize=256)
def carried_at(width: int, position: int, params: str) -> isl.Map:
    """{ [t] -> [t'] : t and t' agree before `position` and differ at it }."""
    a = [names.local("a", i) for i in range(width)]
    b = [names.local("b", i) for i in range(width)]
    same = [f"{a[i]} = {b[i]}" for i in range(position)]
    differ = f"{a[position]} != {b[position]}"
    condition = " and ".join(same + [differ])
    return read_map(f"{params} {{ [{', '.join(a)}] -> [{', '.join(b)}] : {condition} }}")


@functools.lru_cache(maxsize=1024)
def time_pairs(key: tuple) -> isl.Map:
    """Pairs of times (source run -> sink run) by `key`: ("carried", width, position, params):
    in one iteration of the loops before `position` and different iterations of the loop at
    it; ("threads", width, equal, position, params): equal at the positions `equal`, different
    at `position`; ("across", width, equal, here, there, params): equal at the positions
    `equal`, and different at `here` (source) and `there` (sink)."""
    if key[0] == "carried":
        _, width, position, params = key
        return carried_at(width, position, params)
    if key[0] == "threads":
        _, width, equal, position, params = key
        here = there = position
    else:
        _, width, equal, here, there, params = key
    a = [names.local("a", i) for i in range(width)]
    b = [names.local("b", i) for i in range(width)]
    same = [f"{a[i]} = {b[i]}" for i in equal]
    condition = " and ".join(same + [f"{a[here]} != {b[there]}"])
    return read_map(f"{params} {{ [{', '.join(a)}] -> [{', '.join(b)}] : {condition} }}")


def crossing_runs(dep: Dependence, between: tuple) -> tuple[isl.Map, isl.Map] | None:
    """The runs of `dep` (source time -> sink time) that are in `time_pairs(between)`, and the
    instance pairs they relate; None when there are none (`crossing_times` and
    `crossing_pairs`)."""
    crossing = crossing_times(dep, between)
    return None if crossing is None else (crossing, crossing_pairs(dep, between))


def crossing_times(dep: Dependence, between: tuple) -> isl.Map | None:
    """The runs of `dep` (source time -> sink time) that are in `time_pairs(between)`, or None
    when there are none. Asked in the pair's canonical time form (pairs.py), which relates
    the same runs at the same positions, and remembered by the dependence's key."""
    if dep.key is None:
        return _crossing_times(dep.relation, dep.source.schedule, dep.sink.schedule, between)
    return crossing_times_by_key(dep.key, between)


def crossing_pairs(dep: Dependence, between: tuple) -> isl.Map:
    """The instance pairs of `dep` whose runs are in `time_pairs(between)` (there are some):
    asked only to describe a dependence the rule refuses (mapping the runs back to the
    instances took 0.45 s a dependence on TVM's 4096^3 mma nests, for every dependence a
    barrier then ordered)."""
    if dep.key is None:
        relation, source, sink = dep.relation, dep.source.schedule, dep.sink.schedule
    else:
        relation = relation_of(dep.key)
        source_key, sink_key, params = dep.key[2]
        source, sink = schedule_map(*source_key, params), schedule_map(*sink_key, params)
    crossing = crossing_times(dep, between)
    return relation.intersect(crossing.apply_domain(source.reverse())
                              .apply_range(sink.reverse()))


@register
@functools.lru_cache(maxsize=1 << 14)
def crossing_times_by_key(key: tuple, between: tuple) -> isl.Map | None:
    relation = relation_of(key)
    source, sink, params = key[2]
    return _crossing_times(relation, schedule_map(*source, params),
                           schedule_map(*sink, params), between)


def crossing_exists(dep: Dependence, between: tuple) -> bool:
    """Whether `crossing_times(dep, between)` finds runs, asked on the time positions
    `time_pairs(between)` constrains only (the schedules projected onto them: the same
    answer, where the whole times of a producer recomputed under a parallel tile took isl
    26 s and these 0.4 s)."""
    if dep.key is None:
        return crossing_times(dep, between) is not None
    return _crossing_exists_by_key(dep.key, between)


@register
@functools.lru_cache(maxsize=1 << 14)
def _crossing_exists_by_key(key: tuple, between: tuple) -> bool:
    relation = relation_of(key)
    source, sink, params = key[2]
    width = _deciding_width(between)
    pairs = time_pairs(between)
    pairs = pairs.project_out(isl.dim_type.in_, width, pairs.dim(isl.dim_type.in_) - width) \
        .project_out(isl.dim_type.out, width, pairs.dim(isl.dim_type.out) - width)
    runs = relation.apply_domain(_first_positions(schedule_map(*source, params), width)) \
        .apply_range(_first_positions(schedule_map(*sink, params), width))
    return not runs.intersect(pairs).is_empty()


def _deciding_width(between: tuple) -> int:
    """One past the last time position `time_pairs(between)` constrains."""
    if between[0] == "carried":
        return between[2] + 1
    if between[0] == "threads":
        _, _, equal, position, _ = between
        return max((*equal, position)) + 1
    _, _, equal, here, there, _ = between
    return max((*equal, here, there)) + 1


def _first_positions(schedule: isl.Map, width: int) -> isl.Map:
    return schedule.project_out(isl.dim_type.out, width,
                                schedule.dim(isl.dim_type.out) - width)


def _crossing_times(relation: isl.Map, source: isl.Map, sink: isl.Map,
                    between: tuple) -> isl.Map | None:
    crossing = relation.apply_domain(source).apply_range(sink).intersect(time_pairs(between))
    return None if crossing.is_empty() else crossing


@register
@functools.lru_cache(maxsize=1 << 12)
def in_program_order_by_key(key: tuple, between: tuple, programs: tuple, params: str,
                            one_copy_enough: bool = False) -> bool:
    crossing = crossing_times_by_key(key, between)
    if in_program_order(crossing, programs, params):
        return True
    source, _, schedule_params = key[2]
    return one_copy_enough and one_copy_before_each_read(
        crossing, schedule_map(*source, schedule_params), programs, params, between)


def in_program_order(crossing: isl.Map, programs: tuple, params: str) -> bool:
    """Whether each pair of runs in `crossing` (source time -> sink time) whose source run
    comes first in the function is in order in the threads' program: the times with the
    entries of the threadIdx loops set to 0 (`programs`: the width and those positions, for
    the source and for the sink). Where an instance runs more than once (a halo element two
    tiles fetch), a dependence between instances also pairs a later run of its source with
    an earlier run of its sink; the runs rule (runs.RUNS_RULE) makes such a later run store
    the value the sink read, so its order does not matter (and it is not the order of the
    function: judged as one, a serial loop of tiles around a cooperative fetch of halo
    tiles was refused)."""
    source, sink = (without_thread_loops(width, zeroed, params) for width, zeroed in programs)
    forward = crossing.intersect(isl.Map.lex_lt(crossing.get_space().domain()))
    in_program = forward.apply_domain(source).apply_range(sink)
    # no pair out of order; cheaper than is_subset(domain.lex_lt_set(range)), which
    # complements a product of two sets with existentials (minutes on small matmul tiles)
    out_of_order = isl.Map.lex_ge(in_program.get_space().domain())
    return in_program.intersect(out_of_order).is_empty()


def one_copy_before_each_read(crossing: isl.Map, source: isl.Map, programs: tuple,
                              params: str, between: tuple) -> bool:
    """Whether each sink run of `crossing` (a flow dependence's runs in different threads of
    one block: `time_pairs(between)`, "threads" or "across") comes, in the threads' program,
    after some run of the source instance it reads from in the same thread block and
    iteration of the loops around the threads (the positions `equal` of `between`), so that
    a barrier stands between them; `source` is the source's schedule (instance -> its runs).

    Asked by the rule of barriers where a pair of runs is out of the threads' order (a halo
    element that the cooperative fetch of a later iteration of the reduction loop copies
    again, in a thread before the reader's in the function's order), and only of a source
    whose runs store one value in any order (runs.stores_one_value_in_any_order): then the
    other runs rewrite what the read saw. Within a budget of isl operations; no where it is
    spent. Weaker versions were unsound (audit helpers 62, 63, 66): asked of output and
    anti dependences (a later rerun of a writer overwrote a newer value; of a reader, read
    it), of a source whose runs store other values (a copy of a buffer rewritten between
    them), of a copy another block overwrites between two of its runs, and counting a run in
    another thread block (its own copy of shared memory)."""
    if between[0] == "carried":
        return False
    equal = between[2]
    return bool(within_operations(ONE_COPY_OPERATIONS, lambda: _one_copy_before_each_read(
        crossing, source, programs, params, equal)))


# isl operations (about 0.5 s) one_copy_before_each_read may take
ONE_COPY_OPERATIONS = 500_000


def _one_copy_before_each_read(crossing: isl.Map, source: isl.Map, programs: tuple,
                               params: str, equal: tuple[int, ...]) -> bool:
    to_program, sink_program = (without_thread_loops(width, zeroed, params)
                                for width, zeroed in programs)
    program_space = to_program.get_space().range()
    earlier = to_program.apply_range(isl.Map.lex_lt(program_space)) \
        .apply_range(sink_program.reverse())       # source run -> sink runs after it
    for p in equal:                                # ... in its block and outer iteration
        earlier = earlier.equate(isl.dim_type.in_, p, isl.dim_type.out, p)
    read_by = crossing.apply_domain(source.reverse())          # source instance -> sink run
    return read_by.is_subset(source.apply_range(earlier))


@functools.lru_cache(maxsize=1 << 10)
def without_thread_loops(width: int, zeroed: tuple[int, ...], params: str) -> isl.Map:
    """{ time -> time with the entries at the positions `zeroed` (a statement's threadIdx
    loops, and a loop about to be bound) set to 0 }: where a run is in one thread's
    program."""
    a = [names.local("a", i) for i in range(width)]
    b = ["0" if i in zeroed else a[i] for i in range(width)]
    return read_map(f"{params} {{ [{', '.join(a)}] -> [{', '.join(b)}] }}")

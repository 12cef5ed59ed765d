"""Whether the iterations of a parallel or vectorized loop touch each other's elements at all:
the question the concurrency rule (concurrency.py) asks first, without computing a dependence.

The rule refuses such a loop iff a dependence with both ends under it is carried by it (source
and sink in one iteration of the loops outside it, in different iterations of it) through a
buffer that is not private to an iteration. Every dependence relates runs that touch one
element, one of them writing; so where no two runs under the loop in one iteration of the
loops outside it and different iterations of it touch one element with a write among them,
no dependence is carried and the loop is accepted, whatever the order of the runs. That is
asked on the runs' times up to the loop's position only, joined on the element (reads and
writes of every statement under the loop, all their runs): no order relation, no dependence,
no first run. Buffers the rule finds private to an iteration are left out (their dependences
do not count). Where such runs exist, the rule computes the dependences as before (they may be
a recomputed producer's idempotent writes), so the answer is the rule's either way; this only
answers "accepted" sooner (in the autoscheduler's conv2d replays, `parallel` took 21 ms a call
computing the dependences under the loop, 6 ms with this question first).
"""

from __future__ import annotations

import functools

import islpy as isl

from sched.ir.memo import register
from sched.polyhedral.flow_crossing import empty_union, in_time
from sched.polyhedral.isl_text import maps
from sched.polyhedral.pairs import schedule_key, schedule_map


def iterations_touch(statements, position: int, params_text: str,
                     ignored: frozenset[str] = frozenset()) -> bool:
    """Whether two runs of `statements` (each under the loop at time `position`), in one
    iteration of the loops outside the loop and different iterations of it, touch one element
    of a storage whose isl tuple is not in `ignored` (the rule's private buffers), at least
    one of them writing. Remembered by the statements' schedules and accesses."""
    def texts(union: isl.UnionMap) -> tuple[str, ...]:
        return tuple(sorted(str(m) for m in maps(union)
                            if m.get_tuple_name(isl.dim_type.out) not in ignored))

    key = tuple((schedule_key(s, s.time), texts(s.reads), texts(s.writes)) for s in statements)
    return _touch(key, position, params_text)


@register
@functools.lru_cache(maxsize=1 << 12)
def _touch(statements: tuple, position: int, params_text: str) -> bool:
    reads = writes = empty_union(params_text)         # loop prefix of the time -> element
    for key, read_texts, write_texts in statements:
        prefix = _prefix(schedule_map(*key, params_text), position).reverse()
        reads = in_time(prefix, read_texts, reads)
        writes = in_time(prefix, write_texts, writes)
    if writes.is_empty():
        return False
    touching = writes.apply_range(writes.union(reads).reverse())    # prefix -> prefix
    return not touching.intersect(_other_iteration(position)).is_empty()


def _prefix(schedule: isl.Map, position: int) -> isl.Map:
    """`schedule` (instance -> time) with the time's entries 0..position only."""
    width = schedule.dim(isl.dim_type.out)
    return schedule.project_out(isl.dim_type.out, position + 1, width - position - 1)


@functools.lru_cache(maxsize=256)
def _other_iteration(position: int) -> isl.UnionMap:
    """{ [t0..t_position] -> [u0..u_position] : equal before `position`, different at it }."""
    space = isl.Space.set_alloc(isl.DEFAULT_CONTEXT, 0, position + 1).map_from_set()
    same = isl.Map.universe(space)
    for p in range(position):
        same = same.equate(isl.dim_type.in_, p, isl.dim_type.out, p)
    before = same.order_lt(isl.dim_type.in_, position, isl.dim_type.out, position)
    after = same.order_gt(isl.dim_type.in_, position, isl.dim_type.out, position)
    return isl.UnionMap.from_map(before.union(after))

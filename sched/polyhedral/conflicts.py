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

The same question per storage (`storages_touched_across`), for every kind of concurrent loop,
decides which dependences the rule computes at all: a storage no two runs under the loop
touch across it (for a threadIdx loop: in one thread block, on different threads) carries no
dependence between statements under the loop, so their dependences on it are not computed.
It is asked in the space of the loops from the outermost to the concurrent one, which every
statement under the loop shares: no time vector, so it does not change when a step inserts a
statement elsewhere. A tensor-core schedule's re-checks after tensorize spent most of their
time intersecting such dependences with the order of nests of fused loops (TVM's mma schedule
at 4096^3: 192 s to 88 s).
"""

from __future__ import annotations

import functools

import islpy as isl

from sched.ir.memo import register
from sched.polyhedral.flow_crossing import empty_union, in_time
from sched.polyhedral.isl_text import maps
from sched.polyhedral.pairs import nest_map, schedule_key, schedule_map


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


def storages_touched_across(statements, prefix: tuple[str, ...], same: tuple[int, ...],
                            params_text: str) -> frozenset[str]:
    """The isl tuples of the storages of which two runs of `statements` touch one element,
    at least one of them writing, in runs that agree on the loops `prefix[i]` for `i` in
    `same` and differ on the last loop of `prefix`. `prefix` names the loops from the
    outermost to a concurrent loop, which every statement is under (one path of the tree:
    the same constants and loops up to it). Every dependence among the statements on another
    storage, either way, relates no such runs. Asked in the space of those loops, without
    an order relation (no dependence, no first run, no time vector): the concurrency rule
    asks it before computing dependences, whose intersection with the order of nests of
    fused loops took most of a tensor-core schedule's re-checks. Remembered by the
    statements' nests and accesses."""
    key = tuple((s.nest(), _accesses_by_storage(s)) for s in statements)
    return _touched_across(key, prefix, same, params_text)


def _accesses_by_storage(statement) -> tuple:
    """(storage tuple, (read texts, write texts)) for each storage the statement touches."""
    found: dict[str, tuple[list[str], list[str]]] = {}
    for index, union in enumerate((statement.reads, statement.writes)):
        for m in maps(union):
            found.setdefault(m.get_tuple_name(isl.dim_type.out), ([], []))[index].append(str(m))
    return tuple(sorted((name, (tuple(r), tuple(w))) for name, (r, w) in found.items()))


@register
@functools.lru_cache(maxsize=1 << 13)
def _touched_across(statements: tuple, prefix: tuple[str, ...], same: tuple[int, ...],
                    params_text: str) -> frozenset[str]:
    """`storages_touched_across` of the statements `statements` ((nest, accesses by
    storage) each)."""
    reads: dict[str, isl.UnionMap] = {}          # storage tuple -> loop values -> element
    writes: dict[str, isl.UnionMap] = {}
    for nest, accesses in statements:
        for tuple_name, texts in accesses:
            for kind_texts, into in zip(texts, (reads, writes)):
                if kind_texts:
                    seen = _loop_accesses(nest, prefix, kind_texts, params_text)
                    into[tuple_name] = into[tuple_name].union(seen) if tuple_name in into \
                        else seen
    pairs = isl.UnionMap.from_map(_other_iteration_of(len(prefix), same))
    touched = set()
    for tuple_name, written in writes.items():
        read = reads.get(tuple_name)
        into = written if read is None else written.union(read)
        if not written.apply_range(into.reverse()).intersect(pairs).is_empty():
            touched.add(tuple_name)
    return frozenset(touched)


@register
@functools.lru_cache(maxsize=1 << 13)
def _loop_accesses(nest: tuple, prefix: tuple[str, ...], texts: tuple[str, ...],
                   params_text: str) -> isl.UnionMap:
    """The accesses `texts` (instance -> element) of the statement of nest `nest` (its text
    and loops) seen from the values of its loops `prefix`: loop values -> element."""
    nest_text, loops = nest
    runs = nest_map(nest_text, params_text).apply_range(
        _loop_projection(loops, prefix)).reverse()
    return in_time(runs, texts, empty_union(params_text))


@functools.lru_cache(maxsize=1 << 10)
def _loop_projection(loops: tuple[str, ...], prefix: tuple[str, ...]) -> isl.Map:
    """{ [values of `loops`] -> [values of the loops `prefix`, in that order] }."""
    projection = isl.Map.universe(isl.Space.alloc(isl.DEFAULT_CONTEXT, 0, len(loops),
                                                  len(prefix)))
    for p, name in enumerate(prefix):
        projection = projection.equate(isl.dim_type.in_, loops.index(name),
                                       isl.dim_type.out, p)
    return projection


@functools.lru_cache(maxsize=256)
def _other_iteration_of(width: int, same: tuple[int, ...]) -> isl.Map:
    """{ [l0..l(width-1)] -> [m0..m(width-1)] : equal at `same`, different at the last }."""
    space = isl.Space.set_alloc(isl.DEFAULT_CONTEXT, 0, width).map_from_set()
    agree = isl.Map.universe(space)
    for p in same:
        agree = agree.equate(isl.dim_type.in_, p, isl.dim_type.out, p)
    last = width - 1
    return agree.order_lt(isl.dim_type.in_, last, isl.dim_type.out, last).union(
        agree.order_gt(isl.dim_type.in_, last, isl.dim_type.out, last))

"""The order between two statements, and the dependences of one pair of statements on one
buffer, computed per pair and remembered by content, so that a schedule step pays only for the
pairs it changed.

Dependences are found pair by pair: the instances of `S` and of `T` that touch one element of
`B`, at least one writing, with `S`'s (first) run before `T`'s. The order of two statements
depends only on their time vectors relative to each other, and a step that moves one nest
shifts the positions of the nests after it without changing their relative order. So the pair
is written in a canonical form before it is given to isl: entries equal in both vectors keep
loop variables and make constants 0, the first position where they differ (two constants:
sequence positions or block slots) becomes 0 and 1 in the same order, and constants after it
become 0. Each statement's runs keep their order, and which of two runs comes first is decided
at the same position as before, so the canonical order relation is the order relation. Its
text, with the accesses' text, is the key under which isl's answer is remembered: every input
of the computation is in the key, so a remembered answer is the answer.
"""

from __future__ import annotations

import functools

import islpy as isl

from sched.ir.memo import BoundedCache, register
from sched.polyhedral.domain_boxes import exact_domain
from sched.polyhedral.isl_text import is_single_valued_map, restricted_map, within_operations


def _is_constant(entry: str) -> bool:
    return entry.lstrip("-").isdigit()


@register
@functools.lru_cache(maxsize=1 << 14)
def canonical_times(first: tuple[str, ...], second: tuple[str, ...]
                    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The time vectors of two statements (equal length) in the canonical form of the pair
    (see the module doc); unchanged when they do not first differ in two constants.
    Remembered: a step that inserts a statement among others shifts their times, and the
    shifted pairs are the pairs the step before had at those places."""
    a, b = [], []
    diverged = False
    for x, y in zip(first, second):
        if diverged:
            a.append("0" if _is_constant(x) else x)
            b.append("0" if _is_constant(y) else y)
        elif x == y:
            a.append("0" if _is_constant(x) else x)
            b.append(a[-1])
        elif _is_constant(x) and _is_constant(y):
            earlier = int(x) < int(y)
            a.append("0" if earlier else "1")
            b.append("1" if earlier else "0")
            diverged = True
        else:
            return tuple(first), tuple(second)
    return tuple(a), tuple(b)


def canonical_time_set(times: tuple[tuple[str, ...], ...]) -> tuple[tuple[str, ...], ...]:
    """The time vectors of several statements (equal length) with the same order among all
    their runs, written without the sequence positions that a step inserting a statement
    elsewhere shifts: position by position, among the statements whose entries before it are
    equal (the same constants, the same loop names), constants become their rank there (0,
    1, ...). Two runs then first differ at the same position, in the same direction. Where
    such statements hold a constant and a loop, or two loops, at one position, the times
    are returned as they are (the relabelling would not keep the order)."""
    canonical = [list(t) for t in times]
    groups = [list(range(len(times)))]
    for position in range(len(times[0]) if times else 0):
        split = []
        for group in groups:
            entries = {times[s][position] for s in group}
            if all(_is_constant(e) for e in entries):
                rank = {e: str(r) for r, e in enumerate(sorted(entries, key=int))}
                for s in group:
                    canonical[s][position] = rank[times[s][position]]
            elif len(entries) > 1:
                return times
            by_entry: dict[str, list[int]] = {}
            for s in group:
                by_entry.setdefault(times[s][position], []).append(s)
            split.extend(by_entry.values())
        groups = split
    return tuple(tuple(t) for t in canonical)


@register
@functools.lru_cache(maxsize=1 << 14)
def nest_map(nest_text: str, params_text: str) -> isl.Map:
    """The nest map `nest_text` (Statement.nest_text) with its parameters restricted to
    `params_text`: the one text isl parses per statement nest."""
    return restricted_map(nest_text, None, params_text)


@register
@functools.lru_cache(maxsize=1 << 14)
def nest_domain(nest_text: str, params_text: str) -> isl.Set:
    """The instances that run: the domain of `nest_map` (the constraints with the loops
    quantified, as the statement's domain text says, without parsing it again), without
    existentially quantified variables where they are redundant (see exact_domain)."""
    return exact_domain(nest_map(nest_text, params_text))


@register
@functools.lru_cache(maxsize=1 << 12)
def _relabelling(loops: tuple[str, ...], time: tuple[str, ...]) -> isl.Map:
    """`{ [_t0, _t1, ...] -> [time] }`: the values of the loops `loops` (in that order) to
    the time vector `time`, whose entries are constants or names of `loops`. Built with
    isl's API (each output fixed to its constant or equated to its loop): no text to parse."""
    position = {loop: p for p, loop in enumerate(loops)}
    relabel = isl.Map.universe(isl.Space.alloc(isl.DEFAULT_CONTEXT, 0, len(loops), len(time)))
    for p, entry in enumerate(time):
        if _is_constant(entry):
            relabel = relabel.fix_val(isl.dim_type.out, p, int(entry))
        else:
            relabel = relabel.equate(isl.dim_type.in_, position[entry], isl.dim_type.out, p)
    return relabel


@register
@functools.lru_cache(maxsize=1 << 14)
def schedule_map(nest: tuple, time: tuple[str, ...], params_text: str) -> isl.Map:
    """The schedule of the statement whose nest is `nest` (its `nest_text` and
    `nest_loops`) at the time vector `time` (constants and loop names): isl parses each
    nest's text once, and the time vector is set by a relabelling map."""
    nest_text, loops = nest
    return nest_map(nest_text, params_text).apply_range(_relabelling(loops, time))


def schedule_key(statement, time: list[str]) -> tuple[tuple, tuple[str, ...]]:
    """What `schedule_map` needs for `statement` at the time vector `time`."""
    return statement.nest(), tuple(time)


def order_key(source, sink) -> tuple:
    """What `order_between(source, sink)` is a function of: the keys of the two statements'
    schedules in the pair's canonical form (schedule_key), and the parameters' context."""
    a, b = canonical_times(tuple(source.time), tuple(sink.time))
    return schedule_key(source, a), schedule_key(sink, b), source.domain_texts[1]


def deciding_positions(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[int, ...]:
    """The positions of two time vectors (equal length) that can decide which comes first:
    not those where both hold the same constant (equal in every pair of runs), nor any
    after the first where they hold different constants (the order is decided there at the
    latest). Lexicographic order between the runs of the two, and among each one's own runs
    (non-strictly: first runs stay first), is the same on these positions."""
    kept = []
    for position, (x, y) in enumerate(zip(first, second)):
        if _is_constant(x) and _is_constant(y):
            if x == y:
                continue
            kept.append(position)
            break
        kept.append(position)
    return tuple(kept)


def deciding_times(first: tuple[str, ...], second: tuple[str, ...]
                   ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The two time vectors at their `deciding_positions`."""
    kept = deciding_positions(first, second)
    return tuple(first[p] for p in kept), tuple(second[p] for p in kept)


@register
@functools.lru_cache(maxsize=1 << 12)
def _projection(width: int, kept: tuple[int, ...]) -> isl.Map:
    """`{ [t0, ..., t(width-1)] -> [t(kept[0]), t(kept[1]), ...] }`, built with isl's API."""
    projection = isl.Map.universe(isl.Space.alloc(isl.DEFAULT_CONTEXT, 0, width, len(kept)))
    for p, position in enumerate(kept):
        projection = projection.equate(isl.dim_type.in_, position, isl.dim_type.out, p)
    return projection


def ordered_before(first: isl.Map, first_time: tuple[str, ...], second: isl.Map,
                   second_time: tuple[str, ...]) -> isl.Map:
    """`first.lex_lt_map(second)` for two schedules (instance -> time; any number of runs)
    whose runs have the time vectors `first_time` and `second_time` (constants and loop
    names, equal length): asked on their deciding positions only (the same relation)."""
    kept = deciding_positions(first_time, second_time)
    width = len(first_time)
    return first.apply_range(_projection(width, kept)).lex_lt_map(
        second.apply_range(_projection(width, kept)))


def kept_in_time_order(relation: isl.Map, first: isl.Map, first_time: tuple[str, ...],
                       second: isl.Map, second_time: tuple[str, ...],
                       first_domain: isl.Set | None = None,
                       second_domain: isl.Set | None = None) -> bool:
    """Whether `relation` is a subset of `ordered_before(first, ...)`, asked by
    `kept_in_order` (with the schedules' domains, or `first_domain` and `second_domain`:
    the same sets, written more simply) where both schedules are functions; False where
    they are not, where pairs are out of order, or past the budget (the caller then
    subtracts)."""
    if not (first.is_single_valued() and second.is_single_valued()):
        return False
    kept = deciding_positions(first_time, second_time)
    width = len(first_time)
    return kept_in_order(relation, first.apply_range(_projection(width, kept)),
                         second.apply_range(_projection(width, kept)), first_domain,
                         second_domain)


@register
@functools.lru_cache(maxsize=1 << 14)
def first_run_schedule(key: tuple, params_text: str) -> isl.Map:
    """The schedule of `key` (schedule_key), each instance at its first run (see
    dependences.first_runs). Where the time vector keeps every loop of the nest, two runs
    have one time only if they are one point of the nest map: the schedule is single-valued
    iff the nest map is (asked once per nest, as Statement.runs_once asks it)."""
    from sched.polyhedral.dependences import first_runs

    schedule = schedule_map(*key, params_text)
    (nest_text, loops), time = key
    if set(loops) <= set(time) and is_single_valued_map(nest_text, params_text):
        return schedule
    if schedule.is_single_valued():
        return schedule
    nest = nest_map(nest_text, params_text)
    fixed = free_loops_at_lower_bounds(nest)
    if fixed is not nest:
        schedule = fixed.apply_range(_relabelling(loops, time))
        if schedule.is_single_valued():
            return schedule
    return first_runs(schedule)


def free_loops_at_lower_bounds(nest: isl.Map) -> isl.Map:
    """`nest` (instances -> loop values) with each loop that is free in a piece (constrained
    there only by bounds of its own, a constant lower bound and an upper bound in the
    parameters: neither the instance, nor a predicate, nor another loop involves it) fixed
    at its lower bound; `nest` itself where none is. The
    first runs are those of the smaller map: beside each run with the loop above its lower
    bound, the piece has the run with the loop at it and every other loop the same, never
    later. A cooperative fetch under the thread loops of its consumer runs each instance
    once per such thread; without them its first runs are its runs, found in milliseconds,
    where the general subtraction or isl's lexmin took minutes (the quasi-affine instance
    set of a fused copy split by non-dividing thread extents)."""
    pieces = nest.get_basic_maps()
    fixed_pieces = [_fix_free_loops(piece) for piece in pieces]
    if all(f is None for f in fixed_pieces):
        return nest
    result = isl.Map.empty(nest.get_space())
    for piece, fixed in zip(pieces, fixed_pieces):
        result = result.union(isl.Map.from_basic_map(piece) if fixed is None else fixed)
    return result


def _fix_free_loops(piece: isl.BasicMap) -> isl.Map | None:
    """`free_loops_at_lower_bounds` for one piece, or None where no loop is free."""
    dims = {kind: piece.dim(kind) for kind in (isl.dim_type.param, isl.dim_type.in_,
                                               isl.dim_type.out, isl.dim_type.div)}
    out, loop_count = isl.dim_type.out, dims[isl.dim_type.out]
    involved: set[int] = set()
    wrapped = piece.wrap()        # (isl gives the divisions of sets, not of maps)
    # (counted on the wrapped set and on each division's own space, which may hold fewer
    # than the map: audit helper-106, isl "index out of bounds" from compute_at)
    for d in range(wrapped.dim(isl.dim_type.div)):      # a division of a loop uses it
        division = wrapped.get_div(d)
        own = division.dim(isl.dim_type.div)
        if own and division.involves_dims(isl.dim_type.div, 0, own):
            return None                              # (a division of divisions: not followed)
        if division.dim(isl.dim_type.in_) != dims[isl.dim_type.in_] + loop_count:
            return None
        involved.update(p for p in range(loop_count) if division.involves_dims(
            isl.dim_type.in_, dims[isl.dim_type.in_] + p, 1))
    lower: dict[int, int] = {}
    for constraint in piece.get_constraints():
        loops = [p for p in range(loop_count) if constraint.involves_dims(out, p, 1)]
        others = [kind for kind in (isl.dim_type.in_, isl.dim_type.div, isl.dim_type.param)
                  if dims[kind] and constraint.involves_dims(kind, 0, dims[kind])]
        if len(loops) != 1:
            involved.update(loops)
            continue
        p = loops[0]
        coefficient = constraint.get_coefficient_val(out, p).to_python()
        if not others and (constraint.is_equality() or coefficient > 0):
            # a lower bound c*x + k >= 0 (or the value, c*x + k = 0) of the loop alone
            constant = constraint.get_constant_val().to_python()
            bound = -(constant // coefficient)
            lower[p] = max(lower.get(p, bound), bound)
        elif others and (others != [isl.dim_type.param] or constraint.is_equality()
                         or coefficient > 0):
            involved.add(p)          # (an upper bound may be symbolic)
    free = [p for p in lower if p not in involved]
    if not free:
        return None
    fixed = isl.Map.from_basic_map(piece)
    for p in free:
        fixed = fixed.fix_val(out, p, lower[p])
    return fixed


@register
@functools.lru_cache(maxsize=1 << 14)
def _order(source_key: tuple, sink_key: tuple, params_text: str) -> isl.Map:
    """{ S[x] -> T[y] : the first run of x comes before the first run of y }, asked on the
    entries of the two time vectors that can decide it (deciding_times)."""
    (source_nest, source_time), (sink_nest, sink_time) = source_key, sink_key
    a, b = deciding_times(source_time, sink_time)
    return first_run_schedule((source_nest, a), params_text).lex_lt_map(
        first_run_schedule((sink_nest, b), params_text))


def order_between(source, sink) -> isl.Map:
    """{ S[x] -> T[y] : the first run of x comes before the first run of y }."""
    return _order(*order_key(source, sink))


_RELATIONS = BoundedCache(1 << 15)       # pair_relation's answers, by its key


def pair_relation(first_text: str, second_text: str, order: tuple,
                  first: isl.Map | None = None, second: isl.Map | None = None,
                  distinct: tuple | None = None) -> isl.Map:
    """The pairs (source instance -> sink instance) where the source's access `first_text`
    and the sink's access `second_text` (instance -> element maps, as text; `first` and
    `second` are the same maps when the caller has them) touch one element and the source
    runs first (`order`, an `order_key`), coalesced. `distinct`: for two statements of one
    block whose keys some iteration variables determine (`Statement.keys_determined_by`),
    (their positions, the number of variables, the number of keys): only pairs that differ
    on those variables or are at one key are real. Remembered by the texts, the order key
    and `distinct`."""
    key = (first_text, second_text, order, distinct)
    found = _RELATIONS.recall(key)
    if found is not None:
        return found
    first = first if first is not None else isl.Map(first_text)
    second = second if second is not None else isl.Map(second_text)
    touching = first.apply_range(second.reverse())
    if distinct is not None:
        touching = touching.intersect(_determined_keys(touching.get_space(), *distinct))
    if order[0] == order[1] and touching.is_subset(isl.Map.identity(touching.get_space())):
        # one statement whose instances touch only their own elements (a copy into a
        # cache): no instance runs first before its own first run, so there are no pairs
        # and no order to compute (its first runs: 43 s for a conv2d's cooperative fetch;
        # subtracting the identity took 37 s there, the subset test 0.1 ms)
        return _RELATIONS.remember(key, isl.Map.empty(touching.get_space()))
    (_, source_time), (_, sink_time), _ = order
    a, b = deciding_times(source_time, sink_time)
    if len(a) == 1 and _is_constant(a[0]) and _is_constant(b[0]):
        # the two share no loop before their times differ at a constant: every run of one
        # comes before every run of the other (no order relation to intersect with)
        relation = touching.coalesce() if int(a[0]) < int(b[0]) else \
            isl.Map.empty(touching.get_space())
    else:
        relation = touching.intersect(_order(*order)).coalesce()
    return _RELATIONS.remember(key, relation)


def _determined_keys(space: isl.Space, determining: tuple[int, ...], variables: int,
                     keys: int, given: tuple[int, ...] = ()) -> isl.Map:
    """{ S[v, k] -> S'[v', k'] : v[p] != v'[p] for some p in `determining`, or k[g] != k'[g]
    for some g in `given`, or k = k' } in `space` (instance dims: `variables` iteration
    variables, then `keys` keys): where those variables and keys determine the keys, a pair
    of runs equal on them is at one key."""
    universe = isl.Map.universe(space)
    allowed = universe
    for p in range(variables, variables + keys):
        allowed = allowed.equate(isl.dim_type.in_, p, isl.dim_type.out, p)
    for p in (*determining, *(variables + g for g in given)):
        allowed = allowed.union(universe.order_lt(isl.dim_type.in_, p, isl.dim_type.out, p)) \
            .union(universe.order_gt(isl.dim_type.in_, p, isl.dim_type.out, p))
    return allowed


def relation_of(key: tuple) -> isl.Map:
    """`pair_relation` of a dependence's key (dependences.Dependence.key)."""
    first_text, second_text, order, _, distinct = key
    return pair_relation(first_text, second_text, order, distinct=distinct)


@register
@functools.lru_cache(maxsize=1 << 12)
def pair_distance(first_text: str, second_text: str, order: tuple,
                  common: tuple[int, ...], distinct: tuple | None = None
                  ) -> tuple[int, ...] | None:
    """The constant distance of `pair_relation(first_text, second_text, order, distinct)` at
    the time positions `common` (the loops both are under), or None when it is not constant.
    Asked only to describe a dependence: legality never needs it."""
    if not common:
        return None
    relation = pair_relation(first_text, second_text, order, distinct=distinct)
    if relation.is_empty():
        return None
    source_key, sink_key, params_text = order
    in_time = relation.apply_domain(schedule_map(*source_key, params_text)) \
        .apply_range(schedule_map(*sink_key, params_text))
    deltas = in_time.deltas()
    if not deltas.is_singleton():
        return None
    point = deltas.sample_point()
    return tuple(point.get_coordinate_val(isl.dim_type.set, p).to_python() for p in common)


@register
@functools.lru_cache(maxsize=1 << 15)
def breaks_order(relation_key: tuple, order: tuple) -> str | None:
    """The pairs of the relation `relation_of(relation_key)` that the order `order` (an
    `order_key`) does not keep (source before sink), as isl text, or None when it keeps them
    all."""
    relation = relation_of(relation_key)
    if _kept_by_first_runs(relation, order):
        return None
    kept = _order(*order)
    if relation.is_subset(kept):        # isl's subset test: milliseconds where the subtraction
        return None                     # below takes seconds (existentials, modulo constraints)
    broken = relation.subtract(kept)
    return None if broken.is_empty() else str(broken)


def _kept_by_first_runs(relation: isl.Map, order: tuple) -> bool:
    """Whether every pair of `relation` has its source's first run before its sink's (the
    relation is a subset of `_order(*order)`), asked by `kept_in_order` on the first-run
    schedules."""
    source_key, sink_key, params_text = order
    a, b = deciding_times(source_key[1], sink_key[1])
    # the instances with a first run are those of the nests (nest_domain: the same sets,
    # written without the existentials of the schedules' domains where they are boxes)
    return kept_in_order(relation, first_run_schedule((source_key[0], a), params_text),
                         first_run_schedule((sink_key[0], b), params_text),
                         nest_domain(source_key[0][0], params_text),
                         nest_domain(sink_key[0][0], params_text))


def kept_in_order(relation: isl.Map, source: isl.Map, sink: isl.Map,
                  source_domain: isl.Set | None = None,
                  sink_domain: isl.Set | None = None) -> bool:
    """Whether every pair (x, y) of `relation` has `source(x)` lexicographically before
    `sink(y)`, where both schedules are functions (one time per instance), asked without a
    complement: no pair at or after, and no instance without a time (the schedules'
    domains, or `source_domain` and `sink_domain`: the same sets, written more simply).
    Where `relation` has existentials (a tensor-core schedule's accumulator) isl's subset
    test costs 13 s a pair, this 0.02 s. False when it finds such pairs or runs past its
    budget of isl operations (the caller then asks the subset test or the subtraction)."""
    def kept() -> bool:
        # no pair at or after, asked of the pairs' times (the schedules are functions):
        # intersecting the relation with the order of the schedules in instances took 0.8 s
        # a pair on TVM's 4096^3 mma nests, their times 0.1 s
        in_time = relation.apply_domain(source).apply_range(sink)
        return (in_time.intersect(isl.Map.lex_ge(in_time.get_space().domain())).is_empty()
                and relation.domain().is_subset(
                    source.domain() if source_domain is None else source_domain)
                and relation.range().is_subset(
                    sink.domain() if sink_domain is None else sink_domain))

    return bool(within_operations(ORDER_OPERATIONS, kept))


# isl operations (a few tenths of a second) kept_in_order may take
ORDER_OPERATIONS = 2_000_000

"""Dependences between statement instances: flow (read after write), anti (write after read)
and output (write after write), computed by isl from the model's accesses and schedule.

They are memory-based: every pair of instances that touch the same element, at least one of them
writing, in their current order. Preserving all of them is what keeps a reordering correct
without renaming storage. The relational formulation is isl's: `W . R^-1` intersected with the
schedule's strict lexicographic order.

    deps = sched.polyhedral.dependences(func)
    for dep in deps:
        print(dep)       # flow C -> D on C: { S_C[...] -> S_D[...] : ... }, distance (0, 0)

When an instance runs more than once (recomputation), its first run stands for it: exact when
its runs are idempotent, which `legality.check_runs` requires (RUNS_RULE).

Updates of an associative reduction (`C[vi, vj] = C[vi, vj] + ...` in a block with reduce
iteration variables) depend on each other; those dependences are marked `is_reduction`: reduce
loops may be reordered (the result is the same up to rounding) but not run in parallel. Only
the accumulator chain of one element is exempt: the dependences between two updates through
the store and the load of the accumulator operand (`C[x] = C[x] op ...`, the same indices).
Every other access of the update, even of the same buffer (`C[vi + 1] = C[vi + 1] + C[vi]`
reads another element of its own output; `C[x] = C[x] + C[x] * A[k]` reads the accumulator a
second time), makes ordinary dependences with the accumulator store, and an init is never
part of the chain.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import islpy as isl

from sched.ir.extern import is_opaque
from sched.ir.functor import collect, field_names
from sched.ir.memo import BoundedCache, identity_cache, register
from sched.ir.nodes import BinaryOp, Block, BufferLoad, BufferStore, For, PrimFunc, Stmt
from sched.polyhedral.flow_crossing import statement_params, storage_accesses
from sched.polyhedral.isl_text import maps, parse_union_map, read_map, within_operations
from sched.polyhedral.model import PolyModel, Statement, build_model
from sched.polyhedral.pairs import (
    order_key,
    pair_distance,
    pair_relation,
    schedule_map,
)

KINDS = ("flow", "anti", "output")
ASSOCIATIVE_OPS = ("add", "mul", "min", "max")


@dataclass(frozen=True)
class Dependence:
    """Instances of `sink` that must run after instances of `source` (`relation`)."""

    kind: str                 # "flow", "anti" or "output"
    source: Statement
    sink: Statement
    buffer: str               # the storage name of the buffer
    relation: isl.Map         # source instance -> sink instance
    is_reduction: bool
    exact: bool
    # what `relation` was computed from (pairs.relation_of): the two accesses' texts, the
    # order key of the pair (pairs.order_key), the common loops' positions, and pair_relation's
    # `distinct`
    key: tuple | None = None

    @functools.cached_property
    def distance(self) -> tuple[int, ...] | None:
        """The constant difference of the common loops' iterations, if any (computed when
        asked: only descriptions use it)."""
        return None if self.key is None else pair_distance(*self.key)

    def __str__(self) -> str:
        tags = " (reduction)" if self.is_reduction else ""
        distance = "" if self.distance is None else f", distance {self.distance}"
        return (f"{self.kind} {_describe(self.source)} -> {_describe(self.sink)} on "
                f"{self.buffer}{tags}{distance}: {self.relation}")


def _describe(statement: Statement) -> str:
    return f"{statement.block.name}{' (init)' if statement.is_init else ''}"


def is_reduction_update(block: Block) -> bool:
    """Whether `block` has reduce iteration variables and its body is one associative update
    `X[idx] = X[idx] op value` (either operand order)."""
    if not any(iv.kind == "reduce" for iv in block.iter_vars) or is_opaque(block):
        return False                 # (an opaque call's order may matter)
    store = block.body
    if not isinstance(store, BufferStore) or not isinstance(store.value, BinaryOp):
        return False
    value = store.value
    own = BufferLoad(store.buffer, store.indices)
    return value.op in ASSOCIATIVE_OPS and own in (value.a, value.b)


def first_runs(schedule):
    """Each instance with the time of its first run: `schedule` (instance -> times, an
    isl Map or UnionMap) less every run that comes after another run of the same instance.

    Written with subtract and apply rather than isl's lexmin, which on some quasi-affine
    schedules (`(-floor(f / 5)) mod 6 = vx`, from a fused loop) loses instances: a lost
    instance would lose its dependences."""
    return _extreme_runs(schedule, later=True)


def last_runs(schedule):
    """Each instance with the time of its last run (see first_runs)."""
    return _extreme_runs(schedule, later=False)


def _extreme_runs(schedule, later: bool):
    if isinstance(schedule, isl.UnionMap):
        result = schedule.subtract(schedule)
        for piece in maps(schedule):
            result = result.union(isl.UnionMap.from_map(_extreme_runs(piece, later)))
        return result
    if schedule.is_single_valued():
        return schedule
    times = isl.Set.universe(schedule.get_space().range())
    order = times.lex_lt_set(times) if later else times.lex_gt_set(times)
    subtracted = within_operations(SUBTRACT_OPERATIONS,
                                   lambda: schedule.subtract(schedule.apply_range(order)))
    if subtracted is not None:
        return subtracted
    extreme = schedule.lexmin() if later else schedule.lexmax()
    if _is_extreme(extreme, schedule, order.reverse()):
        return extreme
    return schedule.subtract(schedule.apply_range(order))


# isl operations the subtraction in _extreme_runs may take (about 0.06 s) before isl's lexmin,
# checked, is tried instead: on schedules with a modulo constraint (a split by 3) the
# subtraction takes seconds (16 s seen) where lexmin takes 0.05 s; on the others it takes
# milliseconds, and its answer is a simpler map for the steps after it than lexmin's
SUBTRACT_OPERATIONS = 50_000


def _is_extreme(candidate: isl.Map, schedule: isl.Map, earlier: isl.Map) -> bool:
    """Whether `candidate` (isl's lexmin or lexmax of `schedule`) maps every instance of
    `schedule` to exactly one of its runs, with no run of it `earlier` (a map from each time to
    the times that beat it). isl's answer is used only when it passes: on some quasi-affine
    schedules lexmin loses instances (see first_runs)."""
    return (candidate.is_subset(schedule) and candidate.is_single_valued()
            and schedule.domain().is_subset(candidate.domain())
            and schedule.intersect(candidate.apply_range(earlier)).is_empty())


_ASKED = [0]       # calls of the analysis (whole or by pairs): see `asked`


def asked() -> int:
    """How many times the dependence analysis was asked so far, whole (`dependences`) or for
    some pairs (`dependences_where`): a schedule step that asked was judged on it."""
    info = _dependences.cache_info()
    return info.hits + info.misses + _ASKED[0]


@identity_cache(maxsize=64)
def _dependences(func: PrimFunc) -> tuple[PolyModel, tuple[Dependence, ...]]:
    model = build_model(func)
    found: list[Dependence] = []
    for index in range(len(_candidates(model))):
        found += _candidate_dependences(model, index)
    return model, tuple(found)


def _candidates(model: PolyModel) -> list[tuple]:
    """Every pair of accesses that may make a dependence, in the order the dependences are
    listed: (kind, buffer tuple, source, sink, first access, second access, is_reduction),
    the accesses as (isl text, map). Made once per model (kept in `derived`)."""
    found = model.derived.get("candidates")
    if found is not None:
        return found
    # Pair by pair (pairs.py), each remembered by content: a step pays for the pairs it
    # changed. A block placed under thread loops it does not use (a shared-memory fetch
    # computed at a loop inside them) runs each instance once per thread, writing the same
    # values: the first run is the one that orders it against the others.
    statements = list(model.statements.values())
    reads = {s.name: _by_buffer(s.reads) for s in statements}
    writes = {s.name: _by_buffer(s.writes) for s in statements}
    accumulators = {s.name: _accumulator(model, s) for s in statements}
    touching: dict[str, list[Statement]] = {}      # buffer tuple -> statements, in order
    for statement in statements:
        for buffer in {**reads[statement.name], **writes[statement.name]}:
            touching.setdefault(buffer, []).append(statement)
    chains: dict[str, list] = {}                   # buffer tuple -> (statement, chain)
    for name, chain in accumulators.items():
        if chain is not None:
            chains.setdefault(chain[0], []).append((name, chain))
    found = []
    for buffer in sorted(touching):
        for kind in KINDS:
            firsts = reads if kind == "anti" else writes
            seconds = reads if kind == "flow" else writes
            for source in touching[buffer]:
                first = firsts[source.name].get(buffer)
                if first is None:
                    continue
                chain = accumulators.get(source.name)
                for sink in touching[buffer]:
                    second = seconds[sink.name].get(buffer)
                    if second is None or (sink is source and chain is not None
                                          and chain[0] == buffer):
                        continue            # the chain's statement: split below
                    found.append((kind, buffer, source, sink, first, second, False))
        for name, chain in chains.get(buffer, ()):
            statement = model.statements[name]
            store, others = _map_text(chain[1]), _map_text(chain[2])
            split = {"flow": ((store, store, True), (store, others, False)),
                     "anti": ((store, store, True), (others, store, False)),
                     "output": ((store, store, True),)}
            for kind in KINDS:
                for first, second, reduction in split[kind]:
                    if first is None or second is None:
                        continue
                    found.append((kind, buffer, statement, statement, first, second,
                                  reduction))
    model.derived["candidates"] = found
    return found


def _candidate_dependences(model: PolyModel, index: int) -> list[Dependence]:
    """The dependence of `_candidates(model)[index]` as a list of at most one (kept in
    `derived`: a step asking for some pairs and the next asking for all pay once)."""
    key = ("candidate", index)
    found = model.derived.get(key)
    if found is None:
        found = model.derived[key] = _pair_dependences(model, *_candidates(model)[index])
    return found


def dependences_where(func: PrimFunc, keep, model: PolyModel | None = None,
                      on_storage=None) -> tuple[Dependence, ...]:
    """The dependences of `func` whose statements (source, sink) `keep(source, sink)` accepts
    (and `on_storage(source, sink, storage tuple)`, where given, with the isl tuple of the
    dependence's storage), in the order `dependences(func)` lists them: the same Dependence
    objects where the whole analysis of `func` is cached, else only the accepted pairs are
    computed (each by content, as the whole analysis computes it). `model` is
    `build_model(func)` where the caller has it (the statements `keep` sees are its own)."""
    _ASKED[0] += 1
    model = model if model is not None else build_model(func)

    def accepted(source, sink, storage_tuple) -> bool:
        return keep(source, sink) and (on_storage is None
                                       or on_storage(source, sink, storage_tuple))
    cached = _dependences.get(func)
    if cached is not None and cached[0] is model:
        return tuple(d for d in cached[1]
                     if accepted(d.source, d.sink, model.buffer_tuple(d.buffer)))
    found: list[Dependence] = []
    for index, candidate in enumerate(_candidates(model)):
        if accepted(candidate[2], candidate[3], candidate[1]):
            found += _candidate_dependences(model, index)
    return tuple(found)


_BY_BUFFER = BoundedCache(1 << 13)     # id(accesses) -> (accesses, _by_buffer's answer)


def _by_buffer(accesses: isl.UnionMap) -> dict[str, tuple[str, isl.Map]]:
    """The statement's accesses (instance -> element) by buffer tuple: (isl text, map).
    Remembered by the union map's identity (kept alive in the entry): the model reuses the
    access relations of a statement a step did not change (model._ACCESSES), and isl
    objects are values, never modified."""
    entry = _BY_BUFFER.recall(id(accesses))
    if entry is None or entry[0] is not accesses:
        found = {m.get_tuple_name(isl.dim_type.out): (str(m), m) for m in maps(accesses)}
        entry = _BY_BUFFER.remember(id(accesses), (accesses, found))
    return entry[1]


def _map_text(union: isl.UnionMap) -> tuple[str, isl.Map] | None:
    found = maps(union)
    if not found:
        return None
    assert len(found) == 1, "one statement's accesses to one buffer are one map"
    return str(found[0]), found[0]


def _common_positions(source: Statement, sink: Statement) -> tuple[int, ...]:
    """The time positions of the loops both statements are under."""
    common = 0
    for a, b in zip(source.loops, sink.loops):
        prefix = a.position + 1
        if a != b or source.time[:prefix] != sink.time[:prefix]:
            break
        common += 1
    return tuple(loop.position for loop in source.loops[:common])


def _pair_keys(model: PolyModel, source: Statement, sink: Statement) -> tuple:
    """(order_key, _common_positions) of a pair of the model's statements, made once per
    pair (every buffer and kind of the pair asks), kept with the model."""
    key = ("pair_keys", source.name, sink.name)
    found = model.derived.get(key)
    if found is None:
        found = model.derived[key] = (order_key(source, sink),
                                      _common_positions(source, sink))
    return found


def _distinct_runs(source: Statement, sink: Statement) -> tuple | None:
    """pairs.pair_relation's `distinct` where `source` and `sink` are statements of one block
    whose keys some iteration variables determine (`Statement.keys_determined_by`): runs
    equal on those variables are at one key. None otherwise."""
    if source.block is not sink.block or source.keys_determined_by is None:
        return None
    return source.keys_determined_by, len(source.iter_names), len(source.keys), \
        source.keys_given


def _pair_dependences(model: PolyModel, kind: str, buffer: str, source: Statement,
                      sink: Statement, first: tuple[str, isl.Map], second: tuple[str, isl.Map],
                      reduction: bool) -> list[Dependence]:
    """The dependence of `kind` from `source`'s access `first` to `sink`'s access `second`
    ((text, map) pairs) on `buffer`, as a one-element list, or [] when no pair of instances
    conflicts."""
    pair = _pair_keys(model, source, sink)
    distinct = _distinct_runs(source, sink)
    key = (first[0], second[0], *pair, distinct)
    relation = pair_relation(*key[:3], first[1], second[1], distinct)
    if relation.is_empty():
        return []
    return [Dependence(kind, source, sink, model.storage_of_tuple(buffer), relation,
                       reduction, model.is_exact, key)]


def _accumulator(model: PolyModel, statement: Statement):
    """For the body of an associative reduction update `X[idx] = X[idx] op value`:
    (storage tuple of X, the store's relation, the relation of every other read of X by the
    statement), all instance -> storage element; None for any other statement, or where the
    accumulator load cannot be told apart (a linearized view)."""
    if statement.is_init or not is_reduction_update(statement.block):
        return None
    store = statement.block.body
    value = store.value
    own = BufferLoad(store.buffer, store.indices)
    # accesses in visiting order: the store, the loads of its value (operand a first), then
    # the loads in its indices
    position = 1 if value.a == own else 1 + len(_loads(value.a))
    accesses = statement.accesses
    storage = store.buffer.storage_name
    if storage in model.linearized or len(accesses) <= position:
        return None
    written, accumulator = accesses[0], accesses[position]
    if not (written.is_write and written.buffer == store.buffer and not accumulator.is_write
            and accumulator.buffer == store.buffer
            and accumulator.access.indices == written.access.indices):
        return None
    tuple_name = model.buffer_tuple(storage)

    def stored(view) -> isl.UnionMap:
        return isl.UnionMap.from_map(view.relation.set_tuple_name(isl.dim_type.out, tuple_name))
    others = isl.UnionMap(f"[{', '.join(model.params)}] -> {{ }}")
    for index, view in enumerate(accesses):
        if index != position and not view.is_write and view.buffer.storage_name == storage:
            others = others.union(stored(view))
    return tuple_name, stored(written), others


def _loads(expr) -> list:
    from sched.ir.functor import collect

    return collect(expr, BufferLoad)


def carry_over_loop_kinds(func: PrimFunc, new_func: PrimFunc) -> bool:
    """Give `new_func` the analysis of `func` (its model, when cached, with the dependences
    computed so far) if the two differ only in how loops run: kinds, thread tags, annotations
    (parallel, vectorize, unroll, bind, annotate of a loop). The instances, their times and
    their accesses do not depend on those, so the model's isl objects and the dependences
    carry over; the statements get the new loops' kinds, which the rule for concurrent loops
    reads. Returns whether it carried over."""
    model = build_model.get(func)
    if model is None or build_model.get(new_func) is not None \
            or not same_but_loop_kinds(func, new_func):
        return False
    loops = {loop.loop_var.name: loop for loop in collect(new_func.body, For)}

    def relabelled(statement: Statement) -> Statement:
        kinds = tuple(dataclasses.replace(lp, kind=loops[lp.var.name].kind,
                                          thread_tag=loops[lp.var.name].thread_tag)
                      for lp in statement.loops)
        return dataclasses.replace(statement, loops=kinds)
    statements = {name: relabelled(s) for name, s in model.statements.items()}

    def moved(dep: Dependence) -> Dependence:
        return dataclasses.replace(dep, source=statements[dep.source.name],
                                   sink=statements[dep.sink.name])
    derived: dict = {}          # what depends on nothing but the statements' instances,
    candidates = model.derived.get("candidates")   # times and accesses: the candidate pairs
    if candidates is not None:
        derived["candidates"] = [(kind, buffer, statements[source.name],
                                  statements[sink.name], *rest)
                                 for kind, buffer, source, sink, *rest in candidates]
        for key, found in model.derived.items():
            if isinstance(key, tuple) and key[0] == "candidate":
                derived[key] = [moved(d) for d in found]
    new_model = dataclasses.replace(model, func=new_func, statements=statements,
                                    derived=derived)
    build_model.put(new_func, new_model)
    cached = _dependences.get(func)
    if cached is not None and cached[0] is model and _dependences.get(new_func) is None:
        _dependences.put(new_func, (new_model, tuple(moved(d) for d in cached[1])))
    return True


def same_but_loop_kinds(a, b) -> bool:
    """Whether IR trees `a` and `b` are equal but for the kind, thread tag and annotations of
    loops (subtrees shared by identity are not walked)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, For):
        return (a.loop_var == b.loop_var and a.min == b.min and a.extent == b.extent
                and same_but_loop_kinds(a.body, b.body))
    if not isinstance(a, Stmt | Block | PrimFunc):
        return a == b
    for name in field_names(type(a)):
        x, y = getattr(a, name), getattr(b, name)
        if x is y:
            continue
        if isinstance(x, tuple) and isinstance(y, tuple):
            if len(x) != len(y) or not all(map(same_but_loop_kinds, x, y)):
                return False
        elif isinstance(x, Stmt | Block):
            if not same_but_loop_kinds(x, y):
                return False
        elif x != y:
            return False
    return True


def dependences(func: PrimFunc) -> tuple[Dependence, ...]:
    """Every dependence of `func` (see the module docstring). Cached per function."""
    return _dependences(func)[1]


def model_and_dependences(func: PrimFunc) -> tuple[PolyModel, tuple[Dependence, ...]]:
    """The model of `func` and its dependences, both cached."""
    return _dependences(func)


# -- value-based flow, per run ------------------------------------------------------------------


def value_flows(model: PolyModel, storage: str) -> isl.UnionMap:
    """Time of the last write -> time of the read, for each read of buffer `storage`.

    Accesses are taken per run (time vector), not per statement instance: a block that
    compute_at placed under a loop its bindings do not use runs each instance several times,
    and each run is a write of its own. A write the model cannot pin down (inexact model, a
    condition inside the block) is a may-write, which kills nothing. Kept with the model.
    Whether one of them leaves an iteration of a loop is `flow_crossing.flows_cross`
    (decided without them)."""
    key = ("value_flows", storage)
    if key not in model.derived:
        model.derived[key] = _value_flows(model, storage)
    return model.derived[key]


def _value_flows(model: PolyModel, storage: str) -> isl.UnionMap:
    return _flows_of(storage_accesses(model, storage), statement_params(model))


@register
@functools.lru_cache(maxsize=1024)
def _flows_of(accesses: tuple, params_text: str) -> isl.UnionMap:
    """value_flows from what it is made of: per statement, its schedule's key, its reads and
    writes of the storage (texts) and whether its writes are sure (remembered by them)."""
    sinks = must = may = parse_union_map(f"{params_text.split('{')[0]}{{ }}")   # empty
    for key, reads, writes, exact in accesses:
        runs = isl.UnionMap.from_map(schedule_map(*key, params_text).reverse())
        for text, is_write in [*((r, False) for r in reads), *((w, True) for w in writes)]:
            access = runs.apply_range(isl.UnionMap.from_map(read_map(text)))
            if not is_write:
                sinks = sinks.union(access)
            elif exact:
                must = must.union(access)
            else:
                may = may.union(access)
    info = isl.UnionAccessInfo.from_sink(sinks).set_must_source(must).set_may_source(may)
    in_order = sinks.union(must).union(may).domain().identity()    # runs in time order
    return info.set_schedule_map(in_order).compute_flow().get_may_dependence()

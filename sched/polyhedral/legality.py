"""Legality of a new execution order, and of running a loop's iterations at the same time.

Every schedule primitive and the autoscheduler ask these questions:

- `check_order(func, new_func)`: do the statement instances of `new_func` (the same blocks with
  the same iteration domains, in new loops) still run every dependence's source before its sink?
  The accumulator chain of one element of an associative reduction is exempt: reduce loops may
  be reordered (dependences.py). Instances that run more than once follow RUNS_RULE
  (runs.py, `check_runs`). `check_schedule(func, schedule)` asks the order question of an isl
  schedule.
- `concurrency_violation(func, loop)`: may the iterations of a loop run at the same time
  (parallel, vectorized, bound to blockIdx or threadIdx)? One rule, CONCURRENT_RULE
  (concurrency.py), asked when a loop is marked (loop_kinds.py, mapping.py) and again after
  every later step (`check_concurrent_loops`), so the answer does not depend on the order of the
  steps. `check_parallel(func, block, loop)` asks it for a parallel loop.

All return None when legal and a `Violation` (violation.py) otherwise, which names the
dependence with a concrete pair of instances: `C[v_i=3] reads A[2] written by C[v_i=2]`. This
module re-exports the names of all three, so that callers have one place to ask.
"""

from __future__ import annotations

import dataclasses
import functools

import islpy as isl

from sched.ir.memo import register
from sched.ir.nodes import PrimFunc
from sched.polyhedral.accesses import unseen_loads
from sched.polyhedral.concurrency import (  # noqa: F401  (re-exported: one place to ask)
    CONCURRENT_RULE,
    check_concurrent_loops,
    check_parallel,
    concurrency_violation,
    concurrent_kind,
)
from sched.polyhedral.dead_instances import dead_instances
from sched.polyhedral.dependences import (
    Dependence,
    dependences_where,
    first_runs,
    model_and_dependences,
)
from sched.polyhedral.isl_text import read_map, read_set, within_operations
from sched.polyhedral.model import Statement, build_model
from sched.polyhedral.pairs import (
    breaks_order,
    kept_in_time_order,
    order_key,
    ordered_before,
    pair_relation,
)
from sched.polyhedral.runs import RUNS_RULE, check_runs, repeated_instance  # noqa: F401
from sched.polyhedral.violation import (  # noqa: F401
    Violation,
    describe_instance_pair,
    mark_loop,
    schedule_error,
)


def check_schedule(func: PrimFunc, schedule: isl.UnionMap,
                   deps: tuple[Dependence, ...] | None = None) -> Violation | None:
    """Whether `schedule` (instances of `func`'s statements -> time) keeps every dependence's
    source before its sink (or every one of `deps`, whose statements `schedule` covers),
    reduction updates exempt."""
    if deps is None:
        _, deps = model_and_dependences(func)
    before = schedule.lex_lt_union_map(schedule)
    ordered = [d for d in deps if not d.is_reduction]
    if _union(ordered).is_subset(before):
        return None
    for dep in ordered:
        broken = isl.UnionMap.from_map(dep.relation).subtract(before)
        if not broken.is_empty():
            pair = isl.Map.from_union_map(broken)
            example = describe_instance_pair(dep, pair)
            return Violation(f"the new order runs {dep.sink.block.name} before "
                             f"{dep.source.block.name}", dep, example)
    return None


def check_schedules(schedules: dict[str, tuple[isl.Map, tuple[str, ...], isl.Set]],
                    deps: tuple[Dependence, ...]) -> Violation | None:
    """`check_schedule` of the union of `schedules` (by statement tuple name: a schedule,
    instance -> time, the time vector its runs share, constants and loop names, all of one
    length, and the statement's instances, written as simply as the caller knows them) for
    `deps`, whose statements it covers, asked pair by pair on the positions that can decide
    each pair's order (pairs.ordered_before): the same answer, the same first broken
    dependence, without ordering every pair of statements. Every instance must have a time
    (the caller checked the domains): a dependence's instances are then asked against the
    given instances (a box where counted) instead of the schedules' domains, whose
    existentials made each subset test take seconds on TVM's 4096^3 mma nests."""
    for dep in deps:
        if dep.is_reduction:
            continue
        (source, source_time, source_domain), (sink, sink_time, sink_domain) = \
            schedules[dep.source.name], schedules[dep.sink.name]
        if dep.key is None:
            broken = dep.relation.subtract(ordered_before(source, source_time, sink,
                                                          sink_time))
            broken = None if broken.is_empty() else broken
        else:      # remembered by content: the relation's key and the schedules' texts
            text = _broken_text(dep.key[:3], _Printed.of(source), tuple(source_time),
                                _Printed.of(sink), tuple(sink_time),
                                _Printed.of(source_domain), _Printed.of(sink_domain))
            broken = None if text is None else read_map(text)
        if broken is not None:
            example = describe_instance_pair(dep, broken)
            return Violation(f"the new order runs {dep.sink.block.name} before "
                             f"{dep.source.block.name}", dep, example)
    return None


@register
@functools.lru_cache(maxsize=1 << 12)
def _broken_text(relation_key: tuple, source: str, source_time: tuple[str, ...], sink: str,
                 sink_time: tuple[str, ...], source_domain: str, sink_domain: str
                 ) -> str | None:
    """The pairs of `pair_relation(*relation_key)` that the schedules `source` and `sink`
    (isl texts, with the time vectors of their runs and their instances) do not run in
    order, as text, or None: a function of its arguments' texts only, so remembered by
    them."""
    relation = pair_relation(*relation_key)
    first, second = _carried(source, read_map), _carried(sink, read_map)
    if kept_in_time_order(relation, first, source_time, second, sink_time,
                          _carried(source_domain, read_set), _carried(sink_domain, read_set)):
        return None
    broken = relation.subtract(ordered_before(first, source_time, second, sink_time))
    return None if broken.is_empty() else str(broken)


class _Printed(str):
    """The text of an isl map or set (a key by content) that carries the object, so that a
    function remembered by the text need not read it back (isl's reader: milliseconds a
    schedule)."""

    __slots__ = ("value",)

    @classmethod
    def of(cls, found: isl.Map | isl.Set) -> _Printed:
        text = cls(found)
        text.value = found
        return text


def _carried(text: str, read):
    """The object `text` carries (a _Printed), else `read(text)`."""
    return text.value if isinstance(text, _Printed) else read(text)


def _union(deps: list[Dependence]) -> isl.UnionMap:
    result = None
    for dep in deps:
        relation = isl.UnionMap.from_map(dep.relation)
        result = relation if result is None else result.union(relation)
    return result if result is not None else isl.UnionMap("{ }")


# isl operations a step's legality may take (about a minute on a 2-core host): a symbolic
# size and a layout `((i * 3) % 7, i // 7)` made compute_at's check run for more than ten
# minutes (audit helper-187); past the budget the step is refused as unproven
LEGALITY_OPERATIONS = 20_000_000


def check_order(func: PrimFunc, new_func: PrimFunc, *,
                allow_recompute: bool = False, allow_dead: bool = False) -> Violation | None:
    """Whether `new_func`, a rescheduled `func`, keeps every dependence of `func` (within
    LEGALITY_OPERATIONS isl operations: past them, a violation that says so).

    Runs (see `check_runs`): a block instance may run more than once (a producer that
    compute_at recomputes, a binding like `vr = p % 4` over `p < 8`) only when its runs are
    idempotent; the dependences are then checked on first runs, which stand for the instance.
    Unless `allow_recompute` (compute_at may recompute a producer's overlapping elements), a
    block whose instances each ran once must still run each once. With `allow_dead` (compute_at
    runs what the consumers read), instances that write only elements nothing reads may be
    left out (`dead_instances`).
    """
    found = within_operations(LEGALITY_OPERATIONS, lambda: (
        _check_order(func, new_func, allow_recompute, allow_dead),))
    if found is None:
        return Violation(f"proving that the new order keeps every dependence took isl more "
                         f"than {LEGALITY_OPERATIONS:,} operations (divisions and remainders "
                         f"of the loops by constants, over symbolic sizes, make its sets "
                         f"large), so the step is refused as unproven; a layout or split "
                         f"whose index is a plain division (i // 7, i % 7), or constant "
                         f"sizes, keep the analysis small", over_budget=True)
    return found[0]


def _check_order(func: PrimFunc, new_func: PrimFunc, allow_recompute: bool,
                 allow_dead: bool) -> Violation | None:
    old_model = build_model(func)
    new_model = build_model(new_func)
    unseen = unmodelled_domain_change(old_model, new_model)
    if unseen is not None:
        return Violation(unseen)
    dropped = False
    if not _same_domains(old_model, new_model):
        missing = old_model.domain.subtract(new_model.domain)
        extra = new_model.domain.subtract(old_model.domain)
        dropped = allow_dead and extra.is_empty() and dead_instances(func, old_model, missing)
        if not dropped:
            parts = [f"{what}: {instances}" for what, instances in (("missing", missing),
                                                                    ("added", extra))
                     if not instances.is_empty()]
            return Violation(f"the new loops do not run the same block instances "
                             f"({', '.join(parts)})")
    violation = check_runs(old_model, new_model, allow_recompute)
    if violation is not None:
        return violation
    if dropped:     # the dependences between the instances that still run, on the whole
        _, deps = model_and_dependences(func)
        running = {name: s.domain for name, s in new_model.statements.items()}
        kept = tuple(dataclasses.replace(d, relation=d.relation.intersect_domain(
            running[d.source.name]).intersect_range(running[d.sink.name]), key=None)
            for d in deps if d.source.name in running and d.sink.name in running)
        return check_schedule(func, first_runs(new_model.schedule), kept)
    return check_new_order(func, new_model.statements)


def unmodelled_domain_change(old_model, new_model) -> str | None:
    """Why the instances a changed statement of `new_model` runs cannot be compared with
    `old_model`'s, or None: a statement whose domain changed (new loops) and which the model
    sees only in part (a loop bound, `if` condition or predicate of it that is not affine was
    left out, so its domain may hold instances that no longer run: found by the fuzzer, a
    compute_at whose new loop extent was piecewise dropped rows of an output)."""
    for name, new in new_model.statements.items():
        old = old_model.statements.get(name)
        if not new.unseen or (old is not None and old.domain_texts == new.domain_texts
                              and old.unseen == new.unseen):
            continue
        unseen = new.unseen[0]
        shown = unseen.script() if hasattr(unseen, "script") else str(unseen)
        shown = shown if len(shown) <= 200 else shown[:200] + "..."
        return (f"after this step the model cannot see which instances of block "
                f"'{new.block.name}' run: one of its loop bounds, `if` conditions or its "
                f"predicate is not affine ({shown}), so the step could drop some of its "
                f"instances unseen; keep its loop bounds and conditions affine (sums of loop "
                f"variables and symbolic dims times constants) before this step")
    return None


def _same_domains(old_model, new_model) -> bool:
    """Whether the two models run the same instances: statement by statement (by the
    domains' texts where unchanged, else by isl) when both have the same statements, else by
    isl on the union. Each statement's instances are a set in its own tuple (its name), so the
    unions are equal iff each statement's sets are, where each pair shares its space (else
    the unions are compared)."""
    if old_model.statements.keys() != new_model.statements.keys():
        return new_model.domain.is_equal(old_model.domain)
    for name, old in old_model.statements.items():
        new = new_model.statements[name]
        if old.domain_texts == new.domain_texts:
            continue
        if not old.domain.get_space().is_equal(new.domain.get_space()):
            return new_model.domain.is_equal(old_model.domain)     # (the union aligns them)
        if not old.domain.is_equal(new.domain):
            return False
    return True


def check_new_order(func: PrimFunc, statements: dict,
                    deps: tuple[Dependence, ...] | None = None,
                    keep=None) -> Violation | None:
    """`check_schedule` of the (first-run) schedule of `statements` (by isl tuple name: a
    rescheduled `func`'s model's, with the same instances), pair by pair, for every
    dependence of `func` (or those of `deps`): a dependence whose two statements keep their
    order relative to each other (pairs.order_key) is kept without asking isl, and isl's
    answer for the others is remembered by content.

    Without `deps`, only the dependences of the pairs of statements whose order key changed
    are computed (`dependences_where`): the others would be kept without asking isl whatever
    their relation, so the answer, and the first broken dependence, are those of the whole
    list. A pair with a statement missing from `statements` counts as changed (it takes the
    whole check below, as before). `keep(source, sink)` (with no `deps`) limits the check to
    the dependences of the pairs it accepts, as if `deps` listed those."""
    unseen = _unseen_read_moved(func, statements)
    if unseen is not None:
        return unseen
    if deps is None:
        model = build_model(func)
        # a pair's order key is a function of its two statements' schedule keys and
        # parameters: where neither statement's changed, the pair's has not either
        moved = {name for name, old in model.statements.items()
                 if _schedule_changed(old, statements.get(name))}

        def changed(source, sink) -> bool:
            if keep is not None and not keep(source, sink):
                return False
            if source.name not in moved and sink.name not in moved:
                return False
            new_source, new_sink = statements.get(source.name), statements.get(sink.name)
            return new_source is None or new_sink is None or \
                order_key(new_source, new_sink) != order_key(source, sink)
        deps = dependences_where(func, changed, model)
        whole = None
    else:
        whole = deps
    for dep in deps:
        if dep.is_reduction:
            continue
        source, sink = statements.get(dep.source.name), statements.get(dep.sink.name)
        if dep.key is None or source is None or sink is None:
            schedule = None
            for statement in statements.values():
                own = isl.UnionMap.from_map(statement.schedule)
                schedule = own if schedule is None else schedule.union(own)
            if whole is None:
                whole = model_and_dependences(func)[1] if keep is None else \
                    dependences_where(func, keep)
            return check_schedule(func, first_runs(schedule), whole)
        order = order_key(source, sink)
        if order == dep.key[2]:
            continue
        broken = breaks_order(dep.key, order)
        if broken is not None:
            example = describe_instance_pair(dep, isl.Map(broken))
            return Violation(f"the new order runs {dep.sink.block.name} before "
                             f"{dep.source.block.name}", dep, example)
    return None


def _unseen_read_moved(func: PrimFunc, statements: dict) -> Violation | None:
    """A step that moves blocks or loops, in a function where a loop bound, condition, let,
    predicate or binding loads a buffer that a block writes: the model has no statement for
    such a read (`accesses.unseen_loads`), so no dependence orders it after the write (audit
    helper-55's `for j in range(L[0])` beside the block storing L). Refused, whatever moves."""
    unseen = unseen_loads(func.body)
    if not unseen:
        return None
    model = build_model(func)
    writers = model.writers_of_storages()
    read = sorted(storage for storage in unseen if storage in writers)
    moved = next((old for name, old in model.statements.items()
                  if _schedule_changed(old, statements.get(name))), None)
    if not read or moved is None:
        return None
    return Violation(f"a loop bound, condition, let, predicate or binding loads '{read[0]}', "
                     f"which block {writers[read[0]].block.name!r} writes; the analysis sees no "
                     f"such read, so it cannot check a step that moves blocks or loops in this "
                     f"function (this one moves block {moved.block.name!r})")


def _schedule_changed(old: Statement, new: Statement | None) -> bool:
    """Whether `new` (the statement of `old`'s name after a step) is missing or has another
    schedule key (its nest and time vector) or parameters' context than `old`."""
    return new is None or new.time != old.time or new.nest() != old.nest() \
        or new.domain_texts[1] != old.domain_texts[1]


# -- instances that run more than once -----------------------------------------------------------


"""Whether the first runs of a block stand for all its runs, asked of the values' flow.

The order checks model an instance that runs more than once by its first run (RUNS_RULE,
runs.py). runs.py proves that exact instance by instance: nothing an instance reads or
writes is written by another between its first run and its last. A reduction recomputed
under a loop that does not determine it (compute_at of `C[vi] += A[vi, vk]` under a loop
of its consumer) fails that test, instance by instance, though each iteration recomputes
every value from scratch: its init resets C[vi] between two runs of each update.

This module asks the question of the whole flow instead. The first runs stand for all the
runs of the block's statements when

1. every run of each of their instances reads each element from one instance, or never
   from a write (instance_flows.runs_agree: then, by induction on time, every run of an
   instance computes the values its first run computes);
2. every read of a storage the block writes, by any statement and in any run, gets its
   value from the instance the first runs give it (or, in both, from no write), and
3. each element of those storages is last written by the instance the first runs give.

Then every value read, and every value the function leaves, is the one of the function in
which each instance runs once, at its first run: the function the dependences describe.
Writes under a condition, an opaque call or an over-approximated model make a source
ambiguous, which is a "no".

    C[vi] = 0; for vk: C[vi] += A[vi, vk]        # under `for j`, for each D[vi, j]
    D[vi, j] = C[vi] * B[vi, j]

Each run of C's update reads C[vi] from the previous update of its own run (or the init),
as its first run does; D reads the last update, the instance the first runs name. A
consumer reading C between an init and the last update of a later run, or a scan reading
the element a previous tile computed, fails (2).
"""

from __future__ import annotations

import islpy as isl

from sched.ir.extern import is_opaque
from sched.polyhedral.flow_crossing import empty_union, statement_params
from sched.polyhedral.instance_flows import (
    by_instance,
    instance_sources,
    runs_agree,
    runs_of,
    writes_surely,
)
from sched.polyhedral.isl_text import maps, within_operations

# isl operations the flow questions may take before the answer is "no" (a halo tile's
# modulo indices made one take 55 s: audit helper-134)
FLOW_OPERATIONS = 3_000_000


def first_runs_stand_for_runs(model, block_name: str) -> bool:
    """Whether the first runs of the statements of block `block_name` stand for all their
    runs (the module doc); kept with the model. "No" where isl cannot tell within
    FLOW_OPERATIONS."""
    key = ("first_runs_stand_for_runs", block_name)
    if key not in model.derived:
        model.derived[key] = bool(within_operations(FLOW_OPERATIONS, lambda: _stand_for_runs(
            model, model.statements_of_block(block_name))))
    return model.derived[key]


def _stand_for_runs(model, statements) -> bool:
    if all(s.runs_once for s in statements):
        return True
    if not model.is_exact or any(is_opaque(s.block) or s.unseen for s in statements):
        return False
    if len({len(s.time) for s in model.statements.values()}) != 1:
        return False                     # (the final writers compare times of one width)
    if runs_agree(model, statements) is not None:
        return False
    storages = sorted({model.storage_of_tuple(m.get_tuple_name(isl.dim_type.out))
                       for s in statements for m in maps(s.writes)})
    return all(_reads_agree(model, storage) and _last_writers_agree(model, storage)
               for storage in storages)


def _reads_agree(model, storage: str) -> bool:
    """(2): the source instance of every read of `storage`, in every run, is the one the
    first runs give."""
    every, first = (instance_sources(model, storage, first_runs_only=only)
                    for only in (False, True))
    if not every.is_unambiguous() or not first.is_unambiguous():
        return False
    for reader in {id(r): r for r in every.readers.values()}.values():
        if is_opaque(reader.block) or reader.unseen:
            return False
        sources, unwritten = by_instance(every, reader)
        first_sources, first_unwritten = by_instance(first, reader, first_runs_only=True)
        if not sources.is_equal(first_sources) or not unwritten.is_equal(first_unwritten):
            return False
    return True


def _last_writers_agree(model, storage: str) -> bool:
    """(3): each element of `storage` is last written by the instance the first runs give
    (asked of isl's flow analysis with a reader of each element after every run: its time
    starts with 1 where every run's starts with 0)."""
    every, first = (_last_writers(model, storage, only) for only in (False, True))
    return every is not None and first is not None and every.is_equal(first)


def _last_writers(model, storage: str, first_runs_only: bool) -> isl.UnionMap | None:
    """`END[element]` -> the instance whose run writes it last, or None where a write of
    `storage` is not sure (a may-write leaves the last writer unknown)."""
    params = statement_params(model)
    prefix = params.split("{")[0]
    width = len(next(iter(model.statements.values())).time)
    names = ", ".join(f"t{d}" for d in range(width))
    runs_first = isl.Map(f"{prefix}{{ [{names}] -> [0, {names}] }}")
    end_time = isl.Set(f"{prefix}{{ [{', '.join(['1'] + ['0'] * width)}] }}")
    writes = times_to_instances = empty_union(params)
    for statement in model.statements.values():
        views = [v for v in statement.accesses
                 if v.buffer.storage_name == storage and v.is_write]
        if not views:
            continue
        if not writes_surely(model, statement, views):
            return None
        times = runs_of(statement, first_runs_only).apply_range(runs_first).reverse()
        times_to_instances = times_to_instances.union(isl.UnionMap.from_map(times))
        for view in views:                                  # time -> element
            writes = writes.union(isl.UnionMap.from_map(times.apply_range(view.relation)))
    sinks = order = writes.domain().identity()
    sinks = sinks.subtract(sinks)
    pieces: list[isl.Set] = []
    writes.range().foreach_set(pieces.append)
    for elements in pieces:                                 # END[e] -> e, at the end
        reader = elements.identity().set_tuple_name(isl.dim_type.in_, "END")
        sinks = sinks.union(isl.UnionMap.from_map(reader))
        order = order.union(isl.UnionMap.from_map(isl.Map.from_domain_and_range(
            reader.domain(), end_time)))
    flow = isl.UnionAccessInfo.from_sink(sinks).set_must_source(writes).set_schedule_map(
        order).compute_flow()
    return flow.get_may_dependence().reverse().apply_range(times_to_instances)

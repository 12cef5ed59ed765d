"""Value flow by instance: for every read of a buffer by a run, the statement instance whose
run wrote the value it reads, keyed by the read access and its run (`R3[time]`).

`dependences.value_flows` relates run times; a step that drops some runs of an instance
(rolling_buffer skips the runs that recompute what an earlier run of the same instance
wrote) needs to know which instance a value comes from, not which run, and that every run
of that instance stores the same value. Two questions, both asked of isl:

- `instance_sources(model, storage)`: per read (access, run) the writing instance, and the
  reads that have no write before them (they read what the buffer held on entry);
- `runs_agree(model, statements)`: whether every run of each instance of those statements
  reads each element from one instance (or never from any), whatever the run: then, by
  induction on time, every run of an instance computes the same values. Asked of the
  statements that run some instance more than once, and, through their sources, of every
  statement whose several runs feed them.

Sure writes are those of an exact model with no condition inside the block
(`flow_crossing.storage_accesses`); any other write is a may-write, which can only make a
source ambiguous, and an ambiguous source is a "no" here.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from sched.ir.extern import is_opaque
from sched.ir.functor import collect
from sched.ir.nodes import IfThenElse
from sched.polyhedral.dependences import first_runs
from sched.polyhedral.flow_crossing import statement_params
from sched.polyhedral.isl_text import maps, parse_union_map


@dataclass(frozen=True)
class InstanceSources:
    """The reads of one storage, one key per read access and run (`R3[time]`: the fourth read
    access of the storage, in the statements' order and each body's order, at that time), and
    where their values come from. Two functions that differ only in the indices of the
    storage (a fold) have the same keys."""

    sources: isl.UnionMap        # key -> the writing instance
    unwritten: isl.UnionSet      # keys that may read what the buffer held on entry
    keys: isl.UnionSet           # every key
    elements: isl.UnionMap       # key -> the element it reads
    readers: dict                # key tuple name -> the reading statement
    source_times: isl.UnionMap   # key -> the time of the writing run
    writes: isl.UnionMap         # time -> the element a run writes

    def is_unambiguous(self) -> bool:
        """Whether each read has at most one source, and none may also read the entry
        value."""
        return self.sources.is_single_valued() and \
            self.unwritten.intersect(self.sources.domain()).is_empty()


def _empty(params_text: str) -> isl.UnionMap:
    return parse_union_map(f"{params_text.split('{')[0]}{{ }}")


def instance_sources(model, storage: str, elements_of=None,
                     first_runs_only: bool = False) -> InstanceSources:
    """The sources of every read of `storage` in `model` (see the module doc); kept with the
    model. With `elements_of`, a model of a function with the same statements and accesses
    but for their indices into `storage`, the runs are `model`'s and the elements each
    access touches are those of `elements_of`: the flow of the values of `elements_of`'s
    elements when `model` runs (rolling_buffer: the elements before the fold, the runs
    after it). With `first_runs_only`, each instance runs once, at its first run: the flow
    the order checks assume (first_run_flows.py)."""
    key = ("instance_sources", storage, id(elements_of), first_runs_only)
    if key not in model.derived:
        model.derived[key] = (elements_of, _instance_sources(model, storage,
                                                             elements_of or model,
                                                             first_runs_only))
    return model.derived[key][1]


def runs_of(statement, first_runs_only: bool = False) -> isl.Map:
    """instance -> the times of its runs (of its first run only, with `first_runs_only`)."""
    return first_runs(statement.schedule) if first_runs_only else statement.schedule


def writes_surely(model, statement, views) -> bool:
    """Whether the writes of `views` (accesses of `statement`) write every element their
    relation names whenever the statement runs: an exact model, no condition inside the block,
    no opaque call, exact guards (else each is a may-write)."""
    body = statement.block.init if statement.is_init else statement.block.body
    return model.is_exact and not collect(body, IfThenElse) and \
        not is_opaque(statement.block) and all(v.access.guards_exact for v in views)


def _instance_sources(model, storage: str, elements_of,
                      first_runs_only: bool = False) -> InstanceSources:
    """isl's flow analysis with one sink per read access (its time tuple renamed `R<k>`):
    the element is a function of the access and the time, so no sink needs it as a key."""
    params = statement_params(model)
    elements = must = may = times_to_instances = order = _empty(params)
    readers = {}
    for statement in model.statements.values():
        views = [v for v in elements_of.statements[statement.name].accesses
                 if v.buffer.storage_name == storage]
        if not views:
            continue
        runs = runs_of(statement, first_runs_only).reverse()          # time -> instance
        times_to_instances = times_to_instances.union(isl.UnionMap.from_map(runs))
        # (a read's guard says nothing of the writes: an argmax's `T.Select(v >= A[k], v,
        # A[k])` reads under a data condition; audit helper-142)
        sure = elements_of.is_exact and writes_surely(model, statement,
                                                      [v for v in views if v.is_write])
        for view in views:
            access = runs.apply_range(view.relation)                  # time -> element
            if view.is_write:
                access = isl.UnionMap.from_map(access)
                must, may = (must.union(access), may) if sure else (must, may.union(access))
                continue
            name = f"R{len(readers)}"
            readers[name] = statement
            access = access.set_tuple_name(isl.dim_type.in_, name)
            elements = elements.union(isl.UnionMap.from_map(access))
            order = order.union(isl.UnionMap.from_map(_untagged(access.domain())))
    writes = must.union(may)
    order = order.union(writes.domain().identity())
    info = isl.UnionAccessInfo.from_sink(elements).set_must_source(must).set_may_source(may)
    flow = info.set_schedule_map(order).compute_flow()
    source_times = flow.get_may_dependence().reverse()
    sources = source_times.apply_range(times_to_instances)
    unwritten = flow.get_may_no_source().domain()
    return InstanceSources(sources, unwritten, elements.domain(), elements, readers,
                           source_times, writes)


def overwritten(found: InstanceSources, same_slot: isl.UnionMap) -> isl.UnionMap:
    """key -> the times of the writes, between the read's source and the read (or before the
    read, where it has no source), to an element that `same_slot` (element -> the other
    elements stored in the same place) puts where the element read is. Empty when storing
    elements by `same_slot` leaves every read its value (rolling_buffer's fold)."""
    times = found.writes.domain().union(found.keys.apply(_untag_all(found.keys)))
    earlier = _lex(times, strictly_before=True)              # t -> the times before t
    later = _lex(times, strictly_before=False)               # t -> the times after t
    to_time = _untag_all(found.keys)                          # key -> its time
    before = to_time.apply_range(earlier)                     # key -> times before it
    after_source = found.source_times.apply_range(later).union(
        isl.UnionMap.from_domain_and_range(found.unwritten, times))
    others = found.elements.apply_range(same_slot).apply_range(found.writes.reverse())
    return others.intersect(before).intersect(after_source)


def _untag_all(keys: isl.UnionSet) -> isl.UnionMap:
    """Each key `R3[t]` -> its time `[t]`."""
    union = None
    for piece in _sets(keys):
        part = isl.UnionMap.from_map(_untagged(piece))
        union = part if union is None else union.union(part)
    return union


def _sets(union: isl.UnionSet) -> list[isl.Set]:
    found: list[isl.Set] = []
    union.foreach_set(found.append)
    return found


def _lex(times: isl.UnionSet, strictly_before: bool) -> isl.UnionMap:
    """t -> the times of `times` before t (or after t)."""
    union = None
    for piece in _sets(times):
        universe = isl.Set.universe(piece.get_space())
        order = universe.lex_gt_set(universe) if strictly_before else \
            universe.lex_lt_set(universe)
        part = isl.UnionMap.from_map(order.intersect_range(piece))
        union = part if union is None else union.union(part)
    return union


def _untagged(keys: isl.Set) -> isl.Map:
    """`R3[t] -> [t]`."""
    identity = keys.identity()
    return identity.reset_tuple_id(isl.dim_type.out)


def by_instance(found: InstanceSources, statement,
                first_runs_only: bool = False) -> tuple[isl.UnionMap, isl.UnionSet]:
    """The sources of `statement`'s reads keyed by access and instance (`R3[instance]`: its
    runs' times replaced by the instance that runs then), and its keys that may read the
    entry value (`found` computed with `first_runs_only`, given here too)."""
    runs = runs_of(statement, first_runs_only).reverse()              # time -> instance
    to_instance = _empty_like(found.sources)
    for name, reader in found.readers.items():
        if reader is statement:
            tagged = runs.set_tuple_name(isl.dim_type.in_, name).set_tuple_name(
                isl.dim_type.out, name)
            to_instance = to_instance.union(isl.UnionMap.from_map(tagged))
    return found.sources.apply_domain(to_instance), found.unwritten.apply(to_instance)


def _empty_like(union: isl.UnionMap) -> isl.UnionMap:
    return union.subtract(union)


def runs_agree(model, statements) -> str | None:
    """None when every run of each instance of `statements`, and of every statement that runs
    some instance more than once and feeds them, reads each element from one instance (or
    never from a write); else the name of a statement whose runs may read different values
    (see the module doc)."""
    pending = [s for s in statements if not s.runs_once]
    seen: set[str] = set()
    while pending:
        statement = pending.pop()
        if statement.name in seen:
            continue
        seen.add(statement.name)
        for storage in _storages_read(model, statement):
            found = instance_sources(model, storage)
            sources, unwritten = by_instance(found, statement)
            if not sources.is_single_valued() or \
                    not unwritten.intersect(sources.domain()).is_empty():
                return statement.name
            for piece in maps(sources):
                source = model.statements[piece.get_tuple_name(isl.dim_type.out)]
                if not source.runs_once:
                    pending.append(source)
    return None


def _storages_read(model, statement) -> list[str]:
    """The storages `statement` reads that some statement writes (reading one nobody writes
    gives every run the entry value)."""
    written = {m.get_tuple_name(isl.dim_type.out) for s in model.statements.values()
               for m in maps(s.writes)}
    return sorted({model.storage_of_tuple(m.get_tuple_name(isl.dim_type.out))
                   for m in maps(statement.reads)} & {model.storage_of_tuple(t)
                                                      for t in written})


def unwritten_elements(model, buffer) -> isl.Set | None:
    """The elements of `buffer` (a parameter, in its own dimensions) that no statement
    surely writes, where the sizes are at least 1; None where the model cannot tell (a
    write through another view of its storage, an inexact model). The functional form of a
    torch operator allocates its outputs empty and needs this empty (audit helper-146: a
    kernel writing B[0:n - 1] of an (n,) output returned the allocator's garbage in B[n - 1])."""
    from sched.polyhedral.isl_expr import isl_name, to_isl
    from sched.polyhedral.isl_text import read_set

    elements = [f"e{d}" for d in range(buffer.ndim)]
    extents = [to_isl(dim) for dim in buffer.shape]
    if not model.is_exact or None in extents:
        return None
    params = ", ".join(model.params)
    constraints = [f"0 <= {e} < {x}" for e, x in zip(elements, extents)]
    constraints += [f"{isl_name(v)} >= 1" for v in model.func.symbolic_vars]
    condition = " and ".join(constraints) or "true"
    box = read_set(f"[{params}] -> {{ [{', '.join(elements)}] : {condition} }}")
    for statement in model.statements.values():
        views = [v for v in statement.accesses
                 if v.is_write and v.buffer.storage_name == buffer.storage_name]
        if any(v.buffer.name != buffer.name for v in views):
            return None
        if views and writes_surely(model, statement, views):
            for view in views:
                box = box.subtract(view.relation.range().reset_tuple_id())
    return box

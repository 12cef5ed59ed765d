"""Dependences between statement instances: flow (read after write), anti (write after read)
and output (write after write), computed by isl from the model's accesses and schedule.

They are memory-based: every pair of instances that touch the same element, at least one of them
writing, in their current order. Preserving all of them is what keeps a reordering correct
without renaming storage. The relational formulation is isl's: `W . R^-1` intersected with the
schedule's strict lexicographic order.

    deps = sched.polyhedral.dependences(func)
    for dep in deps:
        print(dep)       # flow C -> D on C: { S_C[...] -> S_D[...] : ... }, distance (0, 0)

When an instance runs more than once (recomputation), its first run stands for it.

Updates of an associative reduction (`C[vi, vj] = C[vi, vj] + ...` in a block with reduce
iteration variables) depend on each other; those dependences are marked `is_reduction`: reduce
loops may be reordered (the result is the same up to rounding) but not run in parallel.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import islpy as isl

from sched.ir.nodes import BinaryOp, Block, BufferLoad, BufferStore, PrimFunc
from sched.polyhedral.model import PolyModel, Statement, build_model

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
    distance: tuple[int, ...] | None   # constant difference of the common loops, if any
    is_reduction: bool
    exact: bool

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
    if not any(iv.kind == "reduce" for iv in block.iter_vars):
        return False
    store = block.body
    if not isinstance(store, BufferStore) or not isinstance(store.value, BinaryOp):
        return False
    value = store.value
    own = BufferLoad(store.buffer, store.indices)
    return value.op in ASSOCIATIVE_OPS and own in (value.a, value.b)


def _common_loop_distance(model: PolyModel, relation: isl.Map, source: Statement,
                          sink: Statement) -> tuple[int, ...] | None:
    """The constant difference sink - source of the loops both are under, or None."""
    common = 0
    for a, b in zip(source.loops, sink.loops):
        prefix = a.position + 1
        if a != b or source.time[:prefix] != sink.time[:prefix]:
            break
        common += 1
    if common == 0:
        return None
    positions = [loop.position for loop in source.loops[:common]]
    in_time = relation.apply_domain(source.schedule).apply_range(sink.schedule)
    deltas = in_time.deltas()
    if not deltas.is_singleton():
        return None
    point = deltas.sample_point()
    return tuple(point.get_coordinate_val(isl.dim_type.set, p).to_python() for p in positions)


def maps(union: isl.UnionMap) -> list[isl.Map]:
    """The maps of a union map, one per pair of spaces."""
    found: list[isl.Map] = []
    union.foreach_map(found.append)
    return found


def _pairs(first: isl.UnionMap, second: isl.UnionMap, before: isl.UnionMap) -> isl.UnionMap:
    """Instances of `first`'s statements and later instances of `second`'s that touch one
    element."""
    return first.apply_range(second.reverse()).intersect(before)


@functools.lru_cache(maxsize=64)
def _dependences(func: PrimFunc) -> tuple[PolyModel, tuple[Dependence, ...]]:
    model = build_model(func)
    # A block placed under thread loops it does not use (a shared-memory fetch computed at a
    # loop inside them) runs each instance once per thread, writing the same values: the first
    # run is the one that orders it against the others.
    schedule = model.schedule
    if not schedule.is_single_valued():
        schedule = schedule.lexmin()
    before = schedule.lex_lt_union_map(schedule)
    found: list[Dependence] = []
    buffers = {m.get_tuple_name(isl.dim_type.out)
               for m in maps(model.reads.union(model.writes))}
    for buffer in sorted(buffers):
        reads = model.reads.intersect_range(_buffer_universe(model, buffer))
        writes = model.writes.intersect_range(_buffer_universe(model, buffer))
        relations = {"flow": _pairs(writes, reads, before), "anti": _pairs(reads, writes, before),
                     "output": _pairs(writes, writes, before)}
        for kind in KINDS:
            for relation in maps(relations[kind].coalesce()):
                found.append(_dependence(model, kind, buffer, relation))
    return model, tuple(found)


def _buffer_universe(model: PolyModel, buffer: str) -> isl.UnionSet:
    spaces = [m.get_space().range() for m in maps(model.reads.union(model.writes))
              if m.get_tuple_name(isl.dim_type.out) == buffer]
    return isl.UnionSet.from_set(isl.Set.universe(spaces[0]))


def _dependence(model: PolyModel, kind: str, buffer: str, relation: isl.Map) -> Dependence:
    source = model.statements[relation.get_tuple_name(isl.dim_type.in_)]
    sink = model.statements[relation.get_tuple_name(isl.dim_type.out)]
    reduction = (source is sink and not source.is_init and is_reduction_update(source.block)
                 and any(buffer == "B_" + r.buffer.storage_name for r in source.block.writes))
    return Dependence(kind, source, sink, buffer.removeprefix("B_"), relation,
                      _common_loop_distance(model, relation, source, sink), reduction,
                      model.is_exact)


def dependences(func: PrimFunc) -> tuple[Dependence, ...]:
    """Every dependence of `func` (see the module docstring). Cached per function."""
    return _dependences(func)[1]


def model_and_dependences(func: PrimFunc) -> tuple[PolyModel, tuple[Dependence, ...]]:
    """The model of `func` and its dependences, both cached."""
    return _dependences(func)

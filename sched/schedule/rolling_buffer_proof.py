"""The proof that rolling_buffer's fold keeps every value (rolling_buffer.py's doc, (1) and
(2)): every run of the producer reads each element from one instance, and after the fold
every read gets its value from the instance that wrote it before, no other element's write to
its slot in between; the refusals name the read and the two writes.
"""

from __future__ import annotations

import islpy as isl

from sched.errors import ScheduleError
from sched.ir.nodes import Buffer, PrimFunc
from sched.polyhedral import build_model
from sched.polyhedral.flow_crossing import statement_params
from sched.polyhedral.instance_flows import instance_sources, overwritten, runs_agree

PRIMITIVE = "rolling_buffer"


def check_fold_keeps_values(func: PrimFunc, new_func: PrimFunc, block_name: str,
                            buffer: Buffer, axis: int, window: int) -> None:
    """(1) and (2) of rolling_buffer.py's doc, asked of isl; a ScheduleError where either fails."""
    old, new = build_model(func), build_model(new_func)
    for model, which in ((old, "before"), (new, "after")):
        if not model.is_exact:
            raise ScheduleError(PRIMITIVE, f"the polyhedral model of the function {which} the "
                                f"fold over-approximates ({model.notes[0]}), so rolling_buffer "
                                f"cannot prove that every read keeps its value")
    if {len(s.time) for s in old.statements.values()} != \
            {len(s.time) for s in new.statements.values()}:
        raise ScheduleError(PRIMITIVE, "the fold changed the loop structure (a bug)")
    disagreeing = runs_agree(old, old.statements_of_block(block_name))
    if disagreeing is not None:
        statement = old.statement_of_tuple(disagreeing)
        init = " (its T.init)" if statement.is_init else ""
        raise ScheduleError(PRIMITIVE, f"block {statement.block.name!r}{init} runs some "
                            f"instances more than once, and two runs may read different "
                            f"values (from different writes, or one from a write and one from "
                            f"the buffer before any write: a reduction with no T.init), so "
                            f"the runs the predicate skips may not be recomputations; give "
                            f"the producer a T.init, or compute_at it so each tile computes "
                            f"its elements from scratch")
    # the values of the elements (before the fold) flowing in the runs after it, and what the
    # fold puts in the same slot in between
    before = instance_sources(old, buffer.name)
    after = instance_sources(new, buffer.name, elements_of=old)
    assert {k: r.name for k, r in before.readers.items()} == \
        {k: r.name for k, r in after.readers.items()}, "the fold changed the accesses"
    if not after.is_unambiguous():
        raise ScheduleError(PRIMITIVE, f"a read of {buffer.name!r} after the fold has more "
                            f"than one possible source, so rolling_buffer cannot prove it "
                            f"keeps its value")
    expected = before.sources.intersect_domain(after.keys)     # the runs that stay
    if not after.sources.is_equal(expected):
        wrong = after.sources.subtract(expected).union(expected.subtract(after.sources))
        raise ScheduleError(PRIMITIVE, _describe(old, before, wrong.domain(), after, expected,
                                                 buffer, axis, window))
    clobbered = overwritten(after, _same_slot(old, buffer, axis, window))
    if not clobbered.is_empty():
        point = clobbered.domain().sample_point()
        key = isl.UnionSet.from_set(isl.Set.from_point(point))
        times = key.apply(clobbered)
        other = _coordinates(times.apply(after.writes).sample_point())
        raise ScheduleError(PRIMITIVE, _describe(old, before, key, after, expected, buffer,
                                                 axis, window, other))


def _same_slot(model, buffer: Buffer, axis: int, window: int) -> isl.UnionMap:
    """element -> the other elements the fold stores in its slot."""
    name = model.buffer_tuple(buffer.storage_name)
    a = [f"a{d}" for d in range(len(buffer.shape))]
    b = [f"b{d}" for d in range(len(buffer.shape))]
    same = [f"b{d} = a{d}" for d in range(len(buffer.shape)) if d != axis]
    same += [f"(a{axis} - b{axis}) mod {window} = 0", f"a{axis} != b{axis}"]
    params = statement_params(model).split("{")[0]
    return isl.UnionMap(f"{params}{{ {name}[{', '.join(a)}] -> {name}[{', '.join(b)}] : "
                        f"{' and '.join(same)} }}")


def _describe(model, before, keys: isl.UnionSet, after, expected: isl.UnionMap,
              buffer: Buffer, axis: int, window: int, other: list[int] | None = None) -> str:
    """The refusal for reads whose value the fold changes, naming one of them."""
    point = keys.sample_point()
    key = isl.UnionSet.from_set(isl.Set.from_point(point))
    reader = before.readers[point.get_space().get_tuple_name(isl.dim_type.set)]
    element = _coordinates(key.apply(before.elements).sample_point())
    slot = [v % window if d == axis else v for d, v in enumerate(element)]
    times = isl.Set.from_point(point).reset_tuple_id()
    instance = _coordinates(times.apply(reader.schedule.reverse()).sample_point())
    was = _instance_text(model, expected.intersect_domain(key))
    return (f"folding {buffer.name!r} to {window} rows on axis {axis} would change a value: "
            f"{_instance_name(reader, instance)} reads {buffer.name}"
            f"[{', '.join(map(str, element))}] (slot {buffer.name}"
            f"[{', '.join(map(str, slot))}]), the value of {was}, but after the fold "
            + (f"the write of {buffer.name}[{', '.join(map(str, other))}] to that slot lands "
               f"between the two (a consumer reads further back than the window)"
               if other is not None else
               "it would read another write's value (the predicate skips the only run that "
               "computes the element before this read)")
            + f"; leave "
            f"{buffer.name!r} unfolded, or compute_at the producer under the loop of the "
            f"consumer's tiles")


def _coordinates(point: isl.Point) -> list[int]:
    space = point.get_space()
    return [point.get_coordinate_val(isl.dim_type.set, d).to_python()
            for d in range(space.dim(isl.dim_type.set))]


def _instance_name(statement, values: list[int]) -> str:
    names = [iv.var.name for iv in statement.block.iter_vars]
    init = " (init)" if statement.is_init else ""
    return f"block {statement.block.name}{init}[" + ", ".join(
        f"{n}={v}" for n, v in zip(names, values)) + "]"


def _instance_text(model, sources: isl.UnionMap) -> str:
    if sources.is_empty():
        return "no write (what the buffer held before any write)"
    point = sources.range().sample_point()
    statement = model.statement_of_tuple(point.get_space().get_tuple_name(isl.dim_type.set))
    return _instance_name(statement, _coordinates(point))

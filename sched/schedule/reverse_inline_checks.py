"""What reverse_compute_inline asks beyond its producer and consumer matching: that the
consumer, run inside its producer, writes the elements it wrote before and that no load of
its output from the producer on sees the new values early. Each check refuses a class of
programs the audits found computing wrong numbers (helpers 95, 97, 99, 101).

    refuse_unseen_reads_before(func, "C", start, end, "C", primitive)   # T.where(C[i - 1] ...)
    refuse_control_around(func, realize, "C", primitive)               # if i < 5: block C
    refuse_other_elements(func, new_func, "C", "B", C, primitive)      # for i in range(5)
"""

from __future__ import annotations

import islpy as isl

from sched.errors import ScheduleError
from sched.ir.functor import collect
from sched.ir.nodes import (
    BlockRealize,
    Buffer,
    BufferLoad,
    For,
    IfThenElse,
    LetStmt,
    PrimFunc,
    While,
)
from sched.polyhedral import build_model
from sched.polyhedral.accesses import buffer_tuple, unseen_loads
from sched.polyhedral.isl_text import maps
from sched.polyhedral.kernel_stages import root_stages
from sched.schedule.state import path_to


def refuse_unseen_reads_before(func: PrimFunc, written: str, start: int, end: int,
                                consumer: str, primitive: str) -> None:
    """Refuse where a top-level statement from the producer's (`start`) to the consumer's
    (`end`, excluded) loads `written` where the model's statements do not see it (a
    predicate, an `if` or a let, a loop bound): the consumer, inlined into the producer, would
    write it earlier, and the load would read the new values (audit helpers 97 and 99: the
    producer's T.where, a block between the two, wrong numbers)."""
    # the producer's statement at least (one statement holds both after compute_at: helper-101)
    for stage in root_stages(func)[start:max(end, start + 1)]:
        if written in unseen_loads(stage):
            raise ScheduleError(primitive, f"{written!r}, which {consumer!r} writes, is loaded "
                                f"in a predicate, a condition, a let or a loop bound between "
                                f"the producer and {consumer!r}: inlined, {consumer!r} would "
                                f"write it before that load")


def refuse_other_elements(func: PrimFunc, new_func: PrimFunc, consumer: str, merged: str,
                           buffer: Buffer, primitive: str) -> None:
    """Refuse where the inlined store would write other elements of `buffer` than the
    consumer did: its loops may run fewer instances than its block's domain (`range(5)` over
    an axis of 16, a stride, a symbolic extent, a predicate or an `if` on a block around it),
    and inlined it runs for every instance of its producer (audit helper-101: 11 of 16 elements
    overwritten). isl compares the two sets of elements, and the inlined store must write
    each element once: the consumer wrote each once (`_refuse_overwrites`), and where its
    loops ran only some instances on which its store was one to one, the others may write
    the same elements again (`C[vi % 8]` over `range(8)` of an axis of 16: audit helper-102,
    the second half's values); with both, the inlined store writes each element from the
    instance the consumer wrote it from. Where the model is not exact, refused."""
    before = _elements_written(func, consumer, buffer)
    after = _elements_written(new_func, merged, buffer)
    if before is None or after is None or not before[0].is_equal(after[0]) or \
            not after[1].is_injective():
        raise ScheduleError(primitive, f"inlined into its producer, block {consumer!r} would "
                            f"write other elements of {buffer.name!r} than it does now (its "
                            f"loops, or a condition around it, run only some of its block's "
                            f"instances), or the model cannot tell")


def _elements_written(func: PrimFunc, block: str, buffer: Buffer):
    """The elements of `buffer`'s storage the block's statements (not an init) write, an isl
    UnionSet, and the instances' writes of them, a UnionMap; None where the model
    over-approximates."""
    model = build_model(func)
    tuple_name = buffer_tuple(buffer)
    found = None
    for statement in model.statements_of_block(block):
        if statement.is_init:
            continue
        # the block's instances and its writes of the storage exact: what else the model
        # widens (a gather's read, audit helper-128) does not change which elements it writes
        if not statement.exact or any(
                not (view.access.is_affine and view.access.guards_exact)
                for view in statement.accesses
                if view.is_write and view.buffer.storage_name == buffer.storage_name):
            return None
        for written in maps(statement.writes):
            if written.get_tuple_name(isl.dim_type.out) == tuple_name:
                written = isl.UnionMap.from_map(written)
                found = written if found is None else found.union(written)
    return None if found is None else (found.range(), found)


def refuse_control_around(func: PrimFunc, realize: BlockRealize, name: str,
                           primitive: str) -> None:
    """Refuse a consumer under an `if`, a let or a loop whose bounds load memory in its
    loop nest: which of its instances run is not in its bindings, and inlined into its
    producer it would run for every one (audit helper-99: `if i < 5` around it was dropped)."""
    path = path_to(func.body, realize) or []
    if any(isinstance(s, IfThenElse | LetStmt | While) for s in path) or any(
            isinstance(s, For) and (collect(s.min, BufferLoad) or collect(s.extent, BufferLoad))
            for s in path):
        raise ScheduleError(primitive, f"block {name!r} runs under an `if`, a let or a loop "
                            f"bound read from memory: which of its instances run is not in its "
                            f"bindings, and inlined it would run for every element its "
                            f"producer stores; move the condition into a T.where of the block")

"""Instances a step may leave out: those whose writes nothing that still runs reads.

TVM's compute_at computes what the consumers under the loop read; a producer's instances
whose elements no consumer reads (a cache's copy of a padded layout's padding, rows of a
reduction a consumer never asks for) are not run. sched's legality compares the instances
before and after a step (`legality.check_order`), so it leaves out only instances it proves
dead: of blocks that only store, writing buffers the function allocates, whose elements no
instance left in reads, where the model sees every read of those buffers exactly. The model's
reads are the loads of block bodies (with the bounds of loops inside them), in exact integers:
a load elsewhere (a loop bound between blocks, a condition, a predicate, a binding, a let), a
read under a data condition that int32 arithmetic may decide otherwise than isl, or in a block
whose predicate is not affine is not seen exactly,
and then nothing is left out (audit helper-51 found each of those dropping a needed value).
"""

from __future__ import annotations

import islpy as isl

from sched.ir.dtype import max_value, min_value
from sched.ir.functor import collect
from sched.ir.intervals import interval, loop_ranges
from sched.ir.nodes import (
    COMPARE_OPS,
    LOGIC_OPS,
    BinaryOp,
    BlockRealize,
    BufferLoad,
    Evaluate,
    For,
    IfThenElse,
    IntImm,
    LetStmt,
    Not,
    PrimFunc,
    Var,
    While,
    is_constant,
)
from sched.ir.paths import enclosing_loops
from sched.polyhedral.isl_expr import to_isl_condition


def dead_instances(func: PrimFunc, model, instances: isl.UnionSet) -> bool:
    """Whether leaving `instances` out of `func` (whose model is `model`) changes nothing: each
    is of a block that only stores (no call evaluated for its effect), writes something, and
    only elements of buffers the function allocates that no instance left in reads (a cache of
    a padded layout copies padding elements nothing reads: compute_at runs what its consumers
    read, as TVM's does), where the model sees every read of those buffers exactly
    (`_reads_seen_exactly`)."""
    written = model.writes.intersect_domain(instances)
    if written.is_empty():
        return False
    names: list[str] = []
    instances.foreach_set(lambda piece: names.append(piece.get_tuple_name()))
    for name in names:
        statement = model.statements.get(name)
        if statement is None or collect(statement.block.init if statement.is_init
                                        else statement.block.body, Evaluate):
            return False
    elements: list[str] = []
    written.range().foreach_set(lambda piece: elements.append(piece.get_tuple_name()))
    storages = {model.storage_of_tuple(e) for e in elements}
    if storages & {b.storage_name for b in func.buffers}:
        return False
    # reads by the instances left out do not count (a row sum's updates read its own
    # accumulator: audit helper-51)
    kept_reads = model.reads.subtract_domain(instances)
    return _reads_seen_exactly(func, model, storages) and \
        written.range().intersect(kept_reads.range()).is_empty()


def _reads_seen_exactly(func: PrimFunc, model, storages: set[str]) -> bool:
    """Whether the model's reads of `storages` are all their reads, exactly: none is a load in
    a loop bound, an `if` or `while` condition, a let, a block's predicate or binding (the
    model's accesses are the block bodies' loads), and none is under a condition or in a block
    with a predicate (the model reads those in exact integers, the code in int32 that may
    wrap). Found by audit helper-51: loads in a loop's extent, an `if` around a block, a
    predicate and a wrapping `vi * 1000000000 < 0` each hid a read of what compute_at left
    out."""
    def loads(*exprs) -> bool:
        return any(load.buffer.storage_name in storages
                   for e in exprs for load in collect(e, BufferLoad))

    for node in collect(func.body, For):
        if loads(node.min, node.extent):
            return False
    for node in (*collect(func.body, IfThenElse), *collect(func.body, While)):
        if loads(node.condition):
            return False
    for node in collect(func.body, LetStmt):
        if loads(node.value):
            return False
    for realize in collect(func.body, BlockRealize):
        if loads(realize.predicate, *realize.iter_values):
            return False
        reads_here = loads(realize.block.body, *([realize.block.init] if realize.block.init
                                                  else []))
        # an affine predicate (a partial tile's `i_0 * 3 + i_1 < 10`) whose arithmetic stays
        # in int32 over the loops' ranges is decided by the code as by isl's exact integers
        # (audit helper-72: `i * 2**62` in int64, or a cast of an int32 product, wrapped)
        if reads_here and not is_constant(realize.predicate, 1) and not (
                to_isl_condition(realize.predicate) is not None
                and _cannot_wrap(realize.predicate, _loop_ranges(func, realize))):
            return False
    for statement in model.statements.values():
        for view in statement.accesses:
            access = view.access
            if not access.is_write and access.buffer.storage_name in storages and \
                    (access.guards or not access.guards_exact):
                return False
    return True


def _loop_ranges(func: PrimFunc, realize: BlockRealize) -> dict:
    """The values of the loops around `realize` and of the symbolic dims (0 .. the largest
    of their dtype)."""
    return loop_ranges([(lp.loop_var, lp.min, lp.extent) for lp in enclosing_loops(func, realize)],
                       {v: (0, max_value(v.dtype)) for v in func.symbolic_vars})


def _cannot_wrap(condition, ranges: dict) -> bool:
    """Whether every integer value in `condition` (comparisons joined by and, or, not), and
    every value on the way, stays in int32 over `ranges`, or is index arithmetic of
    variables alone that stays in int64 (`_wide_where_it_wraps`): then the code computes it
    as isl does."""
    if isinstance(condition, BinaryOp) and condition.op in LOGIC_OPS:
        return _cannot_wrap(condition.a, ranges) and _cannot_wrap(condition.b, ranges)
    if isinstance(condition, Not):
        return _cannot_wrap(condition.a, ranges)
    if isinstance(condition, BinaryOp) and condition.op in COMPARE_OPS:
        found = [interval(side, ranges) for side in (condition.a, condition.b)]
        return all(f is not None and (not f[1] or _wide_where_it_wraps(side, ranges))
                   for f, side in zip(found, (condition.a, condition.b)))
    return is_constant(condition, 1) or is_constant(condition, 0)


def _wide_where_it_wraps(e, ranges: dict) -> bool:
    """Whether `e`, index arithmetic of variables and constants alone (no cast, which would
    take an int32 product wrapped), stays in int64 on the way: the lowering computes int32
    index arithmetic that may pass int32 in int64 (lower/wide_integers.py), so the code
    decides a partial tile's `i_0 * 3 + i_1 < n` over a symbolic n as isl does."""
    if isinstance(e, Var | IntImm):
        return interval(e, ranges) is not None
    if not isinstance(e, BinaryOp) or e.op not in ("add", "sub", "mul", "floordiv",
                                                   "floormod", "min", "max"):
        return False
    found = interval(e, ranges)
    return found is not None and min_value("int64") <= found[0][0] and \
        found[0][1] <= max_value("int64") and _wide_where_it_wraps(e.a, ranges) and \
        _wide_where_it_wraps(e.b, ranges)

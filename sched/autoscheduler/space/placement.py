"""Placement rules: inline elementwise producers (and padding) into their consumers, and put a
producer that cannot be inlined (a row max, a row sum) under a loop of its consumer, at a
sampled depth (0: where it is).

    before                          after (softmax, compute location 1)
    for i, k: M[i] = max(...)       for i (parallel):
    for i, j: Y[i, j] = ... M[i]        for k: M[i] = max(...)
                                        for j: Y[i, j] = ... M[i]
"""

from __future__ import annotations

from sched.autoscheduler.space.sampler import Sampler
from sched.ir.functor import collect
from sched.ir.nodes import Var
from sched.schedule.state import find_block


def inline(sch, name: str) -> None:
    sch.compute_inline(sch.get_block(name))


def compute_location(sch, sampler: Sampler, name: str, consumer: str, vector_loops: int):
    """Sample a loop of `consumer` (outside its `vector_loops` innermost ones) to compute
    `name` at; 0 keeps it at the root. Returns the loop it moved to, or None. Where an
    earlier rule replaced `consumer` (a tile's decompose_reduction makes `<consumer>_update`)
    the one block that now reads `name` stands for it."""
    now = sch.get_consumers(sch.get_block(name))
    if len(now) == 1:
        consumer = sch.get(now[0]).name
    block = sch.get_block(consumer)
    loops = sch.get_loops(block)
    candidates = loops[:max(0, len(loops) - vector_loops)]
    # not under the consumer's reduction loops: there every reduction step (a conv2d's
    # input channel and window) would recompute the producer's tile, and the legality of
    # such a placement under a parallel loop takes isl seconds
    reduction = _reduction_loop_vars(sch, block)
    for position, loop in enumerate(candidates):
        if sch.get(loop).loop_var in reduction:
            candidates = candidates[:position]
            break
    if not candidates:
        return None
    choice = sampler.choose(list(range(len(candidates) + 1)), [1] * (len(candidates) + 1))
    if choice == 0:
        return None
    sch.compute_at(sch.get_block(name), candidates[choice - 1])
    return candidates[choice - 1]


def _reduction_loop_vars(sch, block) -> set:
    """The loop variables the bindings of `block`'s reduction iteration variables use."""
    realize = find_block(sch.func, sch.get(block).name)
    return {var for iv, value in zip(realize.block.iter_vars, realize.iter_values)
            if iv.kind == "reduce" for var in collect(value, Var)}

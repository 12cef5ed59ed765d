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


def inline(sch, name: str) -> None:
    sch.compute_inline(sch.get_block(name))


def compute_location(sch, sampler: Sampler, name: str, consumer: str, vector_loops: int):
    """Sample a loop of `consumer` (outside its `vector_loops` innermost ones) to compute
    `name` at; 0 keeps it at the root. Returns the loop it moved to, or None."""
    loops = sch.get_loops(sch.get_block(consumer))
    candidates = loops[:max(0, len(loops) - vector_loops)]
    if not candidates:
        return None
    choice = sampler.choose(list(range(len(candidates) + 1)), [1] * (len(candidates) + 1))
    if choice == 0:
        return None
    sch.compute_at(sch.get_block(name), candidates[choice - 1])
    return candidates[choice - 1]

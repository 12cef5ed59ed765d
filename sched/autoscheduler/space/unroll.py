"""Unrolling within a budget: the loops of a tile, innermost first, unrolled while the copies of
the body they make stay within a sampled number (TVM's `auto_unroll_max_step`).

Unrolling each small loop on its own multiplies: a conv2d register tile of 16 x 3 x 3 x 8 x 14
iterations, every loop at most 16, unrolled into 16,128 copies of its body, and gcc compiled
that for over ten minutes. The budget counts the copies of the innermost body that the unrolled
loops make together.

    for k1 in range(4):             budget 64, vector_copies 2:
        for i3 in range(4):             k1 (4) x i3 (4) x 2 = 32 copies <= 64: both unrolled
            for j3 (vectorized, 2 vectors)
"""

from __future__ import annotations

from sched.autoscheduler.space.sampler import Sampler

CPU_BUDGETS = (0, 16, 64, 256)          # body copies; 0: unroll nothing
GPU_BUDGETS = (16, 64, 256, 512)


def sample_budget(sampler: Sampler, budgets: tuple[int, ...]) -> int:
    """One of `budgets`, a sampled (and recorded) decision."""
    return sampler.choose(list(budgets))


def unroll_within(sch, loops: list[tuple[object, int]], budget: int, copies: int = 1) -> None:
    """Unroll `loops` ((handle, constant extent) pairs, innermost first) while the product of
    the unrolled extents times `copies` (what the body already holds, e.g. its vectors) stays
    within `budget`; stop at the first loop that would pass it (unrolling around a loop kept
    rolled copies the loop)."""
    for loop, extent in loops:
        if extent <= 1:
            continue
        if copies * extent > budget:
            return
        sch.unroll(loop)
        copies *= extent

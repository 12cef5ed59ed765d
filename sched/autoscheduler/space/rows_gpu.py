"""The GPU rule for row reductions (a row max, sum, mean: a reduction without data reuse), as
the hand schedules `gpu_softmax_rows` and `gpu_layer_norm_rows` do and MetaSchedule's
cross-thread-reduction rule: one thread block per row, the row's columns over the block's
threads, each reduction a cross-thread reduction (warp shuffles, then shared memory across
warps) whose result every thread of the row reads from shared memory.

The anchor is the last block that consumes the reductions (softmax's division, layer norm's
normalisation): its leading spatial loops go to blockIdx.x (fused, or x/y/z where symbolic),
its last spatial loop over the threads. Each reduction goes under the anchor's row loop;
a reduction no anchor takes (it writes an output, or no consumer has the row loop it needs)
gets a kernel of its own in the same shape.

    before                              after (threads = 128)
    for i, k:                           for i (blockIdx.x):
        M[i] = max(M[i], X[i, k])           for k_1 (threadIdx.x):          # M in shared
    for i, j:                                   for k_0: M[i] = max(M[i], X[i, k_0*128 + k_1])
        Y[i, j] = X[i, j] - M[i]            for j_0, j_1 (threadIdx.x):
                                                Y[i, j] = X[i, j] - M[i]
"""

from __future__ import annotations

from sched.autoscheduler.space.analysis import BlockInfo
from sched.autoscheduler.space.sampler import Sampler, SketchRefused
from sched.autoscheduler.space.threads_gpu import (
    THREAD_CHOICES,
    bind_blocks,
    bind_threads,
    is_bound,
)
from sched.errors import ScheduleError


def row_thread_choices(sch, reductions: list[str]) -> list[int]:
    """The thread counts a function's kernels may take: with row reductions, those no larger
    than the shortest row (each thread reduces one element or more)."""
    from sched.ir.nodes import IntImm
    from sched.schedule.state import find_block

    shortest = None
    for name in reductions:
        realize = find_block(sch.func, name)
        length = 1
        for iv in realize.block.iter_vars:
            if iv.kind == "reduce":
                extent = iv.dom.extent
                length = length * extent.value if isinstance(extent, IntImm) else None
                if length is None:
                    break
        if length is not None:
            shortest = length if shortest is None else min(shortest, length)
    if shortest is None:
        return THREAD_CHOICES
    return [t for t in THREAD_CHOICES if t <= shortest] or THREAD_CHOICES[:1]


def row_anchor(sch, info: BlockInfo, threads: int):
    """Bind the anchor block's rows to thread blocks and its last spatial loop to `threads`
    threads; returns its row loop (the loop the reductions go under)."""
    loops = sch.get_loops(sch.get_block(info.name))
    leading = [loop for loop in loops[:len(info.spatial)] if loop.name in info.spatial]
    if len(leading) < 2 or len(leading) != len(info.spatial) or info.reduce:
        raise SketchRefused(f"block {info.name!r}: no row loop beside a column loop")
    rows = bind_blocks(sch, leading[:-1])
    _, tx = sch.split(leading[-1], factors=[None, threads])
    sch.bind(tx, "threadIdx.x")
    return rows


def row_reduction(sch, sampler: Sampler, info: BlockInfo, row_loop, threads: int) -> None:
    """Move reduction `info` under `row_loop` (None: its own rows bound to thread blocks) and
    reduce each row across `threads` threads. Where the anchor's row loop does not take it,
    the reduction keeps a kernel of its own."""
    block = sch.get_block(info.name)
    if row_loop is not None:
        try:
            sch.compute_at(block, row_loop)
        except ScheduleError:
            row_loop = None
    if row_loop is None:
        loops = sch.get_loops(block)
        spatial = [loop for loop in loops if loop.name in info.spatial]
        if not spatial or [loop.name for loop in loops[:len(spatial)]] != list(info.spatial):
            # no rows (a reduction to one value) or loops in another order: the plain rule
            bind_threads(sch, info, threads)
            return
        bind_blocks(sch, spatial)
    else:
        # the per-row result lives in shared memory, where every thread of the row reads it
        if not info.writes_param:
            sch.set_scope(block, 0, "shared")
    _reduce_across_threads(sch, sampler, info, threads)


def _reduce_across_threads(sch, sampler: Sampler, info: BlockInfo, threads: int) -> None:
    """The loops left under the row (the reduce loops, fused into one) split so that thread t
    takes elements t, t + threads, ...: consecutive threads read consecutive elements."""
    block = sch.get_block(info.name)
    inner = [loop for loop in sch.get_loops(block) if not is_bound(sch, loop)]
    if not inner or not _only_reduce(sch, info.name, {loop.name for loop in inner}):
        raise SketchRefused(f"block {info.name!r}: spatial loops left under its row")
    loop = sch.fuse(*inner) if len(inner) > 1 else inner[0]
    try:
        extent = sampler.extent(loop)
    except SketchRefused:            # symbolic: the split guards the last threads
        extent = threads
    if extent < threads and threads > THREAD_CHOICES[0]:      # a warp at least, else fewer
        raise SketchRefused(f"block {info.name!r}: fewer elements per row than {threads} "
                            f"threads")
    outer, thread = sch.split(loop, factors=[None, threads])
    sch.reorder(thread, outer)
    sch.bind(thread, "threadIdx.x")


def _only_reduce(sch, name: str, loops: set[str]) -> bool:
    """Whether `loops` feed only the block's reduce iteration variables."""
    from sched.ir.functor import collect
    from sched.ir.nodes import Var
    from sched.schedule.state import find_block

    realize = find_block(sch.func, name)
    spatial = {v.name for iv, value in zip(realize.block.iter_vars, realize.iter_values)
               if iv.kind != "reduce" for v in collect(value, Var)}
    return not loops & spatial

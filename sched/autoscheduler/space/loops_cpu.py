"""The CPU rule for blocks that are not tiled (elementwise stages, reductions without reuse,
softmax and norm stages): the leading spatial loops fused and run in parallel, the innermost
spatial loop split by a sampled vector width and vectorized.

    before                      after
    for i, j:                   for i (parallel):
        B[i, j] = f(A[i, j])        for j0:
                                        for j1 (vectorized, 8 lanes): B[i, j0*8 + j1] = ...
"""

from __future__ import annotations

from sched.autoscheduler.space.analysis import BlockInfo
from sched.autoscheduler.space.sampler import Sampler
from sched.autoscheduler.space.tiling_cpu import vector_lanes


def parallel_vectorize(sch, sampler: Sampler, info: BlockInfo, nested: bool = False) -> None:
    """`nested`: the block runs under another block's loops (compute_at): vectorize only."""
    block = sch.get_block(info.name)
    loops = sch.get_loops(block)
    names = [loop.name for loop in loops]
    leading = []
    for loop in loops:
        if loop.name not in info.spatial:
            break
        leading.append(loop)
    innermost_spatial = bool(info.spatial) and names[-1] == info.spatial[-1]
    if innermost_spatial and len(leading) == len(loops):
        vector_loop = leading.pop()
    else:
        vector_loop = loops[-1] if innermost_spatial else None
    outer = None
    if vector_loop is not None:
        lanes = vector_lanes()
        width = sampler.choose([1, lanes // 2, lanes, 2 * lanes], [1, 1, 2, 1])
        outer, inner = sch.split(vector_loop, factors=[None, width])
        if width > 1:
            sch.vectorize(inner)
    if not nested:
        leading = leading or ([outer] if outer is not None else [])
        if leading:
            sch.parallel(sch.fuse(*leading) if len(leading) > 1 else leading[0])

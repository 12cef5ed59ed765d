"""The GPU rule for blocks that are not tiled: the leading spatial loops fused and split into
thread blocks of a sampled number of threads (the one number every such block of the function
shares: one kernel has one thread count per axis).

    before                      after (threads = 256)
    for i, j:                   for i_j_0 (blockIdx.x):
        B[i, j] = f(A[i, j])        for i_j_1 (threadIdx.x): B[...] = f(A[...])
"""

from __future__ import annotations

from sched.autoscheduler.space.analysis import BlockInfo

THREAD_CHOICES = [32, 64, 128, 256, 512, 1024]


def bind_threads(sch, info: BlockInfo, threads: int) -> None:
    block = sch.get_block(info.name)
    leading = []
    for loop in sch.get_loops(block):
        if loop.name not in info.spatial:
            break
        leading.append(loop)
    if not leading:
        return
    fused = sch.fuse(*leading) if len(leading) > 1 else leading[0]
    bx, tx = sch.split(fused, factors=[None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")

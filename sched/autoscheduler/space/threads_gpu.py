"""The GPU rule for blocks that are not tiled: the leading spatial loops fused and split into
thread blocks of a sampled number of threads (the one number every such block of the function
shares: one kernel has one thread count per axis). Loops of symbolic extent are not fused (the
fused index would divide by a symbol): the innermost is split into threads, the others are
bound to blockIdx.y and .z.

    before                      after (threads = 256)
    for i, j:                   for i_j_0 (blockIdx.x):
        B[i, j] = f(A[i, j])        for i_j_1 (threadIdx.x): B[...] = f(A[...])
"""

from __future__ import annotations

from sched.autoscheduler.space.analysis import BlockInfo
from sched.autoscheduler.space.sampler import SketchRefused

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
    if _all_constant(sch, leading):
        leading = [sch.fuse(*leading) if len(leading) > 1 else leading[0]]
    elif len(leading) > 3:
        # fusing loops of symbolic extent divides by a symbol: no longer affine, so every
        # later legality check would be conservative; three grid axes are what there is
        raise SketchRefused(f"{len(leading)} spatial loops of symbolic extent in {info.name}")
    bx, tx = sch.split(leading[-1], factors=[None, threads])
    sch.bind(tx, "threadIdx.x")
    for loop, axis in zip([bx, *reversed(leading[:-1])], "xyz"):
        sch.bind(loop, f"blockIdx.{axis}")


def _all_constant(sch, loops) -> bool:
    from sched.ir.nodes import IntImm
    from sched.schedule.state import find_loop

    return all(isinstance(find_loop(sch.func, loop.name, "bind").extent, IntImm)
               for loop in loops)

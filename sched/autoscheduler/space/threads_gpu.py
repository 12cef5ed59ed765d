"""The GPU rule for blocks that are not tiled: the leading spatial loops fused and split into
thread blocks of a sampled number of threads (the one number every such block of the function
shares: one kernel has one thread count per axis). Loops of symbolic extent are not fused (the
fused index would divide by a symbol): the innermost is split into threads, the others are
bound to blockIdx.y and .z (the one with the most blocks to x where another may pass y's limit,
grid_axes.py).

    before                      after (threads = 256)
    for i, j:                   for i_j_0 (blockIdx.x):
        B[i, j] = f(A[i, j])        for i_j_1 (threadIdx.x): B[...] = f(A[...])

A block whose iterations cannot be spread (a scan; an update that reads other elements of
what it writes; no leading spatial loop) runs serially on one thread, in a kernel of its own
(`run_in_one_thread`): slow, but every function gets a GPU schedule.
"""

from __future__ import annotations

from sched.autoscheduler.space.analysis import BlockInfo
from sched.autoscheduler.space.grid_axes import bind_grid
from sched.autoscheduler.space.sampler import SketchRefused
from sched.errors import ScheduleError

THREAD_CHOICES = [32, 64, 128, 256, 512, 1024]
THREAD_WEIGHTS = [1, 1, 2, 2, 1, 1]         # sampled more often: 128 and 256


def bind_threads(sch, info: BlockInfo, threads: int) -> None:
    block = sch.get_block(info.name)
    leading = []
    for loop in sch.get_loops(block):
        if loop.name not in info.spatial:
            break
        leading.append(loop)
    if not leading:
        run_in_one_thread(sch, info.name)
        return
    try:
        _spread(sch, leading, threads)
    except ScheduleError:
        # its iterations depend on each other (a scan, an update reading other elements):
        # serial, on one thread of a kernel of its own
        run_in_one_thread(sch, info.name)


def run_in_one_thread(sch, name: str) -> None:
    """Block `name`'s loops run serially on one GPU thread: its outermost loop split by 1,
    the unit loops bound to blockIdx.x and threadIdx.x (other extents than the other stages':
    a kernel of its own, lower/kernel_sequence.py). Always legal: a loop of one iteration
    carries nothing. A block under loops bound already, or with no loop, is left as it is."""
    loops = sch.get_loops(sch.get_block(name))
    if not loops or any(is_bound(sch, loop) for loop in loops):
        return
    block_loop, thread_loop, _ = sch.split(loops[0], factors=[1, 1, None])
    sch.bind(block_loop, "blockIdx.x")
    sch.bind(thread_loop, "threadIdx.x")


def is_bound(sch, loop) -> bool:
    from sched.schedule.state import find_loop

    return find_loop(sch.func, loop.name, "bind").kind == "thread_binding"


def _spread(sch, leading: list, threads: int) -> None:
    if all_constant(sch, leading):
        leading = [sch.fuse(*leading) if len(leading) > 1 else leading[0]]
    bx, tx = sch.split(leading[-1], factors=[None, threads])
    sch.bind(tx, "threadIdx.x")
    bind_blocks(sch, [*leading[:-1], bx])


def bind_blocks(sch, loops: list):
    """`loops` to blockIdx: fused into blockIdx.x where every extent is constant, else the
    innermost to x and the others to y and z (fusing loops of symbolic extent divides by a
    symbol: no longer affine, so every later legality check would be conservative; three
    grid axes are what there is; grid_axes.bind_grid puts a loop that may pass y's 65535
    blocks on x). Returns the innermost loop."""
    if all_constant(sch, loops):
        loops = [sch.fuse(*loops) if len(loops) > 1 else loops[0]]
    elif len(loops) > 3:
        raise SketchRefused(f"{len(loops)} spatial loops of symbolic extent")
    bind_grid(sch, loops)
    return loops[-1]


def all_constant(sch, loops) -> bool:
    from sched.ir.nodes import IntImm
    from sched.schedule.state import find_loop

    return all(isinstance(find_loop(sch.func, loop.name, "bind").extent, IntImm)
               for loop in loops)

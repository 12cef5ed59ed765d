"""Multi-level tiling for the GPU, the rule for blocks with a reduction and data reuse.

Each spatial loop is split in four (S0 blocks, S1 threads, S2, S3 the register tile), each
reduce loop in two (R0, R1), ordered S0 S1 R0 S2 R1 S3. The S0 loops are bound to
blockIdx.x, .y, .z and the S1 loops to threadIdx.x, .y, .z (the innermost spatial axis on x,
so neighbouring threads touch neighbouring elements; more than three axes: the outer ones
fused). Every global input is staged in shared
memory once per R0 iteration, fetched by all the block's threads together (a sampled number of
vector lanes each); the accumulator tile is "local" (registers), initialised and written back
by each thread, with elementwise consumers fused into the write-back. The innermost R0 loop is
software-pipelined over a sampled number of stages (1: not pipelined): the fetches of the next
`stages - 1` iterations run while the current tiles are multiplied, each shared tile
multi-buffered, the fetches asynchronous (cp.async) where the arch has them (sm_80+).

    before                      after (matmul)
    for i, j, k:                for i0 (blockIdx.y), j0 (blockIdx.x):
        C[i, j] += A*B              for i1 (threadIdx.y), j1 (threadIdx.x):
                                        C_local = 0
                                        for k0 (pipelined: tiles of k0 + 1 fetched now):
                                            A_shared, B_shared = tiles (all threads)
                                            for i2, j2, k1, i3, j3 (unrolled within a budget): ...
                                        C[...] = C_local
"""

from __future__ import annotations

import math

from sched.autoscheduler.space.analysis import BlockInfo
from sched.autoscheduler.space.grid_axes import bind_grid
from sched.autoscheduler.space.sampler import Sampler, SketchRefused
from sched.autoscheduler.space.unroll import GPU_BUDGETS, sample_budget, unroll_within
from sched.ir.functor import collect
from sched.ir.nodes import BlockRealize, IntImm
from sched.polyhedral.software_pipeline import pipeline_body

MAX_THREADS = 1024
MIN_THREADS = 32          # a warp: fewer threads leave most of each warp idle
# outputs each thread accumulates (S2 x S3): past the 255 registers a thread has, they spill;
# 2048 x 128 (1 MB of local memory) failed at launch on an H200
MAX_THREAD_TILE = 256
PIPELINE_STAGES = (1, 2, 3)       # 1: not pipelined; 3 stages was the best fp32 GEMM on an H200


def tile_gpu(sch, sampler: Sampler, info: BlockInfo, epilogues: tuple[str, ...],
             staged: tuple[str, ...], asynchronous: bool = True) -> None:
    """`staged`: the inputs (buffer names) to stage in shared memory; `asynchronous`: whether
    the arch copies into shared memory asynchronously (cp.async)."""
    block = sch.get_block(info.name)
    loops = {loop.name: loop for loop in sch.get_loops(block)}
    enough = min(MIN_THREADS, math.prod(sampler.extent(loops[name]) for name in info.spatial))

    def acceptable(decisions) -> bool:
        return (enough <= math.prod(factors[1] for factors in decisions) <= MAX_THREADS
                and math.prod(factors[2] * factors[3] for factors in decisions)
                <= MAX_THREAD_TILE)

    tiles = dict(zip(info.spatial, sampler.tiles([loops[name] for name in info.spatial], n=4,
                                                 max_innermost_factor=8, accept=acceptable)))
    threads = math.prod(int(factors[1]) for factors in tiles.values())
    if not enough <= threads <= MAX_THREADS:
        raise SketchRefused(f"{threads} threads per block (from {enough} to {MAX_THREADS})")
    values = math.prod(int(factors[2]) * int(factors[3]) for factors in tiles.values())
    if values > MAX_THREAD_TILE:
        raise SketchRefused(f"{values} values per thread (at most {MAX_THREAD_TILE})")
    spatial = [[], [], [], []]
    for name, factors in tiles.items():
        for level, part in enumerate(sch.split(loops[name], factors=factors)):
            spatial[level].append((part, int(factors[level])))
    reduce = [[], []]
    for name in info.reduce:
        factors = sampler.tile(loops[name], n=2, max_innermost_factor=32)
        for level, part in enumerate(sch.split(loops[name], factors=factors)):
            reduce[level].append((part, int(factors[level])))
    thread_extents = _axis_extents([extent for _, extent in spatial[1]])
    order = spatial[0] + spatial[1] + reduce[0] + spatial[2] + reduce[1] + spatial[3]
    sch.reorder(*[loop for loop, _ in order])
    blocks = [loop for loop, _ in spatial[0]]
    bind_grid(sch, blocks if len(blocks) <= 3 else [_fused(sch, blocks[:-2]), *blocks[-2:]])
    thread = _bind_threads(sch, [loop for loop, _ in spatial[1]])
    local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(local, thread)
    for name in epilogues:
        sch.reverse_compute_inline(sch.get_block(name))
    if reduce[0]:
        anchor = reduce[0][-1][0]
        for buffer in staged:
            _stage(sch, sampler, block, _read_index(sch, info.name, buffer), anchor,
                   thread_extents)
    budget = sample_budget(sampler, GPU_BUDGETS)
    if reduce[0]:
        init = sch.decompose_reduction(block, reduce[0][0][0])
        init_loops = sch.get_loops(init)[-len(info.spatial):]
        unroll_within(sch, [(loop, _constant_extent(sch, loop)) for loop in init_loops[::-1]],
                      budget)
    # the nest inside the threads: R0, S2, R1, S3; unrolled from the innermost
    unroll_within(sch, (spatial[2] + reduce[1] + spatial[3])[::-1], budget)
    if reduce[0] and staged:
        _pipeline(sch, sampler, reduce[0][-1][0], asynchronous)


def has_async_copies(workload) -> bool:
    """Whether the workload's CUDA arch (the one its kernels are built for when it names
    none) has asynchronous copies into shared memory (sm_80+)."""
    from sched.cuda.device import default_arch, parse_arch

    if workload.target != "cuda":
        return False
    return parse_arch(workload.arch or default_arch())[:2] >= (8, 0)


def _pipeline(sch, sampler: Sampler, loop, asynchronous: bool) -> None:
    """Pipeline `loop` (the innermost R0 loop, whose body is the shared-memory fetches, then
    the multiply) over a sampled number of stages: the fetches run `stages - 1` iterations
    ahead. Drawn for every candidate (the genome keeps its shape); a loop of fewer iterations
    than the stages, or a body of another shape, is left as it is. The annotations are checked
    against the dependences as every annotation is (a refused pipeline refuses the sample)."""
    from sched.schedule.state import find_loop

    # (not drawn for a default schedule: its checks cost tens of seconds on a strided
    # conv2d, audit helper-105, and no measurement shows what it gains)
    stages = sampler.choose(list(PIPELINE_STAGES), None if sampler.pipelines else
                            [1.0] + [0.0] * (len(PIPELINE_STAGES) - 1))
    found = find_loop(sch.func, loop.name, "annotate")
    _, body = pipeline_body(found)
    if stages == 1 or not isinstance(found.extent, IntImm) or found.extent.value < stages \
            or len(body) < 2 or not all(_writes_shared(s) for s in body[:-1]):
        return
    sch.annotate(loop, "software_pipeline_stage", [0] * (len(body) - 1) + [stages - 1])
    sch.annotate(loop, "software_pipeline_order", list(range(len(body))))
    if asynchronous:
        sch.annotate(loop, "software_pipeline_async_stages", [0])


def _writes_shared(stmt) -> bool:
    """Whether every block in `stmt` writes only shared memory (a cooperative fetch)."""
    blocks = [r.block for r in collect(stmt, BlockRealize)]
    return bool(blocks) and all(w.buffer.scope == "shared" for b in blocks for w in b.writes)


def _bind_threads(sch, loops):
    """Bind the loops to threadIdx.x (the innermost), .y, and .z (the others fused): one loop
    per axis keeps the indices affine (a fused loop's // and % make every later check slower).
    Returns the innermost bound loop. (The grid's loops: grid_axes.bind_grid.)"""
    if len(loops) > 3:
        loops = [_fused(sch, loops[:-2])] + loops[-2:]
    for loop, axis in zip(reversed(loops), "xyz"):
        sch.bind(loop, f"threadIdx.{axis}")
    return loops[-1]


def _fused(sch, loops):
    return sch.fuse(*loops) if len(loops) > 1 else loops[0]


def _read_index(sch, block: str, buffer: str) -> int:
    from sched.schedule.state import find_block

    reads = [r.buffer.name for r in find_block(sch.func, block).block.reads]
    return reads.index(buffer)


def _axis_extents(extents: list[int]) -> list[int]:
    """The extents of the z, y, x thread axes (as _bind_threads binds them), outermost first."""
    if len(extents) > 3:
        return [math.prod(extents[:-2])] + extents[-2:]
    return extents


def _stage(sch, sampler: Sampler, block, index: int, anchor, threads: list[int]) -> None:
    """Input `index` of `block` in shared memory at `anchor`, fetched by all the block's
    threads (`threads`: extents of its z, y, x axes) with a sampled number of lanes each."""
    cache = sch.cache_read(block, index, "shared")
    sch.compute_at(cache, anchor)
    own = sch.get_loops(cache)[len(sch.get_loops(block)) - _depth_below(sch, block, anchor):]
    if not own:
        return
    fused = _fused(sch, own)
    lanes = sampler.choose([1, 2, 4], [2, 1, 1])
    parts = sch.split(fused, factors=[None, *threads] + ([lanes] if lanes > 1 else []))
    if lanes > 1:
        sch.vectorize(parts.pop())
    for loop, axis in zip(reversed(parts[1:]), "xyz"):
        sch.bind(loop, f"threadIdx.{axis}")


def _depth_below(sch, block, anchor) -> int:
    """How many of `block`'s loops are inside `anchor`."""
    names = [loop.name for loop in sch.get_loops(block)]
    return len(names) - names.index(anchor.name) - 1


def _constant_extent(sch, loop) -> int:
    """The loop's extent, or 0 when it is not a constant (never unrolled)."""
    from sched.schedule.state import find_loop

    extent = find_loop(sch.func, loop.name, "unroll").extent
    return extent.value if isinstance(extent, IntImm) else 0

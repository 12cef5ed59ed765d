"""Multi-level tiling for the CPU ("SSRSRS"), the rule for blocks with a reduction and data
reuse (matmul, conv, batch matmul).

Each spatial loop is split in four (S0..S3), each reduce loop in two (R0, R1), ordered
S0 S1 R0 S2 R1 S3: S0 runs in parallel (fused), S3 is the register tile (its last loop
vectorized; its others, then R1, unrolled within a sampled budget: space/unroll.py), and with
`local` the accumulator tile lives in a "local" buffer written back once per S1 iteration, with
the initialisation split off (decompose_reduction) so that it vectorizes too. Elementwise
consumers (`epilogues`) are fused into the write-back. With `packed`, an operand read along
the vector loop (matmul's B) is copied into a contiguous panel at a sampled outer loop, as in
the hand schedule `cpu_matmul`: its rows are then one stride apart, not a row of B apart.

    before                          after (matmul, local=True)
    for i, j, k:                    for i0_j0 (parallel):
        C[i, j] += A[i, k]*B[k, j]      for i1, j1:
                                            C_local[...] = 0          (init, vectorized)
                                            for k0, i2, j2, k1, i3 (unrolled), j3 (vector):
                                                C_local[...] += A[...] * B[...]
                                            for ...: C[...] = C_local[...]
"""

from __future__ import annotations

from sched.autoscheduler.space.analysis import BlockInfo
from sched.autoscheduler.space.sampler import Sampler
from sched.autoscheduler.space.unroll import CPU_BUDGETS, sample_budget, unroll_within


def vector_lanes() -> int:
    from sched.c.isa import host_isa

    return host_isa().lanes("float32")


def tile_cpu(sch, sampler: Sampler, info: BlockInfo, local: bool, epilogues: tuple[str, ...],
             packed: tuple[str, ...] = (), compact: bool = False):
    """`packed`: inputs (buffer names, see BlockInfo.packable) copied into contiguous panels
    at a sampled loop outside the reduction. `compact`: "SSRS", the levels S2 and R1 left
    out: the register tile S3 right under the whole reduction, as in a BLAS micro-kernel
    and the hand schedule `cpu_matmul` (SSRSRS reaches that shape only when it draws 1 for
    every S2 and R1 factor at once)."""
    block = sch.get_block(info.name)
    loops = {loop.name: loop for loop in sch.get_loops(block)}
    lanes = vector_lanes()
    levels = (0, 1, 3) if compact else (0, 1, 2, 3)
    spatial = [[], [], [], []]
    for position, name in enumerate(info.spatial):
        innermost = 4 * lanes if position == len(info.spatial) - 1 else 16
        factors = sampler.tile(loops[name], n=len(levels), max_innermost_factor=innermost)
        for level, part, factor in zip(levels, sch.split(loops[name], factors=factors),
                                       factors):
            spatial[level].append((part, int(factor)))
    reduce = [[], []]
    for name in info.reduce:
        if compact:
            reduce[0].append((loops[name], sampler.extent(loops[name])))
            continue
        factors = sampler.tile(loops[name], n=2, max_innermost_factor=64)
        for level, part in enumerate(sch.split(loops[name], factors=factors)):
            reduce[level].append((part, int(factors[level])))
    order = spatial[0] + spatial[1] + reduce[0] + spatial[2] + reduce[1] + spatial[3]
    sch.reorder(*[loop for loop, _ in order])
    anchor = spatial[1][-1][0]
    writer = block
    if local:
        writer = sch.cache_write(block, 0, "local")
        sch.reverse_compute_at(writer, anchor)
    for name in epilogues:
        sch.reverse_compute_inline(sch.get_block(name))
    # a panel is packed at the last parallel loop or a loop of the S1 level: outside those
    # the S0 loops are fused (a fuse needs nothing between them)
    places = [spatial[0][-1][0]] + [loop for loop, _ in spatial[1]]
    panels = []
    for buffer in packed:
        panel = sch.cache_read(block, _read_index(sch, info.name, buffer), "global")
        sch.compute_at(panel, places[sampler.choose(list(range(len(places))))])
        panels.append(panel)
    init = sch.decompose_reduction(block, reduce[0][0][0]) if local and reduce[0] else None
    # loop kinds last: a step after a parallel or vector loop re-checks it
    outer = [loop for loop, _ in spatial[0]]
    sch.parallel(sch.fuse(*outer) if len(outer) > 1 else outer[0])
    for stage in (init, writer if local else None, *panels):
        if stage is not None:
            _vectorize_last(sch, stage)
    inner, inner_extent = spatial[3][-1]
    if inner_extent > 1:
        sch.vectorize(inner)
    budget = sample_budget(sampler, CPU_BUDGETS)
    vectors = max(1, inner_extent // lanes)
    unroll_within(sch, spatial[3][:-1][::-1] + reduce[1][::-1], budget, vectors)


def _read_index(sch, block: str, buffer: str) -> int:
    from sched.schedule.state import find_block

    return [r.buffer.name for r in find_block(sch.func, block).block.reads].index(buffer)


def _vectorize_last(sch, block) -> None:
    """Vectorize the innermost loop of a stage (init, write-back) when it is wider than 1."""
    from sched.ir.nodes import IntImm
    from sched.schedule.state import find_loop

    last = sch.get_loops(block)[-1]
    extent = find_loop(sch.func, last.name, "vectorize").extent
    if isinstance(extent, IntImm) and extent.value > 1:
        sch.vectorize(last)

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
With `vector_axis` (a spatial axis other than the last, offered when the last axis is no
multiple of the vector: conv2d's output channels beside 56 output columns), that axis carries
the vector lanes instead: its S3 level ends in a loop of one vector, the accumulator tile is laid
out with the axis innermost, and each input indexed by the axis is packed once with it
innermost (transform_layout (.., d, ..) -> (.., d // lanes, .., d % lanes)), as the hand
schedule `cpu_conv2d` does with the weights.

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
from sched.ir.nodes import IntImm, Var


def vector_lanes() -> int:
    from sched.c.isa import host_isa

    return host_isa().lanes("float32")


def tile_cpu(sch, sampler: Sampler, info: BlockInfo, local: bool, epilogues: tuple[str, ...],
             packed: tuple[str, ...] = (), compact: bool = False,
             vector_axis: int | None = None):
    """`packed`: inputs (buffer names, see BlockInfo.packable) copied into contiguous panels
    at a sampled loop outside the reduction. `compact`: "SSRS", the levels S2 and R1 left
    out: the register tile S3 right under the whole reduction, as in a BLAS micro-kernel
    and the hand schedule `cpu_matmul` (SSRSRS reaches that shape only when it draws 1 for
    every S2 and R1 factor at once). `vector_axis`: the position in `info.spatial` of the
    axis whose lanes are vectors (see `vector_axes`; needs `local`); None: the last."""
    block = sch.get_block(info.name)
    loops = {loop.name: loop for loop in sch.get_loops(block)}
    lanes = vector_lanes()
    levels = (0, 1, 3) if compact else (0, 1, 2, 3)
    last = len(info.spatial) - 1 if vector_axis is None else vector_axis
    spatial = [[], [], [], []]
    lane_loop = None
    for position, name in enumerate(info.spatial):
        loop, innermost = loops[name], (4 * lanes if position == last else 16)
        if position == vector_axis:
            loop, lane_loop = sch.split(loop, factors=[None, lanes])
            innermost = 4
        factors = sampler.tile(loop, n=len(levels), max_innermost_factor=innermost)
        for level, part, factor in zip(levels, sch.split(loop, factors=factors), factors):
            spatial[level].append((part, int(factor)))
    if lane_loop is not None:           # the axis's register-tile part, then its vector
        tile = spatial[3].pop(vector_axis)
        spatial[3] += [tile, (lane_loop, lanes)]
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
    if vector_axis is not None:         # the accumulator's layout is ours: a local cache
        _lanes_innermost(sch, block, info, vector_axis, lanes)
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


def vector_axes(func, info: BlockInfo, lanes: int) -> tuple[int, ...]:
    """Positions in `info.spatial` of the axes other than the last that can carry the vector
    lanes when the last cannot (its extent is no multiple of `lanes`): an extent that is a
    multiple of `lanes`, and every buffer the block accesses indexes the axis's variable, if
    at all, as one whole index (conv2d's output channel k in conv2d[n, k, p, q] and
    weight[k, c, r, s]), so a layout with that index innermost makes the lanes contiguous."""
    from sched.schedule.state import find_block

    block = find_block(func, info.name).block
    spatial = [iv for iv in block.iter_vars if iv.kind == "spatial"]
    if not info.spatial or len(spatial) != len(info.spatial) or len(block.writes) != 1:
        return ()
    extents = [iv.dom.extent.value if isinstance(iv.dom.extent, IntImm) else None
               for iv in spatial]
    if extents[-1] is None or extents[-1] % lanes == 0:
        return ()
    return tuple(position for position, (iv, extent) in enumerate(zip(spatial[:-1], extents))
                 if extent is not None and extent % lanes == 0 and
                 all(_whole_index(region, iv.var) is not False
                     for region in (*block.reads, *block.writes)))


def _whole_index(region, var: Var) -> int | None | bool:
    """The dimension of `region` indexed by exactly `var` (a point), None where no index uses
    `var`, False where one uses it in an expression (or more than one does)."""
    from sched.ir.functor import free_vars

    dims = [d for d, rng in enumerate(region.region) if var in free_vars(rng.min)]
    if not dims:
        return None
    (dim, *more) = dims
    rng = region.region[dim]
    if more or rng.min != var or not (isinstance(rng.extent, IntImm) and rng.extent.value == 1):
        return False
    return dim


def _lanes_innermost(sch, block, info: BlockInfo, vector_axis: int, lanes: int) -> None:
    """Lay out the accumulator (the block's write, a "local" cache) with the vector axis's
    index innermost, and pack each input indexed by it into a copy with that index split by
    `lanes`, its remainder innermost (the copy once per call, its outer loop in parallel)."""
    from sched.schedule.state import find_block

    realize = find_block(sch.func, info.name)
    var = [iv.var for iv in realize.block.iter_vars if iv.kind == "spatial"][vector_axis]
    (write,) = realize.block.writes
    dim = _whole_index(write, var)
    if dim is not None and dim != len(write.region) - 1:
        sch.transform_layout(block, ("write", 0), _moved_last(write.buffer, dim, None))
    packed = [(region.buffer, _whole_index(region, var)) for region in realize.block.reads
              if region.buffer.name != write.buffer.name]
    for buffer, dim in packed:
        if dim is None:
            continue
        copy = sch.cache_read(block, _read_index(sch, info.name, buffer.name), "global")
        # the copy's own write names the new buffer, whatever the reads' order now is
        sch.transform_layout(copy, ("write", 0), _moved_last(buffer, dim, lanes))
        sch.parallel(sch.get_loops(copy)[0])


def _moved_last(buffer, dim: int, lanes: int | None):
    """The index map of `buffer` moving index `dim` last (split by `lanes` first: its
    quotient stays)."""
    from sched.schedule.layout import IndexMap

    dtype = buffer.shape[0].dtype
    params = tuple(Var(f"i{d}", dtype) for d in range(buffer.ndim))
    moved = params[dim]
    if lanes is None:
        results = params[:dim] + params[dim + 1:] + (moved,)
    else:
        results = params[:dim] + (moved // IntImm(lanes, dtype),) + params[dim + 1:] + \
            (moved % IntImm(lanes, dtype),)
    return IndexMap(params, results)


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

"""rfactor for row reductions on the CPU: a reduction over the innermost loop (a row max, a row
sum) keeps a sampled number of partial results side by side, accumulated as vectors and combined
after, as the hand schedules `cpu_softmax` and `cpu_layer_norm` do. The partial block goes where
the reduction goes (under its consumer's row loop, or its own parallel row loop).

    before                      after (16 lanes, 32 partials)
    for i, k in grid(R, 1024):  for i (parallel):
        M[i] = max(M[i], X[i, k])   M_rf[i, 0:32] = -inf                        (vectorized)
                                    for k0 in range(32):
                                        for k1 (vectorized): M_rf[i, k1] = max(M_rf[i, k1], ..)
                                    for k1 in range(32): M[i] = max(M[i], M_rf[i, k1])
"""

from __future__ import annotations

from sched.autoscheduler.space.analysis import BlockInfo
from sched.autoscheduler.space.sampler import Sampler, SketchRefused
from sched.autoscheduler.space.tiling_cpu import vector_lanes

PARTIAL_VECTORS = (1, 2, 4)        # partial results: this many vectors of the host's lanes


def vector_rfactor(sch, sampler: Sampler, info: BlockInfo):
    """Split the block's innermost loop (a reduce loop of constant extent; the innermost
    reduce loops fused into one where they trail the nest, as a sum over two axes does) by a
    sampled number of partial results that divides it in two steps or more, and rfactor
    them. Returns the partial block; SketchRefused where the rule does not apply."""
    loops = sch.get_loops(sch.get_block(info.name))
    if not info.reduce or not loops or loops[-1].name != info.reduce[-1]:
        raise SketchRefused(f"block {info.name!r}: its innermost loop is no reduce loop")
    trailing = 1
    while trailing < len(loops) and loops[-trailing - 1].name in info.reduce:
        trailing += 1
    lanes = vector_lanes()
    extent = sampler.extent(loops[-1])
    whole = extent
    for outer in loops[-trailing:-1]:
        try:
            whole *= sampler.extent(outer)
        except SketchRefused:               # symbolic: the innermost loop alone
            whole = 0
    options = _options(whole, lanes) if trailing > 1 else []
    if options:
        loop, extent = sch.fuse(*loops[-trailing:]), whole     # the reduction in one loop
    else:
        loop, options = loops[-1], _options(extent, lanes)
    if lanes < 2 or not options:
        raise SketchRefused(f"block {info.name!r}: no vector of partials divides {extent}")
    partials = sampler.choose(options)
    _, lane = sch.split(loop, factors=[None, partials])
    return sch.rfactor(lane, 0)


def partials_fit(func, info: BlockInfo) -> bool:
    """Whether `vector_rfactor` can apply to block `info` of `func`: whole vectors of partials
    divide its innermost reduce extent, or the product of its reduce extents (constant)."""
    from sched.ir.nodes import IntImm
    from sched.schedule.state import find_block

    extents = [iv.dom.extent for iv in find_block(func, info.name).block.iter_vars
               if iv.kind == "reduce"]
    if not extents or not all(isinstance(e, IntImm) for e in extents):
        return False
    lanes = vector_lanes()
    whole = 1
    for extent in extents:
        whole *= extent.value
    return lanes >= 2 and bool(_options(extents[-1].value, lanes) or _options(whole, lanes))


def _options(extent: int, lanes: int) -> list[int]:
    """Numbers of partial results (whole vectors) that divide `extent` in two steps or more."""
    return [lanes * vectors for vectors in PARTIAL_VECTORS
            if extent % (lanes * vectors) == 0 and extent // (lanes * vectors) >= 2]


def place_partials(sch, partial, block: str, loop=None) -> None:
    """Compute the partial block at `loop` (where the reduction `block` now is; None: the
    reduction's own outermost loop), its partial axis innermost and vectorized, initialised
    before the reduction loop."""
    target = loop if loop is not None else sch.get_loops(sch.get_block(block))[0]
    sch.compute_at(partial, target)
    loops = sch.get_loops(partial)
    sch.reorder(loops[-1], loops[-2])
    loops = sch.get_loops(partial)
    sch.vectorize(loops[-1])
    sch.decompose_reduction(partial, loops[-2])

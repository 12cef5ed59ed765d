"""What the sketch rules need to know about a block: its axes, its reuse, its neighbours."""

from __future__ import annotations

import dataclasses

from sched.ir.functor import collect
from sched.ir.nodes import BlockRealize, Buffer, IntImm, PrimFunc, Select, Var
from sched.schedule.state import enclosing_loops, find_block


@dataclasses.dataclass(frozen=True)
class BlockInfo:
    name: str
    spatial: tuple[str, ...]        # loop names of the spatial axes, in loop order
    reduce: tuple[str, ...]         # loop names of the reduce axes, in loop order
    simple_loops: bool              # one loop per iter var, bound to it, nothing else inside
    writes_param: bool              # writes a parameter of the function (an output)
    has_reuse: bool                 # a read does not depend on every spatial axis
    reads: tuple[str, ...]          # storage names read
    elementwise: bool               # spatial only, one store, no reduction
    padding: bool                   # an if_then_else in its value (padding, boundaries)
    packable: tuple[str, ...] = ()  # inputs worth packing in panels (see _packable)

    @property
    def is_reduction(self) -> bool:
        return bool(self.reduce)


def block_info(func: PrimFunc, name: str) -> BlockInfo:
    realize = find_block(func, name)
    block = realize.block
    loops = enclosing_loops(func, realize)
    loops = loops[len(loops) - len(block.iter_vars):] if len(loops) >= len(block.iter_vars) \
        else []
    simple = bool(loops) and all(
        isinstance(value, Var) and value.name == loop.loop_var.name
        for value, loop in zip(realize.iter_values, loops)) \
        and len(collect(loops[0].body, BlockRealize)) == 1
    kinds = {iv.var.name: iv.kind for iv in block.iter_vars}
    spatial_vars = [iv.var for iv in block.iter_vars if iv.kind == "spatial"]
    spatial = tuple(loop.loop_var.name for loop, iv in zip(loops, block.iter_vars)
                    if iv.kind == "spatial") if simple else ()
    reduce = tuple(loop.loop_var.name for loop, iv in zip(loops, block.iter_vars)
                   if iv.kind == "reduce") if simple else ()
    params = {p.storage_name for p in func.params if isinstance(p, Buffer)}
    writes_param = any(r.buffer.storage_name in params for r in block.writes)
    reuse = False
    for region in block.reads:
        used = {v.name for rng in region.region for v in collect(rng.min, Var)}
        if any(v.name not in used for v in spatial_vars):
            reuse = True
    padding = bool(collect(block.body, Select))
    return BlockInfo(packable=_packable(block, spatial_vars),
        name=name, spatial=spatial, reduce=reduce, simple_loops=simple,
        writes_param=writes_param, has_reuse=reuse,
        reads=tuple(r.buffer.storage_name for r in block.reads),
        elementwise=all(k == "spatial" for k in kinds.values()) and block.init is None,
        padding=padding)


def _packable(block, spatial_vars) -> tuple[str, ...]:
    """Inputs read at plain iteration variables (B[vk, vj]) whose last index is the innermost
    spatial variable (the vectorized one) and that miss some spatial variable (so a panel is
    reused): matmul's B. A copy of such a panel is contiguous along the vector loop, where
    the buffer itself has a row stride between consecutive reduction steps."""
    if not spatial_vars:
        return ()
    written = {r.buffer.storage_name for r in block.writes}
    names = []
    for region in block.reads:
        indices = [rng.min for rng in region.region]
        points = all(isinstance(rng.extent, IntImm) and rng.extent.value == 1
                     for rng in region.region)
        if region.buffer.storage_name in written or not indices or not points or \
                not all(isinstance(i, Var) for i in indices):
            continue
        used = {i.name for i in indices}
        if indices[-1].name == spatial_vars[-1].name and \
                any(v.name not in used for v in spatial_vars):
            names.append(region.buffer.name)
    return tuple(names)


def leaf_blocks(func: PrimFunc) -> list[str]:
    """Names of the blocks with iteration variables and no block inside (root excluded), in
    program order."""
    names = []
    for realize in collect(func.body, BlockRealize):
        if realize.block.iter_vars and not collect(realize.block.body, BlockRealize):
            names.append(realize.block.name)
    return names

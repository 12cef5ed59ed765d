"""Warp buffers in TVM's 32x8 register layout, stored back as the 16x16 tiles they hold, for
the CUDA target.

A TVM mma schedule lays each "warp" buffer out with `transform_layout` and the index map
`(i, j) -> (i // 16, j // 16, *shared_16x16_to_ldmatrix_32x8_layout(i % 16, j % 16))`, so the
buffer is (..., 32, 8) and its mma intrinsics are the 32x8 forms
(sched/tensor_intrin/mma_layout.py). The CUDA code generator (sched/cuda/mma.py) knows a warp
buffer as 16x16 tiles whose per-lane placement it applies itself; this pass gives it those:
every warp buffer of shape (..., 32, 8) becomes (..., 16, 16), and every access
`W[..., r, c]` becomes `W[..., ldmatrix_32x8_to_shared_16x16_layout(r, c)]`; an int8 warp
buffer in TVM's 32x16 layout of 16x32 tiles (`shared_16x32_to_ldmatrix_32x16_layout`: the
m16n8k32 operands) becomes (..., 16, 32) alike.

Why this keeps every result: the inverse map is a bijection of [0, 32) x [0, 8) onto
[0, 16)^2, so distinct elements keep distinct places and each load still reads the place the
matching store wrote; only the storage order of the buffer changes, and warp buffers are
private registers that nothing outside the kernel sees. Inside an intrinsic's nest the
composed index `inverse(map(i, j))` is `(i, j)`; `simplify_indices` (isl, under the loops'
bounds) folds it so, and the code generator checks each nest's accesses are whole tiles
before it emits them.

CUDA target only (the C target runs the intrinsics' loops on the 32x8 buffers as written);
runs after the blocks are gone, before `layout_wmma_fragments`, which tiles the result.
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.functor import IRMutator
from sched.ir.nodes import WARP_SCOPE, Allocate, Buffer, BufferLoad, BufferStore, IntImm, PrimFunc

LANES, PER_LANE, TILE = 32, 8, 16


def shared_16x16_to_ldmatrix_32x8_layout(i, j):
    """(row, column) of element (i, j) of a 16x16 tile in its 32x8 warp block, TVM's map: the
    lane that holds it in an mma.m16n8k16 A operand or accumulator, and its place among the
    lane's 8 (takes ints or IR expressions)."""
    return 4 * (i % 8) + (j % 8) // 2, 4 * (j // 8) + (i // 8) * 2 + j % 2


def ldmatrix_32x8_to_shared_16x16_layout(row, column):
    """The inverse: (i, j) of the element at (row, column) of a 32x8 warp block."""
    return 8 * (column % 4 // 2) + row // 4, 8 * (column // 4) + (row % 4) * 2 + column % 2


def shared_16x32_to_ldmatrix_32x16_layout(i, j):
    """(row, column) of element (i, j) of a 16x32 int8 tile (an mma.m16n8k32 A operand, or B
    held n x k) in its 32x16 warp block, TVM's map: the lane that holds it and its place among
    the lane's 16."""
    return 4 * (i % 8) + (j % 16) // 4, 8 * (j // 16) + (i // 8) * 4 + j % 4


def ldmatrix_32x16_to_shared_16x32_layout(row, column):
    """The inverse: (i, j) of the element at (row, column) of a 32x16 int8 warp block."""
    return 8 * (column % 8 // 4) + row // 4, 16 * (column // 8) + 4 * (row % 4) + column % 4


# the warp blocks of TVM's layouts: (rows, columns, dtypes) -> (tile shape, inverse map)
_BLOCKS = {(LANES, PER_LANE): ((TILE, TILE), ldmatrix_32x8_to_shared_16x16_layout),
           (LANES, 2 * PER_LANE): ((TILE, 2 * TILE), ldmatrix_32x16_to_shared_16x32_layout)}


def restore_warp_tiles(func: PrimFunc) -> PrimFunc:
    """`func` with every warp buffer of shape (..., 32, 8) stored as (..., 16, 16) tiles (see
    the module doc). Requires: lowered past `convert_blocks_to_loops`, not flattened."""
    return dataclasses.replace(func, body=_Tiles().visit(func.body))


def _block_of(buffer: Buffer):
    """(tile shape, inverse map) of a warp buffer in one of TVM's layouts (a 32x8 block, or
    32x16 of int8), else None."""
    dims = buffer.shape[-2:]
    if buffer.scope != WARP_SCOPE or len(dims) != 2 or \
            not all(isinstance(d, IntImm) for d in dims):
        return None
    shape = (dims[0].value, dims[1].value)
    # 32 x 16 is also the shape of an int8 B operand held k x n in its own layout: TVM's
    # blocks are int8 and come with the tile indices in front (its index maps add them)
    if shape == (LANES, 2 * PER_LANE) and (buffer.dtype != "int8" or len(buffer.shape) < 3):
        return None
    return _BLOCKS.get(shape)


class _Tiles(IRMutator):
    def __init__(self) -> None:
        self.tiles: dict[Buffer, Buffer] = {}
        self.inverse: dict[Buffer, object] = {}       # the inverse map of each

    def visit_Allocate(self, node: Allocate):
        buffer = node.buffer
        block = _block_of(buffer)
        if block is None:
            return self.visit_children(node)
        (height, width), inverse = block
        *lead, rows, _ = buffer.shape
        tiled = dataclasses.replace(buffer, shape=(*lead, IntImm(height, rows.dtype),
                                                   IntImm(width, rows.dtype)))
        self.tiles[buffer], self.inverse[buffer] = tiled, inverse
        return Allocate(tiled, self.visit(node.body))

    def visit_BufferLoad(self, load: BufferLoad):
        load = self.visit_children(load)
        return BufferLoad(*self._tile(load.buffer, load.indices)) \
            if load.buffer in self.tiles else load

    def visit_BufferStore(self, store: BufferStore):
        store = self.visit_children(store)
        if store.buffer not in self.tiles:
            return store
        buffer, indices = self._tile(store.buffer, store.indices)
        return BufferStore(buffer, store.value, indices)

    def visit_Buffer(self, buffer: Buffer):
        # a view of a 32x8 block's storage under another Buffer would keep the old order
        if any(buffer.storage_name == t.storage_name and buffer != t for t in self.tiles):
            raise ScheduleError("build", f"warp buffer '{buffer.name}' is a view of the "
                                f"storage of a 32x8 warp buffer: only the mma intrinsics may "
                                f"access a warp buffer; access it through the buffer itself")
        return buffer

    def _tile(self, buffer: Buffer, indices: tuple):
        *lead, row, column = indices
        return self.tiles[buffer], (*lead, *self.inverse[buffer](row, column))

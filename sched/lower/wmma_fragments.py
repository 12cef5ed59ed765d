"""Tensor-core fragments on the CUDA target: each buffer of a fragment scope ("wmma.matrix_a",
"wmma.matrix_b", "wmma.accumulator") or of scope "warp" becomes an array of 16x16 tiles, tile
after tile, and is accessed only by the warp intrinsics that the CUDA code generator emits as
`nvcuda::wmma` calls (cuda/wmma.py) or as mma.sync/ldmatrix inline PTX (cuda/mma.py, which
gives each lane its part of every tile).

In block IR a fragment is private to a thread, as "local" is, and every thread runs the whole
tile operation of a wmma intrinsic (the C target does exactly that). On the GPU the 32 lanes of
a warp hold one fragment together and run each operation together. The two agree when every
lane runs every operation on its fragments with the same operands (sched/cuda/wmma.py checks
that where it emits the calls), and when nothing but those operations touches a fragment's
elements, whose places among the lanes CUDA leaves unspecified; this pass refuses the rest.

A warp intrinsic is the loop nest its implementation wrote with the annotation
`{"warp_intrinsic": "<call>"}` on its outer loop (sched/tensor_intrin/cuda.py); `tensorize`
puts it in place and the lowering keeps it. An access to a fragment outside such a nest is
refused with the advice to tensorize it.

The layout: `X[..., r, c]` of shape (..., R, C) becomes `X[..., r // 16, c // 16, r % 16,
c % 16]` of shape (..., R / 16, C / 16, 16, 16), so that after `flatten_buffers` the tile of
an operation starts at a multiple of 256, its index in the array of fragments, and its
element (i, j) is 16 * i + j past it (simplify_indices folds the divisions where the corner is
a multiple of 16, as tensorize leaves it). An int8 "warp" buffer has tiles of 16x32
(`tile_columns`: mma.sync m16n8k32's operands), each 512 elements. CUDA target only; runs
after the blocks are gone, before `flatten_buffers`.
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.functor import IRMutator
from sched.ir.nodes import (
    TENSOR_CORE_SCOPES,
    WARP_SCOPE,
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    IntImm,
    PrimFunc,
    const,
    warp_intrinsic,
)

TILE = 16
# the warp intrinsics of mma.sync on "warp" buffers (TVM's builtin names; sched/cuda/mma.py
# emits them): ldmatrix into an A or B operand, two m16n8k16 mma.sync, fill, store
PTX_LDMATRIX_A, PTX_LDMATRIX_B = "ptx_ldmatrix_a", "ptx_ldmatrix_b"
PTX_MMA, MMA_FILL, MMA_STORE = "ptx_mma_m16n8k16", "mma_fill", "mma_store"
MMA_CALLS = (PTX_LDMATRIX_A, PTX_LDMATRIX_B, PTX_MMA, MMA_FILL, MMA_STORE)


def tile_columns(buffer: Buffer) -> int:
    """The columns of a tile of `buffer`: 16, or 32 for an int8 "warp" buffer (the operand of
    mma.sync m16n8k32: 16 rows of 32 bytes, laid out in the lanes' registers as a 16x16 tile
    of 16-bit elements would be, cuda/mma.py)."""
    return 32 if buffer.scope == WARP_SCOPE and buffer.dtype == "int8" else TILE


def layout_wmma_fragments(func: PrimFunc) -> PrimFunc:
    """`func` with every fragment-scope buffer in tiles of 16x16 (see the module doc).

    Requires: lowered past `convert_blocks_to_loops` (fragments are allocated by `Allocate`),
    not flattened. Refuses (ScheduleError) a fragment whose last two dims are not multiples of
    16 and an access to a fragment outside a warp intrinsic's loop nest."""
    return dataclasses.replace(func, body=_Tiles().visit(func.body))


class _Tiles(IRMutator):
    def __init__(self) -> None:
        self.tiled: dict[Buffer, Buffer] = {}
        self.inside: str | None = None        # the warp intrinsic whose nest is being visited

    def visit_Allocate(self, node: Allocate):
        buffer = node.buffer
        if buffer.scope not in TENSOR_CORE_SCOPES:
            return self.visit_children(node)
        *lead, rows, cols = buffer.shape if len(buffer.shape) >= 2 else (None, None)
        width = tile_columns(buffer)
        if not all(isinstance(d, IntImm) and d.value % tile == 0
                   for d, tile in ((rows, TILE), (cols, width))):
            shape = ", ".join(d.script() for d in buffer.shape)
            hint = (" (an int8 mma operand has k along its rows: hold A as m x k and B as "
                    "n x k, TVM's mma_i8i8i32_trans_b; ldmatrix transposes 16-bit elements "
                    "only)" if width != TILE else "")
            raise ScheduleError("build", f"fragment '{buffer.name}' ({buffer.scope}) has the "
                                f"shape ({shape}): on the CUDA target a fragment buffer holds "
                                f"whole 16x{width} tiles, so its last two dims must be "
                                f"multiples of 16 and {width}{hint}; tile the loops that fill "
                                f"it so and tensorize them")
        dtype = rows.dtype
        tiled = dataclasses.replace(buffer, shape=(*lead, const(rows.value // TILE, dtype),
                                                   const(cols.value // width, dtype),
                                                   const(TILE, dtype), const(width, dtype)))
        self.tiled[buffer] = tiled
        return Allocate(tiled, self.visit(node.body))

    def visit_For(self, loop: For):
        call = warp_intrinsic(loop)
        if call is None or self.inside is not None:
            return self.visit_children(loop)
        self.inside = call
        try:
            return self.visit_children(loop)
        finally:
            self.inside = None

    def visit_BufferLoad(self, load: BufferLoad):
        load = self.visit_children(load)
        return BufferLoad(*self._tiled(load.buffer, load.indices)) \
            if load.buffer in self.tiled else load

    def visit_BufferStore(self, store: BufferStore):
        store = self.visit_children(store)
        if store.buffer not in self.tiled:
            return store
        buffer, indices = self._tiled(store.buffer, store.indices)
        return BufferStore(buffer, store.value, indices)

    def _tiled(self, buffer: Buffer, indices: tuple):
        if self.inside is None and buffer.scope == WARP_SCOPE:
            raise ScheduleError("build", f"buffer '{buffer.name}' (warp) is accessed element "
                                f"by element outside an mma intrinsic: on the GPU each lane "
                                f"of a warp holds its own part of a warp buffer's tiles, so "
                                f"only the mma intrinsics may touch them. Tensorize the "
                                f"loops that access it (sch.tensorize(loop, "
                                f"\"mma_ldmatrix_f16_a\"), \"mma_ldmatrix_f16_b\", "
                                f"\"mma_fill_16x16_f32\", \"mma_f16f16f32\", "
                                f"\"mma_store_16x16_f32_global\"...), or use scope "
                                f"\"local\"; the C target runs it as it is")
        if self.inside is None:
            raise ScheduleError("build", f"fragment '{buffer.name}' ({buffer.scope}) is "
                                f"accessed element by element outside a tensor-core "
                                f"intrinsic: on the GPU a warp holds a fragment's elements "
                                f"in an unspecified order, so only the wmma intrinsics may "
                                f"touch them. Tensorize the loops that access it "
                                f"(sch.tensorize(loop, \"wmma_load_16x16x16_f16_a\"), "
                                f"\"wmma_fill_16x16x16_f32\", \"wmma_sync_16x16x16_f16f16f32\", "
                                f"\"wmma_store_16x16x16_f32_global\"...), or use scope "
                                f"\"local\"; the C target runs it as it is")
        *lead, r, c = indices
        tile, width = const(TILE, r.dtype), const(tile_columns(buffer), c.dtype)
        return self.tiled[buffer], (*lead, r // tile, c // width, r % tile, c % width)

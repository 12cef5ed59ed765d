"""The operands of mma.sync as sched/cuda/mma.py emits them: the register layout each warp
tile needs ("a": an A operand m x k, or a B operand held n x k; "b": a B operand k x n, or an
A operand held k x m), found from the mma nests before the kernel is emitted so that the
ldmatrix loads, emitted first, lay each tile out for the mma that reads it; and the order in
which an operand's registers are given to mma.sync from a tile of either layout."""

from __future__ import annotations

from sched.cuda.wmma import _is, _Place, _place, product_nests
from sched.errors import ScheduleError
from sched.lower.wmma_fragments import PTX_MMA, tile_columns

# the registers of an operand tile, in the order mma.sync takes them, by the tile's layout:
# A (a0..a3: rows 0-7 / 8-15 of k 0-7, then of k 8-15) from an "a" tile as they are, from a
# "b" tile (A held k x m) swapped in the middle; B per n half (b0, b1: k 0-7, 8-15) from a "b"
# tile two by two, from an "a" tile (B held n x k, whose registers go by k half first) one
# apart
A_REGISTERS = {"a": (0, 1, 2, 3), "b": (0, 2, 1, 3)}
B_REGISTERS = {"b": ((0, 1), (2, 3)), "a": ((0, 2), (1, 3))}
# (operand type, accumulator dtype) -> k of the m16n8k<k> instruction
MMA_SHAPES = {("f16", "float32"): 16, ("bf16", "float32"): 16, ("f16", "float16"): 16,
               ("s8", "int32"): 32}
ROLE_NAMES = {"a": "an A operand (or a B operand held n x k)",
               "b": "a B operand (or an A operand held k x m)", "c": "an accumulator"}


def operand_places(call: str, loads, nest, context) -> tuple[_Place, _Place]:
    """The A and B loads of an mma nest (i, j, k) as places in (i, k, j) and (k, j, i)."""
    i, j, k = nest
    a_load, b_load = loads
    return (_place(call, a_load.buffer, a_load.indices[0], (i, k, j), context),
            _place(call, b_load.buffer, b_load.indices[0], (k, j, i), context))


def operand_layout(place: _Place, operand: str, context) -> str:
    """The register layout ("a" or "b") an mma operand's warp tile needs: its own where it
    is held as the mma reads it (A m x k, B k x n: stride 1 along the second dim of the
    place), the other operand's where it is held transposed (TVM's `_trans_a` / `_trans_b`
    mma: B held n x k is in its registers as an A tile of that shape would be, PTX ISA
    "Matrix Fragments for mma.m16n8k16"). The strides are checked where the tile is used."""
    width = tile_columns(place.buffer)
    transposed = _is(place.strides[0], 1, context) and _is(place.strides[1], width, context)
    return {"a": "b", "b": "a"}[operand] if transposed else operand


def operand_layouts(func) -> dict[str, str]:
    """The layouts the mma nests need of the warp buffers they read (`operand_layout`), by
    storage name: their ldmatrix loads, emitted before the mma, lay them out so (the loads
    copy a tile whatever its role; a buffer read in two layouts is refused where the second
    is emitted)."""
    layouts = {}
    for nest, operands in product_nests(func, PTX_MMA):
        try:
            places = operand_places(PTX_MMA, operands, nest, ())
        except ScheduleError:
            continue           # the call's own checks name the problem
        for place, operand in zip(places, ("a", "b")):
            layouts.setdefault(place.buffer.storage_name, operand_layout(place, operand, ()))
    return layouts

"""mma.sync for the CUDA target: "warp" buffers as per-lane registers, and each mma warp
intrinsic's loop nest (sched/lower/wmma_fragments.py) as inline PTX:

    ptx_ldmatrix_a/_b -> ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 (one 16x16 tile)
    ptx_mma_m16n8k16  -> two mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (n 0..7, 8..15)
                         (.f16 accumulators: m16n8k16 .f16.f16.f16.f16; int8 operands:
                         m16n8k32 .s32.s8.s8.s32)
    mma_fill          -> the lane's 8 accumulator elements set
    mma_store         -> the lane's 8 accumulator elements stored to memory

The per-lane layout (PTX ISA, "Matrix Fragments for mma.m16n8k16"; TVM's
`shared_16x16_to_ldmatrix_32x8_layout`): in a 16x16 tile of an A operand or an accumulator,
element (r, c) is held by lane 4 (r % 8) + (c % 8) / 2 as its element
4 (c / 8) + 2 (r / 8) + c % 2; a B operand (k, n) is held as its transpose (n, k) would be in
that layout's registers: lane 4 (n % 8) + (k % 8) / 2, register pair 2 (n / 8) + k / 8. An
operand tile is 4 32-bit registers per lane (two 16-bit elements each), an accumulator tile 8
floats. An operand tile held transposed (TVM's `mma_f16f16f32_trans_b`: B as n x k; `_trans_a`:
A as k x m) takes the other operand's layout, its registers given to mma.sync in the order
the operand takes them (`A_REGISTERS`, `B_REGISTERS`). The layout of a warp buffer is the
one the mma reading it needs (`operand_layouts`, found before the kernel is emitted): its
ldmatrix load lays it out so, whichever load intrinsic (a copy, in either orientation)
tensorized it. A warp buffer keeps one layout (A, B or accumulator), which is checked here;
every other access to a warp buffer is refused by the lowering. With that, ldmatrix,
mma.sync, fill and store agree on where each element is, and each nest computes what its loops
compute on the C target.

int8 operands (m16n8k32): a warp tile is 16 x 32 (lower/wmma_fragments.py `tile_columns`),
16 rows of 32 bytes, which is a 16x16 tile of 16-bit elements to ldmatrix and to the lanes'
registers (four int8 to a register: A's a0..a3 are rows 0-7 / 8-15 of k 0-15, then of k
16-31, as for fp16), so the same loads, register orders and layouts serve; ldmatrix cannot
transpose 8-bit elements, so an int8 operand must be held with k along its rows (A m x k, B
n x k: TVM's mma_i8i8i32_trans_b).

Checked as for wmma (cuda/wmma.py): the nest's loops are 16 x 16 (x 16, x 32 for int8) from
0 around one store of the description's form; warp tiles are whole tiles; a shared tile read
by ldmatrix is row-major or transposed (stride 1 along one loop) with its rows 16-byte aligned
(ldmatrix reads 8 x 16 bytes per matrix); a stored tile is row-major; every lane of a warp
runs the call with the same operands (`wmma.check_warp_uniform`).
"""

from __future__ import annotations

import numpy as np

from sched.cuda.mma_operands import (
    A_REGISTERS,
    B_REGISTERS,
    MMA_SHAPES,
    ROLE_NAMES,
    operand_layout,
    operand_places,
)
from sched.cuda.wmma import (
    WmmaCall,
    _is,
    _Place,
    _product_operands,
    _refuse,
)
from sched.errors import ScheduleError
from sched.ir.dtype import bits
from sched.ir.nodes import Buffer, BufferLoad, FloatImm, IntImm
from sched.lower.simplify_indices import simplify_index
from sched.lower.wmma_fragments import (
    MMA_CALLS,
    MMA_FILL,
    MMA_STORE,
    PTX_LDMATRIX_A,
    PTX_LDMATRIX_B,
    PTX_MMA,
    TILE,
    tile_columns,
)

_OPERAND_TYPES = {"float16": "f16", "bfloat16": "bf16", "int8": "s8"}
_REGISTERS = {"a": 4, "b": 4}                  # per lane per 16x16 operand tile
# per lane per 16x16 accumulator tile: 8 floats, or 8 halves two to a 32-bit register
_ACCUMULATOR_REGISTERS = {"float32": 8, "int32": 8, "float16": 4}
# the lane's index in its warp (the block's threads, x fastest, fill whole warps)
_LANE = "(int)((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u)"
# the 32-bit shared-memory address of a pointer into shared memory: the compiler's own
# conversion, not inline PTX (which kept it from folding the conversions into 32-bit offsets
# from the array's base: 4 integer instructions per ldmatrix in the main loop)
_SHARED_ADDRESS = "sched_address = (unsigned)__cvta_generic_to_shared({pointer});"


def is_mma_call(call: str) -> bool:
    return call in MMA_CALLS


def warp_declaration(buffer: Buffer, name: str, elements: int) -> str:
    """The per-lane registers of a "warp" buffer of `elements` elements (whole 16x16 tiles):
    `uint32_t name[4 * tiles]` for fp16/bf16 operands and fp16 accumulators (two halves to a
    register), `float name[8 * tiles]` for float32 accumulators."""
    tiles = elements // (TILE * tile_columns(buffer))
    if buffer.dtype in _OPERAND_TYPES:
        return (f"uint32_t {name}[{4 * tiles}];  // warp: {tiles} {buffer.dtype} 16x16 "
                f"tile(s), 4 registers per lane each")
    if buffer.dtype in ("float32", "int32"):
        kind = "float" if buffer.dtype == "float32" else "int"
        return (f"{kind} {name}[{8 * tiles}];  // warp: {tiles} {buffer.dtype} 16x16 tile(s), "
                f"8 per lane")
    raise ScheduleError("build", f"warp buffer '{buffer.name}' holds {buffer.dtype}: the mma "
                        f"intrinsics take float16, bfloat16 or int8 operands and float32, "
                        f"float16 or int32 accumulators")


class MmaCall(WmmaCall):
    """The inline PTX for an mma warp intrinsic's nest (module doc), with the emitter's names
    and expressions."""

    EXTENTS = (TILE, 2 * TILE)        # an int8 operand's k runs 0..31

    def depth(self) -> int:
        return 3 if self.call == PTX_MMA else 2

    def _check_extents(self, extents: tuple[int, ...]) -> None:
        """The nest's loops run 0..extent-1 for `extents`, outermost first."""
        loops = self.extents
        if tuple(loops) != extents:
            raise _refuse(self.call, f"its loops run {' x '.join(map(str, loops))}, not "
                          f"{' x '.join(map(str, extents))}")

    def emit(self) -> str:
        handler = {PTX_LDMATRIX_A: self._ldmatrix, PTX_LDMATRIX_B: self._ldmatrix,
                   PTX_MMA: self._mma_sync, MMA_FILL: self._fill_lanes,
                   MMA_STORE: self._store_lanes}
        return handler[self.call]()

    def _tile(self, place: _Place, strides: tuple[int, ...], role: str) -> str:
        """The index of the tile's first register in the warp buffer, its role (the layout of
        its registers: "a", "b" or "c") checked."""
        buffer = place.buffer
        if buffer.scope != "warp":
            raise _refuse(self.call, f"'{buffer.name}' is in scope {buffer.scope}, not warp")
        width = tile_columns(buffer)
        if not all(_is(s, want, self.context) for s, want in zip(place.strides, strides)) \
                or not _is(place.base % (TILE * width), 0, self.context):
            raise _refuse(self.call, f"warp buffer '{buffer.name}' is not accessed as one "
                          f"whole 16x{width} tile")
        allowed = _ACCUMULATOR_REGISTERS if role == "c" else _OPERAND_TYPES
        if buffer.dtype not in allowed:
            raise _refuse(self.call, f"warp buffer '{buffer.name}' holds {buffer.dtype}; as "
                          f"{ROLE_NAMES[role]} it must hold one of {', '.join(allowed)}")
        roles = self.emitter.warp_roles
        name = buffer.storage_name
        if roles.setdefault(name, (role, self.call))[0] != role:
            first, call = roles[name]
            raise ScheduleError("build", f"warp buffer '{buffer.name}' is used as "
                                f"{ROLE_NAMES[first]} (by {call}) and as {ROLE_NAMES[role]} "
                                f"(by {self.call}): on the GPU a lane holds the elements of "
                                f"an A operand, a B operand and an accumulator in different "
                                f"places, so a warp buffer must keep one role: give each mma "
                                f"operand a warp buffer of its own")
        tile = simplify_index(place.base // (TILE * width), self.context)
        registers = _ACCUMULATOR_REGISTERS[buffer.dtype] if role == "c" else _REGISTERS[role]
        return self._sum(self.emitter.expr(tile), registers)

    @staticmethod
    def _sum(tile: str, registers: int) -> str:
        return "0" if tile == "0" else f"{registers} * ({tile})"

    def _ldmatrix(self) -> str:
        target, source = self._copy_operands()
        # the layout the mma reading the tile needs (an operand held transposed takes the
        # other operand's: operand_layouts), else (no mma reads it) the one the call names
        role = self.emitter.mma_layouts.get(target.buffer.storage_name) or \
            ("a" if self.call == PTX_LDMATRIX_A else "b")
        width = tile_columns(target.buffer)
        self._check_extents((TILE, width))
        first = self._tile(target, (width, 1), role)
        if source.buffer.scope != "shared":
            raise _refuse(self.call, f"ldmatrix reads shared memory, and '{source.buffer.name}' "
                          f"is {source.buffer.scope}: stage the tile in shared memory "
                          f"(sch.cache_read(block, index, \"shared\")) and load from there")
        row_stride, column_stride = source.strides
        if _is(column_stride, 1, self.context):
            transposed, ldm = False, row_stride       # W[i, j] = S[base + ldm * i + j]
        elif _is(row_stride, 1, self.context):
            transposed, ldm = True, column_stride     # W[i, j] = S[base + i + ldm * j]
        else:
            raise _refuse(self.call, f"the tile of '{source.buffer.name}' is neither row- nor "
                          f"column-contiguous (strides {row_stride.script()}, "
                          f"{column_stride.script()})")
        size = bits(source.buffer.dtype) // 8
        per_16_bytes = 16 // size
        if not _is(ldm % per_16_bytes, 0, self.context) \
                or not _is(source.base % per_16_bytes, 0, self.context):
            raise _refuse(self.call, f"the rows of the tile of '{source.buffer.name}' (start "
                          f"{source.base.script()}, {ldm.script()} elements apart) are not "
                          f"16-byte aligned, as ldmatrix reads them: pad the shared tile's "
                          f"rows to a multiple of {per_16_bytes} elements", hint="")
        trans = transposed != (role == "b")
        if trans and size == 1:
            raise _refuse(self.call, f"ldmatrix transposes 16-bit elements, not the int8 "
                          f"tile of '{source.buffer.name}': hold an int8 A as m x k and B as "
                          f"n x k (TVM's mma_i8i8i32_trans_b), each row along k", hint="")
        # each lane gives the address of one 8-element row of one of the four 8x8 matrices
        # (the four 8x8 matrices of 16-bit elements: 16 bytes of a row each)
        if transposed:
            row, column = "8 * (sched_lane >> 4) + (sched_lane & 7)", "8 * ((sched_lane >> 3) & 1)"
        else:
            row, column = "(sched_lane & 15)", f"{per_16_bytes} * (sched_lane >> 4)"
        trans = ".trans" if trans else ""
        name = self.emitter.name(source.buffer.storage_name)
        pointer = (f"{name} + {self.emitter.operand(source.base, 13)} + "
                   f"{self.emitter.operand(ldm, 13)} * ({row}) + {column}")
        registers = self.emitter.name(target.buffer.storage_name)
        outputs = ", ".join(f'"=r"({registers}[{first} + {q}])' for q in range(4))
        return "\n".join([
            "{  // ldmatrix: a 16x16 tile of 16-bit elements, 4 registers per lane",
            f"    const int sched_lane = {_LANE};",
            "    unsigned sched_address;",
            "    " + _SHARED_ADDRESS.format(pointer=pointer),
            f'    asm volatile("ldmatrix.sync.aligned.m8n8.x4{trans}.shared.b16 '
            f'{{%0, %1, %2, %3}}, [%4];\\n" : {outputs} : "r"(sched_address));',
            "}"])

    def _mma_sync(self) -> str:
        # C[i, j] = C[i, j] + float(A[i, k]) * float(B[k, j])
        store, value = self.store, self.store.value
        operands = _product_operands(value)
        if operands is None or not isinstance(value.a, BufferLoad) \
                or value.a.buffer != store.buffer or value.a.indices != store.indices:
            raise _refuse(self.call, "the store is not C = C + A * B")
        a_load, b_load = operands
        if a_load.buffer.dtype != b_load.buffer.dtype:
            raise _refuse(self.call, "A and B have different dtypes")
        i, j, k = self.nest
        kind = _OPERAND_TYPES.get(a_load.buffer.dtype)
        accumulator = store.buffer.dtype
        if (kind, accumulator) not in MMA_SHAPES:
            raise _refuse(self.call, f"mma.sync takes no {a_load.buffer.dtype} operands with a "
                          f"{accumulator} accumulator (f16/bf16 into float32, f16 into "
                          f"float16, s8 into int32)")
        depth = MMA_SHAPES[(kind, accumulator)]
        self._check_extents((TILE, TILE, depth))
        c = self._tile(self._access(store.buffer, store.indices[0], (i, j, k)), (16, 1, 0), "c")
        a_place, b_place = operand_places(self.call, (a_load, b_load), self.nest, self.context)
        a_role, b_role = (operand_layout(place, operand, self.context)
                          for place, operand in ((a_place, "a"), (b_place, "b")))
        # a tile held transposed is read along the other dim (its strides swapped)
        a = self._tile(a_place, (depth, 1, 0) if a_role == "a" else (1, depth, 0), a_role)
        b = self._tile(b_place, (16, 1, 0) if b_role == "b" else (1, depth, 0), b_role)
        cn, an, bn = (self.emitter.name(x.buffer.storage_name) for x in (store, a_load, b_load))
        lines = [f"{{  // C (16x16) += A (16x{depth}) * B ({depth}x16): two m16n8k{depth}, "
                 f"for n 0..7 and 8..15"]
        for half in (0, 1):
            operands = [*(f'"r"({an}[{a} + {q}])' for q in A_REGISTERS[a_role]),
                        *(f'"r"({bn}[{b} + {q}])' for q in B_REGISTERS[b_role][half])]
            if accumulator in ("float32", "int32"):
                out, constraint = ("f32", "f") if accumulator == "float32" else ("s32", "r")
                d = [f"{cn}[{c} + {4 * half + r}]" for r in range(4)]
                outputs = ", ".join(f'"={constraint}"({x})' for x in d)
                inputs = ", ".join([*operands, *(f'"{constraint}"({x})' for x in d)])
                lines.append(f'    asm volatile("mma.sync.aligned.m16n8k{depth}.row.col.{out}.'
                             f'{kind}.{kind}.{out} {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, '
                             f'{{%8, %9}}, {{%10, %11, %12, %13}};\\n" : {outputs} : '
                             f'{inputs});')
                continue
            # fp16: rows groupID and +8 of the half, two columns to a register
            d = [f"{cn}[{c} + {2 * half + r}]" for r in range(2)]
            outputs = ", ".join(f'"=r"({x})' for x in d)
            inputs = ", ".join([*operands, *(f'"r"({x})' for x in d)])
            lines.append(f'    asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 '
                         f'{{%0, %1}}, {{%2, %3, %4, %5}}, {{%6, %7}}, {{%8, %9}};\\n" : '
                         f'{outputs} : {inputs});')
        lines.append("}")
        return "\n".join(lines)

    def _fill_lanes(self) -> str:
        value = self.store.value
        if not isinstance(value, (FloatImm, IntImm)):
            raise _refuse(self.call, "it fills an accumulator with a constant")
        self._check_extents((TILE, TILE))
        target = self._access(self.store.buffer, self.store.indices[0], tuple(self.nest))
        first = self._tile(target, (16, 1), "c")
        name = self.emitter.name(target.buffer.storage_name)
        if target.buffer.dtype == "float16":      # two halves to a register
            bits = int(np.array(float(value.value), np.float16).view(np.uint16))
            return (f"for (int sched_r = 0; sched_r < 4; ++sched_r) "
                    f"{name}[{first} + sched_r] = 0x{bits:04x}{bits:04x}u;  // the lane's 8 "
                    f"halves, {float(value.value)!r}")
        constant = self.emitter.expr(
            IntImm(int(value.value), "int32") if target.buffer.dtype == "int32"
            else FloatImm(float(value.value), "float32"))
        return (f"for (int sched_r = 0; sched_r < 8; ++sched_r) "
                f"{name}[{first} + sched_r] = {constant};  // the lane's 8 elements")

    def _store_lanes(self) -> str:
        self._check_extents((TILE, TILE))
        target, source = self._copy_operands()
        first = self._tile(source, (16, 1), "c")
        if target.buffer.scope not in ("global", "shared"):
            raise _refuse(self.call, "it stores an accumulator to global or shared memory")
        ldm, unit = target.strides
        if not _is(unit, 1, self.context):
            raise _refuse(self.call, f"the tile of '{target.buffer.name}' is not row-major "
                          f"(consecutive columns {unit.script()} elements apart)")
        name = self.emitter.name(target.buffer.storage_name)
        registers = self.emitter.name(source.buffer.storage_name)
        stride = self.emitter.operand(ldm, 13)
        lines = ["{  // the lane's 8 accumulator elements: rows lane/4 (+8), columns "
                 "2 (lane%4) (+1, +8)",
                 f"    const int sched_lane = {_LANE};",
                 f"    {self.emitter.STORAGE_TYPES[target.buffer.dtype]}* sched_tile = {name} + "
                 f"{self.emitter.operand(target.base, 13)} + {stride} * (sched_lane >> 2) + "
                 f"2 * (sched_lane & 3);"]
        if source.buffer.dtype != target.buffer.dtype:
            raise _refuse(self.call, f"it stores a {source.buffer.dtype} accumulator to a "
                          f"buffer of its type, not {target.buffer.dtype}")
        for r in range(8):
            row, column = 8 * ((r % 4) // 2), 8 * (r // 4) + r % 2
            offset = f"{stride} * {row} + {column}" if row else f"{column}"
            value = f"{registers}[{first} + {r}]"
            if source.buffer.dtype == "float16":     # element r: half r % 2 of register r / 2
                value = (f"__ushort_as_half((unsigned short)({registers}[{first} + {r // 2}]"
                         f"{' >> 16' if r % 2 else ''}))")
            lines.append(f"    sched_tile[{offset}] = {value};")
        lines.append("}")
        return "\n".join(lines)

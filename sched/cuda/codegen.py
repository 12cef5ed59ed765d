"""CUDA C code generation: lowered loop IR of a GPU kernel -> one `extern "C" __global__`
kernel, readable, for NVRTC or nvcc.

CUDA C is the C target's language plus qualifiers, so the emitter extends the C one
(sched/c/codegen.py) where they differ:
- loops bound to blockIdx/threadIdx become index variables
  (`const int32_t i_1 = (int32_t)threadIdx.x;`): lower/gpu_threads.py has made one loop per
  axis and checked that the launch covers them exactly;
- allocations: "shared" -> `__shared__` arrays (carved from dynamic shared memory when they
  need more than 48 KB together), "local" -> arrays in registers, "global" -> an error;
- `Barrier` -> `__syncthreads()`, unrolled loops -> `#pragma unroll`; a vectorized copy
  loop -> float4 moves where both sides are contiguous and 16-byte aligned (the kernel then
  checks at each call that those arguments are aligned), other vectorized loops are unrolled;
- `T.shfl_down_sync(value, offset, lanes, width)` (cross-thread reductions) ->
  `__shfl_down_sync` with the mask of the warp's first `lanes` lanes (every one of them makes
  the call) in segments of `width` lanes; in a warp of fewer than 32 lanes and one segment,
  `__shfl_sync` from `sched_lane_below`, so no lane reads one outside the mask (undefined);
- float16/bfloat16 are `__half`/`__nv_bfloat16` in memory (cuda_fp16.h, cuda_bf16.h),
  computed in float; pointers are `__restrict__`; helpers are `__device__` functions.
NVRTC has no standard headers: the prelude declares the fixed-width integer types for it.
"""

from __future__ import annotations

import math

from sched.c import dtypes
from sched.c.codegen import _CEmitter
from sched.c.names import function_identifier
from sched.cuda import mma, mma_operands, wmma
from sched.cuda.alignment import ParamAlignments
from sched.cuda.async_copy import AsyncCopyEmitter
from sched.cuda.bit_intrinsics import CudaBitCalls
from sched.errors import ScheduleError
from sched.ir.functor import collect, substitute
from sched.ir.nodes import (
    FRAGMENT_SCOPES,
    WARP_SCOPE,
    Allocate,
    Barrier,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    FloatImm,
    For,
    IntImm,
    PrimFunc,
    Var,
)
from sched.ir.simplify import simplify
from sched.lower.launch import LaunchConfig
from sched.lower.simplify_indices import simplify_index
from sched.lower.wmma_fragments import warp_intrinsic

STATIC_SHARED_LIMIT = 48 * 1024

_PRELUDE = """#ifdef __CUDACC_RTC__  // NVRTC has no standard headers
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#define INT64_C(x) x##LL
#define UINT64_C(x) x##ULL
#define INT32_MIN (-2147483647 - 1)
#define INT64_MIN (-9223372036854775807LL - 1)
#else
#include <stdint.h>
#endif
// the lane a shuffle down by `offset` reads among the warp's first `count` lanes: the lane
// itself where that one is past them (a shuffle reads only lanes of its mask; the sum that
// follows skips the value)
__device__ __forceinline__ int sched_lane_below(int offset, int count) {
    int lane = (int)((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31u);
    return lane + offset < count ? lane + offset : lane;
}"""

# what a value of each dtype is shuffled as (16-bit floats are computed in float; narrow ints
# are promoted to int, which __shfl_down_sync has an overload for)
_SHUFFLE_TYPES = {"float16": "float", "bfloat16": "float", "int8": "int", "int16": "int",
                  "uint8": "unsigned int", "uint16": "unsigned int"}
_STORAGE = {**dtypes.STORAGE_TYPES, "float16": "__half", "bfloat16": "__nv_bfloat16"}
_TO_FLOAT = {"float16": "__half2float", "bfloat16": "__bfloat162float"}
_FROM_FLOAT = {"float16": "__float2half_rn", "bfloat16": "__float2bfloat16_rn"}
_PAIRS = {"float16": "__half2", "bfloat16": "__nv_bfloat162"}     # 4-byte vector moves


def _rounded(dtype: str, source: str, value: str) -> str:
    """`value` (C text of a `source` value) rounded once to the 16-bit float `dtype`: a
    float64 to float16 directly (through float32 it rounds twice: 1.0009765625000002 became
    1.0, not 1.0009765625); bfloat16 from float32, as torch and the C target round it."""
    if dtype == "float16" and source == "float64":
        return f"__double2half({value})"
    return f"{_FROM_FLOAT[dtype]}({value if source == 'float32' else f'(float)({value})'})"


def element_bytes(dtype: str) -> int:
    return 1 if dtype in ("bool", "int8", "uint8") else \
        int("".join(c for c in dtype if c.isdigit())) // 8


def shared_bytes(func: PrimFunc) -> int:
    """Bytes of shared memory the kernel allocates (each buffer aligned to 16 bytes)."""
    total, wmma_tiles = 0, wmma.wmma_shared_buffers(func)
    for allocate in collect(func.body, Allocate):
        if allocate.buffer.scope == "shared":
            total += _aligned(_size(allocate) * element_bytes(allocate.buffer.dtype))
            total += 16 if allocate.buffer.name in wmma_tiles else 0   # to start 32-aligned
    return total


def _aligned(size: int) -> int:
    return (size + 15) // 16 * 16


def _size(allocate: Allocate) -> int:
    buffer = allocate.buffer
    extents = [dim.value if isinstance(dim, IntImm) else None for dim in buffer.shape]
    if None in extents:
        raise ScheduleError("build", f"{buffer.scope} buffer '{buffer.name}' has the symbolic "
                            f"shape ({', '.join(d.script() for d in buffer.shape)}); on the GPU "
                            f"shared and local buffers need constant sizes: the lowering "
                            f"shrinks a buffer to the box one iteration of the loops around "
                            f"its allocation touches, which needs a box of constant size at an "
                            f"offset those loops determine. Tile the loops that use it by "
                            f"constants; where they are tiled, a window whose elements also "
                            f"belong to the next tile (a halo) under a symbolic size is a case "
                            f"it cannot shrink yet")
    return math.prod(extents)


def generate_cuda(lowered: PrimFunc, launch: LaunchConfig
                  ) -> tuple[str, str, ParamAlignments]:
    """(CUDA source, kernel name, the buffer parameters that must be aligned beyond their
    element size: sched/cuda/alignment.py) of `lowered`, the output of
    `sched.lower.lower(func, target="cuda")`, launched with `launch`."""
    wmma.check_warp_uniform(lowered, launch)
    emitter = _CudaEmitter(lowered, launch)
    return emitter.emit(), function_identifier(lowered.name), emitter.aligned_params


class _CudaEmitter(AsyncCopyEmitter, CudaBitCalls, _CEmitter):
    RESTRICT = "__restrict__"
    STORAGE_TYPES = _STORAGE
    TAKEN = ("sched_shared", "sched_dst")

    def __init__(self, func: PrimFunc, launch: LaunchConfig) -> None:
        super().__init__(func)
        self.launch = launch
        self.dynamic = shared_bytes(func) > STATIC_SHARED_LIMIT
        self.shared_offset = 0
        self.aligned_params = ParamAlignments()   # parameters moved wider than an element
        self.vector_moved: dict[str, int] = {}    # shared/local arrays -> bytes a move needs
        self.loops: list = []                     # (variable, min, extent) of enclosing loops
        self.wmma_shared = wmma.wmma_shared_buffers(func)   # shared tiles of wmma calls
        self.wmma_column_major = wmma.transposed_b_fragments(func)    # `_trans` B operands
        self.warp_roles: dict[str, tuple[str, str]] = {}     # warp buffer -> role (cuda/mma.py)
        self.mma_layouts = mma_operands.operand_layouts(func)   # each mma operand's layout

    def emit(self) -> str:
        includes, helpers, kernel = self.parts()
        return "\n".join([*self.header(includes), *helpers, *kernel, ""])

    def header(self, includes: list[str]) -> list[str]:
        return [f"// Generated by sched from PrimFunc '{self.func.name}': grid "
                f"({', '.join(g.script() for g in self.launch.grid)}), block "
                f"{self.launch.block}.", *includes, _PRELUDE, ""]

    def parts(self) -> tuple[list[str], list[str], list[str]]:
        """(#include lines, helper functions, the kernel's lines): what a source of several
        kernels (sched/cuda/kernel_sequence.py) puts together."""
        self.stmt(self.func.body)
        dtypes_used = {b.dtype for b in self.func.buffers} | {
            a.buffer.dtype for a in collect(self.func.body, Allocate)} | {
            p.dtype for p in self.func.params if isinstance(p, Var)} | {    # 16-bit scalars
            a.dtype for c in collect(self.func.body, Call) for a in (c, *c.args)}  # bit casts
        includes = []
        if "float16" in dtypes_used:
            includes.append("#include <cuda_fp16.h>")
        if "bfloat16" in dtypes_used:
            includes.append("#include <cuda_bf16.h>")
        if wmma.uses_wmma(self.func):
            includes.append("#include <mma.h>")
        helpers = [dtypes.helper_source(name).replace("static inline",
                                                      "static __device__ __forceinline__")
                   + "\n" for name in self.helpers]
        threads = self.launch.threads_per_block
        signature = (f'extern "C" __global__ void __launch_bounds__({threads}) '
                     f"{self.names.function}({', '.join(self.parameters())})")
        dynamic = []
        if self.dynamic:
            dynamic = ["    extern __shared__ __align__(32) unsigned char sched_shared[];"]
        return includes, helpers, [signature + " {", *dynamic, *self.lines, "}"]

    # -- statements ----------------------------------------------------------------------------

    def stmt_For(self, node: For) -> None:
        self.loops.append((node.loop_var, node.min, node.extent))
        try:
            self._loop(node)
        finally:
            self.loops.pop()

    def _loop(self, node: For) -> None:
        if warp_intrinsic(node) is not None:     # a tensor-core call (cuda/wmma.py, mma.py)
            context = tuple(self.loops[:-1])
            call = mma.MmaCall if mma.is_mma_call(warp_intrinsic(node)) else wmma.WmmaCall
            for line in call(self, node, context).emit().split("\n"):
                self.line(line)
            return
        if node.kind == "thread_binding":
            var = self.var_name(node.loop_var.name)
            ctype = dtypes.storage_type(node.loop_var.dtype)
            index = f"({ctype}){node.thread_tag}"
            if not (isinstance(node.min, IntImm) and node.min.value == 0):
                index += f" + {self.operand(node.min, 13)}"
            def emit() -> None:
                self.line(f"const {ctype} {var} = {index};")
                self.with_var(node.loop_var, self.ranges.loop(node.min, node.extent),
                              lambda: self.stmt(node.body))
            self.declaring(var, emit)       # a pipeline's prologue repeats a stage's loops
            return
        if node.kind == "parallel":
            raise ScheduleError("build", f"loop '{node.loop_var.name}' is parallel, a CPU loop "
                                f"kind: on the GPU bind it to blockIdx/threadIdx instead")
        if node.kind == "unrolled":
            self.line("#pragma unroll")
            node = _as_serial(node)
        elif node.kind == "vectorized":
            if self.vector_copy(node):
                return
            self.line("#pragma unroll")
            node = _as_serial(node)
        super().stmt_For(node)

    def vector_copy(self, node: For) -> bool:
        """A vectorized copy loop as 16-byte moves (float4: 4 floats, 8 halves...), else, for
        16-bit floats, as `half2`/`__nv_bfloat162` moves, when both sides are contiguous in the
        loop and provably aligned to the move; False to fall back to scalars. Parameters moved
        so are checked aligned to the move at each call; shared and local arrays moved so are
        declared with that alignment."""
        store = node.body
        if not (isinstance(store, BufferStore) and isinstance(store.value, BufferLoad)
                and store.buffer.dtype == store.value.buffer.dtype != "bool"
                and isinstance(node.extent, IntImm) and isinstance(node.min, IntImm)):
            return False
        load, dtype = store.value, store.buffer.dtype
        accesses = ((store.buffer, store.indices[0]), (load.buffer, load.indices[0]))
        moves = [(16 // element_bytes(dtype), "float4")] + \
            ([(2, _PAIRS[dtype])] if dtype in _PAIRS else [])
        found = next(((lanes, vector) for lanes, vector in moves
                      if node.extent.value % lanes == 0 and node.min.value % lanes == 0
                      and all(self._contiguous_aligned(index, node, lanes)
                              for _, index in accesses)), None)
        if found is None:
            return False
        lanes, vector = found
        size = lanes * element_bytes(dtype)
        params = {p.name for p in self.func.buffers}
        for buffer, _ in accesses:
            name = buffer.storage_name
            if name in params:
                self.aligned_params.require(name, size, f"moves it as {vector} ({size} bytes)")
            else:            # declared with the alignment (stmt_Allocate)
                self.vector_moved[name] = max(self.vector_moved.get(name, 1), size)
        var = self.var_name(node.loop_var.name)
        end = simplify(node.min + node.extent)
        ctype = dtypes.storage_type(node.loop_var.dtype)
        self.line(f"for ({ctype} {var} = {self.expr(node.min)}; {var} < {self.bound(end)}; "
                  f"{var} += {lanes}) {{  // vectorized: {vector}")
        self.depth += 1

        def move() -> None:
            if not self.async_vector_copy(store, load, lanes * element_bytes(dtype)):
                self.line(f"*({vector}*)&{self.name(store.buffer.storage_name)}"
                          f"[{self.expr(store.indices[0])}] = *(const {vector}*)&"
                          f"{self.name(load.buffer.storage_name)}[{self.expr(load.indices[0])}];")

        self.with_var(node.loop_var, self.ranges.loop(node.min, node.extent), move)
        self.depth -= 1
        self.line("}")
        return True

    def _contiguous_aligned(self, index, loop: For, lanes: int = 4) -> bool:
        """Whether `index` is `base + loop variable` with `base` a multiple of `lanes`, for
        every value of the loops around (isl decides, under their bounds)."""
        lane, start = loop.loop_var, loop.min
        context = (*self.loops, (lane, loop.min, loop.extent))
        base = substitute(index, {lane: start})
        offset = simplify_index(index - base - (lane - start), context)
        return offset == IntImm(0, offset.dtype) and \
            simplify_index(base % lanes, tuple(self.loops)) == IntImm(0, base.dtype)

    def stmt_Barrier(self, node: Barrier) -> None:
        self.line("__syncthreads();")

    def _allocate(self, node: Allocate) -> None:
        """The declaration of a buffer by its scope (stmt_Allocate: in a scope of its own
        where the kernel declared the name before)."""
        buffer = node.buffer
        name, ctype = self.name(buffer.name), _STORAGE[buffer.dtype]
        if buffer.scope == "global":
            raise ScheduleError("build", f"buffer '{buffer.name}' is an intermediate in global "
                                f"memory, which a CUDA kernel cannot allocate: give it scope "
                                f"\"shared\" or \"local\" (sch.set_scope, cache_read/"
                                f"cache_write) or inline it (sch.compute_inline)")
        size = _size(node)
        if buffer.scope == WARP_SCOPE:
            self.line(mma.warp_declaration(buffer, name, size))
        elif buffer.scope in FRAGMENT_SCOPES:
            self.line(wmma.fragment_declaration(
                buffer, name, size, buffer.storage_name in self.wmma_column_major))
        elif buffer.scope == "shared" and self.dynamic:
            if buffer.name in self.wmma_shared:          # wmma: 32 bytes (room counted)
                self.shared_offset = (self.shared_offset + 31) // 32 * 32
            self.line(f"{ctype}* {name} = ({ctype}*)(sched_shared + {self.shared_offset});")
            self.shared_offset += _aligned(size * element_bytes(buffer.dtype))
        elif buffer.scope == "shared":
            align = 32 if buffer.name in self.wmma_shared else 16     # wmma: 32 bytes
            self.line(f"__shared__ __align__({align}) {ctype} {name}[{size}];")
        else:       # aligned as its vector moves need, once the body has said (vector_copy)
            declaration = len(self.lines)
            self.line(f"{ctype} {name}[{size}];  // {buffer.scope}: registers")
            self.stmt(node.body)
            align = self.vector_moved.get(buffer.name, 1)
            if align > element_bytes(buffer.dtype):
                self.lines[declaration] = self.lines[declaration].replace(
                    f"{ctype} {name}[", f"__align__({align}) {ctype} {name}[", 1)
            return
        self.stmt(node.body)

    def stmt_BufferStore(self, node: BufferStore) -> None:
        if self.async_store(node):
            return
        (index,) = node.indices
        value = node.value
        if node.buffer.dtype in _FROM_FLOAT and isinstance(value, Cast) \
                and value.dtype == node.buffer.dtype:
            value = value.value                       # the store rounds: cast once, on store
        if node.buffer.dtype in _FROM_FLOAT:
            value = _rounded(node.buffer.dtype, value.dtype, self.expr(value))
        else:
            value = self.expr(value)
        self.line(f"{self.name(node.buffer.storage_name)}[{self.expr(index)}] = {value};")

    # -- expressions ---------------------------------------------------------------------------

    def expr_Var(self, node: Var):
        if node.dtype in _TO_FLOAT and node in self.func.params:     # a 16-bit float scalar
            return f"{_TO_FLOAT[node.dtype]}({self.var_name(node.name)})", 16
        return self.var_name(node.name), 16

    def expr_BufferLoad(self, node: BufferLoad):
        (index,) = node.indices
        text = f"{self.name(node.buffer.storage_name)}[{self.expr(index)}]"
        if node.buffer.dtype in _TO_FLOAT:
            return f"{_TO_FLOAT[node.buffer.dtype]}({text})", 16
        if node.buffer.dtype == "bool":     # its byte, nonzero as True (the C target's)
            return super().expr_BufferLoad(node)
        return text, 16

    def expr_Call(self, node: Call):
        if node.op != "shfl_down_sync":
            return super().expr_Call(node)
        value, offset, lanes, width = node.args
        ctype = _SHUFFLE_TYPES.get(node.dtype) or dtypes.storage_type(node.dtype)
        moved = f"({ctype})({self.expr(value)})"
        whole = isinstance(lanes, IntImm) and lanes.value >= 32
        if isinstance(lanes, IntImm):
            count = self.expr(lanes)
            mask = "0xffffffffu" if whole else f"{(1 << lanes.value) - 1:#010x}u"
        else:
            count = self.operand(lanes, 9)
            mask = f"({count} >= 32 ? 0xffffffffu : ((1u << {count}) - 1u))"
        if whole or not (isinstance(width, IntImm) and width.value == 32):
            # every lane of a segment of `width` lanes takes part
            text = f"__shfl_down_sync({mask}, {moved}, {self.expr(offset)}, {self.expr(width)})"
        else:
            # a warp with fewer lanes: a lane whose partner is past them reads itself, as
            # __shfl_down_sync would read a lane outside the mask (undefined)
            text = (f"__shfl_sync({mask}, {moved}, sched_lane_below({self.expr(offset)}, "
                    f"{count}), 32)")
        if ctype != dtypes.storage_type(node.dtype) and node.dtype not in _TO_FLOAT:
            return f"({dtypes.storage_type(node.dtype)}){text}", 15
        return text, 16

    def expr_Cast(self, node: Cast):
        if node.dtype in _TO_FLOAT:
            rounded = _rounded(node.dtype, node.value.dtype, self.expr(node.value))
            return f"{_TO_FLOAT[node.dtype]}({rounded})", 16
        return super().expr_Cast(node)

    def expr_FloatImm(self, node: FloatImm):
        value = node.value
        if math.isnan(value) or math.isinf(value):
            bits = "0x7fc00000" if math.isnan(value) else \
                ("0x7f800000" if value > 0 else "0xff800000")
            if node.dtype == "float64":
                wide = {"0x7fc00000": "0x7ff8000000000000LL", "0x7f800000": "0x7ff0000000000000LL",
                        "0xff800000": "(long long)0xfff0000000000000ULL"}[bits]
                return f"__longlong_as_double({wide})", 16
            return f"__int_as_float({bits})", 16
        return super().expr_FloatImm(node)


def _as_serial(loop: For) -> For:
    import dataclasses

    return dataclasses.replace(loop, kind="serial")

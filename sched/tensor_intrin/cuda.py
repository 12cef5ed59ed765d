"""Tensor-core intrinsics with TVM's registry names (tvm.tir.tensor_intrin.cuda), over the
fragment scopes `wmma.matrix_a`, `wmma.matrix_b` and `wmma.accumulator`:

- `wmma_load_16x16x16_f16_a` / `wmma_load_16x16x16_f16_b`: a 16x16 fp16 tile of a "shared"
  buffer into a matrix_a / matrix_b fragment; `..._global` (sched's addition, named as TVM's
  stores are): the same from a "global" buffer; `bf16` and `s8` (int8) alike;
- `wmma_fill_16x16x16_f32` (`_f16`, `_s32`): an accumulator fragment set to zero;
- `wmma_sync_16x16x16_f16f16f32`: `C[i, j] += float32(A[i, k]) * float32(B[k, j])` on
  fragments (A row-major, B row-major: k along B's rows); `bf16bf16f32` alike;
  `f16f16f16`: `C[i, j] += A[i, k] * B[k, j]` accumulated in fp16; `s8s8s32`:
  `C[i, j] += int32(A[i, k]) * int32(B[k, j])` (sm_72 and later);
- `wmma_store_16x16x16_f32_global` / `wmma_store_16x16x16_f32_shared` (`f16`, `s32`): an
  accumulator fragment into a "global" / "shared" buffer of its type.

- the `_trans` forms (`wmma_load_16x16x16_f16_b_trans`, `wmma_sync_16x16x16_s8s8s32_trans`,
  ...): B held n x k, `C[i, j] += A[i, k] * B[j, k]`; on the CUDA target that matrix_b
  fragment is column-major. (TVM's current names, `..._shared`, `..._shared_dyn`, its
  `_a_trans` loads and its group helpers: tvm_names.py.)

and, for mma.sync m16n8k16 with ldmatrix, on buffers of scope "warp" (TVM's names; each a
16x16 tile, held in registers by the lanes of a warp as sched/cuda/mma.py says):

- `mma_ldmatrix_f16_a` / `mma_ldmatrix_f16_b`: a 16x16 fp16 tile of a "shared" buffer into an
  A (m x k) / B (k x n) operand; `..._trans`: from a shared tile that holds it transposed
  (`W[i, j] = S[j, i]`);
- `mma_fill_16x16_f32` (`_f16`): an accumulator tile set to zero;
- `mma_f16f16f32`: `C[i, j] += float32(A[i, k]) * float32(B[k, j])` on warp tiles (two
  `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`); `mma_f16f16f32_trans_b` with B held
  n x k (`B[j, k]`), `_trans_a` with A held k x m (`A[k, i]`), `_trans_a_trans_b` both: a
  tile held transposed gets the other operand's register layout (sched/cuda/mma.py), and the
  `_trans` loads also copy a shared tile as it is held (TVM's meaning) into such a tile;
  `mma_f16f16f16` (and its `_trans` forms): `C[i, j] += A[i, k] * B[k, j]` accumulated in
  fp16 (`mma.sync...f16.f16.f16.f16`, two halves to a register); `mma_i8i8i32_trans_b` (with
  `mma_ldmatrix_i8_a` and `mma_ldmatrix_i8_b_trans`, tiles of 16 x 32 int8,
  `mma_fill_16x16_i32`, `mma_store_16x16_i32_global`): int8 into int32, m16n8k32 (B held
  k x n, `mma_i8i8i32` with `mma_ldmatrix_i8_b`, runs on the C target only: sched/cuda/mma.py);
- `mma_store_16x16_f32_global` (TVM: `mma_store_16x16_f32_global_`) /
  `mma_store_16x16_f32_shared` (`f16`): an accumulator tile into memory.

A warp buffer may keep the tile's logical layout in block IR (sched's form: the lanes' layout
is applied when the CUDA code is generated), or be laid out first, as TVM schedules do, with
`transform_layout` to TVM's 32x8 `shared_16x16_to_ldmatrix_32x8_layout`: each mma intrinsic
has a second form over that layout (sched/tensor_intrin/mma_layout.py), which tensorize tries
when the first does not match.

The implementation of each is its description's loop nest with the outer loop annotated
`{"warp_intrinsic": "<nvcuda::wmma call>"}`: the C target (and the interpreter) run the loops,
each thread holding its own whole fragment, which is the reference semantics; the CUDA target
emits the one `nvcuda::wmma` call the nest stands for (`load_matrix_sync`, `fill_fragment`,
`mma_sync`, `store_matrix_sync`; for the mma intrinsics, inline PTX: sched/cuda/mma.py), run
by the 32 lanes of a warp together on fragments declared as `wmma::fragment`
(sched/lower/wmma_fragments.py, sched/cuda/wmma.py say when the two agree:
every lane of a warp runs the call with the same operands, and only these calls touch a
fragment).
"""

from __future__ import annotations

from sched.ir.nodes import WARP_INTRINSIC
from sched.ir.parser import parse
from sched.lower.wmma_fragments import (
    MMA_FILL,
    MMA_STORE,
    PTX_LDMATRIX_A,
    PTX_LDMATRIX_B,
    PTX_MMA,
)
from sched.schedule.tensor_intrin import TensorIntrin

# a 16x16 tile copied between two scopes: the loads (memory -> fragment) and the store
_COPY = """
@T.prim_func
def {name}(a: T.handle, c: T.handle):
    A = T.match_buffer(a, (16, 16), "{dtype}", offset_factor=16, scope="{source}")
    C = T.match_buffer(c, (16, 16), "{dtype}", offset_factor=16, scope="{target}")
    with T.block("root"):
        T.reads(A[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        for i in T.serial(16{annotation}):
            for j in range(16):
                with T.block("{block}"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = A[vi, vj]
"""


def _copy_desc(name: str, dtype: str, source: str, target: str, block: str,
               call: str | None = None):
    """The 16x16 copy from `source` to `target` scope; with `call`, the implementation that
    the CUDA target emits as that warp intrinsic."""
    annotation = f', annotations={{"{WARP_INTRINSIC}": "{call}"}}' if call else ""
    return parse(_COPY.format(name=name, dtype=dtype, source=source, target=target,
                              block=block, annotation=annotation))


def _copy_pair(name: str, dtype: str, source: str, target: str, block: str, call: str):
    """(desc, impl) of a 16x16 copy intrinsic emitted as `call` on the CUDA target."""
    return (_copy_desc(f"{name}_desc", dtype, source, target, block),
            _copy_desc(f"{name}_impl", dtype, source, target, block, call))


_FILL = """
@T.prim_func
def {name}(c: T.handle):
    C = T.match_buffer(c, (16, 16), "{dtype}", offset_factor=16, scope="wmma.accumulator")
    with T.block("root"):
        T.reads()
        T.writes(C[0:16, 0:16])
        for i in T.serial(16{annotation}):
            for j in range(16):
                with T.block("init"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = T.{dtype}(0)
"""

_SYNC = """
@T.prim_func
def {name}(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (16, 16), "{dtype}", offset_factor=16, scope="wmma.matrix_a")
    B = T.match_buffer(b, (16, 16), "{dtype}", offset_factor=16, scope="wmma.matrix_b")
    C = T.match_buffer(c, (16, 16), "{out}", offset_factor=16, scope="wmma.accumulator")
    with T.block("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        for i in T.serial(16{annotation}):
            for j, k in T.grid(16, 16):
                with T.block("update"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    C[vi, vj] = C[vi, vj] + {a} * {b}
"""


def _operand(name: str, index: str, dtype: str, out: str) -> str:
    """An operand of the multiply: cast to the accumulator's type where it differs (as TVM's
    descriptions write it: fp16 x fp16 accumulated in fp16 has no cast)."""
    load = f"{name}[{index}]"
    return load if dtype == out else f'T.Cast("{out}", {load})'


def _pair(template: str, name: str, call: str, **fields):
    """(desc, impl) from `template`: the impl is the desc with its outer loop annotated as the
    warp intrinsic `call`."""
    annotation = f', annotations={{"{WARP_INTRINSIC}": "{call}"}}'
    return (parse(template.format(name=f"{name}_desc", annotation="", **fields)),
            parse(template.format(name=f"{name}_impl", annotation=annotation, **fields)))


_LOAD, _STORE = "nvcuda::wmma::load_matrix_sync", "nvcuda::wmma::store_matrix_sync"
_SHORT = {"float16": "f16", "bfloat16": "bf16", "int8": "s8", "float32": "f32", "int32": "s32"}
# operand type -> the accumulator types wmma has for it (m16n16k16)
_ACCUMULATORS = {"float16": ("float32", "float16"), "bfloat16": ("float32",),
                 "int8": ("int32",)}

# name -> (desc, impl), TVM's names (bf16 and the loads from global: sched's, named alike)
INTRINSICS = {}
for _dtype, _outs in _ACCUMULATORS.items():
    _short = _SHORT[_dtype]
    for _which in ("a", "b"):
        for _source, _suffix in (("shared", ""), ("global", "_global")):
            _name = f"wmma_load_16x16x16_{_short}_{_which}{_suffix}"
            INTRINSICS[_name] = _copy_pair(_name, _dtype, _source, f"wmma.matrix_{_which}",
                                           "load", _LOAD)
    # B held n x k: the copy is the same, the mma reading it transposed makes the fragment
    # column-major (sched/cuda/wmma.py)
    _name = f"wmma_load_16x16x16_{_short}_b_trans"
    INTRINSICS[_name] = _copy_pair(_name, _dtype, "shared", "wmma.matrix_b", "load", _LOAD)
    for _out in _outs:
        for _trans, _b in (("", "vk, vj"), ("_trans", "vj, vk")):
            _name = f"wmma_sync_16x16x16_{_short}{_short}{_SHORT[_out]}{_trans}"
            INTRINSICS[_name] = _pair(_SYNC, _name, "nvcuda::wmma::mma_sync", dtype=_dtype,
                                      out=_out, a=_operand("A", "vi, vk", _dtype, _out),
                                      b=_operand("B", _b, _dtype, _out))
for _out in ("float32", "float16", "int32"):
    _name = f"wmma_fill_16x16x16_{_SHORT[_out]}"
    INTRINSICS[_name] = _pair(_FILL, _name, "nvcuda::wmma::fill_fragment", dtype=_out)
    for _target in ("global", "shared"):
        _name = f"wmma_store_16x16x16_{_SHORT[_out]}_{_target}"
        INTRINSICS[_name] = _copy_pair(_name, _out, "wmma.accumulator", _target, "store",
                                       _STORE)

WMMA_LOAD_16x16x16_F16_A_INTRIN = "wmma_load_16x16x16_f16_a"
WMMA_LOAD_16x16x16_F16_B_INTRIN = "wmma_load_16x16x16_f16_b"
WMMA_LOAD_16x16x16_F16_A_GLOBAL_INTRIN = "wmma_load_16x16x16_f16_a_global"
WMMA_LOAD_16x16x16_F16_B_GLOBAL_INTRIN = "wmma_load_16x16x16_f16_b_global"
WMMA_FILL_16x16x16_F32_INTRIN = "wmma_fill_16x16x16_f32"
WMMA_SYNC_16x16x16_f16f16f32_INTRIN = "wmma_sync_16x16x16_f16f16f32"
WMMA_STORE_16x16x16_F32_GLOBAL_INTRIN = "wmma_store_16x16x16_f32_global"
WMMA_STORE_16x16x16_F32_SHARED_INTRIN = "wmma_store_16x16x16_f32_shared"
WMMA_SYNC_16x16x16_f16f16f16_INTRIN = "wmma_sync_16x16x16_f16f16f16"
WMMA_SYNC_16x16x16_s8s8s32_INTRIN = "wmma_sync_16x16x16_s8s8s32"
WMMA_LOAD_16x16x16_S8_A_INTRIN = "wmma_load_16x16x16_s8_a"
WMMA_LOAD_16x16x16_S8_B_INTRIN = "wmma_load_16x16x16_s8_b"
WMMA_FILL_16x16x16_F16_INTRIN = "wmma_fill_16x16x16_f16"
WMMA_FILL_16x16x16_S32_INTRIN = "wmma_fill_16x16x16_s32"
WMMA_STORE_16x16x16_F16_GLOBAL_INTRIN = "wmma_store_16x16x16_f16_global"
WMMA_STORE_16x16x16_F16_SHARED_INTRIN = "wmma_store_16x16x16_f16_shared"
WMMA_STORE_16x16x16_S32_GLOBAL_INTRIN = "wmma_store_16x16x16_s32_global"
WMMA_STORE_16x16x16_S32_SHARED_INTRIN = "wmma_store_16x16x16_s32_shared"

# -- mma.sync m16n8k16 with ldmatrix, on "warp" buffers (TVM's names) -----------------------

_LDMATRIX = """
@T.prim_func
def {name}(w: T.handle, s: T.handle):
    S = T.match_buffer(s, ({shared}), "{dtype}", offset_factor=16, scope="shared")
    W = T.match_buffer(w, ({rows}, {cols}), "{dtype}", offset_factor=16, scope="warp")
    with T.block("root"):
        T.reads(S[0:{shared_rows}, 0:{shared_cols}])
        T.writes(W[0:{rows}, 0:{cols}])
        for i in T.serial({rows}{annotation}):
            for j in range({cols}):
                with T.block("shared_warp"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    W[vi, vj] = S[{source}]
"""


def _ldmatrix_fields(rows: int, cols: int, transposed: bool) -> dict:
    """The template fields of a rows x cols warp tile copied from a shared tile held as it is
    or (`transposed`) transposed."""
    shared_rows, shared_cols = (cols, rows) if transposed else (rows, cols)
    return dict(rows=rows, cols=cols, shared=f"{shared_rows}, {shared_cols}",
                shared_rows=shared_rows, shared_cols=shared_cols,
                source="vj, vi" if transposed else "vi, vj")

_MMA_SYNC = """
@T.prim_func
def {name}(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, ({a_shape}), "{dtype}", offset_factor=16, scope="warp")
    B = T.match_buffer(b, ({b_shape}), "{dtype}", offset_factor=16, scope="warp")
    C = T.match_buffer(c, (16, 16), "{out}", offset_factor=16, scope="warp")
    with T.block("root"):
        T.reads(C[0:16, 0:16], A[{a_region}], B[{b_region}])
        T.writes(C[0:16, 0:16])
        for i in T.serial(16{annotation}):
            for j, k in T.grid(16, {depth}):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    C[vi, vj] = C[vi, vj] + {a} * {b}
"""

def _mma_shapes(depth: int, trans_a: bool, trans_b: bool) -> dict:
    """The template fields of an mma's operand tiles: A 16 x depth (or depth x 16 held k x
    m), B depth x 16 (or 16 x depth held n x k)."""
    a, b = ((depth, 16) if trans_a else (16, depth)), ((16, depth) if trans_b else (depth, 16))
    return dict(depth=depth, a_shape=f"{a[0]}, {a[1]}", b_shape=f"{b[0]}, {b[1]}",
                a_region=f"0:{a[0]}, 0:{a[1]}", b_region=f"0:{b[0]}, 0:{b[1]}")


_MMA_FILL = """
@T.prim_func
def {name}(c: T.handle):
    C = T.match_buffer(c, (16, 16), "{dtype}", offset_factor=16, scope="warp")
    with T.block("root"):
        T.reads()
        T.writes(C[0:16, 0:16])
        for i in T.serial(16{annotation}):
            for j in range(16):
                with T.block("C_warp"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = T.{dtype}(0)
"""

for _which, _call in (("a", PTX_LDMATRIX_A), ("b", PTX_LDMATRIX_B)):
    for _suffix, _transposed in (("", False), ("_trans", True)):
        _name = f"mma_ldmatrix_f16_{_which}{_suffix}"
        INTRINSICS[_name] = _pair(_LDMATRIX, _name, _call, dtype="float16",
                                  **_ldmatrix_fields(16, 16, _transposed))
# int8 (m16n8k32): A 16 x 32 (m x k), B 32 x 16 (k x n) or, `_trans` (TVM's meaning: the
# shared tile held n x k, copied as it is), 16 x 32; on the GPU only the n x k B loads (ldmatrix
# cannot transpose 8-bit elements: sched/cuda/mma.py)
INTRINSICS["mma_ldmatrix_i8_a"] = _pair(_LDMATRIX, "mma_ldmatrix_i8_a", PTX_LDMATRIX_A,
                                        dtype="int8", **_ldmatrix_fields(16, 32, False))
INTRINSICS["mma_ldmatrix_i8_b"] = _pair(_LDMATRIX, "mma_ldmatrix_i8_b", PTX_LDMATRIX_B,
                                        dtype="int8", **_ldmatrix_fields(32, 16, False))
INTRINSICS["mma_ldmatrix_i8_b_trans"] = _pair(_LDMATRIX, "mma_ldmatrix_i8_b_trans",
                                              PTX_LDMATRIX_B, dtype="int8",
                                              **_ldmatrix_fields(16, 32, False))
# A held m x k or (`_trans_a`) k x m, B held k x n or (`_trans_b`) n x k, as TVM names them;
# accumulated in fp32 (the products cast) or in fp16 (as TVM describes it: no cast)
for _out in ("float32", "float16"):
    for _trans_a, _a in (("", "vi, vk"), ("_trans_a", "vk, vi")):
        for _trans_b, _b in (("", "vk, vj"), ("_trans_b", "vj, vk")):
            _name = f"mma_f16f16{_SHORT[_out]}{_trans_a}{_trans_b}"
            INTRINSICS[_name] = _pair(_MMA_SYNC, _name, PTX_MMA, dtype="float16", out=_out,
                                      a=_operand("A", _a, "float16", _out),
                                      b=_operand("B", _b, "float16", _out),
                                      **_mma_shapes(16, _trans_a != "", _trans_b != ""))
    _short = _SHORT[_out]
    INTRINSICS[f"mma_fill_16x16_{_short}"] = _pair(_MMA_FILL, f"mma_fill_16x16_{_short}",
                                                   MMA_FILL, dtype=_out)
    for _target in ("global", "shared"):
        _name = f"mma_store_16x16_{_short}_{_target}"
        INTRINSICS[_name] = _copy_pair(_name, _out, "warp", _target, "C_warp", MMA_STORE)
    # TVM spells its store intrinsic with a trailing underscore
    INTRINSICS[f"mma_store_16x16_{_short}_global_"] = \
        INTRINSICS[f"mma_store_16x16_{_short}_global"]

# int8 into int32 (m16n8k32): TVM's mma_i8i8i32 (B k x n: the C target only) and
# mma_i8i8i32_trans_b (B n x k)
for _trans_b, _b in (("", "vk, vj"), ("_trans_b", "vj, vk")):
    _name = f"mma_i8i8i32{_trans_b}"
    INTRINSICS[_name] = _pair(_MMA_SYNC, _name, PTX_MMA, dtype="int8", out="int32",
                              a=_operand("A", "vi, vk", "int8", "int32"),
                              b=_operand("B", _b, "int8", "int32"),
                              **_mma_shapes(32, False, _trans_b != ""))
INTRINSICS["mma_fill_16x16_i32"] = _pair(_MMA_FILL, "mma_fill_16x16_i32", MMA_FILL,
                                         dtype="int32")
for _target in ("global", "shared"):
    _name = f"mma_store_16x16_i32_{_target}"
    INTRINSICS[_name] = _copy_pair(_name, "int32", "warp", _target, "C_warp", MMA_STORE)
INTRINSICS["mma_store_16x16_i32_global_"] = INTRINSICS["mma_store_16x16_i32_global"]

LDMATRIX_f16_A_INTRIN = "mma_ldmatrix_f16_a"
LDMATRIX_f16_B_INTRIN = "mma_ldmatrix_f16_b"
LDMATRIX_f16_A_TRANS_INTRIN = "mma_ldmatrix_f16_a_trans"
LDMATRIX_f16_B_TRANS_INTRIN = "mma_ldmatrix_f16_b_trans"
MMA_f16f16f32_INTRIN = "mma_f16f16f32"
MMA_fill_16x16_f32_INTRIN = "mma_fill_16x16_f32"
MMA_store_16x16_f32_global_INTRIN = "mma_store_16x16_f32_global_"
MMA_store_16x16_f32_shared_INTRIN = "mma_store_16x16_f32_shared"
# TVM's names for the 16x16 fp16 loads (tvm.tir.tensor_intrin.cuda), so that a TVM schedule
# runs with only its imports changed
LDMATRIX_16x16_A_INTRIN = LDMATRIX_f16_A_INTRIN
LDMATRIX_16x16_B_INTRIN = LDMATRIX_f16_B_INTRIN

for _name, (_desc, _impl) in INTRINSICS.items():
    TensorIntrin.register(_name, _desc, _impl)
# TVM's `_trans` loads keep the operand as the shared tile holds it (the mma then reads it
# transposed, `_trans_a` / `_trans_b`): the plain copy is a second form of each
for _which in ("a", "b"):
    TensorIntrin.register_form(f"mma_ldmatrix_f16_{_which}_trans",
                               *INTRINSICS[f"mma_ldmatrix_f16_{_which}"])

# TVM's 32x8 warp-register layout: a second form of the mma intrinsics (registered on import)
from sched.tensor_intrin.mma_layout import (  # noqa: E402, F401
    ldmatrix_32x8_to_shared_16x16_layout,
    ldmatrix_32x16_to_shared_16x32_layout,
    shared_16x16_to_ldmatrix_32x8_layout,
    shared_16x32_to_ldmatrix_32x16_layout,
)

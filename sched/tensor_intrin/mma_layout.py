"""TVM's 32x8 warp-register layout of the mma.sync m16n8k16 intrinsics, as a second form of
each (TensorIntrin.register_form), so that a TVM schedule that lays its "warp" buffers out
with `shared_16x16_to_ldmatrix_32x8_layout` before tensorizing carries over:

    def index_map(i, j):
        return (i // 16, j // 16, *shared_16x16_to_ldmatrix_32x8_layout(i % 16, j % 16))
    sch.transform_layout(A_warp, ("write", 0), index_map)
    sch.transform_layout(C_warp, ("read", 0), index_map)
    sch.tensorize(loop, "mma_ldmatrix_f16_a")          # matches the 32x8 form below

Element (i, j) of a 16x16 tile is element (4 (i % 8) + (j % 8) / 2, 4 (j / 8) + 2 (i / 8) +
j % 2) of its 32x8 block: row = the lane that holds it in an A operand or an accumulator,
column = its place among the lane's 8 (PTX ISA, "Matrix Fragments for mma.m16n8k16"). The map
is a bijection of [0, 16)^2 onto [0, 32) x [0, 8) (transform_layout proves it injective with
isl; both sets have 256 points).

The forms (TVM's descriptions; the buffers' first dims are the 32x8 blocks):

- `mma_ldmatrix_f16_a` / `_b`: `W[map(i, j)] = S[i, j]` for a 16x16 fp16 shared tile S;
- `mma_f16f16f32`: `C[map(i, j)] += float32(A[map(i, k)]) * float32(B[map(k, j)])`;
- `mma_fill_16x16_f32`: `C[map(i, j)] = 0`;
- `mma_store_16x16_f32_global_` (and `_global`, `_shared`): `D[i, j] = C[map(i, j)]`.

- TVM's `_trans` loads (`W[map(i, j)] = S[i, j]`, the shared tile as it is held: B n x k, A
  k x m) and `mma_f16f16f32_trans_b` (`B[map(j, k)]`), `_trans_a` (`A[map(k, i)]`) and
  `_trans_a_trans_b`: a warp tile held transposed gets the other operand's registers
  (sched/cuda/mma.py);
- int8: `mma_ldmatrix_i8_a` / `mma_ldmatrix_i8_b_trans` (`W[map8(i, j)] = S[i, j]` for a
  16x32 tile, TVM's `shared_16x32_to_ldmatrix_32x16_layout`), `mma_i8i8i32_trans_b`
  (`C[map(i, j)] += int32(A[map8(i, k)]) * int32(B[map8(j, k)])`), the int32 fill and stores.

Each implementation is its description with the outer loop annotated as the warp intrinsic
(sched/tensor_intrin/cuda.py): the C target and the interpreter run the loops on the 32x8
buffers as they are; for the CUDA target, sched/lower/warp_layout.py stores each 32x8 block
back as the 16x16 tile it holds, which the mma code generator (sched/cuda/mma.py) emits.
"""

from __future__ import annotations

from sched.ir.nodes import WARP_INTRINSIC
from sched.ir.parser import parse
from sched.lower.warp_layout import (  # noqa: F401  (TVM's names, exported here too)
    ldmatrix_32x8_to_shared_16x16_layout,
    ldmatrix_32x16_to_shared_16x32_layout,
    shared_16x16_to_ldmatrix_32x8_layout,
    shared_16x32_to_ldmatrix_32x16_layout,
)
from sched.lower.wmma_fragments import (
    MMA_FILL,
    MMA_STORE,
    PTX_LDMATRIX_A,
    PTX_LDMATRIX_B,
    PTX_MMA,
)
from sched.schedule.tensor_intrin import TensorIntrin


def _place(i: str, j: str) -> str:
    """`row, column` of element (i, j) in the 32x8 block, as script text."""
    return f"4 * ({i} % 8) + {j} % 8 // 2, 4 * ({j} // 8) + {i} // 8 * 2 + {j} % 2"


def _place_i8(i: str, j: str) -> str:
    """`row, column` of element (i, j) of a 16x32 int8 tile in its 32x16 block (TVM's
    `shared_16x32_to_ldmatrix_32x16_layout`), as script text."""
    return f"4 * ({i} % 8) + {j} % 16 // 4, 8 * ({j} // 16) + {i} // 8 * 4 + {j} % 4"


_LDMATRIX = """
@T.prim_func
def {name}(w: T.handle, s: T.handle):
    S = T.match_buffer(s, (16, {depth}), "{dtype}", offset_factor=16, scope="shared")
    W = T.match_buffer(w, (32, {lane}), "{dtype}", offset_factor={lane}, scope="warp")
    with T.block("root"):
        T.reads(S[0:16, 0:{depth}])
        T.writes(W[0:32, 0:{lane}])
        for i in T.serial(16{annotation}):
            for j in range({depth}):
                with T.block("shared_warp"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    W[{ij_operand}] = S[vi, vj]
"""

_MMA = """
@T.prim_func
def {name}(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (32, {lane}), "{dtype}", offset_factor={lane}, scope="warp")
    B = T.match_buffer(b, (32, {lane}), "{dtype}", offset_factor={lane}, scope="warp")
    C = T.match_buffer(c, (32, 8), "{out}", offset_factor=8, scope="warp")
    with T.block("root"):
        T.reads(C[0:32, 0:8], A[0:32, 0:{lane}], B[0:32, 0:{lane}])
        T.writes(C[0:32, 0:8])
        for i in T.serial(16{annotation}):
            for j, k in T.grid(16, {depth}):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    C[{ij}] = C[{ij}] + {a} * {b}
"""

# the fields of an operand's blocks: fp16 16x16 tiles in 32x8 blocks, int8 16x32 in 32x16
_FP16 = {"dtype": "float16", "depth": 16, "lane": 8, "ij_operand": _place("vi", "vj")}
_INT8 = {"dtype": "int8", "depth": 32, "lane": 16, "ij_operand": _place_i8("vi", "vj")}

_FILL = """
@T.prim_func
def {name}(c: T.handle):
    C = T.match_buffer(c, (32, 8), "{dtype}", offset_factor=8, scope="warp")
    with T.block("root"):
        T.reads()
        T.writes(C[0:32, 0:8])
        for i in T.serial(16{annotation}):
            for j in range(16):
                with T.block("C_warp"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[{ij}] = T.{dtype}(0)
"""

_STORE = """
@T.prim_func
def {name}(a: T.handle, c: T.handle):
    W = T.match_buffer(a, (32, 8), "{dtype}", offset_factor=8, scope="warp")
    C = T.match_buffer(c, (16, 16), "{dtype}", offset_factor=16, scope="{scope}")
    with T.block("root"):
        T.reads(W[0:32, 0:8])
        T.writes(C[0:16, 0:16])
        for i in T.serial(16{annotation}):
            for j in range(16):
                with T.block("C_warp"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = W[{ij}]
"""

_PLACES = {"ij": _place("vi", "vj")}


def _form(template: str, name: str, call: str, **fields) -> tuple:
    """(desc, impl) of the 32x8 form; the impl's outer loop is the warp intrinsic `call`."""
    annotation = f', annotations={{"{WARP_INTRINSIC}": "{call}"}}'
    return (parse(template.format(name=f"{name}_32x8_desc", annotation="", **_PLACES,
                                  **fields)),
            parse(template.format(name=f"{name}_32x8_impl", annotation=annotation, **_PLACES,
                                  **fields)))


FORMS = {}
# the loads; TVM's `_trans` loads copy the shared tile as it is held (n x k for B, k x m for
# A); int8: A and B held n x k as 16x32 tiles in TVM's 32x16 blocks
for _name, _call, _fields in (
        ("mma_ldmatrix_f16_a", PTX_LDMATRIX_A, _FP16),
        ("mma_ldmatrix_f16_b", PTX_LDMATRIX_B, _FP16),
        ("mma_ldmatrix_f16_a_trans", PTX_LDMATRIX_A, _FP16),
        ("mma_ldmatrix_f16_b_trans", PTX_LDMATRIX_B, _FP16),
        ("mma_ldmatrix_i8_a", PTX_LDMATRIX_A, _INT8),
        ("mma_ldmatrix_i8_b_trans", PTX_LDMATRIX_B, _INT8)):
    FORMS[_name] = _form(_LDMATRIX, _name, _call, **_fields)


def _mma_form(name: str, out: str, fields: dict, place, a: tuple, b: tuple) -> tuple:
    """The 32x8/32x16 form of an mma: operands at `place(*a)` and `place(*b)`, cast to the
    accumulator's type `out` where it differs (as TVM's descriptions write them)."""
    operands = [f"A[{place(*a)}]", f"B[{place(*b)}]"]
    if out != fields["dtype"]:
        operands = [f'T.Cast("{out}", {x})' for x in operands]
    return _form(_MMA, name, PTX_MMA, out=out, a=operands[0], b=operands[1], **fields)


for _out, _short in (("float32", "f32"), ("float16", "f16")):
    for _trans_a, _a in (("", ("vi", "vk")), ("_trans_a", ("vk", "vi"))):
        for _trans_b, _b in (("", ("vk", "vj")), ("_trans_b", ("vj", "vk"))):
            _name = f"mma_f16f16{_short}{_trans_a}{_trans_b}"
            FORMS[_name] = _mma_form(_name, _out, _FP16, _place, _a, _b)
FORMS["mma_i8i8i32_trans_b"] = _mma_form("mma_i8i8i32_trans_b", "int32", _INT8, _place_i8,
                                         ("vi", "vk"), ("vj", "vk"))
# the accumulators, in the 32x8 blocks
for _out, _short in (("float32", "f32"), ("float16", "f16"), ("int32", "i32")):
    FORMS[f"mma_fill_16x16_{_short}"] = _form(_FILL, f"mma_fill_16x16_{_short}", MMA_FILL,
                                              dtype=_out)
    for _scope in ("global", "shared"):
        FORMS[f"mma_store_16x16_{_short}_{_scope}"] = _form(
            _STORE, f"mma_store_16x16_{_short}_{_scope}", MMA_STORE, scope=_scope, dtype=_out)
    FORMS[f"mma_store_16x16_{_short}_global_"] = FORMS[f"mma_store_16x16_{_short}_global"]

for _name, (_desc, _impl) in FORMS.items():
    TensorIntrin.register_form(_name, _desc, _impl)

"""Tensor-core intrinsics with TVM's registry names (tvm.tir.tensor_intrin.cuda), over the
fragment scopes `wmma.matrix_a`, `wmma.matrix_b` and `wmma.accumulator`:

- `wmma_load_16x16x16_f16_a` / `wmma_load_16x16x16_f16_b`: a 16x16 fp16 tile of a "shared"
  buffer into a matrix_a / matrix_b fragment; `..._global` (sched's addition, named as TVM's
  stores are): the same from a "global" buffer;
- `wmma_fill_16x16x16_f32`: an accumulator fragment set to zero;
- `wmma_sync_16x16x16_f16f16f32`: `C[i, j] += float32(A[i, k]) * float32(B[k, j])` on
  fragments (A row-major, B row-major: k along B's rows);
- `wmma_store_16x16x16_f32_global`: an accumulator fragment into a "global" fp32 buffer.

The implementation of each is, for now, its reference semantics in block IR (the description
itself): every target runs it as loops, each thread holding its own whole fragment (the
fragment scopes are private to a thread in block IR, as "local" is). Emitting `nvcuda::wmma`
calls for them on the CUDA target is not done yet; schedules written with these names run,
with the right numbers, on every target today.
"""

from __future__ import annotations

from sched.ir.parser import parse
from sched.schedule.tensor_intrin import TensorIntrin
from sched.script import T

# a 16x16 tile copied between two scopes: the loads (memory -> fragment) and the store
_COPY = """
@T.prim_func
def {name}(a: T.handle, c: T.handle):
    A = T.match_buffer(a, (16, 16), "{dtype}", offset_factor=16, scope="{source}")
    C = T.match_buffer(c, (16, 16), "{dtype}", offset_factor=16, scope="{target}")
    with T.block("root"):
        T.reads(A[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        for i, j in T.grid(16, 16):
            with T.block("{block}"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj]
"""


def _copy_desc(name: str, dtype: str, source: str, target: str, block: str):
    return parse(_COPY.format(name=name, dtype=dtype, source=source, target=target,
                              block=block))


wmma_load_16x16x16_f16_a_desc = _copy_desc(
    "wmma_load_16x16x16_f16_a_desc", "float16", "shared", "wmma.matrix_a", "load")
wmma_load_16x16x16_f16_a_global_desc = _copy_desc(
    "wmma_load_16x16x16_f16_a_global_desc", "float16", "global", "wmma.matrix_a", "load")
wmma_load_16x16x16_f16_b_desc = _copy_desc(
    "wmma_load_16x16x16_f16_b_desc", "float16", "shared", "wmma.matrix_b", "load")
wmma_load_16x16x16_f16_b_global_desc = _copy_desc(
    "wmma_load_16x16x16_f16_b_global_desc", "float16", "global", "wmma.matrix_b", "load")


@T.prim_func
def wmma_fill_16x16x16_f32_desc(c: T.handle):
    C = T.match_buffer(c, (16, 16), "float32", offset_factor=16, scope="wmma.accumulator")
    with T.block("root"):
        T.reads()
        T.writes(C[0:16, 0:16])
        for i, j in T.grid(16, 16):
            with T.block("init"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.float32(0)


@T.prim_func
def wmma_sync_16x16x16_f16f16f32_desc(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (16, 16), "float16", offset_factor=16, scope="wmma.matrix_a")
    B = T.match_buffer(b, (16, 16), "float16", offset_factor=16, scope="wmma.matrix_b")
    C = T.match_buffer(c, (16, 16), "float32", offset_factor=16, scope="wmma.accumulator")
    with T.block("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        for i, j, k in T.grid(16, 16, 16):
            with T.block("update"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                C[vi, vj] = C[vi, vj] + T.Cast("float32", A[vi, vk]) * T.Cast("float32", B[vk, vj])


wmma_store_16x16x16_f32_global_desc = _copy_desc(
    "wmma_store_16x16x16_f32_global_desc", "float32", "wmma.accumulator", "global", "store")


WMMA_LOAD_16x16x16_F16_A_INTRIN = "wmma_load_16x16x16_f16_a"
WMMA_LOAD_16x16x16_F16_B_INTRIN = "wmma_load_16x16x16_f16_b"
WMMA_LOAD_16x16x16_F16_A_GLOBAL_INTRIN = "wmma_load_16x16x16_f16_a_global"
WMMA_LOAD_16x16x16_F16_B_GLOBAL_INTRIN = "wmma_load_16x16x16_f16_b_global"
WMMA_FILL_16x16x16_F32_INTRIN = "wmma_fill_16x16x16_f32"
WMMA_SYNC_16x16x16_f16f16f32_INTRIN = "wmma_sync_16x16x16_f16f16f32"
WMMA_STORE_16x16x16_F32_GLOBAL_INTRIN = "wmma_store_16x16x16_f32_global"

# (the reference implementation is the description: see the module docstring)
for _name, _desc in (
        (WMMA_LOAD_16x16x16_F16_A_INTRIN, wmma_load_16x16x16_f16_a_desc),
        (WMMA_LOAD_16x16x16_F16_B_INTRIN, wmma_load_16x16x16_f16_b_desc),
        (WMMA_LOAD_16x16x16_F16_A_GLOBAL_INTRIN, wmma_load_16x16x16_f16_a_global_desc),
        (WMMA_LOAD_16x16x16_F16_B_GLOBAL_INTRIN, wmma_load_16x16x16_f16_b_global_desc),
        (WMMA_FILL_16x16x16_F32_INTRIN, wmma_fill_16x16x16_f32_desc),
        (WMMA_SYNC_16x16x16_f16f16f32_INTRIN, wmma_sync_16x16x16_f16f16f32_desc),
        (WMMA_STORE_16x16x16_F32_GLOBAL_INTRIN, wmma_store_16x16x16_f32_global_desc)):
    TensorIntrin.register(_name, _desc, _desc)

"""CPU tensor intrinsics: register-blocked fp32 micro-kernels, written as loop code that the C
target's compiler turns into vector instructions (the impl is block IR, so the mechanism is
the same as for the GPU's: nothing here is specific to a target).

- `outer_product_4x16_f32`: `C[0:4, 0:16] += A[0:4, 0] * B[0, 0:16]`, the rank-1 update at the
  heart of a GEMM micro-kernel (one k step): 4 rows of C kept in registers, each row a 16-lane
  vector FMA of a broadcast A element with the B row. Tensorize the loops (i 4, j 16, k 1) of a
  matmul's update block under the k loop.
- `dot_product_8_f32`: `C[0] += sum(A[0:8] * B[0:8])`, an 8-lane multiply then a horizontal
  sum. Tensorize a reduce loop of extent 8.
"""

from __future__ import annotations

from sched.schedule.tensor_intrin import TensorIntrin
from sched.script import T


@T.prim_func
def outer_product_4x16_f32_desc(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (4, 1), "float32", offset_factor=1)
    B = T.match_buffer(b, (1, 16), "float32", offset_factor=1)
    C = T.match_buffer(c, (4, 16), "float32", offset_factor=1)
    with T.block("root"):
        T.reads(C[0:4, 0:16], A[0:4, 0:1], B[0:1, 0:16])
        T.writes(C[0:4, 0:16])
        for i, j, k in T.grid(4, 16, 1):
            with T.block("update"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func
def outer_product_4x16_f32_impl(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (4, 1), "float32", offset_factor=1)
    B = T.match_buffer(b, (1, 16), "float32", offset_factor=1)
    C = T.match_buffer(c, (4, 16), "float32", offset_factor=1)
    with T.block("root"):
        T.reads(C[0:4, 0:16], A[0:4, 0:1], B[0:1, 0:16])
        T.writes(C[0:4, 0:16])
        for i in T.unroll(4):
            for j in T.vectorized(16):
                with T.block("fma"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = C[vi, vj] + A[vi, 0] * B[0, vj]


@T.prim_func
def dot_product_8_f32_desc(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (8,), "float32", offset_factor=1)
    B = T.match_buffer(b, (8,), "float32", offset_factor=1)
    C = T.match_buffer(c, (1,), "float32", offset_factor=1)
    with T.block("root"):
        T.reads(C[0:1], A[0:8], B[0:8])
        T.writes(C[0:1])
        for k in range(8):
            with T.block("update"):
                vk = T.axis.remap("R", [k])
                C[0] = C[0] + A[vk] * B[vk]


@T.prim_func
def dot_product_8_f32_impl(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (8,), "float32", offset_factor=1)
    B = T.match_buffer(b, (8,), "float32", offset_factor=1)
    C = T.match_buffer(c, (1,), "float32", offset_factor=1)
    with T.block("root"):
        T.reads(C[0:1], A[0:8], B[0:8])
        T.writes(C[0:1])
        products = T.alloc_buffer((8,), "float32", scope="local")
        for k in T.vectorized(8):
            with T.block("multiply"):
                vk = T.axis.remap("S", [k])
                products[vk] = A[vk] * B[vk]
        for k in range(8):
            with T.block("sum"):
                vk = T.axis.remap("R", [k])
                C[0] = C[0] + products[vk]


OUTER_PRODUCT_4X16_F32 = "outer_product_4x16_f32"
DOT_PRODUCT_8_F32 = "dot_product_8_f32"
TensorIntrin.register(OUTER_PRODUCT_4X16_F32, outer_product_4x16_f32_desc,
                      outer_product_4x16_f32_impl)
TensorIntrin.register(DOT_PRODUCT_8_F32, dot_product_8_f32_desc, dot_product_8_f32_impl)

"""Tutorial 11: tensorize: compute a tile with a registered tensor intrinsic.

An intrinsic is a pair of PrimFuncs (TVM's `TensorIntrin`): a description of what it computes
(a loop nest around one block, over small buffers with scopes) and an implementation put in its
place. `sch.tensorize(loop, name)` makes the loops under `loop` one block (blockize), checks
that it computes what the description says (same loops, same body, same dtypes and scopes,
every access at the same place relative to the tile) and swaps in the implementation; the first
difference is refused, named. sched ships CPU micro-kernels and the wmma m16n16k16 intrinsics
under TVM's names; this tutorial registers one of its own too. Run:
`python tutorials/11_tensorize.py`.
"""

import numpy as np

import sched
from sched import TensorIntrin
from sched import compute as te
from sched import hand_schedules as hs
from sched.script import T

print("registered:", ", ".join(TensorIntrin.names()))

# 1. A matmul tiled to the shape of `outer_product_4x16_f32` (C[0:4, 0:16] += A[0:4, k] *
#    B[k, 0:16]): 4 rows, 16 columns, one k per step. The zeroing of C is split off first
#    (decompose_reduction): the intrinsic only accumulates.
M, N, K = 32, 64, 24
A = te.placeholder((M, K), name="A")
B = te.placeholder((K, N), name="B")
func = te.create_prim_func([A, B, te.ops.matmul(A, B)], name="matmul")


def tiled(rows: int):
    sch = sched.Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, [None, rows])
    jo, ji = sch.split(j, [None, 16])
    ko, ki = sch.split(k, [None, 1])
    sch.reorder(io, jo, ko, ii, ji, ki)
    sch.decompose_reduction(block, ko)
    return sch, ii


sch, ii = tiled(4)
sch.tensorize(ii, "outer_product_4x16_f32")
print(sch.func.script())        # the tile's loops are now the intrinsic's vector FMAs

rng = np.random.default_rng(0)
a, b = rng.random((M, K), dtype=np.float32), rng.random((K, N), dtype=np.float32)
c = np.zeros((M, N), np.float32)
sched.build(sch.func, target="c")(a, b, c)
print("outer product micro-kernel, max error:", np.abs(c - a @ b).max())

# 2. A tile of the wrong shape is refused, with the first difference.
sch, ii = tiled(8)
try:
    sch.tensorize(ii, "outer_product_4x16_f32")
except sched.ScheduleError as error:
    print("refused:", str(error).splitlines()[0])


# 3. An intrinsic of our own: the same rank-1 update for 2 rows, its implementation with the
#    row loop unrolled and the columns vectorized. The implementation's parameters bind where
#    the description's matched, in order.
@T.prim_func
def outer_2x16_desc(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (2, 1), "float32", offset_factor=1)
    B = T.match_buffer(b, (1, 16), "float32", offset_factor=1)
    C = T.match_buffer(c, (2, 16), "float32", offset_factor=1)
    with T.block("root"):
        T.reads(C[0:2, 0:16], A[0:2, 0:1], B[0:1, 0:16])
        T.writes(C[0:2, 0:16])
        for i, j, k in T.grid(2, 16, 1):
            with T.block("update"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func
def outer_2x16_impl(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (2, 1), "float32", offset_factor=1)
    B = T.match_buffer(b, (1, 16), "float32", offset_factor=1)
    C = T.match_buffer(c, (2, 16), "float32", offset_factor=1)
    with T.block("root"):
        T.reads(C[0:2, 0:16], A[0:2, 0:1], B[0:1, 0:16])
        T.writes(C[0:2, 0:16])
        for i in T.unroll(2):
            for j in T.vectorized(16):
                with T.block("fma"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    C[vi, vj] = C[vi, vj] + A[vi, 0] * B[0, vj]


TensorIntrin.register("tutorial_outer_2x16", outer_2x16_desc, outer_2x16_impl, override=True)
sch, ii = tiled(2)
sch.tensorize(ii, "tutorial_outer_2x16")
c = np.zeros((M, N), np.float32)
sched.build(sch.func, target="c")(a, b, c)
print("our own intrinsic, max error:", np.abs(c - a @ b).max())
print(sch.trace)

# 4. Tensor cores: fp16 in, fp32 out, with TVM's wmma intrinsics over the fragment scopes
#    wmma.matrix_a / wmma.matrix_b / wmma.accumulator. They run their reference semantics on
#    every target today (each thread holds whole fragments), so the numbers check on the CPU.
tc = hs.gpu_matmul_tensor_core(64, 64, 32)
print(tc.trace)
a16 = rng.standard_normal((64, 32)).astype(np.float16)
b16 = rng.standard_normal((32, 64)).astype(np.float16)
c32 = np.zeros((64, 64), np.float32)
sched.build(tc.func, target="c")(a16, b16, c32)
expected = a16.astype(np.float32) @ b16.astype(np.float32)
print("tensor-core schedule on the C target, max error:", np.abs(c32 - expected).max())

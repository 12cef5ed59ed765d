"""Tutorial 12 (the tensor-core tutorial issue 12 calls "tutorial 09"; 09 teaches CPU speed):
an fp16 matmul, accumulated in fp32, on tensor cores, scheduled as TVM schedules it.

A tensor core multiplies 16x16 tiles held in *fragments*, spread over the 32 lanes of a warp.
In sched, as in TVM, a fragment is a buffer of scope "wmma.matrix_a", "wmma.matrix_b" or
"wmma.accumulator", filled and used by tensor intrinsics (`sch.tensorize(loop, name)`, tutorial
11). Each intrinsic's implementation is its reference loop nest marked as one warp-wide call: the
C target runs the loops (every thread holds a whole fragment), the CUDA target emits
`nvcuda::wmma` calls, run by a warp together; the build checks that every lane of a warp makes
each call with the same operands. Step 8 does the same with mma.sync and ldmatrix (scope
"warp"). Run: `python tutorials/12_tensor_cores.py`.
"""

import numpy as np

import sched
from sched import compute as te
from sched import hand_schedules
from sched.cuda.device import gpu_available
from sched.hand_schedules import gpu_matmul_mma

M, N, K = 128, 128, 64
A = te.placeholder((M, K), "float16", name="A")
B = te.placeholder((K, N), "float16", name="B")
k = te.reduce_axis((0, K), name="k")
C = te.compute((M, N), lambda i, j: te.sum(te.cast(A[i, k], "float32")
                                           * te.cast(B[k, j], "float32"), axis=k), name="C")
func = te.create_prim_func([A, B, C], name="matmul_fp16")


def tensor_core_schedule(store_intrinsic: bool = True) -> sched.Schedule:
    """Steps 1 to 4; without `store_intrinsic` the accumulator is stored element by
    element by 32 threads (step 7)."""
    # 1. Tiles: a thread block computes 64x64 of C with 2x2 warps (threadIdx.z, threadIdx.y); each
    #    warp 2x2 fragments of 16x16; K advances 32 at a time (two 16-steps of the tensor core).
    sch = sched.Schedule(func)
    block = sch.get_block("C")
    i, j, r = sch.get_loops(block)
    bi, wi, fi, ii = sch.split(i, [None, 2, 2, 16])
    bj, wj, fj, jj = sch.split(j, [None, 2, 2, 16])
    ko, ki, kk = sch.split(r, [None, 2, 16])
    sch.reorder(bi, bj, wi, wj, ko, ki, fi, fj, ii, jj, kk)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(wi, "threadIdx.z")
    sch.bind(wj, "threadIdx.y")

    # 2. The accumulator lives in fragments, one set per warp: cache C's writes in
    #    "wmma.accumulator" and store them after the warp's k loop.
    accumulator = sch.cache_write(block, 0, "wmma.accumulator")
    sch.reverse_compute_at(accumulator, wj)

    # 3. Two-level staging, TVM's: A (and B) global -> shared, per block and step of K; shared ->
    #    fragment, per warp and 16 of k. The shared tile sits under k_0, inside the warp loops, so
    #    in the block IR each warp recomputes it: its runs store the same values, and the fragment
    #    reread in between reads those values again. The dependence analysis proves that
    #    (RUNS_RULE in sched/polyhedral/runs.py), so the step is legal. Then every thread of the
    #    block copies a share of the tile (a cooperative fetch: 32 lanes on threadIdx.x).
    for index, scope in ((0, "wmma.matrix_a"), (1, "wmma.matrix_b")):
        shared = sch.cache_read(block, index, "shared")
        fragment = sch.cache_read(block, index, scope)
        sch.compute_at(fragment, ki)
        sch.compute_at(shared, ko)
        fused = sch.fuse(*sch.get_loops(shared)[-2:])
        _, tz, ty, tx = sch.split(fused, [None, 2, 2, 32])
        sch.bind(tz, "threadIdx.z")
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")

    # 4. Tensorize: each 16x16 (x16) nest becomes one intrinsic. The zeroing of the accumulator is
    #    split off first (decompose_reduction), to be the fill intrinsic.
    init = sch.decompose_reduction(block, ko)


    def tile_loops(stage):
        """The last two loops of `stage` split by 16, the 16s innermost: the outer 16-loop."""
        rows, cols = sch.get_loops(stage)[-2:]
        row_tiles, row = sch.split(rows, [None, 16])
        col_tiles, col = sch.split(cols, [None, 16])
        sch.reorder(row_tiles, col_tiles, row, col)
        return row


    sch.tensorize(tile_loops(sch.get_block("A_shared_wmma_matrix_a")), "wmma_load_16x16x16_f16_a")
    sch.tensorize(tile_loops(sch.get_block("B_shared_wmma_matrix_b")), "wmma_load_16x16x16_f16_b")
    sch.tensorize(sch.get_loops(init)[-2], "wmma_fill_16x16x16_f32")
    sch.tensorize(sch.get_loops(block)[-3], "wmma_sync_16x16x16_f16f16f32")
    if store_intrinsic:
        sch.tensorize(tile_loops(accumulator), "wmma_store_16x16x16_f32_global")
    else:
        _, lanes = sch.split(sch.fuse(*sch.get_loops(accumulator)[-2:]), [None, 32])
        sch.bind(lanes, "threadIdx.x")
    return sch


sch = tensor_core_schedule()
print("== the scheduled IR ==")
print(sch.func.script())
print("== the schedule, as Python ==")
print(sch.trace)

# 5. The numbers: the C target runs the intrinsics' reference loops; "cuda-emu" compiles the
#    CUDA source that ships (wmma calls included) against sched's emulation header.
rng = np.random.default_rng(0)
a = rng.standard_normal((M, K)).astype(np.float16)
b = rng.standard_normal((K, N)).astype(np.float16)
expected = a.astype(np.float32) @ b.astype(np.float32)
for target in ("c", "cuda-emu"):
    c = np.zeros((M, N), np.float32)
    sched.build(sch.func, target=target)(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)
    print(f"target {target!r} matches numpy")

# 6. The CUDA source: fragments are nvcuda::wmma::fragment arrays (per warp), the intrinsics
#    calls; NVRTC compiles it without a GPU, and the resource report shows no spills.
kernel = sched.build(sch.func, target="cuda", arch="sm_80")
print("== the tensor-core lines of the CUDA source ==")
print("\n".join(line for line in kernel.source.splitlines() if "wmma" in line))
print(kernel.resources)

# 7. What the GPU cannot run as the C target does is refused. Here the accumulator is stored
#    element by element by 32 threads instead of by the store intrinsic: on the GPU a lane
#    does not hold the elements it would store (CUDA leaves their places unspecified). The C
#    target runs it (each thread holds the whole fragment there).
by_threads = tensor_core_schedule(store_intrinsic=False)
try:
    sched.build(by_threads.func, target="cuda", arch="sm_80")
except sched.ScheduleError as error:
    print("refused on CUDA:", str(error).splitlines()[0][:220])
c = np.zeros((M, N), np.float32)
sched.build(by_threads.func, target="c")(a, b, c)
np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)
print("and it matches numpy on the C target")

# 8. mma.sync instead of wmma (TVM's mma intrinsics): the same steps with scope "warp" for the
#    accumulator and operand tiles and the intrinsics mma_fill_16x16_f32, mma_ldmatrix_f16_a /
#    mma_ldmatrix_f16_b (ldmatrix from the shared tiles), mma_f16f16f32 (two m16n8k16 each) and
#    mma_store_16x16_f32_global; hand_schedules.gpu_matmul_mma is that schedule. The CUDA
#    target emits inline PTX and gives each lane its part of every tile, in the registers the
#    PTX ISA assigns it (sched/cuda/mma.py); cuda-emu runs that PTX by its reference semantics.
#    A TVM schedule that first lays each warp buffer out in TVM's 32x8 register layout,
#        sch.transform_layout(A_warp, ("write", 0), lambda i, j: (i // 16, j // 16,
#            *shared_16x16_to_ldmatrix_32x8_layout(i % 16, j % 16)))   # sched.tensor_intrin.cuda
#    tensorizes with the same names (each has a 32x8 form too) and builds to the same PTX
#    (tests/cuda/test_mma_tvm_layout.py). The inner k loop can also double its warp operands,
#    loading step k + 1 while multiplying step k: annotate it with software_pipeline_stage
#    [0, 0, 1] (tests/cuda/test_register_pipeline.py).


def check_on_emulated_cuda(schedule: sched.Schedule, what: str, *markers: str) -> None:
    """Run `schedule` on cuda-emu against numpy, then print its source lines holding any of
    `markers`."""
    c = np.zeros((M, N), np.float32)
    emulated = sched.build(schedule.func, target="cuda-emu")
    emulated(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)
    print(f"{what}: matches numpy on cuda-emu; its lines with {', '.join(markers)}:")
    print("\n".join(sorted({line.strip()[:110] for line in emulated.source.splitlines()
                            if any(m in line for m in markers)})))


mma_sch = gpu_matmul_mma(M, N, K)
check_on_emulated_cuda(mma_sch, "mma.sync", "ldmatrix.sync", "mma.sync")

# Other types, with the same steps and TVM's names: int8 in, int32 out
#    (wmma_load_16x16x16_s8_a/b, wmma_fill_16x16x16_s32, wmma_sync_16x16x16_s8s8s32,
#    wmma_store_16x16x16_s32_global; sm_72 and later), fp16 accumulated in fp16
#    (wmma_sync_16x16x16_f16f16f16, wmma_fill_16x16x16_f16, wmma_store_16x16x16_f16_global),
#    and B held n x k (the `_trans` forms: wmma_load_16x16x16_s8_b_trans with
#    wmma_sync_16x16x16_s8s8s32_trans, C[i, j] += A[i, k] * B[j, k]). wmma needs each tile
#    32-byte aligned: 16 int8 columns are 16 bytes, so int8 tiles side by side along a row of a
#    shared buffer are refused at build, naming the tile; TVM holds B n x k for that. The
#    schedule of tests/schedule/test_tensorize_wmma.py (_tvm_style_schedule) runs each pair
#    on the C target and cuda-emu.
#
# TVM's current names work too: its loads and stores name their shared scope
# (wmma_load_16x16x16_f16_a_shared, ..._shared_dyn), and its helpers pick a group of names,
# with "shared.dyn" (TVM's dynamically sized shared memory) read as "shared" (sched sizes each
# block's shared memory itself, dynamic past 48 KB):
from sched.tensor_intrin import get_wmma_intrin_group  # noqa: E402

print(get_wmma_intrin_group("shared.dyn", "global", "float16", "float32", trans_b=False))

# get_mma_intrin_group does the same for mma.sync. With trans_b=True (B held n x k, as a
# linear layer's weight is) it names mma_ldmatrix_f16_b_trans, which copies the shared tile
# as it is held, and mma_f16f16f32_trans_b, which reads it as B[j, k]: the warp tile then
# gets the A operand's registers, loaded by the A operand's ldmatrix (sched/cuda/mma.py).
# With out_dtype="float16" it names mma_f16f16f16 (the accumulator two halves to a register);
# with in_dtype="int8", out_dtype="int32", trans_b=True, mma_i8i8i32_trans_b (m16n8k32 on
# 16x32 int8 tiles; an int8 B must be held n x k on the GPU: ldmatrix transposes 16-bit
# elements only). TVM's int8 schedules lay their warp buffers out with
# shared_16x32_to_ldmatrix_32x16_layout (in sched.tensor_intrin.cuda): those forms match too.

# 9. Speed. The schedule above is correct but slow: on an H200 (4096^3, stop 21's benchmark,
#    benchmarks/gpu_tensor_core.py) it ran at 0.13x cuBLAS. Three changes, each a schedule
#    step, took it to 0.46x (346 TFLOP/s):
#    - fetch 8 halves per thread at a time: split the fused fetch loop by 8 innermost and
#      vectorize it (one 16-byte move; `lanes=8`, now the hand schedules' default);
#    - pad each row of the shared tiles by 8 halves, so that the rows a wmma or ldmatrix load
#      reads at once fall in different shared-memory banks: sch.storage_align(shared, 0,
#      axis=0, factor=32, offset=8) (`pad=8`, also a default now; 2x alone);
#    - pipeline the K loop: annotate it with software_pipeline_stage [0, 0, 2] (the two fetches
#      at stage 0, the multiply at stage 2), software_pipeline_order [0, 1, 2] and
#      software_pipeline_async_stages [0], so the fetches of the next two steps of K run
#      ahead as cp.async copies into triple-buffered tiles (`stages=3`), with a K step of 64
#      (`k_tiles=4`).
fast = hand_schedules.gpu_matmul_tensor_core(M, N, K, fragments=(2, 2), pad=8, stages=2)
check_on_emulated_cuda(fast, "padded, pipelined and 16 bytes a fetch", "cp.async")

# 10. On a GPU: torch tensors in, the same numbers out.
if gpu_available():
    import torch

    for schedule in (sch, mma_sch, fast):
        out = torch.zeros((M, N), device="cuda")
        sched.build(schedule.func, target="cuda")(torch.from_numpy(a).cuda(),
                                                  torch.from_numpy(b).cuda(), out)
        torch.cuda.synchronize()
        np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-4, atol=1e-3)
    print("on the GPU too")
else:
    print("(no GPU here: the kernel was compiled but not launched)")

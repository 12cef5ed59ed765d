"""Hand-written CUDA C for the emulator's tests, and how to run a source on it."""

from __future__ import annotations

from sched.cuda.emu.kernel import EmulatedKernel
from sched.ir import Buffer, BufferStore, IntImm, PrimFunc, SeqStmt
from sched.lower.launch import LaunchConfig


def copy_func(name: str, shapes, dtypes=None) -> PrimFunc:
    """A PrimFunc with buffers P0, P1... of `shapes`, the first read, the others written: the
    parameters an emulated kernel's arguments are checked against (its body is never run)."""
    dtypes = dtypes or ["float32"] * len(shapes)
    buffers = [Buffer(f"P{k}", tuple(IntImm(d) for d in shape), dtype)
               for k, (shape, dtype) in enumerate(zip(shapes, dtypes))]
    zero = IntImm(0)
    stores = tuple(BufferStore(b, b[(zero,) * b.ndim], (zero,) * b.ndim) for b in buffers[1:])
    return PrimFunc(name, tuple(buffers), stores[0] if len(stores) == 1 else SeqStmt(stores))


def emulate(source: str, name: str, shapes, block, grid=(1, 1, 1), dtypes=None,
            dynamic_shared_bytes=0, **options) -> EmulatedKernel:
    """`source`'s kernel `name` on the emulator, taking arrays of `shapes`."""
    launch = LaunchConfig(grid=grid, block=block, dynamic_shared_bytes=dynamic_shared_bytes)
    return EmulatedKernel(copy_func(name, shapes, dtypes), source, name, launch, **options)


# each lane of two warps writes what every shuffle gives it (out[op, thread])
SHUFFLES = r"""
extern "C" __global__ void shuffles(const int* __restrict__ in, int* __restrict__ out) {
    int t = threadIdx.x, v = in[t];
    int k = 0;
    out[k++ * 64 + t] = __shfl_sync(0xffffffff, v, (t + 3) % 32);
    out[k++ * 64 + t] = __shfl_sync(0xffffffff, v, 37);
    out[k++ * 64 + t] = __shfl_sync(0xffffffff, v, t + 5, 8);
    out[k++ * 64 + t] = __shfl_up_sync(0xffffffff, v, 3);
    out[k++ * 64 + t] = __shfl_up_sync(0xffffffff, v, 3, 16);
    out[k++ * 64 + t] = __shfl_down_sync(0xffffffff, v, 5);
    out[k++ * 64 + t] = __shfl_down_sync(0xffffffff, v, 5, 8);
    out[k++ * 64 + t] = __shfl_xor_sync(0xffffffff, v, 1);
    out[k++ * 64 + t] = __shfl_xor_sync(0xffffffff, v, 19);
    out[k++ * 64 + t] = __shfl_xor_sync(0xffffffff, v, 12, 8);
    out[k++ * 64 + t] = (int)__ballot_sync(0xffffffff, v % 3 == 0);
    out[k++ * 64 + t] = __any_sync(0xffffffff, v == 40);
    out[k++ * 64 + t] = __all_sync(0xffffffff, v >= 0);
    out[k++ * 64 + t] = (int)__activemask();
}
"""
SHUFFLE_COUNT = 14

# one warp per row: each lane sums a strided part of the row, then a __shfl_down_sync tree
WARP_ROW_SUM = r"""
extern "C" __global__ void warp_row_sum(const float* __restrict__ x, float* __restrict__ sums) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    float partial = 0.0f;
    for (int j = lane; j < 100; j += 32) partial += x[row * 100 + j];
    for (int offset = 16; offset > 0; offset /= 2)
        partial += __shfl_down_sync(0xffffffff, partial, offset);
    if (lane == 0) sums[row] = partial;
}
"""

# threads 32..63 return before the barrier the others wait at
EARLY_RETURN = r"""
extern "C" __global__ void early_return(const float* __restrict__ a, float* __restrict__ b) {
    __shared__ float tile[64];
    if (threadIdx.x >= 32) return;
    tile[threadIdx.x] = a[threadIdx.x];
    __syncthreads();
    b[threadIdx.x] = tile[31 - threadIdx.x];
}
"""

# odd and even threads wait at different barriers
DIVERGENT_BARRIERS = r"""
extern "C" __global__ void divergent(const float* __restrict__ a, float* __restrict__ b) {
    if (threadIdx.x % 2) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    b[threadIdx.x] = a[threadIdx.x];
}
"""

# thread 0 spins on a flag nobody sets, the others wait at the barrier
SPIN = r"""
extern "C" __global__ void spin(const float* __restrict__ a, float* __restrict__ b) {
    if (threadIdx.x == 0) {
        volatile float* flag = b;
        while (flag[1] != 42.0f) {
        }
    }
    __syncthreads();
    b[threadIdx.x] = a[threadIdx.x];
}
"""

# lanes 16..31 of the warp leave before the shuffle that lanes 0..15 make with the full mask
SHUFFLE_WITHOUT_LANES = r"""
extern "C" __global__ void partial_warp(const float* __restrict__ a, float* __restrict__ b) {
    float v = a[threadIdx.x];
    if (threadIdx.x >= 16) return;
    b[threadIdx.x] = __shfl_down_sync(0xffffffff, v, 1);
}
"""

# each thread writes its element to shared memory and reads its neighbour's: no barrier
MISSING_BARRIER = r"""
extern "C" __global__ void shift(const float* __restrict__ a, float* __restrict__ b) {
    __shared__ float tile[64];
    tile[threadIdx.x] = a[threadIdx.x];
    b[threadIdx.x] = tile[(threadIdx.x + 1) % 64];
}
"""

# every thread of every block adds into b[0] without an atomic
GLOBAL_RACE = r"""
extern "C" __global__ void global_sum(const float* __restrict__ a, float* __restrict__ b) {
    b[0] += a[threadIdx.x];
}
"""

# the same with atomicAdd: no race
ATOMIC_SUM = r"""
extern "C" __global__ void atomic_sum(const float* __restrict__ a, float* __restrict__ b) {
    atomicAdd(&b[0], a[blockIdx.x * blockDim.x + threadIdx.x]);
}
"""

# __half and __nv_bfloat16 through the conversions the code generator uses
HALF_ROUND_TRIP = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void round_trip(const float* __restrict__ x, __half* __restrict__ h,
                                      __nv_bfloat16* __restrict__ b) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    h[i] = __float2half_rn(x[i]);
    b[i] = __float2bfloat16_rn(x[i]);
}
"""

# dynamic shared memory: a 64 KB `extern __shared__` array
DYNAMIC_SHARED = r"""
extern "C" __global__ void reverse(const float* __restrict__ a, float* __restrict__ b) {
  extern __shared__ float tile[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[16383 - threadIdx.x] = a[i];
  __syncthreads();
  b[i] = tile[16383 - threadIdx.x] + tile[16383 - (threadIdx.x ^ 1)];
}
"""

# C = A @ B for (32, 32) half matrices, float out: four warps, each a 16 x 16 tile of C, k in
# steps of 16; B is read column-major (B_T holds its transpose)
WMMA_MATMUL = r"""
#include <mma.h>
using namespace nvcuda;
extern "C" __global__ void wmma_matmul(const __half* __restrict__ A, const __half* __restrict__ B_T,
                                       float* __restrict__ C) {
    int warp = threadIdx.x / 32, row = warp / 2 * 16, col = warp % 2 * 16;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::fill_fragment(c, 0.0f);
    for (int k = 0; k < 32; k += 16) {
        wmma::load_matrix_sync(a, A + row * 32 + k, 32);
        wmma::load_matrix_sync(b, B_T + col * 32 + k, 32);
        wmma::mma_sync(c, a, b, c);
    }
    for (int i = 0; i < c.num_elements; ++i) c.x[i] *= 2.0f;
    wmma::store_matrix_sync(C + row * 32 + col, c, 32, wmma::mem_row_major);
}
"""

# b = 2 * a through shared memory, 4 floats per thread per step, double-buffered with
# asynchronous copies; WAIT is the group the step waits for (0: its own, right; 1: the one
# before, wrong: its own copy has not landed)
PIPELINED_COPY = r"""
#include <cuda_pipeline.h>
extern "C" __global__ void pipelined(const float* __restrict__ a, float* __restrict__ b) {
    __shared__ __align__(16) float tile[2][128];
    int t = threadIdx.x;
    __pipeline_memcpy_async(&tile[0][t * 4], &a[t * 4], 16);
    __pipeline_commit();
    for (int step = 0; step < 4; ++step) {
        if (step + 1 < 4) {
            __pipeline_memcpy_async(&tile[(step + 1) % 2][t * 4], &a[(step + 1) * 128 + t * 4], 16);
        }
        __pipeline_commit();
        __pipeline_wait_prior(WAIT + 1);
        for (int j = 0; j < 4; ++j) b[step * 128 + t * 4 + j] = 2.0f * tile[step % 2][t * 4 + j];
    }
}
"""

# thread 3 dereferences a null pointer
CRASH = r"""
extern "C" __global__ void crash(const float* __restrict__ a, float* __restrict__ b) {
    float* nowhere = nullptr;
    b[threadIdx.x] = threadIdx.x == 3 ? *nowhere : a[threadIdx.x];
}
"""

# printf from a kernel, and a syntax error on line 4 when BROKEN is defined
PRINTS = r"""
#include <stdio.h>
extern "C" __global__ void prints(const float* __restrict__ a, float* __restrict__ b) {
    if (threadIdx.x == 0) printf("block %d says %g\n", (int)blockIdx.x, a[0]) BROKEN;
    b[threadIdx.x] = a[threadIdx.x];
}
"""

# one warp: D (16 x 8, float) = A (16 x 16, half, row-major) @ B (16 x 8; B_T holds it as
# 8 x 16), the tiles staged in shared memory by cp.async, loaded by ldmatrix, multiplied by
# mma.sync, all written as inline PTX the way TVM's code generator writes it
PTX_MMA = r"""
#include <cuda_fp16.h>
__device__ __forceinline__ unsigned shared_int(const void* pointer) {
    unsigned address;
    asm volatile("{ .reg .u64 smem_int; cvta.to.shared.u64 smem_int, %1; "
                 "cvt.u32.u64 %0, smem_int; }\n" : "=r"(address) : "l"(pointer));
    return address;
}
extern "C" __global__ void ptx_mma(const __half* __restrict__ A, const __half* __restrict__ B_T,
                                   float* __restrict__ D) {
    __shared__ __align__(16) __half A_shared[256];
    __shared__ __align__(16) __half B_shared[128];
    int lane = threadIdx.x;
    for (int k = lane; k < 32; k += 32) {        // 32 copies of 8 halves for A, 16 for B
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
                     :: "r"(shared_int(A_shared + k * 8)), "l"(A + k * 8));
        if (k < 16) {
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                         :: "r"(shared_int(B_shared + k * 8)), "l"(B_T + k * 8), "n"(16));
        }
    }
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::);
    __syncthreads();
    unsigned a[4], b[2];
    int r = lane % 8, j = lane / 8;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                 : "r"(shared_int(A_shared + (r + 8 * (j & 1)) * 16 + 8 * (j >> 1))));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(b[0]), "=r"(b[1])
                 : "r"(shared_int(B_shared + r * 16 + 8 * (j & 1))));
    float d[4], c[4] = {0.0f, 0.0f, 0.0f, 1.0f};
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
          "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
    int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) D[(g + 8 * (i >= 2)) * 8 + 2 * t + (i & 1)] = d[i];
}
"""

# 300 KB of shared memory in one block: more than any GPU has
TOO_MUCH_SHARED = r"""
extern "C" __global__ void hog(const float* __restrict__ a, float* __restrict__ b) {
    __shared__ float tile[75000];
    tile[threadIdx.x] = a[threadIdx.x];
    __syncthreads();
    b[threadIdx.x] = tile[threadIdx.x];
}
"""

# thread 63 writes no element of the tile, which thread 62 reads after the barrier
UNWRITTEN_SHARED = r"""
extern "C" __global__ void unwritten(const float* __restrict__ a, float* __restrict__ b) {
    __shared__ float tile[64];
    if (threadIdx.x < 63) tile[threadIdx.x] = a[blockIdx.x * 64 + threadIdx.x];
    __syncthreads();
    b[blockIdx.x * 64 + threadIdx.x] = tile[(threadIdx.x + 1) % 64];
}
"""

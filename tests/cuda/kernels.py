"""Hand-written CUDA C kernels for the toolchain and runtime tests (no code generator needed)."""

from __future__ import annotations

# c[i] = a[i] + b[i] for i < n; one thread per element
VECTOR_ADD = r"""
extern "C" __global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    c[i] = a[i] + b[i];
  }
}
"""

# C = A @ B for row-major (n, n) float matrices, n a multiple of TILE: 32x32 tiles of A and B
# staged in shared memory, a barrier before and after each tile is used
TILED_MATMUL = r"""
#define TILE 32
extern "C" __global__ void matmul(const float* __restrict__ A, const float* __restrict__ B,
                                  float* __restrict__ C, int n) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y;
  int col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += TILE) {
    As[threadIdx.y][threadIdx.x] = A[row * n + k0 + threadIdx.x];
    Bs[threadIdx.y][threadIdx.x] = B[(k0 + threadIdx.y) * n + col];
    __syncthreads();
    #pragma unroll
    for (int k = 0; k < TILE; ++k) {
      acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    }
    __syncthreads();
  }
  C[row * n + col] = acc;
}
"""

# y[i] = x[i] * alpha + y[i] in half precision, arithmetic through cuda_fp16.h
HALF_AXPY = r"""
#include <cuda_fp16.h>
extern "C" __global__ void half_axpy(const __half* __restrict__ x, __half* __restrict__ y,
                                     float alpha, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = __hfma(x[i], __float2half(alpha), y[i]);
  }
}
"""

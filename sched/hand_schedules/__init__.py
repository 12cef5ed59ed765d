"""Hand-written schedules for the common kernels, used by the tests, tutorials, benchmarks and
the demo. Each function builds the algorithm with the DSL and returns the `Schedule` (so that
`sch.func` is the scheduled function and `print(sch.trace)` shows the steps).

CPU (the C target):
- `cpu_matmul`: column panels of B packed per thread (cache_read "global" at the panel loop),
  a register tile of C (cache_write "local") sized from the host's vector width, vectorized
  and unrolled, panels in parallel.
- `cpu_matmul_tensorized`: C in 4x16 tiles, each k step one `outer_product_4x16_f32`
  tensor intrinsic (tensorize: 4 rows of 16-lane FMAs), row panels in parallel.
- `cpu_conv2d`: a register tile of output channels x rows x columns (one vector along the
  columns), the weights of each channel tile packed, the padded input computed first.
- `cpu_softmax` / `cpu_layer_norm`: rows in parallel, row reductions into vectors of partial
  results (rfactor), every stage under the row loop, vectorized along the columns.

GPU (CUDA; on the C target each thread block runs as loops over its threads):
- `gpu_matmul`: a block tile of C, A and B tiles staged in shared memory by all threads of
  the block, a 2-D register tile per thread.
- `gpu_matmul_pipelined`: gpu_matmul with its K loop software-pipelined (the next tiles
  copied by cp.async while the current one is multiplied, multi-buffered).
- `gpu_matmul_bias_relu`: the same, with the epilogue applied as the tile leaves registers.
- `gpu_softmax` / `gpu_layer_norm`: one block per row; row reductions spread over the threads
  with rfactor into shared memory.
- `gpu_softmax_rows` / `gpu_layer_norm_rows`: one block per row; each row reduction a
  cross-thread reduction (its reduce loop bound to threadIdx.x: warp shuffles, then shared
  memory across warps), its result in shared memory for every thread; `row_in_shared=True`
  stages the row in shared memory first (read from global memory once; no faster on an H200).
- `gpu_elementwise`: every loop fused, then blocks of threads.
- `gpu_conv2d`: output pixels over blocks and threads, padding inlined, the reduction in a
  register.
- `gpu_matmul_tensor_core`: fp16 in, fp32 out through the wmma m16n16k16 intrinsics
  (tensorize): each thread block a tile of 16x16 fragments, the fragments of A and B loaded
  from global memory per k step, the accumulators filled, multiplied and stored.
- `gpu_matmul_mma`: the same blocking through mma.sync m16n8k16 and ldmatrix (TVM's mma
  intrinsics on "warp" buffers: inline PTX, the warp's tiles in registers).

The CPU schedules are in `cpu.py`, the GPU ones in `gpu.py`; both build on `common.py`.
"""

from __future__ import annotations

from sched.hand_schedules.common import _matmul_func
from sched.hand_schedules.cpu import (
    cpu_conv2d,
    cpu_layer_norm,
    cpu_matmul,
    cpu_matmul_tensorized,
    cpu_softmax,
)
from sched.hand_schedules.gpu import (
    gpu_conv2d,
    gpu_elementwise,
    gpu_layer_norm,
    gpu_layer_norm_rows,
    gpu_matmul,
    gpu_matmul_bias_relu,
    gpu_matmul_mma,
    gpu_matmul_pipelined,
    gpu_matmul_tensor_core,
    gpu_softmax,
    gpu_softmax_rows,
)

__all__ = ["cpu_conv2d", "cpu_layer_norm", "cpu_matmul", "cpu_matmul_tensorized", "cpu_softmax",
           "gpu_conv2d", "gpu_elementwise", "gpu_layer_norm", "gpu_layer_norm_rows",
           "gpu_matmul", "gpu_matmul_bias_relu", "gpu_matmul_pipelined", "gpu_matmul_mma",
           "gpu_matmul_tensor_core", "gpu_softmax", "gpu_softmax_rows", "_matmul_func"]

"""Tutorial 7: a GPU kernel: bind loops to blocks and threads, stage tiles in shared memory, read
the CUDA source and the resource report.

It runs to the end on a machine without a GPU: the kernel is still compiled to a cubin (NVRTC,
for sm_90), and the same schedule runs on the C target, where each thread block is a loop over
its threads, split into phases at every barrier, so the numbers can be checked against numpy.
The CUDA source itself runs on the CPU too, with target "cuda-emu": g++ compiles it against
sched's emulation header, one host thread per CUDA thread. With a GPU it also runs there, on
torch tensors. Run: `python tutorials/07_gpu.py`.
"""

import numpy as np

import sched
from sched import compute as te
from sched.cuda.device import gpu_available

M, N, K = 256, 192, 128
A = te.placeholder((M, K), name="A")
B = te.placeholder((K, N), name="B")
func = te.create_prim_func([A, B, te.ops.matmul(A, B)], name="matmul")
sch = sched.Schedule(func)
C = sch.get_block("C")

# 1. Tiles: each thread block computes a 64 x 64 tile of C with 16 x 16 threads, each thread a
#    4 x 4 sub-tile; K goes in steps of 8.
i, j, k = sch.get_loops(C)
bi, ty, ii = sch.split(i, [None, 16, 4])
bj, tx, ji = sch.split(j, [None, 16, 4])
ko, ki = sch.split(k, [None, 8])
sch.reorder(bi, bj, ty, tx, ko, ki, ii, ji)

# 2. Bind: blocks of the grid and threads of a block. Binding is checked like `parallel`: no
#    dependence may be carried by a bound loop (binding k would be refused: it is a reduction).
sch.bind(bi, "blockIdx.y")
sch.bind(bj, "blockIdx.x")
sch.bind(ty, "threadIdx.y")
sch.bind(tx, "threadIdx.x")
try:
    sch.bind(ko, "threadIdx.z")
except sched.ScheduleError as error:
    print("== binding the reduce loop is refused ==")
    print(str(error).splitlines()[0])

# 3. Registers: each thread accumulates its 4 x 4 tile in a "local" buffer.
local = sch.cache_write(C, 0, "local")
sch.reverse_compute_at(local, tx)

# 4. Shared memory: the A and B tiles of each K step, loaded by all threads of the block
#    together. A shared buffer placed under thread loops covers what all the threads need.
for index in (0, 1):
    tile = sch.cache_read(C, index, "shared")
    sch.compute_at(tile, ko)
    fused = sch.fuse(*sch.get_loops(tile)[-2:])
    _, y, x = sch.split(fused, [None, 16, 16])
    sch.bind(y, "threadIdx.y")
    sch.bind(x, "threadIdx.x")
sch.decompose_reduction(C, ko)
sch.unroll(ii)
sch.unroll(ji)
print("== the scheduled IR ==")
print(sch.func.script())

# 5. The CUDA kernel: barriers (__syncthreads) come from an analysis of who reads what the
#    other threads wrote in shared memory.
kernel = sched.build(sch.func, target="cuda", arch="sm_90")
print("== the CUDA source ==")
print(kernel.source)
print("== the resource report (from ptxas) ==")
print(kernel.resources)
print("launch:", kernel.launch)

# 6. The same schedule on the C target, checked against numpy.
rng = np.random.default_rng(0)
a = rng.standard_normal((M, K)).astype("float32")
b = rng.standard_normal((K, N)).astype("float32")
c = np.zeros((M, N), "float32")
sched.build(sch.func, target="c")(a, b, c)
np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
print("the GPU schedule, run on the C target, matches numpy")

# 7. The CUDA source that ships, run on the CPU: target "cuda-emu" compiles `kernel.source` as
#    C++ (g++, with a header of sched's that maps threadIdx, __shared__, __syncthreads, warp
#    shuffles... onto host threads): one host thread per CUDA thread of a block, blocks one
#    after another. A barrier that not every thread reaches is reported at once with its line,
#    and sanitize="thread" runs it under ThreadSanitizer, where a race on global or shared memory
#    is an EmulationError with both accesses. Step through it with gdb:
#    `emulated.save_launch("matmul.launch", a, b, c)` returns the command.
emulated = sched.build(sch.func, target="cuda-emu")
assert emulated.source == kernel.source
c = np.zeros((M, N), "float32")
emulated(a, b, c)
np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
print("the CUDA source, emulated on the CPU, matches numpy:", emulated)

# 8. Dynamic shapes, as TVM's dlight fallback schedules them: fuse every loop, split by the
#    thread count, bind. `vi = f // m, vj = f % m` is not affine (m is a symbolic dim), but the
#    variables give f back, so two runs at the same (vi, vj) are one run: each thread writes its
#    own element, and the bind is accepted (with warnings: the model widens what isl cannot
#    represent, the fused extent m * n among them; sch.notes lists them). The flat index
#    f // m * m + f % m is just f.
n, m = te.var("n"), te.var("m")
X = te.placeholder((n, m), name="X")
Y = te.compute((n, m), lambda i, j: te.max(X[i, j], 0.0) * 2.0, name="Y")
dynamic = sched.Schedule(te.create_prim_func([X, Y], name="relu2"))
fused = dynamic.fuse(*dynamic.get_loops(dynamic.get_block("Y")))
bx, tx = dynamic.split(fused, [None, 128])
dynamic.bind(bx, "blockIdx.x")
dynamic.bind(tx, "threadIdx.x")
x = np.random.default_rng(1).standard_normal((37, 29)).astype("float32")
for target in ("c", "cuda-emu"):
    y = np.empty_like(x)
    sched.build(dynamic.func, target=target)(x, y)
    np.testing.assert_allclose(y, np.maximum(x, 0) * 2)
print("dynamic shapes, fused and bound:", dynamic.func.script().splitlines()[9].strip())

# 9. On a GPU: torch tensors, torch's current stream.
if gpu_available():
    import torch

    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    tc = torch.empty(M, N, device="cuda")
    sched.build(sch.func, target="cuda")(ta, tb, tc)
    torch.cuda.synchronize()
    np.testing.assert_allclose(tc.cpu().numpy(), a @ b, rtol=1e-4, atol=1e-4)
    print("on the GPU too")
else:
    print("(no GPU here: the kernel was compiled but not launched)")

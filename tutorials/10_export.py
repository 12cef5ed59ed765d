"""Tutorial 10: deploy a kernel: export it as C files a program builds without Python, call it
from a small C program, and use it as a PyTorch operator (torch.compile included).

`kernel.export(directory)` writes one C function per kernel (buffers as pointers, symbolic dims
as `int64_t`, a status code and a message function when an argument is wrong). For CUDA the
same call writes the cubin as a byte array and a launcher on the driver API (no NVRTC, no
Python at run time); that part needs no GPU to write and compile, only to run. Everything here
runs on a CPU-only machine with gcc. Run: `python tutorials/10_export.py`.
"""

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import torch

import sched
from sched import compute as te
from sched import hand_schedules

# 1. A kernel with a symbolic dim: n rows, matmul + bias + ReLU, scheduled for the CPU.
n = te.var("n")
A = te.placeholder((n, 64), "float32", name="A")
B = te.placeholder((64, 32), "float32", name="B")
bias = te.placeholder((32,), "float32", name="bias")
func = te.create_prim_func([A, B, bias, te.ops.matmul_bias_relu(A, B, bias)], name="mbr")
print("== the function ==")
print(func.script())
sch = sched.Schedule(func)
i, j, k = sch.get_loops(sch.get_block("C"))
sch.parallel(i)                      # rows on OpenMP threads, checked like any step
kernel = sched.build(sch.func, target="c")

# 2. Export it: mbr.h declares `int mbr(const float *A, ..., float *D, int64_t n)`.
out = Path(tempfile.mkdtemp(prefix="sched_export_"))
exported = kernel.export(out / "mbr")
print("== export ==")
print(exported.summary())
header = exported.header.read_text()
print("\n".join(line for line in header.splitlines() if line.startswith(("int ", "const "))))

# 3. A small C program that calls it: no Python, no sched; it prints the status and the
#    message of a refused call (n = 0) too.
program = r"""
#include <stdio.h>
#include "mbr.h"

int main(void) {
    enum { N = 3 };
    float a[N * 64], b[64 * 32], bias[32], d[N * 32];
    for (int x = 0; x < N * 64; ++x) a[x] = (float)(x % 7) - 3.0f;
    for (int x = 0; x < 64 * 32; ++x) b[x] = (float)(x % 5) * 0.25f - 0.5f;
    for (int x = 0; x < 32; ++x) bias[x] = 0.1f * (float)x;
    int status = mbr(a, b, bias, d, N);
    if (status != SCHED_OK) { fprintf(stderr, "%s\n", mbr_error_message()); return 1; }
    for (int x = 0; x < N * 32; ++x) printf("%.6f\n", d[x]);
    status = mbr(a, b, bias, d, 0);
    fprintf(stderr, "n = 0: %s: %s\n", mbr_status_string(status), mbr_error_message());
    return status == SCHED_ERROR_BAD_DIM ? 0 : 1;
}
"""
(out / "mbr" / "main.c").write_text(program)
subprocess.run(["gcc", "-std=c11", "-O2", "-march=native", "-fopenmp", "main.c", "mbr.c", "-o",
                "main", "-lm"], cwd=out / "mbr", check=True)
done = subprocess.run(["./main"], cwd=out / "mbr", capture_output=True, text=True, check=True)
print("== the C program ==")
print(done.stderr.strip())
from_c = np.array(done.stdout.split(), dtype=np.float32).reshape(3, 32)
a = (np.arange(3 * 64) % 7 - 3).astype(np.float32).reshape(3, 64)
b = ((np.arange(64 * 32) % 5) * 0.25 - 0.5).astype(np.float32).reshape(64, 32)
c = (0.1 * np.arange(32, dtype=np.float32)).astype(np.float32)
expected = np.maximum(a @ b + c, 0)
assert np.allclose(from_c, expected, rtol=1e-5, atol=1e-5)
print("the C program's numbers match numpy")

# 4. For CUDA the same call writes the cubin, the header, a driver-API launcher and a
#    CMake files; it compiles here without a GPU (NVRTC, for the arch named).
gpu_kernel = sched.build(hand_schedules.gpu_matmul(256, 192, 128).func, target="cuda",
                         arch="sm_90")
print("== CUDA export ==")
print(gpu_kernel.export(out / "matmul_cuda").summary())

# 5. A PyTorch operator: functional (allocates the output) and out forms, with a fake
#    implementation from the function's shapes, so torch.compile(fullgraph=True) traces it.
sched.torch.custom_op("tutorial::mbr", kernel)
ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
print("== as a torch operator ==")
print(torch.ops.tutorial.mbr(ta, tb, tc)[:, :4])
d = torch.empty(3, 32)
torch.ops.tutorial.mbr_out(ta, tb, tc, d)
compiled = torch.compile(lambda x, y, z: torch.ops.tutorial.mbr(x, y, z) * 2, fullgraph=True)
assert torch.allclose(compiled(ta, tb, tc), d * 2)
assert torch.allclose(d, torch.from_numpy(expected), atol=1e-5)
print("torch.compile(fullgraph=True) ran the sched kernel: numbers match")

shutil.rmtree(out)                   # the files were for this run only

"""How long CUDA C takes to become a cubin: NVRTC in a fresh process (library load included,
`import sched` reported apart),
NVRTC in a warm process, nvcc, and a cache hit, on a register-tiled fp32 matmul kernel
(64 x 64 block tile staged in shared memory, 4 x 4 outputs per thread), for sm_80 and sm_90.

Targets (../shared/PERF.md, "build: schedule -> cubin"): < 1 s cold with NVRTC, < 10 ms for a
cache hit. This measures the compile step only (no lowering or code generation). Needs no GPU.

    python benchmarks/cuda_compile.py      # writes benchmarks/results/<cpu>/cuda_compile.json
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import cpu_name, measure, write_results  # noqa: E402
from sched.cuda.compile import compile_cuda, compiler_identity  # noqa: E402
from sched.cuda.resources import Resources  # noqa: E402

MATMUL = r"""
#define BM 64
#define BN 64
#define BK 16
// C (n, n) = A (n, n) @ B (n, n), n a multiple of 64; 256 threads, each a 4 x 4 tile of C
extern "C" __global__ void __launch_bounds__(256)
matmul(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int n) {
  __shared__ float As[BK][BM];
  __shared__ float Bs[BK][BN];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < n; k0 += BK) {
    for (int e = threadIdx.x; e < BM * BK; e += 256) {
      As[e % BK][e / BK] = A[(row0 + e / BK) * n + k0 + e % BK];
      Bs[e / BN][e % BN] = B[(k0 + e / BN) * n + col0 + e % BN];
    }
    __syncthreads();
    #pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[4], b[4];
      #pragma unroll
      for (int i = 0; i < 4; ++i) { a[i] = As[k][ty * 4 + i]; b[i] = Bs[k][tx * 4 + i]; }
      #pragma unroll
      for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
  #pragma unroll
  for (int i = 0; i < 4; ++i)
    #pragma unroll
    for (int j = 0; j < 4; ++j) C[(row0 + ty * 4 + i) * n + col0 + tx * 4 + j] = acc[i][j];
}
"""

FRESH_PROCESS = """
import json, pathlib, sys, time
start = time.perf_counter()
from sched.cuda.compile import compile_cuda
imported = time.perf_counter()
module = compile_cuda(sys.argv[1], sys.argv[2], cache_dir=pathlib.Path(sys.argv[3]))
done = time.perf_counter()
print(json.dumps({"import_s": imported - start, "compile_s": done - imported,
                  "from_cache": module.from_cache}))
"""


def _summary(times: list[float]) -> dict[str, float]:
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
            "repeats": len(times)}


def fresh_process_compile(arch: str, repeats: int = 5) -> tuple[dict, dict]:
    """NVRTC in a new Python process each time, on an empty cache: (the compile, NVRTC's
    library load included; the import of sched.cuda.compile, which imports sched)."""
    compiles, imports = [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as cache:
            out = subprocess.run([sys.executable, "-c", FRESH_PROCESS, MATMUL, arch, cache],
                                 capture_output=True, text=True, check=True).stdout
            result = json.loads(out)
            assert not result["from_cache"]
            compiles.append(result["compile_s"])
            imports.append(result["import_s"])
    return _summary(compiles), _summary(imports)


def uncached(arch: str, compiler: str):
    def run():
        with tempfile.TemporaryDirectory() as cache:
            assert not compile_cuda(MATMUL, arch, compiler, cache_dir=Path(cache)).from_cache
    return run


def main() -> None:
    device = cpu_name()
    rows = []
    for arch in ("sm_80", "sm_90"):
        with tempfile.TemporaryDirectory() as cache:
            module = compile_cuda(MATMUL, arch, cache_dir=Path(cache))
            hit = measure(lambda a=arch, c=cache: compile_cuda(MATMUL, a, cache_dir=Path(c)),
                          repeats=50)
        fresh = fresh_process_compile(arch)
        resources = Resources.from_log(module.log, "matmul", arch, threads_per_block=256)
        row = {"arch": arch, "cubin_bytes": len(module.cubin),
               "registers": resources.registers, "spill_bytes": resources.spill_stores,
               "static_shared_bytes": resources.static_shared_bytes,
               "nvrtc_fresh_process": fresh[0], "import_sched_fresh_process": fresh[1],
               "nvrtc_warm_process": measure(uncached(arch, "nvrtc"), repeats=10, warmup=1),
               "cache_hit": hit}
        if shutil.which("nvcc"):
            row["nvcc"] = measure(uncached(arch, "nvcc"), repeats=3, warmup=1)
        rows.append(row)
    versions = {"nvrtc": compiler_identity("nvrtc").split(" | ")[0],
                "nvcc": compiler_identity("nvcc") if shutil.which("nvcc") else None}
    path = write_results("cuda_compile", device, {
        "workload": "register-tiled fp32 matmul kernel, CUDA C -> cubin", "unit": "seconds",
        "targets": {"nvrtc_cold_s": 1.0, "cache_hit_s": 0.010}, "compilers": versions,
        "archs": rows})
    table = Table(title=f"CUDA C -> cubin on {device}")
    for column in ("arch", "cubin", "regs", "NVRTC fresh (ms)", "NVRTC warm (ms)", "nvcc (ms)",
                   "cache hit (ms)"):
        table.add_column(column)
    for row in rows:
        nvcc = f"{row['nvcc']['median_s'] * 1e3:.0f}" if "nvcc" in row else "-"
        table.add_row(row["arch"], f"{row['cubin_bytes']} B", str(row["registers"]),
                      f"{row['nvrtc_fresh_process']['median_s'] * 1e3:.0f}",
                      f"{row['nvrtc_warm_process']['median_s'] * 1e3:.0f}", nvcc,
                      f"{row['cache_hit']['median_s'] * 1e3:.2f}")
    Console().print(table)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

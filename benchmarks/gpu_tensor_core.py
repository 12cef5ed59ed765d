"""fp16 matmul 4096^3 on tensor cores (fp16 in, fp32 accumulate): sched's hand schedules
through mma.sync + ldmatrix (`gpu_matmul_mma`) and through wmma (`gpu_matmul_tensor_core`), in
several variants (register tile, 16-byte fetches, padded shared rows, a cp.async pipeline over
K), against torch.matmul on fp16 tensors (cuBLAS, fp32 accumulate, fp16 out: it writes half the
bytes of C that sched's fp32 output writes), in one process; and a linear layer's layout (the
weight held N x K, `trans_b=True`) against torch.matmul(a, w.t()).

Target (issue 12, H100): >= 0.7x cuBLAS with mma.sync.

    python benchmarks/gpu_tensor_core.py   # writes benchmarks/results/<gpu>/gpu_tensor_core.json
"""

from __future__ import annotations

import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from benchmarks.common import gpu_device, gpu_versions, measure_gpu, write_results  # noqa: E402

SIZE = 4096
# keyword arguments of the hand schedules: 16x16 accumulator `fragments` per warp, `warps` per
# block (block tile 16 * fragments * warps on each side), K in steps of 16 * `k_tiles`, `lanes`
# halves per fetch move (8: 16 bytes; 1: one at a time), shared rows padded by `pad` halves,
# `stages` > 1: the K loop pipelined (cp.async)
VARIANTS = (
    {"fragments": (4, 4), "warps": (2, 2), "lanes": 1, "pad": 0},
    {"fragments": (4, 4), "warps": (2, 2), "pad": 0},
    {"fragments": (4, 4), "warps": (2, 2), "pad": 8},
    {"fragments": (4, 4), "warps": (2, 2), "pad": 8, "stages": 3},
    {"fragments": (4, 4), "warps": (2, 2), "pad": 8, "stages": 3, "k_tiles": 4},
    {"fragments": (4, 2), "warps": (2, 4), "pad": 8, "stages": 3},
    {"fragments": (2, 4), "warps": (4, 2), "pad": 8, "stages": 4},
    {"fragments": (4, 4), "warps": (2, 2), "pad": 8, "stages": 4, "k_tiles": 4},
    {"fragments": (4, 4), "warps": (2, 4), "pad": 8, "stages": 3, "k_tiles": 4},
    {"fragments": (2, 4), "warps": (4, 2), "pad": 8, "stages": 3, "k_tiles": 4},
)


# the weight held N x K (C = A @ W.T): the best layouts of the NN runs
NT_VARIANTS = (
    {"fragments": (4, 4), "warps": (2, 2), "pad": 8, "stages": 3, "k_tiles": 4},
    {"fragments": (4, 4), "warps": (2, 4), "pad": 8, "stages": 3, "k_tiles": 4},
)


def main() -> None:
    device = gpu_device()
    import torch

    import sched
    from sched import hand_schedules

    a = torch.randn(SIZE, SIZE, device="cuda").half()
    b = torch.randn(SIZE, SIZE, device="cuda").half()
    reference = a.double() @ b.double()
    scale = reference.abs().max().item()
    flops = 2 * SIZE ** 3
    c = torch.empty(SIZE, SIZE, device="cuda")
    rows, errors = [], {}
    for schedule in ("gpu_matmul_mma", "gpu_matmul_tensor_core"):
        for options in VARIANTS:
            name = f"{schedule} " + " ".join(f"{k}={v}" for k, v in options.items())
            started = time.perf_counter()
            try:
                kernel = sched.build(getattr(hand_schedules, schedule)(
                    SIZE, SIZE, SIZE, **options).func, target="cuda")
            except Exception as error:  # noqa: BLE001 - one failed variant is a finding, reported
                rows.append({"variant": name, "error": f"{type(error).__name__}: {error}"[:2000]})
                continue
            build_s = time.perf_counter() - started
            c.fill_(float("nan"))
            kernel(a, b, c)
            torch.cuda.synchronize()
            errors[name] = ((c.double() - reference).abs().max() / scale).item()
            timing = measure_gpu(lambda kernel=kernel: kernel(a, b, c))
            rows.append({"variant": name, **timing, "tflops": flops / timing["median_s"] / 1e12,
                         "build_s": build_s, "relative_error": errors[name],
                         "resources": str(kernel.resources)})
    # a linear layer's layout: the weight held N x K, C = A @ W.T (`trans_b=True`)
    weight = b.t().contiguous()
    nt_rows = []
    for schedule in ("gpu_matmul_mma", "gpu_matmul_tensor_core"):
        for options in NT_VARIANTS:
            name = f"nt {schedule} " + " ".join(f"{k}={v}" for k, v in options.items())
            try:
                kernel = sched.build(getattr(hand_schedules, schedule)(
                    SIZE, SIZE, SIZE, trans_b=True, **options).func, target="cuda")
            except Exception as error:  # noqa: BLE001 - one failed variant is a finding, reported
                nt_rows.append({"variant": name,
                                "error": f"{type(error).__name__}: {error}"[:2000]})
                continue
            c.fill_(float("nan"))
            kernel(a, weight, c)
            torch.cuda.synchronize()
            errors[name] = ((c.double() - reference).abs().max() / scale).item()
            timing = measure_gpu(lambda kernel=kernel: kernel(a, weight, c))
            nt_rows.append({"variant": name, **timing,
                            "tflops": flops / timing["median_s"] / 1e12,
                            "relative_error": errors[name], "resources": str(kernel.resources)})
    half_out = torch.empty(SIZE, SIZE, device="cuda", dtype=torch.float16)
    cublas_nt = measure_gpu(lambda: torch.matmul(a, weight.t(), out=half_out))
    nt_rows.append({"variant": "nt torch.matmul(a, w.t()) fp16 (cuBLAS)", **cublas_nt,
                    "tflops": flops / cublas_nt["median_s"] / 1e12})
    cublas = measure_gpu(lambda: torch.matmul(a, b, out=half_out))
    rows.append({"variant": "torch.matmul fp16 (cuBLAS)", **cublas,
                 "tflops": flops / cublas["median_s"] / 1e12})
    timed = [row for row in rows if "median_s" in row and row is not rows[-1]]
    best = {schedule: min((row for row in timed if row["variant"].startswith(schedule + " ")),
                          key=lambda row: row["median_s"], default=None)
            for schedule in ("gpu_matmul_mma", "gpu_matmul_tensor_core")}
    ratios = {schedule: cublas["median_s"] / row["median_s"]
              for schedule, row in best.items() if row is not None}
    nt_timed = [row for row in nt_rows if "median_s" in row and row is not nt_rows[-1]]
    nt_ratios = {row["variant"]: cublas_nt["median_s"] / row["median_s"] for row in nt_timed}
    path = write_results("gpu_tensor_core", device, {
        "versions": gpu_versions(),
        "workload": {"M": SIZE, "N": SIZE, "K": SIZE, "in": "float16", "accumulate": "float32"},
        "variants": rows, "matches": {name: error < 1e-3 for name, error in errors.items()},
        "best_ratio_to_cublas": ratios, "targets": {"mma_ratio_to_cublas": 0.7},
        "nt_variants": nt_rows, "nt_ratio_to_cublas": nt_ratios})
    for row in rows + nt_rows:
        figure = (f"{row['median_s'] * 1e3:8.3f} ms {row['tflops']:6.1f} TFLOP/s"
                  if "median_s" in row else row["error"][:200])
        print(f"{row['variant']:90s} {figure}")
    print(f"best/cuBLAS: {ratios}; wrote {path}")


if __name__ == "__main__":
    main()

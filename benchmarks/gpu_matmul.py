"""fp32 matmul 4096^3 on the GPU: the hand schedule (and its variant with the K loop
software-pipelined over 3 stages, cp.async; and larger register tiles) against torch.matmul
(TF32 off), and matmul + bias + ReLU fused in one kernel (the default tile, and the larger tiles
pipelined) against torch eager (three ops), in one process.

Targets (PERF.md, H100): matmul >= 0.8x torch; fused epilogue >= 1.2x eager.

    python benchmarks/gpu_matmul.py     # writes benchmarks/results/<gpu>/gpu_matmul.json
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from benchmarks.common import gpu_device, gpu_versions, measure_gpu, write_results  # noqa: E402

SIZE = 4096


def main() -> None:
    device = gpu_device()
    import torch

    import sched
    from sched import hand_schedules

    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(SIZE, SIZE, device="cuda")
    b = torch.randn(SIZE, SIZE, device="cuda")
    bias = torch.randn(SIZE, device="cuda")
    reference = (a.double() @ b.double())
    flops = 2 * SIZE ** 3
    matmul = sched.build(hand_schedules.gpu_matmul(SIZE, SIZE, SIZE).func, target="cuda")
    pipelined = sched.build(hand_schedules.gpu_matmul_pipelined(SIZE, SIZE, SIZE, stages=3)
                            .func, target="cuda")
    fused = sched.build(hand_schedules.gpu_matmul_bias_relu(SIZE, SIZE, SIZE).func,
                        target="cuda")
    c = torch.empty(SIZE, SIZE, device="cuda")
    d = torch.empty(SIZE, SIZE, device="cuda")
    scale = reference.abs().max().item()
    pipelined(a, b, c)
    torch.cuda.synchronize()
    errors = {"matmul_pipelined": ((c.double() - reference).abs().max() / scale).item()}
    matmul(a, b, c)
    fused(a, b, bias, d)
    torch.cuda.synchronize()
    errors |= {"matmul": ((c.double() - reference).abs().max() / scale).item(),
              "matmul_bias_relu": ((d.double() - torch.relu(reference + bias.double()))
                                   .abs().max() / scale).item()}
    tiles = {}          # larger register tiles: (block tile, thread tile, stages)
    for block_tile, thread_tile, stages in (((128, 128), (8, 8), 1), ((128, 128), (8, 8), 3),
                                            ((128, 64), (8, 4), 3)):
        schedule = (hand_schedules.gpu_matmul_pipelined(SIZE, SIZE, SIZE, block_tile,
                                                        thread_tile, stages=stages)
                    if stages > 1 else
                    hand_schedules.gpu_matmul(SIZE, SIZE, SIZE, block_tile, thread_tile))
        kernel = sched.build(schedule.func, target="cuda")
        c.fill_(float("nan"))
        kernel(a, b, c)
        torch.cuda.synchronize()
        name = f"sched matmul {block_tile} per block, {thread_tile} per thread, {stages} stages"
        errors[name] = ((c.double() - reference).abs().max() / scale).item()
        tiles[name] = measure_gpu(lambda kernel=kernel: kernel(a, b, c))
    fused_tiles = {}    # the fused epilogue on the larger tiles, pipelined
    for block_tile, thread_tile, k_tile in (((128, 64), (8, 4), 8), ((128, 64), (8, 4), 16)):
        kernel = sched.build(hand_schedules.gpu_matmul_bias_relu(
            SIZE, SIZE, SIZE, block_tile, thread_tile, k_tile, stages=3).func, target="cuda")
        d.fill_(float("nan"))
        kernel(a, b, bias, d)
        torch.cuda.synchronize()
        name = (f"sched matmul+bias+relu (fused) {block_tile} per block, {thread_tile} per "
                f"thread, K step {k_tile}, 3 stages")
        errors[name] = ((d.double() - torch.relu(reference + bias.double())).abs().max()
                        / scale).item()
        fused_tiles[name] = measure_gpu(lambda kernel=kernel: kernel(a, b, bias, d))
    variants = {
        **tiles, **fused_tiles,
        "sched matmul": measure_gpu(lambda: matmul(a, b, c)),
        "sched matmul, K loop pipelined (3 stages, cp.async)":
            measure_gpu(lambda: pipelined(a, b, c)),
        "torch.matmul": measure_gpu(lambda: torch.matmul(a, b, out=c)),
        "sched matmul+bias+relu (fused)": measure_gpu(lambda: fused(a, b, bias, d)),
        "torch eager matmul, add, relu": measure_gpu(lambda: torch.relu(a @ b + bias)),
    }
    rows = [{"variant": name, **timing, "tflops": flops / timing["median_s"] / 1e12}
            for name, timing in variants.items()]
    ratio = variants["torch.matmul"]["median_s"] / variants["sched matmul"]["median_s"]
    best_tile = min(tiles, key=lambda name: tiles[name]["median_s"])
    best_ratio = variants["torch.matmul"]["median_s"] / tiles[best_tile]["median_s"]
    best_fused = min(fused_tiles, key=lambda name: fused_tiles[name]["median_s"])
    best_fused_ratio = (variants["torch eager matmul, add, relu"]["median_s"]
                        / fused_tiles[best_fused]["median_s"])
    fused_ratio = (variants["torch eager matmul, add, relu"]["median_s"]
                   / variants["sched matmul+bias+relu (fused)"]["median_s"])
    path = write_results("gpu_matmul", device, {
        "versions": gpu_versions(), "workload": {"M": SIZE, "N": SIZE, "K": SIZE,
                                                 "dtype": "float32", "tf32": False},
        "variants": rows, "relative_errors": errors,
        "matches": {k: v < 1e-4 for k, v in errors.items()},
        "ratio_matmul_to_torch": ratio, "ratio_fused_to_eager": fused_ratio,
        "best_larger_tile": best_tile, "ratio_best_larger_tile_to_torch": best_ratio,
        "best_fused": best_fused, "ratio_best_fused_to_eager": best_fused_ratio,
        "resources": {"matmul": str(matmul.resources), "fused": str(fused.resources),
                      "matmul_pipelined": str(pipelined.resources)},
        "targets": {"matmul": 0.8, "fused": 1.2}})
    for name, timing in variants.items():
        print(f"{name:70s} {timing['median_s'] * 1e3:8.3f} ms "
              f"{flops / timing['median_s'] / 1e12:6.1f} TFLOP/s")
    print(f"matmul {ratio:.2f}x torch ({best_ratio:.2f}x with {best_tile}), fused "
          f"{fused_ratio:.2f}x eager ({best_fused_ratio:.2f}x with {best_fused}); wrote {path}")


if __name__ == "__main__":
    main()

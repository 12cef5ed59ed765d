"""Row softmax and layer norm, 8192 x 8192 fp32, on the GPU: the hand schedules against torch
and against copy bandwidth (bytes read + written over time), in one process.

Targets (PERF.md, H100): >= 0.9x torch; softmax >= 80% of copy bandwidth.

    python benchmarks/gpu_rows.py       # writes benchmarks/results/<gpu>/gpu_rows.json
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from benchmarks.common import gpu_device, gpu_versions, measure_gpu, write_results  # noqa: E402

ROWS = COLS = 8192


def main() -> None:
    device = gpu_device()
    import torch

    import sched
    from sched import hand_schedules

    x = torch.randn(ROWS, COLS, device="cuda")
    gamma = torch.randn(COLS, device="cuda")
    beta = torch.randn(COLS, device="cuda")
    out = torch.empty_like(x)
    moved = 2 * x.numel() * 4                          # read once, write once
    copy = measure_gpu(lambda: out.copy_(x))
    softmax = sched.build(hand_schedules.gpu_softmax(ROWS, COLS).func, target="cuda")
    layer_norm = sched.build(hand_schedules.gpu_layer_norm(ROWS, COLS).func, target="cuda")
    results = {}
    for name, ours, theirs, reference in (
            ("softmax", lambda: softmax(x, out), lambda: torch.softmax(x, dim=1),
             lambda: torch.softmax(x.double(), dim=1)),
            ("layer_norm", lambda: layer_norm(x, gamma, beta, out),
             lambda: torch.nn.functional.layer_norm(x, (COLS,), gamma, beta),
             lambda: torch.nn.functional.layer_norm(x.double(), (COLS,), gamma.double(),
                                                    beta.double()))):
        ours()
        torch.cuda.synchronize()
        expected = reference()
        error = ((out.double() - expected).abs().max() / expected.abs().max()).item()
        mine, torch_time = measure_gpu(ours), measure_gpu(theirs)
        results[name] = {"sched": mine, "torch": torch_time, "relative_error": error,
                         "matches": error < 1e-4,
                         "ratio_to_torch": torch_time["median_s"] / mine["median_s"],
                         "bandwidth_gbs": moved / mine["median_s"] / 1e9,
                         "fraction_of_copy": copy["median_s"] / mine["median_s"]}
    path = write_results("gpu_rows", device, {
        "versions": gpu_versions(), "workload": {"rows": ROWS, "cols": COLS,
                                                 "dtype": "float32"},
        "copy": {**copy, "bandwidth_gbs": moved / copy["median_s"] / 1e9},
        "results": results, "targets": {"ratio_to_torch": 0.9, "softmax_fraction_of_copy": 0.8}})
    for name, row in results.items():
        print(f"{name}: {row['ratio_to_torch']:.2f}x torch, "
              f"{row['fraction_of_copy']:.0%} of copy bandwidth")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

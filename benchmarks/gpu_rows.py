"""Row softmax and layer norm, 8192 x 8192 fp32 (or --size N: N x N), on the GPU: the hand
schedules against torch and against copy bandwidth (bytes read + written over time), in one
process.

Targets (PERF.md, H100): >= 0.9x torch; softmax >= 80% of copy bandwidth; issue 12 asks
4096 x 4096 at >= 80% of HBM bandwidth and >= torch, softmax and layer norm.

    python benchmarks/gpu_rows.py       # writes benchmarks/results/<gpu>/gpu_rows.json
    python benchmarks/gpu_rows.py --size 4096        # ... gpu_rows_4096.json
"""

from __future__ import annotations

import argparse
import functools
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from benchmarks.common import gpu_device, gpu_versions, measure_gpu, write_results  # noqa: E402

THREADS = (128, 256, 512)      # threads per row (one block per row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=8192, help="rows = columns")
    size = parser.parse_args().size
    rows = cols = size
    device = gpu_device()
    import torch

    import sched
    from sched import hand_schedules

    x = torch.randn(rows, cols, device="cuda")
    gamma = torch.randn(cols, device="cuda")
    beta = torch.randn(cols, device="cuda")
    out = torch.empty_like(x)
    moved = 2 * x.numel() * 4                          # read once, write once
    copy = measure_gpu(lambda: out.copy_(x))

    def in_shared(schedule):
        return functools.partial(schedule, row_in_shared=True)

    schedules = {   # rfactor'd partials; cross-thread reductions; the row in shared memory
        "softmax": {"gpu_softmax": hand_schedules.gpu_softmax,
                    "gpu_softmax_rows": hand_schedules.gpu_softmax_rows,
                    "gpu_softmax_rows row_in_shared": in_shared(hand_schedules.gpu_softmax_rows)},
        "layer_norm": {"gpu_layer_norm": hand_schedules.gpu_layer_norm,
                       "gpu_layer_norm_rows": hand_schedules.gpu_layer_norm_rows,
                       "gpu_layer_norm_rows row_in_shared":
                           in_shared(hand_schedules.gpu_layer_norm_rows)}}
    arguments = {"softmax": (x, out), "layer_norm": (x, gamma, beta, out)}
    results = {}
    for name, theirs, reference in (
            ("softmax", lambda: torch.softmax(x, dim=1),
             lambda: torch.softmax(x.double(), dim=1)),
            ("layer_norm", lambda: torch.nn.functional.layer_norm(x, (cols,), gamma, beta),
             lambda: torch.nn.functional.layer_norm(x.double(), (cols,), gamma.double(),
                                                    beta.double()))):
        expected = reference()
        torch_time = measure_gpu(theirs)
        variants = {}
        for schedule, make in schedules[name].items():
            for threads in THREADS:
                kernel = sched.build(make(rows, cols, threads).func, target="cuda")
                out.fill_(float("nan"))
                kernel(*arguments[name])
                torch.cuda.synchronize()
                error = ((out.double() - expected).abs().max() / expected.abs().max()).item()
                timing = measure_gpu(lambda kernel=kernel, args=arguments[name]: kernel(*args))
                variants[f"{schedule}, {threads} threads"] = {
                    **timing, "relative_error": error, "matches": error < 1e-4,
                    "fraction_of_copy": copy["median_s"] / timing["median_s"]}
        best = min(variants, key=lambda v: variants[v]["median_s"])
        mine = variants[best]
        results[name] = {"sched": mine, "best_variant": best, "variants": variants,
                         "torch": torch_time, "relative_error": mine["relative_error"],
                         "matches": all(v["matches"] for v in variants.values()),
                         "ratio_to_torch": torch_time["median_s"] / mine["median_s"],
                         "bandwidth_gbs": moved / mine["median_s"] / 1e9,
                         "fraction_of_copy": copy["median_s"] / mine["median_s"],
                         "torch_fraction_of_copy": copy["median_s"] / torch_time["median_s"]}
    path = write_results("gpu_rows" if size == 8192 else f"gpu_rows_{size}", device, {
        "versions": gpu_versions(), "workload": {"rows": rows, "cols": cols,
                                                 "dtype": "float32"},
        "copy": {**copy, "bandwidth_gbs": moved / copy["median_s"] / 1e9},
        "results": results, "targets": {"ratio_to_torch": 0.9, "softmax_fraction_of_copy": 0.8}})
    for name, row in results.items():
        for variant, timing in row["variants"].items():
            print(f"  {name} {variant:40s} {timing['median_s'] * 1e6:8.1f} us "
                  f"{timing['fraction_of_copy']:.0%} of copy")
        print(f"{name}: {row['ratio_to_torch']:.2f}x torch ({row['best_variant']}), "
              f"{row['fraction_of_copy']:.0%} of copy bandwidth (torch "
              f"{row['torch_fraction_of_copy']:.0%})")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""The autoscheduler on the CUDA target: each workload tuned with `sched.tune(target="cuda")`,
then the tuned kernel, the hand schedule (`sched.hand_schedules`) and torch timed on the GPU in
this process (CUDA events, L2 flushed before each launch), each checked against torch in
float64; also the search's speed, the re-timed best against what the tuner believed, and each
cost model's Spearman rank correlation with measured speed.

Issue 11 asks for tuned fp32 matmul 4096^3 vs torch (TF32 off), softmax and layer norm vs
torch. Every candidate is checked against a reference run on the C target, on the CPU: the
function as written, or above 2^33 operations (a 4096^3 matmul, whose loops as written took
minutes) its default CPU schedule on every core; `--size` (default 4096) picks the matmul.

    python benchmarks/tune_gpu.py --time-budget 90        # each workload at most 90 s
Writes benchmarks/results/<gpu>/tune_gpu.json (after each workload, so a run cut short keeps
what it measured).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from benchmarks.common import gpu_device, gpu_versions, measure_gpu, write_results  # noqa: E402

ROWS, COLS, THREADS = 4096, 4096, 512


def workloads(size: int) -> dict:
    """name -> (function, hand schedule, torch reference of the input tensors in float64)."""
    import torch

    from benchmarks import tune_functions as f
    from sched import hand_schedules as hs

    return {
        "matmul": (lambda: f.matmul(size),
                   lambda: hs.gpu_matmul(size, size, size, (128, 64), (8, 4)),
                   lambda a: a[0] @ a[1]),
        "softmax": (lambda: f.softmax(ROWS, COLS),
                    lambda: hs.gpu_softmax_rows(ROWS, COLS, THREADS),
                    lambda a: torch.softmax(a[0], dim=1)),
        "layer_norm": (lambda: f.layer_norm(ROWS, COLS),
                       lambda: hs.gpu_layer_norm_rows(ROWS, COLS, THREADS),
                       lambda a: torch.nn.functional.layer_norm(a[0], (COLS,), a[1], a[2],
                                                                eps=1e-5)),
    }


def run(name: str, entry, trials: int, time_budget: float | None, seed: int, db: str) -> dict:
    import torch

    import sched
    from sched.autoscheduler.tune import tune
    from sched.autoscheduler.workload import Workload

    make, hand, reference = entry
    func = make()
    start = time.monotonic()
    result = tune(func, "cuda", trials=trials, time_budget=time_budget, seed=seed, db=db)
    tuning_s = time.monotonic() - start
    workload = Workload.of(func, "cuda")
    tensors = [torch.from_numpy(a).cuda() for a in workload.arrays(0)]
    out = workload.outputs[-1]
    inputs = [t.double() for i, t in enumerate(tensors) if i not in workload.outputs]
    expected = reference(inputs)
    kernels = {"hand schedule": sched.build(hand().func, target="cuda")}
    if result.trace is not None:
        kernels["tuned"] = result.kernel
    rows = []
    for label, kernel in kernels.items():
        tensors[out].fill_(float("nan"))
        kernel(*tensors)
        torch.cuda.synchronize()
        error = ((tensors[out].double() - expected).abs().max() / expected.abs().max()).item()
        rows.append({"variant": label, **measure_gpu(lambda k=kernel: k(*tensors)),
                     "relative_error": error})
    torch_inputs = [t for i, t in enumerate(tensors) if i not in workload.outputs]
    rows.append({"variant": "torch", **measure_gpu(lambda: reference(torch_inputs)),
                 "relative_error": 0.0})
    theirs = rows[-1]["median_s"]
    for row in rows:
        row["vs_torch"] = theirs / row["median_s"]
        row["gflops"] = workload.flops() / row["median_s"] / 1e9
    return {"workload": name, "trials_asked": trials, "trials_measured": result.trials,
            "tuning_seconds": tuning_s,
            "measured_per_minute": result.trials / tuning_s * 60,
            "replays_per_second": result.stats.get("replays_per_second"),
            "refused": result.stats.get("refused"), "errors": result.errors,
            "wrong": len(result.wrong), "best_seconds_in_search": result.best_seconds,
            "retimed_seconds": result.retimed_seconds, "spearman": result.correlations,
            "sketches": result.sketches, "curve_every_8": result.curve[::8], "variants": rows,
            "trace": str(result.trace), "error_records": _errors(db, workload)}


def _errors(db: str, workload) -> list[dict]:
    """The candidates that failed (of this run and earlier ones in `db`): their error kind,
    message and trace, so that a failure on the device can be read back here."""
    from sched.autoscheduler.database import Database
    from sched.schedule.trace import Trace

    with Database(db) as database:
        failed = [r for r in database.records(workload) if r.error_kind is not None]
    for record in failed:
        print(f"  {record.error_kind}: {(record.error or '')[:400]}")
    return [{"kind": r.error_kind, "error": (r.error or "")[:2000],
             "trace": str(Trace.from_json(r.trace_json))} for r in failed]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="matmul,softmax,layer_norm")
    parser.add_argument("--trials", type=int, default=256)
    parser.add_argument("--size", type=int, default=4096, help="matmul size")
    parser.add_argument("--time-budget", type=float, default=90.0,
                        help="seconds of tuning per workload")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--db", default="tune_gpu.db", help="the tuning records (SQLite)")
    args = parser.parse_args()
    device = gpu_device()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False      # cuBLAS in fp32, as the issue asks
    table = workloads(args.size)
    results = []
    for name in args.workloads.split(","):
        try:
            results.append(run(name, table[name], args.trials, args.time_budget, args.seed,
                               args.db))
        except Exception:  # noqa: BLE001 - one workload's failure is reported, the rest run
            results.append({"workload": name, "failed": traceback.format_exc()})
            print(results[-1]["failed"])
            continue
        print({k: v for k, v in results[-1].items() if k not in ("trace", "variants")})
        for row in results[-1]["variants"]:
            print(f"   {row['variant']:>14}: {row['median_s'] * 1e3:9.3f} ms  "
                  f"{row['gflops']:8.1f} GFLOP/s  {row['vs_torch']:.2f}x torch  "
                  f"error {row['relative_error']:.1e}")
        path = write_results("tune_gpu", device, {"versions": gpu_versions(),
                                                  "matmul_size": args.size,
                                                  "time_budget_s": args.time_budget,
                                                  "results": results})
        print(f"wrote {path}")


if __name__ == "__main__":
    main()

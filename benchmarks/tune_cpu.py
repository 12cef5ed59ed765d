"""The autoscheduler on the C target: each workload tuned with `sched.tune`, then the tuned
kernel, the hand schedule (where sched.hand_schedules has one) and numpy timed in alternating
rounds in this process (5 rounds of 10 calls), the unscheduled kernel after them; also the
search's speed (measured candidates per minute, replays per second), the re-timed best against
what the tuner believed, and each cost model's Spearman rank correlation with measured speed
on candidates it had not seen.

Targets (issue 11): matmul 1024^3 tuned >= 1.0x the hand schedule and >= 0.9x numpy within
256 trials and 10 minutes; >= 100 measured candidates per minute on matmul; the re-timed
best within 10% of the tuner's figure.

    python benchmarks/tune_cpu.py --workloads matmul --trials 64     # quick
    python benchmarks/tune_cpu.py --trials 256 --time-budget 600     # the issue's run
Writes benchmarks/results/<cpu>/tune_cpu.json.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from benchmarks.common import cpu_name, write_results  # noqa: E402
from benchmarks.cpu_common import alternate, relative_error  # noqa: E402


def workloads(size: int) -> dict:
    """name -> (function, hand schedule or None, numpy reference of the inputs)."""
    from benchmarks import tune_functions as f
    from sched import compute as te
    from sched import hand_schedules as hs

    def matmul_bias_relu():
        A = te.placeholder((size, size), name="A")
        B = te.placeholder((size, size), name="B")
        bias = te.placeholder((size,), name="bias")
        return te.create_prim_func([A, B, bias, te.ops.matmul_bias_relu(A, B, bias)],
                                   name="matmul_bias_relu")

    def batch_matmul():
        A = te.placeholder((8, 256, 256), name="A")
        B = te.placeholder((8, 256, 256), name="B")
        return te.create_prim_func([A, B, te.ops.batch_matmul(A, B)], name="batch_matmul")

    def conv2d():
        D = te.placeholder((1, 64, 56, 56), name="D")
        W = te.placeholder((64, 64, 3, 3), name="W")
        return te.create_prim_func([D, W, te.ops.conv2d_nchw(D, W, stride=1, padding=1)],
                                   name="conv2d")

    def mm(arrays):
        return arrays[0] @ arrays[1]

    return {
        "matmul": (lambda: f.matmul(size), lambda: hs.cpu_matmul(size, size, size), mm),
        "matmul_bias_relu": (matmul_bias_relu, None,
                             lambda a: np.maximum(a[0] @ a[1] + a[2], 0)),
        "batch_matmul": (batch_matmul, None, lambda a: a[0] @ a[1]),
        "conv2d": (conv2d, lambda: hs.cpu_conv2d(1, 64, 56, 56, 64), None),
        "softmax": (lambda: f.softmax(4096, 1024), lambda: hs.cpu_softmax(4096, 1024),
                    _softmax),
        "layer_norm": (lambda: f.layer_norm(4096, 1024),
                       lambda: hs.cpu_layer_norm(4096, 1024), None),
    }


def _softmax(arrays):
    x = arrays[0]
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def run(name: str, entry, trials: int, time_budget: float | None, seed: int) -> dict:
    import sched
    from sched.autoscheduler.measure.worker import aligned_copy
    from sched.autoscheduler.tune import tune
    from sched.autoscheduler.workload import Workload

    make, hand, reference = entry
    func = make()
    start = time.monotonic()
    result = tune(func, "c", trials=trials, time_budget=time_budget, seed=seed)
    tuning_s = time.monotonic() - start
    workload = Workload.of(func)
    arrays = workload.arrays(0)
    expected = [a.copy() for a in arrays]
    sched.build(func, target="c")(*expected)
    out = workload.outputs[-1]
    kernels = {"tuned": result.kernel, "unscheduled": sched.build(func, target="c")}
    if hand is not None:
        kernels["hand schedule"] = sched.build(hand().func, target="c")
    calls, errors = {}, {}
    for label, kernel in kernels.items():
        got = [aligned_copy(a) for a in arrays]     # as the tuner measured (64-byte aligned)
        kernel(*got)
        errors[label] = relative_error(got[out], expected[out])
        calls[label] = lambda k=kernel, g=got: k(*g)
    if reference is not None:
        inputs = [a for i, a in enumerate(arrays) if i not in workload.outputs]
        calls["numpy"] = lambda: reference(inputs)
    # the unscheduled kernel (seconds a call) in few rounds, apart: between the fast
    # variants' rounds it would leave the caches cold and the kernels' threads asleep
    slow = {"unscheduled": calls.pop("unscheduled")}
    timings = {**alternate(calls, rounds=5, repeats=10), **alternate(slow, rounds=1, repeats=3,
                                                                    warmup=0)}
    tuned = timings["tuned"]["median_s"]
    rows = [{"variant": label, **timing, "max_relative_error": errors.get(label),
             "vs_tuned": timing["median_s"] / tuned,
             "gflops": workload.flops() / timing["median_s"] / 1e9}
            for label, timing in timings.items()]
    return {"workload": name, "trials_asked": trials, "trials_measured": result.trials,
            "tuning_seconds": tuning_s,
            "measured_per_minute": result.trials / tuning_s * 60,
            "replays_per_second": result.stats["replays_per_second"],
            "refused": result.stats["refused"], "duplicates": result.stats["duplicates"],
            "errors": result.errors, "wrong": len(result.wrong),
            "best_seconds_in_search": result.best_seconds,
            "retimed_seconds": result.retimed_seconds,
            "retimed_vs_search": result.retimed_seconds / result.best_seconds,
            "spearman": result.correlations, "sketches": result.sketches,
            "curve_every_8": result.curve[::8], "variants": rows,
            "trace": str(result.trace)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="matmul,conv2d,softmax,layer_norm,batch_matmul,"
                        "matmul_bias_relu")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--size", type=int, default=1024, help="matmul size")
    parser.add_argument("--time-budget", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default="tune_cpu",
                        help="results file name (several runs side by side)")
    args = parser.parse_args()
    table = workloads(args.size)
    results = []
    for name in args.workloads.split(","):
        results.append(run(name, table[name], args.trials, args.time_budget, args.seed))
        print({k: v for k, v in results[-1].items() if k not in ("trace", "variants")})
        for row in results[-1]["variants"]:
            print(f"   {row['variant']:>14}: {row['median_s'] * 1e3:9.3f} ms  "
                  f"{row['gflops']:7.1f} GFLOP/s  {row['vs_tuned']:.2f}x tuned")
    path = write_results(args.name, cpu_name(), {"matmul_size": args.size,
                                                  "results": results})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

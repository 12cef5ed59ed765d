"""Two OpenMP threads on a busy 2-core machine: libgomp's wait policies compared on sched's CPU
hand schedules (matmul 1024^3, row softmax 4096x1024, and a small layer norm 256x1024 where the
fork/join cost weighs most), while another process keeps one core busy and without it.

libgomp reads OMP_WAIT_POLICY, GOMP_SPINCOUNT and OMP_PROC_BIND once, when it loads, so every
setting runs in a fresh child process; the settings alternate round by round so that each sees
the same background load. Each child times many calls of each kernel: the JSON has the median,
min, max and 90th percentile of all calls per setting and condition, and the same with one
thread for reference.

    python benchmarks/cpu_threads.py --rounds 4   # writes results/<cpu>/cpu_threads.json
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from benchmarks.cpu_common import isa_info  # noqa: E402

CHILD_FLAG = "--child"
# name -> (threads, environment); libgomp's default spin count is 300000 iterations when no
# policy is set (it throttles to 1000 when there are more threads than CPUs available)
SETTINGS = {
    "default (spin 300k)": (2, {}),
    "OMP_WAIT_POLICY=passive": (2, {"OMP_WAIT_POLICY": "passive"}),
    "OMP_WAIT_POLICY=active": (2, {"OMP_WAIT_POLICY": "active"}),
    "GOMP_SPINCOUNT=0": (2, {"GOMP_SPINCOUNT": "0"}),
    "GOMP_SPINCOUNT=1000": (2, {"GOMP_SPINCOUNT": "1000"}),
    "GOMP_SPINCOUNT=10000": (2, {"GOMP_SPINCOUNT": "10000"}),
    "GOMP_SPINCOUNT=100000": (2, {"GOMP_SPINCOUNT": "100000"}),
    "OMP_PROC_BIND=true": (2, {"OMP_PROC_BIND": "true"}),
    "one thread": (1, {}),
}
CALLS = {"matmul": 8, "softmax": 30, "layer_norm_small": 200}
OMP_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_PROC_BIND", "OMP_NUM_THREADS",
                 "OMP_DYNAMIC", "GOMP_CPU_AFFINITY", "OMP_PLACES")


def child() -> dict:
    """Time every kernel CALLS times (after a warm-up); the times in seconds, per kernel."""
    import numpy as np

    import sched
    from sched import hand_schedules

    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    c = np.zeros((1024, 1024), np.float32)
    x = rng.standard_normal((4096, 1024)).astype(np.float32)
    y = np.zeros_like(x)
    small = rng.standard_normal((256, 1024)).astype(np.float32)
    small_out = np.zeros_like(small)
    gamma, beta = np.ones(1024, np.float32), np.zeros(1024, np.float32)
    matmul = sched.build(hand_schedules.cpu_matmul(1024, 1024, 1024).func, target="c")
    softmax = sched.build(hand_schedules.cpu_softmax(4096, 1024).func, target="c")
    norm = sched.build(hand_schedules.cpu_layer_norm(256, 1024).func, target="c")
    runs = {"matmul": lambda: matmul(a, a, c), "softmax": lambda: softmax(x, y),
            "layer_norm_small": lambda: norm(small, gamma, beta, small_out)}
    times = {}
    for name, run in runs.items():
        for _ in range(3):
            run()
        samples = []
        for _ in range(CALLS[name]):
            start = time.perf_counter()
            run()
            samples.append(time.perf_counter() - start)
        times[name] = samples
    return times


BUSY_SECONDS = 300     # the busy loop ends by itself after this, should this process die first


def busy_loop() -> subprocess.Popen:
    """Another process keeping one core busy (a Python loop that never sleeps)."""
    code = f"import time\nend = time.time() + {BUSY_SECONDS}\nwhile time.time() < end: pass"
    return subprocess.Popen([sys.executable, "-c", code])


def run_setting(threads: int, extra: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in OMP_VARIABLES}
    env.update(extra, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS="1")
    result = subprocess.run([sys.executable, __file__, CHILD_FLAG], env=env,
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"child with {extra} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"median_ms": statistics.median(ordered) * 1e3, "min_ms": ordered[0] * 1e3,
            "max_ms": ordered[-1] * 1e3,
            "p90_ms": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))] * 1e3,
            "calls": len(ordered)}


def main() -> None:
    if CHILD_FLAG in sys.argv:
        print(json.dumps(child()))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--settings", default=None,
                        help="comma-separated names of SETTINGS to run (default: all)")
    parser.add_argument("--name", default="cpu_threads", help="the JSON's name")
    args = parser.parse_args()
    settings = ({name: SETTINGS[name] for name in args.settings.split(",")} if args.settings
                else SETTINGS)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))    # so that `finally` ends the load
    from benchmarks.common import cpu_name, write_results

    samples = {(condition, setting, kernel): []
               for condition in ("quiet", "one core busy") for setting in settings
               for kernel in CALLS}
    run_setting(1, {})      # compiles the kernels once (the kernel cache), untimed
    for round_index in range(args.rounds):
        for condition in ("quiet", "one core busy"):
            load = busy_loop() if condition == "one core busy" else None
            try:
                time.sleep(0.2 if load else 0)
                for setting, (threads, extra) in settings.items():
                    for kernel, times in run_setting(threads, extra).items():
                        samples[(condition, setting, kernel)] += times
            finally:
                if load:
                    load.kill()
                    load.wait()
        print(f"round {round_index + 1}/{args.rounds} done", flush=True)
    results: dict = {}
    for (condition, setting, kernel), times in samples.items():
        results.setdefault(condition, {}).setdefault(kernel, {})[setting] = summary(times)
    best = {condition: {kernel: min(by_setting, key=lambda s: by_setting[s]["median_ms"])
                        for kernel, by_setting in kernels.items()}
            for condition, kernels in results.items()}
    path = write_results(args.name, cpu_name(), {
        "cores": os.cpu_count(), "vector_isa": isa_info(),
        "note": "shared 2-core machine: 'quiet' means no load from this benchmark (other "
                "sessions may run); 'one core busy' adds a Python busy loop (unpinned)",
        "settings": {name: {"threads": t, "environment": e} for name, (t, e) in settings.items()},
        "calls_per_child": CALLS, "rounds": args.rounds, "results": results,
        "best_median": best})
    for condition, kernels in results.items():
        for kernel, by_setting in kernels.items():
            print(f"\n{condition}, {kernel}: median ms (min-max, p90)")
            for setting, row in by_setting.items():
                print(f"  {setting:26s} {row['median_ms']:8.2f} ({row['min_ms']:.2f}-"
                      f"{row['max_ms']:.2f}, p90 {row['p90_ms']:.2f})")
    print(f"\nbest median: {json.dumps(best, indent=1)}\nwrote {path}")


if __name__ == "__main__":
    main()

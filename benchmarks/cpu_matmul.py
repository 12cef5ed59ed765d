"""fp32 matmul 1024^3 on the C target: the hand schedule (sched.hand_schedules.cpu_matmul)
against numpy (OpenBLAS) in the same process, with 1 and with 2 threads (one child process
each: libgomp and OpenBLAS read their thread counts when they load), timed in alternating
rounds (the C target compiles with -mtune=generic on x86: see sched/c/build.py and
cpu_gcc_flags.py); and once, with one thread, the unscheduled kernel.
TVM's hand schedule comes from a log of /work/shared/peers/tvm_cpu.py (another process).

Targets (issue 14): >= 1.0x numpy with 1 and with 2 threads; >= TVM's hand schedule.

    python benchmarks/cpu_matmul.py     # writes benchmarks/results/<cpu>/cpu_matmul.json
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from benchmarks.cpu_common import (  # noqa: E402
    add_ratios,
    aligned,
    alternate,
    child_threads,
    relative_error,
    report,
    run_per_thread_count,
)

SIZE = 1024


def child(threads: int) -> dict:
    import sched
    from sched import hand_schedules

    rng = np.random.default_rng(0)
    a = aligned(rng.standard_normal((SIZE, SIZE)).astype(np.float32))
    b = aligned(rng.standard_normal((SIZE, SIZE)).astype(np.float32))
    expected = a.astype(np.float64) @ b.astype(np.float64)
    scheduled = hand_schedules.cpu_matmul(SIZE, SIZE, SIZE)
    kernels = {"sched hand schedule": sched.build(scheduled.func, target="c")}
    checks, calls = {}, {}
    for name, kernel in kernels.items():
        out = aligned(np.full((SIZE, SIZE), np.nan, np.float32))
        kernel(a, b, out)
        checks[name] = relative_error(out, expected)
        calls[name] = lambda k=kernel, o=out: k(a, b, o)
    calls["numpy (OpenBLAS)"] = lambda: a @ b
    checks["numpy (OpenBLAS)"] = relative_error(a @ b, expected)
    timings = alternate(calls, rounds=5, repeats=4)
    rows = [{"variant": name, "max_relative_error": checks[name],
             "matches_reference": checks[name] < 1e-4, **timing}
            for name, timing in timings.items()]
    add_ratios(rows, "numpy (OpenBLAS)", 2 * SIZE ** 3, "gflops")
    result = {"threads": threads, "variants": rows, "schedule_trace": str(scheduled.trace)}
    if threads == 1:
        naive = sched.build(hand_schedules._matmul_func(SIZE, SIZE, SIZE), target="c")
        out = aligned(np.zeros((SIZE, SIZE), np.float32))
        timing = alternate({"unscheduled": lambda: naive(a, b, out)}, rounds=1, repeats=1,
                           warmup=0)["unscheduled"]
        result["scheduled_over_unscheduled"] = timing["median_s"] / rows[0]["median_s"]
    return result


def main() -> None:
    threads = child_threads()
    if threads is not None:
        print(json.dumps(child(threads)))
        return
    runs = run_per_thread_count(__file__)
    report("cpu_matmul", {"op": "matmul", "M": SIZE, "N": SIZE, "K": SIZE, "dtype": "float32"},
           runs, "matmul", "gflops", "GFLOP/s", {"ratio_to_numpy": 1.0, "vs_tvm_hand": 1.0})


if __name__ == "__main__":
    main()

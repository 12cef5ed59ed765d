"""Row softmax 4096x1024 fp32 on the C target: the hand schedule (sched.hand_schedules.
cpu_softmax; exp(x - max) computed twice, or stored once per row: store_exp) against numpy in
the same process, with 1 and with 2 threads (a child process each), timed in alternating
rounds; with relaxed math (`sched.build(..., fast_math=True)`) too. TVM's hand schedule and its
fast_softmax come from a log of /work/shared/peers/tvm_cpu.py (another process).

Targets (issue 14): >= 2x numpy with exact math; >= 0.9x TVM fast_softmax with fast_math.

    python benchmarks/cpu_softmax.py     # writes benchmarks/results/<cpu>/cpu_softmax.json
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

ROWS, COLS = 4096, 1024


def numpy_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def child(threads: int) -> dict:
    import sched
    from sched import hand_schedules

    x = aligned(np.random.default_rng(0).standard_normal((ROWS, COLS)).astype(np.float32))
    expected = numpy_softmax(x.astype(np.float64))
    kernels = {}
    for store_exp in (False, True):
        sch = hand_schedules.cpu_softmax(ROWS, COLS, store_exp=store_exp)
        label = "exp stored" if store_exp else "exp twice"
        kernels[f"sched hand schedule ({label})"] = sched.build(sch.func, target="c")
        kernels[f"sched hand schedule ({label}), fast_math"] = sched.build(
            sch.func, target="c", fast_math=True)
    calls, errors = {}, {}
    for name, kernel in kernels.items():
        out = aligned(np.full((ROWS, COLS), np.nan, np.float32))
        kernel(x, out)
        errors[name] = relative_error(out, expected)
        calls[name] = lambda k=kernel, o=out: k(x, o)
    calls["numpy"] = lambda: numpy_softmax(x)
    errors["numpy"] = relative_error(numpy_softmax(x), expected)
    timings = alternate(calls, rounds=5, repeats=10)
    rows = [{"variant": name, "max_relative_error": errors[name],
             "matches_reference": errors[name] < (1e-3 if "fast_math" in name else 1e-5),
             **timing} for name, timing in timings.items()]
    add_ratios(rows, "numpy", 2.0 * ROWS * COLS * 4, "gbytes_per_s")
    return {"threads": threads, "variants": rows,
            "schedule_trace": str(hand_schedules.cpu_softmax(ROWS, COLS).trace)}


def main() -> None:
    threads = child_threads()
    if threads is not None:
        print(json.dumps(child(threads)))
        return
    report("cpu_softmax", {"op": "softmax over rows", "rows": ROWS, "cols": COLS,
                           "dtype": "float32", "bytes": "one read and one write of X"},
           run_per_thread_count(__file__), "softmax", "gbytes_per_s", "GB/s",
           {"ratio_to_numpy": 2.0, "fast_math_vs_tvm_fast_softmax": 0.9})


if __name__ == "__main__":
    main()

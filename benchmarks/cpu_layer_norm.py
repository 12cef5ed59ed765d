"""Layer norm over rows, 4096x1024 fp32, on the C target: the hand schedule
(sched.hand_schedules.cpu_layer_norm) against numpy in the same process, with 1 and with 2
threads (a child process each), timed in alternating rounds.

Target (issue 14): >= 2x numpy.

    python benchmarks/cpu_layer_norm.py     # writes benchmarks/results/<cpu>/cpu_layer_norm.json
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
EPSILON = 1e-5


def numpy_layer_norm(x, gamma, beta):
    mean = x.mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + EPSILON) * gamma + beta


def child(threads: int) -> dict:
    import sched
    from sched import hand_schedules

    rng = np.random.default_rng(0)
    x = aligned(rng.standard_normal((ROWS, COLS)).astype(np.float32))
    gamma = rng.standard_normal(COLS).astype(np.float32)
    beta = rng.standard_normal(COLS).astype(np.float32)
    expected = numpy_layer_norm(x.astype(np.float64), gamma, beta)
    scheduled = hand_schedules.cpu_layer_norm(ROWS, COLS)
    kernel = sched.build(scheduled.func, target="c")
    out = aligned(np.full((ROWS, COLS), np.nan, np.float32))
    kernel(x, gamma, beta, out)
    errors = {"sched hand schedule": relative_error(out, expected),
              "numpy": relative_error(numpy_layer_norm(x, gamma, beta), expected)}
    timings = alternate({"sched hand schedule": lambda: kernel(x, gamma, beta, out),
                         "numpy": lambda: numpy_layer_norm(x, gamma, beta)},
                        rounds=5, repeats=10)
    rows = [{"variant": name, "max_relative_error": errors[name],
             "matches_reference": errors[name] < 1e-4, **timing}
            for name, timing in timings.items()]
    add_ratios(rows, "numpy", 2.0 * ROWS * COLS * 4, "gbytes_per_s")
    return {"threads": threads, "variants": rows, "schedule_trace": str(scheduled.trace)}


def main() -> None:
    threads = child_threads()
    if threads is not None:
        print(json.dumps(child(threads)))
        return
    report("cpu_layer_norm", {"op": "layer norm over rows", "rows": ROWS, "cols": COLS,
                              "dtype": "float32", "epsilon": EPSILON},
           run_per_thread_count(__file__), None, "gbytes_per_s", "GB/s", {"ratio_to_numpy": 2.0})


if __name__ == "__main__":
    main()

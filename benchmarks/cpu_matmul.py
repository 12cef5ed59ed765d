"""fp32 matmul 1024^3 on the C target: the hand schedule (sched.hand_schedules.cpu_matmul)
against numpy (OpenBLAS) and against the unscheduled kernel, in one process.

Targets (issue 5): >= 0.7x numpy; the scheduled / unscheduled ratio (TVM: about 170x).

    python benchmarks/cpu_matmul.py     # writes benchmarks/results/<cpu>/cpu_matmul.json
"""

from __future__ import annotations

import os
import pathlib
import sys

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sched  # noqa: E402
from benchmarks.common import cpu_name, measure, write_results  # noqa: E402
from sched import hand_schedules  # noqa: E402

SIZE = 1024


def main() -> None:
    for variable in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):   # PERF.md: numpy's defaults
        os.environ.pop(variable, None)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((SIZE, SIZE)).astype(np.float32)
    b = rng.standard_normal((SIZE, SIZE)).astype(np.float32)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    flops = 2 * SIZE ** 3

    scheduled = hand_schedules.cpu_matmul(SIZE, SIZE, SIZE)
    kernels = {"sched hand schedule": sched.build(scheduled.func, target="c"),
               "sched unscheduled": sched.build(hand_schedules._matmul_func(SIZE, SIZE, SIZE),
                                                target="c")}
    rows = []
    for name, kernel in kernels.items():
        out = np.zeros((SIZE, SIZE), np.float32)
        kernel(a, b, out)
        error = float(np.max(np.abs(out - expected)) / np.max(np.abs(expected)))
        repeats = 10 if "hand" in name else 3
        timing = measure(lambda k=kernel, o=out: k(a, b, o), repeats=repeats, warmup=1)
        rows.append({"variant": name, "matches_reference": error < 1e-4,
                     "max_relative_error": error, **timing})
    timing = measure(lambda: a @ b, repeats=10, warmup=2)
    rows.append({"variant": "numpy (OpenBLAS)", "matches_reference": True, **timing})
    numpy_time = rows[-1]["median_s"]
    for row in rows:
        row["gflops"] = flops / row["median_s"] / 1e9
        row["ratio_to_numpy"] = numpy_time / row["median_s"]
    hand, naive = rows[0]["median_s"], rows[1]["median_s"]
    device = cpu_name()
    path = write_results("cpu_matmul", device, {
        "workload": {"op": "matmul", "M": SIZE, "N": SIZE, "K": SIZE, "dtype": "float32"},
        "cores": os.cpu_count(), "schedule_trace": str(scheduled.trace),
        "variants": rows, "scheduled_over_unscheduled": naive / hand,
        "target_ratio_to_numpy": 0.7})
    table = Table(title=f"matmul {SIZE}^3 fp32 on {device}")
    for column in ("variant", "median ms", "GFLOP/s", "x numpy", "matches"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["variant"], f"{row['median_s'] * 1e3:.1f}", f"{row['gflops']:.1f}",
                      f"{row['ratio_to_numpy']:.2f}", str(row["matches_reference"]))
    Console().print(table)
    print(f"scheduled / unscheduled: {naive / hand:.0f}x; wrote {path}")


if __name__ == "__main__":
    main()

"""The cost of one kernel call on the C target: a 16x16 float32 add, called on numpy arrays and
on torch CPU tensors, beside a raw ctypes call of the same compiled function (pointers
computed beforehand: no checks at all) and numpy's own `np.add(a, b, out=c)`, in one process.

Target (issue 14, item 4): <= 1.5 us per call on numpy arrays with every argument check
(TVM's PackedFunc on numpy measured 0.75 us in an earlier session; TVM is not installed here).
Also: the checks in Python (`ArgumentBinder`, the path every call took before the C entry
point, and the one a refused call still takes), and a kernel with a symbolic dim and an entry
bounds condition (`B[i] = A[i + 1]` over A (m,), B (n,)).

Variants are timed in alternating rounds (each round: `CALLS` calls of each variant, in turn)
and each variant's per-call median over the rounds is reported, so a busy machine slows them
all alike.

    python benchmarks/call_overhead.py    # writes benchmarks/results/<cpu>/call_overhead.json
"""

from __future__ import annotations

import os
import pathlib
import statistics
import sys
import timeit

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sched  # noqa: E402
from benchmarks.common import cpu_name, write_results  # noqa: E402
from sched import compute as te  # noqa: E402

SIZE = 16
CALLS = 20_000          # calls per round and variant
ROUNDS = 15
PYTHON_CHECK_CALLS = 2_000


def add_kernel():
    A = te.placeholder((SIZE, SIZE), name="A")
    B = te.placeholder((SIZE, SIZE), name="B")
    C = te.compute((SIZE, SIZE), lambda i, j: A[i, j] + B[i, j], name="C")
    return sched.build(te.create_prim_func([A, B, C]), target="c")


def shift_kernel():
    from sched.script import T

    @T.prim_func
    def shift(a: T.handle, b: T.handle):
        n = T.int32()
        m = T.int32()
        A = T.match_buffer(a, (m,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for i in range(n):
            with T.block("S"):
                vi = T.axis.spatial(n, i)
                B[vi] = A[vi + 1]

    return sched.build(shift, target="c")


def variants():
    """name -> (statement, namespace, calls per round, check) for each variant."""
    import torch

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, SIZE, SIZE)).astype(np.float32)
    c = np.zeros((SIZE, SIZE), np.float32)
    ta, tb, tc = (torch.from_numpy(x.copy()) for x in (a, b, c))
    kernel = add_kernel()
    shift = shift_kernel()
    x = rng.standard_normal(SIZE * SIZE + 1).astype(np.float32)
    y = np.zeros(SIZE * SIZE, np.float32)
    pointers = tuple(v.__array_interface__["data"][0] for v in (a, b, c))
    space = {"kernel": kernel, "a": a, "b": b, "c": c, "ta": ta, "tb": tb, "tc": tc,
             "raw": kernel._function, "pa": pointers[0], "pb": pointers[1],
             "pc": pointers[2], "np": np, "shift": shift, "x": x, "y": y}
    expected = a + b
    return kernel, {
        "raw ctypes call (no checks)": ("raw(pa, pb, pc)", space, CALLS,
                                        lambda: np.array_equal(c, expected)),
        "sched kernel, numpy arrays": ("kernel(a, b, c)", space, CALLS,
                                       lambda: np.array_equal(c, expected)),
        "numpy np.add(a, b, out=c)": ("np.add(a, b, out=c)", space, CALLS,
                                      lambda: np.array_equal(c, expected)),
        "sched kernel, torch CPU tensors": ("kernel(ta, tb, tc)", space, PYTHON_CHECK_CALLS,
                                            lambda: np.array_equal(tc.numpy(), expected)),
        "sched kernel, checks in Python (numpy)": (
            "kernel._call_checked((a, b, c))", space, PYTHON_CHECK_CALLS,
            lambda: np.array_equal(c, expected)),
        "sched kernel, symbolic dims + entry bounds check (numpy)": (
            "shift(x, y)", space, CALLS, lambda: np.array_equal(y, x[1:])),
    }


def main() -> None:
    kernel, cases = variants()
    for name, (statement, space, _, check) in cases.items():
        timeit.Timer(statement, globals=space).timeit(100)      # warm up, then check
        if not check():
            raise SystemExit(f"{name}: wrong result")
    timers = {name: (timeit.Timer(statement, globals=space), calls)
              for name, (statement, space, calls, _) in cases.items()}
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(ROUNDS):
        for name, (timer, calls) in timers.items():
            times[name].append(timer.timeit(calls) / calls)
    raw = statistics.median(times["raw ctypes call (no checks)"])
    numpy_add = statistics.median(times["numpy np.add(a, b, out=c)"])
    rows = []
    for name, samples in times.items():
        median = statistics.median(samples)
        rows.append({"variant": name, "median_us": median * 1e6, "min_us": min(samples) * 1e6,
                     "max_us": max(samples) * 1e6, "rounds": ROUNDS,
                     "calls_per_round": timers[name][1], "matches_reference": True,
                     "ratio_to_raw_ctypes": median / raw, "ratio_to_numpy_add": median / numpy_add})
    from sched.c.isa import host_isa

    device = cpu_name()
    path = write_results("call_overhead", device, {
        "workload": {"op": "add", "shape": [SIZE, SIZE], "dtype": "float32"},
        "vector_isa": host_isa().name, "cores": os.cpu_count(),
        "entry_point": kernel.entry is not None, "target_us": 1.5,
        "note": "2-core machine shared with other sessions: medians of alternating rounds",
        "rows": rows})
    table = Table(title=f"kernel call overhead, {SIZE}x{SIZE} float32 add, on {device}")
    for column in ("variant", "median us", "min us", "x raw ctypes", "x np.add"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["variant"], f"{row['median_us']:.2f}", f"{row['min_us']:.2f}",
                      f"{row['ratio_to_raw_ctypes']:.2f}", f"{row['ratio_to_numpy_add']:.2f}")
    Console().print(table)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""`sched demo`: compile, check and time a few kernels on this machine.

It builds matmul + bias + ReLU and a row softmax for the C target, checks them against numpy,
prints the IR of one and the C source of the other, and a table of times against numpy. It grows
as sched does: schedules, then CUDA when a GPU is present.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

import sched
from sched import compute as te


@dataclass
class Workload:
    name: str
    func: sched.ir.PrimFunc
    inputs: list[np.ndarray]
    output: np.ndarray
    reference: Callable[..., np.ndarray]


def _median_seconds(run: Callable[[], object], repeats: int = 10) -> float:
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _matmul_bias_relu(rng: np.random.Generator) -> Workload:
    M, K, N = 200, 160, 120
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    bias = te.placeholder((N,), name="bias")
    func = te.create_prim_func([A, B, bias, te.ops.matmul_bias_relu(A, B, bias)],
                               name="matmul_bias_relu")
    inputs = [rng.standard_normal(s, np.float32) for s in ((M, K), (K, N), (N,))]
    return Workload("matmul + bias + relu", func, inputs, np.zeros((M, N), np.float32),
                    lambda a, b, c: np.maximum(a @ b + c, 0))


def _softmax(rng: np.random.Generator) -> Workload:
    rows, cols = 512, 1000
    X = te.placeholder((rows, cols), name="X")
    func = te.create_prim_func([X, te.ops.softmax(X)], name="softmax")

    def reference(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return Workload("row softmax", func, [rng.standard_normal((rows, cols), np.float32)],
                    np.zeros((rows, cols), np.float32), reference)


def run_demo(console: Console | None = None) -> bool:
    """Run the demo; True when every kernel matched numpy."""
    console = console or Console()
    rng = np.random.default_rng(0)
    workloads = [_matmul_bias_relu(rng), _softmax(rng)]
    console.rule("[bold]sched demo: the C target")
    table = Table(title="Kernels against numpy (median of 10 runs)")
    for column in ("workload", "matches numpy", "max error / max |value|", "sched (ms)",
                   "numpy (ms)", "numpy / sched"):
        table.add_column(column, justify="right" if "ms" in column or "/" in column else "left")
    all_match = True
    for index, work in enumerate(workloads):
        kernel = sched.build(work.func, target="c")
        if index == 0:
            console.print("[bold]The IR of", work.name)
            console.print(Syntax(work.func.script(), "python", theme="ansi_dark", word_wrap=True))
        else:
            console.print("[bold]The C source of", work.name)
            console.print(Syntax(kernel.source, "c", theme="ansi_dark", word_wrap=True))
        kernel(*work.inputs, work.output)
        expected = work.reference(*[x.astype(np.float64) for x in work.inputs])
        largest = np.max(np.abs(expected))
        error = float(np.max(np.abs(work.output - expected)) / largest)
        matches = bool(np.allclose(work.output, expected, rtol=1e-4, atol=1e-5))
        all_match &= matches
        ours = _median_seconds(lambda w=work, k=kernel: k(*w.inputs, w.output))
        theirs = _median_seconds(lambda w=work: w.reference(*w.inputs))
        table.add_row(work.name, "yes" if matches else "[red]NO", f"{error:.1e}",
                      f"{ours * 1e3:.2f}", f"{theirs * 1e3:.2f}", f"{theirs / ours:.2f}x")
    console.print(table)
    console.print("These kernels are unscheduled (one loop nest per compute); schedules come "
                  "with sched.Schedule. The CUDA target is not built yet.")
    return all_match

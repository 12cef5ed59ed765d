"""`sched demo`: compile, check and time scheduled kernels on this machine.

On the C target it runs matmul + bias + ReLU and a row softmax (as computed, one loop nest per
stage), and a 512^3 matmul unscheduled and with the hand schedule (sched.hand_schedules), each
checked against numpy, with the IR of one, the C of another and a table of times against numpy.
Then the CUDA target: with a GPU it builds the GPU hand schedules, checks them against torch and
times them; without one it compiles one to a cubin and prints its CUDA source and resource
report, and runs the same GPU schedule on the C target (threads as loops) against numpy.
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
from sched import hand_schedules


@dataclass
class Workload:
    name: str
    func: sched.ir.PrimFunc
    input_shapes: list[tuple[int, ...]]
    reference: Callable[..., np.ndarray]


def _median_seconds(run: Callable[[], object], repeats: int = 10) -> float:
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _softmax_reference(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _c_workloads() -> list[Workload]:
    M, K, N = 200, 160, 120
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    bias = te.placeholder((N,), name="bias")
    mbr = te.create_prim_func([A, B, bias, te.ops.matmul_bias_relu(A, B, bias)],
                              name="matmul_bias_relu")
    X = te.placeholder((512, 1000), name="X")
    softmax = te.create_prim_func([X, te.ops.softmax(X)], name="softmax")
    size = 512
    return [
        Workload("matmul + bias + relu", mbr, [(M, K), (K, N), (N,)],
                 lambda a, b, c: np.maximum(a @ b + c, 0)),
        Workload("row softmax", softmax, [(512, 1000)], _softmax_reference),
        Workload(f"matmul {size}^3, unscheduled", hand_schedules._matmul_func(size, size, size),
                 [(size, size)] * 2, lambda a, b: a @ b),
        Workload(f"matmul {size}^3, hand schedule",
                 hand_schedules.cpu_matmul(size, size, size).func, [(size, size)] * 2,
                 lambda a, b: a @ b),
    ]


def _check(output, expected) -> tuple[bool, float]:
    error = float(np.max(np.abs(output - expected)) / np.max(np.abs(expected)))
    return error < 1e-4, error


def _table(title: str, columns: tuple[str, ...]) -> Table:
    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="right" if "ms" in column or "/" in column else "left")
    return table


def _run_c(console: Console, rng: np.random.Generator) -> bool:
    console.rule("[bold]sched demo: the C target")
    table = _table("Kernels against numpy (median of 10 runs)",
                   ("workload", "matches numpy", "max error / max |value|", "sched (ms)",
                    "numpy (ms)", "numpy / sched"))
    all_match = True
    for index, work in enumerate(_c_workloads()):
        kernel = sched.build(work.func, target="c")
        if index == 0:
            console.print("[bold]The IR of", work.name)
            console.print(Syntax(work.func.script(), "python", theme="ansi_dark", word_wrap=True))
        if index == 3:
            console.print("[bold]The C of", work.name)
            console.print(Syntax(kernel.source, "c", theme="ansi_dark", word_wrap=True))
        inputs = [rng.standard_normal(s).astype(np.float32) for s in work.input_shapes]
        expected = work.reference(*[x.astype(np.float64) for x in inputs])
        output = np.zeros(expected.shape, np.float32)
        kernel(*inputs, output)
        matches, error = _check(output, expected)
        all_match &= matches
        repeats = 3 if "unscheduled" in work.name else 10
        ours = _median_seconds(lambda k=kernel, i=inputs, o=output: k(*i, o), repeats)
        theirs = _median_seconds(lambda w=work, i=inputs: w.reference(*i), repeats)
        table.add_row(work.name, "yes" if matches else "[red]NO", f"{error:.1e}",
                      f"{ours * 1e3:.2f}", f"{theirs * 1e3:.2f}", f"{theirs / ours:.2f}x")
    console.print(table)
    return all_match


def _gpu_workloads() -> list[tuple[str, sched.Schedule, list, Callable]]:
    return [
        ("matmul 1024^3", hand_schedules.gpu_matmul(1024, 1024, 1024), [(1024, 1024)] * 2,
         lambda a, b: a @ b),
        ("row softmax 4096 x 4096", hand_schedules.gpu_softmax(4096, 4096), [(4096, 4096)],
         _softmax_reference),
    ]


def _run_cuda(console: Console, rng: np.random.Generator) -> bool:
    from sched.cuda.device import gpu_available

    console.rule("[bold]sched demo: the CUDA target")
    if not gpu_available():
        return _show_cuda_without_gpu(console, rng)
    import torch

    table = _table("GPU hand schedules against torch (median of 10 runs, synchronized)",
                   ("workload", "matches torch", "sched (ms)", "torch (ms)", "torch / sched"))
    all_match = True
    for name, schedule, shapes, reference in _gpu_workloads():
        kernel = sched.build(schedule.func, target="cuda")
        inputs = [torch.randn(*s, device="cuda") for s in shapes]
        expected = reference(*[x.double().cpu().numpy() for x in inputs])
        output = torch.empty(expected.shape, device="cuda")
        kernel(*inputs, output)
        torch.cuda.synchronize()
        matches, _ = _check(output.cpu().numpy(), expected)
        all_match &= matches
        torch_op = (lambda a, b: a @ b) if "matmul" in name else (lambda x: x.softmax(1))

        def timed(run):
            return _median_seconds(lambda: (run(), torch.cuda.synchronize()))
        ours = timed(lambda k=kernel, i=inputs, o=output: k(*i, o))
        theirs = timed(lambda f=torch_op, i=inputs: f(*i))
        table.add_row(name, "yes" if matches else "[red]NO", f"{ours * 1e3:.3f}",
                      f"{theirs * 1e3:.3f}", f"{theirs / ours:.2f}x")
    console.print(table)
    return all_match


def _show_cuda_without_gpu(console: Console, rng: np.random.Generator) -> bool:
    name, schedule, shapes, reference = _gpu_workloads()[0]
    console.print("No GPU here: compiling the GPU schedule of", name, "to a cubin anyway "
                  "(sm_90), and running it on the C target, each thread block as loops over "
                  "its threads.")
    kernel = sched.build(schedule.func, target="cuda", arch="sm_90")
    console.print(Syntax(kernel.source, "cuda", theme="ansi_dark", word_wrap=True))
    console.print(kernel.resources.table())
    small = hand_schedules.gpu_matmul(256, 192, 128)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in ((256, 128), (128, 192))]
    output = np.zeros((256, 192), np.float32)
    sched.build(small.func, target="c")(*inputs, output)
    matches, error = _check(output, inputs[0].astype(np.float64) @ inputs[1])
    console.print(f"the same GPU schedule (256 x 192 x 128) on the C target: "
                  f"{'matches' if matches else 'DOES NOT match'} numpy (error {error:.1e})")
    return matches


def run_demo(console: Console | None = None) -> bool:
    """Run the demo; True when every kernel matched its reference."""
    console = console or Console()
    rng = np.random.default_rng(0)
    c_ok = _run_c(console, rng)
    cuda_ok = _run_cuda(console, rng)
    return c_ok and cuda_ok

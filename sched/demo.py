"""`sched demo`: compile, check and time scheduled kernels on this machine.

On the C target it runs matmul + bias + ReLU (as computed, one loop nest per stage), a row
softmax and a 512^3 matmul unscheduled and with the hand schedule (sched.hand_schedules), and
with `tune_trials` the matmul as `sched.tune` schedules it, each checked against numpy, with the
IR of one, the C of another and a table: each row labelled with its variant, each time the
median of several runs with their min-max (sched and numpy in alternating rounds), and a
warning when the spread says the machine is busy. Written to a file or a pipe, nothing is
wrapped (see `make_console`).
Then the CUDA target: with a GPU it builds the GPU hand schedules, checks them against torch and
times them; without one it compiles one to a cubin and prints its CUDA source and resource
report, and runs the same GPU schedule on the C target (threads as loops) against numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

import sched
from sched import compute as te
from sched import hand_schedules
from sched.timings import Timing, busy_warning, measure_alternating, ratio_text

REPEATS = 10          # timed runs of each variant


@dataclass
class Workload:
    name: str
    variant: str                       # "unscheduled", "scheduled" (by hand) or "tuned"
    func: sched.ir.PrimFunc
    input_shapes: list[tuple[int, ...]]
    reference: Callable[..., np.ndarray]


def _softmax_reference(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _c_workloads(tune_trials: int = 0) -> list[Workload]:
    M, K, N = 200, 160, 120
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    bias = te.placeholder((N,), name="bias")
    mbr = te.create_prim_func([A, B, bias, te.ops.matmul_bias_relu(A, B, bias)],
                              name="matmul_bias_relu")
    X = te.placeholder((512, 1000), name="X")
    softmax = te.create_prim_func([X, te.ops.softmax(X)], name="softmax")
    size = 512
    matmul = hand_schedules._matmul_func(size, size, size)
    works = [
        Workload("matmul + bias + relu", "unscheduled", mbr, [(M, K), (K, N), (N,)],
                 lambda a, b, c: np.maximum(a @ b + c, 0)),
        Workload("row softmax 512 x 1000", "unscheduled", softmax, [(512, 1000)],
                 _softmax_reference),
        Workload("row softmax 512 x 1000", "scheduled", hand_schedules.cpu_softmax(
            512, 1000).func, [(512, 1000)], _softmax_reference),
        Workload(f"matmul {size}^3", "unscheduled", matmul, [(size, size)] * 2,
                 lambda a, b: a @ b),
        Workload(f"matmul {size}^3", "scheduled", hand_schedules.cpu_matmul(size, size, size).func,
                 [(size, size)] * 2, lambda a, b: a @ b),
    ]
    if tune_trials:
        works.append(Workload(f"matmul {size}^3", "tuned", _tuned(matmul, tune_trials),
                              [(size, size)] * 2, lambda a, b: a @ b))
    return works


def _tuned(func, trials: int):
    """`func` with the best schedule `sched.tune` finds in `trials` measured candidates."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as directory:
        db = str(Path(directory) / "demo.db")
        sched.tune(func, target="c", trials=trials, db=db)
        kernel = sched.build(func, target="c", db=db)
    return kernel.func


def _check(output, expected) -> tuple[bool, float]:
    error = float(np.max(np.abs(output - expected)) / np.max(np.abs(expected)))
    return error < 1e-4, error


def _table(title: str, columns: tuple[str, ...], caption: str | None = None) -> Table:
    table = Table(title=title, caption=caption)
    for column in columns:
        table.add_column(column, justify="right" if "ms" in column or " vs " in column
                         else "left")
    return table


def make_console(file=None) -> Console:
    """The demo's console: on a terminal, rich's; to a file or a pipe, no line is wrapped
    (generated code stays intact, tables take the width they need)."""
    console = Console(file=file)
    if console.is_terminal:
        return console
    return Console(file=file, width=200, soft_wrap=True)


def heading(console: Console, text: str) -> None:
    """A rule across a terminal; a plain line in a file or a pipe."""
    if console.is_terminal:
        console.rule(f"[bold]{text}")
    else:
        console.print(f"== {text} ==", markup=False)


def print_code(console: Console, code: str, lexer: str) -> None:
    """Generated code: highlighted on a terminal, else the text as it is."""
    if console.is_terminal:
        console.print(Syntax(code, lexer, theme="ansi_dark", word_wrap=True))
    else:
        console.print(code, markup=False, highlight=False, soft_wrap=True)


def _run_c(console: Console, rng: np.random.Generator, tune_trials: int = 0) -> bool:
    heading(console, "sched demo: the C target")
    caption = None if tune_trials else (
        "a tuned row: sched demo --tune 32 (tunes the 512^3 matmul first), or sched tune")
    table = _table(f"Kernels against numpy ({REPEATS} runs each, alternating: median "
                   f"(min-max))", ("workload", "variant", "matches numpy",
                                   "max error / max |value|", "sched ms", "numpy ms",
                                   "sched vs numpy"), caption)
    all_match = True
    timings: dict[str, Timing] = {}
    if tune_trials:       # the tuner shows its own progress bar
        console.print(f"tuning the 512^3 matmul ({tune_trials} trials)...")
    works = _c_workloads(tune_trials)
    for index, work in enumerate(works):
        with console.status(f"compiling {work.name} ({work.variant})..."):
            kernel = sched.build(work.func, target="c")
        if index == 0:
            console.print("[bold]The IR of", work.name)
            print_code(console, work.func.script(), "python")
        if index == 4:
            console.print(f"[bold]The C of {work.name}, {work.variant}")
            print_code(console, kernel.source, "c")
        inputs = [rng.standard_normal(s).astype(np.float32) for s in work.input_shapes]
        expected = work.reference(*[x.astype(np.float64) for x in inputs])
        output = np.zeros(expected.shape, np.float32)
        kernel(*inputs, output)
        matches, error = _check(output, expected)
        all_match &= matches
        repeats = 3 if work.variant == "unscheduled" and "matmul 512" in work.name else REPEATS
        ours, theirs = measure_alternating(
            [lambda k=kernel, i=inputs, o=output: k(*i, o), lambda w=work, i=inputs:
             w.reference(*i)], repeats, pause=0.02)
        timings[f"{work.name} ({work.variant})"] = ours
        timings[f"numpy {work.name}"] = theirs
        table.add_row(work.name, work.variant, "yes" if matches else "[red]NO", f"{error:.1e}",
                      ours.text(), theirs.text(), ratio_text(theirs.median / ours.median))
    console.print(table)
    console.print("sched vs numpy: numpy's median time / sched's (above 1x: sched is faster)")
    warning = busy_warning(timings)
    if warning:
        console.print(f"[yellow]{warning}")
    return all_match


def _gpu_workloads() -> list[tuple[str, sched.Schedule, list, Callable]]:
    # the variants the GPU benchmarks found fastest on an H200 (gpu_matmul.json,
    # gpu_rows_4096.json): 128x64 tiles of 8x4 per thread; a row per block of 512 threads
    # reduced across them
    return [
        ("matmul 1024^3", hand_schedules.gpu_matmul(1024, 1024, 1024, block_tile=(128, 64),
                                                    thread_tile=(8, 4)),
         [(1024, 1024)] * 2, lambda a, b: a @ b),
        ("row softmax 4096 x 4096", hand_schedules.gpu_softmax_rows(4096, 4096, 512),
         [(4096, 4096)], _softmax_reference),
    ]


def _run_cuda(console: Console, rng: np.random.Generator) -> bool:
    from sched.cuda.device import gpu_available

    heading(console, "sched demo: the CUDA target")
    if not gpu_available():
        return _show_cuda_without_gpu(console, rng)
    import torch

    table = _table(f"GPU hand schedules against torch ({REPEATS} runs each, synchronized: "
                   f"median (min-max))", ("workload", "variant", "matches torch", "sched ms",
                                          "torch ms", "sched vs torch"))
    all_match = True
    timings: dict[str, Timing] = {}
    for name, schedule, shapes, reference in _gpu_workloads():
        with console.status(f"compiling {name}..."):
            kernel = sched.build(schedule.func, target="cuda")
        inputs = [torch.randn(*s, device="cuda") for s in shapes]
        expected = reference(*[x.double().cpu().numpy() for x in inputs])
        output = torch.empty(expected.shape, device="cuda")
        kernel(*inputs, output)
        torch.cuda.synchronize()
        matches, _ = _check(output.cpu().numpy(), expected)
        all_match &= matches
        torch_op = (lambda a, b: a @ b) if "matmul" in name else (lambda x: x.softmax(1))
        ours, theirs = measure_alternating(
            [lambda k=kernel, i=inputs, o=output: (k(*i, o), torch.cuda.synchronize()),
             lambda f=torch_op, i=inputs: (f(*i), torch.cuda.synchronize())], REPEATS)
        timings[name], timings[f"torch {name}"] = ours, theirs
        table.add_row(name, "scheduled", "yes" if matches else "[red]NO", ours.text(),
                      theirs.text(), ratio_text(theirs.median / ours.median))
    console.print(table)
    console.print("sched vs torch: torch's median time / sched's (above 1x: sched is faster)")
    warning = busy_warning(timings)
    if warning:
        console.print(f"[yellow]{warning}")
    return all_match


def _show_cuda_without_gpu(console: Console, rng: np.random.Generator) -> bool:
    name, schedule, shapes, reference = _gpu_workloads()[0]
    console.print("No GPU here: compiling the GPU schedule of", name, "to a cubin anyway "
                  "(for sm_90, the arch named here), and running it on the C target, each "
                  "thread block as loops over its threads.")
    with console.status("compiling to a cubin..."):
        kernel = sched.build(schedule.func, target="cuda", arch="sm_90")
    print_code(console, kernel.source, "cuda")
    console.print(kernel.resources.table())
    small = hand_schedules.gpu_matmul(256, 192, 128)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in ((256, 128), (128, 192))]
    output = np.zeros((256, 192), np.float32)
    sched.build(small.func, target="c")(*inputs, output)
    matches, error = _check(output, inputs[0].astype(np.float64) @ inputs[1])
    console.print(f"the same GPU schedule (256 x 192 x 128) on the C target: "
                  f"{'matches' if matches else 'DOES NOT match'} numpy (error {error:.1e})")
    return matches


def run_demo(console: Console | None = None, tune_trials: int = 0) -> bool:
    """Run the demo; True when every kernel matched its reference. `tune_trials` > 0 adds a
    row for the 512^3 matmul as `sched.tune` schedules it in that many trials."""
    console = console or make_console()
    rng = np.random.default_rng(0)
    c_ok = _run_c(console, rng, tune_trials)
    cuda_ok = _run_cuda(console, rng)
    return c_ok and cuda_ok

"""What a tuning run shows: a live progress line, a summary, a results table, the tuning curve.

    with TuneProgress("matmul", trials=256, flops=workload.flops()) as progress:
        ...
        progress.update(trials_done=64, best_seconds=1.2e-3, errors=2)

shows, while it runs (on a terminal only):

    matmul ━━━━━━━━━━╺━━━━━━━━━━━━━━━━━━━━━━━━━━━━━  64/256 best 1.200 ms (0.44 GFLOP/s)
    97 trials/min  2 errors  ETA 1m58s

and when the block ends (always, to a pipe or a log as well):

    matmul: 256 trials in 2m38s (97 trials/min), best 0.9500 ms (0.55 GFLOP/s), 2 errors
      best so far  █▆▄▄▃▂▂▂▁▁

`results_table(rows)` is the table the tuner prints at the end, one row per workload;
`tuning_curve(best_so_far, path)` plots the best time against trials as a PNG when matplotlib
(an optional extra) is installed, and is otherwise a text sparkline.
"""

from __future__ import annotations

import math
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table
from rich.text import Text

BLOCKS = "▁▂▃▄▅▆▇█"
NO_VALUE = "·"          # a trial with no time yet (inf or nan) in a sparkline
CURVE_WIDTH = 60        # points of a text tuning curve


class TuneProgress:
    """The display of one workload's tuning run: a context manager that the loop updates.

    Live output only when `enabled` and the console is a terminal (tests and pipes get none);
    the summary prints in every case, also when the run stops on an exception. The ETA is the
    trials left at the rate so far, or the `time_budget` (seconds) left if that comes first.
    `already`: trials a resumed run found recorded (counted in `trials`, not in the rate).
    """

    def __init__(self, workload_name: str, trials: int, flops: float, enabled: bool = True,
                 console: Console | None = None, time_budget: float | None = None,
                 clock=time.monotonic, already: int = 0):
        self.name = workload_name
        self.trials = trials
        self.flops = flops
        self.time_budget = time_budget
        self.console = console if console is not None else Console()
        self.live = enabled and self.console.is_terminal
        self.clock = clock
        self.already = already
        self.trials_done = already
        self.best_seconds: float | None = None
        self.errors = 0
        self.curve: list[float] = []      # the best time after each update (inf before one)
        self._start = 0.0
        self._progress: Progress | None = None
        self._task = None

    def __enter__(self) -> TuneProgress:
        self._start = self.clock()
        if self.live:
            self._progress = _TwoLineProgress(
                TextColumn("{task.description}"), BarColumn(bar_width=None),
                MofNCompleteColumn(), TextColumn("{task.fields[best]}"),
                console=self.console, transient=False)
            self._progress.start()
            self._task = self._progress.add_task(self.name, total=self.trials,
                                                 best=self._best(), status=self._status(""))
        return self

    def update(self, trials_done: int, best_seconds: float | None, errors: int,
               note: str = "") -> None:
        """Trials measured so far (errors included), the best median time, the errors."""
        self.trials_done = trials_done
        self.best_seconds = best_seconds
        self.errors = errors
        self.curve.append(best_seconds if best_seconds is not None else math.inf)
        if self._progress is not None:
            self._progress.update(self._task, completed=trials_done, best=self._best(),
                                  status=self._status(note))
            self._progress.refresh()       # now, not at the next 10 Hz tick

    def __exit__(self, kind, value, traceback) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        stopped = "" if kind is None else f" (stopped: {kind.__name__})"
        self.console.print(self.summary() + stopped, highlight=False, soft_wrap=True)

    def summary(self) -> str:
        elapsed = self.clock() - self._start
        resumed = (f" ({self.trials_done} with the {self.already} recorded before)"
                   if self.already else "")
        text = (f"{self.name}: {self.trials_done - self.already} trials{resumed} in "
                f"{format_duration(elapsed)} ({self.rate():.0f} trials/min), {self._best()}, "
                f"{_errors(self.errors)}")
        if any(math.isfinite(v) for v in self.curve):
            text += f"\n  best so far  {tuning_curve(self.curve)}"
        return text

    def rate(self) -> float:
        """Trials per minute since the run started (those it measured)."""
        elapsed = self.clock() - self._start
        return 60.0 * (self.trials_done - self.already) / elapsed if elapsed > 0 else 0.0

    def eta(self) -> float | None:
        """Seconds until the run ends, None before any trial."""
        elapsed = self.clock() - self._start
        left = None
        measured = self.trials_done - self.already
        if measured > 0 and elapsed > 0:
            left = max(0, self.trials - self.trials_done) * elapsed / measured
        if self.time_budget is not None:
            budget_left = max(0.0, self.time_budget - elapsed)
            left = budget_left if left is None else min(left, budget_left)
        return left

    def _status(self, note: str) -> str:
        """The second line: rate, errors, ETA and the caller's note."""
        eta = self.eta()
        text = (f"{self.rate():.0f} trials/min  {_errors(self.errors)}  "
                f"ETA {format_duration(eta) if eta is not None else '-'}")
        return f"{text}  {note}" if note else text

    def _best(self) -> str:
        if self.best_seconds is None or not math.isfinite(self.best_seconds):
            return "best -"
        return (f"best {format_ms(self.best_seconds)} ms "
                f"({gflops(self.flops, self.best_seconds):.2f} GFLOP/s)")


class _TwoLineProgress(Progress):
    """rich's Progress with each task's `status` field on a line of its own below its bar:
    in 80 columns one line held the name, the bar, the count, the best time and the status
    only by cutting the bar and the count away."""

    def get_renderables(self):
        yield self.make_tasks_table(self.tasks)
        for task in self.tasks:
            yield Text(task.fields.get("status", ""), overflow="ellipsis", no_wrap=True)


def sparkline(values: list[float]) -> str:
    """One block per value, its height the value's place between the smallest and the largest
    (a lower time is a lower bar); inf and nan show as `NO_VALUE`."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return NO_VALUE * len(values)
    low, high = min(finite), max(finite)
    span = high - low
    chars = []
    for value in values:
        if not math.isfinite(value):
            chars.append(NO_VALUE)
        elif span == 0:
            chars.append(BLOCKS[0])
        else:
            chars.append(BLOCKS[round((value - low) / span * (len(BLOCKS) - 1))])
    return "".join(chars)


def tuning_curve(best_so_far: list[float], path: str | None = None) -> str:
    """The best time (seconds) after each trial, drawn. With `path` and matplotlib installed:
    a PNG written there, and `path` is returned; otherwise a sparkline of at most
    `CURVE_WIDTH` points (nothing is written)."""
    if path is not None:
        try:
            from matplotlib.figure import Figure
        except ImportError:
            pass
        else:
            _plot(Figure, best_so_far, path)
            return str(path)
    return sparkline(_resample(best_so_far, CURVE_WIDTH))


def _plot(Figure, best_so_far: list[float], path) -> None:
    # Figure, not pyplot: no GUI backend and no global state in the user's process
    figure = Figure(figsize=(6, 4), layout="constrained")
    axes = figure.subplots()
    points = [(i + 1, v * 1e3) for i, v in enumerate(best_so_far) if math.isfinite(v)]
    if points:
        axes.step(*zip(*points), where="post")
    else:
        axes.text(0.5, 0.5, "no trial ran", ha="center", va="center",
                  transform=axes.transAxes)
    axes.set_xlabel("trials")
    axes.set_ylabel("best time (ms)")
    axes.set_title("tuning curve")
    axes.grid(True, alpha=0.3)
    figure.savefig(path, dpi=100)


def _resample(values: list[float], width: int) -> list[float]:
    """At most `width` values, evenly spaced, the last one kept (the curve's end)."""
    if len(values) <= width:
        return list(values)
    step = (len(values) - 1) / (width - 1)
    return [values[round(i * step)] for i in range(width)]


class ResultsTable(Table):
    """A rich Table that `print()` also shows as text (rich's console draws it in color)."""

    def __str__(self) -> str:
        import io

        from rich.console import Console

        text = io.StringIO()
        Console(file=text, width=120, color_system=None).print(self)
        return text.getvalue().rstrip("\n")


def results_table(rows: list[dict]) -> ResultsTable:
    """The end-of-run table. Each row: "workload", "target", "trials", "errors",
    "best_seconds" (None when nothing ran), and optionally "flops" (of one call) and
    "baseline_seconds" (the unscheduled or reference time: "vs baseline" is its ratio to the
    best, above 1 when tuning won) and "retimed_seconds" (the best timed again in a fresh
    process: a column of its own when some row has one)."""
    table = ResultsTable(title="tuning results")
    retimed = any(row.get("retimed_seconds") is not None for row in rows)
    for name in ("workload", "target", "trials", "errors", "best ms",
                 *(("re-timed ms",) if retimed else ()), "GFLOP/s", "vs baseline"):
        table.add_column(name, justify="left" if name in ("workload", "target") else "right")
    for row in rows:
        best = row.get("best_seconds")
        ran = best is not None and math.isfinite(best) and best > 0
        flops, baseline = row.get("flops"), row.get("baseline_seconds")
        again = row.get("retimed_seconds")
        table.add_row(
            str(row["workload"]), str(row.get("target", "")), str(row.get("trials", 0)),
            str(row.get("errors", 0)), format_ms(best) if ran else "-",
            *((format_ms(again) if again is not None and math.isfinite(again) else "-",)
              if retimed else ()),
            f"{gflops(flops, best):.2f}" if ran and flops else "-",
            f"{baseline / best:.2f}x" if ran and baseline else "-")
    return table


def gflops(flops: float, seconds: float) -> float:
    return flops / seconds / 1e9 if seconds > 0 else 0.0


def format_ms(seconds: float) -> str:
    """Milliseconds with four significant digits: 1.235, 0.9500, 0.04512, 1235."""
    milliseconds = seconds * 1e3
    return f"{milliseconds:#.4g}" if milliseconds < 1e3 else f"{milliseconds:.0f}"


def format_duration(seconds: float) -> str:
    """12.3s, 2m38s, 1h04m."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def _errors(count: int) -> str:
    return f"{count} error" + ("" if count == 1 else "s")

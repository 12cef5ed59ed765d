"""Timing a few runs of a callable and saying how much to trust the numbers (used by the demo).

    timing = measure(lambda: kernel(a, b, c), repeats=10)
    timing.text()            # "4.13 (4.01-4.50)": median and min-max, in milliseconds
    ratio_text(numpy_timing.median / timing.median)    # "0.0305x", never "0.00x"

A machine busy with other work shows as a wide spread between runs; `busy_warning` names the
timings whose spread is too wide to compare medians closely.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

BUSY_SPREAD = 0.5       # (max - min) / median above this: the machine was busy


@dataclass(frozen=True)
class Timing:
    """The seconds of each run (at least one)."""

    seconds: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def spread(self) -> float:
        """(max - min) / median: 0 when every run took the same time."""
        return (max(self.seconds) - min(self.seconds)) / self.median if self.median else 0.0

    def text(self, unit: float = 1e-3) -> str:
        """Median and min-max in `unit` (milliseconds by default), 3 significant digits."""
        return (f"{_number(self.median / unit)} ({_number(min(self.seconds) / unit)}-"
                f"{_number(max(self.seconds) / unit)})")


def measure(run: Callable[[], object], repeats: int = 10, warmup: int = 1) -> Timing:
    """Time `repeats` calls of `run` after `warmup` untimed ones."""
    if repeats < 1:
        raise ValueError(f"measure: repeats must be at least 1, got {repeats}")
    for _ in range(warmup):
        run()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    return Timing(tuple(seconds))


def measure_alternating(runs: Sequence[Callable[[], object]], repeats: int = 10,
                        pause: float = 0.0) -> list[Timing]:
    """Time each of `runs` `repeats` times in alternating rounds (a, b, a, b...), so that a
    load that comes and goes falls on all of them alike; `pause` seconds between runs (numpy's
    BLAS threads spin for a while after a call)."""
    for run in runs:
        run()
    seconds: list[list[float]] = [[] for _ in runs]
    for _ in range(repeats):
        for k, run in enumerate(runs):
            if pause:
                time.sleep(pause)
            start = time.perf_counter()
            run()
            seconds[k].append(time.perf_counter() - start)
    return [Timing(tuple(s)) for s in seconds]


def ratio_text(ratio: float) -> str:
    """A speed ratio with 3 significant digits ("0.0305x", "11.6x"): a small ratio is never
    rounded to a bare 0.00x."""
    return f"{_number(ratio)}x"


def busy_warning(timings: dict[str, Timing]) -> str | None:
    """A warning naming the timings whose runs spread by more than BUSY_SPREAD, or None."""
    wide = {name: t for name, t in timings.items() if t.spread > BUSY_SPREAD}
    if not wide:
        return None
    listed = ", ".join(f"{name} ({t.spread:.0%})" for name, t in wide.items())
    return (f"warning: run times varied widely between runs ({listed} of the median): this "
            f"machine seems busy with other work, so compare medians with care and rerun on "
            f"an idle machine")


def _number(value: float) -> str:
    if value == 0:
        return "0"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"

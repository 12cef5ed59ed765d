"""Measuring candidate schedules: build, check against the unscheduled function, time.

    with make_measurer("local", workers=2) as measurer:        # or "ray", address=...
        results = measurer.measure(workload, candidates)       # MeasureResult each, in order

`LocalMeasurer` builds in a process pool and runs each candidate in an isolated worker
process with a time limit; `RayMeasurer` (the optional extra `sched[ray]`) does both as Ray
tasks on a cluster. A result's `error_kind` says why it has no time: "build", "run",
"timeout", "crash", or "wrong" (its outputs differ from the unscheduled function's: a
legality bug, to report).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from sched.autoscheduler.measure.builder import BuildPool
from sched.autoscheduler.measure.common import (
    ERROR_KINDS,
    BuildResult,
    Candidate,
    MeasureResult,
    TimingOptions,
)
from sched.autoscheduler.measure.ray_runner import RayMeasurer
from sched.autoscheduler.measure.runner import (
    DEFAULT_TIMING,
    IsolatedRunner,
    LocalMeasurer,
    retime,
)

RUNNERS = ("local", "ray")


class Measurer(Protocol):
    """What the tuner measures with: `measure` returns one result per candidate, in order,
    and calls `on_result(index, result)` as soon as each one is final (the tuner records it
    then: a run killed in the middle of a round keeps what it measured)."""

    timing: TimingOptions

    def measure(self, workload, candidates: list[Candidate], *,
                hopeless: float | None = None, best_seconds: float = ...,
                before_timing: Callable[[], None] | None = None,
                on_result: Callable[[int, MeasureResult], None] | None = None
                ) -> list[MeasureResult]: ...

    def reference_seconds(self, workload) -> float | None: ...

    def references(self) -> dict[str, list]: ...

    def close(self) -> None: ...

    def __enter__(self): ...

    def __exit__(self, *exc) -> None: ...


def make_measurer(runner: str = "local", workers: int | None = None, address: str | None = None,
                  timing: TimingOptions = DEFAULT_TIMING, reference_seed: int = 0) -> Measurer:
    """A `LocalMeasurer` (`workers` build processes) or a `RayMeasurer` (on the cluster at
    `address`, or a local Ray instance when None)."""
    if runner == "local":
        if address is not None:
            raise ValueError("make_measurer: 'address' is for the Ray runner; use "
                             "runner='ray' to measure on a cluster")
        return LocalMeasurer(workers, timing, reference_seed)
    if runner == "ray":
        return RayMeasurer(address, timing, reference_seed)
    raise ValueError(f"make_measurer: unknown runner {runner!r}: expected one of "
                     f"{', '.join(repr(r) for r in RUNNERS)}")


__all__ = ["ERROR_KINDS", "BuildPool", "BuildResult", "Candidate", "IsolatedRunner",
           "LocalMeasurer", "MeasureResult", "Measurer", "RayMeasurer", "TimingOptions",
           "make_measurer", "retime"]

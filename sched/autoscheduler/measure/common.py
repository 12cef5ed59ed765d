"""What the search hands to measurement and what comes back.

A `Candidate` is a schedule the search has already replayed (every step checked by legality):
its trace, and the scheduled function's script, which a builder or runner in another process
parses and builds (for the C target the compiled library is then found in the disk cache).
"""

from __future__ import annotations

import dataclasses
import statistics

# why a candidate has no time (MeasureResult.error_kind)
ERROR_KINDS = ("build", "run", "timeout", "crash", "wrong")


@dataclasses.dataclass(frozen=True)
class Candidate:
    trace_json: str          # every step (the user's, then the searched ones), from func
    script: str              # sch.func.script() of the replayed schedule


@dataclasses.dataclass(frozen=True)
class BuildResult:
    candidate: Candidate
    error: str | None = None         # the build's message when it failed
    seconds: float = 0.0             # wall time of the build


@dataclasses.dataclass(frozen=True)
class MeasureResult:
    seconds: tuple[float, ...] = ()  # one mean time per repeat; empty on error
    error_kind: str | None = None    # one of ERROR_KINDS
    error: str | None = None         # the message (a wrong result: the largest difference)
    build_seconds: float = 0.0
    run_seconds: float = 0.0         # wall time of the measurement, checks included

    @property
    def ok(self) -> bool:
        return self.error_kind is None and bool(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds) if self.seconds else float("inf")

    @property
    def best(self) -> float:
        return min(self.seconds) if self.seconds else float("inf")


@dataclasses.dataclass(frozen=True)
class TimingOptions:
    """Like TVM's evaluator: each repeat runs the kernel `number` times (raised until a repeat
    lasts `min_repeat_ms`) and records the mean; `warmup` runs first; `flush_cache` writes a
    buffer larger than the last-level cache before each repeat."""

    number: int = 1
    repeat: int = 3
    min_repeat_ms: float = 20.0
    warmup: int = 1
    flush_cache: bool = False
    timeout: float = 10.0            # seconds per candidate (build + check + timing)

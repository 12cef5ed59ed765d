"""What every benchmark shares: the device and versions it ran with, timing, and writing JSON to
`benchmarks/results/<device-slug>/<name>.json` (see ../shared/PERF.md)."""

from __future__ import annotations

import json
import pathlib
import platform
import re
import statistics
import subprocess
import time
from collections.abc import Callable

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def cpu_name() -> str:
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _command_version(command: list[str]) -> str | None:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.splitlines()[0] if out else None


def versions() -> dict[str, str | None]:
    import islpy
    import numpy

    commit = _command_version(["git", "-C", str(RESULTS.parent), "rev-parse", "--short",
                               "HEAD"])
    return {"sched_commit": commit, "python": platform.python_version(),
            "numpy": numpy.__version__, "islpy": islpy.__version__,
            "gcc": _command_version(["gcc", "--version"])}


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def measure(run: Callable[[], object], repeats: int = 20, warmup: int = 2) -> dict[str, float]:
    """Median and spread (min, max) of `repeats` timed calls after `warmup` calls, in seconds."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
            "repeats": repeats}


def write_results(name: str, device: str, payload: dict) -> pathlib.Path:
    """Write `payload` with the device and versions to results/<device-slug>/<name>.json."""
    path = RESULTS / slug(device) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"benchmark": name, "device": device, "versions": versions(), **payload}
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path

"""What every benchmark shares: the device and versions it ran with, timing, and writing JSON to
`benchmarks/results/<device-slug>/<name>.json` (see ../shared/PERF.md)."""

from __future__ import annotations

import hashlib
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
    return {"sched_commit": commit, "sched_source_hash": _source_hash(),
            "python": platform.python_version(),
            "numpy": numpy.__version__, "islpy": islpy.__version__,
            "gcc": _command_version(["gcc", "--version"])}


def _source_hash() -> str:
    """A hash of sched's Python sources: what ran, where a copy of the repository reports a
    HEAD that is not its working tree (the lent GPU machines)."""
    digest = hashlib.sha256()
    for path in sorted((RESULTS.parent.parent / "sched").rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


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


def host_vector_isa() -> dict[str, object]:
    """The vector ISA the C target emits for on this machine (sched.c.isa)."""
    from sched.c.isa import host_isa
    from sched.errors import BuildError

    try:
        isa = host_isa()
    except BuildError:                 # no gcc on this machine (a GPU box may lack one)
        return {"name": "unknown (no C compiler)"}
    return {"name": isa.name, "vector_bytes": isa.vector_bytes,
            "fp32_lanes": isa.lanes("float32")}


def write_results(name: str, device: str, payload: dict) -> pathlib.Path:
    """Write `payload` with the device, the host's vector ISA and the versions to
    results/<device-slug>/<name>.json; for this machine's CPU the slug ends with its vector
    ISA (a model name such as "AMD EPYC" covers hosts with AVX2 and with AVX-512)."""
    isa = host_vector_isa()
    directory = slug(device)
    if device == cpu_name() and not str(isa["name"]).startswith("unknown"):
        directory = f"{directory}-{isa['name']}"
    path = RESULTS / directory / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"benchmark": name, "device": device, "host_vector_isa": isa,
                "versions": versions(), **payload}
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def gpu_device() -> str:
    """The GPU's name; exits with a message when there is none (GPU benchmarks need one)."""
    from sched.cuda.device import gpu_available

    if not gpu_available():
        raise SystemExit("this benchmark needs a CUDA GPU: none on this machine")
    import torch

    return torch.cuda.get_device_name()


def gpu_versions() -> dict[str, str | None]:
    import torch

    driver = None
    try:
        from cuda.bindings import driver as cuda_driver

        driver = str(cuda_driver.cuDriverGetVersion()[1])
    except Exception:  # noqa: BLE001 - the version is informative only
        pass
    return {**versions(), "torch": torch.__version__, "cuda_driver": driver,
            "nvcc": _command_version(["nvcc", "--version"])}


def measure_gpu(run: Callable[[], object], repeats: int = 50, warmup: int = 5,
                flush_bytes: int = 256 * 2**20) -> dict[str, float]:
    """Median and spread of `repeats` launches timed with CUDA events, L2 flushed before each
    (PERF.md), in seconds."""
    import torch

    flush = torch.empty(flush_bytes // 4, dtype=torch.float32, device="cuda")
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeats):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
            "repeats": repeats}

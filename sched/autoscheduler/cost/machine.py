"""The machine the memory-movement model predicts for: cache sizes, bandwidths, cores, vector
width, peak arithmetic.

    Machine.host()     # this CPU: caches from /sys, cores and clock from /proc, the C
                       # target's vector width (sched.c.isa.host_isa)
    Machine.h100()     # an H100 SXM-like GPU

Only ratios matter for ranking schedules, so the defaults are round figures of a recent
server core (Zen 3 / Ice Lake class) and of an H100; a detected value replaces its default.
"""

from __future__ import annotations

import dataclasses
import functools
import os


@dataclasses.dataclass(frozen=True)
class Machine:
    kind: str = "cpu"                 # "cpu" or "gpu"
    cores: int = 2                    # CPU cores, or GPU streaming multiprocessors
    clock_hz: float = 2.5e9
    vector_bytes: int = 32            # one SIMD register (CPU); unused on the GPU
    fma_units: int = 2                # vector FMAs issued per cycle per core
    fma_latency: int = 4              # cycles before an FMA's result can be used
    store_forward: int = 6            # extra cycles when an accumulator goes through memory
    loads_per_cycle: int = 2          # vector loads per cycle per core
    stores_per_cycle: int = 1         # vector stores per cycle per core
    registers: int = 16               # vector registers (CPU) or 32-bit registers per thread
    line_bytes: int = 64              # cache line (CPU) or sector (GPU: 32)
    l1_bytes: int = 32 << 10          # per core (GPU: unused; shared memory below)
    l2_bytes: int = 512 << 10         # per core (GPU: the whole L2)
    llc_bytes: int = 32 << 20         # shared by all cores
    ways: int = 8                     # associativity of L1 and L2
    tlb_entries: int = 64             # first-level data TLB
    page_bytes: int = 4096
    tlb_miss_cycles: float = 7.0      # a miss that the second-level TLB serves
    l2_bytes_per_cycle: float = 16.0  # into L1, per core (sustained, not the 32-64 peak)
    llc_bytes_per_cycle: float = 8.0   # into L2, per core (sustained)
    dram_bytes_per_s: float = 20e9    # for the whole chip
    # GPU
    peak_flops: float = 0.0           # fp32 FLOP/s of the whole GPU
    l2_bytes_per_s: float = 0.0       # GPU L2 -> SMs
    shared_bytes_per_sm: int = 0
    shared_bytes_per_cycle: float = 128.0   # per SM
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    registers_per_sm: int = 65536
    launch_seconds: float = 0.0

    @property
    def is_gpu(self) -> bool:
        return self.kind == "gpu"

    @classmethod
    def h100(cls) -> Machine:
        """An H100 SXM: 132 SMs at 1.75 GHz, 67 TFLOP/s fp32, 3.35 TB/s HBM, 50 MB L2,
        228 KB shared memory per SM."""
        return cls(kind="gpu", cores=132, clock_hz=1.755e9, registers=255, line_bytes=32,
                   l2_bytes=50 << 20, llc_bytes=50 << 20, dram_bytes_per_s=3.35e12,
                   peak_flops=67e12, l2_bytes_per_s=10e12, shared_bytes_per_sm=228 << 10,
                   launch_seconds=3e-6)

    @classmethod
    def host(cls) -> Machine:
        """This CPU, as far as Linux tells (defaults elsewhere)."""
        return _host()

    @classmethod
    def for_target(cls, target: str) -> Machine:
        if target == "cuda":
            return cls.h100()
        if target == "c":
            return cls.host()
        raise ValueError(f"MemoryMovementModel: target {target!r} is not 'c' or 'cuda'")


@functools.cache
def _host() -> Machine:
    caches = _sys_caches()
    values = {"cores": os.cpu_count() or 2}
    if 1 in caches:
        values["l1_bytes"] = caches[1]
    if 2 in caches:
        values["l2_bytes"] = caches[2]
    if 3 in caches:
        values["llc_bytes"] = caches[3]
    clock = _cpuinfo_clock()
    if clock:
        values["clock_hz"] = clock
    try:
        from sched.c.isa import host_isa

        values["vector_bytes"] = host_isa().vector_bytes
    except Exception:          # no gcc: keep the default width
        pass
    if values.get("vector_bytes", 32) >= 64:
        values["registers"] = 32
    return Machine(**values)


def _sys_caches(root: str = "/sys/devices/system/cpu/cpu0/cache") -> dict[int, int]:
    """Data or unified cache size by level, in bytes."""
    found: dict[int, int] = {}
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return found
    for entry in entries:
        if not entry.startswith("index"):
            continue
        try:
            with open(os.path.join(root, entry, "level")) as f:
                level = int(f.read())
            with open(os.path.join(root, entry, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(root, entry, "size")) as f:
                size = _parse_size(f.read().strip())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and size:
            found[level] = size
    return found


def _parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text and text[-1].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)


def _cpuinfo_clock() -> float | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    return float(line.split(":")[1]) * 1e6
    except (OSError, ValueError, IndexError):
        return None
    return None

"""How the C target's OpenMP threads wait for work.

libgomp spins a while before a thread sleeps. On a machine whose cores are busy with other
work, a spinning worker holds a core until the scheduler preempts it, and two-thread medians
were 2-5x worse than one thread's (benchmarks/cpu_threads.py on a loaded 2-core AMD EPYC:
softmax 4096x1024 11.6 ms with libgomp's default, 5.5 ms passive; a 50 us kernel's p90 went from
12-16 ms to 0.13 ms). Passive waiting costs the best case on an idle machine (that kernel:
0.05 ms -> 0.09 ms), so it is the default and `SCHED_OMP_WAIT_POLICY` chooses otherwise.

libgomp reads `OMP_WAIT_POLICY` once, in its constructor, when the first library that needs it
loads; `load_kernel_library` sets it for that load only, unless the user set `OMP_WAIT_POLICY`
or `GOMP_SPINCOUNT` (theirs win) or libgomp is already loaded (then nothing can change it).
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from sched import env

LIBGOMP = "libgomp.so.1"


def libgomp_loaded() -> bool:
    """Whether the process has libgomp loaded already (its settings are then fixed)."""
    try:
        ctypes.CDLL(LIBGOMP, mode=getattr(os, "RTLD_NOLOAD", 4) | os.RTLD_LAZY)
    except OSError:
        return False
    return True


def load_kernel_library(path: Path) -> ctypes.CDLL:
    """The kernel library at `path`, loaded with the wait policy chosen for its threads."""
    policy = env.OMP_WAIT_POLICY.value()
    if policy == "default" or "OMP_WAIT_POLICY" in os.environ \
            or "GOMP_SPINCOUNT" in os.environ or libgomp_loaded():
        return ctypes.CDLL(str(path))
    os.environ["OMP_WAIT_POLICY"] = policy.upper()
    try:
        return ctypes.CDLL(str(path))
    finally:
        del os.environ["OMP_WAIT_POLICY"]

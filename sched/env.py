"""Every environment variable sched reads, each declared once here, typed, with its default.

Library code never reads `os.environ` itself: it calls `value()` on one of these declarations at
the moment it needs the setting (so a test or a user may change the environment between calls),
or better, takes an explicit option whose default comes from here.

    from sched import env
    env.CACHE_DIR.value()            # Path('/home/me/.cache/sched') unless SCHED_CACHE_DIR is set
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class EnvVar(Generic[T]):
    """One environment variable: its name, how to read its text, its default and what it does.

    An unset or empty variable gives the default.
    """

    name: str
    parse: Callable[[str], T]
    default: Callable[[], T]
    doc: str

    def value(self) -> T:
        text = os.environ.get(self.name, "")
        if text == "":
            return self.default()
        try:
            return self.parse(text)
        except ValueError as error:
            raise ValueError(f"environment variable {self.name}={text!r}: {error}") from None


def _path(text: str) -> Path:
    return Path(text).expanduser()


CACHE_DIR: EnvVar[Path] = EnvVar(
    "SCHED_CACHE_DIR", _path, lambda: Path("~/.cache/sched").expanduser(),
    "Where compiled kernels are cached: <dir>/c/<hash>/kernel.so, <dir>/cuda/<hash>/...")

THREAD_ORDERS = ("forward", "reverse", "shuffle")


def _thread_order(text: str) -> tuple[str, int]:
    """`forward`, `reverse`, `shuffle` or `shuffle:<seed>` -> (order, seed)."""
    order, _, seed = text.partition(":")
    if order not in THREAD_ORDERS:
        raise ValueError(f"expected one of {', '.join(THREAD_ORDERS)} (shuffle:<seed> for "
                         f"another permutation)")
    if seed and order != "shuffle":
        raise ValueError("only shuffle takes a seed")
    if seed and not seed.lstrip("-").isdigit():
        raise ValueError(f"shuffle's seed is an integer (shuffle:<seed>), got {seed!r}")
    return order, int(seed) if seed else 0


THREAD_ORDER: EnvVar[tuple[str, int]] = EnvVar(
    "SCHED_THREAD_ORDER", _thread_order, lambda: ("forward", 0),
    "The order in which the C target runs a GPU kernel's blocks, and the threads of each phase "
    "between barriers: forward, reverse, or shuffle[:seed] (a fixed pseudo-random "
    "permutation per loop). A schedule without races computes the same in every order.")



def _vector_bytes(text: str) -> int:
    value = int(text)
    if value not in (16, 32, 64):
        raise ValueError("expected 16, 32 or 64 (bytes per vector register)")
    return value


VECTOR_BYTES: EnvVar[int] = EnvVar(
    "SCHED_VECTOR_BYTES", _vector_bytes, lambda: 0,
    "The bytes per vector register the C target emits vectors for (16, 32 or 64), instead of "
    "the width of the ISA gcc targets with -march=native (e.g. 32 to test AVX2 code on an "
    "AVX-512 host).")



def _wait_policy(text: str) -> str:
    if text.lower() not in ("passive", "active", "default"):
        raise ValueError("expected passive, active or default")
    return text.lower()


OMP_WAIT_POLICY: EnvVar[str] = EnvVar(
    "SCHED_OMP_WAIT_POLICY", _wait_policy, lambda: "passive",
    "How the C target's OpenMP threads wait for work (libgomp reads it once, when the first "
    "kernel loads it): passive (the default: they sleep, which halved two-thread medians on a "
    "busy 2-core machine, benchmarks/cpu_threads.py), active (they spin: the best case on an "
    "idle machine) or default (libgomp's own spin-then-sleep). OMP_WAIT_POLICY or "
    "GOMP_SPINCOUNT set by the user win over it.")



def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError("expected a positive number of seconds")
    return value


EMU_TIMEOUT: EnvVar[float] = EnvVar(
    "SCHED_EMU_TIMEOUT", _seconds, lambda: 60.0,
    "The CUDA emulator's watchdog (target \"cuda-emu\"): seconds a thread block may run before "
    "it is reported with where each of its threads is (a barrier that not every thread "
    "reaches, an endless loop). A deadlock where every thread waits or has returned is "
    "reported at once, without waiting for it.")


def _sanitizer(text: str) -> str:
    if text != "thread":
        raise ValueError("expected thread (ThreadSanitizer)")
    return text


EMU_SANITIZE: EnvVar[str | None] = EnvVar(
    "SCHED_EMU_SANITIZE", _sanitizer, lambda: None,
    "The sanitizer the CUDA emulator compiles kernels with when `sched.build` is given none: "
    "thread (ThreadSanitizer: a data race on global or shared memory is an EmulationError "
    "with both accesses).")

ALL: tuple[EnvVar, ...] = (CACHE_DIR, THREAD_ORDER, VECTOR_BYTES, OMP_WAIT_POLICY, EMU_TIMEOUT,
                           EMU_SANITIZE)

"""Building C source into a shared library with gcc, cached on disk by content.

A library lives at `<cache dir>/c/<key>/kernel.so`, next to its `kernel.c`, where the key is
the sha256 of the source, the flags and the compiler (its version and what `-march=native`
means on this machine). Files are written under a temporary name and renamed into place, so
processes building the same kernel at once never see a half-written file.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shlex
import subprocess
import uuid
from pathlib import Path

from sched import env
from sched.errors import BuildError

COMPILER = "gcc"
# -ffp-contract=fast: a * b + c may become one fused multiply-add (as nvcc does by default).
# -fno-tree-loop-distribution: gcc 12 at -O3 was reported (sched issue 9, item 22) to
# miscompile an unscheduled reduction whose update reads the element the previous iteration
# wrote, through loop distribution; the generated C is plain (no aliasing restrict pointers),
# and the case was not reproduced here, so the pass stays off rather than trusted.
# -fno-math-errno: math functions never set errno (no result changes), so sqrt of a vector's
# lanes is one vsqrtps instead of a libm call per lane (sched/c/vector_math.py).
# -fno-tree-loop-if-convert: gcc 12.2 at -O3 with AVX2 or AVX-512 (-march=native, also
# x86-64-v3) miscompiles a row loop that fills a row and then copies into it under a guard
# (`for w: P[h, w] = 0; for w: if (h >= 1 && w >= 1) P[h, w] = A[...]`, what
# decompose_padding makes): the if-converted, vectorized copy loses rows. A plain 30-line C
# program reproduces it (wrong at -O3 -march=native, right at -O2, at -O3 alone, and with this
# flag); sched vectorizes its vector loops itself, so the pass is not what makes them fast.
# No -fwrapv: gcc 12.2 at -O3 with it miscompiled a fuzzed kernel (a store to an output row
# lost; right without the flag, at -O2, and with clang -O3 -fwrapv). Signed overflow, which C
# leaves undefined, is avoided in the code instead: arithmetic whose values may leave its type
# is written unsigned (sched/c/int_ranges.py), index arithmetic is widened where it could
# leave int32 (lower/wide_integers.py).
# -fno-tree-slp-vectorize: gcc 12.2 at -O3 -march=native (AVX-512) turns the 4-lane tail of
# `O[i] = (double)(float)Z[i]` over 36 elements into a plain copy (the rounding to float lost;
# audit helper-54: a 10-line C program reproduces it; right at -O2, without -march=native and
# with this flag). sched's vector loops are its own vector code; benchmarks/cpu_gcc_flags.py
# measured the CPU hand schedules unchanged with the flag on an AMD EPYC Zen 5.
# -fno-tree-vrp: gcc 12.2 at -O2 and -O3 (with or without -march=native) miscompiles
# `C[i] = A[floormod((i >> 1) / 3, 8)]` under restrict pointers, reading A at a vector
# compare's -1 for i = 6, 7 (audit helper-147: a 12-line C program reproduces it; right at
# -O1 and with this flag; sched's compute_inline made the form from a fuzzed kernel).
# -fno-semantic-interposition, -Wl,-Bsymbolic: the library's calls of its own functions (the
# entry point's of the kernel) bind to them, never to a libc or libm function of the same name
# loaded first (audit helper-76: a kernel named `fdiv`, `index` or `y0` was a silent no-op on
# the entry point's path, which called libm's)
FLAGS = ("-O3", "-march=native", "-ffp-contract=fast", "-fno-tree-loop-distribution",
         "-fno-tree-loop-if-convert", "-fno-tree-slp-vectorize", "-fno-tree-vrp", "-fopenmp",
         "-shared",
         "-fPIC", "-std=c11", "-fno-math-errno", "-fno-semantic-interposition",
         "-Wl,-Bsymbolic")
ICE_RETRY_FLAGS = ("-fno-tree-loop-vectorize",)   # a second try after an internal compiler error
RETRIED_MARKER = "built-with-retry-flags"
CONTEXT_LINES = 2   # source lines shown around each line gcc complains about


@functools.cache
def compiler_identity() -> str:
    """The compiler's version and target options: part of every cache key."""
    try:
        version = subprocess.run([COMPILER, "--version"], capture_output=True, text=True,
                                 check=True).stdout.splitlines()[0]
        target = subprocess.run([COMPILER, "-march=native", "-Q", "--help=target"],
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        raise BuildError(f"cannot run the C compiler '{COMPILER}': {error}; the 'c' target "
                         f"needs gcc on the PATH") from None
    native = " ".join(line.split()[-1] for line in target.splitlines()
                      if line.strip().startswith(("-march=", "-mtune=")))
    return f"{version} | {native}"


# relaxed math (`fast_math=True`) is chosen per function in the source (sched/c/vector_math.py),
# not with -ffast-math, which would let gcc assume no NaN or inf anywhere in the kernel
FAST_MATH_FLAGS: tuple[str, ...] = ()


# -mtune=generic on x86: with -march=native alone gcc 12 tunes for the host (znver3 here) and
# reloads a register tile's operand from memory for every FMA; generic tuning keeps it in a
# register (matmul 1.39x, conv2d 1.14x, softmax and layer norm unchanged on an AMD EPYC Zen 3:
# benchmarks/cpu_gcc_flags.py). -fschedule-insns was tried too: matmul 1.46x, conv2d 0.56x.
X86_FLAGS = ("-mtune=generic",)


def compiler_flags(fast_math: bool = False) -> tuple[str, ...]:
    """The flags every kernel is compiled with on this machine."""
    flags = (*FLAGS, *(X86_FLAGS if _targets_x86() else ()))
    return (*flags, *FAST_MATH_FLAGS) if fast_math else flags


@functools.cache
def _targets_x86() -> bool:
    from sched.c.isa import compiler_macros

    return "__x86_64__" in compiler_macros(COMPILER)


def cache_key(source: str, fast_math: bool = False) -> str:
    text = "\0".join([source, " ".join(compiler_flags(fast_math)), compiler_identity()])
    return hashlib.sha256(text.encode()).hexdigest()


def _write_atomically(path: Path, data: str) -> None:
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    temporary.write_text(data)
    os.replace(temporary, path)


def compile_library(source: str, *, cache_dir: Path | None = None,
                    fast_math: bool = False) -> Path:
    """The path of a shared library built from C `source` (reused from the cache when there).

    Raises BuildError with gcc's message, the offending source lines and the command.
    """
    directory = (cache_dir or env.CACHE_DIR.value()) / "c" / cache_key(source, fast_math)
    library = directory / "kernel.so"
    if library.exists():
        return library
    directory.mkdir(parents=True, exist_ok=True)
    source_path = directory / "kernel.c"
    _write_atomically(source_path, source)
    temporary = directory / f"kernel.{os.getpid()}.{uuid.uuid4().hex}.so.tmp"
    command = [COMPILER, *compiler_flags(fast_math), str(source_path), "-o", str(temporary)]
    result = _run(command)
    if result.returncode != 0 and "internal compiler error" in result.stderr:
        # gcc 12.2's loop vectorizer dies on some masks with AVX-512 (`A[(int32_t)(i < 8 ||
        # false)]`, audit helper-110); sched writes its vector loops itself, so the kernel is
        # built again without gcc's (and an export of it says so: `needs_retry_flags`)
        command = [*command[:1], *ICE_RETRY_FLAGS, *command[1:]]
        result = _run(command)
        if result.returncode == 0:
            _write_atomically(directory / RETRIED_MARKER, " ".join(ICE_RETRY_FLAGS))
    if result.returncode != 0:
        temporary.unlink(missing_ok=True)
        raise BuildError(_failure_message(source, source_path, command, result))
    os.replace(temporary, library)
    return library


def needs_retry_flags(library: Path) -> bool:
    """Whether the cached `library` was built with ICE_RETRY_FLAGS (gcc died without them)."""
    return (library.parent / RETRIED_MARKER).exists()


def _run(command: list[str]) -> subprocess.CompletedProcess:
    # LC_ALL=C: plain ASCII quotes in gcc's messages, whatever the user's locale
    return subprocess.run(command, capture_output=True, text=True,
                          env={**os.environ, "LC_ALL": "C"})


def _failure_message(source: str, source_path: Path, command: list[str], result) -> str:
    lines = source.splitlines()
    pattern = re.compile(re.escape(str(source_path)) + r":(\d+):")
    wrong = sorted({int(n) for n in pattern.findall(result.stderr)})
    shown: list[str] = []
    for number in wrong:
        shown.append("  ...")
        for k in range(max(1, number - CONTEXT_LINES), min(len(lines), number + CONTEXT_LINES) + 1):
            marker = ">" if k == number else " "
            shown.append(f"{marker}{k:5d} | {lines[k - 1]}")
    excerpt = "\n".join(shown) if shown else "(gcc named no line; the source is in the file)"
    return (f"gcc failed (exit status {result.returncode}) on {source_path}\n"
            f"{result.stderr.rstrip()}\n"
            f"offending lines:\n{excerpt}\n"
            f"command: {shlex.join(command)}")

"""Compiling CUDA C for the emulator: g++ builds an executable from the kernel's source, the
emulation header (include/cuda_emu.h) and the runtime (runtime/*.cc), cached on disk by
content.

The CUDA source is compiled as it ships, but for its `__shared__` declarations, which become
references to the running block's shared memory, every line where it was (`source.py`: so a
line the emulator names is that line of `kernel.source`). `#include <cuda_fp16.h>` and
friends find the emulator's own headers.

Files live at `<cache dir>/cuda-emu/<key>/` (kernel.cu, entry.cc, the executable), where the key
is the sha256 of the source, the kernel's name, the flags, the header, the runtime and g++'s
version; the runtime is compiled once per sanitizer into `<cache dir>/cuda-emu/runtime-<key>/`.
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
from sched.cuda.emu.source import emulated_source
from sched.errors import BuildError

COMPILER = "g++"
HERE = Path(__file__).parent
INCLUDE = HERE / "include"
RUNTIME = HERE / "runtime"
RUNTIME_SOURCES = ("sync.cc", "launch.cc", "main.cc")
# -O1 -g3: quick to compile and good to step through in gdb (-g3 keeps the macros, so that
# `print threadIdx` works there); -fno-strict-aliasing: CUDA code reinterprets memory (float4
# moves) as nvcc allows
FLAGS = ("-std=c++17", "-O1", "-g3", "-pthread", "-fno-strict-aliasing", "-w")
SANITIZERS = {None: (), "thread": ("-fsanitize=thread",)}
CONTEXT_LINES = 2

def entry_source(kernel_name: str | tuple[str, ...]) -> str:
    """The translation unit: the kernel's file and `sched_emu_entry`, which launches it (with
    several kernels, a tuple of names: the one the SCHED_EMU_KERNEL variable numbers)."""
    names = (kernel_name,) if isinstance(kernel_name, str) else tuple(kernel_name)
    for name in names:
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise BuildError(f"cuda-emu: kernel name {name!r} is not a C identifier")
    launches = [f'    case {k}: return ::sched_emu::launch(&{name}, "{name}", params, grid, '
                "block, dynamic_shared_bytes);" for k, name in enumerate(names)]
    return "\n".join([
        "#include <cstdlib>", '#include "cuda_emu.h"', '#include "kernel.cu"', "",
        'extern "C" int sched_emu_entry(void** params, const unsigned* grid, '
        "const unsigned* block, unsigned long long dynamic_shared_bytes) {",
        '    const char* which = getenv("SCHED_EMU_KERNEL");',
        "    switch (which ? atoi(which) : 0) {", *launches, "    }", "    return 2;", "}",
        ""])


@functools.cache
def compiler_version() -> str:
    try:
        return subprocess.run([COMPILER, "--version"], capture_output=True, text=True,
                              check=True).stdout.splitlines()[0]
    except (OSError, subprocess.CalledProcessError) as error:
        raise BuildError(f"cannot run the C++ compiler '{COMPILER}': {error}; the 'cuda-emu' "
                         f"target needs g++ on the PATH") from None


def _flags(sanitize: str | None) -> tuple[str, ...]:
    if sanitize not in SANITIZERS:
        raise ValueError(f"build: sanitize must be one of "
                         f"{', '.join(repr(s) for s in SANITIZERS)}, got {sanitize!r}")
    return (*FLAGS, *SANITIZERS[sanitize])


def _key(*parts: str) -> str:
    files = [*sorted(INCLUDE.iterdir()), *sorted(RUNTIME.iterdir()), HERE / "source.py",
             HERE / "ptx.py"]
    text = "\0".join([*parts, *(p.read_text() for p in files), compiler_version()])
    return hashlib.sha256(text.encode()).hexdigest()


def _run(command: list[str], what: str, source: str | None = None,
         source_path: Path | None = None) -> None:
    result = subprocess.run(command, capture_output=True, text=True,
                            env={**os.environ, "LC_ALL": "C"})
    if result.returncode == 0:
        return
    excerpt = ""
    if source is not None and source_path is not None:
        excerpt = "\noffending lines:\n" + _excerpt(source, source_path.name, result.stderr)
    raise BuildError(f"g++ failed (exit status {result.returncode}) compiling {what}\n"
                     f"{result.stderr.rstrip()}{excerpt}\ncommand: {shlex.join(command)}")


def _excerpt(source: str, file_name: str, text: str) -> str:
    lines = source.splitlines()
    wrong = sorted({int(n) for n in re.findall(re.escape(file_name) + r":(\d+)", text)})
    shown = []
    for number in wrong:
        shown.append("  ...")
        for k in range(max(1, number - CONTEXT_LINES), min(len(lines), number + CONTEXT_LINES) + 1):
            shown.append(f"{'>' if k == number else ' '}{k:5d} | {lines[k - 1]}")
    return "\n".join(shown) if shown else "(g++ named no line of the kernel)"


def runtime_objects(sanitize: str | None, cache_dir: Path | None = None) -> list[Path]:
    """The runtime's sources (runtime/*.cc) compiled for `sanitize` (cached)."""
    flags = _flags(sanitize)
    root = (cache_dir or env.CACHE_DIR.value()) / "cuda-emu"
    directory = root / f"runtime-{_key(' '.join(flags))}"
    objects = [directory / source.replace(".cc", ".o") for source in RUNTIME_SOURCES]
    if all(o.exists() for o in objects):
        return objects
    directory.mkdir(parents=True, exist_ok=True)
    for source, target in zip(RUNTIME_SOURCES, objects):
        temporary = directory / f"{target.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
        _run([COMPILER, *flags, f"-I{INCLUDE}", "-c", str(RUNTIME / source), "-o",
              str(temporary)], f"the emulator's runtime ({source})")
        os.replace(temporary, target)
    return objects


def compile_emulator(source: str, kernel_name: str | tuple[str, ...], *,
                     sanitize: str | None = None, cache_dir: Path | None = None) -> Path:
    """The executable that runs kernel `kernel_name` of CUDA `source` on the CPU (see
    runtime/main.cc for how it is called). Raises BuildError with g++'s message, the offending
    lines of `source` and the command."""
    flags = _flags(sanitize)
    directory = (cache_dir or env.CACHE_DIR.value()) / "cuda-emu" / _key(
        source, " ".join((kernel_name,) if isinstance(kernel_name, str) else kernel_name),
        " ".join(flags))
    executable = directory / "kernel"
    if executable.exists():
        return executable
    runtime = runtime_objects(sanitize, cache_dir)
    directory.mkdir(parents=True, exist_ok=True)
    _write_atomically(directory / "kernel.cu", emulated_source(source))
    _write_atomically(directory / "entry.cc", entry_source(kernel_name))
    temporary = directory / f"kernel.{os.getpid()}.{uuid.uuid4().hex}.tmp"
    _run([COMPILER, *flags, f"-I{INCLUDE}", f"-I{directory}", str(directory / "entry.cc"),
          *map(str, runtime), "-o", str(temporary)], f"kernel {kernel_name!r}", source,
         directory / "kernel.cu")
    os.replace(temporary, executable)
    return executable


def _write_atomically(path: Path, data: str) -> None:
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    temporary.write_text(data)
    os.replace(temporary, path)

"""CUDA C to cubin, with NVRTC (in process) or nvcc, cached on disk by content.

A cubin lives at `<cache dir>/cuda/<key>/kernel.cubin`, next to `kernel.cu` (the source),
`kernel.log` (the compiler's log: ptxas -v lines with registers, spills and shared memory) and
`command.txt`, where the key is the sha256 of the source, the arch, the flags, the compiler and
its version. Files are written under a temporary name and renamed into place, the cubin last,
so a process that sees the cubin sees the others too, and processes compiling the same kernel at
once never see a half-written file. A cache hit reads files and compiles nothing.

We always produce cubins (SASS), never PTX: the lent GPUs run driver 580 (CUDA 13.0), and PTX
from a newer NVRTC may not JIT there.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shlex
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from sched import env
from sched.cuda.arch_features import check_arch_features, check_nvrtc_arch
from sched.cuda.device import parse_arch
from sched.errors import BuildError

COMPILERS = ("nvrtc", "nvcc")
SOURCE_NAME = "kernel.cu"   # the name compiler messages use: `kernel.cu(12): error: ...`
CONTEXT_LINES = 2           # source lines shown around each line the compiler complains about
ERROR_LINE = re.compile(r"kernel\.cu\((\d+)\): (?:catastrophic )?error")
MISSING_HEADER = re.compile(r"(could not|cannot) open source file")
MISSING_HEADERS_HINT = (
    "hint: NVRTC finds <cuda_fp16.h>, <cuda_bf16.h> and <mma.h> in the wheels nvidia-cuda-runtime "
    "and nvidia-cuda-crt (13.0.*, dependencies of sched): reinstall sched with pip, or use "
    "compiler='nvcc'")

# How many compilations and cache hits this process has had (tests read it; nothing else does).
stats = {"compilations": 0, "cache_hits": 0}


@dataclass(frozen=True)
class CompiledModule:
    """A cubin and how it was made.

    `cubin`: the ELF bytes; `log`: the compiler's log (ptxas -v lines, warnings); `command`: the
    exact compiler invocation (NVRTC's options as a command line); `arch`, `compiler`; `key` and
    `path`: where the cubin lies in the cache; `from_cache`: whether this call compiled nothing;
    `seconds`: what this call took.
    """

    cubin: bytes
    log: str
    command: str
    arch: str
    compiler: str
    key: str
    path: Path
    from_cache: bool
    seconds: float


def compile_cuda(source: str, arch: str = "sm_90", compiler: str = "nvrtc",
                 flags: tuple[str, ...] | list[str] = (), *,
                 cache_dir: Path | None = None, refresh: bool = False) -> CompiledModule:
    """The cubin of CUDA C `source` for `arch` (reused from the cache when there; compiled
    again and the cache entry replaced with `refresh`).

    `compiler` is "nvrtc" (in process, through cuda.bindings.nvrtc) or "nvcc" (the toolkit's,
    from the PATH); `flags` are extra options for that compiler. The cache lies under
    `cache_dir`, by default `sched.env.CACHE_DIR`.
    Raises BuildError with the compiler's log, the offending source lines and the command;
    ValueError for an arch or compiler it does not know.
    """
    start = time.perf_counter()
    parse_arch(arch)
    if compiler not in COMPILERS:
        raise ValueError(f"compile_cuda: unknown compiler {compiler!r}: expected 'nvrtc' or "
                         f"'nvcc'")
    check_arch_features(source, arch)
    if compiler == "nvrtc":
        check_nvrtc_arch(arch, *_nvrtc_archs())
    flags = tuple(flags)
    key = cache_key(source, arch, compiler, flags)
    directory = (cache_dir or env.CACHE_DIR.value()) / "cuda" / key
    cubin_path = directory / "kernel.cubin"
    log_path, command_path = directory / "kernel.log", directory / "command.txt"
    if not refresh and cubin_path.exists() and log_path.exists():
        stats["cache_hits"] += 1
        return CompiledModule(
            cubin_path.read_bytes(), log_path.read_text(),
            command_path.read_text() if command_path.exists() else "", arch, compiler, key,
            cubin_path, True, time.perf_counter() - start)
    directory.mkdir(parents=True, exist_ok=True)
    _write_atomically(directory / SOURCE_NAME, source.encode())
    stats["compilations"] += 1
    if compiler == "nvrtc":
        cubin, log, command = _compile_nvrtc(source, arch, flags)
    else:
        cubin, log, command = _compile_nvcc(source, arch, flags, directory)
    _write_atomically(log_path, log.encode())
    _write_atomically(command_path, command.encode())
    _write_atomically(cubin_path, cubin)
    return CompiledModule(cubin, log, command, arch, compiler, key, cubin_path, False,
                          time.perf_counter() - start)


def cache_key(source: str, arch: str, compiler: str, flags: tuple[str, ...]) -> str:
    """The sha256 of everything that decides the cubin: source, arch, flags and compiler."""
    text = "\0".join([source, arch, compiler, " ".join(flags), compiler_identity(compiler)])
    return hashlib.sha256(text.encode()).hexdigest()


@functools.cache
def _nvrtc_archs() -> tuple[list[int], str]:
    """The compute capabilities NVRTC compiles for (75, 80, ...) and its version."""
    nvrtc = _nvrtc()
    supported = list(_check_nvrtc(nvrtc, "nvrtcGetSupportedArchs",
                                  nvrtc.nvrtcGetSupportedArchs()))
    major, minor = _check_nvrtc(nvrtc, "nvrtcVersion", nvrtc.nvrtcVersion())
    return supported, f"{major}.{minor}"


@functools.cache
def compiler_identity(compiler: str) -> str:
    """The compiler's version (and, for NVRTC, the headers it includes): part of every key."""
    if compiler == "nvrtc":
        nvrtc = _nvrtc()
        major, minor = _check_nvrtc(nvrtc, "nvrtcVersion", nvrtc.nvrtcVersion())
        return f"nvrtc {major}.{minor} | headers {' '.join(_header_directories())}"
    try:
        out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        raise BuildError(f"cannot run nvcc: {error}; compiler='nvcc' needs the CUDA toolkit's "
                         f"nvcc on the PATH (or use compiler='nvrtc')") from None
    return out.stdout.strip().splitlines()[-1]


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


# -- NVRTC -------------------------------------------------------------------------------------


def _nvrtc():
    """The cuda.bindings.nvrtc module, its library loaded (BuildError when it cannot be)."""
    from cuda.bindings import nvrtc

    try:
        nvrtc.nvrtcVersion()
    except RuntimeError as error:   # cuda.pathfinder found no libnvrtc
        raise BuildError(f"cannot load NVRTC: {error}; install the wheel "
                         f"'nvidia-cuda-nvrtc==13.0.*' (a dependency of sched: reinstall it "
                         f"with pip) or use compiler='nvcc'") from None
    return nvrtc


@functools.cache
def _header_directories() -> tuple[str, ...]:
    """Where NVRTC finds <cuda_fp16.h>, <cuda_bf16.h> and <mma.h>: the cudart headers, and,
    when `crt/mma.h` (which <mma.h> includes) is not beside them, the first CUDA toolkit
    include directory that has it (a torch install brings the cudart headers without crt/)."""
    from cuda.pathfinder import locate_nvidia_header_directory

    located = locate_nvidia_header_directory("cudart")
    found = [] if located is None else [str(located.abs_path)]
    if not any(_has_crt(directory) for directory in found):
        found += [directory for directory in _toolkit_include_directories()
                  if _has_crt(directory)][:1]
    return tuple(found)


def _has_crt(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, "crt", "mma.h"))


def _toolkit_include_directories() -> list[str]:
    """Include directories of CUDA toolkits: $CUDA_HOME, $CUDA_PATH, beside nvcc on the PATH,
    then /usr/local/cuda."""
    import shutil

    roots = [os.environ.get(name) for name in ("CUDA_HOME", "CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    roots += [os.path.dirname(os.path.dirname(os.path.realpath(nvcc))) if nvcc else None,
              "/usr/local/cuda"]
    return [os.path.join(root, "include") for root in roots if root]


def _check_nvrtc(nvrtc, call: str, result: tuple):
    """The values after an nvrtc call's result code, which must be NVRTC_SUCCESS."""
    status, *values = result
    if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, text = nvrtc.nvrtcGetErrorString(status)
        text = text.decode() if isinstance(text, bytes) else str(status)
        raise BuildError(f"NVRTC: {call} failed: {text}")
    return None if not values else values[0] if len(values) == 1 else tuple(values)


def nvrtc_options(arch: str, flags: tuple[str, ...]) -> list[str]:
    """The options NVRTC compiles with: arch, C++17, ptxas -v, the headers, then `flags`.

    NVRTC 12.9 and later keep a cache of their own, and a compile it serves from there prints
    no ptxas lines (NVIDIA/Fuser#4694; seen here on an H100 as a kernel whose resources could
    not be read): `--no-cache` turns it off, sched's cache being the one that counts."""
    major, minor = (int(part) for part in _nvrtc_archs()[1].split("."))
    no_cache = ["--no-cache"] if (major, minor) >= (12, 9) else []
    return [f"-arch={arch}", "-std=c++17", "--ptxas-options=-v", *no_cache,
            *(f"-I{directory}" for directory in _header_directories()), *flags]


def _compile_nvrtc(source: str, arch: str, flags: tuple[str, ...]) -> tuple[bytes, str, str]:
    nvrtc = _nvrtc()
    options = nvrtc_options(arch, flags)
    command = shlex.join(["nvrtc", *options, SOURCE_NAME])
    program = _check_nvrtc(nvrtc, "nvrtcCreateProgram", nvrtc.nvrtcCreateProgram(
        source.encode(), SOURCE_NAME.encode(), 0, [], []))
    try:
        encoded = [option.encode() for option in options]
        (status,) = nvrtc.nvrtcCompileProgram(program, len(encoded), encoded)
        size = _check_nvrtc(nvrtc, "nvrtcGetProgramLogSize", nvrtc.nvrtcGetProgramLogSize(program))
        buffer = b" " * size
        _check_nvrtc(nvrtc, "nvrtcGetProgramLog", nvrtc.nvrtcGetProgramLog(program, buffer))
        log = buffer.rstrip(b"\0 ").decode(errors="replace")
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, text = nvrtc.nvrtcGetErrorString(status)
            raise BuildError(failure_message(f"NVRTC failed ({text.decode()})", source, log,
                                             command))
        size = _check_nvrtc(nvrtc, "nvrtcGetCUBINSize", nvrtc.nvrtcGetCUBINSize(program))
        cubin = b" " * size
        _check_nvrtc(nvrtc, "nvrtcGetCUBIN", nvrtc.nvrtcGetCUBIN(program, cubin))
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    return cubin, log, command


# -- nvcc --------------------------------------------------------------------------------------


def nvcc_command(arch: str, flags: tuple[str, ...], source: Path, output: Path) -> list[str]:
    return ["nvcc", "-cubin", f"-arch={arch}", "-std=c++17", "-Xptxas", "-v", *flags,
            str(source), "-o", str(output)]


def _compile_nvcc(source: str, arch: str, flags: tuple[str, ...],
                  directory: Path) -> tuple[bytes, str, str]:
    """nvcc on the cached `kernel.cu` in `directory` (so the paths in its messages stay valid),
    into a temporary cubin that the caller renames into place."""
    compiler_identity("nvcc")   # a clear BuildError when there is no nvcc
    output = directory / f"kernel.{os.getpid()}.{uuid.uuid4().hex}.cubin.tmp"
    command = nvcc_command(arch, flags, directory / SOURCE_NAME, output)
    try:
        result = subprocess.run(command, capture_output=True, text=True, cwd=directory,
                                env={**os.environ, "LC_ALL": "C"})
        log = (result.stdout + result.stderr).strip()
        if result.returncode != 0:
            raise BuildError(failure_message(f"nvcc failed (exit status {result.returncode})",
                                             source, log, shlex.join(command)))
        return output.read_bytes(), log, shlex.join(command)
    finally:
        output.unlink(missing_ok=True)


# -- errors ------------------------------------------------------------------------------------


def offending_lines(source: str, log: str) -> str:
    """The source lines the log's errors name (`kernel.cu(12): error: ...`), each marked `>`
    and shown with CONTEXT_LINES lines around it and its line number."""
    lines = source.splitlines()
    wrong = sorted({int(n) for n in ERROR_LINE.findall(log) if 1 <= int(n) <= len(lines)})
    shown: list[str] = []
    for number in wrong:
        shown.append("  ...")
        for k in range(max(1, number - CONTEXT_LINES), min(len(lines), number + CONTEXT_LINES) + 1):
            marker = ">" if k == number else " "
            shown.append(f"{marker}{k:5d} | {lines[k - 1]}")
    return "\n".join(shown)


def failure_message(what: str, source: str, log: str, command: str) -> str:
    """A compile error's message: what failed, the log, the offending lines, the command."""
    excerpt = offending_lines(source, log) or "(the compiler named no line of kernel.cu)"
    hint = f"\n{MISSING_HEADERS_HINT}" if MISSING_HEADER.search(log) else ""
    return (f"{what} compiling {SOURCE_NAME}\n{log.rstrip()}\n"
            f"offending lines:\n{excerpt}\n"
            f"command: {command}{hint}")

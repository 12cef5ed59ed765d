"""`EmulatedKernel`: CUDA C run on the CPU by the emulator, called like a C target kernel.

A call checks its arguments as the C target does (`ArgumentBinder`, device "cpu": numpy
arrays or CPU torch tensors), sizes the grid from the bound dims as `CudaKernel` does, and
passes the kernel's parameters in `CudaKernel`'s order (a pointer per buffer, then the scalar
parameters, then the symbolic dims). The launch runs in a child process (the executable of
`compile_emulator`): the arrays go there in a file it maps, the arrays the kernel writes come
back. So a deadlock, a crash or a kernel under ThreadSanitizer (whose runtime must start with
the process) never takes the caller down with it: each is an `EmulationError` that says what
happened, with the kernel's source lines it names.
"""

from __future__ import annotations

import ctypes
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from sched import env
from sched.arguments import ArgumentBinder, numpy_dtype
from sched.cuda.alignment import allocation_offsets, check_pointer_alignment, parameter_alignments
from sched.cuda.emu.compile import compile_emulator
from sched.cuda.runtime import PARAMETER_CTYPES, parameter_value
from sched.errors import BuildError, EmulationError
from sched.ir.functor import free_vars
from sched.ir.nodes import PrimFunc, Var
from sched.lower.launch import LaunchConfig

MAGIC = b"SCHEDEMU"
ALIGNMENT = 64                    # of each buffer in the launch file
FAILED = 3                        # the runtime's exit status for a failed block
RACE = 66                         # ThreadSanitizer's exit status when it reported something
TSAN_OPTIONS = "halt_on_error=0 exitcode=66 history_size=4 second_deadlock_stack=1"
GRACE_SECONDS = 30                # beyond the watchdog, before the child process is killed


class EmulatedKernel:
    """A CUDA kernel run by the emulator: `kernel(*args)` runs it on numpy arrays or CPU torch
    tensors, in parameter order, writing the outputs in place.

    Built from `func` (the PrimFunc the arguments are checked against), CUDA C `source` with
    the `extern "C"` kernel `kernel_name` and its `launch` configuration, like `CudaKernel`.
    `sanitize="thread"` compiles it with ThreadSanitizer (default: SCHED_EMU_SANITIZE).
    Raises BuildError when g++ cannot compile the source.

    Attributes: `func`, `lowered` (when given), `source` (the CUDA C, as the CUDA target
    ships it), `kernel_name`, `launch`, `sanitize`, `executable` (the program that runs it;
    `save_launch` gives the command that runs one call of it under gdb).
    """

    def __init__(self, func: PrimFunc, source: str, kernel_name: str, launch: LaunchConfig, *,
                 lowered: PrimFunc | None = None, aligned_params: dict | frozenset = frozenset(),
                 sanitize: str | None = None, cache_dir: Path | None = None) -> None:
        self.func, self.lowered, self.source = func, lowered, source
        self.kernel_name, self.launch = kernel_name, launch
        self.sanitize = sanitize if sanitize is not None else env.EMU_SANITIZE.value()
        self.executable = compile_emulator(source, kernel_name, sanitize=self.sanitize,
                                           cache_dir=cache_dir)
        self._binder = ArgumentBinder(func, device="cpu")
        self._aligned = parameter_alignments(func, aligned_params)
        self._scalars = tuple(p for p in func.params if isinstance(p, Var))
        self._grid_vars = (*self._scalars, *func.symbolic_vars)
        for extent in launch.grid:
            unknown = [v.name for v in free_vars(extent) if v not in set(self._grid_vars)]
            if unknown:
                raise BuildError(f"kernel '{kernel_name}': grid extent {extent} uses "
                                 f"{', '.join(unknown)}, which is neither a symbolic dim nor a "
                                 f"scalar parameter of '{func.name}'")

    def __call__(self, *args) -> None:
        prepared = self._prepare(args)
        if prepared is None:
            return                      # an empty grid: nothing to run
        blob, offsets, bound, sizes = prepared
        handle, path = tempfile.mkstemp(prefix="sched-emu-", suffix=".launch")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(blob)
            self._run(path)
            result = np.fromfile(path, np.uint8)
        finally:
            os.unlink(path)
        for buffer, pointer, offset, size in zip(self.func.buffers, bound.pointers, offsets,
                                                 sizes):
            if buffer.storage_name in self._binder.written and size:
                ctypes.memmove(pointer, result.ctypes.data + offset, size)
        self._binder.count_writes(args)

    def save_launch(self, path, *args) -> str:
        """Write the launch of `kernel(*args)` to file `path` and return the command that runs
        it under gdb (the program is built with -g; its source is kernel.cu beside it): step
        through the CUDA C of one thread on the CPU. The arguments are only read."""
        prepared = self._prepare(args)
        if prepared is None:
            raise ValueError("save_launch: the grid is empty for these arguments: nothing runs")
        Path(path).write_bytes(prepared[0])
        return (f"gdb --args {self.executable} {Path(path).resolve()} "
                f"{env.EMU_TIMEOUT.value()!r}")

    def _prepare(self, args):
        """(launch file, buffer offsets in it, bound arguments, buffer sizes), or None when
        the grid is empty."""
        bound = self._binder.bind(args)
        arrays = [args[self.func.params.index(b)] for b in self.func.buffers]
        check_pointer_alignment(self.func, self._aligned, allocation_offsets(arrays),
                                "offset in its allocation")
        values = (*bound.scalars, *bound.dims)
        grid = self.launch.grid_dims(dict(zip(self._grid_vars, values)))
        if 0 in grid:
            return None
        sizes = [numpy_dtype(b.dtype).itemsize * math.prod(np.shape(a))
                 for b, a in zip(self.func.buffers, arrays)]
        blob, offsets = self._launch_file(grid, bound.pointers, sizes, values)
        return blob, offsets, bound, sizes

    def _launch_file(self, grid, pointers, sizes, values) -> tuple[bytearray, list[int]]:
        """The launch file runtime/main.cc's main() reads (its layout is described there)."""
        count = len(pointers) + len(values)
        words = [int.from_bytes(MAGIC, "little"), *grid, *self.launch.block,
                 self.launch.dynamic_shared_bytes, count, len(pointers)]
        slots = []
        for k in range(len(pointers)):
            slots += [k, 0]
        for value, var in zip(values, self._grid_vars):
            scalar = PARAMETER_CTYPES[var.dtype](parameter_value(value, var.dtype))
            slots += [2 ** 64 - 1, int.from_bytes(bytes(scalar).ljust(8, b"\0"),
                                                          "little")]
        header = 8 * (len(words) + len(slots) + 2 * len(pointers))
        offsets, end = [], header
        for size in sizes:
            end = (end + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
            offsets.append(end)
            end += size
        extents = [x for pair in zip(offsets, sizes) for x in pair]
        blob = bytearray(max(end, header))
        blob[:header] = np.array(words + slots + extents, dtype=np.uint64).tobytes()
        view = (ctypes.c_char * len(blob)).from_buffer(blob)
        for pointer, offset, size in zip(pointers, offsets, sizes):
            if size and pointer is not None:        # None: a workspace, zeroed
                ctypes.memmove(ctypes.addressof(view) + offset, pointer, size)
        del view
        return blob, offsets

    def _run(self, path: str, kernel_index: int | None = None) -> None:
        timeout = env.EMU_TIMEOUT.value()
        environment = {**os.environ}
        if kernel_index is not None:        # which kernel of a sequence (compile.entry_source)
            environment["SCHED_EMU_KERNEL"] = str(kernel_index)
        if self.sanitize == "thread":
            environment["TSAN_OPTIONS"] = (TSAN_OPTIONS + " "
                                           + environment.get("TSAN_OPTIONS", "")).strip()
        try:
            result = subprocess.run([str(self.executable), path, repr(timeout)],
                                    capture_output=True, text=True, env=environment,
                                    timeout=timeout + GRACE_SECONDS)
        except subprocess.TimeoutExpired as expired:
            raise EmulationError(
                f"kernel '{self.kernel_name}' (cuda-emu): still running after "
                f"{timeout + GRACE_SECONDS:g} s and killed; raise SCHED_EMU_TIMEOUT for "
                f"a long launch\n{_text(expired.stderr)}") from None
        if result.stdout:
            sys.stdout.write(result.stdout)          # the kernel's printf
        race = "WARNING: ThreadSanitizer" in result.stderr
        if result.returncode == 0 and not race:
            if result.stderr:
                sys.stderr.write(result.stderr)
            return
        raise EmulationError(self._failure(result.returncode, result.stderr, race))

    def _failure(self, status: int, stderr: str, race: bool) -> str:
        name = f"kernel '{self.kernel_name}' (cuda-emu)"
        if race:
            head = (f"{name}: ThreadSanitizer reports a data race (two threads access the "
                    f"same memory, one writes, and no barrier orders them); both accesses "
                    f"are below, with their lines in kernel.cu (the kernel's source)")
        elif status == FAILED:
            messages = [line.removeprefix("sched-emu: ") for line in stderr.splitlines()]
            head = f"{name}: " + "\n".join(messages).strip()
            stderr = ""
        elif status < 0:
            head = (f"{name}: crashed with {signal.Signals(-status).name} (an access out of "
                    f"bounds?)")
        else:
            head = f"{name}: the emulator exited with status {status}"
        if race:
            stderr = tidy_report(stderr)
            if _writes_only(stderr):
                head += (". Both are writes: where the threads store the same value (a copy "
                         "or a statement every thread along an axis repeats, which sched "
                         "accepts as redundant identical writes), the result is right but "
                         "the threads do the work again; bind the copy's loops to that axis "
                         "too to give each element one writer")
        lines = sorted({int(n) for n in re.findall(r"kernel\.cu:(\d+)", stderr)}
                       | {int(n) for n in re.findall(r"\bline (\d+)", head)})
        source = self.source.splitlines()
        shown = [f"  {n:5d} | {source[n - 1]}" for n in lines if 0 < n <= len(source)]
        parts = [head]
        if shown:
            parts += ["", "source lines:", *shown]
        if stderr.strip():
            parts += ["", stderr.rstrip()]
        return "\n".join(parts)

    def __repr__(self) -> str:
        names = ", ".join(p.name for p in self.func.params)
        sanitizer = f", sanitize={self.sanitize!r}" if self.sanitize else ""
        return (f"<EmulatedKernel {self.func.name}({names}): {self.kernel_name} on the CPU, "
                f"{self.launch}{sanitizer}>")


# frames of ThreadSanitizer's stacks inside the emulator or the C++ library, left out
_EMULATOR_FRAME = re.compile(r"^\s+#\d+ .*(/sched/cuda/emu/|/include/c\+\+/|<null>|libstdc\+\+"
                             r"|tsan_interceptors|/entry\.cc:)")


def _writes_only(report: str) -> bool:
    """Whether every access ThreadSanitizer names in `report` is a write."""
    accesses = re.findall(r"(?:Previous )?(read|write|Read|Write) of size", report)
    return bool(accesses) and all(a.lower() == "write" for a in accesses)


def tidy_report(report: str) -> str:
    """ThreadSanitizer's `report` with the kernel's file named kernel.cu (not its path in the
    cache) and the frames of the emulator's own code left out. Its threads are named
    "t<threadIdx> b<blockIdx>" (x,y,z each; cut at 15 characters)."""
    lines = [re.sub(r"\S*/kernel\.cu:", "kernel.cu:", line) for line in report.splitlines()
             if not _EMULATOR_FRAME.match(line)]
    return "\n".join(lines)


def _text(data) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")

"""Compile and run a small C program that calls an exported kernel (`kernel.export`), the way a
product without Python would: arrays are read from files, the exported function is called once,
its status and message printed, and every array written back."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Pointer:
    """An argument that is a pointer into array `array` (an index among the call's arrays)
    moved by `offset` bytes; `array=None` is NULL."""

    array: int | None
    offset: int = 0


@dataclass
class Run:
    status: int
    message: str
    arrays: list[np.ndarray]


def program_arrays(args: list, more: tuple = ()) -> list[np.ndarray]:
    """The arrays a program of `c_program(name, args, more)` loads, in order."""
    return [a for a in args if isinstance(a, np.ndarray)] + list(more)


def c_program(name: str, args: list, more: tuple = (), *, allocate: str = "malloc(bytes)",
              cuda: bool = False) -> str:
    """A C program calling `name` once with `args`: numpy arrays (read from a{k}.bin),
    Python ints and floats (their C literal), or `Pointer`s (into the arrays, `more` loaded
    after those of `args`). `allocate` is a C expression template of `bytes` that allocates
    an array. With `cuda`, the arrays are copied to the GPU (device 0's primary context), the
    call gets device pointers and a stream argument (0), and the results are copied back."""
    arrays = program_arrays(args, more)
    lines = ["#include <stdio.h>", "#include <stdlib.h>", "#include <stdint.h>",
             f'#include "{name}.h"', "",
             "static char *load(const char *path, size_t bytes) {",
             f"    char *data = {allocate.replace('bytes', 'bytes + 64')};",
             "    FILE *f = fopen(path, \"rb\");",
             "    if (!f || fread(data, 1, bytes, f) != bytes) { perror(path); exit(2); }",
             "    fclose(f);", "    return data;", "}", "",
             "int main(void) {"]
    for k, array in enumerate(arrays):
        lines.append(f'    char *a{k} = load("a{k}.bin", {array.nbytes});')
    pointer = "(void *)(a{} + {})"
    if cuda:
        pointer = "(CUdeviceptr)(d{} + {})"
        lines += ["    CUdevice device;", "    CUcontext context;",
                  "    if (cuInit(0) || cuDeviceGet(&device, 0) || "
                  "cuDevicePrimaryCtxRetain(&context, device) || cuCtxSetCurrent(context)) "
                  "return 3;"]
        for k, array in enumerate(arrays):
            lines += [f"    CUdeviceptr d{k};",
                      f"    if (cuMemAlloc(&d{k}, {array.nbytes} + 64) || "
                      f"cuMemcpyHtoD(d{k}, a{k}, {array.nbytes})) return 3;"]
    values, k = [], 0
    for arg in args:
        if isinstance(arg, np.ndarray):
            values.append(pointer.format(k, 0))
            k += 1
        elif isinstance(arg, Pointer):
            values.append("0" if arg.array is None else pointer.format(arg.array, arg.offset))
        else:
            values.append(repr(arg))
    if cuda:
        values.append("0")
    lines += [f"    int status = {name}({', '.join(values)});",
              f'    printf("%d\\n%s\\n", status, status ? {name}_error_message() : "");']
    if cuda:
        lines.append("    if (cuCtxSynchronize()) return 4;")
        lines += [f"    if (cuMemcpyDtoH(a{k}, d{k}, {array.nbytes})) return 3;"
                  for k, array in enumerate(arrays)]
    for k, array in enumerate(arrays):
        lines += [f'    FILE *o{k} = fopen("a{k}.out", "wb");',
                  f"    fwrite(a{k}, 1, {array.nbytes}, o{k});", f"    fclose(o{k});"]
    return "\n".join([*lines, "    return 0;", "}", ""])


def run_c_program(directory: Path, source: str, arrays: list[np.ndarray],
                  compile_command: list[str]) -> Run:
    """Write `source` as main.c and the arrays as a{k}.bin in `directory`, compile with
    `compile_command` (run there; it must write ./main), run, and read the results."""
    (directory / "main.c").write_text(source)
    for k, array in enumerate(arrays):
        np.ascontiguousarray(array).tofile(directory / f"a{k}.bin")
    built = subprocess.run(compile_command, cwd=directory, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    done = subprocess.run(["./main"], cwd=directory, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    status, message = (done.stdout.split("\n") + [""])[:2]
    outputs = [np.fromfile(directory / f"a{k}.out", dtype=a.dtype).reshape(a.shape)
               for k, a in enumerate(arrays)]
    return Run(int(status), message, outputs)

"""`kernel.export(directory)` for the C target: a `.c` and a `.h` a product compiles with gcc
alone (no Python, no sched), and a CMakeLists.txt that builds them as a static library.

    exported = sched.build(func, target="c").export("out/matmul")
    # out/matmul/matmul.h   int matmul(const float *A, const float *B, float *C, int64_t n);
    # out/matmul/matmul.c   the generated kernel (matmul_kernel) and the checked entry point
    # out/matmul/matmul.sched.cmake   the library matmul, for CMake
    # out/matmul/CMakeLists.txt        builds every export in the directory
    # out/matmul/libmatmul.so     with shared_library=True: built here with gcc

The interface is `sched.c.export_interface`'s: the parameters in order, symbolic dims as
`int64_t`, a `sched_status` result and `matmul_error_message()`. The kernel's C is the code the
built kernel runs, so it is vectorized for this machine's ISA (`-march=native` at export
time): build the files with the flags the CMake file sets, on a CPU with the same vector
extensions (`sched.c.isa.host_isa()` names them).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import replace
from pathlib import Path

from sched.c.build import COMPILER, ICE_RETRY_FLAGS, compiler_flags, needs_retry_flags
from sched.c.codegen import c_function_name, generate_c
from sched.c.dtypes import STORAGE_TYPES
from sched.c.export_interface import (
    CheckWriter,
    arguments,
    export_name,
    messages,
    status_enum,
)
from sched.c.exported import ExportedKernel, cmake_files, write_files
from sched.errors import BuildError

_BUILD_FLAGS_SKIPPED = ("-shared", "-fPIC", "-fopenmp")   # the CMake file adds its own


def export_c(kernel, directory, name: str | None = None, *,
             shared_library: bool = False) -> ExportedKernel:
    """Write the C files of built C-target `kernel` (a CKernel) to `directory`; see the module
    doc. `name` is the C name of the function (default: the PrimFunc's). `shared_library`
    also builds `libNAME.so` from them with gcc (listed last in the files)."""
    func = kernel.func
    name = export_name(func, name)
    args = arguments(func, _pointer_type, lambda var: STORAGE_TYPES[var.dtype], name)
    checks = CheckWriter(func, name, args, check_bounds=kernel.checks_bounds, alignments={},
                         pointer_value=lambda arg: f"(uintptr_t){arg.name}")
    lines = checks.write()
    fast_math = getattr(kernel, "fast_math", False)
    lowered = replace(kernel.lowered, name=f"{name}_kernel")
    source = generate_c(lowered, fast_math=fast_math, static=True,
                        extern_c=getattr(kernel, "extern_c", ""))
    signature = f"int {name}({', '.join(f'{a.c_type} {a.name}' for a in args)})"
    call = _kernel_call(c_function_name(lowered), args, func)
    retried = needs_retry_flags(kernel.library_path)     # gcc died on it without them
    build_flags = [*compiler_flags(fast_math), *(ICE_RETRY_FLAGS if retried else ())]
    flags = [f for f in build_flags if f not in _BUILD_FLAGS_SKIPPED]
    files = {
        f"{name}.h": _header(name, args, signature, func.name, flags),
        f"{name}.c": "\n".join([
            f"// {name}: sched's export of PrimFunc '{func.name}' for the CPU "
            f"(see {name}.h).", "#include <stdarg.h>", "#include <stdio.h>",
            f'#include "{name}.h"', "", source, messages(name), *checks.helpers,
            f"{signature} {{", *lines, f"    {call}", "    return SCHED_OK;", "}", ""]),
        **cmake_files(name, _cmake(name, flags)),
    }
    written = write_files(directory, files)
    if shared_library:
        written = (*written, _build_shared_library(written[1], name, build_flags))
    return ExportedKernel(name, "c", written[0].parent, written,
                          tuple(f for f in build_flags if f not in ("-shared", "-fPIC")))


def _build_shared_library(source: Path, name: str, flags: list[str]) -> Path:
    """`libNAME.so` next to `source`, built with the `flags` sched built the kernel with."""
    library = source.with_name(f"lib{name}.so")
    command = [COMPILER, *flags, source.name, "-o", library.name, "-lm"]
    done = subprocess.run(command, cwd=source.parent, capture_output=True, text=True,
                          env={**os.environ, "LC_ALL": "C"})
    if done.returncode != 0:
        raise BuildError(f"export: gcc failed (exit status {done.returncode}) building "
                         f"{library}:\n{done.stderr.rstrip()}\ncommand: {shlex.join(command)}")
    return library


def _pointer_type(buffer, written: bool) -> str:
    return f"{'' if written else 'const '}{STORAGE_TYPES[buffer.dtype]} *"


def _kernel_call(kernel: str, args, func) -> str:
    """The call of the generated kernel function `kernel`: buffers in `func.buffers` order,
    the scalars, then the dims in the kernel's types (`sched.c.codegen`'s signature)."""
    by_ir = {arg.ir: arg for arg in args}
    values = [by_ir[buffer].name for buffer in func.buffers]
    values += [arg.name for arg in args if arg.kind == "scalar"]
    values += [f"({STORAGE_TYPES[arg.ir.dtype]}){arg.name}" for arg in args if arg.kind == "dim"]
    return f"{kernel}({', '.join(values)});"


def _header(name: str, args, signature: str, func_name: str, flags: list[str]) -> str:
    guard = f"SCHED_EXPORT_{name.upper()}_H"
    described = "\n".join(f" *   {arg.describe()}" for arg in args)
    return f"""/* {name}.h: PrimFunc '{func_name}' exported by sched for the CPU.
 *
 * int {name}(...) checks its arguments and runs the kernel on the calling thread (and its
 * OpenMP threads, when built with -fopenmp); arrays are dense, row-major (C order):
{described}
 * It returns SCHED_OK (0) when the kernel ran, else a sched_status without running it;
 * {name}_error_message() then says what was wrong (per thread).
 * Build {name}.c with: gcc {' '.join(flags)} -fopenmp -c {name}.c
 */
#ifndef {guard}
#define {guard}

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {{
#endif

{status_enum()}

{signature};
const char *{name}_error_message(void);
const char *{name}_status_string(int status);

#ifdef __cplusplus
}}
#endif

#endif
"""


def _cmake(name: str, flags: list[str]) -> str:
    options = " ".join(f for f in flags if f != "-std=c11")
    return f"""# sched's export '{name}': the static library {name} (CMakeLists.txt includes this).
add_library({name} STATIC ${{CMAKE_CURRENT_LIST_DIR}}/{name}.c)
target_include_directories({name} PUBLIC ${{CMAKE_CURRENT_LIST_DIR}})
set_target_properties({name} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON
                      POSITION_INDEPENDENT_CODE ON)
target_compile_options({name} PRIVATE {options})
find_package(OpenMP)
if(OpenMP_C_FOUND)
  target_link_libraries({name} PUBLIC OpenMP::OpenMP_C)
endif()
target_link_libraries({name} PUBLIC m)
"""

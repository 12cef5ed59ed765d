"""`kernel.export(directory)` for CUDA: what a product needs to run the kernel with the CUDA
toolkit alone (no Python, no sched, no NVRTC, no compilation at run time).

    exported = sched.build(sch.func, target="cuda", arch="sm_90").export("out/matmul")
    # out/matmul/matmul.h      int matmul(CUdeviceptr A, ..., int64_t n, CUstream stream);
    # out/matmul/matmul.c      the cubin as a byte array and the launcher (driver API only)
    # out/matmul/matmul.cu     the CUDA C the cubin was compiled from (for reading)
    # out/matmul/matmul.sched.cmake   the library matmul, for CMake
    # out/matmul/CMakeLists.txt        builds every export in the directory

The launcher loads the cubin on first use (or at `matmul_init()`) into the CUDA context current
on the calling thread (the device's primary context, the one the runtime API and torch use,
when none is), opts the kernel into more than 48 KB of dynamic shared memory when it needs it,
checks the arguments (`sched.c.export_interface`), computes the grid from the dims and launches
with `cuLaunchKernel` on the given stream, without synchronizing. The cubin runs on GPUs of the
arch it was built for (`runs_on`: same major, minor no newer); the header names it.
"""

from __future__ import annotations

from sched.c.export_interface import (
    CheckWriter,
    arguments,
    export_name,
    messages,
    status_enum,
)
from sched.c.exported import ExportedKernel, cmake_files, write_files
from sched.cuda.alignment import alignment_bytes, alignment_reasons
from sched.cuda.codegen import STATIC_SHARED_LIMIT
from sched.ir.nodes import Var
from sched.lower.launch import MAX_GRID

# the kernel's own type of a scalar (16-bit floats as their bits: __half is no C type)
_SCALAR_TYPES = {"float16": "uint16_t", "bfloat16": "uint16_t", "float32": "float",
                 "float64": "double", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
                 "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t",
                 "uint32": "uint32_t", "uint64": "uint64_t", "bool": "bool"}


def export_cuda(kernel, directory, name: str | None = None) -> ExportedKernel:
    """Write the files of built CUDA `kernel` (a CudaKernel) to `directory`; see the module
    doc. `name` is the C name of the launch function (default: the PrimFunc's)."""
    func = kernel.func
    name = export_name(func, name)
    args = arguments(func, lambda buffer, written: "CUdeviceptr",
                     lambda var: _SCALAR_TYPES[var.dtype], name)
    checks = CheckWriter(func, name, args, check_bounds=kernel.checks_bounds,
                         alignments=alignment_bytes(kernel._aligned, func),
                         alignment_reasons=alignment_reasons(kernel._aligned, func),
                         pointer_value=lambda arg: f"(uint64_t){arg.name}")
    lines = checks.write()
    grid = [[checks.expression(extent) for extent in launch.grid]
            for _, launch in _kernels(kernel)]
    workspace = [(buffer, checks.bytes_of(f"workspace {buffer.name}", [
        checks.expression(dim) for dim in buffer.shape], _element_bytes(buffer.dtype)))
        for buffer in getattr(kernel, "workspace", ())]
    signature = (f"int {name}({', '.join(f'{a.c_type} {a.name}' for a in args)}, "
                 f"CUstream stream)")
    files = {
        f"{name}.h": _header(name, args, signature, kernel),
        f"{name}.c": "\n".join([
            f"// {name}: sched's export of PrimFunc '{func.name}' for CUDA {kernel.arch} "
            f"(see {name}.h).", "#include <pthread.h>", "#include <stdarg.h>",
            "#include <stdio.h>", f'#include "{name}.h"', "",
            _cubin_array(name, kernel.cubin), messages(name), *checks.helpers,
            _loader(name, kernel), f"{signature} {{", *lines,
            *_launch(name, args, func, kernel, grid, workspace), "}", ""]),
        f"{name}.cu": kernel.source,
        **cmake_files(name, _cmake(name)),
    }
    written = write_files(directory, files)
    return ExportedKernel(name, "cuda", written[0].parent, written)


def _cubin_array(name: str, cubin: bytes) -> str:
    rows = [", ".join(f"0x{byte:02x}" for byte in cubin[k:k + 16])
            for k in range(0, len(cubin), 16)]
    body = ",\n    ".join(rows)
    return (f"// the cubin ({len(cubin)} bytes), 8-byte aligned as cuModuleLoadData reads it\n"
            f"static const unsigned char {name}_cubin[{len(cubin)}] "
            f"__attribute__((aligned(8))) = {{\n    {body}\n}};\n")


def _kernels(kernel) -> list[tuple[str, object]]:
    """(name, launch) of each kernel the function runs, in order (a CudaKernelSequence has
    several)."""
    if hasattr(kernel, "kernels"):
        return [(k.name, k.launch) for k in kernel.kernels]
    return [(kernel.kernel_name, kernel.launch)]


def _function(name: str, k: int) -> str:
    return f"{name}_function" if k == 0 else f"{name}_function_{k}"


def _element_bytes(dtype: str) -> int:
    from sched.cuda.codegen import element_bytes

    return element_bytes(dtype)


def _loader(name: str, kernel) -> str:
    """C: the module and its functions, loaded once per process into the current context."""
    getters, declarations = "", []
    for k, (kernel_name, launch) in enumerate(_kernels(kernel)):
        declarations.append(f"static CUfunction {_function(name, k)};")
        getters += f"""
    if (status == SCHED_OK) status = {name}_check_cuda(
        cuModuleGetFunction(&{_function(name, k)}, {name}_module, "{kernel_name}"),
        "cuModuleGetFunction");"""
        dynamic = launch.dynamic_shared_bytes
        if dynamic > STATIC_SHARED_LIMIT:
            getters += f"""
    if (status == SCHED_OK)
        status = {name}_check_cuda(cuFuncSetAttribute({_function(name, k)},
            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, {dynamic}),
            "cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, {dynamic})");"""
    functions = "\n".join(declarations)
    return f"""static pthread_mutex_t {name}_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext {name}_context;
static CUmodule {name}_module;
{functions}

static int {name}_check_cuda(CUresult result, const char *call) {{
    if (result == CUDA_SUCCESS) return SCHED_OK;
    const char *error = "unknown", *text = "";
    cuGetErrorName(result, &error);
    cuGetErrorString(result, &text);
    return {name}_fail(SCHED_ERROR_CUDA, "{name}: %s failed: %s (%d): %s%s", call, error,
                       (int)result, text, result == CUDA_ERROR_NO_BINARY_FOR_GPU
                       ? " (the cubin is for {kernel.arch}: export it for this GPU's arch)" : "");
}}

static int {name}_load(void) {{
    CUcontext current = NULL;
    int status = {name}_check_cuda(cuInit(0), "cuInit");
    if (status == SCHED_OK) status = {name}_check_cuda(cuCtxGetCurrent(&current),
                                                        "cuCtxGetCurrent");
    if (status == SCHED_OK && current == NULL) {{    /* the primary context of device 0 */
        CUdevice device;
        status = {name}_check_cuda(cuDeviceGet(&device, 0), "cuDeviceGet");
        if (status == SCHED_OK) status = {name}_check_cuda(
            cuDevicePrimaryCtxRetain(&current, device), "cuDevicePrimaryCtxRetain");
        if (status == SCHED_OK) status = {name}_check_cuda(cuCtxSetCurrent(current),
                                                            "cuCtxSetCurrent");
    }}
    if (status == SCHED_OK) status = {name}_check_cuda(
        cuModuleLoadData(&{name}_module, {name}_cubin), "cuModuleLoadData");{getters}
    if (status == SCHED_OK) {name}_context = current;
    return status;
}}

int {name}_init(void) {{
    pthread_mutex_lock(&{name}_lock);
    int status = {name}_context ? SCHED_OK : {name}_load();
    pthread_mutex_unlock(&{name}_lock);
    return status;
}}

/* the calling thread's context must be the one the cubin was loaded into: a thread with
   none gets it; a thread on another context is refused (the module is not loaded there) */
static int {name}_use_context(void) {{
    CUcontext current = NULL;
    int status = {name}_check_cuda(cuCtxGetCurrent(&current), "cuCtxGetCurrent");
    if (status != SCHED_OK || current == {name}_context) return status;
    if (current == NULL)
        return {name}_check_cuda(cuCtxSetCurrent({name}_context), "cuCtxSetCurrent");
    return {name}_fail(SCHED_ERROR_CUDA, "{name}: the calling thread's CUDA context is not the "
                       "one the kernel was loaded into: call {name}_unload() and {name}_init() "
                       "with this context current");
}}

int {name}_unload(void) {{
    pthread_mutex_lock(&{name}_lock);
    int status = SCHED_OK;
    if ({name}_context) {{
        status = {name}_check_cuda(cuModuleUnload({name}_module), "cuModuleUnload");
        {name}_context = NULL;
    }}
    pthread_mutex_unlock(&{name}_lock);
    return status;
}}
"""


def _launch(name: str, args, func, kernel, grids: list[list[str]],
            workspace: list) -> list[str]:
    """C lines: load on first use, the grids, the workspace (cuMemAllocAsync on the stream),
    the parameters in the kernels' order, the launches in order, the workspace freed on the
    stream after them."""
    by_ir = {arg.ir: arg for arg in args}
    lines = []      # the grids checked first: a bad size is SCHED_ERROR_LAUNCH with no GPU too
    empty = []
    for k, grid in enumerate(grids):
        suffix = "" if k == 0 else f"_{k}"
        for axis, (extent, limit) in enumerate(zip(grid, MAX_GRID)):
            var = f"sched_grid_{'xyz'[axis]}{suffix}"
            # (a negative extent: an empty loop, nothing to launch, as on the other paths)
            lines.append(f"    const int64_t {var} = ({extent}) < 0 ? 0 : ({extent});")
            lines.append(f"    if ({var} > INT64_C({limit})) return {name}_fail("
                         f"SCHED_ERROR_LAUNCH, \"{name}: the grid has %lld blocks along "
                         f"{'xyz'[axis]}, beyond CUDA's {limit}\", (long long){var});")
        empty.append(" || ".join(f"sched_grid_{a}{suffix} == 0" for a in "xyz"))
    if len(grids) == 1:
        lines.append(f"    if ({empty[0]}) return SCHED_OK;   /* nothing to compute */")
    lines += [f"    int status = {name}_init();", "    if (status != SCHED_OK) return status;",
              f"    if ((status = {name}_use_context()) != SCHED_OK) return status;"]
    params = [f"&{by_ir[buffer].name}" for buffer in func.buffers]
    for k, (buffer, size) in enumerate(workspace):
        lines += [f"    CUdeviceptr sched_workspace{k} = 0;   /* {buffer.name} */",
                  f"    if ((status = {name}_check_cuda(cuMemAllocAsync(&sched_workspace{k}, "
                  f"(size_t)({size}), stream), \"cuMemAllocAsync({buffer.name})\")) != "
                  f"SCHED_OK) return status;"]
        params.append(f"&sched_workspace{k}")
    for arg in args:
        if arg.kind == "scalar":
            params.append(f"&{arg.name}")
    for k, var in enumerate(func.symbolic_vars):
        lines.append(f"    {_SCALAR_TYPES[var.dtype]} sched_dim{k} = "
                     f"({_SCALAR_TYPES[var.dtype]}){by_ir[var].name};")
        params.append(f"&sched_dim{k}")
    assert all(isinstance(v, Var) for v in func.symbolic_vars)
    lines.append(f"    void *sched_params[] = {{{', '.join(params) or 'NULL'}}};")
    if len(grids) == 1 and not workspace:
        launch = kernel.launch
        block = ", ".join(str(b) for b in launch.block)
        return lines + [
            f"    return {name}_check_cuda(cuLaunchKernel({name}_function, "
            f"(unsigned)sched_grid_x, (unsigned)sched_grid_y, (unsigned)sched_grid_z, "
            f"{block}, {launch.dynamic_shared_bytes}, stream, sched_params, NULL), "
            f"\"cuLaunchKernel\");"]
    for k, (kernel_name, launch) in enumerate(_kernels(kernel)):
        suffix = "" if k == 0 else f"_{k}"
        block = ", ".join(str(b) for b in launch.block)
        lines.append(
            f"    if (status == SCHED_OK && !({empty[k]})) status = {name}_check_cuda("
            f"cuLaunchKernel({_function(name, k)}, (unsigned)sched_grid_x{suffix}, "
            f"(unsigned)sched_grid_y{suffix}, (unsigned)sched_grid_z{suffix}, {block}, "
            f"{launch.dynamic_shared_bytes}, stream, sched_params, NULL), "
            f"\"cuLaunchKernel({kernel_name})\");")
    for k in range(len(workspace)):
        lines.append(f"    if (sched_workspace{k}) cuMemFreeAsync(sched_workspace{k}, stream);")
    return lines + ["    return status;"]


def _header(name: str, args, signature: str, kernel) -> str:
    guard = f"SCHED_EXPORT_{name.upper()}_H"
    described = "\n".join(f" *   {arg.describe()}" for arg in args)
    return f"""/* {name}.h: PrimFunc '{kernel.func.name}' exported by sched for CUDA {kernel.arch}.
 *
 * int {name}(...) checks its arguments and launches the kernel on `stream` (no
 * synchronization); buffers are device pointers to dense, row-major (C order) arrays:
{described}
 * Launch: {"; ".join(f"{n}: {launch}" for n, launch in _kernels(kernel))}.
 * It returns SCHED_OK (0) when the kernel was launched, else a sched_status without launching;
 * {name}_error_message() then says what was wrong (per thread). The cubin is loaded on the
 * first call, or by {name}_init(), into the context current on the calling thread (the
 * primary context of device 0 when none is); later calls use that context (a thread with no
 * current context is given it); {name}_unload() unloads it.
 * The cubin runs on {kernel.arch} (and newer minor versions of the same major).
 * Link with the CUDA driver library (-lcuda) and pthreads; nothing else.
 */
#ifndef {guard}
#define {guard}

#include <stdbool.h>
#include <stdint.h>

#include <cuda.h>

#ifdef __cplusplus
extern "C" {{
#endif

{status_enum()}

{signature};
int {name}_init(void);
int {name}_unload(void);
const char *{name}_error_message(void);
const char *{name}_status_string(int status);

#ifdef __cplusplus
}}
#endif

#endif
"""


def _cmake(name: str) -> str:
    return f"""# sched's CUDA export '{name}': the static library {name} on the CUDA driver API
# only (CMakeLists.txt includes this).
find_package(CUDAToolkit REQUIRED)
find_package(Threads REQUIRED)
add_library({name} STATIC ${{CMAKE_CURRENT_LIST_DIR}}/{name}.c)
target_include_directories({name} PUBLIC ${{CMAKE_CURRENT_LIST_DIR}})
set_target_properties({name} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON
                      POSITION_INDEPENDENT_CODE ON)
target_link_libraries({name} PUBLIC CUDA::cuda_driver Threads::Threads)
"""

"""Loading cubins and launching kernels with the CUDA driver API, on torch's context and stream.

`CudaModule` loads a cubin into the primary context of a device: the context torch's runtime
uses, so pointers from `tensor.data_ptr()` are valid in it. `CudaKernel` is what a user calls:
it compiles at construction (through the on-disk cache), loads the cubin on the first call on
each device, and at each call checks the arguments, sizes the grid from the bound dims and
launches on `torch.cuda.current_stream()` with no copy and no sync.

The kernel's parameters, in the same order as the C target's function: a pointer per buffer
parameter (in parameter order), then each scalar parameter in its dtype (float16 as `__half`,
bfloat16 as `__nv_bfloat16`), then each symbolic dim (`PrimFunc.symbolic_vars` order, int32
unless the dim is declared otherwise).

Every driver call's result is checked (`device.check`): a failure raises CudaError naming the
call and the CUresult. With no GPU, constructing a kernel works and calling it raises NoGPUError.
"""

from __future__ import annotations

import ctypes
import warnings
from pathlib import Path

from sched.arguments import ArgumentBinder
from sched.c.entry import scalar_bits
from sched.c.torch_calls import MAX_KEYS, TorchCalls
from sched.cuda.alignment import check_pointer_alignment, parameter_alignments
from sched.cuda.codegen import shared_bytes
from sched.cuda.compile import compile_cuda
from sched.cuda.device import (
    DEFAULT_ARCH,
    check,
    current_device_fast,
    current_stream,
    default_arch,
    device_arch,
    gpu_available,
    require_gpu,
    runs_on,
)
from sched.cuda.resources import Resources, arch_limits
from sched.errors import BuildError
from sched.ir.functor import free_vars
from sched.ir.nodes import PrimFunc, Var
from sched.lower.launch import LaunchConfig

STATIC_SHARED_LIMIT = 48 * 1024   # more dynamic shared memory than this needs an opt-in

# the ctypes type each dtype of scalar parameter is passed as (16-bit floats: their bits)
PARAMETER_CTYPES = {
    "float32": ctypes.c_float, "float64": ctypes.c_double, "float16": ctypes.c_uint16,
    "bfloat16": ctypes.c_uint16, "int8": ctypes.c_int8, "int16": ctypes.c_int16,
    "int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint8": ctypes.c_uint8,
    "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
    "bool": ctypes.c_bool}


def parameter_value(value, dtype: str):
    """`value` as the kernel receives it: half-precision floats as their 16 bits, rounded as
    the C target's entry point rounds them (a NaN stays a NaN: it became -0.0 in bfloat16
    here; audit helper-78)."""
    return scalar_bits(value, dtype)


def _chosen_arch(kernel_name: str) -> str:
    """The arch to compile for when none is named: the GPU's, else DEFAULT_ARCH, said so."""
    if gpu_available():
        return default_arch()
    warnings.warn(f"kernel '{kernel_name}': no arch named and no GPU here: compiled for "
                  f"{DEFAULT_ARCH}; name one (arch='sm_80', or --arch on the command line) to "
                  f"run it on another GPU", stacklevel=4)
    return DEFAULT_ARCH


class CudaModule:
    """A cubin loaded into the primary context of CUDA device `ordinal` (torch's context).

    Requires a GPU (NoGPUError otherwise). `function(name, dynamic_shared_bytes)` gets a
    kernel, opting it into more than 48 KB of dynamic shared memory when asked for.
    """

    def __init__(self, cubin: bytes, ordinal: int) -> None:
        require_gpu("loading a CUDA module")
        from cuda.bindings import driver

        self._driver = driver
        self.ordinal = ordinal
        check("cuInit", driver.cuInit(0))
        self.device = check("cuDeviceGet", driver.cuDeviceGet(ordinal))
        self.context = check("cuDevicePrimaryCtxRetain",
                             driver.cuDevicePrimaryCtxRetain(self.device))
        self.make_current()
        self.handle = check("cuModuleLoadData", driver.cuModuleLoadData(cubin))

    def make_current(self) -> None:
        """Make the device's primary context current on this thread, if it is not already."""
        driver = self._driver
        current = check("cuCtxGetCurrent", driver.cuCtxGetCurrent())
        if current is None or int(current) != int(self.context):
            check("cuCtxSetCurrent", driver.cuCtxSetCurrent(self.context))

    def function(self, name: str, dynamic_shared_bytes: int = 0):
        """The CUfunction `name` (an `extern "C"` kernel of the cubin)."""
        driver = self._driver
        function = check("cuModuleGetFunction",
                         driver.cuModuleGetFunction(self.handle, name.encode()))
        if dynamic_shared_bytes > STATIC_SHARED_LIMIT:
            attribute = driver.CUfunction_attribute
            check("cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                  driver.cuFuncSetAttribute(
                      function, attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                      dynamic_shared_bytes))
        return function

    def close(self) -> None:
        """Unload the module and release the context (the module's functions die with it)."""
        if self.handle is not None:
            check("cuModuleUnload", self._driver.cuModuleUnload(self.handle))
            check("cuDevicePrimaryCtxRelease",
                  self._driver.cuDevicePrimaryCtxRelease(self.device))
            self.handle = None


def _check_shared_memory(kernel_name: str, launch, arch: str, shared: int) -> None:
    """BuildError where `shared` bytes per block exceed what `arch` gives a block."""
    limits = arch_limits(arch)
    if limits is not None and shared > limits.max_shared_per_block:
        raise BuildError(f"kernel '{kernel_name}' cannot launch with {launch} on {arch}:\n"
                         f"  {shared} bytes of shared memory per block exceed {arch}'s "
                         f"{limits.max_shared_per_block}: use smaller shared tiles")


class CudaKernel:
    """A compiled CUDA kernel: `kernel(*args)` launches it on torch CUDA tensors (and Python
    scalars), in parameter order, on the current device and stream, writing outputs in place.

    Built from `func` (the PrimFunc the arguments are checked against), CUDA C `source` with the
    `extern "C"` kernel `kernel_name`, its `launch` configuration (a LaunchConfig
    with grid, block and dynamic_shared_bytes), `arch` (default: the current
    device's, or sm_90 with no GPU), `compiler` ("nvrtc" or "nvcc") and extra `flags`.
    Compiles at construction (or finds the cubin in the cache); a call compiles nothing.
    Raises BuildError when compilation fails, when the source has no such kernel, or when the
    block does not fit the arch (too many threads for its registers, too much shared memory).

    Attributes: `func`, `lowered` (the loop IR, when given), `source`, `kernel_name`, `launch`,
    `arch`, `compiler`, `compiled` (the CompiledModule), `cubin`, `resources` (a Resources
    report: print it, or `rich.print(kernel.resources.table())`).
    `export(directory)` writes it for a C program that runs it without Python.
    """

    def __init__(self, func: PrimFunc, source: str, kernel_name: str, launch: LaunchConfig,
                 arch: str | None = None, compiler: str = "nvrtc", flags=(), *,
                 lowered: PrimFunc | None = None, cache_dir: Path | None = None,
                 aligned_params: dict | frozenset = frozenset()) -> None:
        self.func, self.lowered, self.source = func, lowered, source
        # buffers the kernel moves wider than an element: (index, Alignment)
        self._aligned = parameter_alignments(func, aligned_params)
        self.kernel_name, self.launch = kernel_name, launch
        self.arch = arch or _chosen_arch(kernel_name)
        self.compiler, self.flags, self.cache_dir = compiler, tuple(flags), cache_dir
        if lowered is not None:      # known before compiling: the tuner saves the compile
            _check_shared_memory(kernel_name, launch, self.arch, shared_bytes(lowered))
        self.compiled = compile_cuda(source, self.arch, compiler, self.flags,
                                     cache_dir=cache_dir)
        self.cubin = self.compiled.cubin
        self.resources = self._read_resources()
        self._binder = ArgumentBinder(func, device="cuda")
        self._scalars = tuple(p for p in func.params if isinstance(p, Var))
        self._grid_vars = (*self._scalars, *func.symbolic_vars)
        self._check_grid_vars()
        self._param_types = ([ctypes.c_void_p] * len(func.buffers)
                             + [PARAMETER_CTYPES[v.dtype] for v in self._grid_vars])
        self._loaded: dict[int, tuple[CudaModule, object]] = {}   # device -> module, function
        self._torch_calls = TorchCalls(self._binder, context=current_device_fast)
        self._grids: dict[tuple, tuple[int, int, int]] = {}   # dims' values -> grid

    def _read_resources(self) -> Resources:
        try:
            resources = self._resources_from_log()
        except BuildError:
            if not self.compiled.from_cache:
                raise
            # a cache entry whose log lacks the kernel (written before sched turned NVRTC's
            # own cache off, which prints no ptxas lines on a hit): compile it again
            self.compiled = compile_cuda(self.source, self.arch, self.compiler, self.flags,
                                         cache_dir=self.cache_dir, refresh=True)
            self.cubin = self.compiled.cubin
            resources = self._resources_from_log()
        problems = resources.launch_problems()
        if problems:
            raise BuildError(f"kernel '{self.kernel_name}' cannot launch with {self.launch} "
                             f"on {self.arch}:\n" + "\n".join(f"  {p}" for p in problems))
        return resources

    def _resources_from_log(self) -> Resources:
        """The kernel's resources from the compiler's log; BuildError when the log does not
        name it (with the log's start, or that it was empty)."""
        try:
            return Resources.from_log(
                self.compiled.log, self.kernel_name, self.arch,
                dynamic_shared_bytes=self.launch.dynamic_shared_bytes,
                threads_per_block=self.launch.threads_per_block)
        except ValueError as error:
            log = self.compiled.log.strip()
            shown = (f"the log, {len(log)} characters, begins:\n{log[:600]}" if log else
                     "the log was empty")
            cached = f" (cached in {self.compiled.path.parent})" if self.compiled.from_cache else ""
            raise BuildError(f"kernel '{self.kernel_name}': {error}; declare the kernel "
                             f"extern \"C\" __global__ so its name is not mangled; "
                             f"{shown}{cached}") from None

    def _check_grid_vars(self) -> None:
        known = set(self._grid_vars)
        for extent in self.launch.grid:
            unknown = [v.name for v in free_vars(extent) if v not in known]
            if unknown:
                raise BuildError(f"kernel '{self.kernel_name}': grid extent {extent} uses "
                                 f"{', '.join(unknown)}, which is neither a symbolic dim nor a "
                                 f"scalar parameter of '{self.func.name}'")

    def __call__(self, *args) -> None:
        require_gpu(f"calling CUDA kernel '{self.func.name}'")
        key = self._torch_calls.key(args)
        if key is not None and self._torch_calls.run(key, args, self._launch_known):
            return
        bound = self._binder.bind(args)
        check_pointer_alignment(self.func, self._aligned, bound.pointers)
        self._launch(bound.pointers, (*bound.scalars, *bound.dims))
        self._binder.count_writes(args)
        if key is not None:
            self._torch_calls.remember(key, bound.dims)

    def _launch_known(self, *pointers_and_dims) -> None:
        """A launch whose arguments' layout the binder accepted before (TorchCalls): the
        pointers' alignment is checked here, the rest was then."""
        pointers = pointers_and_dims[:len(self.func.buffers)]
        check_pointer_alignment(self.func, self._aligned, pointers)
        self._launch(pointers, pointers_and_dims[len(pointers):])

    def _launch(self, pointers, values) -> None:
        """Launch on the current device and stream with these buffer pointers and the values
        of the scalar parameters and symbolic dims (`_grid_vars`)."""
        grid = self._grids.get(values)
        if grid is None:
            if len(self._grids) >= MAX_KEYS:
                self._grids.clear()
            grid = self._grids[values] = self.launch.grid_dims(dict(zip(self._grid_vars,
                                                                        values)))
        if 0 in grid:
            return                      # an empty problem: nothing to launch
        device = current_device_fast()
        module, function = self._load(device)
        module.make_current()
        scalars = [t(parameter_value(value, v.dtype)) for t, value, v in
                   zip(self._param_types[len(pointers):], values, self._grid_vars)]
        params = [ctypes.c_void_p(p) for p in pointers] + scalars
        addresses = (ctypes.c_void_p * len(params))(*(ctypes.addressof(p) for p in params))
        driver = module._driver
        check("cuLaunchKernel", driver.cuLaunchKernel(
            function, *grid, *self.launch.block, self.launch.dynamic_shared_bytes,
            current_stream(driver, device), ctypes.addressof(addresses), 0))

    @property
    def checks_bounds(self) -> bool:
        """Whether calls check that every access is in bounds (`check_bounds` not "off")."""
        return self._binder.entry_check is not None

    def export(self, directory, name: str | None = None):
        """Write this kernel for a program without Python to `directory`: the cubin as a C
        byte array, a C header, a launcher on the CUDA driver API and a CMakeLists.txt (see
        `sched.cuda.export`). Returns what was written (an `ExportedKernel`)."""
        from sched.cuda.export import export_cuda

        return export_cuda(self, directory, name)

    def _load(self, ordinal: int):
        """The module and function on device `ordinal`, loaded on first use."""
        if ordinal not in self._loaded:
            arch = device_arch(ordinal)
            if not runs_on(self.arch, arch):
                raise BuildError(f"kernel '{self.kernel_name}' was compiled for {self.arch}, "
                                 f"but CUDA device {ordinal} is {arch}: build it with "
                                 f"arch='{arch}' (or leave arch out to use the current device's)")
            module = CudaModule(self.cubin, ordinal)
            function = module.function(self.kernel_name, self.launch.dynamic_shared_bytes)
            self._loaded[ordinal] = (module, function)
        return self._loaded[ordinal]

    def __repr__(self) -> str:
        names = ", ".join(p.name for p in self.func.params)
        return (f"<CudaKernel {self.func.name}({names}): {self.kernel_name} for {self.arch}, "
                f"{self.launch}>")

"""`build_cuda`: a scheduled PrimFunc -> lowered loop IR -> CUDA C -> cubin -> CudaKernel.

    kernel = sched.build(sch.func, target="cuda", arch="sm_90")
    kernel(a, b, c)            # torch CUDA tensors, on torch's current stream
    print(kernel.source)       # the CUDA C
    print(kernel.resources)    # registers, spills, shared memory, occupancy

Compiling happens here, once (and is cached on disk); a call only launches.
"""

from __future__ import annotations

from sched.cuda.codegen import STATIC_SHARED_LIMIT, generate_cuda, shared_bytes
from sched.errors import BuildError
from sched.ir.nodes import PrimFunc
from sched.lower.gpu_threads import launch_config, with_shared_bytes
from sched.lower.kernel_sequence import split_kernels
from sched.lower.pipeline import lower

WHOLE_SCHEDULE = "the schedule that made this kernel:"


def build_cuda(func: PrimFunc, *, arch: str | None = None, compiler: str = "nvrtc",
               debug: bool = False, trace=None, fast_math: bool = False, extern_c: str = ""):
    """The CudaKernel of `func` for `arch` (default: the GPU's, or sm_90 without one). When
    `trace` (the schedule that made `func`) is given, a compile error lists its steps.
    `fast_math` compiles with the compiler's relaxed math (`--use_fast_math`)."""
    from sched.cuda.kernel_sequence import CudaKernelSequence, check_sequence, generate_sequence
    from sched.cuda.runtime import CudaKernel

    flags = ("--use_fast_math",) if fast_math else ()
    plan = split_kernels(func)
    try:
        if plan is not None:
            check_sequence(plan, func)
            kernels, source, aligned = generate_sequence(plan, debug=debug,
                                                          extern_c=extern_c)
            return CudaKernelSequence(func, source, kernels, plan.workspace, arch=arch,
                                      compiler=compiler, flags=flags, aligned_params=aligned)
        lowered, launch, source, name, aligned = generate_kernel(func, debug=debug,
                                                                 extern_c=extern_c)
        return CudaKernel(func, source, name, launch, arch=arch, compiler=compiler, flags=flags,
                          lowered=lowered, aligned_params=aligned)
    except BuildError as error:
        if trace is None or not len(trace):
            raise
        error.args = (f"{error}\n\n{WHOLE_SCHEDULE}\n{trace}",)     # its type kept
        raise


def generate_kernel(func: PrimFunc, *, debug: bool = False, extern_c: str = ""):
    """(lowered, launch, source, kernel name, 16-byte aligned parameters) of `func`: the CUDA
    C that ships, shared by the "cuda" target and its emulation ("cuda-emu"). `extern_c`:
    device code for the functions opaque calls call, placed before the kernel."""
    lowered = lower(func, target="cuda", debug=debug)
    launch = launch_config(lowered)
    shared = shared_bytes(lowered)
    if shared > STATIC_SHARED_LIMIT:
        launch = with_shared_bytes(launch, shared)
    source, name, aligned = generate_cuda(lowered, launch)
    if extern_c:
        kernel = source.index('extern "C" __global__')
        source = (f"{source[:kernel]}// extern code given to sched.build (extern_c=)\n"
                  f"{extern_c}\n\n{source[kernel:]}")
    return lowered, launch, source, name, aligned

"""`build_cuda_emu`: what `sched.build(func, target="cuda-emu")` calls.

The function is lowered and generated exactly as for the "cuda" target
(`sched.cuda.build.generate_kernel`, or `sched.cuda.kernel_sequence.generate_sequence` for a
function of several kernels); the CUDA C is then compiled by g++ against the emulator's header
instead of NVRTC, and runs on the CPU (`EmulatedKernel`, `EmulatedKernelSequence`).
"""

from __future__ import annotations

from sched.errors import BuildError
from sched.ir.nodes import PrimFunc


def build_cuda_emu(func: PrimFunc, *, debug: bool = False, trace=None,
                   sanitize: str | None = None, extern_c: str = ""):
    """The EmulatedKernel of `func`. When `trace` (the schedule that made `func`) is given, a
    compile error lists its steps. `sanitize`: see `EmulatedKernel`."""
    from sched.cuda.build import generate_kernel
    from sched.cuda.emu.kernel import EmulatedKernel
    from sched.cuda.emu.sequence import EmulatedKernelSequence
    from sched.cuda.kernel_sequence import check_sequence, generate_sequence
    from sched.lower.kernel_sequence import split_kernels

    plan = split_kernels(func)
    try:
        if plan is not None:
            check_sequence(plan, func)
            kernels, source, aligned = generate_sequence(plan, debug=debug,
                                                          extern_c=extern_c)
            return EmulatedKernelSequence(func, source, kernels, plan.workspace,
                                          aligned_params=aligned, sanitize=sanitize)
        lowered, launch, source, name, aligned = generate_kernel(func, debug=debug,
                                                                 extern_c=extern_c)
        return EmulatedKernel(func, source, name, launch, lowered=lowered,
                              aligned_params=aligned, sanitize=sanitize)
    except BuildError as error:
        if trace is None or not len(trace):
            raise
        raise BuildError(f"{error}\n\nthe schedule that made this kernel:\n{trace}") \
            from None

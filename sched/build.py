"""`sched.build`: from a (scheduled) PrimFunc to a callable kernel for a target."""

from __future__ import annotations

from sched.ir.nodes import PrimFunc

TARGETS = ("c", "cuda")


def build(func, target: str = "c", *, arch: str | None = None,
          compiler: str = "nvrtc", debug: bool = False):
    """A kernel computing `func` on `target`: call it with the arguments in parameter order.

    Targets: "c" (the CPU, through gcc; takes numpy arrays and CPU torch tensors) and "cuda"
    (NVRTC or nvcc to a cubin for `arch`, e.g. "sm_90": the GPU's by default; takes torch CUDA
    tensors). TVM's spelling "cuda -arch=sm_90" is accepted. `debug` verifies the IR after
    every lowering pass. The kernel has `.source` (generated code), `.func` and `.lowered`;
    a CUDA kernel also `.cubin` and `.resources`. `func` may be a Schedule: its function is
    built, and a compile error then lists the schedule's steps.
    """
    from sched.schedule import Schedule

    trace = None
    if isinstance(func, Schedule):
        func, trace = func.func, func.trace
    if not isinstance(func, PrimFunc):
        raise TypeError(f"build: expected a PrimFunc, got {type(func).__name__}")
    target, arch = _parse_target(target, arch)
    if target == "c":
        from sched.c.kernel import build_c

        return build_c(func, debug=debug)
    if target == "cuda":
        from sched.cuda.build import build_cuda

        return build_cuda(func, arch=arch, compiler=compiler, debug=debug, trace=trace)
    raise ValueError(f"build: unknown target {target!r}: expected one of "
                     f"{', '.join(repr(t) for t in TARGETS)}")


def _parse_target(target: str, arch: str | None) -> tuple[str, str | None]:
    """("cuda", "sm_90") from "cuda -arch=sm_90" (TVM's target string) or ("cuda", arch)."""
    if not isinstance(target, str):
        raise TypeError(f"build: target must be a string, got {type(target).__name__}")
    name, *options = target.split()
    for option in options:
        key, _, value = option.lstrip("-").partition("=")
        if key != "arch" or not value:
            raise ValueError(f"build: unknown target option {option!r} in {target!r}: "
                             f"expected '-arch=sm_XX'")
        if arch is not None and arch != value:
            raise ValueError(f"build: arch given twice ({arch!r} and {value!r})")
        arch = value
    return name, arch

"""`sched.build`: from a (scheduled) PrimFunc to a callable kernel for a target."""

from __future__ import annotations

from sched.ir.nodes import PrimFunc

TARGETS = ("c", "cuda")


def build(func: PrimFunc, target: str = "c", *, debug: bool = False):
    """A kernel computing `func` on `target`: call it with the arguments in parameter order.

    Targets: "c" (the CPU, through gcc; takes numpy arrays and CPU torch tensors) and "cuda".
    `debug` verifies the IR after every lowering pass. The kernel has `.source` (generated
    code), `.func` and `.lowered`.
    """
    if not isinstance(func, PrimFunc):
        raise TypeError(f"build: expected a PrimFunc, got {type(func).__name__}")
    if target == "c":
        from sched.c.kernel import build_c

        return build_c(func, debug=debug)
    if target == "cuda":
        raise NotImplementedError("build: the CUDA target is not built yet; use target='c'")
    raise ValueError(f"build: unknown target {target!r}: expected one of "
                     f"{', '.join(repr(t) for t in TARGETS)}")

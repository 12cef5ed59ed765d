"""sched: a schedule-language compiler for tensor kernels.

    import sched
    from sched import compute as te
    func = te.create_prim_func([...])
    sch = sched.Schedule(func)            # split, reorder, compute_at, ... each step checked
    kernel = sched.build(sch.func, target="c")
    result = sched.tune(func, target="c", trials=64, db="tune.db")   # the autoscheduler

`import sched` never touches CUDA (nor torch): those load when first used.
"""

from sched import ir
from sched import tensor_intrin as _builtin_intrinsics  # noqa: E402,F401  (registers them)
from sched.build import build
from sched.errors import (
    BuildError,
    ConservativeAnalysisWarning,
    CudaError,
    DSLError,
    EmulationError,
    KernelArgumentError,
    NoGPUError,
    ScheduleError,
    ScriptError,
    ScriptWarning,
    UnmodelledError,
)
from sched.interpreter import interpret
from sched.interpreter.runtime import InterpretError
from sched.polyhedral.in_bounds import OutOfBoundsError
from sched.schedule import Schedule, Trace
from sched.schedule.tensor_intrin import TensorIntrin


def tune(func, target: str = "c", **options):
    """Search schedules for the blocks `func` leaves unscheduled (see
    `sched.autoscheduler.tune.tune` for the options: trials, db, resume, workers, ...)."""
    from sched.autoscheduler.tune import tune as run_tune

    return run_tune(func, target, **options)


def __getattr__(name: str):
    """`sched.torch`: kernels as torch operators (sched.torch_ops), imported when first used
    so that `import sched` loads no torch."""
    if name == "torch":
        import importlib

        return importlib.import_module("sched.torch_ops")
    raise AttributeError(f"module 'sched' has no attribute {name!r}")


def parse(text: str):
    """The PrimFunc (or, for an `@I.ir_module` class, the IRModule) that TVMScript-style
    `text` describes (see sched.ir.parser)."""
    from sched.ir.parser import parse as parse_text

    return parse_text(text)


__all__ = ["BuildError", "ConservativeAnalysisWarning", "CudaError", "DSLError",
           "EmulationError", "InterpretError", "KernelArgumentError", "NoGPUError",
           "OutOfBoundsError", "Schedule", "ScheduleError", "ScriptError", "ScriptWarning",
           "TensorIntrin", "Trace", "UnmodelledError", "build", "interpret", "ir", "parse",
           "tune"]

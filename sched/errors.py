"""The errors a user of sched can cause, each one class, shared by every layer.

Every message says what was wrong, where, and how to fix it.
"""

from __future__ import annotations


class ScriptError(SyntaxError):
    """A TVMScript text or `@T.prim_func` function that sched cannot read.

    The message names the line and the construct: `line 7: unknown construct 'T.blok'`.
    """

    def __init__(self, message: str, line: int | None = None, filename: str | None = None):
        where = f"line {line}: " if line is not None else ""
        super().__init__(where + message)
        self.lineno = line
        self.filename = filename

    def __str__(self) -> str:
        return self.msg   # SyntaxError would repeat the line number


class ScriptWarning(UserWarning):
    """A TVMScript text sched reads with a change it states (a repeated block name made
    unique)."""


class DSLError(ValueError):
    """A compute definition that does not describe a computation (a reduce axis used outside a
    reducer, a lambda of the wrong arity...)."""


class KernelArgumentError(ValueError):
    """A kernel called with arguments that do not match its parameters (count, shape, dtype,
    device, layout). The message names the argument and what was expected."""


class BuildError(RuntimeError):
    """A toolchain failure: the compiler's message, the offending source lines and the command."""


class NoGPUError(RuntimeError):
    """A kernel called (or a device queried) on a machine with no CUDA GPU or driver. Building
    and compiling for a named arch (`sm_90`) still work there; only running needs the GPU."""


class EmulationError(RuntimeError):
    """A kernel run by the CUDA emulator (target "cuda-emu") that went wrong: a barrier or warp
    collective not every thread reaches (the message says where each thread of the block is,
    with the kernel's source lines), a data race ThreadSanitizer saw (its report, both
    accesses), a crash or a watchdog timeout."""


class CudaError(RuntimeError):
    """A CUDA driver call that failed: the message names the call and its CUresult."""


class ScheduleError(ValueError):
    """A schedule step that is illegal or badly called: `<primitive>: <reason>`, then the
    violated dependence, the IR with the offending loop marked, and the legal alternatives.

    With `render=False` (the autoscheduler's cheap mode) the message is the first line only.
    """

    def __init__(self, primitive: str, reason: str, *, dependence: str | None = None,
                 ir: str | None = None, alternatives: tuple[str, ...] = (),
                 render: bool = True) -> None:
        self.primitive = primitive
        self.reason = reason
        self.dependence = dependence
        self.alternatives = alternatives
        lines = [f"{primitive}: {reason}"]
        if render:
            if dependence:
                lines.append(f"violated dependence: {dependence}")
            if ir:
                lines += ["", ir.rstrip()]
            if alternatives:
                lines += ["", "legal alternatives:"] + [f"    {a}" for a in alternatives]
        super().__init__("\n".join(lines))


class UnmodelledError(ValueError):
    """The polyhedral model cannot represent the function (a while loop): an analysis that
    needs the order of its statements refuses. A Schedule step turns it into a ScheduleError
    naming the step."""


class ConservativeAnalysisWarning(UserWarning):
    """A schedule step was accepted on an analysis that over-approximates the function (an
    index, binding, bound or predicate isl cannot represent exactly): the step is legal for
    every value in the over-approximation, so it is sound, but sched may refuse steps that are
    in fact legal. The note says what was over-approximated; `sch.notes` lists them all."""

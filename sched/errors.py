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


class DSLError(ValueError):
    """A compute definition that does not describe a computation (a reduce axis used outside a
    reducer, a lambda of the wrong arity...)."""


class KernelArgumentError(ValueError):
    """A kernel called with arguments that do not match its parameters (count, shape, dtype,
    device, layout). The message names the argument and what was expected."""


class BuildError(RuntimeError):
    """A toolchain failure: the compiler's message, the offending source lines and the command."""

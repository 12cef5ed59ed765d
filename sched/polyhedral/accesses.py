"""The buffer accesses of one statement (a block body or init), as isl relation texts.

Loops inside the block are existentially quantified with their bounds, so an access under them
is the exact set of elements touched. Conditions inside the block are ignored (the access is
assumed to happen: conservative). Blocks nested inside are statements of their own and are not
visited. An index isl cannot represent covers the whole dimension, and the model's notes say so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sched.ir.functor import IRVisitor, substitute
from sched.ir.nodes import (
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    LetStmt,
    Stmt,
)
from sched.polyhedral.isl_expr import isl_name, to_isl


def buffer_tuple(buffer: Buffer) -> str:
    """The isl tuple name of a buffer's storage."""
    return "B_" + buffer.storage_name


@dataclass(frozen=True)
class Access:
    buffer: Buffer
    indices: tuple[str | None, ...]      # isl text of each index, None where not affine
    bound_loops: tuple[str, ...]          # loops inside the block, existentially quantified
    loop_bounds: tuple[str, ...]
    is_write: bool

    def to_isl(self) -> str:
        """`B_A[a0, a1] : exists (r : a0 = ... and ...)`."""
        names = [f"a{d}" for d in range(len(self.indices))]
        constraints = list(self.loop_bounds)
        for name, index, dim in zip(names, self.indices, self.buffer.shape):
            if index is not None:
                constraints.append(f"{name} = {index}")
            else:
                extent = to_isl(dim)
                constraints.append(f"0 <= {name}" + (f" < {extent}" if extent else ""))
        body = " and ".join(constraints) or "true"
        if self.bound_loops:
            body = f"exists ({', '.join(self.bound_loops)} : {body})"
        return f"{buffer_tuple(self.buffer)}[{', '.join(names)}] : {body}"


class _AccessCollector(IRVisitor):
    def __init__(self, note: Callable[[str], None]) -> None:
        self.note = note
        self.loops: list[str] = []
        self.bounds: list[str] = []
        self.env: dict = {}
        self.accesses: list[Access] = []

    def _record(self, buffer: Buffer, indices: tuple[Expr, ...], is_write: bool) -> None:
        texts = []
        for index in indices:
            text = to_isl(substitute(index, self.env))
            if text is None:
                self.note(f"an index of '{buffer.name}' ({index.script()}) is not affine; the "
                          f"whole dimension is assumed to be accessed")
            texts.append(text)
        self.accesses.append(Access(buffer, tuple(texts), tuple(self.loops), tuple(self.bounds),
                                    is_write))

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self._record(node.buffer, node.indices, False)
        self.visit_children(node)

    def visit_BufferStore(self, node: BufferStore) -> None:
        self._record(node.buffer, node.indices, True)
        self.visit(node.value)
        for index in node.indices:
            self.visit(index)

    def visit_For(self, node: For) -> None:
        name = isl_name(node.loop_var)
        lo = to_isl(substitute(node.min, self.env))
        extent = to_isl(substitute(node.extent, self.env))
        bounds = []
        if lo is not None:
            bounds.append(f"{name} >= {lo}")
            if extent is not None:
                bounds.append(f"{name} < {lo} + {extent}")
        self.loops.append(name)
        self.bounds.extend(bounds)
        self.visit(node.body)
        self.loops.pop()
        del self.bounds[len(self.bounds) - len(bounds):]

    def visit_LetStmt(self, node: LetStmt) -> None:
        self.visit(node.value)
        self.env[node.var] = substitute(node.value, self.env)
        self.visit(node.body)
        del self.env[node.var]

    def visit_BlockRealize(self, node: BlockRealize) -> None:
        pass  # a nested block is a statement of its own

    def visit_Buffer(self, node: Buffer) -> None:
        pass


def collect_accesses(body: Stmt, note: Callable[[str], None]) -> list[Access]:
    """Every load and store in `body`, outside nested blocks, in visiting order."""
    collector = _AccessCollector(note)
    collector.visit(body)
    return collector.accesses

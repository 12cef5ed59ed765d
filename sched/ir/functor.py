"""Walking and rewriting the IR: a visitor, a mutator and the small queries built on them.

Both dispatch on the class name: a subclass overrides `visit_For`, `visit_BufferLoad`, ... for the
nodes it cares about and inherits a generic walk over every dataclass field for the rest. The
mutator rebuilds a node only when one of its children changed, so an untouched subtree is
returned as the same object.
"""

from __future__ import annotations

import dataclasses

from sched.ir.nodes import (
    BinaryOp,
    Block,
    BlockRealize,
    Buffer,
    Expr,
    For,
    LetStmt,
    Node,
    Var,
    binary,
)


class IRVisitor:
    """Calls `visit_<ClassName>(node)` when defined, else visits every child node."""

    def visit(self, node) -> None:
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            method(node)
        else:
            self.visit_children(node)

    def visit_children(self, node) -> None:
        for field in dataclasses.fields(node):
            self._visit_value(getattr(node, field.name))

    def _visit_value(self, value) -> None:
        if isinstance(value, Node):
            self.visit(value)
        elif isinstance(value, tuple):
            for item in value:
                self._visit_value(item)


class IRMutator:
    """Calls `visit_<ClassName>(node)` when defined, else rebuilds the node from its mutated
    children (returning the node itself when no child changed)."""

    def visit(self, node):
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is not None:
            return method(node)
        return self.visit_children(node)

    def visit_children(self, node):
        changes = {}
        for field in dataclasses.fields(node):
            old = getattr(node, field.name)
            new = self._visit_value(old)
            if new is not old:
                changes[field.name] = new
        if changes and isinstance(node, BinaryOp):
            # through binary(): operands of different int widths are promoted, as when built
            return binary(node.op, changes.get("a", node.a), changes.get("b", node.b))
        return dataclasses.replace(node, **changes) if changes else node

    def _visit_value(self, value):
        if isinstance(value, Node):
            return self.visit(value)
        if isinstance(value, tuple):
            items = tuple(self._visit_value(item) for item in value)
            if any(new is not old for new, old in zip(items, value)):
                return items
        return value


class _FreeVarCollector(IRVisitor):
    def __init__(self) -> None:
        self.bound: list[set[Var]] = [set()]
        self.found: dict[Var, None] = {}

    def _bind(self, variables, visit) -> None:
        self.bound.append(set(variables))
        visit()
        self.bound.pop()

    def _is_bound(self, var: Var) -> bool:
        return any(var in scope for scope in self.bound)

    def visit_Var(self, var: Var) -> None:
        if not self._is_bound(var):
            self.found[var] = None

    def visit_Buffer(self, buffer: Buffer) -> None:
        for dim in buffer.shape:
            self.visit(dim)

    def visit_For(self, loop: For) -> None:
        self.visit(loop.min)
        self.visit(loop.extent)
        self._bind([loop.loop_var], lambda: self.visit(loop.body))

    def visit_LetStmt(self, let: LetStmt) -> None:
        self.visit(let.value)
        self._bind([let.var], lambda: self.visit(let.body))

    def visit_Block(self, block: Block) -> None:
        for iter_var in block.iter_vars:
            self.visit(iter_var.dom)
        rest = [block.reads, block.writes, block.body, block.init, block.alloc_buffers]
        self._bind([iv.var for iv in block.iter_vars],
                   lambda: [self._visit_value(value) for value in rest])


def free_vars(node) -> tuple[Var, ...]:
    """The variables `node` uses without binding them, in order of first use."""
    collector = _FreeVarCollector()
    collector.visit(node)
    return tuple(collector.found)


class _Substituter(IRMutator):
    def __init__(self, mapping) -> None:
        self.mapping = mapping

    def visit_Var(self, var: Var):
        return self.mapping.get(var, var)


def substitute(node, mapping: dict[Var, Expr]):
    """`node` with every occurrence of a variable in `mapping` replaced by its value.

    Names are unique in their scope (see nodes.py), so no capture can happen.
    """
    if not mapping:
        return node
    return _Substituter(mapping).visit(node)


def collect(node, node_type) -> list:
    """Every node of `node_type` in `node`, in visiting order."""
    found = []

    class Collector(IRVisitor):
        def visit(self, child):
            if isinstance(child, node_type):
                found.append(child)
            super().visit(child)

    Collector().visit(node)
    return found


def used_blocks(node) -> list[BlockRealize]:
    """Every block realize in `node`, outermost first."""
    return collect(node, BlockRealize)

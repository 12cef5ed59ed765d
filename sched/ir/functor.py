"""Walking and rewriting the IR: a visitor, a mutator and the small queries built on them.

Both dispatch on the class name: a subclass overrides `visit_For`, `visit_BufferLoad`, ... for the
nodes it cares about and inherits a generic walk over every dataclass field for the rest. The
mutator rebuilds a node only when one of its children changed, so an untouched subtree is
returned as the same object.
"""

from __future__ import annotations

import dataclasses

from sched.ir.memo import BoundedCache
from sched.ir.nodes import (
    BinaryOp,
    Block,
    BlockRealize,
    Buffer,
    Expr,
    FloatImm,
    For,
    IntImm,
    LetStmt,
    Node,
    Stmt,
    StringImm,
    Var,
    binary,
)

_FIELDS: dict[type, tuple[str, ...]] = {}


def field_names(cls: type) -> tuple[str, ...]:
    """The names of the fields of node class `cls`, in declaration order (cached: the walks
    below ask for every node they visit)."""
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(field.name for field in dataclasses.fields(cls))
    return names


# field types that never hold a node or a tuple (names, dtypes, kinds, constants' values)
_SCALAR_TYPES = frozenset({"str", "int", "float", "bool", "str | None", "int | None"})
# field types that may hold a statement or a block (every other field holds expressions,
# buffers, ranges or iteration variables, none of which contains a statement)
_STATEMENT_TYPES = frozenset({"Stmt", "Stmt | None", "tuple[Stmt, ...]", "Block",
                              "Annotations"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_STATEMENT_FIELDS: dict[type, tuple[str, ...]] = {}


def child_field_names(cls: type, statements_only: bool = False) -> tuple[str, ...]:
    """The fields of node class `cls` that may hold nodes (declaration order), or with
    `statements_only` those that may hold statements or blocks: what a walk must enter.
    Judged by the fields' declared types; a type not known here counts as holding nodes.
    A class with none (a constant, a variable) is a leaf: a walk need not call into it."""
    table = _STATEMENT_FIELDS if statements_only else _CHILD_FIELDS
    names = table.get(cls)
    if names is None:
        fields = [f for f in dataclasses.fields(cls) if str(f.type) not in _SCALAR_TYPES]
        if statements_only:
            fields = [f for f in fields if str(f.type) in _STATEMENT_TYPES
                      or not _is_expression_type(str(f.type))]
        names = table[cls] = tuple(f.name for f in fields)
    return names


def _is_expression_type(text: str) -> bool:
    """Whether a field declared `text` holds only expressions, buffers, variables, ranges,
    regions or iteration variables (never a statement)."""
    parts = text.removeprefix("tuple[").removesuffix(", ...]").split(" | ")
    return all(p in ("Expr", "Buffer", "Var", "Range", "BufferRegion", "IterVar", "None")
               for p in parts)


class _Dispatching:
    """The `visit_<ClassName>` method of each node class, found once per visitor class."""

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls._methods = {}

    def _method(self, node_class: type):
        """The function `visit_<ClassName>` of this visitor's class, or None."""
        methods = type(self)._methods
        found = methods.get(node_class, _UNKNOWN)
        if found is _UNKNOWN:
            found = getattr(type(self), "visit_" + node_class.__name__, None)
            found = methods[node_class] = found if callable(found) else None
        return found


_UNKNOWN = object()
LEAF_CLASSES = frozenset({IntImm, FloatImm, StringImm, Var})    # node classes holding no node


class IRVisitor(_Dispatching):
    """Calls `visit_<ClassName>(node)` when defined, else visits every child node."""

    def visit(self, node) -> None:
        method = self._method(type(node))
        if method is not None:
            method(self, node)
        else:
            self.visit_children(node)

    def visit_children(self, node) -> None:
        cls = type(node)
        names = _CHILD_FIELDS.get(cls)
        for name in child_field_names(cls) if names is None else names:
            value = getattr(node, name)
            if isinstance(value, Node):
                self.visit(value)
            elif isinstance(value, tuple):
                self._visit_value(value)

    def _visit_value(self, value) -> None:
        if isinstance(value, Node):
            self.visit(value)
        elif isinstance(value, tuple):
            for item in value:
                self._visit_value(item)


class IRMutator(_Dispatching):
    """Calls `visit_<ClassName>(node)` when defined, else rebuilds the node from its mutated
    children (returning the node itself when no child changed)."""

    def visit(self, node):
        method = self._method(type(node))
        if method is not None:
            return method(self, node)
        return self.visit_children(node)

    def visit_children(self, node):
        changes = None
        cls = type(node)
        names = _CHILD_FIELDS.get(cls)
        for name in child_field_names(cls) if names is None else names:
            old = getattr(node, name)
            if isinstance(old, Node):
                new = self.visit(old)
            elif isinstance(old, tuple):
                new = self._visit_value(old)
            else:
                continue
            if new is not old:
                if changes is None:
                    changes = {}
                changes[name] = new
        if changes is None:
            return node
        if isinstance(node, BinaryOp):
            # through binary(): operands of different int widths are promoted, as when built
            return binary(node.op, changes.get("a", node.a), changes.get("b", node.b))
        return dataclasses.replace(node, **changes)

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


_COLLECTED = BoundedCache(4096)      # (id(node), node_type) -> (node, what collect found)


def collect(node, node_type) -> list:
    """Every node of `node_type` in `node`, in visiting order (pre-order, fields in declaration
    order).

    Nodes are immutable, so the answer is remembered for the most recent nodes asked about
    (keyed by identity; the entry keeps the node alive so its id is not reused). Statements
    and blocks are looked for without entering expressions, which never contain them.
    """
    return list(_remembered(node, node_type, _statement_level(node_type)))


def _remembered(node, node_type, skip_expressions: bool) -> tuple:
    key = (id(node), node_type)
    entry = _COLLECTED.recall(key)
    if entry is not None and entry[0] is node:
        return entry[1]
    found: list = []
    _collect_into(node, node_type, skip_expressions, found)
    return _COLLECTED.remember(key, (node, tuple(found)))[1]


def _statement_level(node_type) -> bool:
    """Whether every class in `node_type` (a class, a tuple or a union of classes) is a
    statement or a block: then no expression can contain one."""
    classes = getattr(node_type, "__args__", None) or (
        node_type if isinstance(node_type, tuple) else (node_type,))
    return all(isinstance(c, type) and issubclass(c, Stmt | Block) for c in classes)


def _collect_into(node, node_type, skip_expressions: bool, found: list) -> None:
    if isinstance(node, node_type):
        found.append(node)
    cls = type(node)
    names = (_STATEMENT_FIELDS if skip_expressions else _CHILD_FIELDS).get(cls)
    for name in child_field_names(cls, skip_expressions) if names is None else names:
        value = getattr(node, name)
        if isinstance(value, Node):
            _collect_child(value, node_type, skip_expressions, found)
        elif isinstance(value, tuple):
            _collect_in_tuple(value, node_type, skip_expressions, found)


def _collect_child(child, node_type, skip_expressions: bool, found: list) -> None:
    if skip_expressions and isinstance(child, Expr | Buffer):
        return
    if isinstance(child, BlockRealize | For | Block):
        # each block's and loop's answer is remembered: a step rebuilds the function around
        # the blocks and loops it did not touch (and a realize around the block whose
        # bindings it rewrote), and the next walk takes their answers instead of walking them
        # again
        found += _remembered(child, node_type, skip_expressions)
    elif type(child) in LEAF_CLASSES:        # (a constant or a variable: nothing inside)
        if isinstance(child, node_type):
            found.append(child)
    else:
        _collect_into(child, node_type, skip_expressions, found)


def _collect_in_tuple(items: tuple, node_type, skip_expressions: bool, found: list) -> None:
    for item in items:
        if isinstance(item, Node):
            _collect_child(item, node_type, skip_expressions, found)
        elif isinstance(item, tuple):
            _collect_in_tuple(item, node_type, skip_expressions, found)


def used_blocks(node) -> list[BlockRealize]:
    """Every block realize in `node`, outermost first."""
    return collect(node, BlockRealize)

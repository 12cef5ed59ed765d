"""The header items of a TVMScript block, for the statement parser (`parse_stmt.StmtParser`
mixes this in): `T.axis.*` and `T.axis.remap`, `T.where`, `T.reads`/`T.writes`,
`T.block_attr`, `T.alloc_buffer`, `T.match_buffer` of a region, `with T.init()`. Each
`_block_<kind>` method reads one item into the `_BlockParts` of the block being parsed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from sched.ir.functor import free_vars
from sched.ir.intervals import loop_invariant_domain
from sched.ir.nodes import Annotations, Buffer, BufferRegion, Expr, IterVar, Range, Stmt, Var
from sched.ir.parse_expr import ExprParser, call_name

_AXIS_KINDS = {"axis.spatial": "spatial", "axis.S": "spatial",
               "axis.reduce": "reduce", "axis.R": "reduce",
               "axis.scan": "scan", "axis.opaque": "opaque"}
_REMAP_KINDS = {"S": "spatial", "R": "reduce"}


def one_arg(parser: ExprParser, call: ast.Call, name: str) -> ast.AST:
    if len(call.args) != 1 or call.keywords:
        raise parser.error(call, f"T.{name} takes one argument")
    return call.args[0]


@dataclass
class _BlockParts:
    """What a block's header declares."""

    name: str
    iter_vars: list[IterVar] = field(default_factory=list)
    iter_values: list[Expr] = field(default_factory=list)
    predicate: Expr | None = None
    reads: tuple[BufferRegion, ...] | None = None
    writes: tuple[BufferRegion, ...] | None = None
    annotations: Annotations | None = None
    alloc_buffers: list[Buffer] = field(default_factory=list)
    init: Stmt | None = None

    def set(self, parser: ExprParser, node: ast.AST, what: str, value) -> None:
        if getattr(self, what) is not None:
            raise parser.error(node, f"block '{self.name}': {what} given twice")
        setattr(self, what, value)


class BlockHeaderParser:
    """Mixed into StmtParser, whose methods (`error`, `expr`, `bounds`, `lookup`, `bind`,
    `region`, `buffer`, `region_view`, `annotations`, `scope`, `stmts`, `_from_zero`) and
    state (`loops`) it uses."""

    def _block_axis(self, node: ast.Assign, parts: _BlockParts) -> None:
        """`vi = T.axis.spatial(128, i)`, `vk = T.axis.reduce((0, 64), k)`."""
        call = node.value
        if len(call.args) != 2 or call.keywords:
            raise self.error(node, f"T.{call_name(call)} takes (domain, value)")
        dom_node, value_node = call.args
        if isinstance(dom_node, ast.Tuple) and len(dom_node.elts) == 2:
            dom = Range(*self.bounds(*dom_node.elts))
        else:
            dom = Range(*self._from_zero(dom_node))
        value = self.expr(value_node, dom.extent.dtype)
        own = [iv.var.name for iv in parts.iter_vars if iv.var in free_vars(value)]
        if own:
            # (the binding's loops give every axis its value: audit helper-170's
            # `vj = T.axis.spatial(6, I[vi])` failed verifying at build)
            raise self.error(node, f"the binding of '{node.targets[0].id}' uses '{own[0]}', "
                                   f"an axis of the same block: bind it to the loops "
                                   f"(write the loop variables in place of '{own[0]}')")
        var = Var(node.targets[0].id, dom.extent.dtype)
        dom = self._loop_invariant(dom)
        self._add_iter_var(parts, IterVar(var, dom, _AXIS_KINDS[call_name(call)]), value)

    def _block_remap(self, node: ast.Assign, parts: _BlockParts) -> None:
        """`vi, vj, vk = T.axis.remap("SSR", [i, j, k])`: domains from the loops of i, j, k."""
        call = node.value
        target = node.targets[0]
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        if len(call.args) != 2 or call.keywords or not isinstance(call.args[0], ast.Constant) \
                or not isinstance(call.args[1], ast.List | ast.Tuple):
            raise self.error(node, "T.axis.remap takes a kind string and a list of loop "
                                   "variables: T.axis.remap(\"SSR\", [i, j, k])")
        kinds, values = str(call.args[0].value), call.args[1].elts
        if len(kinds) != len(values) or len(names) != len(values):
            raise self.error(node, f"T.axis.remap: kinds {kinds!r} has {len(kinds)} letters for "
                                   f"{len(values)} loop variables and {len(names)} names")
        new = []
        for letter, name, value_node in zip(kinds, names, values, strict=True):
            if letter not in _REMAP_KINDS or not isinstance(name, ast.Name):
                raise self.error(node, f"T.axis.remap: kind {letter!r} is not S or R, or "
                                       f"'{ast.unparse(name)}' is not a name")
            value = self.lookup(value_node)
            loop = next((loop for loop in reversed(self.loops) if loop[0] == value), None)
            if loop is None:
                raise self.error(node, f"T.axis.remap: '{ast.unparse(value_node)}' is not the "
                                       f"variable of an enclosing loop")
            var = Var(name.id, value.dtype)
            dom = self._loop_invariant(Range(loop[1], loop[2]))
            new.append((IterVar(var, dom, _REMAP_KINDS[letter]), value))
        for iter_var, value in new:
            self._add_iter_var(parts, iter_var, value)

    def _loop_invariant(self, dom: Range) -> Range:
        """`dom` as a block's domain, the same for every iteration around it: the widest
        range of a triangular loop (`for k in range(T.min(i, j) + 1)` declares 0..6, as a
        TVM user writes T.axis.reduce(7, k); see intervals.loop_invariant_domain). The
        variables around: enclosing blocks' axes, then loops, outermost first."""
        enclosing = {var: Range(lo, extent) for axes in self.block_axes
                     for var, lo, extent in axes}
        enclosing.update({var: Range(lo, extent) for var, lo, extent in self.loops})
        return loop_invariant_domain(dom, enclosing)

    def _add_iter_var(self, parts: _BlockParts, iter_var: IterVar, value: Expr) -> None:
        parts.iter_vars.append(iter_var)
        parts.iter_values.append(value)
        self.bind(iter_var.var.name, iter_var.var)

    def _block_where(self, node: ast.Expr, parts: _BlockParts) -> None:
        predicate = self.expr(one_arg(self, node.value, "where"))
        own = {iter_var.var for iter_var in parts.iter_vars}
        used = [var.name for var in free_vars(predicate) if var in own]
        if used:    # (the block's realize holds it: it was a VerifyError at build)
            raise self.error(node, f"T.where({predicate.script()}) uses the block's own axis "
                                   f"'{used[0]}': a block's predicate is a condition on the "
                                   f"loops around it (TVM's too); write it with the loop "
                                   f"variables its axes are bound to")
        parts.set(self, node, "predicate", predicate)

    def _regions(self, node: ast.Expr) -> tuple[BufferRegion, ...]:
        """`T.reads(A[vi, 0:128], B[vi])`, also with lists of regions."""
        if node.value.keywords:
            raise self.error(node, f"T.{call_name(node.value)} takes buffer regions")
        items = []
        for arg in node.value.args:
            items += arg.elts if isinstance(arg, ast.List | ast.Tuple) else [arg]
        return tuple(self.region(item) for item in items)

    def _block_reads(self, node: ast.Expr, parts: _BlockParts) -> None:
        parts.set(self, node, "reads", self._regions(node))

    def _block_writes(self, node: ast.Expr, parts: _BlockParts) -> None:
        parts.set(self, node, "writes", self._regions(node))

    def _block_block_attr(self, node: ast.Expr, parts: _BlockParts) -> None:
        value = self.annotations(one_arg(self, node.value, "block_attr"))
        parts.set(self, node, "annotations", value)

    def _block_alloc_buffer(self, node: ast.Assign, parts) -> None:
        """`X = T.alloc_buffer(...)` in a block, or at the function's start (the root's)."""
        buffer = self.buffer(node.targets[0].id, node.value, "T.alloc_buffer")
        parts.alloc_buffers.append(buffer)
        self.bind(buffer.name, buffer)

    def _block_match_buffer(self, node: ast.Assign, parts: _BlockParts) -> None:
        """`X = T.match_buffer(A[vi * 16:vi * 16 + 16, 0:16], (16, 16))`: a window onto the
        region, read as accesses of `A` (see parse_buffer)."""
        call = node.value
        if not call.args or not isinstance(call.args[0], ast.Subscript | ast.Name):
            raise self.error(node, "T.match_buffer in a block takes a buffer region, as in "
                                   "T.match_buffer(A[vi * 16:vi * 16 + 16, 0:16], (16, 16))")
        name = node.targets[0].id
        self.bind(name, self.region_view(name, call))

    def _block_init(self, node: ast.With, parts: _BlockParts) -> None:
        if node.items[0].optional_vars is not None or node.items[0].context_expr.args:
            raise self.error(node, "expected 'with T.init():'")
        # blocks in the init (TVM's blockize puts the init's blocks there) may use this
        # block's iteration variables, as blocks in its body do
        self.block_axes.append([(iv.var, iv.dom.min, iv.dom.extent) for iv in parts.iter_vars])
        try:
            with self.scope():
                parts.set(self, node, "init", self.stmts(node.body))
        finally:
            self.block_axes.pop()

    def _block_skip(self, node: ast.stmt, parts: _BlockParts) -> None:
        pass

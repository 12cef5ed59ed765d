"""What a block takes from around it, for the statement parser (`parse_stmt.StmtParser` mixes
this in): the variables of enclosing loops and blocks it uses (bound to `T.axis.opaque`
variables), a name unique in the function, and the allocations of `T.allocate_const`.

TVM accepts a block that uses enclosing loop variables without binding them and calls it
opaque; sched makes the binding explicit, which keeps block isolation (a block's body uses only
its own variables) true for every parsed function, so every analysis sees the accesses exactly.
"""

from __future__ import annotations

import ast
import warnings

from sched.errors import ScriptWarning
from sched.ir.functor import collect, free_vars, substitute
from sched.ir.nodes import (
    EXTERN_CALLS,
    IMPURE_CALLS,
    BufferLoad,
    Call,
    Expr,
    IterVar,
    Range,
    Stmt,
    Var,
)


class BlockContext:
    """Mixed into StmtParser, whose state (`loops`, `block_axes`, `scopes`, `block_names`,
    `block_lines`, `alloc_targets`) and methods (`error`, `bind`, `allocate_const`) it uses."""

    def _allocate_const(self, node: ast.Assign) -> Stmt:
        """`X = T.allocate_const(values, dtype, shape)`: X joins the allocations of the
        enclosing block (the root at the function's level); the values are stored here."""
        name = node.targets[0].id
        block_name = self._unique_block_name(node, f"{name}_const", warn=False)
        buffer, fill = self.allocate_const(name, node.value, block_name)
        self.alloc_targets[-1].append(buffer)
        self.bind(name, buffer)
        return fill

    def _bind_enclosing_vars(self, node: ast.With, parts, body: Stmt) -> Stmt:
        """A block that uses variables of enclosing loops or blocks without binding them (TVM
        calls it opaque) gets one `T.axis.opaque` iteration variable per such variable, bound
        to it: `v_k = T.axis.opaque(64, k)`, with the body, init and regions using `v_k`.
        The block computes the same thing, it is isolated again (so the analyses see its
        accesses exactly), and schedules keep the order of those loops
        (schedule/ordered_axes.py)."""
        body = self._let_values_in(node, parts, body)
        outer = {}            # enclosing blocks' axes, then loops, outermost first
        for axes in self.block_axes:
            outer.update({var: (lo, extent) for var, lo, extent in axes})
        outer.update({var: (lo, extent) for var, lo, extent in self.loops})
        parts_used = [body, parts.init, *(parts.reads or ()), *(parts.writes or ())]
        used = dict.fromkeys(v for part in parts_used if part is not None
                             for v in free_vars(part))
        enclosing = [var for var in outer if var in used]
        if not enclosing:
            return body
        taken = {v.name for part in parts_used if part is not None for v in collect(part, Var)} | {
            name for scope in self.scopes for name in scope} | {
            iv.var.name for iv in parts.iter_vars}
        mapping: dict[Var, Expr] = {}
        for var in enclosing:
            same = next((iv.var for iv, value in zip(parts.iter_vars, parts.iter_values)
                         if value == var), None)
            if same is not None:
                # an axis bound to the loop already stands for it (a let `x = i * 2` above
                # the block made a second, opaque axis of i, which kept every step from the
                # block: audit helper-173)
                mapping[var] = same
                continue
            lo, extent = outer[var]
            if any(v in outer for v in free_vars(lo) + free_vars(extent)):
                raise self.error(node, f"block '{parts.name}' uses '{var.name}', a variable of "
                                       f"an enclosing loop whose bounds depend on other loops: "
                                       f"bind it to a block iteration variable "
                                       f"(T.axis.spatial) instead")
            name = f"v_{var.name}"
            while name in taken:
                name = "v_" + name
            taken.add(name)
            new = Var(name, var.dtype)
            mapping[var] = new
            parts.iter_vars.append(IterVar(new, Range(lo, extent), "opaque"))
            parts.iter_values.append(var)
        return _substituted(parts, body, mapping)

    def _let_values_in(self, node: ast.With, parts, body: Stmt) -> Stmt:
        """`body` (and the init and regions in `parts`) with each let variable bound outside
        the block replaced by its value, where that value reads nothing (index arithmetic of
        sizes, scalars and loops): TVM lets a block use such a let (`m: T.int32 = n - 1`
        above it; audit helper-170: refused as a variable of an enclosing loop). The loops
        its value uses then become the block's opaque axes, as any enclosing loop's."""
        pieces = [body, parts.init, *(parts.reads or ()), *(parts.writes or ())]
        used = {v for piece in pieces if piece is not None for v in free_vars(piece)}
        mapping = {}
        for var in used & set(self.let_values):
            value = self._let_value(var)
            if value is None:
                raise self.error(node, f"block '{parts.name}' uses '{var.name}', a let above "
                                       f"it of a value read from memory or returned by a "
                                       f"call: a block reads memory only through its own "
                                       f"accesses; compute '{var.name}' inside the block")
            mapping[var] = value
        if not mapping:
            return body
        return _substituted(parts, body, mapping)

    def _let_value(self, var: Var) -> Expr | None:
        """The value of let `var` in the variables around the lets (lets in it replaced too),
        or None where it reads memory or makes a call that is not a value (an extern or
        impure one)."""
        value = self.let_values[var]
        if collect(value, BufferLoad) or any(c.op in IMPURE_CALLS or c.op in EXTERN_CALLS
                                             for c in collect(value, Call)):
            return None         # (pure integer and math calls are values: helper-173)
        inner = {v: self._let_value(v) for v in free_vars(value) if v in self.let_values}
        if any(found is None for found in inner.values()):
            return None
        return substitute(value, inner) if inner else value

    def _unique_block_name(self, node: ast.stmt, name: str, warn: bool = True) -> str:
        """`name`, or, when a block before it has that name, `name_1` (`name_2`...) with a
        warning naming both lines: schedules find blocks by name, so names are unique."""
        line = node.lineno + self.line_offset
        first = self.block_lines.get(name)
        # a name the parser makes (warn=False) must not be any T.block's name in the function
        if first is None and (warn or name not in self.block_names):
            self.block_lines[name] = line
            self.block_names.add(name)
            return name
        count = 1
        while f"{name}_{count}" in self.block_names:
            count += 1
        unique = f"{name}_{count}"
        self.block_names.add(unique)
        self.block_lines[unique] = line
        if warn:
            warnings.warn(f"line {line}: block name {name!r} is already used by the block at "
                          f"line {first}; this block is named {unique!r}", ScriptWarning,
                          stacklevel=2)
        return unique

    def _fresh_block_name(self) -> str:
        while f"b{self.unnamed_blocks}" in self.block_names:
            self.unnamed_blocks += 1
        self.block_names.add(f"b{self.unnamed_blocks}")
        return f"b{self.unnamed_blocks}"


def _substituted(parts, body: Stmt, mapping: dict) -> Stmt:
    """`body` with `mapping` applied, and the block's regions and init in `parts` too."""
    if parts.reads is not None:
        parts.reads = tuple(substitute(r, mapping) for r in parts.reads)
    if parts.writes is not None:
        parts.writes = tuple(substitute(r, mapping) for r in parts.writes)
    if parts.init is not None:
        parts.init = substitute(parts.init, mapping)
    return substitute(body, mapping)

"""TVM's vector expressions in lowered TIR, `T.ramp(base, stride, lanes)` and
`T.broadcast(value, lanes)` (also spelled `T.Ramp`, `T.Broadcast`), read as a vectorized loop
over the lanes:

    A[T.ramp(i * 4, 1, 4)] = B[T.ramp(i * 4, 1, 4)] + T.broadcast(x, 4)
    # is read as
    for lane in T.vectorized(4):
        A[i * 4 + lane] = B[i * 4 + lane] + x

Lane `l` of `T.ramp(b, s, n)` is `b + l * s`; every lane of `T.broadcast(v, n)` is `v`. They
are read in the indices and the value of a buffer store, with one lane count per statement.

A vector store reads every lane before it writes any; the loop reads lane `l` after writing
the lanes before it. The two agree when no lane reads what another lane writes, which sched
accepts only where it is plain from the text: the stored buffer is not read in the value, or
only at the store's own element (`A[r] = A[r] * 2`); and the lanes store distinct elements
(an index is a `T.ramp` with a constant stride other than 0). Anything else is refused naming
the line: write the statement as a loop (over a copy of what it reads).
"""

from __future__ import annotations

import ast
import re

from sched.ir.functor import collect
from sched.ir.nodes import BufferLoad, BufferStore, Expr, For, IntImm, Stmt, Var, const, convert
from sched.ir.parse_names import call_name

RAMP = ("ramp", "Ramp")
BROADCAST = ("broadcast", "Broadcast")
VECTOR_CALLS = RAMP + BROADCAST


def vector_calls(node: ast.AST) -> list[ast.Call]:
    return [c for c in ast.walk(node) if call_name(c) in VECTOR_CALLS]


class VectorParser:
    """`T.ramp`/`T.broadcast`; `self` is an `ExprParser` (see the module doc)."""

    vector_lane: Var | None = None          # the lane variable, inside a vector statement

    def vector_store(self, node: ast.Assign) -> Stmt:
        """`A[T.ramp(b, 1, 4)] = ...` as a vectorized loop over the lanes."""
        lanes = self._lane_count(node)
        target = node.targets[0]
        elements = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
        if not any(_is_distinct_ramp(e) for e in elements):
            raise self.error(node, f"vector store '{ast.unparse(target)}': sched reads a "
                                   f"vector store whose indices include a T.ramp with a "
                                   f"constant stride other than 0 (each lane its own "
                                   f"element); write it as a loop")
        self.vector_lane = lane = Var(self._lane_name(), "int32")
        try:
            buffer, indices = self.access(target)
            value = self.expr(node.value, buffer.dtype)
        finally:
            self.vector_lane = None
        for load in collect(value, BufferLoad):
            if load.buffer.storage_name == buffer.storage_name and load.indices != indices:
                raise self.error(node, f"vector store to '{buffer.name}' also reads "
                                       f"'{load.script()}': a vector statement reads every "
                                       f"lane before it writes, a loop does not, and sched "
                                       f"cannot tell them equal here; write it as a loop "
                                       f"over a copy of what it reads")
        zero = const(0, "int32")
        return For(lane, zero, IntImm(lanes, "int32"), "vectorized",
                   BufferStore(buffer, value, indices))

    def _lane_count(self, node: ast.AST) -> int:
        counts = set()
        for call in vector_calls(node):
            arity = 3 if call_name(call) in RAMP else 2
            last = call.args[-1] if len(call.args) == arity and not call.keywords else None
            if not (isinstance(last, ast.Constant) and type(last.value) is int
                    and last.value > 0):
                raise self.error(call, f"T.{call_name(call)} takes "
                                       f"({'base, stride' if arity == 3 else 'value'}, lanes) "
                                       f"with a constant lane count")
            counts.add(last.value)
        if len(counts) != 1:
            raise self.error(node, f"a vector statement has one lane count, got "
                                   f"{sorted(counts)}")
        return counts.pop()

    def _lane_name(self) -> str:
        used = getattr(self, "_source_names", None)
        if used is None:
            used = self._source_names = set(re.findall(r"\w+", "\n".join(self.source_lines)))
        name, count = "lane", 0
        while name in used or any(name in scope for scope in self.scopes):
            count += 1
            name = f"lane_{count}"
        return name

    def _vector_call(self, node: ast.Call, name: str):
        """Lane `vector_lane` of `T.ramp(...)` / `T.broadcast(...)`."""
        if self.vector_lane is None:
            raise self.error(node, f"T.{name} is read only in the indices and value of a "
                                   f"buffer store (A[T.ramp(b, 1, 4)] = ...)")
        for arg in node.args[:-1]:
            if vector_calls(arg):
                raise self.error(node, f"T.{name} of a vector: its operands must be scalars")
        if name in BROADCAST:
            return self.value(node.args[0])
        base, stride = self.value(node.args[0]), self.value(node.args[1])
        dtype = next((v.dtype for v in (base, stride) if isinstance(v, Expr)), "int32")
        lane: Expr = self.vector_lane if dtype == "int32" else self.vector_lane.astype(dtype)
        if not (isinstance(stride, int) and stride == 1):           # `b + lane`, not `* 1`
            lane = lane * convert(stride, dtype)
        return lane if isinstance(base, int) and base == 0 else convert(base, dtype) + lane


def _is_distinct_ramp(node: ast.AST) -> bool:
    """`T.ramp(b, s, n)` with a constant int `s` other than 0."""
    if call_name(node) not in RAMP or len(node.args) != 3:
        return False
    stride = node.args[1]
    if isinstance(stride, ast.UnaryOp) and isinstance(stride.op, ast.USub):
        stride = stride.operand
    return isinstance(stride, ast.Constant) and type(stride.value) is int and stride.value != 0

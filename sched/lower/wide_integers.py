"""Index arithmetic that may leave int32: computed in int64.

Loop bounds, guards and indices are int32 expressions, as in TVM, and schedule steps make new
ones over symbolic dims: a split by a factor that does not divide n runs
`for i_0 < (n + 63) // 64` under the guard `i_0 * 64 + i_1 < n`, a fuse runs `for f < n * m`.
Near 2**31 the int32 arithmetic wraps: `n + 63` turns negative and the loop runs no
iteration, `n * m` wraps to 0 (both found by an audit: a count to n = 2**31 - 1 left its
output unwritten), and a wrapped guard would let iterations past n run.

This pass bounds each integer expression built only from loop variables, symbolic dims
(0 <= n <= 2**31 - 1), integer scalar parameters and constants, by interval arithmetic, and
where the value or an intermediate result may leave the int32 range computes it in int64:
- a loop whose bounds may exceed the int32 range gets an int64 variable;
- a comparison compares the int64 values;
- anywhere else the int64 result is narrowed back to int32, where the program's value fits
  (an index within an int32-sized buffer, a bound the loops above keep in range).
Arithmetic on values read from memory is left as it is: int32 data wraps, as numpy's does.
Expressions that cannot leave int32 are not touched, so a kernel with constant shapes keeps
its code.
"""

from __future__ import annotations

import dataclasses

from sched.ir.dtype import is_int, max_value, min_value
from sched.ir.functor import IRMutator, free_vars, substitute
from sched.ir.nodes import (
    BinaryOp,
    Cast,
    Expr,
    For,
    IntImm,
    LetStmt,
    PrimFunc,
    Select,
    Stmt,
    Var,
)
from sched.lower.flatten_buffers import widen

NARROW, WIDE = "int32", "int64"
INT32 = (min_value(NARROW), max_value(NARROW))
COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")
_ARITHMETIC = ("add", "sub", "mul", "floordiv", "floormod", "min", "max")


def widen_overflowing_integers(func: PrimFunc) -> PrimFunc:
    """`func` with its int32 index arithmetic that may overflow computed in int64 (module
    docstring)."""
    ranges = {v: (0, INT32[1]) for v in func.symbolic_vars}
    for param in func.params:
        if isinstance(param, Var) and is_int(param.dtype):
            ranges[param] = (min_value(param.dtype), max_value(param.dtype))
    body = _Widen(ranges).visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)


def interval(e: Expr, ranges: dict) -> tuple[tuple[int, int], bool] | None:
    """The mathematical range of integer expression `e` (loop variables and parameters in
    `ranges`) and whether it or an intermediate result may leave int32; None when `e` reads
    memory, calls a function or holds a variable not in `ranges`."""
    if isinstance(e, IntImm) and is_int(e.dtype):
        return (e.value, e.value), not INT32[0] <= e.value <= INT32[1]
    if isinstance(e, Var):
        found = ranges.get(e)
        return None if found is None else (found, False)
    if isinstance(e, Cast) and is_int(e.dtype) and is_int(e.value.dtype):
        inner = interval(e.value, ranges)
        if inner is None:
            return None
        (lo, hi), overflows = inner
        low, high = min_value(e.dtype), max_value(e.dtype)
        return ((lo, hi) if low <= lo and hi <= high else (low, high)), overflows
    if isinstance(e, Select):
        a, b = interval(e.true_value, ranges), interval(e.false_value, ranges)
        if a is None or b is None:
            return None
        return (min(a[0][0], b[0][0]), max(a[0][1], b[0][1])), a[1] or b[1]
    if isinstance(e, BinaryOp) and e.op in _ARITHMETIC and is_int(e.dtype):
        a, b = interval(e.a, ranges), interval(e.b, ranges)
        if a is None or b is None:
            return None
        value = _combine(e.op, a[0], b[0])
        if value is None:
            value = (min_value(e.dtype), max_value(e.dtype))
        outside = not (INT32[0] <= value[0] and value[1] <= INT32[1])
        return value, a[1] or b[1] or outside
    return None


def _combine(op: str, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int] | None:
    (alo, ahi), (blo, bhi) = a, b
    if op == "add":
        return alo + blo, ahi + bhi
    if op == "sub":
        return alo - bhi, ahi - blo
    if op == "mul":
        products = (alo * blo, alo * bhi, ahi * blo, ahi * bhi)
        return min(products), max(products)
    if op == "min":
        return min(alo, blo), min(ahi, bhi)
    if op == "max":
        return max(alo, blo), max(ahi, bhi)
    if blo <= 0:
        return None                      # a divisor that may be zero or negative
    if op == "floordiv":
        quotients = (alo // blo, alo // bhi, ahi // blo, ahi // bhi)
        return min(quotients), max(quotients)
    return 0, bhi - 1                    # floormod by a positive divisor


class _Widen(IRMutator):
    def __init__(self, ranges: dict) -> None:
        self.ranges = ranges
        self.wide: dict[Var, Var] = {}    # loop variables made int64 -> their int64 variable

    # -- statements ---------------------------------------------------------------------------

    def visit_For(self, node: For) -> Stmt:
        start, extent = self.visit(node.min), self.visit(node.extent)
        low = interval(node.min, self.ranges)
        end = interval(node.min + node.extent, self.ranges) if is_int(node.extent.dtype) \
            else None
        var = node.loop_var
        if low is not None and end is not None:
            self.ranges[var] = (low[0][0], max(low[0][1], end[0][1] - 1))
        else:
            self.ranges[var] = (min_value(var.dtype), max_value(var.dtype))
        wide = node.kind != "thread_binding" and var.dtype == NARROW and end is not None \
            and end[0][1] - 1 > INT32[1]
        new_var = var
        if wide:                         # its values may exceed int32: an int64 variable
            new_var = self.wide[var] = Var(var.name, WIDE)
            self.ranges[new_var] = self.ranges[var]
            start, extent = self._wide(node.min), self._wide(node.extent)
        body = self.visit(node.body)
        if not wide and start is node.min and extent is node.extent and body is node.body:
            return node
        return For(new_var, start, extent, node.kind, body, node.thread_tag, node.annotations)

    def visit_LetStmt(self, node: LetStmt) -> Stmt:
        value = self.visit(node.value)
        found = interval(node.value, self.ranges) if is_int(node.var.dtype) else None
        if found is not None:
            low, high = found[0]
            self.ranges[node.var] = (max(low, min_value(node.var.dtype)),
                                     min(high, max_value(node.var.dtype)))
        body = self.visit(node.body)
        if value is node.value and body is node.body:
            return node
        return LetStmt(node.var, value, body)

    def visit_Buffer(self, node):
        return node             # declarations: every access names the buffer as declared

    # -- expressions --------------------------------------------------------------------------

    def visit_Cast(self, node: Cast) -> Expr:
        value = self.visit(node.value)
        if node.dtype == WIDE and isinstance(value, Cast) and value.dtype == NARROW and \
                value.value in self.wide.values():
            return value.value       # an int64 index over a loop variable now int64 itself
        return node if value is node.value else Cast(node.dtype, value)

    def visit_Var(self, node: Var) -> Expr:
        wide = self.wide.get(node)
        return node if wide is None else Cast(NARROW, wide)

    def visit_BinaryOp(self, node: BinaryOp) -> Expr:
        if node.op in COMPARISONS and is_int(node.a.dtype):
            if self._rewritten(node.a) or self._rewritten(node.b):
                return BinaryOp(node.op, self._operand(node.a), self._operand(node.b))
            return self.visit_children(node)
        if node.dtype == NARROW and node.op in _ARITHMETIC and self._rewritten(node):
            return Cast(NARROW, self._wide(node))
        return self.visit_children(node)

    def _rewritten(self, e: Expr) -> bool:
        """Whether `e` is computed in int64 here: int32 index arithmetic that may overflow,
        or that uses a loop variable made int64."""
        if e.dtype != NARROW:
            return False
        found = interval(e, self.ranges)
        if found is None:
            return False
        return found[1] or any(v in self.wide for v in _variables(e))

    def _operand(self, e: Expr) -> Expr:
        """A comparison's operand in int64: index arithmetic throughout, anything else (a
        value read from memory) as it is, converted."""
        if interval(e, self.ranges) is not None:
            return self._wide(e)
        e = self.visit(e)
        return e if e.dtype == WIDE else Cast(WIDE, e)

    def _wide(self, e: Expr) -> Expr:
        """`e` (index arithmetic) in int64 throughout, on the int64 loop variables."""
        if e.dtype == WIDE:
            return self.visit(e)
        return widen(substitute(e, {v: Cast(NARROW, w) for v, w in self.wide.items()}), WIDE)


def _variables(e: Expr) -> set[Var]:
    return set(free_vars(e))

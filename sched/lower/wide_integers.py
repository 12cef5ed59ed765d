"""Index arithmetic that may leave int32: computed in int64.

Loop bounds, guards and indices are int32 expressions, as in TVM, and schedule steps make new
ones over symbolic dims: a split by a factor that does not divide n runs
`for i_0 < (n + 63) // 64` under the guard `i_0 * 64 + i_1 < n`, a fuse runs `for f < n * m`.
Near 2**31 the int32 arithmetic wraps: `n + 63` turns negative and the loop runs no
iteration, `n * m` wraps to 0 (both found by an audit: a count to n = 2**31 - 1 left its
output unwritten), and a wrapped guard would let iterations past n run.

This pass bounds each integer expression built only from loop variables, symbolic dims (from
0 to the largest value of their dtype), integer scalar parameters and constants, by interval
arithmetic, and where the value or an intermediate result may leave the int32 range computes
it in int64:
- a loop whose values may leave the int32 range gets an int64 variable;
- a guard or a loop bound compares the int64 values;
- an index or a let-bound index is computed in int64 and narrowed back to int32, where the
  program's value fits (an index within an int32-sized buffer).
What a store writes (and what an opaque call is passed) is data: its arithmetic keeps the
int32 semantics it has, wrapping as numpy's does, comparisons included; only the indices of
the loads in it are index arithmetic. Casts the program makes are kept (a narrowing
`T.Cast("int32", q)` still narrows). Expressions that cannot leave int32 are not touched, so
a kernel with constant shapes keeps its code.
"""

from __future__ import annotations

import dataclasses

from sched.ir.dtype import is_int, max_value, min_value
from sched.ir.functor import IRMutator, free_vars
from sched.ir.intervals import (
    _ARITHMETIC,
    _SHIFTS,
    NARROW,
    WIDE,
    _fits,
    integer_operation,
    interval,
    loop_values,
    low_bits_mask,
    parameter_ranges,
)
from sched.ir.nodes import (
    BinaryOp,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    Evaluate,
    Expr,
    For,
    IntImm,
    LetStmt,
    PrimFunc,
    Select,
    Stmt,
    Var,
)

COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")


def widen_overflowing_integers(func: PrimFunc) -> PrimFunc:
    """`func` with its int32 index arithmetic that may overflow computed in int64 (module
    docstring)."""
    body = _Widen(parameter_ranges(func)).visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)


class _Widen(IRMutator):
    def __init__(self, ranges: dict) -> None:
        self.ranges = ranges
        self.wide: dict[Var, Var] = {}    # loop (and let) variables made int64 -> their int64 one
        self.wide_lets: set[Var] = set()  # the int64 variables of lets among them
        self.data = False                 # in what a store writes: its arithmetic is kept

    # -- statements ---------------------------------------------------------------------------

    def visit_For(self, node: For) -> Stmt:
        found = loop_values(node.min, node.extent, self.ranges)
        var = node.loop_var
        known = found is not None
        values = found[0] if known else (min_value(var.dtype), max_value(var.dtype))
        # the variable also reaches the end, where the loop stops
        wide = known and node.kind != "thread_binding" and var.dtype == NARROW and \
            not _fits((values[0], max(values[1], found[1][1])))
        if wide:                         # its values may leave int32: an int64 variable
            new_var = Var(var.name, WIDE)
            start, extent = self._wide(node.min), self._wide(node.extent)
        else:
            new_var, start, extent = var, self._index(node.min), self._index(node.extent)
        saved = self.ranges.get(var), self.wide.get(var)
        self.ranges[var] = self.ranges[new_var] = values
        if wide:
            self.wide[var] = new_var
        else:
            self.wide.pop(var, None)     # (a sibling loop of the same variable may be wide)
        body = self.visit(node.body)
        _restore(self.ranges, var, saved[0])
        _restore(self.wide, var, saved[1])
        if wide:
            del self.ranges[new_var]
        if not wide and start is node.min and extent is node.extent and body is node.body:
            return node
        return For(new_var, start, extent, node.kind, body, node.thread_tag, node.annotations)

    def visit_LetStmt(self, node: LetStmt) -> Stmt:
        var = node.var
        found = interval(node.value, self.ranges) if is_int(var.dtype) else None
        # an int32 let of index arithmetic whose value may leave int32 holds it in int64, as
        # a loop's variable does (the model reads its value exactly: audit helper-113, a
        # let `x = vi * 2**30` indexing `C[x // 2**30]` wrote C[-2])
        wide = found is not None and var.dtype == NARROW and not _fits(found[0])
        saved = self.ranges.get(var), self.wide.get(var)
        if wide:
            new_var, value = Var(var.name, WIDE), self._wide(node.value)
            self.wide[var] = new_var
            self.wide_lets.add(new_var)
            self.ranges[var] = self.ranges[new_var] = found[0]
        else:
            new_var, value = var, self._index(node.value)
            self.wide.pop(var, None)
            if found is not None:
                low, high = found[0]
                self.ranges[var] = (max(low, min_value(var.dtype)),
                                    min(high, max_value(var.dtype)))
        body = self.visit(node.body)
        _restore(self.ranges, var, saved[0])
        _restore(self.wide, var, saved[1])
        if wide:
            del self.ranges[new_var]
        if not wide and value is node.value and body is node.body:
            return node
        return LetStmt(new_var, value, body)

    def visit_BufferStore(self, node: BufferStore) -> Stmt:
        value = self._data(node.value)
        indices = tuple(self._index(i) for i in node.indices)
        if value is node.value and all(a is b for a, b in zip(indices, node.indices)):
            return node
        return BufferStore(node.buffer, value, indices)

    def visit_Evaluate(self, node: Evaluate) -> Stmt:
        value = self._data(node.value)
        return node if value is node.value else Evaluate(value)

    def visit_Buffer(self, node):
        return node             # declarations: every access names the buffer as declared

    # -- expressions --------------------------------------------------------------------------

    def _data(self, e: Expr) -> Expr:
        saved, self.data = self.data, True
        try:
            return self.visit(e)
        finally:
            self.data = saved

    def _index(self, e: Expr) -> Expr:
        saved, self.data = self.data, False
        try:
            return self.visit(e)
        finally:
            self.data = saved

    def visit_BufferLoad(self, node: BufferLoad) -> Expr:
        indices = tuple(self._index(i) for i in node.indices)
        if all(a is b for a, b in zip(indices, node.indices)):
            return node
        return BufferLoad(node.buffer, indices)

    def visit_Cast(self, node: Cast) -> Expr:
        value = self.visit(node.value)
        if node.dtype == WIDE and isinstance(value, Cast) and value.dtype == NARROW and \
                value.value in self.wide.values() and value.value not in self.wide_lets:
            return value.value   # the program's int64 view of a loop variable now int64
        # (an int32 let is the program's int32 value where a cast widens it, as the model
        # reads `T.Cast("int64", x)` of its value: audit helper-117)
        return node if value is node.value else Cast(node.dtype, value)

    def visit_Var(self, node: Var) -> Expr:
        wide = self.wide.get(node)
        return node if wide is None else Cast(NARROW, wide)

    def visit_BinaryOp(self, node: BinaryOp) -> Expr:
        if self.data:     # (block variables over wide loops: convert_blocks computes them)
            return self.visit_children(node)
        if node.op in COMPARISONS and is_int(node.a.dtype):
            if any(self._rewritten(e) or e in self.wide for e in (node.a, node.b)):
                return BinaryOp(node.op, self._operand(node.a), self._operand(node.b))
            return self.visit_children(node)
        if node.dtype == NARROW and self._rewritten(node):
            return Cast(NARROW, self._wide(node))
        return self.visit_children(node)

    def visit_Call(self, node: Call) -> Expr:
        if not self.data and node.dtype == NARROW and self._rewritten(node):
            return Cast(NARROW, self._wide(node))
        return self.visit_children(node)

    def _rewritten(self, e: Expr) -> bool:
        """Whether `e` is computed in int64 here: int32 index arithmetic that may overflow,
        or that uses a loop variable made int64 (a select of such values included: compared,
        `if T.Select(c, i * 10**9, 0) > 0`, its values are compared in int64, as any other
        operand's; audit helper-87)."""
        if e.dtype != NARROW or (integer_operation(e) is None and not isinstance(e, Select)):
            return False
        found = interval(e, self.ranges)
        if found is None:
            return False
        return found[1] or any(v in self.wide for v in free_vars(e))

    def _operand(self, e: Expr) -> Expr:
        """A comparison's operand in int64: index arithmetic throughout, anything else (a
        value read from memory) as it is, converted."""
        if interval(e, self.ranges) is not None:
            return self._wide(e)
        e = self.visit(e)
        return e if e.dtype == WIDE else Cast(WIDE, e)

    def _wide(self, e: Expr) -> Expr:
        """Index arithmetic `e` computed in int64 throughout, on the int64 loop variables;
        every other leaf (a cast the program makes, a load) converted once, as it is."""
        if e.dtype == WIDE:
            return self._index(e)
        if isinstance(e, IntImm):
            return IntImm(e.value, WIDE)
        if isinstance(e, Var) and e in self.wide:
            return self.wide[e]
        if isinstance(e, BinaryOp) and e.op in _ARITHMETIC and is_int(e.dtype):
            return BinaryOp(e.op, self._wide(e.a), self._wide(e.b))
        if isinstance(e, Call) and e.op in _SHIFTS and is_int(e.dtype) and \
                isinstance(e.args[1], IntImm):
            return Call(e.op, (self._wide(e.args[0]), IntImm(e.args[1].value, WIDE)), WIDE)
        if low_bits_mask(e) is not None:       # x & (2**k - 1): x's floor remainder
            return Call(e.op, (self._wide(e.args[0]), IntImm(e.args[1].value, WIDE)), WIDE)
        if isinstance(e, Select):
            return Select(self._index(e.condition), self._wide(e.true_value),
                          self._wide(e.false_value))
        return Cast(WIDE, self._index(e))


def _operands(node: Expr) -> tuple[Expr, ...]:
    if isinstance(node, BinaryOp):
        return node.a, node.b
    if isinstance(node, Call):
        return tuple(node.args)
    return ()


def _restore(mapping: dict, key, value) -> None:
    if value is None:
        mapping.pop(key, None)
    else:
        mapping[key] = value

"""The int64 scalar parameters whose values may wrap on the way to an operation other than a
sum, difference or product in what the polyhedral model reads as integer arithmetic.

The model reads int64 arithmetic exactly where its magnitude stays below 2**63 with each
int64 variable up to 2**40 (`isl_expr.INT64_MAGNITUDE`); sizes stay far below that, but a
scalar parameter may take any value. Sums, differences and products wrap alike on the way
(where the exact value is in bounds, so is the kernel's), and an operation on the scalar
itself is exact; another operation on a wrapped sum or product is not: `T.min(m * 3, 0)` at
m = 2**62 + 1 read A[vi + 3] past A (audit helper-143). in_bounds.py checks the scalars found
here at every call against 2**40.

    scalars_that_may_wrap(func)     # {m: "C"}: the scalar and the first block that has one
"""

from __future__ import annotations

from sched.ir.dtype import max_value, min_value
from sched.ir.functor import IRVisitor, collect, free_vars
from sched.ir.intervals import interval, loop_values
from sched.ir.nodes import (
    Allocate,
    Assume,
    BinaryOp,
    BlockRealize,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    Expr,
    For,
    IfThenElse,
    IntImm,
    LetStmt,
    Not,
    PrimFunc,
    Select,
    Var,
    While,
)
from sched.polyhedral.isl_expr import INT64_MAGNITUDE, to_isl_condition


def scalars_that_may_wrap(func: PrimFunc) -> dict[Var, str]:
    """The int64 scalar parameters of `func` whose values may wrap on the way to an operation
    other than a sum, difference or product (see the module doc), each with the first block
    that computes so."""
    scalars = {p for p in func.params if isinstance(p, Var) and p.dtype == "int64"}
    if not scalars:
        return {}
    finder = _ScalarsUnderOperations(scalars)
    finder.visit(func.body)
    return finder.found


_RING_OPS = ("add", "sub", "mul")


class _ScalarsUnderOperations(IRVisitor):
    """The `scalars` whose values may wrap on the way to an operation other than a sum,
    difference or product, in what the model reads as integer arithmetic (indices, loop
    bounds, conditions, bindings, lets, a select's condition in a stored value, allocation
    sizes), each with the first block that has one: under a sum, difference or product such
    an operation
    takes (`T.min(m * 3, 0)`), or through a variable the model substitutes (a let, a block
    binding, a loop bound of them: `x = m * 3` then `T.min(x, 0)`, audit helper-147)."""

    def __init__(self, scalars: set) -> None:
        self.scalars = scalars
        self.derived: dict[Var, frozenset] = {}   # a variable -> the scalars it holds
        self.found: dict[Var, str] = {}
        self.block = "root"

    def sources(self, *exprs) -> frozenset:
        found = set()
        for var in (v for e in exprs for v in free_vars(e)):
            found |= {var} & self.scalars | self.derived.get(var, frozenset())
        return frozenset(found)

    def derive(self, var: Var, *exprs) -> None:
        held = self.sources(*exprs)
        if held:
            self.derived[var] = held

    def read(self, *exprs, compared: bool = False) -> None:
        """`exprs`, each an index (its value is what counts) or, `compared`, a value the
        kernel compares (a loop bound, a binding checked against its domain: audit
        helper-149, `range(m * 4)` ran 4 iterations at m = -2**62 + 1, none in the model)."""
        for expr in exprs:
            self.under(expr, below=compared, ring=False)
            self.visit(expr)                 # the loads and selects inside

    def under(self, e, below: bool, ring: bool) -> None:
        if isinstance(e, Var):
            held = ({e} & self.scalars if ring else set()) | self.derived.get(e, set())
            for scalar in held if below else ():
                self.found.setdefault(scalar, self.block)
        elif isinstance(e, BinaryOp) and e.op in _RING_OPS:
            self.under(e.a, below, True)
            self.under(e.b, below, True)
        elif isinstance(e, Call) and e.op == "shift_left":
            # a product by a power of two, as the model reads it (audit helper-152)
            self.under(e.args[0], below, True)
            self.under(e.args[1], True, False)
        elif not isinstance(e, BufferLoad):  # (a load's indices are read on their own)
            # inside a sum or product, a scalar under another operation still sets its
            # magnitude (audit helper-166: `T.min(m // 2 * 4, 0)` at m = 2**63 - 4)
            for child in _operands(e):
                self.under(child, True, ring)

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self.read(*node.indices)

    def visit_BufferStore(self, node: BufferStore) -> None:
        self.read(*node.indices)
        self.visit(node.value)

    def visit_Select(self, node: Select) -> None:
        # its condition matters where the model reads it, guarding a load (a data-only
        # condition, `now - A[vi] < 6e10` of a timestamp, was refused at 1.7e18: helper-159)
        guards = any(collect(value, BufferLoad) for value in (node.true_value,
                                                               node.false_value))
        if guards and to_isl_condition(node.condition) is not None:
            self.read(node.condition)
        else:
            self.visit(node.condition)
        self.visit(node.true_value)
        self.visit(node.false_value)

    def visit_For(self, node: For) -> None:
        self.read(node.min, node.extent, compared=True)
        self.derive(node.loop_var, node.min, node.extent)
        self.visit(node.body)

    def visit_IfThenElse(self, node: IfThenElse) -> None:
        self.read(node.condition)
        self.visit(node.then_body)
        if node.else_body is not None:
            self.visit(node.else_body)

    def visit_While(self, node: While) -> None:
        self.read(node.condition)
        self.visit(node.body)

    def visit_Assume(self, node: Assume) -> None:
        self.read(node.condition)

    def visit_Allocate(self, node: Allocate) -> None:
        self.read(_size(node.buffer), compared=True)
        self.visit(node.body)

    def visit_LetStmt(self, node: LetStmt) -> None:
        self.read(node.value)
        self.derive(node.var, node.value)
        self.visit(node.body)

    def visit_BlockRealize(self, node: BlockRealize) -> None:
        outer, self.block = self.block, node.block.name
        self.read(node.predicate, *node.iter_values,
                  *(x for iv in node.block.iter_vars for x in (iv.dom.min, iv.dom.extent)),
                  compared=True)
        for iter_var, value in zip(node.block.iter_vars, node.iter_values):
            self.derive(iter_var.var, value)
        # the sizes of its allocations, the product of the dims: `T.alloc_buffer((m * 3,))`
        # and `(m, 3)` allocated (m * 3) mod 2**64 elements, 5 at m = (2**64 + 5) // 3
        # (audit helpers 154, 157)
        self.read(*(_size(b) for b in node.block.alloc_buffers), compared=True)
        for stmt in (node.block.init, node.block.body):
            if stmt is not None:
                self.visit(stmt)
        self.block = outer


def _operands(e) -> tuple:
    """The expressions an expression node computes from."""
    if isinstance(e, BinaryOp):
        return (e.a, e.b)
    if isinstance(e, Not):
        return (e.a,)
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, Select):
        return (e.condition, e.true_value, e.false_value)
    if isinstance(e, Call):
        return e.args
    return ()


def _size(buffer) -> Expr:
    """The number of elements of `buffer`, as the allocation computes it."""
    size: Expr = IntImm(1, "int64")
    for dim in buffer.shape:
        size = BinaryOp("mul", size, dim)
    return size


def variables_past_magnitude(func: PrimFunc) -> list[str]:
    """The int64 loop and block variables whose values, from constant bounds, bindings and
    the lets around them, pass 2**40 in magnitude, which the model takes as their largest
    (`isl_expr.INT64_MAGNITUDE`; audit helper-166: over `range(2**50, 2**50 + 4)` the model
    read `i * 8192` exactly, the kernel wrapped it and read past A; helper-170: the same
    values through a block binding `i + 2**50`, a let bound, an inner loop). int64 sizes and
    scalars are not judged here (the calls check the scalars the model needs; a size that
    large holds no buffer but an empty one), nor are lets, which the model reads as their
    values."""
    finder = _PastMagnitude()
    # int32 (and narrower) scalars take any value of their type (audit helper-171: a loop
    # from n - 4 to an int32 scalar n, bound as T.Cast("int64", i) * 2**20, passed 2**40);
    # sizes and int64 scalars count as 1, so that the constants around them are judged
    # (2**50 + n) and not the sizes themselves (a fused n * m of int64 sizes, i // m, an
    # int64 loop over an int32 size times 4096: helper-173)
    for var in (*func.symbolic_vars, *(p for p in func.params if isinstance(p, Var))):
        if var.dtype == "int64" or var in func.symbolic_vars:
            finder.ranges[var] = (1, 1)
        elif var.dtype.startswith("int") or var.dtype.startswith("uint"):
            finder.ranges[var] = (min_value(var.dtype), max_value(var.dtype))
    finder.visit(func.body)
    return finder.found


class _PastMagnitude(IRVisitor):
    """variables_past_magnitude's walk: each variable's values by interval arithmetic over
    the variables around it (those it cannot bound are left out)."""

    def __init__(self) -> None:
        self.ranges: dict = {}
        self.found: list[str] = []

    def bound(self, var: Var, values, judged: bool = True) -> None:
        """Record `var`'s values; `judged`: one the model reads as a variable (a let's it
        reads as its value)."""
        if values is None:
            return
        self.ranges[var] = values
        if judged and var.dtype == "int64" and max(abs(v) for v in values) > INT64_MAGNITUDE:
            self.found.append(var.name)

    def visit_For(self, node: For) -> None:
        found = loop_values(node.min, node.extent, self.ranges)
        self.bound(node.loop_var, None if found is None else found[0])
        self.visit(node.body)

    def visit_LetStmt(self, node: LetStmt) -> None:
        found = interval(node.value, self.ranges)
        self.bound(node.var, None if found is None else found[0], judged=False)
        self.visit(node.body)

    def visit_BlockRealize(self, node: BlockRealize) -> None:
        for iv, value in zip(node.block.iter_vars, node.iter_values):
            found = interval(value, self.ranges)
            if found is None:     # (a binding the intervals cannot follow: its domain)
                found = loop_values(iv.dom.min, iv.dom.extent, self.ranges)
            self.bound(iv.var, None if found is None else found[0])
        self.visit_children(node)

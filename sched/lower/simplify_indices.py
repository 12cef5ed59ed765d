"""Index simplification with isl: affine index expressions and guards, under the loop bounds.

Runs last, after `flatten_buffers`, whose row-major indices (`(i * 64 + j) * 32 + k`) and the
split/fuse arithmetic of schedules (`(io * 32 + ii) // 32`, `f % 8` with `f` in [0, 8)) are what
it normalizes. isl does all the arithmetic reasoning (project rule: never hand-write what isl
does); this module only translates between the IR and isl:

1. an integer expression becomes an isl piecewise quasi-affine function of its free variables,
   all isl parameters (`+`, `-`, `*` by a constant, `//` and `%` by a positive constant, min,
   max); any other subterm (`i * n`, a load, a cast) becomes an opaque parameter of its own,
   its operands simplified recursively;
2. the enclosing loops give the context (`lo <= i < lo + extent`, symbolic dims `>= 0`);
3. isl gists the function with the context and prints it back with `AstBuild.expr_from_pw_aff`,
   which we convert to IR, keeping it only when it is no larger than the input.

A comparison in a guard (`if` condition, one `and`-ed term at a time) that the context implies
becomes `True`, one it contradicts `False`; an `if True` / `if False` is then removed.
Results are cached per (expression, relevant loop bounds).
"""

from __future__ import annotations

import dataclasses
import functools
import logging

import islpy as isl

from sched.ir.builders import widen
from sched.ir.dtype import INDEX_DTYPE, bits, is_int
from sched.ir.functor import IRMutator, free_vars
from sched.ir.nodes import (
    BinaryOp,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    IfThenElse,
    IntImm,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    const,
    logical_and,
    seq,
)
from sched.ir.simplify import simplify
from sched.lower.isl_affine import (
    AffineTranslation,
    Context,
    NotAffine,
    from_ast,
    piecewise,
    reads_data,
    size_extent,
)

logger = logging.getLogger("sched.lower")

COMPARE_OPS = ("eq", "ne", "lt", "le", "gt", "ge")


def _simplify_operands(e: Expr, context: Context,
                       data_vars: frozenset[Var] = frozenset()) -> Expr:
    """`e` with each integer operand simplified (used for the subterms isl cannot read)."""
    changes = {}
    for field in dataclasses.fields(e):
        value = getattr(e, field.name)
        if isinstance(value, Expr) and is_int(value.dtype):
            new = simplify_index(value, context, data_vars)
            if new is not value:
                changes[field.name] = new
    return dataclasses.replace(e, **changes) if changes else e


def _size(e: Expr) -> int:
    if isinstance(e, BinaryOp):
        return 1 + _size(e.a) + _size(e.b)
    return 1


def _fits(e: Expr, dtype: str) -> bool:
    limit = 2 ** (bits(dtype) - 1)
    if isinstance(e, IntImm):
        return -limit <= e.value < limit
    return not isinstance(e, BinaryOp) or (_fits(e.a, dtype) and _fits(e.b, dtype))


@functools.lru_cache(maxsize=1 << 16)
def simplify_index(e: Expr, context: Context = (),
                   data_vars: frozenset[Var] = frozenset()) -> Expr:
    """The integer expression `e`, simplified by isl given the loop bounds in `context`
    (`data_vars`: the let variables in `e` bound to values read from memory)."""
    e = simplify(e)
    if not is_int(e.dtype) or isinstance(e, (IntImm, Var)):
        return e
    translation = AffineTranslation(
        context, lambda opaque: _simplify_operands(opaque, context, data_vars), data_vars)
    try:
        term = translation.term(e)
        bounds = translation.bounds()
        function = translation.function(term)
        context_set = translation.context_set(bounds)
        function = piecewise(function).gist(context_set)
        ast = isl.AstBuild.from_context(context_set).expr_from_pw_aff(function)
        terms = {name: term for term, name in translation.names.items()}
        if bits(e.dtype) > bits(INDEX_DTYPE):   # leaves seen through widening casts: widen
            terms = {name: widen(term, e.dtype) for name, term in terms.items()}
        result = from_ast(ast, terms, e.dtype)
        if bits(e.dtype) > bits(INDEX_DTYPE):
            result = widen(result, e.dtype)     # no narrow intermediate results
    except (NotAffine, isl.Error, TypeError) as error:
        # (TypeError: isl folded a constant past int64, an overflow C leaves undefined, which
        # IntImm refuses: audit helper-113; kept as written)
        logger.debug("simplify_indices: keeping %r (%s)", e, type(error).__name__)
        return _simplify_operands(e, context, data_vars) if isinstance(e, BinaryOp) else e
    if _size(result) > _size(e) or not _fits(result, e.dtype) or (
            translation.reads_data(e) and not translation.reads_data(result)):
        # (arithmetic on data wraps, the same arithmetic on loop variables alone is exact:
        # isl's `x + A[i] * 0` is x, which would change which; audit helper-122)
        return _simplify_operands(e, context, data_vars) if isinstance(e, BinaryOp) else e
    return result


@functools.lru_cache(maxsize=1 << 14)
def decide_comparison(e: BinaryOp, context: Context,
                      data_vars: frozenset[Var] = frozenset()) -> bool | None:
    """True when `context` implies the integer comparison `e`, False when it contradicts it,
    None when neither (or when `e` is not affine). A comparison of arithmetic on data (a
    load, a call, a let variable `data_vars` holds) is not decided: the arithmetic wraps
    where isl's integers do not (audit helper-109: `if (v * 65536) // 65536 == v`, v = B[0],
    was dropped as always true)."""
    translation = AffineTranslation(context, data_vars=data_vars)
    if any(isinstance(side, BinaryOp) and translation.reads_data(side) for side in (e.a, e.b)):
        return None
    try:
        a, b = translation.strict_term(e.a), translation.strict_term(e.b)
        bounds = translation.bounds()
        compare = {"eq": "eq_set", "ne": "ne_set", "lt": "lt_set", "le": "le_set",
                   "gt": "gt_set", "ge": "ge_set"}[e.op]
        condition = getattr(piecewise(translation.function(a)), compare)(
            piecewise(translation.function(b)))
        context_set = translation.context_set(bounds)
    except (NotAffine, isl.Error):
        return None
    if context_set.is_subset(condition):
        return True
    if context_set.intersect(condition).is_empty():
        return False
    return None


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, BinaryOp) and e.op == "and":
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


class _IndexSimplifier(IRMutator):
    def __init__(self, symbolic_vars: tuple[Var, ...]) -> None:
        # a symbolic dim n is a size: 0 <= n <= the largest of its dtype (audit helper-169:
        # `if n < 2**31` of an int64 n was dropped, the int32 bound was off by one)
        self.loops: list[tuple[Var, Expr, Expr]] = [
            (v, IntImm(0, "int64"), size_extent(v.dtype)) for v in symbolic_vars]
        self.data_vars: frozenset[Var] = frozenset()

    def context(self, e: Expr) -> Context:
        """The bounds of the loops `e` depends on, directly or through other bounds."""
        needed = set(free_vars(e))
        relevant = []
        for var, lo, extent in reversed(self.loops):
            if var in needed:
                relevant.append((var, lo, extent))
                needed |= set(free_vars(lo)) | set(free_vars(extent))
        return tuple(reversed(relevant))

    def data_in(self, e: Expr) -> frozenset[Var]:
        """The let variables in `e` that hold data (read from memory)."""
        return frozenset(v for v in free_vars(e) if v in self.data_vars) if self.data_vars \
            else frozenset()

    def index(self, e: Expr) -> Expr:
        e = self.visit(e)
        return simplify_index(e, self.context(e), self.data_in(e))

    def visit_LetStmt(self, node: LetStmt) -> Stmt:
        """A let variable bound to a value read from memory (or a call) is data: its
        arithmetic wraps (`AffineTranslation._wraps_before`). Any other is in the context as
        a loop of one iteration at its value, which bounds its magnitude (audit helper-166:
        `x = T.Cast("int64", vi) * 2**62` was taken as at most 2**40, and `(x * 4) // 4`
        simplified to x, which the kernel wraps)."""
        value = self.visit(node.value)
        is_data = reads_data(value, self.data_vars)
        if is_data:
            self.data_vars = self.data_vars | {node.var}
        elif is_int(node.var.dtype):
            self.loops.append((node.var, value, IntImm(1, value.dtype)))
        body = self.visit(node.body)
        if is_data:
            self.data_vars = self.data_vars - {node.var}
        elif is_int(node.var.dtype):
            self.loops.pop()
        if value is node.value and body is node.body:
            return node
        return LetStmt(node.var, value, body)

    def visit_For(self, node: For) -> Stmt:
        self.loops.append((node.loop_var, node.min, node.extent))
        body = self.visit(node.body)
        self.loops.pop()
        return node if body is node.body else dataclasses.replace(node, body=body)

    def visit_BufferLoad(self, node: BufferLoad) -> Expr:
        indices = tuple(self.index(i) for i in node.indices)
        return node if indices == node.indices else BufferLoad(node.buffer, indices)

    def visit_BufferStore(self, node: BufferStore) -> Stmt:
        indices = tuple(self.index(i) for i in node.indices)
        value = self.visit(node.value)
        if indices == node.indices and value is node.value:
            return node
        return BufferStore(node.buffer, value, indices)

    def condition(self, e: Expr) -> Expr:
        kept = []
        for term in _conjuncts(simplify(self.visit(e))):
            decided = None
            if isinstance(term, BinaryOp) and term.op in COMPARE_OPS \
                    and is_int(term.a.dtype):
                decided = decide_comparison(term, self.context(term), self.data_in(term))
            if decided is False:
                return const(False, "bool")
            if decided is None:
                kept.append(term)
        return logical_and(*kept)

    def visit_SeqStmt(self, node: SeqStmt) -> Stmt:
        """A sequence without the statements that became nothing (an `if` that never runs)."""
        stmts = [self.visit(stmt) for stmt in node.stmts]
        if all(new is old for new, old in zip(stmts, node.stmts)):
            return node
        return seq(*stmts) if stmts else node

    def visit_IfThenElse(self, node: IfThenElse) -> Stmt:
        condition = self.condition(node.condition)
        then_body = self.visit(node.then_body)
        else_body = None if node.else_body is None else self.visit(node.else_body)
        if isinstance(condition, IntImm):
            if condition.value:
                return then_body
            return else_body if else_body is not None else SeqStmt(())
        return IfThenElse(condition, then_body, else_body)


def simplify_indices(func: PrimFunc) -> PrimFunc:
    """`func` with its buffer indices and guards simplified under the loop bounds.

    Takes loop IR (no blocks), usually flattened. Every buffer index becomes an equal
    expression (for every point of the loop nest) that is no larger, in isl's canonical form
    where isl could read it: `(i * 32 + j) // 32 -> i` for `j` in [0, 32),
    `(i * 64 + j) * 32 + k -> i * 2048 + j * 32 + k`. Each `and`-ed comparison of an `if` that
    the loop bounds imply is dropped; an `if` left with `True` is replaced by its body, one
    with `False` by its else branch (or nothing). Everything else is constant-folded by
    `sched.ir.simplify`. Loop bounds and stored values are left as they are.
    """
    body = _IndexSimplifier(func.symbolic_vars).visit(func.body)
    return func if body == func.body else dataclasses.replace(func, body=body)

"""Integer values that inlining moves between data and index arithmetic.

sched computes the two differently (README, "Indices"): a stored value, and any arithmetic
on data, wraps in its type as numpy's does; index arithmetic (indices, bounds, conditions,
bindings) of loop variables and sizes is exact. compute_inline and reverse_compute_inline
carry expressions across: a stored value into the indices of its readers, and an index into
the value that was stored. Moved bare, an expression changes which arithmetic computes it:

    B[vi] = vi * 2**30              # stored: 0, 2**30, -2**31, -2**30 (wrapped)
    C[vi] = A[B[vi] // 2**30 + 2]   # A[2], A[3], A[0], A[1]
    # inlined bare: A[vi * 2**30 // 2**30 + 2] is A[vi + 2], exactly

So a stored int32 value that may wrap moves with each operation that may leave int32 under
`T.Cast("int32", T.Cast("int64", ...))`, the wrapped value in every context (a widening cast
of int32 arithmetic takes its exact value modulo 2**32: README), and an index that may pass
int32 on the way, taken for a variable a stored value computes with, moves computed in int64
(its exact value, which fits the variable: it indexes the buffer). Both only where interval
arithmetic cannot show that the values stay in the type, so the usual case moves as written.
An index also takes the variable's own dtype (an int64 index for an int32 variable, or the
converse). int64 arithmetic that may leave int64 has no wider type to wrap it: refused.
Audit helpers 122, 124, 126.
"""

from __future__ import annotations

import dataclasses

from sched.ir.builders import widen
from sched.ir.dtype import is_int, max_value, min_value
from sched.ir.functor import IRMutator, collect
from sched.ir.intervals import (
    integer_operation,
    interval,
    loop_ranges,
    loop_values,
    parameter_ranges,
)
from sched.ir.nodes import (
    BinaryOp,
    Block,
    BufferLoad,
    Call,
    Cast,
    Expr,
    For,
    IntImm,
    Not,
    PrimFunc,
    Select,
    StringImm,
    Var,
)

NARROW, WIDE = "int32", "int64"


def block_ranges(func: PrimFunc, block: Block) -> dict[Var, tuple[int, int]]:
    """The values of `block`'s iteration variables (from their domains), of `func`'s loop
    variables (a load in the bindings or a loop bound of the enclosing scope uses those) and
    of its sizes and integer scalars, as `interval` takes them."""
    loops = [(loop.loop_var, loop.min, loop.extent) for loop in collect(func.body, For)]
    ranges = loop_ranges(loops, parameter_ranges(func))     # (outer loops come first)
    for iter_var in block.iter_vars:
        found = loop_values(iter_var.dom.min, iter_var.dom.extent, ranges)
        if found is not None:
            ranges[iter_var.var] = found[0]
    return ranges


def _reads_data(e: Expr) -> bool:
    """Whether `e` reads memory or calls a function: arithmetic that wraps in every context.
    A shift by a constant is index arithmetic (a product or floor division by a power of
    two), as the lowering and the model read it."""
    return bool(collect(e, BufferLoad)) or any(integer_operation(call) is None
                                               for call in collect(e, Call))


def _fits(found, dtype: str) -> bool:
    return found is not None and min_value(dtype) <= found[0][0] and \
        found[0][1] <= max_value(dtype)


def may_wrap(e: Expr, ranges: dict) -> bool:
    """Whether int32 or int64 arithmetic in `e` (reading no data) may leave its type over
    `ranges`: where its stored value (wrapped) and its exact value differ. The 8- and
    16-bit and unsigned types wrap in every context, float arithmetic is the same in every
    context, and a cast is the program's own conversion: the arithmetic under them is asked
    on its own."""
    if isinstance(e, Var):
        return is_int(e.dtype) and interval(e, ranges) is None
    children = _children(e)
    if children is None:                # a constant
        return False
    if any(may_wrap(child, ranges) for child in children):
        return True
    return integer_operation(e) is not None and e.dtype in (NARROW, WIDE) and \
        not _fits(interval(e, ranges), e.dtype)


def wrapped_value(value: Expr, ranges: dict) -> Expr | None:
    """`value`, stored to a buffer of its dtype by a block whose variables take `ranges`, as
    an expression that gives the stored value in any context, or None where there is none.
    Arithmetic on data wraps wherever it is, and types other than int32 and int64 wrap in
    their own type everywhere: only their arithmetic of variables that may leave the type
    needs more (`_wrapped`)."""
    if _reads_data(value) or not may_wrap(value, ranges):
        return value
    return _wrapped(value, ranges)


def _wrapped(e: Expr, ranges: dict) -> Expr | None:
    """`e` as a stored value computes it, each int32 operation wrapping, in a form every
    context computes so: each int32 operation whose result may leave int32 under the
    wrapping cast `T.Cast("int32", T.Cast("int64", ...))`, which takes the exact value
    modulo 2**32, of an operation on int32 values the wrapped one (a division after a
    wrapped product too: `vi * 2**30 // 2**30` stores -2 at vi = 2; audit helper-124).
    None where int64 arithmetic may leave int64: no wider type takes it modulo 2**64."""
    children = _children(e)
    if children is None or not children:        # a constant or a variable
        return e
    new = [_wrapped(child, ranges) for child in children]
    if any(child is None for child in new):
        return None
    rebuilt = _with_children(e, new)
    if integer_operation(e) is None or e.dtype not in (NARROW, WIDE) or \
            _fits(interval(rebuilt, ranges), e.dtype):
        return rebuilt
    return Cast(NARROW, Cast(WIDE, rebuilt)) if e.dtype == NARROW else None


def _children(e: Expr) -> list[Expr] | None:
    """The operands of `e` (none for a variable), or None for a constant."""
    if isinstance(e, Var):
        return []
    if isinstance(e, BinaryOp):
        return [e.a, e.b]
    if isinstance(e, Cast):
        return [e.value]
    if isinstance(e, Select):
        return [e.condition, e.true_value, e.false_value]
    if isinstance(e, Call):
        return [a for a in e.args if isinstance(a, Expr) and not isinstance(a, StringImm)]
    if isinstance(e, Not):
        return [e.a]
    return None


def _with_children(e: Expr, children: list[Expr]) -> Expr:
    if isinstance(e, BinaryOp):
        return BinaryOp(e.op, *children)
    if isinstance(e, Cast):
        return Cast(e.dtype, children[0])
    if isinstance(e, Select):
        return Select(*children)
    if isinstance(e, Not):
        return Not(children[0])
    given = iter(children)
    return dataclasses.replace(e, args=tuple(
        next(given) if isinstance(a, Expr) and not isinstance(a, StringImm) else a
        for a in e.args))


def _as_arithmetic(e: Expr) -> Expr:
    """`e` with each shift by a constant as the product or floor division by its power of
    two (what `widen` computes in int64; a call would be converted whole)."""
    class Shifts(IRMutator):
        def visit_Call(self, call: Call):
            call = self.visit_children(call)
            operation = integer_operation(call)
            if operation is None:
                return call
            op, a, b = operation
            return BinaryOp(op, a, IntImm(b.value, a.dtype))
    return Shifts().visit(e)


def exact_index(index: Expr, var: Var, ranges: dict) -> Expr:
    """`index` (of a variable the loading block's `ranges` give) in place of the stored
    block's variable `var`: of `var`'s dtype, and equal to its exact value where the stored
    value computes with it as data."""
    return exact_value(index, var.dtype, ranges)


def exact_value(index: Expr, dtype: str, ranges: dict) -> Expr:
    """Index arithmetic `index` (over variables `ranges` gives) as a value of `dtype`
    computed exactly wherever it is used, data included: in int64 where it may pass int32 on
    the way, then converted (its value fits: it indexes a buffer, or `fits_its_type` said so)."""
    if not is_int(index.dtype) or not is_int(dtype) or _reads_data(index):
        return index if index.dtype == dtype else Cast(dtype, index)
    if dtype == WIDE and index.dtype == NARROW:     # (a cast would take it wrapped)
        return widen(_as_arithmetic(index), WIDE, keep_casts=True)
    if index.dtype == NARROW and may_wrap(index, ranges):
        return Cast(NARROW, widen(_as_arithmetic(index), WIDE, keep_casts=True))
    return index if index.dtype == dtype else Cast(dtype, index)


def fits_its_type(index: Expr, ranges: dict) -> bool:
    """Whether the exact value of index arithmetic `index` is one of its dtype wherever
    `ranges` (the values of its variables) hold: int32 arithmetic may pass int32 where int64
    would not; the other types compute in their own type everywhere, as does arithmetic on
    data."""
    if index.dtype != NARROW or _reads_data(index):
        return True
    return _fits(interval(widen(_as_arithmetic(index), WIDE), ranges), NARROW)

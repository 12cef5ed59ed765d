"""Integer values that inlining moves between data and index arithmetic.

sched computes the two differently (README, "Indices"): a stored value, and any arithmetic
on data, wraps in its type as numpy's does; index arithmetic (indices, bounds, conditions,
bindings) of loop variables and sizes is exact. compute_inline and reverse_compute_inline
carry expressions across: a stored value into the indices of its readers, and an index into
the value that was stored. Moved bare, an expression changes which arithmetic computes it:

    B[vi] = vi * 2**30              # stored: 0, 2**30, -2**31, -2**30 (wrapped)
    C[vi] = A[B[vi] // 2**30 + 2]   # A[2], A[3], A[0], A[1]
    # inlined bare: A[vi * 2**30 // 2**30 + 2] is A[vi + 2], exactly

So a stored int32 value that may wrap moves as `T.Cast("int32", T.Cast("int64", value))`,
the wrapped value in every context (a widening cast of int32 arithmetic takes the wrapped
value: README), and an index that may pass int32 on the way, taken for a variable a stored
value computes with, moves computed in int64 (its exact value, which fits the variable: it
indexes the buffer). Both only where interval arithmetic cannot show that the values stay in
int32, so the usual case moves as written. An index also takes the variable's own dtype (an
int64 index for an int32 variable, or the converse). Audit helper-122.
"""

from __future__ import annotations

from sched.ir.dtype import is_int
from sched.ir.functor import collect
from sched.ir.intervals import interval, loop_ranges, loop_values, parameter_ranges
from sched.ir.nodes import (
    BinaryOp,
    Block,
    BufferLoad,
    Call,
    Cast,
    Expr,
    For,
    IntImm,
    PrimFunc,
    Select,
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
    return bool(collect(e, BufferLoad) or collect(e, Call))


def may_wrap(e: Expr, ranges: dict) -> bool:
    """Whether int32 arithmetic in `e` (reading no data) may pass int32 over `ranges`: where
    its stored value (wrapped) and its exact value differ. A cast is the program's own
    conversion, the same in every context; the arithmetic under it is asked on its own."""
    if isinstance(e, Var | IntImm):
        return interval(e, ranges) is None
    if isinstance(e, Cast):
        return may_wrap(e.value, ranges)
    if isinstance(e, Select):
        return any(may_wrap(part, ranges) for part in (e.condition, e.true_value,
                                                     e.false_value))
    if not isinstance(e, BinaryOp):
        return True
    if any(may_wrap(part, ranges) for part in (e.a, e.b)):
        return True
    if e.dtype != NARROW:
        return False
    found = interval(e, ranges)
    return found is None or not (-(1 << 31) <= found[0][0] and found[0][1] < 1 << 31)


def wrapped_value(value: Expr, ranges: dict) -> Expr | None:
    """`value`, stored to a buffer of its dtype by a block whose variables take `ranges`, as
    an expression that gives the stored value in any context, or None where there is none.
    Arithmetic on data wraps wherever it is, and types other than int32 compute in their own
    type everywhere: only int32 arithmetic of variables that may pass int32 needs the
    wrapping cast, which takes the exact value modulo 2**32: the stored value where the
    arithmetic is sums and products, not where a division, remainder, min or max follows a
    wrap (`vi * 2**30 // 2**30` stores -2 at vi = 2, the cast would give 2: audit
    helper-124)."""
    if value.dtype != NARROW or _reads_data(value) or not may_wrap(value, ranges):
        return value
    return Cast(NARROW, Cast(WIDE, value)) if _sums_and_products(value) else None


def _sums_and_products(e: Expr) -> bool:
    if isinstance(e, Var | IntImm):
        return True
    return isinstance(e, BinaryOp) and e.op in ("add", "sub", "mul") and \
        _sums_and_products(e.a) and _sums_and_products(e.b)


def exact_index(index: Expr, var: Var, ranges: dict) -> Expr:
    """`index` (of a variable the loading block's `ranges` give) in place of the stored
    block's variable `var`: of `var`'s dtype, and equal to its exact value where the stored
    value computes with it as data."""
    return exact_value(index, var.dtype, ranges)


def exact_value(index: Expr, dtype: str, ranges: dict) -> Expr:
    """Index arithmetic `index` (over variables `ranges` gives) as a value of `dtype`
    computed exactly wherever it is used, data included: in int64 where it may pass int32 on
    the way, then converted (its value fits: it indexes a buffer, or `fits_its_type` said so)."""
    from sched.lower.flatten_buffers import widen

    if not is_int(index.dtype) or not is_int(dtype) or _reads_data(index):
        return index if index.dtype == dtype else Cast(dtype, index)
    if dtype == WIDE and index.dtype == NARROW:
        return widen(index, WIDE, keep_casts=True)      # (a cast would take it wrapped)
    if index.dtype == NARROW and may_wrap(index, ranges):
        return Cast(NARROW, widen(index, WIDE, keep_casts=True))
    return index if index.dtype == dtype else Cast(dtype, index)


def fits_its_type(index: Expr, ranges: dict) -> bool:
    """Whether the exact value of index arithmetic `index` is one of its dtype wherever
    `ranges` (the values of its variables) hold: int32 arithmetic may pass int32 where int64
    would not; the other types compute in their own type everywhere, as does arithmetic on
    data."""
    from sched.lower.flatten_buffers import widen

    if index.dtype != NARROW or _reads_data(index):
        return True
    found = interval(widen(index, WIDE), ranges)
    return found is not None and -(1 << 31) <= found[0][0] and found[0][1] < 1 << 31

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
converse). int64 arithmetic that may leave int64 has no wider type to wrap it: refused where
it would move into an index.

Within an index, the largest parts that read no data are exact and the arithmetic on data
wraps. So a value loaded in an index takes its pure parts wrapped too (`wrapped_value` with
`in_index`), the index's own arithmetic that read data only through the replaced load keeps
wrapping (`rewrapped`), and an index moved into data keeps its pure parts exact, through
widening casts, selects' conditions, bitwise operations and let variables (`exact_value`).
Audit helpers 122, 124, 126, 131.
"""

from __future__ import annotations

import dataclasses

from sched.ir.dtype import is_int, max_value, min_value
from sched.ir.functor import IRMutator, collect, free_vars, substitute
from sched.ir.intervals import (
    integer_operation,
    interval,
)
from sched.ir.nodes import (
    BinaryOp,
    BufferLoad,
    Call,
    Cast,
    Expr,
    IntImm,
    Not,
    Select,
    StringImm,
    Var,
)

NARROW, WIDE = "int32", "int64"


def reads_data(e: Expr) -> bool:
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


def wrapped_value(value: Expr, ranges: dict, in_index: bool = False) -> Expr | None:
    """`value`, stored to a buffer of its dtype by a block whose variables take `ranges`, as
    an expression that gives the stored value where a load of it is (`in_index`: in an index
    or a condition), or None where there is none. Arithmetic on data wraps wherever it is,
    and types other than int32 and int64 wrap in their own type everywhere: out of indices,
    only their arithmetic of variables that may leave the type needs more (`_wrapped`); in
    an index, also the arithmetic beside data in a value that reads some (an index computes
    the parts that read no data exactly: audit helper-131)."""
    if not may_wrap(value, ranges) or not in_index and reads_data(value):
        return value
    wrapped = _wrapped(value, ranges)
    # (out of indices, int64 arithmetic wraps alike stored or inlined: audit helper-131)
    return value if wrapped is None and not in_index else wrapped


def rewrapped(old: Expr, new: Expr, replaced: str, ranges: dict) -> Expr | None:
    """`new`, the index `old` with its loads of buffer `replaced` replaced by values, with
    each int32 operation that read data only through those loads (it wrapped) and reads
    none now (it would be computed exactly) wrapping as before, under `T.Cast("int32",
    T.Cast("int64", ...))` where it may leave int32 (audit helper-131: `X[B[vi] * 2**30 //
    2**30 % 8]` read X[vi] once `B[vi] = vi` was inlined). None where that cannot be kept:
    int64 arithmetic that may leave int64, or a division or comparison beside a part that
    reads no data and may leave int32 (the index computes that part exactly, then
    divides)."""
    if isinstance(old, BufferLoad) and old.buffer.name == replaced:
        return new
    if not any(load.buffer.name == replaced for load in collect(old, BufferLoad)) or \
            isinstance(old, BufferLoad):
        return new
    old_children, new_children = _children(old), _children(new)
    if not old_children or new_children is None or len(old_children) != len(new_children):
        return new
    children = []
    for a, b in zip(old_children, new_children):
        child = rewrapped(a, b, replaced, ranges)
        if child is None:
            return None
        children.append(child)
    rebuilt = _with_children(new, children)
    if reads_data(rebuilt) or integer_operation(rebuilt) is None and \
            not (isinstance(rebuilt, BinaryOp) and is_int(rebuilt.a.dtype)):
        return rebuilt               # still arithmetic on data: wraps as it did
    operands = [c for a, c in zip(old_children, children)
                if not any(x.buffer.name == replaced for x in collect(a, BufferLoad))]
    if integer_operation(rebuilt) is None or rebuilt.op not in ("add", "sub", "mul"):
        if any(is_int(c.dtype) and may_wrap(c, ranges) for c in operands):
            return None
    if integer_operation(rebuilt) is None or _fits(interval(rebuilt, ranges), rebuilt.dtype):
        return rebuilt
    return Cast(NARROW, Cast(WIDE, rebuilt)) if rebuilt.dtype == NARROW else None


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
            reads_data(e) or _fits(interval(rebuilt, ranges), e.dtype):
        return rebuilt               # (arithmetic on data wraps in every context)
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
            if operation is None or call.op == "bitwise_and":
                # (a mask stays one: as a remainder, 2**63 - 1 needed a divisor of 2**63,
                # which no int64 constant holds; audit helper-171)
                return call
            op, a, b = operation
            return BinaryOp(op, a, IntImm(b.value, a.dtype))
    return Shifts().visit(e)


def exact_index(index: Expr, var: Var, ranges: dict, lets: dict | None = None) -> Expr:
    """`index` (of a variable the loading block's `ranges` give) in place of the stored
    block's variable `var`: of `var`'s dtype, and equal to its exact value where the stored
    value computes with it as data (`lets`: the values of the let variables around it)."""
    return exact_value(index, var.dtype, ranges, lets)


def exact_value(index: Expr, dtype: str, ranges: dict, lets: dict | None = None) -> Expr:
    """Index arithmetic `index` (over variables `ranges` gives) as a value of `dtype`
    computed in every context as an index computes it, data included: each largest part that
    reads no data exactly (in int64 where it may pass int32 on the way: under a widening
    cast, a select's condition or a bitwise operation too, audit helper-131), the arithmetic
    on data wrapping as it does; a let variable in it by its value (it holds the exact value
    in an index). Converted to `dtype` (its value fits: it indexes a buffer, or
    `fits_its_type` said so). An `InexactIndex` where a part that reads no data may leave
    int32 under arithmetic on data, where the two contexts could differ in more than the
    wrap."""
    index = _with_lets(index, lets or {}, ranges)
    if is_int(index.dtype) and is_int(dtype) and dtype == WIDE and index.dtype == NARROW \
            and not reads_data(index):
        return _exact_wide(index, ranges)            # (a cast would take it wrapped)
    exact = index if _ring_only(index) else _exact(index, ranges)
    return exact if exact.dtype == dtype else Cast(dtype, exact)


_RING_OPS = ("add", "sub", "mul")


def _ring_only(e: Expr) -> bool:
    """Whether `e` is sums, differences and products of variables and constants of one
    integer type: wrapping each operation gives the exact value modulo 2**bits, so where the
    exact value fits its type (an index of a buffer) both contexts compute it alike, and no
    cast is needed (audit helper-135: `v_p + v_ry` of a padded convolution with symbolic
    sizes was rebuilt in int64 and no longer proven in bounds)."""
    if isinstance(e, IntImm | Var):
        return is_int(e.dtype)
    return isinstance(e, BinaryOp) and e.op in _RING_OPS and e.dtype in (NARROW, WIDE) and \
        e.a.dtype == e.b.dtype == e.dtype and _ring_only(e.a) and _ring_only(e.b)


def used_as_data(value: Expr) -> set:
    """The variables `value` (a stored value) computes with as data: outside the indices of
    its loads, where an index moved in for them must keep its exact value. One used only in
    indices takes the index as it is (an index there too)."""
    if isinstance(value, Var):
        return {value}
    if isinstance(value, BufferLoad):
        return set()
    found: set = set()
    for child in _children(value) or ():
        found |= used_as_data(child)
    return found


def wraps_around(node, var: Var, ranges: dict) -> bool:
    """Whether `node` (an expression or a statement) holds, under integer arithmetic other
    than sums and products (a division, a remainder, a min, a cast, a call, a select), a sum
    or product of `var` that may leave its type with `var` at any value of its dtype: there,
    whether `var` holds index arithmetic (exact) or data (wrapping) changes the value (audit
    helper-139). `vp // 16`, `T.min(vp, 99)`, `T.Cast("int64", vp)` hold none (helper-140)."""
    full = {**ranges, var: (min_value(var.dtype), max_value(var.dtype))}
    around = [e for kind in (BinaryOp, Call, Select, Cast) for e in collect(node, kind)
              if not (isinstance(e, BinaryOp) and e.op in _RING_OPS)]
    return any(var in free_vars(child) and may_wrap(child, full)
               for e in around for child in _children(e) or ())


def index_parts(value: Expr) -> list[Expr]:
    """The indices of the loads in `value` (index arithmetic inside a stored value)."""
    return [index for load in collect(value, BufferLoad) for index in load.indices]


class InexactIndex(ValueError):
    """An index whose value no expression computes alike in an index and in data."""


def _with_lets(index: Expr, lets: dict, ranges: dict) -> Expr:
    """`index` with each let variable whose value reads no data and may wrap replaced by
    that value (computed exactly where the let is an index's), through lets of lets. An
    `InexactIndex` where one holds data (its arithmetic in the index wraps, but moved it
    would read as index arithmetic: audit helper-135)."""
    for _ in range(len(lets) + 1):
        used = set(free_vars(index))
        data = [var for var in lets if var in used and reads_data(lets[var])]
        if any(wraps_around(index, var, ranges) for var in data):
            # (`B[x]`, `B[x // 2]`: one value either way: helpers 139, 140)
            raise InexactIndex(f"the let variable {data[0].name}, which holds data, in "
                               f"{index.script()}")
        mapping = {var: value for var, value in lets.items()
                   if var in used and may_wrap(value, ranges)}
        if not mapping:
            return index
        index = substitute(index, mapping)
    return index


def _exact(e: Expr, ranges: dict) -> Expr:
    """`e`, a part of an index, computing what it computes there in any context."""
    if e.dtype == "bool":
        return _exact_condition(e, ranges)
    if not reads_data(e):
        if not may_wrap(e, ranges) or not is_int(e.dtype):
            return e
        if e.dtype not in (NARROW, WIDE) and _children(e):
            # computed in its own type, on operands an index computes exactly
            return _with_children(e, [_exact(child, ranges) for child in _children(e)])
        wide = _exact_wide(e, ranges)
        return wide if e.dtype == WIDE else Cast(e.dtype, wide)
    if isinstance(e, BufferLoad):
        return e                     # (its indices are indices wherever it goes)
    children = _children(e)
    if not children:
        return e
    new = []
    ring = isinstance(e, BinaryOp) and e.op in _RING_OPS
    for child in children:
        if not ring and not reads_data(child) and is_int(child.dtype) and \
                child.dtype != WIDE and may_wrap(child, ranges) and not _fits(
                    interval(_exact_wide(child, ranges), ranges), child.dtype):
            # (under a sum or product on data, wrapped or exact modulo 2**32 is one value)
            raise InexactIndex(f"{child.script()}, which may leave {child.dtype} in {e.script()}")
        new.append(child if ring and _ring_only(child) else _exact(child, ranges))
    return _with_children(e, new)


def _exact_condition(e: Expr, ranges: dict) -> Expr:
    """A condition of an index, its integer comparisons of arithmetic that may wrap compared
    in int64 (exactly, as an index compares them)."""
    if isinstance(e, Not):
        return Not(_exact_condition(e.a, ranges))
    if isinstance(e, BinaryOp) and e.op in ("and", "or"):
        return BinaryOp(e.op, _exact_condition(e.a, ranges), _exact_condition(e.b, ranges))
    if isinstance(e, BinaryOp) and is_int(e.a.dtype) and \
            (may_wrap(e.a, ranges) or may_wrap(e.b, ranges)):
        if reads_data(e.a) or reads_data(e.b):
            return BinaryOp(e.op, _exact(e.a, ranges), _exact(e.b, ranges))
        return BinaryOp(e.op, _exact_wide(e.a, ranges), _exact_wide(e.b, ranges))
    return e


_EXACT_OPS = ("add", "sub", "mul", "div", "floordiv", "floormod", "min", "max")
_BITWISE = ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not")


def _exact_wide(e: Expr, ranges: dict) -> Expr:
    """Integer arithmetic `e`, reading no data, computed in int64 as an index computes it:
    exactly, through widening casts, selects (their conditions too) and bitwise operations;
    a narrowing cast converts the exact value of its operand, as does an operation of
    another type; any other leaf is converted."""
    e = _as_arithmetic(e)
    if isinstance(e, IntImm):
        return IntImm(e.value, WIDE)
    if isinstance(e, BinaryOp) and e.op in _EXACT_OPS and e.dtype in (NARROW, WIDE):
        return BinaryOp(e.op, _exact_wide(e.a, ranges), _exact_wide(e.b, ranges))
    if isinstance(e, Select) and e.dtype in (NARROW, WIDE):
        return Select(_exact_condition(e.condition, ranges), _exact_wide(e.true_value, ranges),
                      _exact_wide(e.false_value, ranges))
    if isinstance(e, Call) and e.op in _BITWISE and e.dtype in (NARROW, WIDE):
        return Call(e.op, tuple(_exact_wide(a, ranges) for a in e.args), WIDE)
    if isinstance(e, Cast) and e.value.dtype == "bool":
        e = Cast(e.dtype, _exact_condition(e.value, ranges))    # (audit helper-135)
    elif isinstance(e, Cast) and is_int(e.value.dtype):
        # a cast converts the exact value of its operand (wrapped where it does not fit the
        # operand's type, then converted: README), widening or narrowing
        inner = e.value if not may_wrap(e.value, ranges) else \
            Cast(e.value.dtype, _exact_wide(e.value, ranges))
        e = Cast(e.dtype, inner)
    elif _children(e):
        # an operation of another type (8- or 16-bit, unsigned) computes in that type, on
        # operands an index computes exactly (audit helper-143: the int32 `vi * 2**30 //
        # 2**30` under an int8 `%` wrapped once moved into data)
        e = _with_children(e, [_exact(child, ranges) for child in _children(e)])
    return e if e.dtype == WIDE else Cast(WIDE, e)


def fits_its_type(index: Expr, ranges: dict) -> bool:
    """Whether the exact value of index arithmetic `index` is one of its dtype wherever
    `ranges` (the values of its variables) hold: int32 arithmetic may pass int32 where int64
    would not, and int32 arithmetic under a widening cast may pass it in an int64 index; the
    other types compute in their own type everywhere, as does arithmetic on data."""
    if index.dtype not in (NARROW, WIDE) or reads_data(index):
        return True
    return _fits(interval(_exact_wide(index, ranges), ranges), index.dtype)

"""Interval arithmetic on integer index expressions: the mathematical range of an expression
over given ranges of its variables, and whether it may leave int32 on the way. The lowering
uses it to find index arithmetic that must be computed in int64 (lower/wide_integers.py), the
C target to bound values (c/int_ranges.py), the parser and blockize to give a block the
widest range of a loop whose bounds depend on enclosing loops (`widest_range`).
"""

from __future__ import annotations

from sched.ir.builders import const
from sched.ir.dtype import is_int, max_value, min_value
from sched.ir.functor import collect, free_vars
from sched.ir.nodes import BinaryOp, Call, Cast, Expr, For, IntImm, Range, Select, Var

NARROW, WIDE = "int32", "int64"
INT32 = (min_value(NARROW), max_value(NARROW))
# integer arithmetic the intervals follow ("div" of integers rounds toward zero, as C's /)
_ARITHMETIC = ("add", "sub", "mul", "div", "floordiv", "floormod", "min", "max")
_SHIFTS = ("shift_left", "shift_right")


def interval(e: Expr, ranges: dict) -> tuple[tuple[int, int], bool] | None:
    """The mathematical range of integer expression `e` (loop variables and parameters in
    `ranges`; 8- and 16-bit and unsigned arithmetic that may wrap: any value of its type) and
    whether it or an intermediate result may leave int32; None when `e` reads memory, calls
    a function or holds a variable not in `ranges`."""
    if isinstance(e, IntImm) and is_int(e.dtype):
        return (e.value, e.value), not INT32[0] <= e.value <= INT32[1]
    if isinstance(e, Var):
        found = ranges.get(e)
        return None if found is None else (found, not _fits(found))
    if isinstance(e, Cast) and is_int(e.dtype) and is_int(e.value.dtype):
        inner = interval(e.value, ranges)
        if inner is None:
            return None
        (lo, hi), overflows = inner
        low, high = min_value(e.dtype), max_value(e.dtype)
        value = (lo, hi) if low <= lo and hi <= high else (low, high)   # a wrap: any value
        return value, overflows or not _fits(value)
    if isinstance(e, Select):
        a, b = interval(e.true_value, ranges), interval(e.false_value, ranges)
        if a is None or b is None:
            return None
        return (min(a[0][0], b[0][0]), max(a[0][1], b[0][1])), a[1] or b[1]
    operands = integer_operation(e)
    if operands is None:
        return None
    op, a_node, b_node = operands
    a, b = interval(a_node, ranges), interval(b_node, ranges)
    if a is None or b is None:
        return None
    value = combine_ranges(op, a[0], b[0])
    every = (min_value(e.dtype), max_value(e.dtype))
    if value is None or e.dtype not in (NARROW, WIDE) and not (
            every[0] <= value[0] and value[1] <= every[1]):
        # (8- and 16-bit and unsigned arithmetic wraps in every context: audit helper-143,
        # `T.Cast("int8", i) * T.int8(64)` is -128 at i = 2)
        value = every
    return value, a[1] or b[1] or not _fits(value)


def parameter_ranges(func) -> dict:
    """The values of `func`'s symbolic dims (sizes: 0 to the largest of their dtype) and of
    its integer scalar parameters (their dtype's), as `interval` takes them."""
    ranges = {v: (0, max_value(v.dtype)) for v in func.symbolic_vars}
    for param in func.params:
        if isinstance(param, Var) and is_int(param.dtype):
            ranges[param] = (min_value(param.dtype), max_value(param.dtype))
    return ranges


def block_ranges(func, block, ranges: dict | None = None) -> dict:
    """The values of `block`'s iteration variables (from their domains), of `func`'s loop
    variables (a load in the bindings or a loop bound of the enclosing scope uses those) and
    of its sizes and integer scalars (`ranges`, by default `parameter_ranges`), as
    `interval` takes them."""
    loops = [(loop.loop_var, loop.min, loop.extent) for loop in collect(func.body, For)]
    ranges = loop_ranges(loops, parameter_ranges(func) if ranges is None else ranges)
    for iter_var in block.iter_vars:
        found = loop_values(iter_var.dom.min, iter_var.dom.extent, ranges)
        if found is not None:
            ranges[iter_var.var] = found[0]
    return ranges


def loop_values(start: Expr, extent: Expr, ranges: dict) -> tuple[tuple[int, int],
                                                                  tuple[int, int]] | None:
    """The values a loop `for v in range(start, start + extent)` gives its variable, and the
    end it reaches, over `ranges`; None where they are not bounded."""
    low = interval(start, ranges)
    end = interval(start + extent, ranges) if is_int(extent.dtype) else None
    if low is None or end is None:
        return None
    return (low[0][0], max(low[0][1], end[0][1] - 1)), end[0]


def _fits(value: tuple[int, int]) -> bool:
    return INT32[0] <= value[0] and value[1] <= INT32[1]


def integer_operation(e: Expr) -> tuple[str, Expr, Expr] | None:
    """(op, a, b) of integer arithmetic the intervals follow: a shift by a constant as the
    multiplication or floor division by its power of two, a bitwise and with a constant
    2**k - 1 as the floor remainder modulo 2**k (two's complement: what the model reads,
    isl_expr.py; audit helper-169); None for anything else."""
    if isinstance(e, BinaryOp) and e.op in _ARITHMETIC and is_int(e.dtype):
        return e.op, e.a, e.b
    if isinstance(e, Call) and e.op in _SHIFTS and is_int(e.dtype) and \
            isinstance(e.args[1], IntImm) and 0 <= e.args[1].value < 63:
        power = IntImm(1 << e.args[1].value, WIDE)
        return ("mul" if e.op == "shift_left" else "floordiv"), e.args[0], power
    mask = low_bits_mask(e)
    if mask is not None:
        return "floormod", e.args[0], IntImm(mask + 1, WIDE)
    return None


def low_bits_mask(e: Expr) -> int | None:
    """The constant 2**k - 1 of `T.bitwise_and(x, 2**k - 1)` (int32 or int64), else None."""
    if isinstance(e, Call) and e.op == "bitwise_and" and e.dtype in (NARROW, WIDE) and \
            len(e.args) == 2 and isinstance(e.args[1], IntImm):
        mask = e.args[1].value
        return mask if mask >= 0 and (mask + 1) & mask == 0 else None
    return None


def _truncdiv(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


def combine_ranges(op: str, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int] | None:
    """The mathematical range of `a op b` for operands in ranges `a` and `b` (op one of
    _ARITHMETIC); None where a divisor may be 0."""
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
    if blo <= 0 <= bhi:
        return None                      # a divisor that may be zero: any value
    if op in ("floordiv", "div"):
        # monotonic in each operand while the divisor keeps its sign: the corners bound it
        divide = (lambda x, y: x // y) if op == "floordiv" else _truncdiv
        quotients = [divide(x, y) for x in (alo, ahi) for y in (blo, bhi)]
        return min(quotients), max(quotients)
    return (0, bhi - 1) if blo > 0 else (blo + 1, 0)      # floormod


def loop_ranges(loops, ranges: dict) -> dict:
    """`ranges` (variable -> (least, greatest)) with the values of `loops` added, each a
    (variable, first value, extent) in order, outermost first, by interval arithmetic over
    the loops before it. A loop whose bounds cannot be followed, or whose 8- or 16-bit
    arithmetic may wrap (int32 bounds are computed in int64 where they could:
    lower/wide_integers.py), is left out: its values are unknown."""
    ranges = dict(ranges)
    for var, start, extent in loops:
        low, high = interval(start, ranges), interval(start + extent - 1, ranges)
        if low is None or high is None or (
                (low[1] or high[1]) and start.dtype not in (NARROW, WIDE)):
            ranges.pop(var, None)
            continue
        ranges[var] = (low[0][0], max(low[0][0], high[0][1]))
    return ranges


def widest_range(var: Var, enclosing: dict[Var, Range], positive=()) -> Range | None:
    """The smallest range holding every value of `var`, one of `enclosing` (the variables of
    the loops and blocks around a point, outermost first, with their ranges, which may use the
    variables before them), in the variables not in `enclosing` (symbolic dims, `positive`:
    those known to be at least 1); None where a bound cannot be followed (a product of two
    variables, a load). `for k in range(T.min(i, j) + 1)` under i, j < 7: 0..6; `for k in
    range(i + 1)` under i < n: 0..n-1. A block's domain is the same for every iteration around
    it (TensorIR's rule, which the schedule steps and the polyhedral model read it by): a block
    bound to such a loop declares this range (where its first value does not move: a
    reduction's init runs at the first point of its domain, see loop_invariant_domain).
    A loop that never runs gets one point at its first value."""
    from sched.ir.simplify import simplify

    bounds: dict[Var, tuple[Expr, Expr]] = {}       # inclusive, in the outer variables
    for outer, dom in enclosing.items():
        low, high = _symbolic_bounds(dom.min, bounds), \
            _symbolic_bounds(dom.min + dom.extent - 1, bounds)
        if low is not None and high is not None:
            bounds[outer] = (low[0], high[1])
        if outer is var:
            break
    if var not in bounds:
        return None
    low, high = (simplify(b, positive) for b in bounds[var])
    if any(v in enclosing for v in (*free_vars(low), *free_vars(high))):
        return None
    extent = simplify(high - low + 1, positive)
    if isinstance(extent, IntImm) and extent.value < 1:
        return Range(low, const(1, extent.dtype))      # a loop that never runs
    return Range(low, extent)


def _symbolic_bounds(e: Expr, bounds: dict[Var, tuple[Expr, Expr]]
                     ) -> tuple[Expr, Expr] | None:
    """The least and greatest value of integer expression `e` as expressions of the variables
    not in `bounds` (each variable of `bounds` between its two), or None where `e` is not made
    of sums, products by constants, min, max and floor divisions by positive constants."""
    if isinstance(e, IntImm):
        return e, e
    if isinstance(e, Var):
        return bounds.get(e, (e, e))
    if not (isinstance(e, BinaryOp) and is_int(e.dtype)):
        return None
    a = _symbolic_bounds(e.a, bounds)
    b = _symbolic_bounds(e.b, bounds)
    if a is None or b is None:
        return None
    (alo, ahi), (blo, bhi) = a, b
    if e.op == "add":
        return alo + blo, ahi + bhi
    if e.op == "sub":
        return alo - bhi, ahi - blo
    if e.op in ("min", "max"):
        return BinaryOp(e.op, alo, blo), BinaryOp(e.op, ahi, bhi)
    if isinstance(e.b, IntImm) and e.op == "mul":
        c = e.b.value
        return (alo * c, ahi * c) if c >= 0 else (ahi * c, alo * c)
    if isinstance(e.b, IntImm) and e.op == "floordiv" and e.b.value > 0:
        return BinaryOp("floordiv", alo, e.b), BinaryOp("floordiv", ahi, e.b)
    return None


def loop_invariant_domain(dom: Range, enclosing: dict[Var, Range], positive=()) -> Range:
    """A block's domain `dom`, where its extent uses the variables of the loops and blocks
    around it (`enclosing`, outermost first), widened to the widest range it takes
    (`widest_range`). Kept as it is where its first value uses them (`for k in range(i, n)`):
    the init of a reduction runs at the first point of the domain, so moving it would skip
    inits (audit helper-60); and where the widest range cannot be followed (a bound read from
    memory)."""
    if not any(v in enclosing for v in free_vars(dom.extent)) or \
            any(v in enclosing for v in free_vars(dom.min)):
        return dom
    probe = Var("_dom", dom.extent.dtype)
    return widest_range(probe, {**enclosing, probe: dom}, positive) or dom

"""Which integer arithmetic of a kernel may overflow its C type.

C leaves the overflow of signed arithmetic undefined, and gcc and nvcc optimise on it: `a + 1
> a` folds to true, `(a * 65536) / 65536` to `a`. sched's IR wraps, as numpy and the
interpreter do. gcc's `-fwrapv` would define it for the whole kernel, but it takes gcc down
paths few programs use: gcc 12.2 at -O3 miscompiled a kernel under it (a store to a row of the
output lost, found by the fuzzer; clang and gcc without the flag were right). So the emitters
write an integer `+`, `-` or `*` as C's operator where the values it can take fit the type C
computes it in, and elsewhere as unsigned arithmetic converted back, which wraps by definition
and is the same instruction:

    i * 64 + j                                  (loop variables: the values fit)
    (int32_t)((uint32_t)A[i] + (uint32_t)1)     (a value read from memory: any int32)

`IntRanges.value` bounds an expression by interval arithmetic from the ranges of the loop and
let variables in scope (`known`) and, for every other leaf (a load, a call, a parameter), the
range of its dtype. Index arithmetic that could leave int32 was computed in int64 before
(sched.lower.wide_integers), so indices stay plain C.
"""

from __future__ import annotations

from sched.ir.dtype import is_int, max_value, min_value
from sched.ir.intervals import combine_ranges, integer_operation
from sched.ir.nodes import BinaryOp, Cast, Expr, IntImm, Select, Var

Range = tuple[int, int]
WRAPPING_OPS = ("add", "sub", "mul")


def c_range(dtype: str) -> Range | None:
    """The range of the C type arithmetic on `dtype` is computed in: int for the 8- and
    16-bit types (C promotes them, unsigned ones too), the type itself for 32 and 64 bits;
    None for the unsigned 32- and 64-bit types, whose arithmetic wraps in C."""
    if dtype in ("int8", "int16", "uint8", "uint16"):
        return min_value("int32"), max_value("int32")
    if dtype in ("uint32", "uint64"):
        return None
    return min_value(dtype), max_value(dtype)


def unsigned_c_type(dtype: str) -> str:
    """The unsigned C type a wrapping `+`, `-` or `*` on `dtype` is computed in."""
    return "uint64_t" if dtype in ("int64", "uint64") else "uint32_t"


def _within(inner: Range, outer: Range) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1]


class IntRanges:
    """The ranges of the integer variables in scope, and what follows from them."""

    def __init__(self, known: dict[Var, Range]) -> None:
        self.known = dict(known)
        self._cache: dict[int, tuple[Expr, Range]] = {}

    def bind(self, var: Var, values: Range | None) -> Range | None:
        """Gives `var` the range `values` (None: its dtype's); returns what it had before, for
        `restore`."""
        before = self.known.get(var)
        self._set(var, values)
        return before

    def restore(self, var: Var, before: Range | None) -> None:
        self._set(var, before)

    def _set(self, var: Var, values: Range | None) -> None:
        self._cache.clear()
        if values is None:
            self.known.pop(var, None)
        else:
            self.known[var] = values

    def loop(self, start: Expr, extent: Expr) -> Range | None:
        """The range of a loop variable from `start` over `extent` iterations."""
        low, count = self.value(start), self.value(extent)
        if low is None or count is None:
            return None
        return low[0], max(low[0], low[1] + count[1] - 1)

    def value(self, e: Expr) -> Range | None:
        """The values integer expression `e` can take as C computes it (a wrap: any value of
        its dtype); None when `e` is not an integer."""
        if not is_int(e.dtype):
            return None
        found = self._cache.get(id(e))
        if found is not None and found[0] is e:
            return found[1]
        values = self._value(e)
        self._cache[id(e)] = (e, values)
        return values

    def _value(self, e: Expr) -> Range:
        full = (min_value(e.dtype), max_value(e.dtype))
        if isinstance(e, IntImm):
            return e.value, e.value
        if isinstance(e, Var):
            return self.known.get(e, full)
        if isinstance(e, Cast):
            inner = self.value(e.value)
            return inner if inner is not None and _within(inner, full) else full
        if isinstance(e, Select):
            a, b = self.value(e.true_value), self.value(e.false_value)
            return min(a[0], b[0]), max(a[1], b[1])
        operation = integer_operation(e)
        if operation is None:
            return full                  # a load, a call: any value of the type
        op, a, b = operation
        values = combine_ranges(op, self.value(a), self.value(b))
        return values if values is not None and _within(values, full) else full

    def may_overflow(self, node: BinaryOp) -> bool:
        """Whether integer `node` (`+`, `-` or `*`) may leave the C type it is computed in,
        an overflow C leaves undefined."""
        if node.op not in WRAPPING_OPS or not is_int(node.a.dtype):
            return False
        computed = c_range(node.a.dtype)
        if computed is None:             # unsigned 32 or 64 bits: C wraps them
            return False
        values = combine_ranges(node.op, self.value(node.a), self.value(node.b))
        return not _within(values, computed)

    def is_nonneg(self, e: Expr) -> bool:
        """Whether integer `e` is provably >= 0."""
        values = self.value(e)
        return values is not None and values[0] >= 0

"""Affine bounds of a non-affine binding, where its non-affine terms have them.

The model lets the variable of a non-affine binding take any value in its domain
(statements.py), and tells its runs apart by keys. Where the binding is an affine part plus
divisions of loops by symbolic dims, the values it takes stay within affine bounds of the
loops: fusing a tile's copy loops of extents 4 and `k` binds `v0 = i_0 * 4 + f // k` over
`f in range(4 * k)`, so `i_0 * 4 <= v0 <= i_0 * 4 + 3`. Without the bounds, the run at
`i_0 = 0` seemed to write row 4, and a parallel `i_0` was refused as carrying a dependence
(audit helper-178).

    binding_range(i_0 * 4 + f // k, loops, predicate, dims)   # 4*i_0 .. 4*i_0 + 3, isl texts

Each term's range, over divisors that are positive on every run (a positive constant, a
symbolic dim, a product of those):

- `x // d` where x is at least 0 (a sum of loops from 0 times constants of at least 0) and
  below `q * d` (factors in any order): 0 .. q - 1. x is below a loop's extent, below the
  bound of a conjunct `x < e` of the block's predicate (a split of the fused loop that does
  not divide gives `f_0 * 4 + f_1` and `T.where(f_0 * 4 + f_1 < 4 * k)`), or, for the loops
  of a split that divides (`f_0 * 4 + f_1`, f_1 < 4), below the outer loop's extent times its
  constant; where that bound has no factor d but is affine, 0 .. e - 1 (x // d <= x for
  x >= 0, d >= 1);
- `x % d`: 0 .. d - 1 where d - 1 is affine;
- an affine term: itself; `c * t` and `t * c` for a constant c: the range of t scaled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sched.ir.nodes import BinaryOp, Expr, IntImm, Var, binary, conjuncts
from sched.ir.simplify import simplify
from sched.polyhedral.injective_bindings import positive_divisor
from sched.polyhedral.isl_expr import exact_arithmetic, to_isl

if TYPE_CHECKING:
    from sched.polyhedral.statements import Loop


def binding_range(value: Expr, loops: list[Loop], predicate: Expr, dims: tuple[Var, ...]
                  ) -> tuple[str, str] | None:
    """(lowest, highest) isl texts of `value`'s values over `loops` (the loops around the
    block) where `predicate` (the block's) holds, or None where a term has no affine bound
    (see the module docstring)."""
    starts = {lp.var: lp.extent for lp in loops
              if isinstance(lp.min, IntImm) and lp.min.value == 0}
    below: dict[Expr, list[Expr]] = {var: [extent] for var, extent in starts.items()}
    for x, bound in predicate_limits(predicate):
        below.setdefault(x, []).append(bound)
    return _range(value, _Bounds(below, starts, dims))


def predicate_limits(predicate: Expr) -> list[tuple[Expr, Expr]]:
    """(x, e) for each conjunct of `predicate` that keeps x below e: `x < e` (what split
    writes), `e > x`, `x <= e - 1` and `e - 1 >= x` (e is `e - 1 + 1` there), in int32 or
    int64 (an int8 or int16 comparison wraps: `i * T.int8(2) < T.int8(100)` holds at i = 64,
    where the product is -128; audit helper-185)."""
    limits = []
    for term in conjuncts(predicate):
        if not isinstance(term, BinaryOp) or not exact_arithmetic(term.a.dtype):
            continue
        x, bound = {"lt": (term.a, term.b), "gt": (term.b, term.a),
                    "le": (term.a, term.b), "ge": (term.b, term.a)}.get(term.op, (None, None))
        if x is None:
            continue
        if term.op in ("le", "ge"):
            bound = simplify(bound + IntImm(1, bound.dtype))
        limits.append((x, bound))
    return limits


@dataclass(frozen=True)
class _Bounds:
    below: dict[Expr, list[Expr]]   # an expression -> bounds it stays below
    starts: dict[Var, Expr]         # the loops that start at 0 -> their extents
    dims: tuple[Var, ...]           # the function's symbolic dims (at least 1)

    def bounds(self, x: Expr) -> list[Expr]:
        """Bounds `x` stays below: a loop's extent, a predicate's, or for the loops of a
        split `f_0 * 4 + f_1` (each loop's constant times the extent of the loop of the next
        smaller constant) the largest constant times its loop's extent."""
        if x in self.below:
            return self.below[x]
        terms = _linear_terms(x)
        if not terms or any(v not in self.starts or c < 1 for v, c in terms.items()):
            return []
        order = sorted(terms, key=terms.get)
        if terms[order[0]] != 1:
            return []
        for inner, outer in zip(order, order[1:]):
            extent = self.starts[inner]
            if not isinstance(extent, IntImm) or terms[outer] != terms[inner] * extent.value:
                return []
        largest = order[-1]
        return [binary("mul", IntImm(terms[largest], largest.dtype), self.starts[largest])]

    def not_negative(self, x: Expr) -> bool:
        if isinstance(x, IntImm):
            return x.value >= 0
        if isinstance(x, Var):
            return x in self.starts
        return isinstance(x, BinaryOp) and x.op in ("add", "mul") and \
            self.not_negative(x.a) and self.not_negative(x.b) and \
            (x.op == "add" or isinstance(x.a, IntImm) or isinstance(x.b, IntImm))


def _range(value: Expr, bounds: _Bounds) -> tuple[str, str] | None:
    text = to_isl(value)
    if text is not None:
        return text, text
    if not isinstance(value, BinaryOp) or not exact_arithmetic(value.dtype):
        return None         # (8- and 16-bit arithmetic wraps: `i * T.int8(2)` at i = 64)
    a, b = value.a, value.b
    if value.op in ("add", "sub"):
        left, right = _range(a, bounds), _range(b, bounds)
        if left is None or right is None:
            return None
        if value.op == "add":
            return f"({left[0]}) + ({right[0]})", f"({left[1]}) + ({right[1]})"
        return f"({left[0]}) - ({right[1]})", f"({left[1]}) - ({right[0]})"
    if value.op == "mul" and (isinstance(b, IntImm) or isinstance(a, IntImm)):
        term, scale = (a, b.value) if isinstance(b, IntImm) else (b, a.value)
        found = _range(term, bounds)
        if found is None:
            return None
        low, high = (f"{scale} * ({found[0]})", f"{scale} * ({found[1]})")
        return (low, high) if scale >= 0 else (high, low)
    if not positive_divisor(b, bounds.dims):
        return None
    if value.op == "floormod":
        top = to_isl(b)
        return None if top is None else ("0", f"({top}) - 1")
    limits = bounds.bounds(a) if value.op == "floordiv" and bounds.not_negative(a) else []
    # a bound with the factor d gives the quotient's (x < 4 * k, x // k < 4), another one
    # that is affine its own (x // d <= x for x >= 0, d >= 1): the first found of each kind
    tops = [to_isl(_product(quotient)) for quotient in
            (_without(_factors(limit), _factors(b)) for limit in limits) if quotient is not None]
    tops += [to_isl(limit) for limit in limits]
    top = next((t for t in tops if t is not None), None)
    return None if top is None else ("0", f"({top}) - 1")


def _linear_terms(x: Expr) -> dict[Var, int] | None:
    """`x` as {variable: constant} where it is a sum of variables times constants."""
    if isinstance(x, Var):
        return {x: 1}
    if not isinstance(x, BinaryOp):
        return None
    if x.op == "add":
        a, b = _linear_terms(x.a), _linear_terms(x.b)
        if a is None or b is None or a.keys() & b.keys():
            return None
        return {**a, **b}
    if x.op == "mul" and (isinstance(x.a, IntImm) or isinstance(x.b, IntImm)):
        term, scale = (x.a, x.b.value) if isinstance(x.b, IntImm) else (x.b, x.a.value)
        found = _linear_terms(term)
        return None if found is None else {v: c * scale for v, c in found.items()}
    return None


def _factors(expr: Expr) -> list[Expr]:
    """The factors of a product (itself where it is not one)."""
    if isinstance(expr, BinaryOp) and expr.op == "mul":
        return _factors(expr.a) + _factors(expr.b)
    return [expr]


def _without(factors: list[Expr], divisors: list[Expr]) -> list[Expr] | None:
    """`factors` less each of `divisors` (a constant divisor may divide a constant factor),
    or None where one is not there."""
    left = list(factors)
    for d in divisors:
        if d in left:
            left.remove(d)
            continue
        multiple = next((f for f in left if isinstance(f, IntImm) and isinstance(d, IntImm)
                         and d.value > 0 and f.value % d.value == 0), None)
        if multiple is None:
            return None
        left[left.index(multiple)] = IntImm(multiple.value // d.value, multiple.dtype)
    return left


def _product(factors: list[Expr]) -> Expr:
    if not factors:
        return IntImm(1, "int32")
    product = factors[0]
    for f in factors[1:]:
        product = binary("mul", product, f)
    return product

"""IR integer expressions <-> isl quasi-affine functions, for passes that let isl simplify.

`AffineTranslation(context)` turns expressions into isl functions over parameters (every
variable, and an opaque parameter for each subterm isl cannot read: `i * n`, a load, a cast),
and the loop bounds in `context` into an isl set; `from_ast` reads isl's AST expressions back
as IR. Functions are built through isl's API, not by printing and parsing isl text, which costs
about ten times more.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import islpy as isl

from sched.ir.dtype import is_int, max_value
from sched.ir.functor import collect, free_vars
from sched.ir.intervals import interval, loop_ranges
from sched.ir.nodes import BinaryOp, BufferLoad, Call, Cast, Expr, IntImm, Var
from sched.polyhedral.isl_build import integer_val
from sched.polyhedral.isl_expr import INT64_MAGNITUDE, NotAffine, ast_to_expr, may_pass_int64

# (variable, min, extent) of each loop around an expression that bears on it, outermost first
Context = tuple[tuple[Var, Expr, Expr], ...]

# the extent of a symbolic dim's entry in a context (from 0): every value of its dtype (the
# largest int64 aside). An int64 size's magnitude is taken as the model takes it
# (isl_expr.INT64_MAGNITUDE), so that the lowering reads its arithmetic as the model does
SIZE_EXTENTS = {"int32": IntImm(2**31, "int64"), "int64": IntImm(2**63 - 1, "int64")}


def size_extent(dtype: str) -> IntImm:
    """The extent of a symbolic dim of `dtype` in a context (SIZE_EXTENTS)."""
    return SIZE_EXTENTS[dtype] if dtype in SIZE_EXTENTS else IntImm(max_value(dtype) + 1,
                                                                    "int64")


class AffineTranslation:
    """IR -> isl over parameters p0, p1, ... (the variables and the opaque subterms).

    First `term` turns expressions into affine terms, plain tuples that name their
    parameters: ("const", c), ("param", name), ("add" | "sub" | "min" | "max", t, t),
    ("mul" | "floordiv" | "floormod", t, c). Once every parameter is known, `function` and
    `context_set` build isl objects from terms.
    """

    def __init__(self, context: Context, opaque: Callable[[Expr], Expr] = lambda e: e,
                 data_vars: frozenset[Var] = frozenset()) -> None:
        self.context = context
        self.opaque = opaque          # the canonical form of a subterm isl cannot read
        self.data_vars = data_vars    # let variables holding values read from memory
        self.names: dict[Expr, str] = {}
        self.space = None

    def name(self, term: Expr) -> str:
        return self.names.setdefault(term, f"p{len(self.names)}")

    def term(self, e: Expr) -> tuple:
        """`e` as an affine term (opaque parameters for the parts isl cannot read)."""
        if isinstance(e, IntImm) and is_int(e.dtype):
            return ("const", e.value)
        if isinstance(e, Var):
            return ("param", self.name(e))
        if _is_widening(e) and self._cannot_wrap(e.value):   # isl's integers have no width
            return self.term(e.value)
        if isinstance(e, BinaryOp) and e.dtype in _EXACT and not self._wraps_before(e) \
                and not may_pass_int64(e, self.magnitudes):
            a, b, op = e.a, e.b, e.op
            if op in ("add", "sub", "min", "max"):
                return (op, self.term(a), self.term(b))
            if op == "mul" and isinstance(b, IntImm):
                return ("mul", self.term(a), b.value)
            if op == "mul" and isinstance(a, IntImm):
                return ("mul", self.term(b), a.value)
            if op in ("floordiv", "floormod") and isinstance(b, IntImm) and b.value > 0:
                return (op, self.term(a), b.value)
        return ("param", self.name(self.opaque(e)))     # not affine: an opaque parameter

    def reads_data(self, e: Expr) -> bool:
        return reads_data(e, self.data_vars)

    @functools.cached_property
    def magnitudes(self) -> dict[Var, int]:
        """A bound of the magnitude of each variable of the context (its loop's values, a
        let's value), by interval arithmetic; an int64 one whose values it cannot follow
        may take any value."""
        ranges = loop_ranges(self.context, {})
        found = {}
        for var, _, extent in self.context:
            if var.dtype == "int64" and extent is SIZE_EXTENTS["int64"]:
                found[var] = INT64_MAGNITUDE
            elif var in ranges:
                found[var] = max(abs(ranges[var][0]), abs(ranges[var][1]))
            elif var.dtype == "int64":
                found[var] = 1 << 63
        return found

    def _wraps_before(self, e: BinaryOp) -> bool:
        """Whether `e` divides, takes a remainder, a min or a max of arithmetic on data
        (`_reads_data`). Such arithmetic wraps in its type (the lowering widens index
        arithmetic of loop variables and sizes only); sums and products agree with isl's
        exact integers modulo 2**32, the other operations do not, so isl must take `e` whole
        as an opaque parameter (audit helper-103: `(B[i] * 65536) // 65536 % 40` became
        `B[i] % 40`; helper-107: the same through a let variable `v = B[0]`)."""
        return e.op in ("floordiv", "floormod", "min", "max") and any(
            isinstance(x, BinaryOp) and self.reads_data(x) for x in (e.a, e.b))

    def _cannot_wrap(self, e: Expr) -> bool:
        """Whether the int32 expression under a widening cast has its exact value: a
        variable or a constant, or index arithmetic over the context's loops that stays in
        int32 (the program casts the int32 value, which wraps: audit helper-107,
        `T.Cast("int64", B[0] * 65536) // 65536` and `T.Cast("int64", i * 65536) % 40` past
        i = 32767 were read exactly)."""
        if isinstance(e, Var | IntImm):
            return True
        if self.reads_data(e):
            return False
        ranges: dict = {}
        for var, lo, extent in self.context:
            low, end = interval(lo, ranges), interval(lo + extent, ranges)
            if low is not None and end is not None:
                ranges[var] = (low[0][0], max(low[0][0], end[0][1] - 1))
        found = interval(e, ranges)
        return found is not None and not found[1]

    def strict_term(self, e: Expr) -> tuple:
        """`e` as an affine term of variables and of opaque subterms already named (NotAffine
        otherwise). Opaque subterms are taken as they are: simplifying one (a loop bound)
        would simplify under the same loop bounds again, without end."""
        before = len(self.names)
        opaque, self.opaque = self.opaque, lambda subterm: subterm
        try:
            term = self.term(e)
        finally:
            self.opaque = opaque
        if any(not isinstance(t, Var) for t in list(self.names)[before:]):
            raise NotAffine
        return term

    def bounds(self) -> list[tuple[tuple, tuple, tuple]]:
        """(variable, start, end) terms of the context loops whose bounds are affine."""
        found = []
        for var, lo, extent in self.context:
            try:
                start, size = self.strict_term(lo), self.strict_term(extent)
            except NotAffine:
                continue
            found.append((("param", self.name(var)), start, ("add", start, size)))
        return found

    # -- isl objects, once every parameter has a name --------------------------------------------

    def function(self, term: tuple):
        """The isl function of `term`: an `Aff` while affine, a `PwAff` once min/max enter."""
        if self.space is None:
            space = isl.Space.params_alloc(isl.DEFAULT_CONTEXT, len(self.names))
            for k, name in enumerate(self.names.values()):
                space = space.set_dim_name(isl.dim_type.param, k, name)
            self.space, self.local = space, isl.LocalSpace.from_space(space)
            self.index = {name: k for k, name in enumerate(self.names.values())}
        kind = term[0]
        if kind == "const":
            return isl.Aff.val_on_domain(self.local, _val(term[1]))
        if kind == "param":
            return isl.Aff.var_on_domain(self.local, isl.dim_type.param, self.index[term[1]])
        a = self.function(term[1])
        if kind in ("add", "sub"):
            b = self.function(term[2])
            if isinstance(a, isl.Aff) != isinstance(b, isl.Aff):
                a, b = piecewise(a), piecewise(b)
            return getattr(a, kind)(b)
        if kind in ("min", "max"):
            return getattr(piecewise(a), kind)(piecewise(self.function(term[2])))
        if kind == "mul":
            return a.scale_val(_val(term[2]))
        if kind == "floordiv":
            return a.scale_down_val(_val(term[2])).floor()
        return a.mod_val(_val(term[2]))

    def context_set(self, bounds):
        """The set of parameter values the loop bounds allow."""
        result = isl.BasicSet.universe(self.space)
        for var, start, end in bounds:
            v, lo, hi = (self.function(t) for t in (var, start, end))
            if not all(isinstance(f, isl.Aff) for f in (v, lo, hi)):
                continue  # a bound with min/max: left out, which only weakens the context
            result = result.intersect(lo.le_basic_set(v)).intersect(v.lt_basic_set(hi))
        return isl.Set.from_basic_set(result)


def reads_data(e: Expr, data_vars: frozenset[Var] = frozenset()) -> bool:
    """Whether `e` computes with a value read from memory, returned by a call, or held by a
    let variable bound to one (`data_vars`): arithmetic that wraps in its type."""
    return bool(collect(e, BufferLoad) or collect(e, Call)
                or (data_vars and set(free_vars(e)) & data_vars))


def _is_widening(e: Expr) -> bool:
    """Whether `e` converts int32 to int64 (or to int32): a value read exactly either way.
    A cast of a narrower type stays an opaque parameter as a whole: arithmetic in the 8- and
    16-bit types wraps, and the expression isl gives back must keep the cast's type."""
    return isinstance(e, Cast) and e.dtype in _EXACT and e.value.dtype == "int32"


# the integer types whose arithmetic isl reads as exact (index arithmetic: int32 where it
# cannot overflow, int64 where it could, sched/lower/wide_integers.py); the 8- and 16-bit
# and the unsigned types wrap
_EXACT = ("int32", "int64")


def piecewise(function):
    return isl.PwAff.from_aff(function) if isinstance(function, isl.Aff) else function


def _val(value: int):
    return integer_val(value)


def from_ast(node, terms: dict[str, Expr], dtype: str) -> Expr:
    """An isl AST expression as IR (integers of `dtype`); a piecewise one raises NotAffine: it
    reads worse than the min/max it came from."""
    return ast_to_expr(node, terms, dtype, allow_select=False)

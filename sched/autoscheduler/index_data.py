"""The values a tuning workload draws for integer data the function reads as indices.

A gather `A[I[vi]]`, `A[I[vi] - 1]`, a let `x = I[vi]` used as an index, a block binding
`vj = T.axis.spatial(6, I[i])` and a CSR row's loop `range(indptr[i], indptr[i + 1])` read
their integer data as positions: drawn over the integer range, the unscheduled function the
candidates are compared with read past its arrays, and every candidate was reported a
legality bug (audit helpers 164, 168). Each such buffer gets the first range of a few small
candidates (0..3, fewer, then shifted) for which interval arithmetic puts every index it
takes part in inside its dimension (or binding inside its domain):

    index_data_ranges(func)      # {"I": (1, 4)} for A[I[vi] - 1] with A of 8 elements
"""

from __future__ import annotations

import math
from fractions import Fraction

from sched.ir.functor import IRMutator, IRVisitor, collect, free_vars, substitute
from sched.ir.intervals import interval, loop_ranges
from sched.ir.nodes import BlockRealize, BufferLoad, Expr, For, IntImm, LetStmt, PrimFunc, Var

# the ranges tried, in order: the first that keeps every index in bounds is taken
CANDIDATES = ((0, 3), (0, 2), (0, 1), (0, 0),
              *((low, low + width) for low in range(1, 9) for width in (3, 1, 0)))


def index_data_ranges(func: PrimFunc) -> dict[str, tuple[int, int]]:
    """Each integer buffer `func` reads as positions -> the (least, greatest) value to draw
    for it (see the module doc)."""
    sites = _Sites()
    sites.visit(func.body)
    ranges = loop_ranges([(lp.loop_var, lp.min, lp.extent) for lp in collect(func.body, For)],
                         {})
    for realize in collect(func.body, BlockRealize):
        for iv in realize.block.iter_vars:
            if isinstance(iv.dom.min, IntImm) and isinstance(iv.dom.extent, IntImm):
                ranges[iv.var] = (iv.dom.min.value, iv.dom.min.value + iv.dom.extent.value - 1)
    chosen: dict[str, tuple[int, int]] = {}
    for name in sorted({load.buffer.name for e, _ in sites.found
                        for load in collect(e, BufferLoad)} | set(sites.bounding)):
        # the loops whose bounds read it run between two of its values (a CSR's row)
        loops = sites.bounding.get(name, set())
        mine = [(e, limits) for e, limits in sites.found
                if any(load.buffer.name == name for load in collect(e, BufferLoad))
                or loops & set(free_vars(e))]
        candidates = CANDIDATES + tuple(c for e, limits in mine
                                        for c in _shifted(e, limits, name, ranges))
        chosen[name] = next((c for c in candidates if all(
            _inside(e, limits, name, c, {**ranges, **dict.fromkeys(loops, c)})
            for e, limits in mine)), CANDIDATES[0])
    return chosen


def _shifted(e: Expr, limits, name: str, ranges: dict) -> tuple[tuple[int, int], ...]:
    """Ranges starting where `e`, read as a line in the values of `name` (through its values
    at 0 and at `far`), enters `limits`: `A[I[vi] - 20]` needs I from 20 (audit helper-170)."""
    if limits is None:
        return ()
    far = 1 << 12      # (two values far apart: a division's steps, `(I - 100) // 4`, helper-171)
    at = [_interval(e, name, (v, v), ranges) for v in (0, far)]
    if None in at or at[1][0] == at[0][0]:
        return ()
    slope = Fraction(at[1][0] - at[0][0], far)
    # the least start where the line is past its limit at 0: rising, at least limits[0];
    # falling, at most limits[1]
    start = math.ceil((limits[0] - at[0][0]) / slope) if slope > 0 else \
        math.ceil((at[0][1] - limits[1]) / -slope)
    return tuple((start + shift, start + shift + width) for shift in (0, 1, 2, 3)
                 for width in (3, 1, 0))


def _interval(e: Expr, name: str, values, ranges: dict):
    """The values of `e` where the loads of `name` take `values` and other loads 0..3."""
    stand_ins, local = {}, dict(ranges)
    for load in collect(e, BufferLoad):
        var = stand_ins.setdefault(load, Var(f"_{load.buffer.name}", load.dtype))
        local[var] = values if load.buffer.name == name else CANDIDATES[0]
    found = interval(_replaced(e, stand_ins), local)
    return None if found is None else found[0]


def _inside(e: Expr, limits, name: str, values, ranges: dict) -> bool:
    """Whether `e` stays within `limits` (None: anything) where the loads of buffer `name`
    take `values` and other loads 0..3."""
    if limits is None:
        return True
    found = _interval(e, name, values, ranges)
    return found is not None and limits[0] <= found[0] and found[1] <= limits[1]


def _replaced(e: Expr, stand_ins: dict) -> Expr:
    """`e` with each load of `stand_ins` replaced by its variable."""
    class Loads(IRMutator):
        def visit_BufferLoad(self, node):
            return stand_ins.get(node, node)
    return Loads().visit(e)


class _Sites(IRVisitor):
    """The expressions that read integer data as positions, each with the values it must
    stay within: an index (its dimension), a binding (its domain), also one of a loop
    whose bounds read data (`bounding`: the loop runs between two of its values)."""

    def __init__(self) -> None:
        self.found: list[tuple[Expr, tuple[int, int] | None]] = []
        self.bounding: dict[str, set[Var]] = {}      # a buffer -> the loops it bounds
        self.lets: dict[Var, Expr] = {}

    def add(self, e: Expr, limits) -> None:
        e = substitute(e, self.lets) if self.lets else e
        bounded = {v for loops in self.bounding.values() for v in loops}
        if collect(e, BufferLoad) or bounded & set(free_vars(e)):
            self.found.append((e, limits))

    def visit_LetStmt(self, node: LetStmt) -> None:
        self.visit(node.value)
        self.lets[node.var] = substitute(node.value, self.lets) if self.lets else node.value
        self.visit(node.body)

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self._indices(node)
        self.visit_children(node)

    def visit_BufferStore(self, node) -> None:
        self._indices(node)
        self.visit_children(node)

    def _indices(self, access) -> None:
        for index, extent in zip(access.indices, access.buffer.shape):
            self.add(index, (0, extent.value - 1) if isinstance(extent, IntImm) else None)

    def visit_BlockRealize(self, node: BlockRealize) -> None:
        for iv, value in zip(node.block.iter_vars, node.iter_values):
            dom = iv.dom
            limits = (dom.min.value, dom.min.value + dom.extent.value - 1) if isinstance(
                dom.min, IntImm) and isinstance(dom.extent, IntImm) else None
            self.add(value, limits)
        self.visit_children(node)

    def visit_For(self, node: For) -> None:
        for bound in (node.min, node.extent):
            bound = substitute(bound, self.lets) if self.lets else bound
            for load in collect(bound, BufferLoad):
                self.bounding.setdefault(load.buffer.name, set()).add(node.loop_var)
        self.visit_children(node)

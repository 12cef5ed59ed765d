"""Reducers of the compute DSL: `sum`, `max`, `min` over reduce axes.

A reducer is the whole body of a compute:

    k = te.reduce_axis((0, 64), name="k")
    C = te.compute((128, 32), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")

`create_prim_func` turns it into a block with an init (the identity, or `init=`) and an update
(`C[vi, vj] = C[vi, vj] + ...`). `te.max(a, b)` / `te.min(a, b)` on two expressions is the
elementwise maximum / minimum instead.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass

from sched.compute.tensor import ReduceAxis
from sched.errors import DSLError
from sched.ir.dtype import LARGEST_FINITE, is_float, max_value, min_value
from sched.ir.nodes import Expr, binary, const, convert

COMBINERS = ("sum", "max", "min")


@dataclass(frozen=True)
class Reduce:
    """`combiner` of `source` over `axes`, counting only points where `condition` holds."""

    combiner: str
    source: Expr
    axes: tuple[ReduceAxis, ...]
    condition: Expr | None = None
    init: Expr | None = None

    @property
    def dtype(self) -> str:
        return self.source.dtype

    def identity(self) -> Expr:
        """The value the reduction starts from: `init` where given, else `neutral()`."""
        return self.init if self.init is not None else self.neutral()

    def neutral(self) -> Expr:
        """The value a reduction starts from and what a term that `where` leaves out
        contributes: 0 for sum, the lowest value for max, the highest for min. Finite for
        floats, as TVM's `te.max`/`te.min` identities (`min_value("float32")` is
        -3.4028235e38): a row that `where` leaves empty gets it, not -inf (audit helper-105),
        and a masked softmax row stays finite as in TVM."""
        if self.combiner == "sum":
            return const(0, self.dtype)
        return type_limit(self.dtype, lowest=self.combiner == "max")

    def combine(self, accumulated: Expr, value: Expr) -> Expr:
        """One update step: `accumulated + value`, `T.max(accumulated, value)`..."""
        op = {"sum": "add", "max": "max", "min": "min"}[self.combiner]
        return binary(op, accumulated, value)

    def _misused(self, *_):
        raise DSLError(
            f"a te.{self.combiner} reduction must be the whole body of a compute: compute it in "
            f"its own te.compute and use that tensor in the expression")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _misused
    __truediv__ = __rtruediv__ = __neg__ = __lt__ = __gt__ = _misused

    def as_expr(self):
        self._misused()


def type_limit(dtype: str, lowest: bool) -> Expr:
    """The lowest (or highest) value of `dtype`, finite for floats, as TVM's `min_value`
    and `max_value`."""
    if is_float(dtype):
        return const(-LARGEST_FINITE[dtype] if lowest else LARGEST_FINITE[dtype], dtype)
    return const(min_value(dtype) if lowest else max_value(dtype), dtype)


def _axes(axis) -> tuple[ReduceAxis, ...]:
    axes = tuple(axis) if isinstance(axis, list | tuple) else (axis,)
    if not axes or not builtins.all(isinstance(a, ReduceAxis) for a in axes):
        raise DSLError(f"axis must be a reduce axis or a list of them (te.reduce_axis), "
                       f"got {axis!r}")
    return axes


def check_where(where, who: str) -> None:
    """A Python bool as where= is almost always `a != b` or `a == b` on expressions of
    different dtypes (sched/ir/equality.py: no comparison is built): refuse it rather than
    reduce over every point or none."""
    if isinstance(where, bool):
        raise DSLError(f"{who}: where= is the Python bool {where}: a constant, or `==` / `!=` "
                       f"between expressions of different dtypes (never equal as objects); "
                       f"cast one (te.cast) or write te.equal(a, b) / te.not_equal(a, b)")


def _reducer(combiner: str, source, axis, where, init) -> Reduce:
    source = convert(source)
    check_where(where, f"te.{combiner}")
    condition = None if where is None else convert(where)
    if condition is not None and condition.dtype != "bool":
        raise DSLError(f"te.{combiner}: where= must be a condition, got a {condition.dtype}")
    init_expr = None if init is None else convert(init, source.dtype)
    return Reduce(combiner, source, _axes(axis), condition, init_expr)


def sum(source, axis, where=None, init=None) -> Reduce:  # noqa: A001 - TVM's spelling
    """The sum of `source` over `axis` (a reduce axis or a list of them)."""
    return _reducer("sum", source, axis, where, init)


def max(source, axis=None, where=None, init=None, *more):  # noqa: A001
    """The maximum of `source` over a reduce `axis`, or, given expressions (`te.max(a, b)`,
    `te.max(a, b, c)`), their elementwise maximum."""
    return _extreme("max", source, axis, where, init, more)


def min(source, axis=None, where=None, init=None, *more):  # noqa: A001
    """The minimum of `source` over a reduce `axis`, or the elementwise minimum of
    expressions."""
    return _extreme("min", source, axis, where, init, more)


def _extreme(op: str, source, axis, where, init, more: tuple):
    """te.max / te.min: a reduction over `axis`, or the elementwise extreme of `source`,
    `axis` and any further positional operands (a third one is not where=: `te.max(a, b, c)`
    dropped c)."""
    if axis is not None and not isinstance(axis, ReduceAxis | list | tuple):
        operands = [o for o in (where, init, *more) if o is not None]
        result = binary(op, source, axis)
        for operand in operands:
            result = binary(op, result, operand)
        return result
    if axis is None:
        raise DSLError(f"te.{op} needs axis= (a reduce axis) or a second expression")
    if more:
        raise DSLError(f"te.{op} over a reduce axis takes source, axis, where=, init=; got "
                       f"{len(more)} more operands")
    return _reducer(op, source, axis, where, init)

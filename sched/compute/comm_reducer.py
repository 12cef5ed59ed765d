"""User-defined reducers of the compute DSL: `te.comm_reducer` (TVM's), one value or several.

    def fcombine(x, y):                       # x: the accumulated (idx, val), y: the incoming
        keep = te.any(x[1] >= y[1], te.not_equal(x[1], x[1]))    # a NaN held stays: numpy's
        return te.if_then_else(keep, x[0], y[0]), te.if_then_else(keep, x[1], y[1])

    def fidentity(t0, t1):                    # the dtypes of the values
        return -1, te.min_value(t1)

    argmax = te.comm_reducer(fcombine, fidentity, name="argmax")
    idx, val = te.compute((m,), lambda i: argmax((k, A[i, k]), axis=k), name="T")

A reducer of several values makes a compute with one output per value (`T_v0`, `T_v1`), all
written by one block: its init stores the identity, its update computes every new value from
the old ones (one `LetStmt` each, as TVM prints it) and then stores them. Schedules check
the block like any other; rfactor accepts the reducers it can prove (schedule/tuple_reducers.py:
argmax/argmin over (index, value), over floats in the form that keeps a NaN it holds,
`te.any(x[1] >= y[1], te.not_equal(x[1], x[1]))`; accumulators each reduced on their own by
+, *, min or max, such as (sum, sum of squares); the (max, scaled sum) of logsumexp; and
single-value +, *, min, max) and refuses the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sched.compute.reduction import _axes, check_where, type_limit
from sched.errors import DSLError
from sched.ir.functor import substitute
from sched.ir.nodes import Expr, Var, convert


@dataclass(frozen=True)
class CommReducer:
    """`fcombine(x, y)` the new values from the accumulated `x` and the incoming `y` (each a
    tuple of expressions when there are several values, else one); `fidentity(*dtypes)` the
    values the reduction starts from."""

    fcombine: Callable
    fidentity: Callable
    name: str = "reduce"

    def __call__(self, source, axis, where=None, init=None) -> TupleReduce:
        """The reduction of `source` (a value, or a tuple of them) over `axis` where `where`
        holds, starting from `init` (one value per source, TVM's `init=`) instead of the
        identity: an empty range leaves the output at `init`."""
        several = isinstance(source, tuple | list)
        sources = tuple(convert(s) for s in source) if several else (convert(source),)
        check_where(where, self.name)
        condition = None if where is None else convert(where)
        if condition is not None and condition.dtype != "bool":
            raise DSLError(f"{self.name}: where= must be a condition, got a {condition.dtype}")
        starts = None
        if init is not None:
            starts = tuple(init) if isinstance(init, tuple | list) else (init,)
            if len(starts) != len(sources):
                raise DSLError(f"{self.name}: init= gives {len(starts)} value(s) for "
                               f"{len(sources)} reduced one(s); give one per value")
            starts = tuple(convert(v, s.dtype) for v, s in zip(starts, sources))
        return TupleReduce(self, sources, _axes(axis), condition, several, starts)

    def combine(self, accumulated: tuple[Expr, ...], incoming: tuple[Expr, ...]
                ) -> tuple[Expr, ...]:
        """The reducer's new values, written on `accumulated` and `incoming`."""
        dtypes = [e.dtype for e in accumulated]
        xs = tuple(Var(f"x{j}", d) for j, d in enumerate(dtypes))
        ys = tuple(Var(f"y{j}", d) for j, d in enumerate(dtypes))
        several = len(xs) > 1
        result = self.fcombine(xs if several else xs[0], ys if several else ys[0])
        result = tuple(result) if isinstance(result, tuple | list) else (result,)
        if len(result) != len(xs):
            raise DSLError(f"comm_reducer {self.name!r}: fcombine gives {len(result)} values "
                           f"for {len(xs)} accumulated ones; give one per value")
        mapping = {**dict(zip(xs, accumulated)), **dict(zip(ys, incoming))}
        return tuple(substitute(convert(r, d), mapping) for r, d in zip(result, dtypes))

    def identity(self, dtypes: list[str]) -> tuple[Expr, ...]:
        values = self.fidentity(*dtypes)
        values = tuple(values) if isinstance(values, tuple | list) else (values,)
        if len(values) != len(dtypes):
            raise DSLError(f"comm_reducer {self.name!r}: fidentity gives {len(values)} values "
                           f"for {len(dtypes)}; give one per value")
        return tuple(convert(v, d) for v, d in zip(values, dtypes))


@dataclass(frozen=True)
class TupleReduce:
    """`reducer` over `axes` of the values `sources` (where `condition` holds): the whole body
    of a compute, which then has one output per source when `several`."""

    reducer: CommReducer
    sources: tuple[Expr, ...]
    axes: tuple
    condition: Expr | None
    several: bool
    init: tuple[Expr, ...] | None = None    # where the reduction starts (None: the identity)

    def _misused(self, *_):
        raise DSLError(f"a {self.reducer.name} reduction must be the whole body of a compute")

    __add__ = __radd__ = __sub__ = __mul__ = __rmul__ = __truediv__ = __neg__ = _misused


def min_value(dtype: str) -> Expr:
    """The lowest value of `dtype` (finite for floats, as TVM's `min_value`)."""
    return type_limit(dtype, lowest=True)


def max_value(dtype: str) -> Expr:
    """The highest value of `dtype` (finite for floats, as TVM's `max_value`)."""
    return type_limit(dtype, lowest=False)


def comm_reducer(fcombine: Callable, fidentity: Callable, name: str = "reduce") -> CommReducer:
    """A commutative reducer (TVM's `te.comm_reducer`); see the module docstring."""
    if not callable(fcombine) or not callable(fidentity):
        raise DSLError("te.comm_reducer(fcombine, fidentity, name=...): both must be functions")
    return CommReducer(fcombine, fidentity, name)

"""Reducers over several buffers at once (argmax, argmin): recognized in a block, for rfactor.

A block such as TVM's argmax

    with T.init():
        idx[vi] = -1
        val[vi] = T.min_value("float32")
    v_idx: T.int32 = T.Select(val[vi] >= A[vi, vk], idx[vi], vk)
    v_val: T.float32 = T.Select(val[vi] >= A[vi, vk], val[vi], A[vi, vk])
    idx[vi] = v_idx
    val[vi] = v_val

updates two accumulators together: `(idx, val) = combine((idx, val), (vk, A[vi, vk]))`. It
is not one associative update `X = X op value`, so the dependence analysis never reorders its
reduce loops (polyhedral/dependences.is_reduction_update says no). `match_tuple_update` runs
the body symbolically (the final value of each accumulator in terms of their old values) and
matches it against the reducers known here, binding the incoming values (`vk`, `A[vi, vk]`).

Two families, as TVM registers them:
- first-wins (`>=` for argmax, `<=` for argmin): of equal values the first in iteration order
  wins. Associative, not commutative: partial results may only be combined in the order of
  their chunks, so rfactor accepts only the outermost reduce loop (each partial result is then
  a contiguous run of iterations, combined in order).
- smallest-index (ties broken by `idx < y_idx`): associative and commutative, any reduce loop.

Both hold for values in a total order, which floating-point values with a NaN are not:
`v >= NaN` and `NaN >= v` are both false, so a NaN acts as a reset: a row's result is the
maximum of what follows its last NaN, and combining partial results, one holding a large
value before the NaN's chunk, would bring it back (a row with 50 at 3 and a NaN at 20 of 32:
index 30 unscheduled, 3 after rfactor). rfactor refuses these two families over floats. A
third family is associative over floats: first-wins with a NaN winning,
`keep x where x_val >= y_val or x_val != x_val` (for argmin `<=`): the order with NaN above
every value, numpy's argmax and argmin (the first NaN of a row). Integer values keep all.
The partial results start from the block's own init (which must not depend on the reduce
variables): these reducers are idempotent, so a copy of the init at the start of each chunk
changes no result, whatever the init is.

Reducers that are not idempotent start their partial results from their identity (the
block's init is then combined once, by the write-back):
- componentwise: each accumulator by its own `x_j op y_j`, op +, *, min or max, y_j free of
  the accumulators ((sum, sum of squares), (min, max)): associative and commutative;
- (max, scaled sum), logsumexp's and online softmax's: `m = max(x0, y0)`,
  `s = x1 * exp(x0 - m) + y1 * exp(y0 - m)`, associative and commutative up to rounding.
Any other user reducer (te.comm_reducer) is refused: its associativity is not proved here.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

from sched.ir.dtype import LARGEST_FINITE, max_value, min_value
from sched.ir.functor import IRMutator, collect, field_names
from sched.ir.nodes import (
    BinaryOp,
    Block,
    BufferLoad,
    BufferStore,
    Call,
    Expr,
    LetStmt,
    Node,
    Select,
    SeqStmt,
    Stmt,
    Var,
    binary,
    const,
)


@dataclasses.dataclass(frozen=True)
class TupleReducer:
    """A reducer of several accumulators: `combine(xs, ys)` gives their new values from the
    old ones (`xs`) and the incoming ones (`ys`)."""

    name: str
    combine: Callable[[list[Expr], list[Expr]], list[Expr]]
    commutative: bool
    # the values partial results start from, by the accumulators' dtypes; None for an
    # idempotent reducer, whose partial results start from the block's own init
    identity: Callable[[list[str]], list[Expr]] | None = None
    # associative only where the compared values (accumulator 1) are in a total order: not
    # floating-point values, of which a NaN compares false both ways
    total_order: bool = False
    # whether `identity` is neutral for every value (a sum's 0, a max's -inf); the scaled
    # sum's (lowest finite, 0) is not for -inf, so the block's init must be it (rfactor_tuple)
    neutral: bool = True


def _identity(op: str, dtype: str) -> Expr:
    value = {"add": 0, "mul": 1, "max": min_value(dtype), "min": max_value(dtype)}[op]
    return const(value, dtype)


def _arg(compare: str, first_wins: bool, value_on_tie: bool = False, nan_wins: bool = False):
    """argmax (`compare` "gt") or argmin ("lt") over (index, value) pairs; with
    `value_on_tie` the smallest-index form picks the value with the index's condition too
    (the same value: they are equal on a tie); with `nan_wins` the first-wins form keeps a NaN
    it holds (`x_val >= y_val or x_val != x_val`)."""
    def combine(x, y):
        if first_wins:
            keep = binary(compare[0] + "e", x[1], y[1])          # >= or <=
            if nan_wins:
                keep = binary("or", keep, binary("ne", x[1], x[1]))
            return [Select(keep, x[0], y[0]), Select(keep, x[1], y[1])]
        better = binary(compare, x[1], y[1])
        tie = binary("and", binary("eq", x[1], y[1]), binary("lt", x[0], y[0]))
        keep = binary("or", better, tie)
        return [Select(keep, x[0], y[0]), Select(keep if value_on_tie else better, x[1], y[1])]
    kind = "argmax" if compare == "gt" else "argmin"
    ties = "first of equal values" if first_wins else "smallest index"
    return TupleReducer(f"{kind} ({ties} wins ties{', a NaN wins' if nan_wins else ''})",
                        combine, commutative=not first_wins, total_order=not nan_wins)


def _scaled_sum() -> TupleReducer:
    """(max, scaled sum), as online softmax and logsumexp keep them: `m = max(x0, y0)`,
    `s = x1 * exp(x0 - m) + y1 * exp(y0 - m)` (so s * exp(m) is the sum of exp of the
    values). Associative and commutative (up to rounding, as a sum); the identity is (the
    lowest finite value, 0): for finite values `(lo, 0)` combined with `(m, s)` gives
    `(m, 0 * exp(lo - m) + s)`, and two identities give the identity (with -inf the
    difference `-inf - -inf` would be NaN)."""
    def combine(x, y):
        m = binary("max", x[0], y[0])
        return [m, binary("add", binary("mul", x[1], Call("exp", (binary("sub", x[0], m),),
                                                            x[0].dtype)),
                          binary("mul", y[1], Call("exp", (binary("sub", y[0], m),),
                                                   y[0].dtype)))]

    def identity(dtypes):
        return [const(-LARGEST_FINITE[dtypes[0]], dtypes[0]), const(0, dtypes[1])]
    return TupleReducer("(max, scaled sum) of logsumexp", combine, commutative=True,
                        identity=identity, neutral=False)


REDUCERS = (_arg("gt", True), _arg("gt", True, nan_wins=True), _arg("gt", False),
            _arg("gt", False, True), _arg("lt", True), _arg("lt", True, nan_wins=True),
            _arg("lt", False), _arg("lt", False, True), _scaled_sum())
# reducers of each accumulator on its own (a (sum, sum of squares) pair, a (min, max)...)
_COMPONENT_OPS = ("add", "mul", "min", "max")


def _componentwise(actual: list[Expr], xs: list[Var]) -> tuple[TupleReducer, list] | None:
    """A reducer that updates each accumulator j by `x_j op_j y_j` (either operand order)
    with y_j free of every accumulator: associative and commutative, each op with its
    identity; the incoming values with it, or None."""
    ops, values = [], []
    for x, value in zip(xs, actual):
        if not (isinstance(value, BinaryOp) and value.op in _COMPONENT_OPS):
            return None
        incoming = value.b if value.a == x else value.a if value.b == x else None
        if incoming is None or set(collect(incoming, Var)) & set(xs):
            return None
        ops.append(value.op)
        values.append(incoming)

    def combine(a, b):
        return [binary(op, p, q) for op, p, q in zip(ops, a, b)]

    def identity(dtypes):
        return [_identity(op, dtype) for op, dtype in zip(ops, dtypes)]
    symbols = {"add": "sum", "mul": "product", "min": "min", "max": "max"}
    name = f"({', '.join(symbols[op] for op in ops)}) of each accumulator"
    return TupleReducer(name, combine, commutative=True, identity=identity), values


@dataclasses.dataclass(frozen=True)
class TupleUpdate:
    """A block's update matched: `stores[j]` is accumulator j (in the reducer's order), its
    value `combine(accumulators, values)`; `init` the values its init stores (or None)."""

    reducer: TupleReducer
    stores: tuple[BufferStore, ...]
    values: tuple[Expr, ...]
    init: tuple[Expr, ...] | None


class _Resolve(IRMutator):
    """Let variables by their values, loads of buffers already stored by their stored value."""

    def __init__(self, lets: dict, stored: dict) -> None:
        self.lets, self.stored = lets, stored

    def visit_Var(self, node):
        return self.lets.get(node, node)

    def visit_BufferLoad(self, node):
        node = self.visit_children(node)
        found = self.stored.get(node.buffer)
        return found[1] if found is not None and found[0] == node.indices else node


class _AccumulatorsAsVars(IRMutator):
    """Loads of the accumulators at `index` as their variables; `stray` if one is loaded
    elsewhere."""

    def __init__(self, accumulators: dict, index: tuple) -> None:
        self.accumulators, self.index, self.stray = accumulators, index, False

    def visit_BufferLoad(self, node):
        node = self.visit_children(node)
        if node.buffer in self.accumulators:
            if node.indices == self.index:
                return self.accumulators[node.buffer]
            self.stray = True
        return node


def _final_values(body: Stmt) -> dict | None:
    """{buffer: (indices, value in terms of the values before the body)}, each buffer stored
    once, or None for a body of another shape."""
    lets: dict = {}
    stored: dict = {}

    def run(stmt) -> bool:
        if isinstance(stmt, LetStmt):
            lets[stmt.var] = _Resolve(lets, stored).visit(stmt.value)
            return run(stmt.body)
        if isinstance(stmt, SeqStmt):
            return all(run(s) for s in stmt.stmts)
        if isinstance(stmt, BufferStore) and stmt.buffer not in stored:
            resolve = _Resolve(lets, stored)
            stored[stmt.buffer] = (tuple(resolve.visit(i) for i in stmt.indices),
                                   resolve.visit(stmt.value))
            return True
        return False
    return stored if run(body) and len(stored) >= 2 else None


def _init_values(init: Stmt | None, order) -> tuple[Expr, ...] | None:
    found = _final_values(init) if init is not None else None
    if found is None or set(found) != {s.buffer for s in order}:
        return None
    if any(found[s.buffer][0] != s.indices for s in order):
        return None
    return tuple(found[s.buffer][1] for s in order)


def _unify(pattern, actual, holes: dict, bound: dict) -> bool:
    """Whether `actual` is `pattern` with each hole variable replaced by one expression
    (the same at each occurrence); fills `bound`."""
    if isinstance(pattern, Var) and pattern in holes:
        if pattern in bound:
            return bound[pattern] == actual
        if actual.dtype != pattern.dtype:
            return False
        bound[pattern] = actual
        return True
    if type(pattern) is not type(actual):
        return False
    if not isinstance(pattern, Node):
        return pattern == actual
    for name in field_names(type(pattern)):
        a, b = getattr(pattern, name), getattr(actual, name)
        if isinstance(a, tuple):
            if not isinstance(b, tuple) or len(a) != len(b) or \
                    not all(_unify(x, y, holes, bound) for x, y in zip(a, b)):
                return False
        elif isinstance(a, Node):
            if not _unify(a, b, holes, bound):
                return False
        elif a != b:
            return False
    return True


def match_tuple_update(block: Block) -> TupleUpdate | None:
    """The reducer (of REDUCERS) the body of `block` applies to its accumulators, with the
    incoming values bound; None if it applies none of them."""
    final = _final_values(block.body)
    if final is None:
        return None
    indices = {idx for idx, _ in final.values()}
    if len(indices) != 1:
        return None
    (index,) = indices
    buffers = list(final)
    for order in itertools.permutations(buffers):
        xs = [Var(f"x{j}", b.dtype) for j, b in enumerate(order)]
        accumulators = {b: x for b, x in zip(order, xs)}
        mine = _AccumulatorsAsVars(accumulators, index)
        actual = [mine.visit(final[b][1]) for b in order]
        if mine.stray:
            continue
        stores = tuple(BufferStore(b, BufferLoad(b, index), index) for b in order)
        found = _componentwise(actual, xs)
        if found is not None:
            reducer, values = found
            return TupleUpdate(reducer, stores, tuple(values), _init_values(block.init, stores))
        for reducer in REDUCERS:
            ys = [Var(f"y{j}", b.dtype) for j, b in enumerate(order)]
            try:
                pattern = reducer.combine(xs, ys)
            except TypeError:           # the reducer does not apply to these dtypes
                continue
            if len(pattern) != len(order):
                continue
            bound: dict = {}
            holes = dict.fromkeys(ys)
            if not all(_unify(p, a, holes, bound) for p, a in zip(pattern, actual)):
                continue
            values = tuple(bound.get(y) for y in ys)
            if None in values or any(set(collect(v, Var)) & set(xs) for v in values):
                continue
            return TupleUpdate(reducer, stores, values, _init_values(block.init, stores))
    return None

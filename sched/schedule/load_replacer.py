"""The loads of a buffer replaced by the value its producer stores (compute_inline,
reverse_compute_inline: inlining.py), with each integer kept as it was computed where it
moves between data and index arithmetic (inline_integers.py), and 16-bit floats rounded as
their store rounded them.

    B[vi] = A[vi] * 2                           C[vi] = A[vi + 1] * 2
    C[vi] = B[vi + 1]                  ->
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.functor import IRMutator, free_vars, substitute
from sched.ir.nodes import (
    Assume,
    BinaryOp,
    BufferLoad,
    BufferStore,
    Cast,
    Expr,
    FloatImm,
    For,
    IfThenElse,
    IterVar,
    LetStmt,
    Select,
    Var,
    While,
)
from sched.schedule.inline_integers import (
    InexactIndex,
    exact_index,
    index_parts,
    reads_data,
    rewrapped,
    used_as_data,
    wrapped_value,
    wraps_around,
)


class LoadReplacer(IRMutator):
    """Every load of `store.buffer` replaced by the stored value at the loaded indices,
    rounded and wrapped as the store rounded and wrapped it (`stored_value`; `ranges`: of
    the storing block's variables), each index computed as the stored block computed its
    variable (`exact_index`; `loading`: the ranges of the loading block's variables).

    Integer arithmetic in an index (of a load or a store), a condition, a loop bound or a
    let is computed exactly where it reads no data (inline_integers.py): a load replaced
    there takes the stored value as data computes it, and the arithmetic of the index that
    read data only through the load keeps wrapping (`rewrapped`). The visitor starts out of
    indices (a block's bindings, predicate and domains are visited in one: `in_context`)."""

    def __init__(self, store: BufferStore, ranges: dict, loading: dict | None = None,
                 primitive: str = "compute_inline",
                 data_bound: frozenset = frozenset(),
                 loading_data_bound: frozenset = frozenset()) -> None:
        self.store, self.ranges, self.primitive = store, ranges, primitive
        self.data_bound = data_bound      # the storing block's variables bound to data
        self.loading_data_bound = loading_data_bound      # the loading block's
        self.loading = loading if loading is not None else ranges
        self.in_index = False
        self.lets: dict = {}

    def refusal(self, why: str) -> ScheduleError:
        return ScheduleError(self.primitive, f"the value stored to "
                             f"{self.store.buffer.name!r}, {self.store.value.script()}, "
                             f"{why}; keep the block")

    def in_context(self, node, in_index: bool):
        """`node` visited in an index (or out of one), its arithmetic that read data through
        replaced loads still wrapping."""
        if isinstance(node, IterVar):         # (its domain's bounds: audit helper-135)
            return _changed(node, dom=_changed(
                node.dom, min=self.in_context(node.dom.min, in_index),
                extent=self.in_context(node.dom.extent, in_index)))
        outer, self.in_index = self.in_index, in_index
        try:
            new = self.visit(node)
        finally:
            self.in_index = outer
        if not in_index or new is node or not isinstance(node, Expr):
            return new
        kept = rewrapped(node, new, self.store.buffer.name, self.loading)
        if kept is None:
            raise self.refusal(f"loaded in {node.script()}, would change how that index "
                               f"computes the arithmetic around the load (wrapping on data, "
                               f"exact without it)")
        return kept

    def visit_BufferLoad(self, load: BufferLoad):
        load = _changed(load, indices=tuple(self.in_context(i, True) for i in load.indices))
        if load.buffer.name != self.store.buffer.name:
            return load
        value = wrapped_value(stored_value(self.store), self.ranges, self.in_index)
        if value is None:
            raise self.refusal("is int64 arithmetic that may pass int64: stored, it wraps (as "
                               "numpy's), and inlined into an index or a condition it would "
                               "be computed exactly")
        as_data = used_as_data(value)
        for var, index in zip(self.store.indices, load.indices):
            holds_data = self.holds_data(index)
            if isinstance(var, Var) and holds_data != (var in self.data_bound) and \
                    any(wraps_around(part, var, self.ranges) for part in index_parts(value)):
                held, given = ("index arithmetic", "data") if holds_data else \
                    ("data", "index arithmetic")
                raise self.refusal(f"computes with {var.name} in an index where it holds "
                                   f"{held}, and the read {load.script()} gives it {given}, "
                                   f"whose arithmetic there may differ (wrapping on data, "
                                   f"exact without it)")
        try:
            return substitute(value, {
                var: index if var not in as_data and index.dtype == var.dtype else
                exact_index(index, var, self.loading, self.lets)
                for var, index in zip(self.store.indices, load.indices)
                if isinstance(var, Var)})
        except InexactIndex as error:
            raise self.refusal(f"read at an index holding {error}, would compute it as data "
                               f"(wrapping) where the index computes it exactly") from None

    def holds_data(self, index: Expr) -> bool:
        """Whether `index` computes with data: reads memory, or a let or a variable of the
        loading block bound to a load (audit helper-143: `x: T.int32 = G[vi]` then `B[x]`,
        the stored `A[vj * 2**30 // 2**30]` became `A[x * 2**30 // 2**30]`, which wraps)."""
        if reads_data(index):
            return True
        variables = free_vars(index)
        return any(v in self.loading_data_bound or v in self.lets and
                   self.holds_data(self.lets[v]) for v in variables)

    def visit_BufferStore(self, store: BufferStore):
        return _changed(store, indices=tuple(self.in_context(i, True) for i in store.indices),
                        value=self.in_context(store.value, False))

    def visit_IfThenElse(self, node: IfThenElse):
        return _changed(
            node, condition=self.in_context(node.condition, True),
            then_body=self.visit(node.then_body),
            else_body=None if node.else_body is None else self.visit(node.else_body))

    def visit_For(self, loop: For):
        return _changed(loop, min=self.in_context(loop.min, True),
                        extent=self.in_context(loop.extent, True), body=self.visit(loop.body))

    def visit_While(self, node: While):
        return _changed(node, condition=self.in_context(node.condition, True),
                        body=self.visit(node.body))

    def visit_Assume(self, node: Assume):
        return _changed(node, condition=self.in_context(node.condition, True))

    def visit_LetStmt(self, let: LetStmt):
        value = self.in_context(let.value, True)
        if reads_data(let.value) and not reads_data(value) and \
                wraps_around(let.body, let.var, self.loading):
            raise self.refusal(f"inlined into the let {let.var.name} = {let.value.script()}, "
                               f"would make {let.var.name} index arithmetic (exact) where it "
                               f"held data (wrapping) in arithmetic that may differ")
        self.lets[let.var] = value
        try:
            return _changed(let, value=value, body=self.visit(let.body))
        finally:
            del self.lets[let.var]


def _changed(node, **fields):
    """`node` with `fields`, or `node` itself where each is the one it holds (a mutator keeps
    the identity of what it did not change: the steps find nodes by it)."""
    if all(getattr(node, name) is value or isinstance(value, tuple)
           and len(value) == len(getattr(node, name))
           and all(a is b for a, b in zip(value, getattr(node, name)))
           for name, value in fields.items()):
        return node
    return dataclasses.replace(node, **fields)


def stored_value(store: BufferStore) -> Expr:
    """The value a load reads back after `store`: its value, rounded to a 16-bit float buffer's
    type where it is computed. float16 and bfloat16 arithmetic computes in float32 and rounds
    where stored or cast (sched/interpreter, sched/c/dtypes.py), so an inlined value keeps that
    rounding as `T.Cast("float16", T.Cast("float32", value))` (the simplifier keeps both):
    inlined bare, `A[i] * 3.3 + 1000 - 1000` lost it and came out 0.03 where stored it was 0."""
    value = store.value
    if store.buffer.dtype not in ("float16", "bfloat16") or _rounded(value):
        return value
    return Cast(store.buffer.dtype, Cast("float32", value))


def _rounded(value: Expr) -> bool:
    """Whether `value` (of a 16-bit float type) is a value of its type as computed: a load, a
    constant, a variable, a conversion, or a choice among those (select, min, max)."""
    if isinstance(value, BufferLoad | FloatImm | Var):
        return True
    if isinstance(value, Cast):
        return value.value.dtype != value.dtype
    if isinstance(value, Select):
        return _rounded(value.true_value) and _rounded(value.false_value)
    if isinstance(value, BinaryOp) and value.op in ("min", "max"):
        return _rounded(value.a) and _rounded(value.b)
    return False

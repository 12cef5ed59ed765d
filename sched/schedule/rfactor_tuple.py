"""rfactor of a reduction over several accumulators (argmax, argmin: tuple_reducers.py).

The same two blocks as rfactor.py's: `<name>_rf` computes partial results into one buffer
`<buffer>_rf` per accumulator, indexed by the factored loop; the original block combines them.
Each body is the reducer's combination written as TVM prints it: one `LetStmt` per
accumulator (all computed from the old values), then the stores.

A first-wins reducer (argmax with `>=`) is not commutative: the partial results must be whole
runs of consecutive iterations, combined in order, so only the outermost reduce loop may be
factored.
"""

from __future__ import annotations

from sched.ir.dtype import is_float
from sched.ir.functor import collect, free_vars, substitute
from sched.ir.names import fresh
from sched.ir.nodes import (
    BufferLoad,
    BufferStore,
    FloatImm,
    IntImm,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Var,
)
from sched.ir.simplify import simplify
from sched.schedule.rfactor import (
    _check_factor_axis,
    _combining_nest,
    _partial_block,
    _rfactor_parts,
)
from sched.schedule.scope import add_allocation, block_names, loop_roles, refusal, splice
from sched.schedule.state import replace_in
from sched.schedule.tuple_reducers import TupleUpdate


def rfactor_tuple(func: PrimFunc, realize, update: TupleUpdate, loop, loops, factor_axis,
                  render: bool) -> tuple[PrimFunc, str]:
    """rfactor.rfactor for a block matched by tuple_reducers.match_tuple_update (`loops` is
    rfactor._rfactor_loops' answer)."""
    scope, top, kept, removed = loops
    block = realize.block
    _check_tuple_update(func, realize, update, loop, scope.loops, render)
    axis = _check_factor_axis(factor_axis, update.stores[0].buffer)
    parts = _rfactor_parts(func, loop, removed, axis)
    rf_buffers = [parts.buffer_for(s.buffer) for s in update.stores]
    combine = update.reducer.combine

    def body(stores, xs, ys):
        """`t_j = combine_j(xs, ys)` for each j, then `stores[j] = t_j`."""
        temps = [Var(fresh(f"v_{s.buffer.name}", parts.taken), s.buffer.dtype) for s in stores]
        parts.taken.update(t.name for t in temps)
        stmt = SeqStmt(tuple(BufferStore(s.buffer, t, s.indices) for s, t in zip(stores, temps)))
        for temp, value in reversed(list(zip(temps, combine(xs, ys)))):
            stmt = LetStmt(temp, value, stmt)
        return stmt

    def partial(reduce_values):
        indices = parts.rf_indices(tuple(substitute(i, reduce_values)
                                         for i in update.stores[0].indices))
        stores = [BufferStore(b, BufferLoad(b, indices), indices) for b in rf_buffers]
        xs = [s.value for s in stores]
        ys = [substitute(v, reduce_values) for v in update.values]
        starts = update.init if update.reducer.identity is None else \
            update.reducer.identity([b.dtype for b in rf_buffers])
        init = SeqStmt(tuple(BufferStore(b, value, indices)
                             for b, value in zip(rf_buffers, starts)))
        return body(stores, xs, ys), init
    rf_realize = _partial_block(realize, loop, removed, parts,
                                fresh(f"{block.name}_rf", block_names(func)), partial)
    indices = parts.rf_indices(update.stores[0].indices)
    partials = [BufferLoad(b, indices) for b in rf_buffers]
    write_back = _combining_nest(func, realize, loop, scope.loops, kept, removed, parts.rf_var,
                                 body(update.stores, [s.value for s in update.stores], partials),
                                 parts.taken, render)
    new_func = add_allocation(func, scope.realize, *rf_buffers)
    new_top = replace_in(top, realize, rf_realize)
    return splice(new_func, top, [new_top, write_back]), rf_realize.block.name


def _check_tuple_update(func, realize, update: TupleUpdate, loop, loops, render) -> None:
    """Refuse what would change the result: an init other than one store per accumulator
    free of the reduce variables, accumulators at indices of reduce variables, a block writing
    another buffer, a reducer that needs a total order over floating-point values (a NaN),
    and (first-wins reducers) a factored loop that is not the outermost reduce loop."""
    block = realize.block
    accumulators = {s.buffer for s in update.stores}
    reduce_vars = {iv.var for iv in block.iter_vars if iv.kind == "reduce"}
    names = ", ".join(s.buffer.name for s in update.stores)
    what = f"block {block.name!r} ({update.reducer.name} over {names})"
    if update.init is None or any(set(free_vars(v)) & reduce_vars or
                                  {ld.buffer for ld in collect(v, BufferLoad)} & accumulators
                                  for v in update.init):
        raise refusal("rfactor", f"{what} needs an init (T.init) that stores each accumulator "
                      f"once, at the element the update writes, from values free of the reduce "
                      f"variables and of the accumulators: the partial results start from it",
                      func, None, render)
    if any(set(free_vars(i)) & reduce_vars for i in update.stores[0].indices) or \
            {w.buffer for w in block.writes} != accumulators:
        raise refusal("rfactor", f"{what} must write only its accumulators, at indices free of "
                      f"the reduce variables", func, None, render)
    values = update.stores[1].buffer
    if update.reducer.total_order and is_float(values.dtype):
        compare = ">=" if update.reducer.name.startswith("argmax") else "<="
        held = BufferLoad(values, update.stores[1].indices).script()
        incoming = update.values[1].script()
        raise refusal("rfactor", f"{what} compares {values.dtype} values, and with a NaN "
                      f"({held} {compare} NaN and NaN {compare} {held} are both false) a "
                      f"row's result depends on the order its values are combined in: the "
                      f"partial results would change it. Let a NaN win, as numpy's "
                      f"{update.reducer.name[:6]} does, and rfactor is exact: keep the "
                      f"accumulators where `{held} {compare} {incoming} or {held} != {held}` "
                      f"(the first of equal values wins), in both selects", func, None, render)
    if not update.reducer.neutral:
        _check_init_is_identity(func, update, what, render)
    if update.reducer.commutative:
        return
    roles = loop_roles(realize, loops)
    reduce_loops = [lp for lp in loops if "reduce" in roles[lp.loop_var]]
    if reduce_loops[0] is not loop:
        outer = reduce_loops[0].loop_var.name
        raise refusal("rfactor", f"{what} keeps the first of equal values in iteration order: "
                      f"combining partial results over loop {loop.loop_var.name!r}, inside "
                      f"reduce loop {outer!r}, would pick another index on ties. Factor the "
                      f"outermost reduce loop" + ("" if is_float(values.dtype) else
                      ", or break ties by the smaller index in the update (keep x where "
                      "x_val > y_val, or the values are equal and x_idx < y_idx)"),
                      func, loop.loop_var.name, render, (f"sch.rfactor({outer}, factor_axis=0)",))


def _check_init_is_identity(func, update: TupleUpdate, what: str, render) -> None:
    """Refuse a reducer whose partial results start from its identity where the block's init
    is another value: the partials then combine values the unscheduled block never saw
    together (audit helper-174: logsumexp from (-inf, 0) over rows masked with -inf gave
    -3.4e38 for -inf and numbers for NaN once factored)."""
    identity = update.reducer.identity([s.buffer.dtype for s in update.stores])
    if all(isinstance(v, FloatImm | IntImm) and isinstance(i, FloatImm | IntImm) and
           v.value == i.value for v, i in zip(map(simplify, update.init), identity)):
        return
    wanted = ", ".join(i.script() for i in identity)
    raise refusal("rfactor", f"{what} starts from ({', '.join(v.script() for v in update.init)})"
                  f", not from its identity ({wanted}), which its partial results start from: "
                  f"with values the init is not neutral for (-inf in a masked row) the result "
                  f"would change; write the init as ({wanted})", func, None, render)

"""reverse_compute_inline: fold a consumer into its single producer, which then stores the
consumer's value where the consumer stored it (the Schedule method is in placement.py).

The consumer's instances become the producer's (`_consumer_mapping`: its loads of the
producer's buffer at its own variables, or an access inverse_access.py inverts), and the
intermediate buffer goes. The dependences that could break are those with a block between
the two (inlining.py's module doc), the consumer's own overwrites, and reads of what the
consumer writes that would now see its new values.
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.functor import IRMutator, collect, substitute
from sched.ir.intervals import block_ranges
from sched.ir.nodes import TRUE, BlockRealize, BufferLoad, BufferStore, Expr, PrimFunc
from sched.ir.regions import infer_block_regions
from sched.ir.simplify import simplify
from sched.polyhedral import build_model, dependences
from sched.schedule.inline_integers import exact_index, used_as_data
from sched.schedule.inlining import (
    _bound_to_data,
    _drop_allocation,
    _outer_vars,
    _readers,
    _refuse_between,
    _single_store,
    _top_position,
    data_variables,
    neighbours,
    remove_block,
)
from sched.schedule.load_replacer import LoadReplacer
from sched.schedule.reverse_inline_checks import (
    refuse_control_around,
    refuse_other_elements,
    refuse_unseen_reads_before,
)
from sched.schedule.state import and_predicate, find_block, refuse_other_views, replace


def _consumer_mapping(func: PrimFunc, realize: BlockRealize, p_realize: BlockRealize,
                      store: BufferStore, primitive: str) -> dict:
    """The consumer's iteration variables as the producer's: each load of the producer's
    buffer must be at the same indices, either distinct iteration variables covering all of
    them, or an affine function of them that matches the instances one to one
    (inverse_access.py)."""
    block, producer = realize.block, p_realize.block
    loads = {load.indices for load in collect(block.body, BufferLoad)
             if load.buffer.name == store.buffer.name}
    own = {iv.var: iv for iv in block.iter_vars}
    indices = next(iter(loads))
    theirs = {iv.var: iv for iv in producer.iter_vars}
    plain = len(set(indices)) == len(indices) and set(indices) == set(own) and all(
        own[c].dom == theirs[p].dom for c, p in zip(indices, store.indices))
    if len(loads) == 1 and not plain and p_realize.predicate == TRUE:
        from sched.schedule.inverse_access import invert_consumer_access

        return invert_consumer_access(func, realize, p_realize, store, indices)
    if len(loads) == 1 and not plain:
        raise ScheduleError(primitive, f"producer {producer.name!r} runs under the predicate "
                            f"{p_realize.predicate.script()} and block {block.name!r} reads "
                            f"{store.buffer.name}[{', '.join(i.script() for i in indices)}], "
                            f"not at its own iteration variables: inline it before the step "
                            f"that made the predicate (a split that does not divide)")

    if not plain or len(loads) != 1:
        shown = "; ".join(f"{store.buffer.name}[{', '.join(i.script() for i in idx)}]"
                          for idx in loads)
        raise ScheduleError(primitive, f"block {block.name!r} reads {shown}: the indices must "
                            f"be its iteration variables, each once, over the domains of "
                            f"{producer.name!r}, so that its instances and those of "
                            f"{producer.name!r} match one to one")
    return dict(zip(indices, store.indices)), None


def reverse_compute_inline(func: PrimFunc, block_name: str, render: bool = True) -> PrimFunc:
    """Inline the consumer `block_name` into its single producer (see
    Schedule.reverse_compute_inline)."""
    primitive = "reverse_compute_inline"
    realize = find_block(func, block_name, primitive)
    block = realize.block
    store = _single_store(block, primitive, "block", exact=False)
    if realize.predicate != TRUE:
        raise ScheduleError(primitive, f"block {block_name!r} runs under the predicate "
                            f"{realize.predicate.script()}; reverse_compute_inline takes a "
                            f"block without one (its producer would store only where it "
                            f"holds): inline it before the step that made it (a split that "
                            f"does not divide, compute_at / reverse_compute_at), or, where "
                            f"the script wrote it (T.where), write the condition into the "
                            f"value (T.if_then_else) and keep the block")
    loading = [load.buffer.name for value in realize.iter_values
               for load in collect(value, BufferLoad)]
    if loading:
        raise ScheduleError(primitive, f"the bindings of block {block_name!r} load "
                            f"{', '.join(sorted(set(loading)))}: which instances run depends on "
                            f"data, so they cannot become the producer's")
    producers = neighbours(func, block_name, "producers")
    exchanged = set().union(*producers.values()) if producers else set()
    if len(producers) != 1 or len(exchanged) != 1:
        raise ScheduleError(primitive, f"block {block_name!r} reads {len(exchanged)} buffer(s) "
                            f"written by block(s) {', '.join(producers) or 'none'}; "
                            f"reverse_compute_inline needs exactly one producer")
    p_realize = find_block(func, next(iter(producers)), primitive)
    p_store = _single_store(p_realize.block, primitive, "producer")
    buffer = p_store.buffer
    if any(p.name == buffer.name for p in func.buffers):
        raise ScheduleError(primitive, f"{buffer.name!r} is an output of the function: "
                            f"producer {p_realize.block.name!r} must keep storing it")
    refuse_other_views(func, buffer, primitive, "inlining its consumer")
    others = [name for name in {**_readers(func, buffer)} if name != block_name]
    if others:
        raise ScheduleError(primitive, f"{buffer.name!r} is also read by block(s) "
                            f"{', '.join(others)}: it must stay stored")
    _refuse_overwrites(func, block_name, store, p_realize.block.name, primitive)
    mapping, condition = _consumer_mapping(func, realize, p_realize, p_store, primitive)
    start = _top_position(func, p_realize.block.name)
    between = [d for d in dependences(func) if d.kind in ("anti", "output")
               and d.sink.block is block and d.source.block not in (block, p_realize.block)
               and _top_position(func, d.source.block.name) >= start]
    _refuse_between(func, primitive, between, lambda d: (
        f"block {d.source.block.name!r} accesses {d.buffer!r} between producer "
        f"{p_realize.block.name!r} and {block_name!r}, which would then write it earlier"),
        render)
    # the consumer loads one element per instance, the one its producer instance stores
    ranges = block_ranges(func, p_realize.block)
    as_data = used_as_data(store.value)
    exact = {var: index if var not in as_data and index.dtype == var.dtype else
             exact_index(index, var, ranges) for var, index in mapping.items()}
    value = LoadReplacer(p_store, ranges, primitive=primitive,
                         data_bound=_bound_to_data(p_realize, data_variables(func))).visit(
        _at_store(substitute(store.value, exact), p_store))
    indices = tuple(simplify(substitute(index, mapping)) for index in store.indices)
    new_store = BufferStore(store.buffer, value, indices)
    producer = p_realize.block
    reads, writes = infer_block_regions(new_store, None, producer.iter_vars,
                                        producer.alloc_buffers, _outer_vars(func))
    new_block = dataclasses.replace(producer, body=new_store, reads=reads, writes=writes)
    new_realize = dataclasses.replace(p_realize, block=new_block)
    if condition is not None:       # the instances whose element the consumer read
        new_realize = and_predicate(new_realize, substitute(condition, dict(zip(
            (iv.var for iv in producer.iter_vars), p_realize.iter_values))))
    written = store.buffer.storage_name
    refuse_unseen_reads_before(func, written, start, _top_position(func, block_name),
                                block_name, primitive)
    refuse_control_around(func, realize, block_name, primitive)
    new_func = replace(func, p_realize, new_realize)
    new_func = remove_block(new_func, find_block(new_func, block_name))
    new_func = _drop_allocation(new_func, buffer)
    refuse_other_elements(func, new_func, block_name, producer.name, store.buffer, primitive)
    # the producer's reads of what the consumer writes came before every write of it; inlined,
    # a later instance must not read an element an earlier one wrote (audit helper-95:
    # B[vi] = A[vi] + C[vi - 1] read the new C[vi - 1]: wrong numbers)
    _refuse_between(new_func, primitive, [
        d for d in dependences(new_func) if d.kind == "flow" and d.buffer == written
        and d.source.block.name == d.sink.block.name == producer.name], lambda d: (
        f"block {producer.name!r} reads {written!r}, which {block_name!r} writes; inlined, "
        f"an instance would read an element an earlier one wrote, where it read the value "
        f"from before {block_name!r} ran"), render)
    return new_func


def _refuse_overwrites(func: PrimFunc, block_name: str, store: BufferStore, producer: str,
                       primitive: str) -> None:
    """Refuse a consumer two of whose instances write one element: which value stays depends
    on their order, and inlined they run in the producer's (audit, helper-44: C[0] =
    B[7 - vi] kept B[0]'s value instead of B[7]'s)."""
    statements = [s for s in build_model(func).statements_of_block(block_name)
                  if not s.is_init]
    if all(s.writes.is_injective() for s in statements):
        return
    shown = f"{store.buffer.name}[{', '.join(i.script() for i in store.indices)}]"
    raise ScheduleError(primitive, f"instances of block {block_name!r} write one element of "
                        f"{shown} (or the model cannot tell them apart): which value stays "
                        f"depends on their order, and inlined into {producer!r} they would "
                        f"run in its order")


def _at_store(value: Expr, store: BufferStore) -> Expr:
    """`value` with every load of the stored buffer at the store's indices (what the loads
    are, once the consumer's variables are the inverse of its single access)."""

    class AtStore(IRMutator):
        def visit_BufferLoad(self, load: BufferLoad):
            load = self.visit_children(load)
            if load.buffer.name == store.buffer.name:
                return BufferLoad(load.buffer, store.indices)
            return load
    return AtStore().visit(value)

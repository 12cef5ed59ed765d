"""Inlining: compute_inline folds a producer into its consumers (reverse_compute_inline, a
consumer into its producer: reverse_inlining.py; the Schedule methods are in placement.py,
with compute_at).

Both remove a block and the intermediate buffer between the two, so the instances of the
function change and `check_order` does not apply; the dependences that could break are those
with a third block between the two, which the functions below look for (conservatively: a block
in the same top-level nest as the moved computation counts as between).
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.functor import IRMutator, IRVisitor, collect, free_vars
from sched.ir.intervals import block_ranges
from sched.ir.nodes import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    IfThenElse,
    LetStmt,
    PrimFunc,
    Range,
    SeqStmt,
    Var,
    const,
    is_constant,
    seq,
)
from sched.ir.regions import infer_block_regions
from sched.polyhedral import dependences
from sched.polyhedral.dependences import dependences_where
from sched.polyhedral.legality import Violation, describe_instance_pair, schedule_error
from sched.schedule.inline_integers import reads_data, wraps_around
from sched.schedule.load_replacer import LoadReplacer
from sched.schedule.state import find_block, path_to, refuse_other_views, replace


def neighbours(func: PrimFunc, block: str, kind: str) -> dict[str, set[str]]:
    """The blocks that read what `block` writes (kind "consumers") or write what it reads
    ("producers"), each with the buffers they exchange; for a block holding blocks (one
    `blockize` made) what the blocks inside it exchange with the blocks outside it (the
    dependences are between the innermost blocks)."""
    inside = {r.block.name for r in collect(find_block(func, block, f"get_{kind}"),
                                            BlockRealize)}
    found: dict[str, set[str]] = {}
    # only the pairs with `block` at the end asked about can count: only those are computed
    end = 0 if kind == "consumers" else 1
    for dep in dependences_where(func, lambda *pair: pair[end].block.name in inside):
        source, sink = dep.source.block.name, dep.sink.block.name
        if dep.kind != "flow" or (source in inside) == (sink in inside):
            continue
        if kind == "consumers" and source in inside:
            found.setdefault(sink, set()).add(dep.buffer)
        if kind == "producers" and sink in inside:
            found.setdefault(source, set()).add(dep.buffer)
    return found


def block_accesses(block: Block, node_type) -> list:
    """The loads (node_type BufferLoad) or stores (BufferStore) of a block itself: in its init
    and body, not in the blocks nested there."""
    found: list = []

    class Collector(IRVisitor):
        def visit(self, node) -> None:
            if isinstance(node, node_type):
                found.append(node)
            if not isinstance(node, BlockRealize):
                super().visit(node)
    for part in (block.init, block.body):
        if part is not None:
            Collector().visit(part)
    return found


def remove_block(func: PrimFunc, realize: BlockRealize) -> PrimFunc:
    """`func` without `realize` and the loops (ifs, lets) that held nothing else."""
    node = realize
    for parent in reversed(path_to(func.body, realize)):
        if isinstance(parent, SeqStmt):
            rest = [s for s in parent.stmts if s is not node]
            if rest:
                return replace(func, parent, seq(*rest))
        elif not isinstance(parent, For | IfThenElse | LetStmt | Allocate):
            return replace(func, node, SeqStmt(()))      # the body of a block, now empty
        node = parent
    raise AssertionError("remove_block: the block is not in the function")


def _drop_allocation(func: PrimFunc, buffer: Buffer) -> PrimFunc:
    """`func` without the allocation of `buffer` once nothing accesses it."""
    accesses = collect(func.body, BufferLoad) + collect(func.body, BufferStore) + \
        collect(func.body, BufferRegion)
    if any(a.buffer.name == buffer.name for a in accesses):
        return func
    for block in collect(func.body, Block):
        if any(b.name == buffer.name for b in block.alloc_buffers):
            kept = tuple(b for b in block.alloc_buffers if b.name != buffer.name)
            return replace(func, block, dataclasses.replace(block, alloc_buffers=kept))
    return func


def _single_store(block: Block, primitive: str, role: str, exact: bool = True,
                  unit_zeros: bool = False) -> BufferStore:
    """The one store of a spatial block; with `exact`, its indices are the iteration
    variables, each once."""
    reduce = [iv.var.name for iv in block.iter_vars if iv.kind == "reduce"]
    if block.init is not None or reduce:
        what = f"{role} {block.name!r} is a reduction (reduce variable(s) {', '.join(reduce)}): "
        if role == "producer":
            raise ScheduleError(primitive, what + "its values are final only after its last "
                                "update, so no consumer can be folded into it; "
                                "reverse_compute_at can put the consumer after the reduction")
        mover = "reverse_compute_at" if primitive.startswith("reverse") else "compute_at"
        raise ScheduleError(primitive, what + f"only a spatial block with one store "
                            f"B[v...] = f(...) can be inlined; {mover} can move a reduction "
                            f"next to its neighbour")
    store = block.body
    if not isinstance(store, BufferStore):
        raise ScheduleError(primitive, f"the body of {role} {block.name!r} is not a single "
                            f"store B[...] = value")
    reads_itself = [load for load in collect(store, BufferLoad)
                    if load.buffer.storage_name == store.buffer.storage_name]
    if reads_itself:
        raise ScheduleError(primitive, f"{role} {block.name!r} reads the buffer it writes "
                            f"({reads_itself[0].script()} in {store.buffer.name}[...] = ...): "
                            f"each value depends on values written before it (a scan, an "
                            f"in-place update), so its expression cannot stand for the stored "
                            f"value; keep the block (compute_at can move it instead)")
    own = [iv.var for iv in block.iter_vars]
    # a 0 at a dimension of extent 1 holds the one element there (TVM's `B[0, vi, vj]` of
    # reindex and normalize_prim_func): every load of the buffer reads it
    indices = [i for i, extent in zip(store.indices, store.buffer.shape)
               if not (unit_zeros and is_constant(i, 0) and is_constant(extent, 1))]
    if exact and (len(set(indices)) != len(indices) or set(indices) != set(own)):
        zeros = " (and 0 at a dimension of extent 1)" if unit_zeros else ""
        raise ScheduleError(primitive, f"{role} {block.name!r} stores "
                            f"{store.buffer.name}[{', '.join(i.script() for i in store.indices)}]"
                            f": the indices must be its iteration variables "
                            f"({', '.join(v.name for v in own)}), each once{zeros}")
    return store


def _top_position(func: PrimFunc, name: str) -> int:
    """The index of the top-level statement (of the root block) that holds block `name`; the
    last for the root block itself (it loads the buffer outside every other block, in a loop
    bound or condition between them: it reads it anywhere; audit helper-51's assertion)."""
    body = func.body.block.body if isinstance(func.body, BlockRealize) else func.body
    children = body.stmts if isinstance(body, SeqStmt) else (body,)
    if isinstance(func.body, BlockRealize) and func.body.block.name == name:
        return len(children) - 1
    for index, child in enumerate(children):
        if any(r.block.name == name for r in collect(child, BlockRealize)):
            return index
    raise AssertionError(f"block {name!r} is not in the function")


def _refuse_between(func, primitive, deps, reason, render) -> None:
    """Raise for the first of `deps` (dependences on a block between the two)."""
    for dep in deps:
        example = describe_instance_pair(dep, dep.relation)
        violation = Violation(reason(dep), dep, example)
        raise schedule_error(primitive, violation, func, render=render)


def _new_reads(block: Block, old_reads, replaced: str, inlined, outer: tuple[Var, ...]):
    """The reads of `block` once loads of `replaced` became `inlined` values: the old regions
    of the other buffers, and inferred ones for the buffers the inlined values load."""
    inferred, _ = infer_block_regions(block.body, block.init, block.iter_vars,
                                      block.alloc_buffers, outer)
    loaded = {load.buffer.name for load in collect(inlined, BufferLoad)}
    # a region indexed through the replaced buffer (a gather's `A[vk, G[vi]]`, G inlined)
    # is inferred again too: it would name a buffer that is gone (audit helper-71)
    loaded |= {r.buffer.name for r in old_reads
               if any(load.buffer.name == replaced for load in collect(r, BufferLoad))}
    kept = [r for r in old_reads if r.buffer.name != replaced and r.buffer.name not in loaded]
    return tuple(kept + [r for r in inferred if r.buffer.name in loaded])


def _with_whole_buffers(reads, exprs) -> tuple[BufferRegion, ...]:
    """`reads` with the whole of each buffer `exprs` load (a block's bindings and predicate
    are in loop variables, which the block's regions cannot name: over-approximated)."""
    loaded = {x.buffer.name: x.buffer for expr in exprs for x in collect(expr, BufferLoad)}
    regions = [r for r in reads if r.buffer.name not in loaded]
    return tuple(regions + [BufferRegion(b, tuple(Range(const(0, dim.dtype), dim)
                                                  for dim in b.shape))
                            for b in loaded.values()])


def _outer_vars(func: PrimFunc) -> tuple[Var, ...]:
    return tuple(func.symbolic_vars) + tuple(p for p in func.params if isinstance(p, Var))


def compute_inline(func: PrimFunc, block_name: str, render: bool = True) -> PrimFunc:
    """Inline the spatial block `block_name` into every block that reads its buffer (see
    Schedule.compute_inline)."""
    primitive = "compute_inline"
    realize = find_block(func, block_name, primitive)
    store = _single_store(realize.block, primitive, "block", unit_zeros=True)
    buffer = store.buffer
    if any(p.name == buffer.name for p in func.buffers):
        raise ScheduleError(primitive, f"block {block_name!r} writes {buffer.name!r}, an output "
                            f"of the function: its values must be stored; only a block writing "
                            f"an intermediate buffer (T.alloc_buffer) can be inlined")
    refuse_other_views(func, buffer, primitive, "inlining its producer")
    blocks = [r for r in collect(func.body, BlockRealize) if r is not realize]
    writers = [r.block.name for r in blocks if any(w.buffer.name == buffer.name
                                                   for w in r.block.writes)]
    if writers:
        raise ScheduleError(primitive, f"{buffer.name!r} is also written by block(s) "
                            f"{', '.join(writers)}: which value a read sees depends on the order")
    readers = [name for name in _readers(func, buffer) if name != block_name]
    last = max((_top_position(func, r) for r in readers), default=-1)
    late = [d for d in dependences(func) if d.kind == "anti" and d.source.block is realize.block
            and d.sink.block is not realize.block
            and (d.sink.block.name in readers or _top_position(func, d.sink.block.name) <= last)]
    _refuse_between(func, primitive, late, lambda d: (
        f"block {d.sink.block.name!r} overwrites {d.buffer!r}, which {block_name!r} reads, "
        f"before a consumer runs: inlined, the consumer would read the new values"), render)
    ranges, outer = block_ranges(func, realize.block), _outer_vars(func)
    data = data_variables(func)
    data_bound = _bound_to_data(realize, data)

    class Inline(IRMutator):
        def visit_BlockRealize(self, node: BlockRealize):
            node = self.visit_children(node)
            block = node.block
            if block.name not in readers:
                return node
            replacer = LoadReplacer(store, ranges, block_ranges(func, block),
                                    data_bound=data_bound,
                                    loading_data_bound=data)
            # every place the reader can load the buffer: its bindings and predicate (the
            # enclosing scope's), its domains, init, body (loop bounds and nested blocks too)
            body = replacer.visit(block.body)
            init = None if block.init is None else replacer.visit(block.init)
            iter_vars = tuple(replacer.in_context(iv, True) for iv in block.iter_vars)
            new = dataclasses.replace(block, body=body, init=init, iter_vars=iter_vars)
            reads = _new_reads(new, block.reads, buffer.name, store.value, outer)
            iter_values = tuple(replacer.in_context(v, True) for v in node.iter_values)
            for iter_var, before, after in zip(block.iter_vars, node.iter_values,
                                               iter_values):
                if reads_data(before) and not reads_data(after) and \
                        wraps_around(block, iter_var.var, replacer.loading):
                    raise replacer.refusal(
                        f"inlined into the binding {iter_var.var.name} = {before.script()}, "
                        f"would make {iter_var.var.name} index arithmetic (exact) where it "
                        f"held data (wrapping) in arithmetic that may differ")
            predicate = replacer.in_context(node.predicate, True)
            reads = _with_whole_buffers(reads, [*iter_values, predicate])
            return dataclasses.replace(
                node, iter_values=iter_values, predicate=predicate,
                block=dataclasses.replace(new, reads=reads))
    new_func = remove_block(Inline().visit(func), realize)
    return _drop_allocation(new_func, buffer)


def _readers(func: PrimFunc, buffer: Buffer) -> dict[str, None]:
    """The blocks that load `buffer`: in their init or body (loop bounds included), or in the
    bindings, predicate or domains they are realized with."""
    found: dict[str, None] = {}
    for r in collect(func.body, BlockRealize):
        loads = block_accesses(r.block, BufferLoad) + collect(r.predicate, BufferLoad) + \
            [x for part in (*r.iter_values, *r.block.iter_vars) for x in collect(part, BufferLoad)]
        if any(load.buffer.name == buffer.name for load in loads):
            found[r.block.name] = None
    return found


def _bound_to_data(realize: BlockRealize, data: frozenset) -> frozenset:
    """The block's iteration variables bound to data (`data_variables`)."""
    return frozenset(iv.var for iv in realize.block.iter_vars if iv.var in data)


def data_variables(func: PrimFunc) -> frozenset:
    """The variables of `func` bound to data: a let or a block's iteration variable whose
    value reads memory or uses such a variable (a gather's index: arithmetic on data, which
    wraps). Anywhere in the function: a let around the block, or an outer block's binding,
    holds data for the blocks in it too (audit helper-147)."""
    found: set[Var] = set()

    class Walk(IRVisitor):
        def visit_LetStmt(self, node: LetStmt) -> None:
            if reads_data(node.value) or set(free_vars(node.value)) & found:
                found.add(node.var)
            self.visit_children(node)

        def visit_BlockRealize(self, node: BlockRealize) -> None:
            for iter_var, value in zip(node.block.iter_vars, node.iter_values):
                if reads_data(value) or set(free_vars(value)) & found:
                    found.add(iter_var.var)
            self.visit_children(node)
    Walk().visit(func.body)
    return frozenset(found)

"""Buffer compaction: each allocated buffer shrinks to the box its accesses touch in one
execution of its allocation point, and its indices are rebased to that box.

Runs after `plan_buffer_allocation` (which puts allocations as low as they can go: a buffer
under a tile loop is then a tile) and before `align_storage` (which pads the compacted shape),
on block IR: the polyhedral model of the blocks gives, with isl, the exact box touched per
iteration of the loops around the allocation, `T.where` predicates included. TVM:
CompactBufferAllocation.

A block may use only its own iteration variables, so the offset of the box, a function of the
loops around the allocation (`io * 4`), is rewritten as a function of each accessing block's
iteration variables (`vi - vi % 4` where `vi = io * 4 + ii`), and isl simplifies the rebased
index under their ranges (`vi % 4`); `simplify_indices` makes it `ii` after block conversion.
A dimension is compacted only where this rewrite exists for every accessing block and the box
has a constant extent smaller than the dimension.
"""

from __future__ import annotations

import dataclasses

import islpy as isl

from sched.ir.extern import addressed_storages
from sched.ir.functor import IRMutator, collect, free_vars, substitute
from sched.ir.names import fresh
from sched.ir.nodes import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Expr,
    For,
    IntImm,
    IterVar,
    Node,
    PrimFunc,
    Range,
    Var,
    is_constant,
)
from sched.lower.compact_offsets import box_offsets, thread_loop
from sched.lower.isl_affine import Context
from sched.lower.simplify_indices import simplify_index
from sched.polyhedral import build_model, names
from sched.polyhedral.accesses import unseen_loads
from sched.polyhedral.isl_text import read_map


def _allocations(func: PrimFunc) -> list[tuple[Buffer, list[For]]]:
    """Each allocated buffer with the loops around its allocation, outermost first."""
    found: list[tuple[Buffer, list[For]]] = []

    def walk(node: Node, loops: list[For]) -> None:
        if isinstance(node, Block):
            found.extend((buffer, loops) for buffer in node.alloc_buffers)
        elif isinstance(node, Allocate):
            found.append((node.buffer, loops))
        if isinstance(node, For):
            loops = [*loops, node]
        for field in dataclasses.fields(node):
            value = getattr(node, field.name)
            for child in value if isinstance(value, tuple) else (value,):
                if isinstance(child, Node) and not isinstance(child, Expr | Buffer):
                    walk(child, loops)
    walk(func.body, [])
    return found


def _outer_loops(model, statement, count: int, relax_threads: bool) -> isl.Map:
    """{ S[iteration variables] -> [values of the first `count` loops around it] }, leaving
    out loops bound to threadIdx when `relax_threads` (a shared buffer is one per thread
    block: it holds what all its threads touch)."""
    width = len(statement.time)
    times = [names.local("t", i) for i in range(width)]
    picked = [times[lp.position] for lp in statement.loops[:count]
              if not (relax_threads and thread_loop(lp))]
    project = read_map(f"[{', '.join(model.params)}] -> {{ [{', '.join(times)}] -> "
                      f"[{', '.join(picked)}] }}")
    return statement.schedule.apply_range(project)


def _box(model, buffer: Buffer, loops: list[For]):
    """(per statement touching `buffer`: its instances -> the outer loops; the map outer
    loops -> elements touched), or None when a statement is not under all of `loops`."""
    if len(model.views.get(buffer.storage_name, ())) > 1:
        return None         # other views index the same storage: it keeps its layout
    outer = []
    touched = None
    for statement in model.statements.values():
        access = statement.accesses_of(buffer.name)
        if access is None:
            continue
        if [lp.var for lp in statement.loops[:len(loops)]] != [lp.loop_var for lp in loops]:
            return None
        to_loops = _outer_loops(model, statement, len(loops), buffer.scope == "shared")
        outer.append((statement, to_loops))
        per_loop = to_loops.reverse().apply_range(access)
        touched = per_loop if touched is None else touched.union(per_loop)
    return (outer, touched) if touched is not None else None


def _extent(touched: isl.Map, dim: int) -> int | None:
    """The largest extent of dimension `dim` over one iteration of the outer loops, for any
    value of the symbolic dims (a tile of a loop over `n` is at most the tile)."""
    ndim = touched.dim(isl.dim_type.out)
    one = touched.project_out(isl.dim_type.out, dim + 1, ndim - dim - 1) \
        .project_out(isl.dim_type.out, 0, dim)
    deltas = one.reverse().apply_range(one).deltas()
    deltas = deltas.project_out(isl.dim_type.param, 0, deltas.dim(isl.dim_type.param))
    if deltas.is_empty():
        return None
    # isl's integer maximum, not is_bounded: that one answers for the rational relaxation of
    # the existentials, unbounded for a fetch whose fused loop is split by 3 (`(f * 8 + t)
    # // 3` rows; audit helper-112: a tile of 8 x 3 kept the shape m * 3)
    largest = deltas.dim_max_val(0)
    return largest.to_python() + 1 if largest.is_int() else None


def _compaction(model, buffer: Buffer, loops: list[For]):
    """(new buffer, {block name: offset per dimension}) or None when nothing shrinks."""
    box = _box(model, buffer, loops)
    if box is None:
        return None
    outer, touched = box
    shape, offsets = list(buffer.shape), {s.block.name: [IntImm(0)] * buffer.ndim for s, _ in outer}
    for dim, size in enumerate(buffer.shape):
        extent = _extent(touched, dim)
        if extent is None or (isinstance(size, IntImm) and extent >= size.value):
            continue
        found = box_offsets(model, buffer, outer, touched, dim, extent, loops)
        if found is None:
            continue
        shape[dim] = IntImm(extent, size.dtype)
        for name, offset in found.items():
            offsets[name][dim] = offset
    if shape == list(buffer.shape):
        return None
    return dataclasses.replace(buffer, shape=tuple(shape)), offsets


class _ReplaceBuffer(IRMutator):
    def __init__(self, old: Buffer, new: Buffer) -> None:
        self.old, self.new = old, new

    def visit_Buffer(self, buffer: Buffer) -> Buffer:
        return self.new if buffer == self.old else buffer


class _Rebase(IRMutator):
    """Subtracts each block's offsets from its accesses to one buffer (and its regions)."""

    def __init__(self, buffer: Buffer, offsets: dict[str, list[Expr]], loops: list[For],
                 taken: set[str]) -> None:
        self.buffer, self.offsets, self.loops, self.taken = buffer, offsets, loops, taken
        self.current: list[Expr] | None = None
        self.context: Context = ()

    def rebase(self, indices):
        return tuple(simplify_index(i - o, self.context) if not is_constant(o, 0) else i
                     for i, o in zip(indices, self.current))

    def visit_BlockRealize(self, realize: BlockRealize) -> BlockRealize:
        outer = self.current, self.context
        self.current = self.offsets.get(realize.block.name)
        if self.current is not None:
            realize = self._bind_loops(realize)
        self.context = tuple((iv.var, iv.dom.min, iv.dom.extent)
                             for iv in realize.block.iter_vars)
        result = self.visit_children(realize)
        self.current, self.context = outer
        return result

    def _bind_loops(self, realize: BlockRealize) -> BlockRealize:
        """`realize` with an iteration variable bound to each loop its offsets use (as
        `_loop_offset` wrote them), and the offsets in those variables."""
        loops = {lp.loop_var: lp for lp in self.loops}
        used = [v for v in dict.fromkeys(v for o in self.current for v in free_vars(o))
                if v in loops]
        if not used:
            return realize
        mapping = {}
        for var in used:
            bound = next((iv.var for iv, value in zip(realize.block.iter_vars,
                                                       realize.iter_values)
                          if value is var and iv.kind == "spatial"), None)
            mapping[var] = bound if bound is not None else \
                Var(fresh(f"v_{var.name}", self.taken), var.dtype)
        self.current = [substitute(o, mapping) for o in self.current]
        added = [(IterVar(mapping[v], Range(loops[v].min, loops[v].extent)), v) for v in used
                 if mapping[v] not in {iv.var for iv in realize.block.iter_vars}]
        if not added:
            return realize
        block = dataclasses.replace(realize.block,
                                    iter_vars=realize.block.iter_vars + tuple(iv for iv, _ in
                                                                               added))
        return dataclasses.replace(realize, block=block, iter_values=realize.iter_values +
                                   tuple(v for _, v in added))

    def visit_BufferRegion(self, region: BufferRegion) -> BufferRegion:
        if region.buffer != self.buffer or self.current is None:
            return region
        mins = self.rebase([r.min for r in region.region])
        return BufferRegion(region.buffer, tuple(Range(m, r.extent)
                                                 for m, r in zip(mins, region.region)))

    def visit_BufferLoad(self, load: BufferLoad) -> Expr:
        load = self.visit_children(load)
        if load.buffer != self.buffer or self.current is None:
            return load
        return BufferLoad(load.buffer, self.rebase(load.indices))

    def visit_BufferStore(self, store: BufferStore) -> BufferStore:
        store = self.visit_children(store)
        if store.buffer != self.buffer or self.current is None:
            return store
        return BufferStore(store.buffer, store.value, self.rebase(store.indices))


def compact_buffers(func: PrimFunc, only: set[str] | None = None) -> PrimFunc:
    """`func` with each allocated buffer as small as one execution of its allocation needs.

    Takes block IR. For a buffer allocated by a block or an `Allocate` under loops L, each
    dimension with a box of constant extent e smaller than the dimension becomes e long, and
    every access `X[.., i, ..]` (and every region) becomes `X[.., i - m, ..]`, where m, the
    smallest index touched in the current iteration of L, is written in the accessing block's
    iteration variables. Dimensions, or buffers, where that is not possible (a non-affine
    access, an offset the block's variables do not determine) keep their size; parameters
    are unchanged. `only`: the names of the buffers to compact (all when None; a schedule
    step's check of storage_align asks for the aligned ones).

    Later passes may rely on: every access stays within the (new) shape; allocations do not
    move; blocks keep using only their own iteration variables (a block rebased by the loops
    around the allocation gets new iteration variables bound to them: compact_offsets.py).
    """
    allocations = [(buffer, loops) for buffer, loops in _allocations(func)
                   if only is None or buffer.name in only]
    if not allocations:
        return func
    model = build_model(func)
    body = func.body
    addressed = addressed_storages(func.body)    # an opaque call's callee assumes the layout
    # a load in a loop bound, condition, let, predicate or binding is no access of the model
    # (accesses.unseen_loads): the box would leave it out and no rebase would reach it (audit
    # helper-57: `range(L[5])` read past a compacted 4-element L)
    unseen = unseen_loads(func.body)
    taken = {v.name for v in collect(func, Var)} | {b.name for b in func.buffers}
    for buffer, loops in allocations:
        if buffer.storage_name in addressed or buffer.storage_name in unseen:
            continue
        found = _compaction(model, buffer, loops)
        if found is None:
            continue
        new_buffer, offsets = found
        body = _Rebase(buffer, offsets, loops, taken).visit(body)
        body = _ReplaceBuffer(buffer, new_buffer).visit(body)
    if body is func.body:
        return func
    return dataclasses.replace(func, body=body)

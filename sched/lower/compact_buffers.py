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
from sched.ir.paths import path_to
from sched.lower.isl_affine import Context
from sched.lower.simplify_indices import simplify_index
from sched.polyhedral import build_model, names
from sched.polyhedral.accesses import unseen_loads
from sched.polyhedral.isl_expr import NotAffine, isl_name, pw_aff_to_expr
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
              if not (relax_threads and _thread_loop(lp))]
    project = read_map(f"[{', '.join(model.params)}] -> {{ [{', '.join(times)}] -> "
                      f"[{', '.join(picked)}] }}")
    return statement.schedule.apply_range(project)


def _thread_loop(loop) -> bool:
    """Whether a loop of the model (statements.Loop) is bound to threadIdx."""
    return loop.kind == "thread_binding" and (loop.thread_tag or "").startswith("threadIdx")


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
    if deltas.is_empty() or not deltas.is_bounded():
        return None
    values: list[int] = []
    deltas.dim_max(0).foreach_piece(
        lambda _, aff: values.append(aff.get_constant_val().to_python()))
    return max(values) + 1


def _offsets(model, buffer: Buffer, outer: list, touched: isl.Map, dim: int,
             extent: int, loops: list[For]) -> dict[str, Expr] | None:
    """The smallest index of `dim` touched in the current iteration of the outer loops, as an
    expression of each accessing block's iteration variables (by block name), or None. An
    expression may use the variables of `loops` (`_loop_offset`): `_Rebase` binds them."""
    ndim = touched.dim(isl.dim_type.out)
    one = touched.project_out(isl.dim_type.out, dim + 1, ndim - dim - 1) \
        .project_out(isl.dim_type.out, 0, dim)
    lowest = isl.Map.from_pw_multi_aff(one.lexmin_pw_multi_aff())
    found: dict[str, Expr] = {}
    for statement, to_loops in sorted(outer, key=lambda item: item[0].is_init):
        offset = to_loops.apply_range(lowest)           # instance -> the box's offset
        if not offset.is_single_valued():
            # an instance run in several iterations (a producer recomputed in each tile of
            # an overlapping stencil): the offset is the loops', given to the block as
            # iteration variables bound to them (`_loop_offset`)
            by_loops = _loop_offset(model, statement, lowest, loops,
                                    buffer.scope == "shared")
            if by_loops is None:
                return None
            found.setdefault(statement.block.name, by_loops)
            continue
        n_params, n_iters = offset.dim(isl.dim_type.param), offset.dim(isl.dim_type.in_)
        context = statement.domain.move_dims(isl.dim_type.param, n_params,
                                             isl.dim_type.set, 0, n_iters).params()
        variables = {isl_name(iv.var): iv.var for iv in statement.block.iter_vars}
        variables |= {isl_name(v): v for v in model.func.symbolic_vars}
        variables |= {isl_name(p): p for p in model.func.params if isinstance(p, Var)}
        aligned = _aligned_offset(statement, buffer, dim, extent, offset)
        if aligned is not None:
            smallest = aligned.move_dims(isl.dim_type.param, n_params, isl.dim_type.in_, 0,
                                         n_iters).project_domain_on_params()
        else:
            values = offset.move_dims(isl.dim_type.param, n_params, isl.dim_type.in_, 0,
                                      n_iters)
            smallest = values.range().dim_min(0)
        try:
            expr = pw_aff_to_expr(smallest, context, variables)
        except (NotAffine, KeyError, isl.Error):
            return None
        found.setdefault(statement.block.name, expr)   # the body's, valid for the init too
    return found


def _loop_offset(model, statement, lowest: isl.Map, loops: list[For],
                 relax_threads: bool) -> Expr | None:
    """The box's offset `lowest` (values of the outer loops -> the smallest index) as an
    expression of those loops' variables, where the block of `statement` may be given
    iteration variables bound to them: it sits under them with no other block in between,
    and their bounds use no other loop (the new variables' domains). TVM rebases such a
    buffer by the loops too (its compaction runs where blocks are opaque)."""
    picked = [lp for lp in statement.loops[:len(loops)]
              if not (relax_threads and _thread_loop(lp))]
    by_var = {lp.loop_var: lp for lp in loops}
    used = [by_var.get(lp.var) for lp in picked]
    if None in used or not _directly_under(model.func, statement.block, loops):
        return None
    inner = {lp.loop_var for lp in loops}
    if any(set(free_vars(lp.min)) & inner or set(free_vars(lp.extent)) & inner
           for lp in used):
        return None
    pw_multi = lowest.lexmin_pw_multi_aff()
    if pw_multi.dim(isl.dim_type.in_) != len(used):
        return None
    low = pw_multi.get_pw_aff(0)
    variables = {isl_name(v): v for v in model.func.symbolic_vars}
    variables |= {isl_name(p): p for p in model.func.params if isinstance(p, Var)}
    for k, lp in enumerate(used):
        low = low.set_dim_id(isl.dim_type.in_, k,
                             isl.Id(isl_name(lp.loop_var), context=low.get_ctx()))
        variables[isl_name(lp.loop_var)] = lp.loop_var
    low = low.move_dims(isl.dim_type.param, low.dim(isl.dim_type.param), isl.dim_type.in_,
                        0, len(used))
    try:
        return pw_aff_to_expr(low, low.domain(), variables)
    except (NotAffine, KeyError, isl.Error):
        return None


def _directly_under(func: PrimFunc, block: Block, loops: list[For]) -> bool:
    """Whether `block` is under `loops` with no other block between them and it."""
    realize = next(r for r in collect(func.body, BlockRealize) if r.block is block)
    path = path_to(func.body, realize) or []
    first = next((k for k, node in enumerate(path) if node is loops[0]), None) \
        if loops else 0
    return first is not None and not any(isinstance(node, BlockRealize)
                                         for node in path[first:])


def _aligned_offset(statement, buffer: Buffer, dim: int, extent: int,
                    offset: isl.Map) -> isl.PwAff | None:
    """`i - i % extent` (a function of the statement's instance), where `i` is the
    statement's own smallest index of `dim` in each of its instances, when isl proves it
    equal to `offset` (instance -> the box's offset) on every instance of the statement,
    else None.

    A split's tile starts at a multiple of its extent, and this form says so. Where the loops
    around the allocation are fused, isl's own expression of the offset as a function of the
    instance is a select over many pieces: 2,000 characters of C per access in a conv2d
    tile's innermost loop (the autoscheduler's candidates of that kind ran 20-33 ms with it,
    1.2-2.5 ms with this offset), and computing it (a parametric minimum) took seconds per
    statement where proving this form equal to the offset's graph takes milliseconds."""
    access = statement.accesses_of(buffer.name)
    if access is None:
        return None
    try:
        index = _one_index(statement, buffer, dim)
        if index is None:
            ndim = access.dim(isl.dim_type.out)
            one = access.project_out(isl.dim_type.out, dim + 1, ndim - dim - 1) \
                .project_out(isl.dim_type.out, 0, dim)
            index = one.lexmin_pw_multi_aff().get_pw_aff(0)
        candidate = index.sub(index.mod_val(isl.Val.int_from_si(index.get_ctx(), extent)))
        if (statement.domain.is_subset(offset.domain())
                and offset.is_subset(isl.Map.from_pw_aff(candidate))):
            return candidate
    except isl.Error:
        pass
    return None


def _one_index(statement, buffer: Buffer, dim: int) -> isl.PwAff | None:
    """The index of `dim` as a function of the statement's instance, where every access of
    the statement to `buffer` is one element per instance at the same affine index of `dim`
    (a copy into a cache, or an update): written from that index, with no question to isl.
    The lexmin of the access took 32 s for a cooperative fetch whose instances' domain keeps
    divisions as existentials; `_aligned_offset` checks the candidate it makes either way."""
    accesses = [view.access for view in statement.accesses if view.buffer.name == buffer.name]
    texts = {access.index_texts[dim] for access in accesses}
    if len(texts) != 1 or None in texts or any(access.bound_loops for access in accesses):
        return None
    (text,) = texts
    return isl.PwAff(f"{statement.param_text} {{ {statement.instance()} -> [({text})] }}")


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
        found = _offsets(model, buffer, outer, touched, dim, extent, loops)
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
    move; blocks keep using only their own iteration variables.
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

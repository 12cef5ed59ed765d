"""reindex: a copy of a buffer laid out by the iteration variables of the block that accesses it.

    sch.reindex(block, ("read", 0))     # A[vk, vi] read through A_reindex[vi, vk]

A block that reads `A[f(v)]` reads `A_reindex[u]` instead, `u` the iteration variables that
`f` uses (in the block's order), filled by a block `A_reindex` before the loop nest that holds
it: `A_reindex[u] = A[f(u)]` over the box of `u`. A block that writes `A[f(v)]` writes (and reads
back) `A_reindex[u]`, and `A_reindex` copies the box back after the nest.

What keeps it sound: the block runs every instance of its domain's box (no predicate, bindings
that cover it, polyhedral/ checks), its one access pattern of the buffer is not under a
condition, so the copy touches exactly the elements the block touched; nothing else in the nest
writes (for a read) or accesses (for a write) the buffer; for a write, `f` is injective on the
box (isl checks), so copying back writes each element once, with the value the block left there.
"""

from __future__ import annotations

import dataclasses

import islpy as isl

from sched.errors import ScheduleError
from sched.ir.builders import binary, logical_and
from sched.ir.functor import IRMutator, collect, free_vars, substitute
from sched.ir.names import fresh
from sched.ir.nodes import (
    TRUE,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    IntImm,
    IterVar,
    PrimFunc,
    Select,
    Var,
    const,
)
from sched.ir.regions import infer_block_regions
from sched.polyhedral import build_model
from sched.polyhedral.isl_expr import constraint_condition, isl_name, to_isl
from sched.polyhedral.isl_text import read_map, read_set
from sched.polyhedral.names import local
from sched.schedule.base import BlockRV, ScheduleBase
from sched.schedule.layout import _buffer
from sched.schedule.scope import (
    add_allocation,
    block_names,
    blocks_accessing,
    scope_of,
    splice,
    taken_names,
)
from sched.schedule.state import find_block, refuse_other_views, replace_in

PRIMITIVE = "reindex"


def reindex(func: PrimFunc, block_name: str, buffer_ref, name: str | None = None,
            storage_scope: str | None = None) -> tuple[PrimFunc, str]:
    """`func` with block `block_name` accessing `buffer_ref` through a reindexed copy (see
    Schedule.reindex), named `name` (default `<buffer>_reindex`) and stored in
    `storage_scope` (default the buffer's). Returns the function and the copy block's name
    (the copy buffer's too)."""
    realize = find_block(func, block_name, PRIMITIVE)
    block = realize.block
    buffer = _buffer(block, buffer_ref, PRIMITIVE)
    write = any(r.buffer == buffer for r in block.writes)
    refuse_other_views(func, buffer, PRIMITIVE, "copying it")
    indices = _one_pattern(block, buffer, write)
    used = [iv for iv in block.iter_vars if any(iv.var in free_vars(i) for i in indices)]
    if any(not (isinstance(iv.dom.min, IntImm) and iv.dom.min.value == 0) for iv in used):
        raise ScheduleError(PRIMITIVE, f"block {block_name!r}: the iteration variables that "
                            f"index {buffer.name!r} must start at 0")
    runs = _check_every_instance(func, realize, used)
    if write:
        _check_injective(buffer, indices, used)
    scope = scope_of(func, realize, PRIMITIVE)
    _check_inside_scope(func, realize, used, scope)
    others = [b.name for b in blocks_accessing(scope.top, buffer, "write" if not write else
                                               "read") if b.name != block_name]
    others += [b.name for b in blocks_accessing(scope.top, buffer, "write")
               if write and b.name != block_name]
    if others:
        raise ScheduleError(PRIMITIVE, f"block(s) {', '.join(dict.fromkeys(others))} access "
                            f"{buffer.name!r} in the loop nest of block {block_name!r}, where "
                            f"the copy would not see them; reindex before placing them there")
    # the copy, outside the nest, computes the indices too: a buffer they read that a block
    # of the nest writes would be read before (or after) it is written (audit helper-79: a
    # gather's index copy computed in the nest, read uninitialized: a segfault)
    index_buffers = {load.buffer for i in indices for load in collect(i, BufferLoad)}
    written_there = [(b.name, load_buffer.name) for load_buffer in index_buffers
                     for b in blocks_accessing(scope.top, load_buffer, "write")]
    if written_there:
        writer, index_buffer = written_there[0]
        raise ScheduleError(PRIMITIVE, f"the indices of {buffer.name!r} in block "
                            f"{block_name!r} read {index_buffer!r}, which block {writer!r} "
                            f"writes in the same loop nest: the copy, outside the nest, would "
                            f"read it before it is written; reindex before placing {writer!r} "
                            f"there")
    taken = taken_names(func)
    taken |= set(block_names(func))
    # a symbolic extent (`m - n`) may be negative where the block runs nothing: the copy's
    # dimension is then 0, not a negative allocation (audit helper-117)
    shape = tuple(iv.dom.extent if isinstance(iv.dom.extent, IntImm | Var) or runs == TRUE
                  else binary("max", iv.dom.extent, const(0, iv.dom.extent.dtype))
                  for iv in used)
    copy = Buffer(fresh(name or f"{buffer.name}_reindex", taken), shape, buffer.dtype,
                  storage_scope or buffer.scope)
    name = copy.name
    nest = _copy_nest(name, buffer, copy, indices, used, write, taken, runs)
    new_block = _Redirect(buffer, copy, tuple(iv.var for iv in used)).visit(block)
    reads, writes = infer_block_regions(new_block.body, new_block.init, new_block.iter_vars,
                                        new_block.alloc_buffers)
    new_block = dataclasses.replace(new_block, reads=reads, writes=writes)
    stages = [replace_in(scope.top, realize, dataclasses.replace(realize, block=new_block))]
    stages = stages + [nest] if write else [nest] + stages
    return splice(add_allocation(func, scope.realize, copy), scope.top, stages), name


def _one_pattern(block: Block, buffer: Buffer, write: bool) -> tuple:
    """The indices of the block's accesses of `buffer` (one pattern, in no condition)."""
    nodes = collect(block.body, BufferLoad) + collect(block.body, BufferStore)
    if block.init is not None:
        nodes += collect(block.init, BufferLoad) + collect(block.init, BufferStore)
    patterns = {n.indices for n in nodes if n.buffer == buffer}
    guarded = [load for select in collect(block.body, Select)
               for load in collect(select, BufferLoad) if load.buffer == buffer]
    if len(patterns) != 1 or guarded or not isinstance(block.body, BufferStore):
        condition = " (some under a condition)" if guarded else ""
        raise ScheduleError(PRIMITIVE, f"block {block.name!r} accesses {buffer.name!r} at "
                            f"{len(patterns)} index pattern(s){condition} or has more than one "
                            f"statement: reindex needs one store with one access pattern, run "
                            f"in every instance")
    if write and block.body.buffer != buffer:
        raise ScheduleError(PRIMITIVE, f"block {block.name!r} writes {buffer.name!r} in its "
                            f"init alone")
    reads_first = any(n.buffer == buffer for n in collect(block.body, BufferLoad))
    initialized = block.init is not None and any(
        s.buffer == buffer for s in collect(block.init, BufferStore))
    if write and reads_first and not initialized:
        raise ScheduleError(PRIMITIVE, f"block {block.name!r} reads the values of "
                            f"{buffer.name!r} that were there before it, which a new copy "
                            f"would not hold: use cache_write, which fills its cache first")
    return next(iter(patterns))


def _check_every_instance(func: PrimFunc, realize: BlockRealize, used: list[IterVar]) -> Expr:
    """Refuse a block that does not run every point of its domain's box; returns the condition
    on the symbolic dims under which it runs every point of the box of the variables `used`,
    over which the copy runs. A reduction whose reduce range is empty at n = 1 runs no
    instance there, and its copy must not run either (audit helper-111: uninitialized memory
    copied into every row of C)."""
    block = realize.block
    statements = [s for s in build_model(func).statements_of_block(block.name)
                  if not s.is_init]
    if len(statements) != 1 or not statements[0].exact:
        raise ScheduleError(PRIMITIVE, f"the instances of block {block.name!r} are not known "
                            f"exactly")
    domain = statements[0].domain
    names = domain.get_var_names(isl.dim_type.set)
    params = domain.get_space().get_var_names(isl.dim_type.param)
    bounds = {}
    for name, iv in zip(names, block.iter_vars):
        low, extent = to_isl(iv.dom.min), to_isl(iv.dom.extent)
        if low is None or extent is None:
            raise ScheduleError(PRIMITIVE, f"the domain of {iv.var.name!r} is not affine")
        bounds[iv] = f"{low} <= {name} < {low} + {extent}"

    def box_of(ivs) -> isl.Set:
        condition = " and ".join(bounds[iv] for iv in ivs) or "true"
        return read_set(f"[{', '.join(params)}] -> {{ {domain.get_tuple_name()}"
                        f"[{', '.join(names)}] : {condition} }}")

    if not domain.is_equal(box_of(block.iter_vars)):
        raise ScheduleError(PRIMITIVE, f"block {block.name!r} runs part of its domain "
                            f"({domain}): the copy would touch elements it does not")
    box = box_of(used)
    unused = [i for i, iv in enumerate(block.iter_vars) if iv not in used]
    for position in reversed(unused):
        domain, box = (s.project_out(isl.dim_type.set, position, 1) for s in (domain, box))
    sizes = domain.params().coalesce()       # where the block runs at all
    pieces = sizes.get_basic_sets()
    if not domain.is_equal(box.intersect_params(sizes)) or len(pieces) != 1 or \
            pieces[0].dim(isl.dim_type.div):
        raise ScheduleError(PRIMITIVE, f"block {block.name!r} runs no instance for some "
                            f"elements of {', '.join(iv.var.name for iv in used)} (where "
                            f"{domain.params()}), but the copy would copy every element; "
                            f"reindex a block whose other ranges are never empty")
    variables = {isl_name(v): v for v in func.symbolic_vars}
    variables |= {isl_name(p): p for p in func.params if isinstance(p, Var)}
    return logical_and(*[constraint_condition(c, variables)
                         for c in pieces[0].get_constraints()])


def _check_inside_scope(func: PrimFunc, realize: BlockRealize, used: list[IterVar],
                        scope) -> None:
    """Refuse a block whose variables `used` take, in one instance of the block that holds
    it (where the copy goes), less than their whole box: bound to that block's variables or
    to loops outside it (`vx = vo`), or under loops or a predicate that depend on them. The
    copy, one nest over the whole box, would copy elements this instance does not touch."""
    inner = {lp.loop_var for lp in scope.loops}
    fixed = set(func.symbolic_vars) | {p for p in func.params if isinstance(p, Var)}
    values = dict(zip(realize.block.iter_vars, realize.iter_values, strict=True))
    exprs = [values[iv] for iv in used] + [realize.predicate] + \
        [e for lp in scope.loops for e in (lp.min, lp.extent)]
    outside = sorted({v.name for e in exprs for v in free_vars(e)} -
                     {v.name for v in inner | fixed})
    if outside:
        raise ScheduleError(PRIMITIVE, f"block {realize.block.name!r} depends on "
                            f"{', '.join(repr(n) for n in outside)}, from outside the block "
                            f"{scope.realize.block.name!r} that holds it: in one instance of "
                            f"that block it runs part of its domain, and the copy placed there "
                            f"would copy the rest too; reindex a block of the root scope "
                            f"(blockize or compute_at later)")


def _check_injective(buffer: Buffer, indices: tuple, used: list[IterVar]) -> None:
    """Refuse a write whose indices send two instances of the box of `used` to one element.
    The other variables of the indices and extents (symbolic dims) are isl parameters; the
    output dims have names of sched's own (`local`), which no variable takes."""
    names = [isl_name(iv.var) for iv in used]
    texts = [to_isl(i) for i in indices]
    if any(t is None for t in texts) or any(to_isl(iv.dom.extent) is None for iv in used):
        raise ScheduleError(PRIMITIVE, f"the indices of {buffer.name!r} are not affine")
    domain = " and ".join(f"0 <= {n} < {to_isl(iv.dom.extent)}" for n, iv in zip(names, used))
    outputs = [local("o", k) for k in range(len(texts))]
    params = sorted({isl_name(v) for e in (*indices, *(iv.dom.extent for iv in used))
                     for v in free_vars(e)} - set(names))
    relation = read_map(f"[{', '.join(params)}] -> {{ [{', '.join(names)}] -> "
                       f"[{', '.join(outputs)}] : "
                       f"{domain or 'true'} and "
                       f"{' and '.join(f'{o} = {t}' for o, t in zip(outputs, texts)) or 'true'}"
                       f" }}")
    if not relation.is_injective():
        raise ScheduleError(PRIMITIVE, f"two instances of the block write one element of "
                            f"{buffer.name!r}: copied back, the last write could change")


def _copy_nest(name: str, buffer: Buffer, copy: Buffer, indices: tuple, used: list[IterVar],
               write: bool, taken: set[str], runs: Expr):
    loops = [Var(fresh(f"ax{d}", taken), iv.var.dtype) for d, iv in enumerate(used)]
    new = {iv.var: Var(fresh(f"v{d}", taken), iv.var.dtype) for d, iv in enumerate(used)}
    iter_vars = tuple(IterVar(new[iv.var], iv.dom) for iv in used)
    at = tuple(substitute(i, new) for i in indices)
    own = tuple(new[iv.var] for iv in used)
    body = BufferStore(buffer, copy[own], at) if write else BufferStore(copy, buffer[at], own)
    reads, writes = infer_block_regions(body, None, iter_vars)
    stmt = BlockRealize(tuple(loops), runs, Block(name, iter_vars, reads, writes, body))
    for loop, iv in reversed(list(zip(loops, used))):
        stmt = For(loop, const(0, loop.dtype), iv.dom.extent, "serial", stmt)
    return stmt


class _Redirect(IRMutator):
    """Accesses of `old` (at its one pattern) as accesses of `new` at the used variables."""

    def __init__(self, old: Buffer, new: Buffer, at: tuple) -> None:
        self.old, self.new, self.at = old, new, at

    def visit_BufferLoad(self, node: BufferLoad):
        node = self.visit_children(node)
        return BufferLoad(self.new, self.at) if node.buffer == self.old else node

    def visit_BufferStore(self, node: BufferStore):
        node = self.visit_children(node)
        return BufferStore(self.new, node.value, self.at) if node.buffer == self.old else node


class ReindexPrimitives(ScheduleBase):
    """reindex."""

    def reindex(self, block: BlockRV, buffer) -> BlockRV:
        """Access a buffer through a copy laid out by the block's iteration variables: the
        block reads or writes `<buffer>_reindex[u]`, `u` the variables its indices use, and a
        copy block of that name fills it before the block's loop nest (read) or copies it back
        after (write).

        Requires: the block is one store that runs in every point of its domain's box, with
        one access pattern of the buffer, not under a condition; the variables it uses start
        at 0; nothing else in the nest accesses the buffer in a way the copy would miss; for a
        write, the indices are injective on the box.

        Arguments: `block` a block handle; `buffer` ("read" | "write", index), a name or a
        Buffer. Returns: a handle to the copy block. Handles stay valid.
        Also known as: `reindex` in TVM.

        >>> import sched
        >>> from sched.script import T
        >>> @T.prim_func
        ... def transpose_add(A: T.Buffer((4, 8), "float32"), B: T.Buffer((8, 4), "float32")):
        ...     for i, j in T.grid(8, 4):
        ...         with T.block("B"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             B[vi, vj] = A[vj, vi] + T.float32(1)
        >>> sch = sched.Schedule(transpose_add)
        >>> copy = sch.reindex(sch.get_block("B"), ("read", 0))
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def transpose_add(A: T.Buffer((4, 8), "float32"), B: T.Buffer((8, 4), "float32")):
            with T.block("root"):
                A_reindex = T.alloc_buffer((8, 4), "float32")
                for ax0, ax1 in T.grid(8, 4):
                    with T.block("A_reindex"):
                        v0, v1 = T.axis.remap("SS", [ax0, ax1])
                        T.reads(A[v1, v0])
                        T.writes(A_reindex[v0, v1])
                        A_reindex[v0, v1] = A[v1, v0]
                for i, j in T.grid(8, 4):
                    with T.block("B"):
                        vi, vj = T.axis.remap("SS", [i, j])
                        T.reads(A_reindex[vi, vj])
                        T.writes(B[vi, vj])
                        B[vi, vj] = A_reindex[vi, vj] + T.float32(1.0)
        """
        name = self._block(block, PRIMITIVE)
        new_func, copy = reindex(self._func, name, buffer)
        handle = BlockRV(copy, self._new_rv("b"))
        self._record(PRIMITIVE, new_func, (block, buffer), outputs=(handle,))
        return handle

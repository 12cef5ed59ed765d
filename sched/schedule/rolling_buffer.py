"""rolling_buffer: an intermediate buffer that a producer fills tile by tile under a loop it
shares with its consumers (after compute_at) folded to a circular window along one axis; a
predicate keeps the producer from recomputing the rows the previous tile already holds.

    B = T.alloc_buffer((10, 10))               B = T.alloc_buffer((6, 10))
    for i0 in range(2):                        for i0 in range(2):
        for ax0 in range(6):              ->       for ax0 in range(6):
            B[i0 * 4 + ax0, ...] = ...                 if i0 < 1 or 2 <= ax0:
        for ax0 in range(4):                               B[(i0 * 4 + ax0) % 6, ...] = ...
            C[...] = B[i0 * 4 + ax0 + r, ...]          for ax0 in range(4):
                                                       C[...] = B[(i0 * 4 + ax0 + r) % 6, ...]

TVM's rule picks the axis: the region of the buffer the producer writes in one iteration of
the innermost loop around it and all its consumers (the LCA), per dimension `stride * v + c`
over `extent` rows for some loop `v` around it; a dimension whose extent exceeds its stride
overlaps the next tile by `extent - stride` rows. The rolling axis is the dimension of the
outermost such loop; the buffer keeps `extent` rows there, indexed modulo `extent`, and every
dimension that overlaps gets TVM's predicate (`v < 1 or overlap <= offset in the tile`).

Legality is proven, not trusted (polyhedral/instance_flows.py). Write F for the function
before, F' after. Instances are named by block iteration variables, so both have the same
instances; F' drops some runs of the producer (the predicate) and stores elements in slots.
F' computes what F does if
  (1) every run of each producer instance computes the same values in F (`runs_agree`: each
      run reads each element from one instance, whatever the run, for the producer and the
      statements with several runs that feed it), and
  (2) every read of the buffer in F', at run t of element e (slot e mod extent), reads the
      value written by the same instance as the read of e at run t in F, or reads no write
      in both (the sources of every read, folded, compared by isl).
Then by induction on time every run of F' stores what the same run of F stores: a read of
another buffer has the same source run (the producer writes only this buffer, and only it
does), a read of this one a run of the same instance, which by (1) wrote the same value.
Where (2) fails, some slot was overwritten between a write and a read (a consumer reads
further back than the window), or a skipped run was the only one before a read; the refusal
names the read and the two writes.
"""

from __future__ import annotations

import dataclasses

import islpy as isl

from sched.errors import ScheduleError
from sched.ir.functor import IRMutator, collect, free_vars, substitute
from sched.ir.nodes import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    IntImm,
    PrimFunc,
    Range,
    binary,
    const,
    logical_and,
    logical_or,
)
from sched.ir.simplify import simplify
from sched.polyhedral import buffer_region
from sched.polyhedral.isl_expr import isl_name, pw_aff_to_expr, to_isl
from sched.polyhedral.private_buffers import allocations
from sched.schedule.base import BlockRV, ScheduleBase
from sched.schedule.memory import _check_index
from sched.schedule.rolling_buffer_proof import PRIMITIVE, check_fold_keeps_values
from sched.schedule.scope import blocks_accessing
from sched.schedule.state import and_predicate, enclosing_loops, find_block, replace


@dataclasses.dataclass(frozen=True)
class _Axis:
    """A dimension of the written region that slides with loop `loop`: rows
    `stride * loop + c` to `stride * loop + c + extent`."""

    loop: For
    stride: int
    extent: int
    start: object                  # the region's min, an Expr of the loop

    @property
    def overlap(self) -> int:
        return self.extent - self.stride


def rolling_buffer(func: PrimFunc, block_name: str, write_buffer_index) -> PrimFunc:
    """`func` with `block.writes[write_buffer_index]` folded (see Schedule.rolling_buffer)."""
    realize = find_block(func, block_name, PRIMITIVE)
    block = realize.block
    buffer = _check_index(write_buffer_index, block.writes, block, PRIMITIVE,
                          "write_buffer_index", "writes")
    _check_intermediate(func, block, buffer)
    store = _one_store(block, buffer)
    loops = enclosing_loops(func, realize)
    lca = _common_loop(func, realize, buffer, loops)
    outer = loops[:loops.index(lca) + 1]
    region = buffer_region(func, block_name, buffer.name, loop=lca.loop_var.name,
                           access="write", including_loop=True)
    axes = [_axis(r, outer) for r in region]
    rolling = next((d for lp in outer for d, a in enumerate(axes)
                    if a is not None and a.loop is lp), None)
    if rolling is None:
        shown = ", ".join(f"{r.min.script()}:{(r.min + r.extent).script()}" for r in region)
        changing = any(not isinstance(r.extent, IntImm) for r in region)
        if any((_stride(r, outer) or 0) < 0 for r in region):
            raise ScheduleError(PRIMITIVE, f"block {block_name!r} writes {buffer.name}[{shown}] "
                                f"in one iteration of loop {lca.loop_var.name!r}: its window "
                                f"slides backwards (a negative stride: the tiles run from the "
                                f"end), and a rolling buffer keeps the rows the next window "
                                f"shares, further on: run the tiles in increasing order")
        advice = ("its window changes size between iterations (the T.if_then_else, T.min or "
                  "symbolic size in its extent: a last window cut at the end of the loop or "
                  "of the buffer), and a rolling buffer needs one size: tile the consumer by "
                  "a factor that divides its extent, with every window inside the buffer (a "
                  "constant extent: with a symbolic one the last window may be cut)"
                  if changing else
                  "split the consumer's loops into tiles and compute_at the producer under "
                  "the tile loop first")
        raise ScheduleError(PRIMITIVE, f"block {block_name!r} writes {buffer.name}[{shown}] in "
                            f"one iteration of loop {lca.loop_var.name!r}: no dimension "
                            f"slides with a loop (stride * v + c) and overlaps the next "
                            f"iteration's rows; {advice}")
    window = axes[rolling].extent
    predicate = _skip_overlap(realize, store, axes)
    new_realize = and_predicate(realize, predicate)
    new_func = replace(func, realize, new_realize)
    new_func = _fold(new_func, buffer, rolling, window)
    check_fold_keeps_values(func, new_func, block_name, buffer, rolling, window)
    return new_func


def _check_intermediate(func: PrimFunc, block: Block, buffer: Buffer) -> None:
    """The buffer is allocated in the function (not an output), through one view, written by
    the block alone, and the block writes nothing else (its skipped runs write only it)."""
    if buffer.storage_name not in allocations(func):
        raise ScheduleError(PRIMITIVE, f"{buffer.name!r} is a parameter of the function, an "
                            f"output: rolling_buffer folds an intermediate buffer "
                            f"(T.alloc_buffer); cache_write the block first "
                            f"(sch.cache_write({block.name!r}, 0, \"global\")) and roll the "
                            f"cache")
    views = {b.name for node in (BufferLoad, BufferStore, BufferRegion)
             for b in (n.buffer for n in collect(func.body, node))
             if b.storage_name == buffer.storage_name}
    if views != {buffer.name}:
        raise ScheduleError(PRIMITIVE, f"the storage of {buffer.name!r} is accessed through "
                            f"{', '.join(sorted(views))}; rolling_buffer folds a buffer "
                            f"accessed through one view")
    writers = sorted({b.name for b in blocks_accessing(func.body, buffer, "write")
                      if not _holds_blocks(b)} - {block.name})
    if writers:
        raise ScheduleError(PRIMITIVE, f"block(s) {', '.join(writers)} write {buffer.name!r} "
                            f"too: rolling_buffer needs the producer {block.name!r} to be its "
                            f"only writer (TVM: only read-after-write dependences)")
    others = sorted({r.buffer.name for r in block.writes} - {buffer.name})
    if others:
        raise ScheduleError(PRIMITIVE, f"block {block.name!r} writes {', '.join(others)} "
                            f"besides {buffer.name!r}: the runs the predicate skips would not "
                            f"write them; rolling_buffer takes a block writing one buffer")


def _holds_blocks(block: Block) -> bool:
    """A block whose regions sum up the blocks nested in it (the root, a blockized nest)."""
    return bool(collect(block.body, Block))


def _one_store(block: Block, buffer: Buffer) -> BufferStore:
    stores = [s for s in collect(block.body, BufferStore) if s.buffer == buffer]
    if len(stores) != 1 or _holds_blocks(block):
        raise ScheduleError(PRIMITIVE, f"block {block.name!r} stores to {buffer.name!r} "
                            f"{len(stores)} times; rolling_buffer takes a block with one store "
                            f"to it (and its T.init)")
    return stores[0]


def _common_loop(func: PrimFunc, realize: BlockRealize, buffer: Buffer,
                 loops: list[For]) -> For:
    """The innermost loop around the producer and every block reading the buffer (TVM's LCA,
    which must be a loop)."""
    common = list(loops)
    readers = [r for r in collect(func.body, BlockRealize)
               if r.block.name != realize.block.name and not _holds_blocks(r.block)
               and any(x.buffer.storage_name == buffer.storage_name for x in r.block.reads)]
    for reader in readers:
        around = enclosing_loops(func, reader)
        common = [lp for lp in common if any(lp is x for x in around)]
    if not readers or not common:
        why = "no block reads it" if not readers else \
            f"{', '.join(r.block.name for r in readers)} and {realize.block.name} share no loop"
        raise ScheduleError(PRIMITIVE, f"the lowest common ancestor of the blocks accessing "
                            f"{buffer.name!r} is not a loop ({why}); tile the consumer and "
                            f"sch.compute_at({realize.block.name!r}, <its tile loop>) first")
    return common[-1]


def _axis(region: Range, outer: list[For]) -> _Axis | None:
    """The dimension's sliding loop, stride and extent, when its min is `stride * v + c` for
    one loop `v` of `outer`, a positive stride, and its extent a constant larger than the
    stride."""
    stride = _stride(region, outer)
    if stride is None or stride <= 0:
        return None
    loop = next(lp for lp in outer if lp.loop_var in set(free_vars(region.min)))
    axis = _Axis(loop, stride, region.extent.value, region.min)
    return axis if axis.overlap > 0 else None


def _stride(region: Range, outer: list[For]) -> int | None:
    """The stride of the dimension's window along the one loop of `outer` its min is
    `stride * v + c` of (an integer c), its extent a constant; None otherwise."""
    if not isinstance(region.extent, IntImm):
        return None
    variables = set(free_vars(region.min))
    loop = next((lp for lp in outer if lp.loop_var in variables), None)
    if loop is None or variables != {loop.loop_var}:
        return None
    start = _affine(region.min, [loop.loop_var])
    if start is None or not start.get_constant_val().is_int():
        return None
    return start.get_coefficient_val(isl.dim_type.in_, 0).to_python()


def _affine(expr, variables: list) -> isl.Aff | None:
    """`expr` as one isl affine function of `variables` (no floor division), or None."""
    text = to_isl(expr)
    if text is None:
        return None
    names = ", ".join(isl_name(v) for v in variables)
    pieces = isl.PwAff(f"{{ [{names}] -> [({text})] }}").get_pieces()
    if len(pieces) != 1:
        return None
    aff = pieces[0][1]
    return None if aff.dim(isl.dim_type.div) else aff


def _offset(index, start, variables: list):
    """`index - start` (both in `variables`), simplified by isl where it is affine."""
    text = to_isl(index - start)
    if text is None:
        return simplify(index - start)
    names = ", ".join(isl_name(v) for v in variables)
    pw = isl.PwAff(f"[{names}] -> {{ [({text})] }}")
    context = isl.Set(f"[{names}] -> {{ : }}")
    return pw_aff_to_expr(pw, context, {isl_name(v): v for v in variables})


def _skip_overlap(realize: BlockRealize, store: BufferStore, axes: list[_Axis | None]):
    """TVM's predicate: in every iteration of a sliding loop but its first, the rows the
    previous iteration wrote (the first `overlap` of the tile) are not computed again."""
    binding = dict(zip((iv.var for iv in realize.block.iter_vars), realize.iter_values))
    variables = sorted({v for value in realize.iter_values for v in free_vars(value)},
                       key=lambda v: v.name)
    conditions = []
    for index, axis in zip(store.indices, axes):
        if axis is None:
            continue
        v = axis.loop.loop_var
        offset = _offset(substitute(index, binding), axis.start, variables)
        first = simplify(axis.loop.min + const(1, v.dtype))
        conditions.append(logical_or(v < first, const(axis.overlap, offset.dtype) <= offset))
    return logical_and(*conditions)


def _fold(func: PrimFunc, buffer: Buffer, axis: int, window: int) -> PrimFunc:
    """`func` with `buffer` `window` rows long on `axis`, every index there taken modulo
    `window`, and every declared region of it covering the window on that axis."""
    shape = list(buffer.shape)
    shape[axis] = const(window, buffer.shape[axis].dtype)
    folded = dataclasses.replace(buffer, shape=tuple(shape))

    def wrap(indices):
        return tuple(binary("floormod", i, const(window, i.dtype)) if d == axis else i
                     for d, i in enumerate(indices))

    class Fold(IRMutator):
        def visit_BufferLoad(self, load: BufferLoad):
            mine = load.buffer == buffer
            load = self.visit_children(load)
            return BufferLoad(folded, wrap(load.indices)) if mine else load

        def visit_BufferStore(self, store: BufferStore):
            mine = store.buffer == buffer
            store = self.visit_children(store)
            if mine:
                return dataclasses.replace(store, buffer=folded, indices=wrap(store.indices))
            return store

        def visit_BufferRegion(self, region: BufferRegion):
            if region.buffer != buffer:
                return region
            ranges = list(region.region)
            ranges[axis] = Range(const(0, ranges[axis].min.dtype),
                                 const(window, ranges[axis].extent.dtype))
            return BufferRegion(folded, tuple(ranges))

        def visit_Buffer(self, node: Buffer):
            return folded if node == buffer else node
    return Fold().visit(func)


class RollingBufferPrimitives(ScheduleBase):
    """rolling_buffer."""

    def rolling_buffer(self, block: BlockRV | str, write_buffer_index) -> None:
        """Fold the intermediate buffer `block` writes to a circular window along its
        outermost sliding axis, and skip recomputing the rows the previous tile wrote.

        Requires: the buffer is allocated in the function (T.alloc_buffer), written by
        `block` alone (which writes nothing else, with one store to it), and read by blocks
        that share a loop with it (compute_at it under the consumer's tile loop first); in
        one iteration of that loop the block writes, in some dimension, rows
        `stride * v + c` to `+ extent` for a loop `v` around it, with `extent > stride`
        (the tiles overlap). The axis is that of the outermost such loop (TVM's rule); the
        buffer keeps `extent` rows there. Every read must keep its value: isl proves that
        each read of the folded buffer reads the value the same instance wrote before the
        fold (no slot overwritten before its last read, no skipped run that was the only
        one), and that every run of the block computes the same values (see the module's
        doc). A reduction block needs its T.init for that.

        Arguments: `block` the producer, a handle or name; `write_buffer_index` an index into
        its writes (`T.writes`), the buffer's name or the Buffer.
        Handles: all stay valid; the block gains a `T.where`.
        Also known as: `rolling_buffer` in TVM, which also marks the rolling axis's
        iteration variables opaque (sched's checks are memory-based, the folded slots'
        dependences keep later steps in order) and whose docstring's example reads its
        output before writing it (no T.init), which sched refuses.

        >>> import sched
        >>> from sched.script import T
        >>> @T.prim_func
        ... def pool2(A: T.Buffer((12,), "int8"), C: T.Buffer((8,), "int8")):
        ...     B = T.alloc_buffer((10,), "int8")
        ...     for i0 in range(2):
        ...         for ax0, ax1 in T.grid(6, 3):
        ...             with T.block("B"):
        ...                 vb = T.axis.spatial(10, i0 * 4 + ax0)
        ...                 rb = T.axis.reduce(3, ax1)
        ...                 with T.init():
        ...                     B[vb] = T.int8(-128)
        ...                 B[vb] = T.max(B[vb], A[vb + rb])
        ...         for ax0, ax1 in T.grid(4, 3):
        ...             with T.block("C"):
        ...                 vc = T.axis.spatial(8, i0 * 4 + ax0)
        ...                 rc = T.axis.reduce(3, ax1)
        ...                 with T.init():
        ...                     C[vc] = T.int8(-128)
        ...                 C[vc] = T.max(C[vc], B[vc + rc])
        >>> sch = sched.Schedule(pool2)
        >>> sch.rolling_buffer("B", 0)
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def pool2(A: T.Buffer((12,), "int8"), C: T.Buffer((8,), "int8")):
            with T.block("root"):
                B = T.alloc_buffer((6,), "int8")
                for i0 in range(2):
                    for ax0, ax1 in T.grid(6, 3):
                        with T.block("B"):
                            vb = T.axis.spatial(10, i0 * 4 + ax0)
                            rb = T.axis.reduce(3, ax1)
                            T.where(i0 < 1 or 2 <= ax0)
                            T.reads(A[vb + rb], B[0:6])
                            T.writes(B[0:6])
                            with T.init():
                                B[vb % 6] = T.int8(-128)
                            B[vb % 6] = T.max(B[vb % 6], A[vb + rb])
                    for ax0_1, ax1_1 in T.grid(4, 3):
                        with T.block("C"):
                            vc = T.axis.spatial(8, i0 * 4 + ax0_1)
                            rc = T.axis.reduce(3, ax1_1)
                            T.reads(B[0:6], C[vc])
                            T.writes(C[vc])
                            with T.init():
                                C[vc] = T.int8(-128)
                            C[vc] = T.max(C[vc], B[(vc + rc) % 6])
        """
        name = self._block(block, PRIMITIVE)
        new_func = rolling_buffer(self._func, name, write_buffer_index)
        if not isinstance(write_buffer_index, int):   # a name or a Buffer: the trace's index
            writes = find_block(self._func, name, PRIMITIVE).block.writes
            wanted = getattr(write_buffer_index, "name", write_buffer_index)
            write_buffer_index = next(k for k, r in enumerate(writes)
                                      if r.buffer.name == wanted)
        self._record(PRIMITIVE, new_func, (block, write_buffer_index))

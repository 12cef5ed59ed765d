"""reindex_cache_read / reindex_cache_write (TVM's): a cache in a storage scope whose layout is
an index map of the block's iteration variables.

    sch.reindex_cache_read(block, 0, "shared", lambda vi, vj, vk: (vk, vi))
    # C[vi, vj] += A[vi, vk] * ...  reads A_shared[vk, vi], filled before the loop nest

Built from two checked steps: `reindex` (the copy `<buffer>_<scope>[u]`, `u` the iteration
variables the access uses, filled before the block's loop nest or copied back after it, with
reindex's conditions: one access pattern, every instance of the domain's box, nothing else in
the nest touching the buffer, an injective write) and `transform_layout` of that copy by the
map (padded where the map is not onto its image's box). The map takes every iteration
variable of the block, in order, as TVM's does; its results may use only those of `u`.
"""

from __future__ import annotations

from sched.errors import ScheduleError
from sched.ir.functor import free_vars, substitute
from sched.ir.nodes import PrimFunc, Var
from sched.schedule.base import BlockRV, ScheduleBase
from sched.schedule.layout import IndexMap, transform_layout
from sched.schedule.memory import _check_index, _check_scope
from sched.schedule.reindex import reindex
from sched.schedule.state import find_block


def reindex_cache(func: PrimFunc, block_name: str, buffer_index, storage_scope: str,
                  index_map, write: bool) -> tuple[PrimFunc, str]:
    """`func` with block `block_name`'s read (or write) `buffer_index` through a cache laid
    out by `index_map` (see Schedule.reindex_cache_read). Returns the function and the cache
    block's name."""
    primitive = "reindex_cache_write" if write else "reindex_cache_read"
    block = find_block(func, block_name, primitive).block
    regions, kind = (block.writes, "writes") if write else (block.reads, "reads")
    argument = "write_buffer_index" if write else "read_buffer_index"
    buffer = _check_index(buffer_index, regions, block, primitive, argument, kind)
    scope = _check_scope(storage_scope, primitive, 3)
    iter_vars = [iv.var for iv in block.iter_vars]
    dtype = iter_vars[0].dtype if iter_vars else "int32"
    expected = (f"argument 4, 'index_map': expected a map of the {len(iter_vars)} iteration "
                f"variables of block {block_name!r} ({', '.join(v.name for v in iter_vars)})")
    try:
        mapping = IndexMap.from_callable(index_map, len(iter_vars), dtype, of="block")
    except ScheduleError as error:
        raise ScheduleError(primitive, f"{expected}: {error.reason}") from None
    if len(mapping.params) != len(iter_vars):
        raise ScheduleError(primitive, f"{expected}, got {mapping!r}")
    try:
        new_func, copy = reindex(func, block_name, buffer.name, f"{buffer.name}_{scope}", scope)
    except ScheduleError as error:
        raise ScheduleError(primitive, error.reason) from None
    # the copy is indexed by the variables its access uses, in the block's order
    new_block = find_block(new_func, block_name).block
    (access,) = {r for r in new_block.reads + new_block.writes if r.buffer.name == copy}
    used = [v for v in iter_vars if any(v in free_vars(r.min) for r in access.region)]
    to_copy = {p: Var(p.name, p.dtype) for p, v in zip(mapping.params, iter_vars) if v in used}
    params = tuple(to_copy.values())
    stray = {p.name for r in mapping.results for p in free_vars(r)} - \
        {p.name for p in to_copy}
    if stray:
        raise ScheduleError(primitive, f"argument 4, 'index_map' {mapping!r} uses "
                            f"{', '.join(sorted(stray))}, which do(es) not index {buffer.name!r} "
                            f"in block {block_name!r}: " + (
                                f"the cache has one element per value of "
                                f"{', '.join(v.name for v in used)}" if used else
                                f"the block accesses one element of it, so the cache has "
                                f"one: map to no index (lambda "
                                f"{', '.join(p.name for p in mapping.params)}: ())"))
    layout = IndexMap(params, tuple(substitute(r, to_copy) for r in mapping.results))
    try:
        new_func = transform_layout(new_func, block_name, copy, layout)
    except ScheduleError as error:
        raise ScheduleError(primitive, error.reason) from None
    return new_func, copy


class ReindexCachePrimitives(ScheduleBase):
    """reindex_cache_read, reindex_cache_write."""

    def reindex_cache_read(self, block: BlockRV, read_buffer_index, storage_scope: str,
                           index_map) -> BlockRV:
        """Read a buffer through a cache `<buffer>_<scope>` in `storage_scope`, laid out by
        `index_map` of the block's iteration variables, filled by a block of that name before
        the block's loop nest (it follows the order of the block's variables; reorder it with
        transform_block_layout).

        Requires: reindex's conditions (one access pattern of the buffer, in one store that
        runs every point of its domain's box, nothing else in the nest writing the buffer);
        the map's results use only the variables the access uses.

        Arguments: `block` a block handle; `read_buffer_index` an index into its reads or a
        buffer name; `storage_scope` "global", "shared" or "local"; `index_map` a function
        of all the block's iteration variables (`lambda vi, vj, vk: (vk, vi)`) or an IndexMap.
        Returns: a handle to the cache block. Handles stay valid.
        Also known as: `reindex_cache_read` in TVM.

        >>> import sched
        >>> from sched.script import T
        >>> @T.prim_func
        ... def scale(A: T.Buffer((4, 6), "float32"), B: T.Buffer((4, 6), "float32")):
        ...     for i, j in T.grid(4, 6):
        ...         with T.block("B"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             B[vi, vj] = A[vi, vj] * T.float32(2)
        >>> sch = sched.Schedule(scale)
        >>> cache = sch.reindex_cache_read(sch.get_block("B"), "A", "shared",
        ...                                lambda vi, vj: (vj, vi))
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def scale(A: T.Buffer((4, 6), "float32"), B: T.Buffer((4, 6), "float32")):
            with T.block("root"):
                A_shared = T.alloc_buffer((6, 4), "float32", scope="shared")
                for ax0, ax1 in T.grid(4, 6):
                    with T.block("A_shared"):
                        v0, v1 = T.axis.remap("SS", [ax0, ax1])
                        T.reads(A[v0, v1])
                        T.writes(A_shared[v1, v0])
                        A_shared[v1, v0] = A[v0, v1]
                for i, j in T.grid(4, 6):
                    with T.block("B"):
                        vi, vj = T.axis.remap("SS", [i, j])
                        T.reads(A_shared[vj, vi])
                        T.writes(B[vi, vj])
                        B[vi, vj] = A_shared[vj, vi] * T.float32(2.0)
        """
        return self._reindex_cache(block, read_buffer_index, storage_scope, index_map, False)

    def reindex_cache_write(self, block: BlockRV, write_buffer_index, storage_scope: str,
                            index_map) -> BlockRV:
        """Write a buffer through a cache `<buffer>_<scope>` in `storage_scope`, laid out by
        `index_map` of the block's iteration variables, copied back by a block of that name
        after the block's loop nest.

        Requires: reindex's conditions for a write (one access pattern, every point of the
        domain's box, indices injective on it, nothing else in the nest accessing the buffer,
        an init where the block reads what it writes); the map's results use only the
        variables the access uses.

        Arguments: as reindex_cache_read's, `write_buffer_index` an index into the writes.
        Returns: a handle to the copy-back block. Handles stay valid.
        Also known as: `reindex_cache_write` in TVM.
        """
        return self._reindex_cache(block, write_buffer_index, storage_scope, index_map, True)

    def _reindex_cache(self, block, index, storage_scope, index_map, write: bool) -> BlockRV:
        primitive = "reindex_cache_write" if write else "reindex_cache_read"
        name = self._block(block, primitive)
        new_func, copy = reindex_cache(self._func, name, index, storage_scope, index_map, write)
        handle = BlockRV(copy, self._new_rv("b"))
        iter_vars = find_block(self._func, name).block.iter_vars
        mapping = IndexMap.from_callable(index_map, len(iter_vars),
                                         iter_vars[0].var.dtype if iter_vars else "int32")
        self._record(primitive, new_func, (block, index, storage_scope, mapping),
                     outputs=(handle,))
        return handle

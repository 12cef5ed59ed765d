"""cache_inplace: a block that updates a buffer in place (`A[i] = A[i] * 2`) works on a cache
of it: a read stage copies the buffer into the cache before it, a write stage copies the
cache back after it.

    for i in range(8):                   for i in range(8):
        A[i] = A[i] * 2.0       ->           A_local[i] = A[i]                 # A_local_fill
                                             A_local[i] = A_local[i] * 2.0     # the block
                                             A[i] = A_local[i]                 # A_local

It is cache_write's rewrite (memory.py): for a block that reads elements of the buffer it has
not written itself, cache_write already fills the cache from the buffer first. cache_inplace
calls it, so its rules are cache_write's (the block is the only writer of the buffer, no other
block reads it in the block's loop nest), and returns both stages. Then, as TVM places its
stages, it moves them next to the block: each into the innermost loop around the block where
its move is legal (compute_at for the read stage, reverse_compute_at for the write stage,
each over what the runs under that loop touch). Under a loop bound to threadIdx a shared
cache is one for all the threads, so its stages land outside the thread loops; a stage no
loop takes (the read stage of a scan, which would overwrite what the block wrote) stays
around the loop nest, where cache_write put it, copying what all the runs touch. Every move
is a checked step, so the numbers stay.

Where TVM differs: its two stages share the cache's name (`A_local`); sched's blocks have
their own names, `A_local_fill` (read) and `A_local` (write), as cache_write names them. TVM
copies the block's declared region at that place, in the block's own variables; sched copies
the region found by isl.
"""

from __future__ import annotations

from sched.errors import ScheduleError
from sched.ir.nodes import PrimFunc
from sched.schedule.base import BlockRV, ScheduleBase
from sched.schedule.compute_at import move_under
from sched.schedule.memory import _check_index, _check_scope, cache_write
from sched.schedule.scope import scope_of
from sched.schedule.state import block_names, find_block

PRIMITIVE = "cache_inplace"


def _next_to(func: PrimFunc, block: str, read: str, write: str) -> PrimFunc:
    """`func` with the stages `read` and `write` moved each into the innermost loop around
    `block` where its move is legal (TVM's place is the innermost loop; under a thread loop,
    a shared cache is filled for all the threads, outside it)."""
    loops = scope_of(func, find_block(func, block, PRIMITIVE), PRIMITIVE).loops
    for stage, reverse in ((read, False), (write, True)):
        for loop in reversed(loops):
            try:
                func = move_under(func, stage, loop.loop_var.name, reverse=reverse,
                                  render=False, suggest=False)
                break
            except ScheduleError:
                continue              # no loop: it stays around the nest, copying every box
    return func


def cache_inplace(func: PrimFunc, block_name: str, read_buffer_index, storage_scope
                  ) -> tuple[PrimFunc, str, str]:
    """`func` with block `block_name` working on a cache of `block.reads[read_buffer_index]`
    (see Schedule.cache_inplace); the read stage's and the write stage's names."""
    realize = find_block(func, block_name, PRIMITIVE)
    block = realize.block
    buffer = _check_index(read_buffer_index, block.reads, block, PRIMITIVE,
                          "read_buffer_index", "reads")
    storage_scope = _check_scope(storage_scope, PRIMITIVE, 3)
    written = [k for k, region in enumerate(block.writes)
               if region.buffer.storage_name == buffer.storage_name]
    if not written:
        raise ScheduleError(PRIMITIVE, f"block {block_name!r} reads {buffer.name!r} but does "
                            f"not write it: cache_inplace caches a buffer a block updates in "
                            f"place; for one it only reads, use "
                            f"sch.cache_read({block_name}, {buffer.name!r}, {storage_scope!r})")
    try:
        new_func, write = cache_write(func, block_name, written[0], storage_scope)
    except ScheduleError as error:
        raise ScheduleError(PRIMITIVE, f"{error.reason} (cache_inplace writes through "
                            f"cache_write's cache, under its rules)") from None
    added = set(block_names(new_func)) - set(block_names(func)) - {write}
    if not added:
        raise ScheduleError(PRIMITIVE, f"block {block_name!r} reads only elements of "
                            f"{buffer.name!r} it wrote itself (a reduction with its init), so "
                            f"there is nothing to read into a cache first; use "
                            f"sch.cache_write({block_name}, {buffer.name!r}, {storage_scope!r})")
    (read,) = added
    return _next_to(new_func, block_name, read, write), read, write


class CacheInplacePrimitives(ScheduleBase):
    """cache_inplace."""

    def cache_inplace(self, block: BlockRV | str, read_buffer_index,
                      storage_scope: str) -> list[BlockRV]:
        """Make a block that reads and writes a buffer in place work on a cache of it: a
        read stage before it fills the cache from the buffer, a write stage after it copies
        the cache back.

        Requires: `block` reads and writes the buffer, and is the only block writing it; no
        other block reads it in the block's loop nest (cache_write's rules: cache_inplace is
        its rewrite with the read stage). Each stage goes into the innermost loop around the
        block that takes it (compute_at, reverse_compute_at decide: TVM's place is the
        innermost loop); one that no loop takes stays around the block's loop nest.

        Arguments: `block` a block handle or name; `read_buffer_index` an index into its
        reads (`T.reads`), the buffer's name or the Buffer; `storage_scope` one of "global",
        "shared", "local".
        Returns: [read stage, write stage] (`<buffer>_<scope>_fill`, `<buffer>_<scope>`), as
        TVM's order. Handles: `block` stays valid.
        Also known as: `cache_inplace` in TVM.

        >>> import sched
        >>> from sched.script import T
        >>> @T.prim_func
        ... def double(A: T.Buffer((8,), "float32")):
        ...     for i in range(8):
        ...         with T.block("D"):
        ...             vi = T.axis.spatial(8, i)
        ...             A[vi] = A[vi] * 2.0
        >>> sch = sched.Schedule(double)
        >>> sch.cache_inplace(sch.get_block("D"), 0, "local")
        [BlockRV('A_local_fill'), BlockRV('A_local')]
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def double(A: T.Buffer((8,), "float32")):
            with T.block("root"):
                A_local = T.alloc_buffer((8,), "float32", scope="local")
                for i in range(8):
                    with T.block("A_local_fill"):
                        v0_1 = T.axis.remap("S", [i])
                        T.reads(A[v0_1])
                        T.writes(A_local[v0_1])
                        A_local[v0_1] = A[v0_1]
                    with T.block("D"):
                        vi = T.axis.remap("S", [i])
                        T.reads(A_local[vi])
                        T.writes(A_local[vi])
                        A_local[vi] = A_local[vi] * T.float32(2.0)
                    with T.block("A_local"):
                        v0 = T.axis.remap("S", [i])
                        T.reads(A_local[v0])
                        T.writes(A[v0])
                        A[v0] = A_local[v0]
        """
        name = self._block(block, PRIMITIVE)
        new_func, read, write = cache_inplace(self._func, name, read_buffer_index,
                                              storage_scope)
        if not isinstance(read_buffer_index, int):    # a name or a Buffer: the trace's index
            reads = find_block(self._func, name, PRIMITIVE).block.reads
            wanted = getattr(read_buffer_index, "name", read_buffer_index)
            read_buffer_index = next(k for k, r in enumerate(reads) if r.buffer.name == wanted)
        handles = [BlockRV(read, self._new_rv("b")), BlockRV(write, self._new_rv("b"))]
        self._record(PRIMITIVE, new_func, (block, read_buffer_index, storage_scope),
                     outputs=tuple(handles))
        return handles

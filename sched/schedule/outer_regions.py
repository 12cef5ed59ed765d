"""The regions of a block that holds blocks (blockize's `<block>_o`, a TensorIR script's outer
block), kept naming the buffers the blocks in it access after a step changes those.

compute_inline inside a blockized block removes the nested blocks' reads of the inlined
buffer and adds its producer's; cache_read and cache_write swap a buffer for its cache. The
outer block kept declaring the old buffers (audit helper-133): its printed script read a
buffer nothing wrote, and cache_read of the outer block's read 0 then copied that buffer
instead of the one its blocks read. After every step (Schedule._record) each such block
keeps its declared regions of the buffers its blocks still access, drops the others and
declares the whole of each buffer they newly access (an over-approximation, as a
block's regions may be):

    with T.block("c_o"):                          with T.block("c_o"):
        T.reads(B[v0 * 16:v0 * 16 + 16, 0:64])        T.reads(A[0:64, 0:64])
        ...                                  ->       ...
            C[vi, vj] = A[vi, vj] * 2 + 1                 C[vi, vj] = A[vi, vj] * 2 + 1

Buffers allocated inside the block are not its regions. A block with accesses of its own
(outside the blocks in it) or an init is left as it is. The analyses read the nested
blocks' own accesses, so nothing they prove changes. A declared region of a buffer the
blocks still access is kept as it is, even where they now access more of it.
"""

from __future__ import annotations

import dataclasses

from sched.ir.functor import IRMutator, IRVisitor, collect
from sched.ir.nodes import (
    Allocate,
    BlockRealize,
    Buffer,
    BufferRegion,
    PrimFunc,
    Range,
    const,
)


def outer_regions_refreshed(func: PrimFunc) -> PrimFunc:
    """`func` with each non-root block holding blocks declaring the buffers they access (see
    the module doc); `func` itself where every one does already."""
    if not isinstance(func.body, BlockRealize):
        return func
    root = func.body.block
    if not any(collect(r.block.body, BlockRealize) for r in collect(root.body, BlockRealize)):
        return func                     # (no block holds blocks: no walk; collect remembers)
    body = _Refresh().visit(root.body)
    if body is root.body:
        return func
    return dataclasses.replace(func, body=dataclasses.replace(
        func.body, block=dataclasses.replace(root, body=body)))


class _Refresh(IRMutator):
    def visit_BlockRealize(self, node: BlockRealize):
        node = self.visit_children(node)
        block = node.block
        inner = [r.block for r in collect(block.body, BlockRealize)]
        if not inner or block.init is not None or _accesses_of_its_own(block.body):
            return node             # (what it declares for its own accesses is the user's)
        local = {b.name for b in block.alloc_buffers}
        local |= {b.name for nested in inner for b in nested.alloc_buffers}
        local |= {a.buffer.name for a in collect(block.body, Allocate)}
        reads = _refreshed(block.reads, [r for b in inner for r in b.reads], local)
        writes = _refreshed(block.writes, [r for b in inner for r in b.writes], local)
        if reads is None and writes is None:
            return node
        return dataclasses.replace(node, block=dataclasses.replace(
            block, reads=block.reads if reads is None else reads,
            writes=block.writes if writes is None else writes))


def _accesses_of_its_own(body) -> bool:
    """Whether `body` names a buffer outside the blocks in it (a store, a load in a condition
    or a loop bound, an address handed to a call; audit helper-149: an `if N[vo] > ii` around
    the nested block lost N from the outer block's reads, and the next step's verify
    failed)."""
    found = []

    class Own(IRVisitor):
        def visit_BlockRealize(self, node: BlockRealize) -> None:
            for value in (*node.iter_values, node.predicate):
                self.visit(value)

        def visit_BufferLoad(self, node) -> None:
            found.append(node)

        def visit_BufferStore(self, node) -> None:
            found.append(node)

        def visit_Call(self, node) -> None:
            found.append(node)          # (an address, a handle's data: extern.py)

        def visit_Allocate(self, node) -> None:
            found.append(node)
    Own().visit(body)
    return bool(found)


def _refreshed(declared: tuple[BufferRegion, ...], nested: list[BufferRegion],
               local: set[str]) -> tuple[BufferRegion, ...] | None:
    """`declared` less the buffers no region of `nested` names, plus the whole of each
    buffer `nested` names and `declared` does not; None where that is `declared`."""
    used: dict[str, Buffer] = {}
    for region in nested:
        if region.buffer.name not in local:
            used.setdefault(region.buffer.name, region.buffer)
    names = {region.buffer.name for region in declared}
    kept = tuple(region for region in declared if region.buffer.name in used)
    added = tuple(_whole(buffer) for name, buffer in used.items() if name not in names)
    if not added and len(kept) == len(declared):
        return None
    return kept + added


def _whole(buffer: Buffer) -> BufferRegion:
    return BufferRegion(buffer, tuple(Range(const(0, d.dtype), d) for d in buffer.shape))

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

A declared region of a buffer the blocks still access is kept where it holds what the
blocks directly inside access in one instance (isl, over the loops between), else widened
to the whole buffer. Buffers allocated inside the block are not its regions; the blocks of
its init (a blockized reduction's) count as blocks in it. A block with accesses of its own
(outside the blocks in it and in its init) is left as it is. The analyses
read the nested blocks' own accesses, so nothing they prove changes.
"""

from __future__ import annotations

import dataclasses

from sched.ir.functor import IRMutator, IRVisitor, child_field_names, collect, free_vars
from sched.ir.memo import identity_cache
from sched.ir.nodes import (
    Allocate,
    BlockRealize,
    Buffer,
    BufferRegion,
    For,
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
        return _refreshed_realize(node)

    def visit_Buffer(self, node):
        return node


@identity_cache(maxsize=1 << 10)
def _refreshed_realize(node: BlockRealize) -> BlockRealize:
    """`node` with the blocks in it refreshed, then its own regions; remembered per node (a
    step rebuilds the function around the blocks it did not touch)."""
    node = _Refresh().visit_children(node)
    block = node.block
    parts = (block.body,) if block.init is None else (block.init, block.body)
    inner = [r.block for part in parts for r in collect(part, BlockRealize)]
    if not inner or any(_accesses_of_its_own(part) for part in parts):
        return node             # (what it declares for its own accesses is the user's)
    local = {b.name for b in block.alloc_buffers}
    local |= {b.name for nested in inner for b in nested.alloc_buffers}
    local |= {a.buffer.name for a in collect(block.body, Allocate)}
    reads = _refreshed(block.reads, [r for b in inner for r in b.reads], local)
    writes = _refreshed(block.writes, [r for b in inner for r in b.writes], local)
    reads = _widened(node, block.reads if reads is None else reads, "reads")
    writes = _widened(node, block.writes if writes is None else writes, "writes")
    if reads == block.reads and writes == block.writes:
        return node
    return dataclasses.replace(node, block=dataclasses.replace(block, reads=reads,
                                                               writes=writes))


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


def _widened(node: BlockRealize, declared: tuple[BufferRegion, ...], access: str
             ) -> tuple[BufferRegion, ...]:
    """`declared`, each region the whole buffer where a block directly inside accesses more
    of it than the region says in an instance of `node` (its region relaxed over the loops
    between, by isl; audit helper-149: after inlining B[vi] = A[(vi + 16) % 64, vj] into a
    blockized block, its nested block read all of A's rows, the outer block 16 of them)."""
    outer = {iv.var: iv.dom for iv in node.block.iter_vars}
    block = node.block
    nested = [found for part in (block.init, block.body) if part is not None
              for found in _directly_inside(part, [])]
    widened = []
    for region in declared:
        covered = all(_covers(region, box, outer) for realize, loops in nested
                      for inner in getattr(realize.block, access)
                      if inner.buffer.name == region.buffer.name
                      for box in [_relaxed(inner, realize, loops, outer)])
        widened.append(region if covered else _whole(region.buffer))
    return tuple(widened) if widened != list(declared) else declared


def _directly_inside(stmt, loops: list[For]):
    """(block realize, the loops from `stmt` down to it) of each block in `stmt` that no
    other block in it holds."""
    if isinstance(stmt, BlockRealize):
        yield stmt, loops
    elif isinstance(stmt, For):
        yield from _directly_inside(stmt.body, [*loops, stmt])
    else:
        for child in _statements(stmt):
            yield from _directly_inside(child, loops)


def _statements(stmt) -> list:
    found = []
    for name in child_field_names(type(stmt), statements_only=True):
        value = getattr(stmt, name)
        found += list(value) if isinstance(value, tuple) else [value] if value is not None \
            else []
    return found


def _relaxed(region: BufferRegion, realize: BlockRealize, loops: list[For], outer: dict):
    from sched.schedule.relaxed_region import relaxed_region

    bindings = dict(zip((iv.var for iv in realize.block.iter_vars), realize.iter_values))
    return relaxed_region(region, bindings, loops, outer)


def _covers(region: BufferRegion, box, outer: dict) -> bool:
    """Whether `region` holds `box` (None: a box isl could not find) wherever the variables
    of `outer` take their domains."""
    import islpy as isl

    from sched.polyhedral.isl_expr import isl_name, range_constraint, to_isl
    from sched.polyhedral.isl_text import read_set

    if box is None:
        return False
    elements = [f"e{d}" for d in range(len(box))]
    context = [range_constraint(var, dom.min, dom.extent) for var, dom in outer.items()]

    def inside(ranges) -> list[str] | None:
        texts = [(to_isl(r.min), to_isl(r.extent)) for r in ranges]
        if any(None in pair for pair in texts):
            return None
        return [f"{lo} <= {e} < {lo} + {extent}" for e, (lo, extent) in zip(elements, texts)]
    held, needed = inside(region.region), inside(box)
    if held is None or needed is None or None in context:
        return False
    variables = {v for r in (*region.region, *box) for x in (r.min, r.extent)
                 for v in free_vars(x)} | set(outer)
    params = ", ".join(sorted(isl_name(v) for v in variables))
    try:
        small = read_set(f"[{params}] -> {{ [{', '.join(elements)}] : "
                         f"{' and '.join(needed + context) or 'true'} }}")
        large = read_set(f"[{params}] -> {{ [{', '.join(elements)}] : "
                         f"{' and '.join(held) or 'true'} }}")
        return small.is_subset(large)
    except isl.Error:
        return False

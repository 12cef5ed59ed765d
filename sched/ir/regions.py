"""Inferring the read and write regions of a block from the accesses in its body.

Used by the compute DSL (which never asks the user for regions) and by the parser when a script
leaves out `T.reads` / `T.writes`. The result is exact for the usual case, where every access
indexes a dimension with the same expression of the block's iteration variables, or with that
expression plus different constants (a stencil: `A[vi - 1]`, `A[vi]`, `A[vi + 1]` give
`A[vi - 1:vi + 2]`). Anything else, such as an index that uses a loop inside the block, covers the
whole dimension: a safe over-approximation (polyhedral/ computes exact bounds where it matters).
A buffer whose element address goes to an opaque call is read and written whole.
"""

from __future__ import annotations

from sched.ir.extern import addressed_buffers
from sched.ir.functor import collect, free_vars
from sched.ir.nodes import (
    BinaryOp,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Expr,
    IntImm,
    IterVar,
    Range,
    Stmt,
    Var,
    binary,
)
from sched.ir.simplify import simplify


def _split_offset(index: Expr) -> tuple[Expr | None, int]:
    """`base + c` as (base, c); a constant as (None, c)."""
    if isinstance(index, IntImm):
        return None, index.value
    if isinstance(index, BinaryOp) and index.op in ("add", "sub") and isinstance(index.b, IntImm):
        sign = 1 if index.op == "add" else -1
        return index.a, sign * index.b.value
    return index, 0


def _dim_range(indices: list[Expr], extent: Expr, allowed: set[Var]) -> Range:
    """The smallest range this inference can prove covers every index of one dimension."""
    if any(not set(free_vars(i)) <= allowed for i in indices):
        return Range(IntImm(0), extent)
    split = [_split_offset(i) for i in indices]
    bases = {base for base, _ in split}
    if len(bases) != 1:
        return Range(IntImm(0), extent)
    base = bases.pop()
    low = min(offset for _, offset in split)
    high = max(offset for _, offset in split)
    if base is None:
        start: Expr = IntImm(low)
    elif low == 0:
        start = base
    else:   # `base - 200` as a subtraction: -200 is no uint8 constant (audit helper-95)
        start = simplify(binary("add", base, low) if low > 0 else binary("sub", base, -low))
    return Range(start, IntImm(high - low + 1))


def _regions(accesses: list[tuple[Buffer, tuple[Expr, ...]]], allowed: set[Var],
             skip: set[Buffer]) -> tuple[BufferRegion, ...]:
    by_buffer: dict[Buffer, list[tuple[Expr, ...]]] = {}
    for buffer, indices in accesses:
        if buffer not in skip:
            by_buffer.setdefault(buffer, []).append(indices)
    regions = []
    for buffer, index_lists in by_buffer.items():
        if any(len(indices) != buffer.ndim for indices in index_lists):
            region = tuple(Range(IntImm(0), dim) for dim in buffer.shape)
        else:
            region = tuple(_dim_range([indices[d] for indices in index_lists], dim, allowed)
                           for d, dim in enumerate(buffer.shape))
        regions.append(BufferRegion(buffer, region))
    return tuple(regions)


def infer_block_regions(
    body: Stmt,
    init: Stmt | None,
    iter_vars: tuple[IterVar, ...],
    alloc_buffers: tuple[Buffer, ...] = (),
    outer_vars: tuple[Var, ...] = (),
) -> tuple[tuple[BufferRegion, ...], tuple[BufferRegion, ...]]:
    """The (reads, writes) of a block whose init and body are given.

    A reduction update such as `C[vi, vj] = C[vi, vj] + ...` reads its output too, and says so,
    after its inputs: `T.reads(A[vi, vk], B[vk, vj], C[vi, vj])`.
    Buffers the block allocates itself are not part of its regions. `outer_vars` are variables
    that an index may use besides the iteration variables (symbolic dims).
    """
    statements = [body] if init is None else [init, body]
    loads: list[tuple[Buffer, tuple[Expr, ...]]] = []
    stores: list[tuple[Buffer, tuple[Expr, ...]]] = []
    for stmt in statements:
        loads += [(load.buffer, load.indices) for load in collect(stmt, BufferLoad)]
        stores += [(store.buffer, store.indices) for store in collect(stmt, BufferStore)]
    # an element address passed to an opaque call: the call may read and write the whole
    # buffer (declare T.reads/T.writes to say less)
    addressed = set().union(*(addressed_buffers(stmt) for stmt in statements))
    whole = tuple(BufferRegion(b, tuple(Range(IntImm(0), d) for d in b.shape))
                  for b in sorted(addressed, key=lambda b: b.name) if b not in alloc_buffers)
    loads = [(b, i) for b, i in loads if b not in addressed]
    stores = [(b, i) for b, i in stores if b not in addressed]
    allowed = {iv.var for iv in iter_vars} | set(outer_vars)
    for buffer, _ in loads + stores:
        for dim in buffer.shape:
            allowed |= set(free_vars(dim))
    skip = set(alloc_buffers)
    # the inputs first, in the order they appear, then what the block reads of a buffer it
    # writes (a reduction's accumulated output): read index i names the i-th input, as in
    # TVM's te.create_prim_func (which lists the inputs only), so TVM's
    # `cache_read(block, 0, ...)` caches A of `C[i, j] += A[i, k] * B[k, j]`
    written = {buffer for buffer, _ in stores}
    reads = sorted(_regions(loads, allowed, skip), key=lambda r: r.buffer in written)
    return (tuple(reads) + whole, _regions(stores, allowed, skip) + whole)

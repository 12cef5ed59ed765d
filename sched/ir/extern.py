"""Opaque calls and element addresses: what makes a block opaque.

TVM users call C or CUDA functions from TensorIR with `T.evaluate(T.call_extern(...))`, passing
element addresses (`T.address_of(A[i, 0])`, `A.data`), and declare in `T.reads`/`T.writes` what
the call reads and writes. sched keeps such calls as `Call` nodes (ops in `EXTERN_CALLS`,
`"address_of"`) and the statement as `Evaluate`.

A block is opaque when its body or init makes an impure call (`call_extern`, `call_packed`) or
takes an address: nothing is known of what the call does but what the block declares. Then:

- its accesses are its declared regions (and its visible loads and stores), over-approximated:
  every element of a read region may be read, every element of a write region MAY be written
  (`polyhedral/accesses.py: region_accesses`);
- schedules keep it whole (`schedule/opaque_blocks.py`): only the loops around it and its
  bindings change, never its body, its regions or the buffers it points into;
- the lowering keeps the layout of a buffer whose address is taken (no compaction).

`call_pure_extern` with scalar arguments is an ordinary pure function: its block is not opaque.
"""

from __future__ import annotations

from sched.ir.functor import IRVisitor, collect
from sched.ir.memo import identity_cache
from sched.ir.nodes import (
    IMPURE_CALLS,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Evaluate,
    Stmt,
)

ADDRESS_OF = "address_of"


def address_of(load: BufferLoad) -> Call:
    """`T.address_of(A[i, j])`: the address of an element (C `&A[...]`)."""
    return Call(ADDRESS_OF, (load,), "handle")


def is_opaque_call(call: Call) -> bool:
    return call.op in IMPURE_CALLS or call.op == ADDRESS_OF


def has_opaque_calls(stmt: Stmt | None) -> bool:
    """Whether `stmt` (blocks nested in it included) makes an opaque call or takes an
    address."""
    if stmt is None:
        return False
    return bool(collect(stmt, Evaluate)) or any(is_opaque_call(c) for c in collect(stmt, Call))


class _OwnCalls(IRVisitor):
    """Finds an opaque call outside nested blocks."""

    found = False

    def visit_Evaluate(self, node: Evaluate) -> None:
        self.found = True

    def visit_Call(self, node: Call) -> None:
        self.found = self.found or is_opaque_call(node)
        self.visit_children(node)

    def visit_BlockRealize(self, node) -> None:
        pass                       # a nested block is opaque or not on its own

    def visit_Buffer(self, node) -> None:
        pass


@identity_cache(maxsize=1 << 12)
def is_opaque(block: Block) -> bool:
    """Whether `block` is opaque (see the module doc): its own body or init makes an opaque
    call (a block nested in it is judged on its own). Remembered per block (blocks are
    immutable; a step rebuilds few of them): one walk of the block's own statements."""
    finder = _OwnCalls()
    for stmt in (block.init, block.body):
        if stmt is not None:
            finder.visit(stmt)
    return finder.found


def addressed_buffers(stmt: Stmt) -> set[Buffer]:
    """The buffers whose element addresses `stmt` takes."""
    return {c.args[0].buffer for c in collect(stmt, Call)
            if c.op == ADDRESS_OF and isinstance(c.args[0], BufferLoad)}


def addressed_storages(stmt: Stmt) -> set[str]:
    """The storage names of the buffers whose addresses `stmt` takes."""
    return {b.storage_name for b in addressed_buffers(stmt)}


def written_storages(stmt: Stmt) -> set[str]:
    """The storage names of the buffers `stmt` may write: those it stores to, the blocks'
    declared writes (an extern call with `T.writes(B[...])`: audit helper-73's B, written by
    the call, was taken for an input that a read-only array may fill, and that another
    argument may overlap), and those whose element addresses go to an opaque call where no
    block around the call declares the buffer's regions (lowered code; in a block, its
    `T.reads` say an addressed input is only read: helper-77)."""
    finder = _Written()
    finder.visit(stmt)
    return finder.written


class _Written(IRVisitor):
    def __init__(self) -> None:
        self.written: set[str] = set()
        self.declared: set[str] = set()      # the innermost block's declared storages

    def visit_BufferStore(self, node: BufferStore) -> None:
        self.written.add(node.buffer.storage_name)
        self.visit_children(node)

    def visit_BlockRealize(self, node: BlockRealize) -> None:
        block = node.block
        self.written |= {region.buffer.storage_name for region in block.writes}
        outer = self.declared
        if block.name != "root":
            self.declared = {region.buffer.storage_name
                             for region in (*block.reads, *block.writes)}
        self.visit_children(node)
        self.declared = outer

    def visit_Call(self, node: Call) -> None:
        if node.op == ADDRESS_OF and isinstance(node.args[0], BufferLoad):
            storage = node.args[0].buffer.storage_name
            if storage not in self.declared:
                self.written.add(storage)
        self.visit_children(node)

    def visit_Buffer(self, node) -> None:
        pass

"""Buffer allocation planning: each buffer a block allocates moves to the lowest common ancestor
(loop or block) of the places that access it.

Runs first, on block IR, before `compact_buffers`, which shrinks each buffer to what one
execution of its allocation point touches: a cache that compute_at placed under a loop becomes a
tile-sized buffer allocated inside that loop. The model needs the block regions (what each block
reads and writes), so the pass cannot wait for `convert_blocks_to_loops`.

As TVM's PlanAndUpdateBufferAllocationLocation, with one check TVM leaves to the schedule: a
buffer moves inside a loop only if no value flows through it from one iteration of that loop (or
of a loop around it) to another, since each iteration then gets a fresh buffer. isl computes the
value-based flow (the last write before each read), so a buffer refilled in each iteration
still moves.
"""

from __future__ import annotations

import dataclasses

from sched.ir.functor import IRMutator, IRVisitor, collect
from sched.ir.nodes import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    Node,
    PrimFunc,
)
from sched.polyhedral import build_model
from sched.polyhedral.accesses import unseen_loads
from sched.polyhedral.flow_crossing import flows_cross


class _AccessSites(IRVisitor):
    """For each buffer, the loops and blocks around every access they all share (the common
    prefix of the ancestor stacks), outermost first. A block's regions count as accesses from
    the block's parent, so a buffer a block declares is never allocated inside it."""

    def __init__(self) -> None:
        self.stack: list[Node] = []
        self.common: dict[str, list[Node]] = {}

    def access(self, name: str) -> None:
        known = self.common.get(name)
        if known is None:
            self.common[name] = list(self.stack)
            return
        shared = 0
        while shared < min(len(known), len(self.stack)) and known[shared] is self.stack[shared]:
            shared += 1
        del known[shared:]

    def visit_For(self, node: For) -> None:
        self.visit(node.min)          # loads in the bounds: before the loop (audit helper-55)
        self.visit(node.extent)
        self.stack.append(node)
        self.visit(node.body)
        self.stack.pop()

    def visit_BlockRealize(self, node: BlockRealize) -> None:
        self.visit_children(node)

    def visit_Block(self, node: Block) -> None:
        for region in (*node.reads, *node.writes):
            self.access(region.buffer.name)
        self.stack.append(node)
        if node.init is not None:
            self.visit(node.init)
        self.visit(node.body)
        self.stack.pop()

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self.access(node.buffer.name)
        self.visit_children(node)

    def visit_BufferStore(self, node: BufferStore) -> None:
        self.access(node.buffer.name)
        self.visit_children(node)


def _position(model, loop: For) -> int | None:
    for statement in model.statements.values():
        for lp in statement.loops:
            if lp.var == loop.loop_var:
                return lp.position
    return None


def _placement(model, buffer: Buffer, common: list[Node], owner: Block) -> Node:
    """The lowest node of `common` (at or below the allocating block) where every value of
    `buffer` is written and read within one execution."""
    start = next(i for i, node in enumerate(common) if node is owner)
    for index in range(len(common) - 1, start, -1):
        loops = [node for node in common[:index + 1] if isinstance(node, For)]
        positions = [_position(model, lp) for lp in loops]
        if not loops:
            return common[index]
        if None in positions:
            continue
        if not flows_cross(model, buffer.storage_name, positions[-1]):
            return common[index]
    return owner


class _Mover(IRMutator):
    def __init__(self, targets: dict[int, list[Buffer]], moved: set[str]) -> None:
        self.targets = targets        # id of the original For / Block -> buffers it gets
        self.moved = moved

    def visit_Block(self, block: Block) -> Block:
        extra = tuple(self.targets.get(id(block), ()))
        block = self.visit_children(block)
        kept = tuple(b for b in block.alloc_buffers if b.name not in self.moved)
        if kept == block.alloc_buffers and not extra:
            return block
        return dataclasses.replace(block, alloc_buffers=kept + extra)

    def visit_For(self, loop: For) -> For:
        extra = self.targets.get(id(loop), [])
        loop = self.visit_children(loop)
        body = loop.body
        for buffer in reversed(extra):
            body = Allocate(buffer, body)
        return dataclasses.replace(loop, body=body) if extra else loop


def plan_buffer_allocation(func: PrimFunc) -> PrimFunc:
    """`func` with each buffer that a block allocates allocated where it is used.

    Takes block IR. A buffer in a block's `alloc_buffers` moves to the lowest loop or block
    around every access to it (a block's declared regions count as accesses from around the
    block): into that block's `alloc_buffers`, or into an `Allocate` that wraps that loop's
    body (so each iteration has its own buffer). It stays higher where a value written in one
    iteration of a loop would be read in another. Buffers nothing accesses, buffers already in
    an `Allocate`, and the parameters are unchanged.

    Later passes may rely on: every allocation is at or below where the input had it, and
    covers every access; an `Allocate` may now sit in a loop body, around blocks.
    """
    owners = [(block, buffer) for block in collect(func.body, Block)
              for buffer in block.alloc_buffers]
    if not owners:
        return func
    sites = _AccessSites()
    sites.visit(func.body)
    # the flows that decide a move do not see a load in a loop bound, a condition, a let, a
    # predicate or a binding: a buffer loaded there stays (audit helper-55: L allocated in
    # the loop, `for j in range(L[0])` read another iteration's uninitialised copy)
    unseen = unseen_loads(func.body)
    model = None
    targets: dict[int, list[Buffer]] = {}
    moved: set[str] = set()
    for owner, buffer in owners:
        common = sites.common.get(buffer.name)
        if not common or common[-1] is owner or not any(n is owner for n in common) \
                or buffer.storage_name in unseen:
            continue
        model = model or build_model(func)
        target = _placement(model, buffer, common, owner)
        if target is not owner:
            targets.setdefault(id(target), []).append(buffer)
            moved.add(buffer.name)
    if not moved:
        return func
    return dataclasses.replace(func, body=_Mover(targets, moved).visit(func.body))

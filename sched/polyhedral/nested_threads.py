"""Loops nested in a loop of their own thread tag: when one hardware index can stand for both.

In TVM's convention every loop bound to a thread tag stands for the same hardware index
(lower/gpu_threads.py unifies a nested loop into its outer one). That is the nested loop's
work only in some cases; this module states which, for the lowering (which refuses the rest at
build) and for schedule steps (which refuse the rest when they would create it), so that a
step never accepts what the build refuses. Structural: it asks no isl question.
"""

from __future__ import annotations

from sched.ir.dtype import is_int, max_value, min_value
from sched.ir.functor import IRVisitor, collect, free_vars
from sched.ir.intervals import interval
from sched.ir.nodes import BinaryOp, BlockRealize, For, IntImm, PrimFunc

BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


def _is_bound(loop: For) -> bool:
    return loop.kind == "thread_binding" and loop.thread_tag in BLOCK_TAGS + THREAD_TAGS


def nested_loop_problem(loop: For, outer: For, outer_vars: frozenset = frozenset()) -> str | None:
    """Why `loop`, nested in `outer` bound to the same tag, cannot run as `outer`'s iterations
    (the inner loop's work shared among the outer loop's threads), or None when it can.

    Unified, thread t runs only the inner iteration t: the threads of the outer loop share the
    inner loop's work (TVM's convention for a cooperative fetch), and barriers give every
    thread what the others wrote. That is the inner loop's work only when it has at most the
    outer loop's threads and its body does not use the outer index; otherwise one index would
    stand for two (the loops' diagonal). Blocks have no barrier: a loop nested in one of the
    same blockIdx axis is always refused. `outer_vars`: variables that stand for the outer
    index too (in block IR, the iteration variables of blocks between the loops bound to it).
    """
    tag, name, outer_name = loop.thread_tag, loop.loop_var.name, outer.loop_var.name
    if tag in BLOCK_TAGS:
        return (f"loop {name!r} is bound to {tag} inside loop {outer_name!r} bound to {tag} "
                f"too: nested loops of one block axis would share one block index and compute "
                f"only part of the iterations; fuse the two loops and bind the fused loop, or "
                f"bind them to different axes (blockIdx.x, blockIdx.y)")
    bounds = set(free_vars(loop.min)) | set(free_vars(loop.extent))
    if ({outer.loop_var} | set(outer_vars)) & bounds:
        # (`T.thread_binding(tx, tx + 2)` or an extent `T.min(tx, 4)` inside tx's loop ran
        # the wrong iterations, or none: audit helper-184)
        return (f"loop {name!r} is bound to {tag} inside loop {outer_name!r} bound to {tag} "
                f"too, and its bounds use {outer_name!r}: one thread index cannot stand for "
                f"both loops; fuse them and bind the fused loop, or bind them to different "
                f"axes (threadIdx.x, threadIdx.y)")
    if not _at_most(loop.extent, outer.extent):
        # (an extent not known to be at most the outer one, `n` or `k + 1`, ran only the
        # iterations below the outer extent: audit helper-183)
        return (f"loop {name!r} is bound to {tag} with extent {loop.extent.script()}, inside "
                f"loop {outer_name!r} bound to it with extent {outer.extent.script()}: a nested "
                f"loop of one thread axis cannot use more threads than the outer one (its "
                f"extent must be at most the outer one's whatever its variables); split it by "
                f"{outer.extent.script()}")
    if ({outer.loop_var} | set(outer_vars)) & set(free_vars(loop.body)):
        return (f"loop {name!r} is bound to {tag} inside loop {outer_name!r} bound to {tag} "
                f"too, and its body uses {outer_name!r}: one thread index cannot stand for "
                f"both loops; fuse them and bind the fused loop, or bind them to different "
                f"axes (threadIdx.x, threadIdx.y)")
    return None


def _at_most(extent, outer_extent) -> bool:
    """Whether `extent` is at most `outer_extent` for every value of its variables (each over
    its type: `T.min(8, n)` within 8), or the same expression."""
    if extent == outer_extent:
        return True
    if isinstance(extent, BinaryOp) and extent.op == "min":    # (whatever the other operand
        # does, wrapping included: `T.min(16, k * 4 + 4)` inside 16 threads; helper-186)
        return _at_most(extent.a, outer_extent) or _at_most(extent.b, outer_extent)
    if not isinstance(outer_extent, IntImm):
        return False
    found = interval(extent, {v: (min_value(v.dtype), max_value(v.dtype))
                              for v in free_vars(extent) if is_int(v.dtype)})
    return found is not None and not found[1] and found[0][1] <= outer_extent.value


class _NestedAxes(IRVisitor):
    def __init__(self) -> None:
        self.outer: dict[str, tuple[For, frozenset]] = {}   # tag -> (loop, its variables)
        self.problem: str | None = None

    def visit_For(self, loop: For) -> None:
        if self.problem is not None:
            return
        if not _is_bound(loop):
            if _holds_bound_loop(loop):
                self.visit_children(loop)
            return
        if loop.thread_tag in BLOCK_TAGS:
            # bound loops nested directly in each other are only the kernel's indices, in
            # any order (TVM's `for i (threadIdx.x): for j (blockIdx.x)`); with anything
            # between them, a blockIdx loop inside a threadIdx loop is no kernel
            thread = next((outer for tag, (outer, _) in self.outer.items()
                           if tag in THREAD_TAGS and id(loop) not in _bound_chain(outer)),
                          None)
            if thread is not None:
                self.problem = (f"loop {loop.loop_var.name!r} is bound to {loop.thread_tag} "
                                f"inside loop {thread.loop_var.name!r} bound to "
                                f"{thread.thread_tag}: a kernel's thread blocks hold its "
                                f"threads, not the other way round; bind the outer loops to "
                                f"blockIdx and the inner ones to threadIdx")
                return
        found = self.outer.get(loop.thread_tag)
        if found is not None:
            self.problem = nested_loop_problem(loop, *found)
            self.visit_children(loop)
            return
        self.outer[loop.thread_tag] = (loop, frozenset())
        self.visit_children(loop)
        del self.outer[loop.thread_tag]

    def visit_BlockRealize(self, realize: BlockRealize) -> None:
        if self.problem is not None or not _holds_bound_loop(realize):
            return              # a problem is a bound loop's: none below, none to find
        saved = dict(self.outer)
        for tag, (loop, variables) in saved.items():     # block variables standing for it
            bound = {loop.loop_var} | variables
            uses = frozenset(iv.var for iv, value in zip(realize.block.iter_vars,
                                                         realize.iter_values)
                             if bound & set(free_vars(value)))
            self.outer[tag] = (loop, variables | uses)
        self.visit_children(realize)
        self.outer = saved


def _holds_bound_loop(node) -> bool:
    """Whether a loop bound to a thread or block axis is in `node` (itself included), from
    its loops (`collect`, remembered per loop and block across steps)."""
    return any(_is_bound(loop) for loop in collect(node, For))


def _bound_chain(loop: For) -> set[int]:
    """The loops bound to a thread or block axis nested directly in `loop`, one in the next
    with nothing else between (ids)."""
    chain, node = set(), loop.body
    while isinstance(node, For) and _is_bound(node):
        chain.add(id(node))
        node = node.body
    return chain


def nested_axis_problem(func: PrimFunc) -> str | None:
    """The first loop of `func` nested in a loop of its own thread tag that cannot share that
    loop's index (`nested_loop_problem`), or bound to a blockIdx axis inside a threadIdx loop,
    or None. Asked after schedule steps too (block IR),
    so a step refuses what the build would.

    Only loops bound to a thread or block axis raise a problem, and the walk looks only at
    those (with the blocks under them): a function with none has none, found from its loops
    (`collect`, remembered per block across steps) without the walk."""
    if not any(_is_bound(loop) for loop in collect(func.body, For)):
        return None
    visitor = _NestedAxes()
    visitor.visit(func.body)
    return visitor.problem

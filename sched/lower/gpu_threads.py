"""GPU thread loops: one hardware index per thread tag, and the launch configuration.

In TVM's convention, which sched follows, every loop bound to a thread tag stands for the same
hardware index: a loop bound to threadIdx.x nested in another one bound to threadIdx.x (a
cooperative fetch placed under the compute's thread loops) does not multiply the threads; each
thread runs the iteration of its own index. `unify_thread_loops` rewrites such a nested loop into
its outer loop's variable (with a guard when it is shorter), so that both the CUDA code and the
C target's per-thread loops (thread_phases.py) see one loop per tag. It runs after block
conversion: blocks are gone, and loop variables are plain variables.

`launch_config` reads the grid and block sizes off the bound loops and checks the kernel shape:
every store runs under a blockIdx or threadIdx loop (or the code would run once per thread),
loops of one tag agree on their extent, threadIdx extents are constants with a product of at
most 1024.
"""

from __future__ import annotations

import dataclasses
import math

from sched.errors import ScheduleError
from sched.ir.functor import IRMutator, IRVisitor, free_vars, substitute
from sched.ir.nodes import (
    BlockRealize,
    BufferStore,
    Expr,
    For,
    IfThenElse,
    IntImm,
    PrimFunc,
    binary,
    const,
)
from sched.lower.launch import MAX_THREADS_PER_BLOCK, LaunchConfig

BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


def _is_bound(loop: For) -> bool:
    return loop.kind == "thread_binding" and loop.thread_tag in BLOCK_TAGS + THREAD_TAGS


class _Unify(IRMutator):
    def __init__(self) -> None:
        self.outer: dict[str, For] = {}

    def visit_For(self, loop: For):
        if not _is_bound(loop):
            return self.visit_children(loop)
        outer = self.outer.get(loop.thread_tag)
        if outer is None:
            self.outer[loop.thread_tag] = loop
            result = self.visit_children(loop)
            del self.outer[loop.thread_tag]
            return result
        problem = nested_loop_problem(loop, outer)
        if problem is not None:
            raise ScheduleError("build", problem)
        body = self.visit(substitute(loop.body, {loop.loop_var: outer.loop_var}))
        if loop.extent != outer.extent:
            body = IfThenElse(binary("lt", outer.loop_var, loop.extent), body)
        return body


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
    if isinstance(loop.extent, IntImm) and isinstance(outer.extent, IntImm) \
            and loop.extent.value > outer.extent.value:
        return (f"loop {name!r} is bound to {tag} with extent {loop.extent.value}, inside loop "
                f"{outer_name!r} bound to it with extent {outer.extent.value}: a nested loop of "
                f"one thread axis cannot use more threads than the outer one; split it by "
                f"{outer.extent.value}")
    if ({outer.loop_var} | set(outer_vars)) & set(free_vars(loop.body)):
        return (f"loop {name!r} is bound to {tag} inside loop {outer_name!r} bound to {tag} "
                f"too, and its body uses {outer_name!r}: one thread index cannot stand for "
                f"both loops; fuse them and bind the fused loop, or bind them to different "
                f"axes (threadIdx.x, threadIdx.y)")
    return None


class _NestedAxes(IRVisitor):
    def __init__(self) -> None:
        self.outer: dict[str, tuple[For, frozenset]] = {}   # tag -> (loop, its variables)
        self.problem: str | None = None

    def visit_For(self, loop: For) -> None:
        if self.problem is not None:
            return
        if not _is_bound(loop):
            self.visit_children(loop)
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
        saved = dict(self.outer)
        for tag, (loop, variables) in saved.items():     # block variables standing for it
            bound = {loop.loop_var} | variables
            uses = frozenset(iv.var for iv, value in zip(realize.block.iter_vars,
                                                         realize.iter_values)
                             if bound & set(free_vars(value)))
            self.outer[tag] = (loop, variables | uses)
        self.visit_children(realize)
        self.outer = saved


def nested_axis_problem(func: PrimFunc) -> str | None:
    """The first loop of `func` nested in a loop of its own thread tag that cannot share that
    loop's index (`nested_loop_problem`), or None. Asked after schedule steps too (block IR),
    so a step refuses what the build would."""
    visitor = _NestedAxes()
    visitor.visit(func.body)
    return visitor.problem


def unify_thread_loops(func: PrimFunc) -> PrimFunc:
    """`func` where a loop nested in a loop of the same thread tag uses the outer loop's
    variable instead of running its own iterations (see the module docstring)."""
    return _Unify().visit(func)


class _LaunchReader(IRVisitor):
    def __init__(self) -> None:
        self.extents: dict[str, list[Expr]] = {}
        self.bound_depth = 0
        self.unbound_store: BufferStore | None = None

    def visit_For(self, loop: For) -> None:
        if _is_bound(loop):
            self.extents.setdefault(loop.thread_tag, []).append(loop.extent)
            self.bound_depth += 1
            self.visit(loop.body)
            self.bound_depth -= 1
        else:
            self.visit_children(loop)

    def visit_BufferStore(self, store: BufferStore) -> None:
        if self.bound_depth == 0 and self.unbound_store is None:
            self.unbound_store = store


def launch_config(func: PrimFunc) -> LaunchConfig:
    """The grid and block of `func`'s kernel, after checking its shape (module docstring)."""
    reader = _LaunchReader()
    reader.visit(func.body)
    if reader.unbound_store is not None:
        store = reader.unbound_store
        raise ScheduleError("build", f"the store to '{store.buffer.name}' is not under any loop "
                            f"bound to blockIdx or threadIdx, so every GPU thread would run it: "
                            f"bind its outer loops (sch.bind(loop, \"blockIdx.x\"), "
                            f"\"threadIdx.x\") or compute it at a bound loop")
    grid, block = [], []
    for tag in BLOCK_TAGS + THREAD_TAGS:
        extents = reader.extents.get(tag, [const(1, "int32")])
        if len(set(extents)) > 1:
            raise ScheduleError("build", f"loops bound to {tag} have different extents "
                                f"({', '.join(e.script() for e in dict.fromkeys(extents))}); "
                                f"loops of one thread axis must agree: split them alike")
        extent = extents[0]
        if tag in THREAD_TAGS:
            if not isinstance(extent, IntImm):
                raise ScheduleError("build", f"the loop bound to {tag} has the symbolic extent "
                                    f"{extent.script()}; thread counts must be constants: "
                                    f"split the loop by a constant and bind the inner part")
            block.append(extent.value)
        else:
            grid.append(extent)
    if math.prod(block) > MAX_THREADS_PER_BLOCK:
        raise ScheduleError("build", f"{math.prod(block)} threads per block "
                            f"({' x '.join(str(b) for b in block)}) exceed "
                            f"{MAX_THREADS_PER_BLOCK}: split the threadIdx loops smaller")
    return LaunchConfig(tuple(grid), tuple(block))


def with_shared_bytes(config: LaunchConfig, shared_bytes: int) -> LaunchConfig:
    return dataclasses.replace(config, dynamic_shared_bytes=shared_bytes)

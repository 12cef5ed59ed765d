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
from sched.ir.functor import IRMutator, IRVisitor, collect, substitute
from sched.ir.nodes import (
    BufferLoad,
    BufferStore,
    Expr,
    For,
    IfThenElse,
    IntImm,
    PrimFunc,
    binary,
    const,
    is_constant,
    is_thread_private,
)
from sched.lower.launch import MAX_THREADS_PER_BLOCK, LaunchConfig
from sched.polyhedral.nested_threads import nested_loop_problem

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
        # the thread index is the outer variable less its min; the inner variable is that
        # index plus its own min (both loops start past 0 in `T.thread_binding(8, 16, ...)`:
        # taken as starting at 0, the inner loop ran elements 0 .. 7: audit helper-182)
        index = outer.loop_var if is_constant(outer.min, 0) else \
            binary("sub", outer.loop_var, outer.min)
        value = index if is_constant(loop.min, 0) else binary("add", index, loop.min)
        body = self.visit(substitute(loop.body, {loop.loop_var: value}))
        if loop.extent != outer.extent:
            body = IfThenElse(binary("lt", index, loop.extent), body)
        return body


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
        # (a store to local memory is each thread's to its own copy: a decomposed init of a
        # row total every thread keeps, in a kernel with no blockIdx loop: audit helper-179)
        if self.bound_depth == 0 and self.unbound_store is None and \
                not is_thread_private(store.buffer.scope):
            self.unbound_store = store


def launch_config(func: PrimFunc) -> LaunchConfig:
    """The grid and block of `func`'s kernel, after checking its shape (module docstring)."""
    reader = _LaunchReader()
    reader.visit(func.body)
    if reader.unbound_store is not None:
        store = reader.unbound_store
        raise ScheduleError("build", f"the store to '{store.buffer.storage_name}' is not under "
                            f"any loop bound to blockIdx or threadIdx, so every GPU thread would "
                            f"run it: "
                            f"bind its outer loops (sch.bind(loop, \"blockIdx.x\"), "
                            f"\"threadIdx.x\") or compute it at a bound loop")
    grid, block = [], []
    for tag in BLOCK_TAGS + THREAD_TAGS:
        extents = reader.extents.get(tag, [const(1, "int32")])
        # one number of threads, whatever its dtype (`32` beside a Relax loop's `T.int64(32)`)
        if len({e.value if isinstance(e, IntImm) else e for e in extents}) > 1:
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
            loads = collect(extent, BufferLoad)
            if loads:
                raise ScheduleError("build", f"the loop bound to {tag} has the extent "
                                    f"{extent.script()}, which reads buffer "
                                    f"'{loads[0].buffer.name}': a launch's grid comes from the "
                                    f"arguments' shapes and scalars, not from buffer data; keep "
                                    f"that loop serial inside the kernel, or bind a loop of a "
                                    f"known extent")
            grid.append(extent)
    if math.prod(block) > MAX_THREADS_PER_BLOCK:
        raise ScheduleError("build", f"{math.prod(block)} threads per block "
                            f"({' x '.join(str(b) for b in block)}) exceed "
                            f"{MAX_THREADS_PER_BLOCK}: split the threadIdx loops smaller")
    return LaunchConfig(tuple(grid), tuple(block))


def with_shared_bytes(config: LaunchConfig, shared_bytes: int) -> LaunchConfig:
    return dataclasses.replace(config, dynamic_shared_bytes=shared_bytes)

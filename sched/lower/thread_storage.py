"""Where the C target's emulation of a GPU kernel keeps its buffers (thread_phases.py runs
the kernel): every allocation is hoisted into the innermost blockIdx loop (or to the top of
the function), a thread-private one expanded with one copy per thread index, as CUDA gives
each thread block and thread its own. So no allocation may stay inside a CPU loop whose
iterations need copies of their own: a parallel loop in a GPU kernel is refused (as the CUDA
target refuses it), and a vectorized loop that allocates runs serially (a GPU thread runs it
so).
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.functor import IRMutator, collect
from sched.ir.nodes import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    IntImm,
    PrimFunc,
    binary,
    is_constant,
    is_thread_private,
)
from sched.lower.gpu_threads import BLOCK_TAGS, THREAD_TAGS

THREAD_ORDER = ("threadIdx.z", "threadIdx.y", "threadIdx.x")


class HoistAllocations(IRMutator):
    """Takes every Allocate out of the kernel body, to put it inside the innermost blockIdx
    loop (or at the top of the function), expanding local ones (and any other but shared
    ones allocated inside a thread loop) per thread."""

    def __init__(self, block_extents: dict[str, int]) -> None:
        self.block_extents = block_extents
        self.hoisted: list[list[Buffer]] = [[]]
        self.expanded: dict[str, tuple[Buffer, tuple[str, ...]]] = {}
        self.thread_vars: dict[str, Expr] = {}

    def visit_Allocate(self, node: Allocate):
        buffer = node.buffer
        # a thread-private buffer: one copy per thread. Any other but a shared one allocated
        # inside thread loops (plan_buffer_allocation puts a "global" intermediate at the
        # loop around all its uses, its region compacted to one iteration of it): one copy
        # per iteration of those loops, shared by the threads of the loops inside (values
        # flow between them: written under threadIdx.x, read by an epilogue outside it), as
        # the CUDA target's workspace has it
        tags = THREAD_ORDER if is_thread_private(buffer.scope) else \
            tuple(t for t in THREAD_ORDER if t in self.thread_vars) \
            if buffer.scope != "shared" else ()
        if tags:
            dims = tuple(IntImm(self.block_extents[tag]) for tag in tags)
            buffer = dataclasses.replace(buffer, shape=dims + buffer.shape)
            self.expanded[node.buffer.name] = buffer, tags
        # one allocation per buffer: a statement copied by a pipeline's prologue, steady
        # state and epilogue allocates its buffer in each copy, with disjoint lifetimes
        if buffer not in self.hoisted[-1]:
            self.hoisted[-1].append(buffer)
        return self.visit(node.body)

    def visit_For(self, node: For):
        tag = node.thread_tag if node.kind == "thread_binding" else None
        if tag in BLOCK_TAGS:
            self.hoisted.append([])
            loop = self.visit_children(node)
            body = loop.body
            for buffer in reversed(self.hoisted.pop()):
                body = Allocate(buffer, body)
            return dataclasses.replace(loop, body=body)
        if tag in THREAD_TAGS:
            previous = self.thread_vars.get(tag)
            # the thread index: the variable less its loop's min (`T.thread_binding(1, 34)`
            # indexed copies M[33] with tx up to 33, past the end: audit helper-183)
            self.thread_vars[tag] = node.loop_var if is_constant(node.min, 0) else \
                binary("sub", node.loop_var, node.min)
            loop = self.visit_children(node)
            if previous is None:
                del self.thread_vars[tag]
            else:
                self.thread_vars[tag] = previous
            return loop
        return self.visit_children(node)

    def _thread_index(self, tags: tuple[str, ...]) -> tuple[Expr, ...]:
        return tuple(self.thread_vars.get(tag, IntImm(0)) for tag in tags)

    def visit_BufferLoad(self, node: BufferLoad):
        node = self.visit_children(node)
        expanded = self.expanded.get(node.buffer.name)
        if expanded is None:
            return node
        buffer, tags = expanded
        return BufferLoad(buffer, self._thread_index(tags) + node.indices)

    def visit_BufferStore(self, node: BufferStore):
        node = self.visit_children(node)
        expanded = self.expanded.get(node.buffer.name)
        if expanded is None:
            return node
        buffer, tags = expanded
        return BufferStore(buffer, node.value, self._thread_index(tags) + node.indices)


def refuse_parallel_loops(func: PrimFunc) -> None:
    """A parallel loop in a GPU kernel is refused, as the CUDA target refuses it: the
    emulation gives each thread block and thread its copies of the buffers they allocate, not
    each iteration of a CPU loop (one copy for every OpenMP thread: audit helper-55)."""
    for loop in collect(func.body, For):
        if loop.kind == "parallel":
            raise ScheduleError("build", f"loop '{loop.loop_var.name}' is parallel, a CPU loop "
                                f"kind, in a function whose loops are bound to GPU threads: "
                                f"bind it to blockIdx/threadIdx instead, or leave it serial")


class SerialVectorLoopsAllocating(IRMutator):
    """A vectorized loop that allocates in its body runs as a serial loop: the emulation
    hoists allocations to the thread block, so its iterations would share one copy inside a
    `#pragma omp simd` loop (on the GPU a thread runs it serially)."""

    def visit_For(self, node: For):
        node = self.visit_children(node)
        if node.kind == "vectorized" and collect(node.body, Allocate):
            return dataclasses.replace(node, kind="serial")
        return node

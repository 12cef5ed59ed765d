"""Loops bound to virtual threads become serial loops.

TVM users bind loops to `vthread.x` (or `vthread`, `vthread.y`, `vthread.z`) for register
tiling: the iterations are meant to run in one thread, interleaved by the compiler. sched's
legality analysis treats such a loop as serial (`polyhedral.concurrency.concurrent_kind` is
None for it), and this pass makes the lowering agree on both targets: every later pass sees an
ordinary serial loop, so thread extents, barriers and launch sizes ignore it.

It runs first: later passes take `thread_binding` to mean blockIdx/threadIdx.
"""

from __future__ import annotations

import dataclasses

from sched.ir.functor import IRMutator
from sched.ir.nodes import VTHREAD_TAGS, For, PrimFunc


def serialize_virtual_threads(func: PrimFunc) -> PrimFunc:
    """`func` with every loop bound to a virtual thread turned into a serial loop (its
    annotations kept). The input is block IR; so is the output."""
    return _Serialize().visit(func)


class _Serialize(IRMutator):
    def visit_For(self, loop: For):
        loop = self.visit_children(loop)
        if loop.kind == "thread_binding" and loop.thread_tag in VTHREAD_TAGS:
            return dataclasses.replace(loop, kind="serial", thread_tag=None)
        return loop

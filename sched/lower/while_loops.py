"""While loops in GPU code: refused where the barrier placement would need to see their
iterations.

`insert_barriers` orders the shared-memory accesses of a block's threads by the loops it
knows; a while loop (lowered TIR's `T.While`) has no variable and no trip count, so an access
in one iteration that another thread's access in the next depends on is not seen. A while loop
inside a threadIdx-bound loop that accesses shared memory is therefore refused; one that
touches only global, local or thread-private memory is kept (each thread runs its own).
Runs before `insert_barriers`.
"""

from __future__ import annotations

from sched.errors import ScheduleError
from sched.ir.functor import IRVisitor, collect
from sched.ir.nodes import BufferLoad, BufferStore, For, PrimFunc, While


def check_while_loops(func: PrimFunc) -> PrimFunc:
    """`func` unchanged, or ScheduleError("build", ...) naming the while loop."""
    if collect(func.body, While):
        _Checker().visit(func.body)
    return func


class _Checker(IRVisitor):
    def __init__(self) -> None:
        self.thread_loops = 0

    def visit_For(self, loop: For) -> None:
        inside = loop.kind == "thread_binding" and (loop.thread_tag or "").startswith("thread")
        self.thread_loops += inside
        self.visit_children(loop)
        self.thread_loops -= inside

    def visit_While(self, loop: While) -> None:
        if self.thread_loops:
            accesses = collect(loop, BufferLoad) + collect(loop, BufferStore)
            shared = sorted({a.buffer.name for a in accesses if a.buffer.scope == "shared"})
            if shared:
                raise ScheduleError("build", f"the while loop `while "
                                    f"{loop.condition.script()}:` inside a threadIdx loop "
                                    f"accesses shared memory ({', '.join(shared)}): sched "
                                    f"cannot place the barriers its iterations need; write it "
                                    f"as a for loop, or keep shared memory out of it")
        self.visit_children(loop)

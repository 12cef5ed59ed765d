"""Mapping loops to the GPU: bind a loop to blockIdx.x/y/z or threadIdx.x/y/z.

The iterations of a bound loop run at the same time, on different thread blocks or threads, so
`bind` asks polyhedral/ the same question as `parallel`: no dependence, reductions included, may
be carried by the loop. A reduction is spread over threads with rfactor first (partial results
per thread in a buffer, then a final reduction over it).
"""

from __future__ import annotations

from sched.errors import ScheduleError
from sched.ir.nodes import THREAD_TAGS, PrimFunc
from sched.schedule.base import LoopRV, ScheduleBase
from sched.schedule.loop_kinds import _set_kind

GPU_TAGS = tuple(tag for tag in THREAD_TAGS if tag != "vthread")


def bind(func: PrimFunc, loop_name: str, thread_axis: str, render: bool = True) -> PrimFunc:
    """`func` with loop `loop_name` bound to `thread_axis` (see Schedule.bind)."""
    if thread_axis not in GPU_TAGS:
        raise ScheduleError("bind", f"argument 'thread_axis': unknown axis {thread_axis!r}; "
                            f"expected one of {', '.join(GPU_TAGS)}")
    return _set_kind(func, loop_name, "thread_binding", "bind", render, thread_tag=thread_axis)


class MappingPrimitives(ScheduleBase):
    """bind."""

    def bind(self, loop: LoopRV, thread_axis: str) -> None:
        """Run the iterations of `loop` on GPU thread blocks or threads.

        Requires: no dependence carried by the loop (a reduce loop needs rfactor first); the
        loop is not already parallel, vectorized or bound. Launch dimensions come from the
        extents of the bound loops (symbolic ones included), checked at build time against the
        device (at most 1024 threads per block).

        Arguments: `loop` a loop handle; `thread_axis` one of "blockIdx.x", "blockIdx.y",
        "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z".
        Also known as: `bind` in TVM, `gpu_blocks`/`gpu_threads` in Halide.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((1024,), name="A")
        >>> B = te.compute((1024,), lambda i: A[i] * 2.0, name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]))
        >>> (i,) = sch.get_loops(sch.get_block("B"))
        >>> bx, tx = sch.split(i, factors=[None, 128])
        >>> sch.bind(bx, "blockIdx.x")
        >>> sch.bind(tx, "threadIdx.x")
        >>> print("\\n".join(sch.func.script().splitlines()[5:7]))
                for i_0 in T.thread_binding(8, thread="blockIdx.x"):
                    for i_1 in T.thread_binding(128, thread="threadIdx.x"):
        """
        name = self._loop(loop, "bind")
        self._record("bind", bind(self._func, name, thread_axis, self.render_errors),
                     (loop, thread_axis))

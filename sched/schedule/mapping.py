"""Mapping loops to the GPU: bind a loop to blockIdx.x/y/z or threadIdx.x/y/z.

The iterations of a bound loop run at the same time, on different thread blocks or threads, so
`bind` asks polyhedral/ the same question as `parallel`: no dependence, reductions included, may
be carried by the loop (the one rule, `polyhedral.legality.CONCURRENT_RULE`, also asked again
after every later step). A reduction is spread over threads with rfactor first (partial results
per thread in a buffer, then a final reduction over it), or, for one associative update block
whose whole reduction runs under the loop, by binding its reduce loop to threadIdx.x (a
cross-thread reduction: polyhedral/cross_thread.py; the lowering makes it an allreduce).

A function is one kernel: every loop bound to one axis gives that axis its extent, so loops
bound to the same axis must have the same extent (as the build requires). `bind` refuses a loop
whose extent differs from another loop's already bound to the axis, naming both, rather than
taking the largest with guards (TVM's choice): refusing is simple and sound, and splitting the
loops alike is the fix.
"""

from __future__ import annotations

from sched.errors import ScheduleError
from sched.ir.functor import collect
from sched.ir.nodes import THREAD_TAGS, For, IntImm, PrimFunc
from sched.polyhedral.kernel_stages import root_stages
from sched.schedule.base import LoopRV, ScheduleBase
from sched.schedule.loop_kinds import _set_kind
from sched.schedule.state import enclosing_loops, find_loop

GPU_TAGS = THREAD_TAGS      # vthread.x...: checked and lowered as serial loops


def bind(func: PrimFunc, loop_name: str, thread_axis: str, render: bool = True,
         check_rule: bool = True) -> PrimFunc:
    """`func` with loop `loop_name` bound to `thread_axis` (see Schedule.bind)."""
    if thread_axis not in GPU_TAGS:
        raise ScheduleError("bind", f"argument 'thread_axis': unknown axis {thread_axis!r}; "
                            f"expected one of {', '.join(GPU_TAGS)}")
    _check_thread_count(func, loop_name, thread_axis)
    _check_nested_block_axis(func, loop_name, thread_axis)
    _check_axis_extent(func, loop_name, thread_axis)
    return _set_kind(func, loop_name, "thread_binding", "bind", render, thread_tag=thread_axis,
                     check_rule=check_rule)


def _check_thread_count(func: PrimFunc, loop_name: str, thread_axis: str) -> None:
    """Refuse binding a loop of symbolic extent to a threadIdx axis: a thread block has a
    constant number of threads (blockIdx axes may be symbolic: the grid is sized per call)."""
    loop = find_loop(func, loop_name, "bind")
    if thread_axis.startswith("threadIdx") and not isinstance(loop.extent, IntImm):
        raise ScheduleError("bind", f"loop {loop_name!r} has the symbolic extent "
                            f"{loop.extent.script()}; thread counts must be constants: split it "
                            f"by a constant (sch.split({loop_name}, [None, 128])) and bind the "
                            f"inner loop to {thread_axis}, the outer one to a blockIdx axis")


def _check_axis_extent(func: PrimFunc, loop_name: str, thread_axis: str) -> None:
    """Refuse binding loop `loop_name` to `thread_axis` when another loop bound to that axis has
    a different extent: one kernel has one extent per axis. Loops of different root stages
    may differ: those stages become separate kernels (sched/lower/kernel_sequence.py)."""
    loop = find_loop(func, loop_name, "bind")
    stage = next((s for s in root_stages(func) if any(f is loop for f in collect(s, For))),
                 func.body)
    for other in collect(stage, For):
        if other is loop or other.kind != "thread_binding" or other.thread_tag != thread_axis:
            continue
        if not _same_extent(other.extent, loop.extent):
            smaller = isinstance(loop.extent, IntImm) and isinstance(other.extent, IntImm) \
                and loop.extent.value < other.extent.value
            # (splitting the smaller loop cannot reach the other's extent: audit helper-181
            # saw `sch.split(u, [None, 36])` advised for a loop of extent 1)
            advice = (f"bind a loop of extent {other.extent.script()} instead, or leave loop "
                      f"{loop_name!r} unbound" if smaller else
                      f"split them alike (e.g. sch.split({loop_name}, [None, "
                      f"{other.extent.script()}]) and bind the inner loop)")
            raise ScheduleError(
                "bind", f"loop {loop_name!r} (extent {loop.extent.script()}) and loop "
                f"{other.loop_var.name!r} (extent {other.extent.script()}, already bound to "
                f"{thread_axis}) would give {thread_axis} two extents; the loops of one axis "
                f"must agree: {advice}")


def _same_extent(a, b) -> bool:
    """Whether two loop extents are one number of threads: `32` and `T.int64(32)` are (a
    Relax function's int64 loops beside the int32 loops compute_at makes)."""
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return a.value == b.value
    return a == b


def _check_nested_block_axis(func: PrimFunc, loop_name: str, thread_axis: str) -> None:
    """Refuse binding a loop to a blockIdx axis that a loop around it or inside it is bound
    to: nested loops of one block axis would share one block index (the build refuses them)."""
    if not thread_axis.startswith("blockIdx"):
        return
    loop = find_loop(func, loop_name, "bind")
    nested = [n for n in enclosing_loops(func, loop) if n is not loop] + collect(loop.body, For)
    for other in nested:
        if other.kind == "thread_binding" and other.thread_tag == thread_axis:
            raise ScheduleError(
                "bind", f"loop {loop_name!r} and loop {other.loop_var.name!r} (already bound to "
                f"{thread_axis}) are nested: nested loops of one block axis would share one "
                f"block index and compute only part of the iterations; fuse the two loops and "
                f"bind the fused loop, or bind them to different axes (blockIdx.x, blockIdx.y, "
                f"blockIdx.z)")


class MappingPrimitives(ScheduleBase):
    """bind."""

    def bind(self, loop: LoopRV, thread_axis: str) -> None:
        """Run the iterations of `loop` on GPU thread blocks or threads.

        Requires: no dependence carried by the loop (a reduce loop needs rfactor first; a
        threadIdx loop may share a "shared" buffer, ordered by barriers, never a global one);
        the loop is not already parallel, vectorized or bound; every other loop bound to the
        same axis has the same extent. Launch dimensions come from the
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
        self._record("bind", bind(self._func, name, thread_axis, self.render_errors,
                                  not self._concurrency_deferred),
                     (loop, thread_axis))

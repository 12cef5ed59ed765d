"""How a loop runs: parallel, vectorize, unroll, and annotations.

Parallel and vectorize need iterations that do not depend on each other: polyhedral/ checks
the one rule for loops whose iterations run at the same time (`legality.CONCURRENT_RULE`:
no dependence carried by the loop, reductions included, except through storage private to
an iteration), the same rule `bind` asks and every later step asks again. Unroll never
changes the order and is always legal. Each function is pure: `(func, loop name, ...) -> new func`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from sched.errors import ScheduleError
from sched.ir.dtype import is_float
from sched.ir.functor import collect
from sched.ir.nodes import AnnotationValue, Block, For, IntImm, PrimFunc
from sched.ir.paths import rfactor_loop_of
from sched.polyhedral.cross_thread import (
    REDUCE_TAG,
    CrossThreadReduction,
    cross_thread_reduction,
)
from sched.polyhedral.legality import concurrency_violation, concurrent_kind, schedule_error
from sched.polyhedral.software_pipeline import KEYS as PIPELINE_KEYS
from sched.schedule.base import BlockRV, LoopRV, ScheduleBase
from sched.schedule.ordered_axes import check_loop_keeps_order
from sched.schedule.software_pipeline import check_pipeline_annotation
from sched.schedule.state import blocks_under, find_block, find_loop, replace
from sched.schedule.storage_align import DIM_ALIGN, storage_align_by_annotation


def _set_kind(func: PrimFunc, loop_name: str, kind: str, primitive: str, render: bool,
              thread_tag: str | None = None, check_rule: bool = True) -> PrimFunc:
    loop = find_loop(func, loop_name, primitive)
    if loop.kind not in ("serial", kind):
        if loop.kind == "thread_binding" and kind == "unrolled":
            raise ScheduleError(primitive, f"loop {loop_name!r} is already thread_binding "
                                f"({loop.thread_tag}): its iterations run on different threads, "
                                f"so there is nothing to unroll in one thread; a loop has one "
                                f"kind (split it and unroll the inner, serial loop)")
        raise ScheduleError(primitive, f"loop {loop_name!r} is already {loop.kind}; a loop has "
                            f"one kind")
    _refuse_cpu_and_gpu_loops(func, loop_name, kind, primitive)
    if kind in ("parallel", "vectorized", "thread_binding"):
        check_loop_keeps_order(loop, primitive, "run concurrently")
        pipelined = [key for key, _ in loop.annotations if key in PIPELINE_KEYS]
        if pipelined:
            raise ScheduleError(primitive, f"loop {loop_name!r} is software-pipelined "
                                f"({', '.join(pipelined)}): its iterations run one after "
                                f"another; sch.unannotate(loop, key) for each first, or make "
                                f"another loop {kind}")
        blocks = blocks_under(loop)
        if not blocks:
            raise ScheduleError(primitive, f"loop {loop_name!r} holds no block to run")
        # the rule as for the marked loop, asked of `func` (whose dependences are cached);
        # without `check_rule` (concurrency_checked_at_end) of the function at the end
        violation = concurrency_violation(
            func, loop_name, concurrent_kind(kind=kind, thread_tag=thread_tag),
            thread_tag) if check_rule else None
        if violation is not None:
            alternatives = ()
            verb = {"bind": "bind", "parallel": "parallelize",
                    "vectorize": "vectorize"}.get(primitive, primitive)
            dependence = violation.dependence
            if dependence is not None and dependence.is_reduction:
                if rfactor_loop_of(func, loop_name, dependence.sink.block.name):
                    alternatives = (f"sch.rfactor({loop_name}, factor_axis=0)  # then {verb} "
                                    f"the new loop of the factored block",)
                why = cross_thread_hint(func, loop, thread_tag)
                if why:         # the reason first, not after the IR (audit helper-45)
                    violation = dataclasses.replace(violation,
                                                    reason=f"{violation.reason}: {why}")
            elif dependence is not None and dependence.source.block is dependence.sink.block:
                alternatives = _tuple_reduction_hint(dependence.sink.block, loop_name, verb)
            raise schedule_error(primitive, violation, func, loop=loop_name, render=render,
                                 alternatives=alternatives)
    if kind == "vectorized" and not isinstance(loop.extent, IntImm):
        raise ScheduleError(primitive, f"loop {loop_name!r} has a symbolic extent "
                            f"{loop.extent.script()}; split it by a constant factor and "
                            f"vectorize the inner loop")
    new_loop = dataclasses.replace(loop, kind=kind, thread_tag=thread_tag)
    new_func = replace(func, loop, new_loop)
    _keep_cross_thread_reductions(func, new_func, primitive, loop_name,
                                  f"binding loop {loop_name!r} to {thread_tag}" if thread_tag
                                  else f"making loop {loop_name!r} {kind}")
    return new_func


def _keep_cross_thread_reductions(func: PrimFunc, new_func: PrimFunc, primitive: str,
                                  loop_name: str, change: str) -> None:
    """Refuse a change of a loop's kind that makes a cross-thread reduction of `func` (a
    reduce loop on threadIdx.x, polyhedral/cross_thread.py) no longer one: a serial reduce
    loop around it made concurrent, a loop around it bound to threadIdx.y with rows of
    threads that warps cannot hold, a vthread in the function. The concurrency rule accepted
    the reduce loop as one; it holds only while the reduction keeps that shape."""
    for loop in collect(func.body, For):
        if loop.kind != "thread_binding" or loop.thread_tag != REDUCE_TAG or \
                not isinstance(cross_thread_reduction(func, loop), CrossThreadReduction):
            continue
        after = find_loop(new_func, loop.loop_var.name, primitive)
        found = cross_thread_reduction(new_func, after)
        if not isinstance(found, CrossThreadReduction):
            raise ScheduleError(
                primitive, f"loop {loop.loop_var.name!r} is bound to threadIdx.x and reduces "
                f"across the threads of a block (a cross-thread reduction), which {change} "
                f"would break: {found}. Leave that loop as it is, or rfactor the reduction "
                f"(sch.rfactor) and bind the factored block's loops")


def _tuple_reduction_hint(block, loop_name: str, verb: str) -> tuple[str, ...]:
    """For a block that updates several accumulators together (argmax): how its reduction
    can still run concurrently, as the refusal's alternatives (none for other blocks)."""
    from sched.schedule.tuple_reducers import match_tuple_update

    update = match_tuple_update(block)
    if update is None:
        return ()
    why = (f"# block {block.name!r} reduces with {update.reducer.name}: concurrent "
           f"iterations cannot share its accumulators, and a cross-thread reduction takes one "
           f"associative update (+, *, min, max) only")
    if update.reducer.total_order and is_float(update.stores[1].buffer.dtype):
        return (why, "# rfactor takes it over floats once it keeps a NaN it holds: "
                     "`val >= v or val != val` (sch.rfactor says how)")
    return (why, f"sch.rfactor({loop_name}, factor_axis=0)  # (the outer part of a split "
                 f"reduce loop for a first-wins reducer) then {verb} the new loop of the "
                 f"factored block")


def cross_thread_hint(func: PrimFunc, loop: For, thread_tag: str | None) -> str:
    """Why binding the reduce `loop` to a thread axis is not a cross-thread reduction, for the
    refusal's reason ("" for other loop kinds)."""
    if not (thread_tag or "").startswith("threadIdx"):
        return ""
    if thread_tag != REDUCE_TAG:
        return f"a reduce loop reduces across threads only on {REDUCE_TAG}"
    found = cross_thread_reduction(func, loop)
    return "" if isinstance(found, CrossThreadReduction) else \
        f"it is not a cross-thread reduction on {REDUCE_TAG}: {found}"


def _refuse_cpu_and_gpu_loops(func: PrimFunc, loop_name: str, kind: str,
                              primitive: str) -> None:
    """A parallel loop (CPU threads) and loops bound to GPU threads in one function: the
    build refuses it (lower/thread_storage.py), so the step that makes it is refused (the
    fuzz hunt found every step accepting it, then the build refusing)."""
    other = {"parallel": "thread_binding", "thread_binding": "parallel"}.get(kind)
    if other is None:
        return
    found = next((lp for lp in collect(func.body, For) if lp.kind == other), None)
    if found is not None:
        cpu, gpu = (loop_name, found.loop_var.name) if kind == "parallel" else \
            (found.loop_var.name, loop_name)
        raise ScheduleError(primitive, f"loop {cpu!r} would be parallel (CPU threads) and loop "
                            f"{gpu!r} bound to GPU threads in one function, which no target "
                            f"builds: bind the loop to blockIdx/threadIdx instead of "
                            f"parallel, or schedule the function for the CPU only")


def parallel(func: PrimFunc, loop_name: str, render: bool = True,
             check_rule: bool = True) -> PrimFunc:
    return _set_kind(func, loop_name, "parallel", "parallel", render, check_rule=check_rule)


def vectorize(func: PrimFunc, loop_name: str, render: bool = True,
              check_rule: bool = True) -> PrimFunc:
    return _set_kind(func, loop_name, "vectorized", "vectorize", render, check_rule=check_rule)


def unroll(func: PrimFunc, loop_name: str) -> PrimFunc:
    return _set_kind(func, loop_name, "unrolled", "unroll", render=False)


def annotate(func: PrimFunc, target: str, is_block: bool, key: str,
             value: AnnotationValue, render: bool = True) -> PrimFunc:
    """Add `key = value` to the annotations of a loop or a block (replacing an older value);
    a list of ints is kept as a tuple. Software-pipeline keys are checked
    (schedule/software_pipeline.py)."""
    if is_block and key == DIM_ALIGN:
        return storage_align_by_annotation(func, target, value)
    if not isinstance(key, str) or not key:
        raise ScheduleError("annotate", f"argument 'key': expected a non-empty string, got "
                            f"{key!r}")
    value = _annotation_value(value)
    if is_block:
        realize = find_block(func, target, "annotate")
        block: Block = realize.block
        annotations = tuple((k, v) for k, v in block.annotations if k != key) + ((key, value),)
        new = dataclasses.replace(realize, block=dataclasses.replace(block,
                                                                    annotations=annotations))
        return replace(func, realize, new)
    loop: For = find_loop(func, target, "annotate")
    annotations = tuple((k, v) for k, v in loop.annotations if k != key) + ((key, value),)
    new_func = replace(func, loop, dataclasses.replace(loop, annotations=annotations))
    check_pipeline_annotation(new_func, target, key, render)
    _keep_cross_thread_reductions(func, new_func, "annotate", target,
                                  f"annotating loop {target!r} with {key!r}")
    return new_func


def _annotation_value(value):
    """`value` as an annotation keeps it, one the IR prints and reads back: a finite number (a
    numpy one as the Python number), a string, a bool, or a list or tuple of ints (kept as a
    tuple; a trace prints it as a list, which reads back the same: helper-99)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, list | tuple):
        items = tuple(v.item() if isinstance(v, np.generic) else v for v in value)
        if all(type(v) is int for v in items):
            return items
    elif isinstance(value, str | bool | int) or isinstance(value, float) and \
            math.isfinite(value):
        return value
    raise ScheduleError("annotate", f"argument 'value': expected an int, a finite float, a "
                        f"str, a bool or a list of ints (what the IR prints and reads back), "
                        f"got {value!r}")


class LoopKindPrimitives(ScheduleBase):
    """parallel, vectorize, unroll, annotate."""

    def parallel(self, loop: LoopRV) -> None:
        """Run the iterations of a loop in parallel (OpenMP threads on the C target).

        Requires: no dependence is carried by the loop (a reduce loop needs rfactor first).
        Also known as: `parallel` in Halide and TVM.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((8, 5), name="A")
        >>> k = te.reduce_axis((0, 5), name="k")
        >>> B = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]))
        >>> i, k = sch.get_loops(sch.get_block("B"))
        >>> sch.parallel(i)
        >>> print(sch.func.script().splitlines()[5])
                for i in T.parallel(8):
        """
        name = self._loop(loop, "parallel")
        self._record("parallel", parallel(self._func, name, self.render_errors,
                                          not self._concurrency_deferred),
                     (loop,))

    def vectorize(self, loop: LoopRV) -> None:
        """Run the iterations of a loop as SIMD lanes (`omp simd` on the C target).

        Requires: no dependence is carried by the loop; a constant extent. On the C target
        a loop whose accesses are contiguous or invariant becomes explicit 8-lane SIMD code.
        Also known as: `vectorize` in Halide and TVM. Example: see `annotate`.
        """
        name = self._loop(loop, "vectorize")
        self._record("vectorize", vectorize(self._func, name, self.render_errors,
                                            not self._concurrency_deferred),
                     (loop,))

    def unroll(self, loop: LoopRV) -> None:
        """Unroll a loop.

        Requires: nothing (the order does not change). Also known as: `unroll` in Halide and
        TVM. Example: see `annotate`.
        """
        name = self._loop(loop, "unroll")
        self._record("unroll", unroll(self._func, name), (loop,))

    def annotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str, ann_val) -> None:
        """Attach `key = value` to a block or a loop (read by later passes and the
        autoscheduler); printed in the script.

        Requires: a string key; an int, float, str or bool value, or a list of ints (a new
        value replaces an old one). The software-pipeline keys (`software_pipeline_stage`,
        `software_pipeline_order`, `software_pipeline_async_stages`) must fit the loop body
        and keep its dependences (schedule/software_pipeline.py). Also known as: `annotate`
        in TVM.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((4, 16), name="A")
        >>> B = te.compute((4, 16), lambda i, j: A[i, j] + 1.0, name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]))
        >>> i, j = sch.get_loops(sch.get_block("B"))
        >>> sch.vectorize(j)
        >>> sch.unroll(i)
        >>> sch.annotate(i, "note", "rows")
        >>> print("\\n".join(sch.func.script().splitlines()[5:7]))
                for i in T.unroll(4, annotations={"note": "rows"}):
                    for j in T.vectorized(16):
        """
        target, key, value = block_or_loop, ann_key, ann_val        # TVM's argument names
        is_block = isinstance(target, BlockRV)
        name = self._block(target, "annotate", "block_or_loop") if is_block \
            else self._loop(target, "annotate", "block_or_loop")
        self._record("annotate", annotate(self._func, name, is_block, key, value,
                                          self.render_errors),
                     (target, key, value))

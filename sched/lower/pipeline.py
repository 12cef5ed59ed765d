"""The lowering pipeline: from a scheduled PrimFunc (block IR) to the loop IR code generators
take. Read `lower` for the passes in order; each pass's module says why it sits where it does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sched.ir.nodes import PrimFunc
from sched.ir.simplify import simplify
from sched.ir.verify import VerifyError, verify
from sched.lower.align_storage import align_storage
from sched.lower.bool_arithmetic import lower_bool_arithmetic
from sched.lower.compact_buffers import compact_buffers
from sched.lower.convert_blocks import convert_blocks_to_loops
from sched.lower.cross_thread_reduction import lower_cross_thread_reductions
from sched.lower.flatten_buffers import flatten_buffers
from sched.lower.gpu_threads import unify_thread_loops
from sched.lower.insert_barriers import insert_barriers
from sched.lower.kernel_sequence import join_kernels, split_kernels
from sched.lower.lower_init import lower_reduction_init
from sched.lower.partition_loops import partition_guarded_loops
from sched.lower.plan_buffer_allocation import plan_buffer_allocation
from sched.lower.serialize_vthreads import serialize_virtual_threads
from sched.lower.simplify_indices import simplify_indices
from sched.lower.software_pipeline import check_software_pipelines, inject_software_pipelines
from sched.lower.thread_phases import emulate_threads
from sched.lower.uniform_barriers import uniform_barriers
from sched.lower.warp_layout import restore_warp_tiles
from sched.lower.while_loops import check_while_loops
from sched.lower.wide_integers import widen_overflowing_integers
from sched.lower.wmma_fragments import layout_wmma_fragments

logger = logging.getLogger("sched.lower")


def fold_constants(func: PrimFunc) -> PrimFunc:
    """Constants folded and identities applied everywhere (`7 + 1`, `p * 1` in conditions and
    values too; simplify_indices has done the indices with isl). The symbolic dims are at
    least 1 (checked at every call)."""
    return simplify(func, func.symbolic_vars)

Pass = Callable[[PrimFunc], PrimFunc]


def lower(func: PrimFunc, *, target: str = "c", debug: bool = False,
          thread_order: str | None = None) -> PrimFunc:
    """`func` lowered to loop IR for `target` ("c" or "cuda"): no blocks, one-dimensional
    buffer accesses, simplified indices, barriers where threads share memory.

    The result has the same parameters as `func`; a code generator emits it statement by
    statement. On the C target a GPU schedule's thread loops are split into phases at its
    barriers, so that it computes what the GPU would, running blocks and threads in
    `thread_order` (forward, reverse, shuffle[:seed]; default SCHED_THREAD_ORDER) to expose
    races.
    The IR is verified on entry and exit (and after every pass when `debug`).
    The logger "sched.lower" reports each pass's time at DEBUG level, and the IR after each
    pass that changed it.
    """
    _verify(func, "the input of lower()")
    if target == "c":           # several kernels: each lowered alone, run one after the other
        plan = split_kernels(func)
        if plan is not None and len(plan.kernels) > 1:
            joined = join_kernels(func, [lower(k, target=target, debug=debug,
                                               thread_order=thread_order)
                                         for k in plan.kernels], plan.workspace)
            _verify(joined, "the output of lower()")
            return joined
    run = _PassRunner(debug)
    func = run(check_software_pipelines, func)
    func = run(serialize_virtual_threads, func)
    func = run(plan_buffer_allocation, func)
    func = run(compact_buffers, func)
    func = run(align_storage, func)

    def lower_cross_thread_reductions_for_target(f: PrimFunc) -> PrimFunc:
        return lower_cross_thread_reductions(f, target)

    lower_cross_thread_reductions_for_target.__name__ = "lower_cross_thread_reductions"
    func = run(lower_cross_thread_reductions_for_target, func)
    func = run(lower_reduction_init, func)
    func = run(convert_blocks_to_loops, func)
    func = run(unify_thread_loops, func)

    def inject_software_pipelines_for_target(f: PrimFunc) -> PrimFunc:
        return inject_software_pipelines(f, target)

    inject_software_pipelines_for_target.__name__ = "inject_software_pipelines"
    func = run(inject_software_pipelines_for_target, func)
    func = run(check_while_loops, func)
    func = run(insert_barriers, func)
    func = run(uniform_barriers, func)
    if target == "c":
        def emulate_threads_in_order(f: PrimFunc) -> PrimFunc:
            return emulate_threads(f, thread_order)

        emulate_threads_in_order.__name__ = "emulate_threads"
        func = run(emulate_threads_in_order, func)
        func = run(partition_guarded_loops, func)
    else:
        func = run(restore_warp_tiles, func)
        func = run(layout_wmma_fragments, func)
    func = run(flatten_buffers, func)
    func = run(simplify_indices, func)
    func = run(fold_constants, func)
    func = run(lower_bool_arithmetic, func)
    func = run(widen_overflowing_integers, func)
    _verify(func, "the output of lower()")
    return func


class _PassRunner:
    """Runs one pass: times it, logs the IR when it changed, verifies after it in debug mode."""

    def __init__(self, debug: bool) -> None:
        self.debug = debug

    def __call__(self, pass_function: Pass, func: PrimFunc) -> PrimFunc:
        name = pass_function.__name__
        start = time.perf_counter()
        result = pass_function(func)
        elapsed_ms = (time.perf_counter() - start) * 1e3
        changed = result is not func and result != func
        logger.debug("%s: %.2f ms%s", name, elapsed_ms, "" if changed else " (no change)")
        if changed and logger.isEnabledFor(logging.DEBUG):
            logger.debug("after %s:\n%s", name, _show(result))
        if self.debug:
            _verify(result, f"the output of {name}")
        return result


def _show(func: PrimFunc) -> str:
    try:
        return func.script()
    except ImportError:  # no printer yet: the dataclass form
        return repr(func)


def _verify(func: PrimFunc, what: str) -> None:
    try:
        verify(func)
    except VerifyError as error:
        raise VerifyError(f"{what}: {error}") from error

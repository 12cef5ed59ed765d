"""A schedule with no measurement: the candidate the analytical cost model ranks first among a
few random samples of every sketch. `sched.build(func, target="cuda")` uses it for a function
with no thread bindings and no tuning record, so a first GPU kernel needs no hand-written
bindings.

    sch = default_schedule(func, target="cuda")      # a Schedule; sch.trace says what it did
"""

from __future__ import annotations

import random
import time

from sched.autoscheduler.space.sampler import SketchRefused
from sched.autoscheduler.space.sketch import SearchSpace
from sched.autoscheduler.workload import Workload
from sched.errors import ScheduleError

DEFAULT_SAMPLES = 8
DEFAULT_SECONDS = 10.0     # drawing stops past this once a candidate is drawn


def default_schedule(func, target: str = "cuda", arch: str | None = None,
                     samples: int = DEFAULT_SAMPLES, seed: int = 0):
    """The best of `samples` random candidates (or of those drawn in DEFAULT_SECONDS, at
    least one) by the memory-movement model (for CUDA, the best that lowers); for CUDA,
    when no sketch gives one (symbolic shapes), each block's spatial loops spread over
    threads, else every stage serial on one thread."""
    from sched.autoscheduler.cost import MemoryMovementModel

    workload = Workload.of(func, target, arch)
    start = time.monotonic()
    space = SearchSpace(workload, seed=seed)
    rng = random.Random(seed)
    drawn = list(space.validated)[:samples]     # each sketch's first sample
    for attempt in range(samples * 3):
        # the samples of a conv2d for the GPU take seconds each (audit helper-92: minutes
        # for a default schedule): past DEFAULT_SECONDS the model ranks what is drawn
        if len(drawn) >= samples or not space.sketches or \
                (drawn and time.monotonic() - start > DEFAULT_SECONDS):
            break
        try:
            drawn.append(space.sample(attempt % len(space.sketches), None, rng,
                                      pipelines=False))
        except (ScheduleError, SketchRefused):
            continue
    if drawn:
        scores = MemoryMovementModel(target).predict(workload, [s.schedule.func for s in drawn])
        ranked = sorted(range(len(drawn)), key=lambda i: -scores[i])
        for index in ranked:
            if target != "cuda" or _lowers_for_cuda(drawn[index].schedule.func):
                return drawn[index].schedule
    if target == "cuda":
        for fallback in (_spread_schedule, _one_thread_schedule):
            found = fallback(workload)
            if found is not None:
                return found
    # (sched.tune takes constant shapes only: with symbolic ones it is no way out, audit
    # helper-118; the C target runs a function as written)
    way_out = " or tune it with sched.tune" if not func.symbolic_vars else (
        ", or build it as written (sched.build(func, target='c') runs it unscheduled)"
        if target != "cuda" else "")
    raise ScheduleError("build", f"no default {target} schedule applies to "
                        f"{workload.name!r}{_cpu_steps(func) if target == 'cuda' else ''}: "
                        f"schedule it by hand" + (" (bind its loops to blockIdx/threadIdx)"
                                                  if target == "cuda" else "") + way_out)


def _cpu_steps(func) -> str:
    """Why a GPU sketch cannot start from `func`, where a step for the CPU is the reason (audit
    helper-105: a parallel loop gave the generic message only)."""
    from sched.ir.functor import collect
    from sched.ir.nodes import For

    for loop in collect(func.body, For):
        if loop.kind == "parallel":
            return (f" (loop '{loop.loop_var.name}' is parallel, a CPU loop kind no GPU "
                    f"schedule keeps: leave it serial, or bind it to blockIdx/threadIdx "
                    f"yourself)")
        pragma = next((key for key, _ in loop.annotations if key.startswith("pragma_")), None)
        if pragma is not None:
            return (f" (loop '{loop.loop_var.name}' has the CPU annotation {pragma!r}: "
                    f"unannotate it for the GPU)")
    return ""


def _lowers_for_cuda(func) -> bool:
    """Whether `func` passes what the CUDA build asks before compiling: its kernels (a local
    buffer may not join two), the thread-redundancy rule, local values read on their own
    threads, the lowering, the launch (every store under a thread loop)."""
    from sched.errors import BuildError
    from sched.ir.verify import VerifyError
    from sched.lower.gpu_threads import launch_config
    from sched.lower.kernel_sequence import split_kernels
    from sched.lower.pipeline import lower
    from sched.lower.thread_redundancy import redundant_update
    from sched.polyhedral.kernel_stages import local_read_by_another_thread

    try:
        if redundant_update(func) is not None or local_read_by_another_thread(func):
            return False
        plan = split_kernels(func)
        for kernel in plan.kernels if plan is not None else (func,):
            # the launch: every store under a thread loop (audit helper-92: a scan's sample
            # whose binds were refused lowered, and the build then refused it)
            launch_config(lower(kernel, target="cuda"))
    except (ScheduleError, BuildError, VerifyError):
        # VerifyError: a kernel of the split reads a workspace buffer in a loop bound or
        # predicate it does not declare (audit helper-57): this sample does not lower
        return False
    return True


SPREAD_THREADS = 256


def _spread_schedule(workload):
    """Each block's leading spatial loops spread over thread blocks of SPREAD_THREADS threads
    (threads_gpu.bind_threads: a loop of symbolic extent split into threads, others bound to
    blockIdx.y and .z), its reduction serial in each thread: for the functions the sketches
    do not take (symbolic shapes). None if that does not lower."""
    from sched.autoscheduler.space.analysis import block_info, leaf_blocks
    from sched.autoscheduler.space.threads_gpu import bind_threads

    sch = workload.base_schedule()
    try:
        with sch.concurrency_checked_at_end():
            for name in leaf_blocks(sch.func):
                info = block_info(sch.func, name)
                bind_threads(sch, info, _threads_for(sch, info))
    except (ScheduleError, SketchRefused):
        return None
    return sch if _lowers_for_cuda(sch.func) else None


def _threads_for(sch, info) -> int:
    """SPREAD_THREADS, or fewer (a power of two, at least a warp) where the innermost leading
    spatial loop, the one split into threads, has a smaller constant extent. Each root stage
    is a kernel of its own, so each may have its own count."""
    from sched.ir.nodes import IntImm
    from sched.schedule.state import find_loop

    extent = find_loop(sch.func, info.spatial[-1], "bind").extent if info.spatial else None
    if not isinstance(extent, IntImm) or extent.value >= SPREAD_THREADS:
        return SPREAD_THREADS
    return max(32, 1 << (extent.value - 1).bit_length())


def _one_thread_schedule(workload):
    """Every stage serial on one thread of a kernel of its own (threads_gpu.run_in_one_thread):
    slow, but legal for every function the sketches cannot schedule. None if it does not
    lower either."""
    from sched.autoscheduler.space.threads_gpu import run_in_one_thread
    from sched.schedule.state import block_names

    sch = workload.base_schedule()
    for name in block_names(sch.func):
        if name != "root":
            try:
                run_in_one_thread(sch, name)
            except ScheduleError:       # a block nested in one bound already: covered
                continue
    return sch if _lowers_for_cuda(sch.func) else None

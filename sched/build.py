"""`sched.build`: from a (scheduled) PrimFunc to a callable kernel for a target."""

from __future__ import annotations

import warnings

from sched.errors import BuildError, ScheduleError
from sched.ir.module import IRModule
from sched.ir.nodes import PrimFunc
from sched.lower.build_checks import refuse_out_of_bounds, refuse_races, refuse_unbound_dims
from sched.targets import BUILD_TARGETS, parse_target


def build(func, target: str = "c", *, arch: str | None = None,
          compiler: str = "nvrtc", debug: bool = False, check_bounds: str = "static",
          thread_order: str | None = None, fast_math: bool = False, db=None,
          sanitize: str | None = None, check_races: bool = True, extern_c: str = ""):
    """A kernel computing `func` on `target`: call it with the arguments in parameter order.

    Targets: "c" (the CPU, through gcc; takes numpy arrays and CPU torch tensors) and "cuda"
    (NVRTC or nvcc to a cubin for `arch`, e.g. "sm_90": the GPU's by default; takes torch CUDA
    tensors), and "cuda-emu": the CUDA C of the "cuda" target, compiled by g++ against sched's
    emulation header and run on the CPU with one host thread per CUDA thread (numpy arrays
    and CPU torch tensors; see `sched.cuda.emu`). TVM's spelling "cuda -arch=sm_90" is
    accepted. `debug` verifies the IR after
    every lowering pass. The kernel has `.source` (generated code), `.func` and `.lowered`;
    a CUDA kernel also `.cubin` and `.resources`. `func` may be a Schedule: its function is
    built, and a compile error then lists the schedule's steps.

    `check_bounds` (see `sched.polyhedral.in_bounds`): "static" (the default) refuses a function
    that accesses out of bounds for every value of its symbolic dims (an `OutOfBoundsError`
    naming the access and an offending element) and checks, at each call, the condition on
    the dims' values under which every access is in bounds (Halide-style entry checks);
    accesses isl cannot prove (a non-affine or indirect index) are left unchecked. "strict"
    also refuses those. "off" checks nothing.

    `thread_order` (C target only): the order in which a GPU schedule's thread blocks and the
    threads of each phase run on the CPU: "forward", "reverse" or "shuffle[:seed]" (default:
    the SCHED_THREAD_ORDER environment variable, else forward). A legal schedule computes the
    same result in every order; a race between threads shows as a difference.

    `fast_math` (off by default): cheaper vector math in vectorized loops on the C target (a
    shorter exp polynomial, results below 2^-126 flushed to 0, used by tanh, erf and sigmoid
    too; the hardware rsqrt estimate with one Newton step; x / s for a lane-invariant s as
    x * (1 / s)), with no compiler flag changed; the error of each function, exact and fast,
    is stated in `sched.c.vector_math`. On CUDA: NVRTC's `--use_fast_math`. The emulator
    ("cuda-emu") computes every math function exactly either way.

    `sanitize` ("cuda-emu" only): "thread" runs the kernel under ThreadSanitizer, so that a
    data race on global or shared memory is an EmulationError with both accesses (default:
    the SCHED_EMU_SANITIZE environment variable, else none). Deadlocks at barriers are
    reported in every mode.

    `check_races` (on by default): every loop whose iterations run at the same time
    (parallel, vectorized, bound to blockIdx or threadIdx) is checked by the rule schedule
    steps use (`sched.polyhedral.concurrency`), so a function written with such loops by hand
    (TVMScript's `T.parallel`, `T.thread_binding`) that races is a BuildError naming the loop
    and the dependence, as `sch.parallel` would refuse it (stores written outside any block,
    lowered-IR style, are not statements of the model and go unchecked, as do loops inside a
    block's body). For a function a
    Schedule made, the answers are remembered and the check costs about a millisecond; the
    autoscheduler's builders, whose candidates were checked step by step, pass False.

    `extern_c`: the code of the functions that opaque calls (`T.call_extern("float32", "f",
    ...)`, `T.call_packed`) call, as C for "c" and CUDA device code for "cuda"/"cuda-emu",
    placed before the kernel (with the #includes it needs); without it a call is to a
    function the compiler already knows (`expf`, `__expf`...).

    `db` (a tuning database, see `sched.tune`): the best record of this function (and, for a
    Schedule, its steps) on this target is applied first. Without one, a CUDA function with
    no thread bindings gets the default schedule the cost model picks
    (`sched.autoscheduler.default`), with a note saying so; one whose bound blocks leave a
    kernel unbound gets it for those blocks.
    """
    from sched.schedule import Schedule

    target, arch = parse_target(target, arch, BUILD_TARGETS)
    if thread_order is not None and target == "cuda-emu":
        raise ValueError("build: thread_order applies to the C target only (the emulator "
                         "runs a block's threads at once, as host threads)")
    if sanitize is not None and target != "cuda-emu":
        raise ValueError(f"build: sanitize applies to the \"cuda-emu\" target only, not "
                         f"{target!r}")
    if db is not None:
        # the emulator runs the code the "cuda" target ships: the same records apply
        func = _best_recorded(func, "cuda" if target == "cuda-emu" else target, arch, db)
    trace = original = None
    if isinstance(func, Schedule):
        func, trace, original = func.func, func.trace, func.original_func
    if isinstance(func, IRModule):          # "main" or the only function
        func = func.main_function("build")
    if not isinstance(func, PrimFunc):
        raise TypeError(f"build: expected a PrimFunc, got {type(func).__name__}")
    if trace is None:
        # a function as written (a Schedule's was verified at each step): what the verifier
        # refuses (a block variable in its own T.where) would reach isl as a syntax error
        from sched.ir.verify import verify

        verify(func)
    if target in ("cuda", "cuda-emu") and not _has_thread_bindings(func):
        original = func
        func, trace = _default_cuda(func, arch)
    elif target in ("cuda", "cuda-emu") and _has_unbound_stage(func):
        # the blocks the user left unbound are filled in (audit helper-105: refused with
        # "not under any loop bound to blockIdx or threadIdx"); where no default schedule
        # applies, the build says what is unbound
        try:
            filled, filled_trace = _default_cuda(func, arch, partly=True)
        except ScheduleError:
            pass
        else:
            original, func, trace = func, filled, filled_trace
    try:
        return _build_for_target(func, target, arch, compiler, debug, check_bounds,
                                 thread_order, fast_math, sanitize, check_races, trace,
                                 extern_c)
    except BuildError as error:
        from sched.cuda.arch_features import ArchFeatureError

        narrowed = None
        if trace is not None and len(trace) and isinstance(error, ArchFeatureError):
            narrowed = error.blame(trace)
        elif trace is not None and len(trace) and original is not None:
            from sched.schedule.blame import narrow_compile_error

            narrowed = narrow_compile_error(str(error), original, trace, func)
        if narrowed is None:
            raise
        # the step named: the whole schedule (which the CUDA build appends) is not needed
        from sched.cuda.build import WHOLE_SCHEDULE

        message = str(error).split(f"\n\n{WHOLE_SCHEDULE}")[0]
        error.args = (f"{message}\n\n{narrowed}",)      # its type kept
        raise


def _build_for_target(func, target, arch, compiler, debug, check_bounds, thread_order,
                      fast_math, sanitize, check_races, trace, extern_c):
    refuse_unbound_dims(func)
    refuse_out_of_bounds(func, check_bounds)
    if check_races:
        refuse_races(func)
    if target == "c":
        from sched.c.kernel import build_c

        kernel = build_c(func, debug=debug, thread_order=thread_order, fast_math=fast_math,
                         extern_c=extern_c)
    elif target == "cuda-emu":
        from sched.cuda.emu.build import build_cuda_emu

        kernel = build_cuda_emu(func, debug=debug, trace=trace, sanitize=sanitize,
                                extern_c=extern_c)
    else:
        if thread_order is not None:
            raise ValueError("build: thread_order applies to the C target only (a GPU runs "
                             "its threads in its own order)")
        from sched.cuda.build import build_cuda

        kernel = build_cuda(func, arch=arch, compiler=compiler, debug=debug, trace=trace,
                            fast_math=fast_math, extern_c=extern_c)
    if check_bounds == "off":
        if hasattr(kernel, "disable_entry_check"):
            kernel.disable_entry_check()
        elif getattr(kernel, "_binder", None) is not None:
            kernel._binder.entry_check = None
    return kernel


def _best_recorded(func, target: str, arch: str | None, db):
    """The schedule of the best record of `func` in `db` (replayed, so checked), else
    `func` as given, with a warning (a missing file is not created)."""
    from pathlib import Path

    from sched.autoscheduler.database import Database
    from sched.autoscheduler.workload import Workload
    from sched.schedule import Schedule, Trace

    if str(db) != ":memory:" and not Path(db).expanduser().is_file():
        warnings.warn(f"build: no tuning database {str(db)!r} (no such file): built without a "
                      f"tuning record", stacklevel=3)
        return func
    with Database(db) as database:
        record = database.best_for(func, target, arch)
        if record is None and isinstance(func, PrimFunc):
            # the function of a Schedule that was tuned (tune(sch), then build(sch.func)):
            # its records replay on the function as written, with the user's steps first
            tuned = database.tuned_schedule_giving(func, target, arch)
            if tuned is not None:
                func, record = tuned, database.best_for(tuned, target, arch)
    if record is None:
        name = getattr(getattr(func, "func", func), "name", "the function")
        warnings.warn(f"build: {str(db)!r} holds no record of {name!r} on {target}"
                      f"{' ' + arch if arch else ''} (tuned another function, or with other "
                      f"steps?): built without a tuning record", stacklevel=3)
        return func
    if not isinstance(func, Schedule | PrimFunc):
        return func
    original = Workload.of(func, target, arch).func
    try:    # replayed as the search applied it (the rule of concurrent loops asked at the end)
        return Trace.from_json(record.trace_json).apply(original,
                                                        concurrency_checked_at_end=True)
    except (ScheduleError, ValueError, KeyError, TypeError, AttributeError) as error:
        # a record another sched wrote, or a database edited: the function still builds
        name = getattr(getattr(func, "func", func), "name", "the function")
        first_line = next(iter(str(error).splitlines()), "")
        warnings.warn(f"build: the best record of {name!r} in {str(db)!r} does not replay on "
                      f"it ({type(error).__name__}: {first_line}): built "
                      f"without a tuning record; tune it again into this database (sched.tune"
                      f"(..., db=...)) to replace the record", stacklevel=3)
        return func


def _has_thread_bindings(func: PrimFunc) -> bool:
    from sched.ir.functor import collect
    from sched.ir.nodes import For

    return any(loop.kind == "thread_binding" for loop in collect(func.body, For))


def _has_unbound_stage(func: PrimFunc) -> bool:
    """Whether a root stage of `func` (a kernel of its own) stores under no thread binding:
    the blocks a user left unscheduled beside bound ones."""
    from sched.ir.functor import collect
    from sched.ir.nodes import BufferStore, For
    from sched.polyhedral.kernel_stages import root_stages

    return any(collect(stage, BufferStore) and not any(
        loop.kind == "thread_binding" for loop in collect(stage, For))
        for stage in root_stages(func))


def _default_cuda(func: PrimFunc, arch: str | None, partly: bool = False):
    from sched.autoscheduler.default import default_schedule

    sch = default_schedule(func, "cuda", arch)
    what = "has blocks no thread binding covers" if partly else "has no thread bindings"
    warnings.warn(f"build: {func.name!r} {what} and no tuning record: applied the default "
                  f"schedule the cost model picked (sched.tune finds faster ones; "
                  f"sched.autoscheduler.default.default_schedule(func).trace shows its "
                  f"steps)", stacklevel=3)
    return sch.func, sch.trace

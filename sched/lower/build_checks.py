"""The checks `sched.build` asks of a function before lowering it, which `sched.tune` asks too
(a function build refuses as given gives no candidate): its accesses in bounds
(`check_bounds`), and no loop whose iterations run at the same time racing (`check_races`).
"""

from __future__ import annotations

import warnings

from sched.errors import BuildError, ConservativeAnalysisWarning, UnmodelledError
from sched.ir.nodes import PrimFunc

CHECK_BOUNDS = ("static", "strict", "off")


def refuse_unbound_dims(func: PrimFunc) -> None:
    """Refuse a symbolic dim no argument gives (`(16 * n,)` its only use): every call failed
    (audit helper-180)."""
    from sched.arguments import unbound_dim_message, unbound_dims

    unbound = unbound_dims(func)
    if unbound:
        raise BuildError(f"build: {unbound_dim_message(func, unbound[0])}")


def refuse_out_of_bounds(func: PrimFunc, check_bounds: str = "static") -> None:
    """Refuse `func` when it accesses out of bounds (see build's `check_bounds`)."""
    if check_bounds not in CHECK_BOUNDS:
        raise ValueError(f"build: check_bounds must be one of "
                         f"{', '.join(repr(c) for c in CHECK_BOUNDS)}, got {check_bounds!r}")
    if check_bounds == "off":
        return
    from sched.polyhedral.in_bounds import bounds_report, check_in_bounds, out_of_bounds_error
    from sched.polyhedral.scalar_wrap import variables_past_magnitude

    past = variables_past_magnitude(func)
    if past:
        raise BuildError(f"build: function '{func.name}': the int64 variable '{past[0]}' "
                         f"takes values past 2**40 in magnitude, where the compiler no longer "
                         f"reads index arithmetic exactly (so cannot prove accesses in "
                         f"bounds): loop from 0 and add the offset in the index, or pass "
                         f"check_bounds='off'")

    found = check_in_bounds(func, strict=check_bounds == "strict")
    if found is not None:
        raise out_of_bounds_error(func, found, "build")
    report = bounds_report(func)
    # neither proven in bounds nor checked when the kernel runs: said, not refused
    _warn_unchecked(func, report.possible, "Such an access is under a condition the compiler "
                    "cannot read (a load, a bool parameter, a narrowing cast), so it is "
                    "neither proven in bounds nor checked when the kernel runs: make the "
                    "condition affine")                  # (audit helpers 113, 114)
    _warn_unchecked(func, report.unread, "Such an access is neither proven in bounds nor "
                    "checked when the kernel runs: write the index in int32 or int64 "
                    "arithmetic of the loops and scalars")  # (audit helpers 117, 125)


def _warn_unchecked(func: PrimFunc, accesses: tuple[str, ...], why: str) -> None:
    """One ConservativeAnalysisWarning naming the first of `accesses` (and how many more)."""
    if accesses:
        more = f" (and {len(accesses) - 1} more)" if len(accesses) > 1 else ""
        warnings.warn(ConservativeAnalysisWarning(
            f"build: function '{func.name}': {accesses[0]}{more}. {why}, or pass "
            f"check_bounds='strict' to refuse such functions"), stacklevel=5)


def refuse_races(func: PrimFunc) -> None:
    """Refuse `func` when a loop that runs its iterations at the same time lets them race
    (see build's `check_races`)."""
    from sched.lower.thread_redundancy import redundant_update
    from sched.polyhedral.concurrency import check_concurrent_loops
    from sched.polyhedral.kernel_stages import local_read_by_another_thread

    reason = redundant_update(func) or local_read_by_another_thread(func)
    if reason is not None:
        raise BuildError(f"build: {reason}")
    try:
        found = check_concurrent_loops(func)
    except UnmodelledError as error:
        raise BuildError(f"build: cannot check the concurrent loops of {func.name!r}: "
                         f"{error}. To build it unchecked, pass check_races=False") from None
    if found is None:
        return
    loop, violation = found
    why = _not_cross_thread(func, loop)
    raise BuildError(f"build: the iterations of loop {loop!r} of {func.name!r} run at the same "
                     f"time but depend on each other: {violation}{why}; make the loop serial, or "
                     f"schedule the function with sched.Schedule (sch.parallel, sch.bind, ... "
                     f"refuse such a loop with the same reason, and rfactor or a cross-thread "
                     f"reduction may make a reduction concurrent)")


def _not_cross_thread(func: PrimFunc, loop_name: str) -> str:
    """For a reduce loop bound to threadIdx.x: why it is not a cross-thread reduction (audit
    helper-186: the build named only the dependence), else ""."""
    from sched.ir.functor import collect
    from sched.ir.nodes import For
    from sched.polyhedral.cross_thread import (
        REDUCE_TAG,
        CrossThreadReduction,
        cross_thread_reduction,
    )

    loop = next((lp for lp in collect(func.body, For) if lp.loop_var.name == loop_name), None)
    if loop is None or loop.kind != "thread_binding" or loop.thread_tag != REDUCE_TAG:
        return ""
    found = cross_thread_reduction(func, loop)
    return "" if isinstance(found, CrossThreadReduction) else \
        f" (not a cross-thread reduction on {REDUCE_TAG}: {found})"

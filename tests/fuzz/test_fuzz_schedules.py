"""The program fuzzer: random programs (programs.py), random steps from every primitive
(steps.py), checked against `sched.interpret` of the original (check.py).

Every step is taken or refused with a ScheduleError; whatever is taken must leave the result
unchanged when interpreted with concurrent loops in every order and when built for C. The
number of examples comes from SCHED_FUZZ_EXAMPLES (profile.py); known holes are left out
(known_holes.py). With SCHED_FUZZ_DEFER=1 (`hunt --deferred`) the random steps run inside
`sch.concurrency_checked_at_end()`: the rule of concurrent loops is asked at the end only
(the schedule goes back to its state before the steps when it refuses them there).
"""

from __future__ import annotations

import os

from hypothesis import assume, event, given
from hypothesis import strategies as st

import sched
from sched.errors import ScheduleError
from sched.ir import For, collect
from sched.ir.verify import verify
from tests.fuzz.check import (
    Finding,
    check_c,
    check_cuda_emu,
    check_interpreted,
    check_round_trip,
    oracle,
    reproducer,
)
from tests.fuzz.profile import fuzz_settings
from tests.fuzz.programs import programs
from tests.fuzz.steps import apply_random_step
from tests.fuzz.steps_gpu import apply_gpu_recipe
from tests.fuzz.steps_more import sampling_steps


def schedule(program, data, log: list[str]) -> sched.Schedule | None:
    """A Schedule of the program after 1-8 random steps (None if Schedule() refuses it)."""
    try:
        sch = sched.Schedule(program.func, seed=0)   # sampling steps draw the same
    except ScheduleError as error:
        event(f"Schedule() refused: {str(error)[:60]}")
        return None
    except Exception as error:     # noqa: BLE001
        raise Finding(reproducer(program, log, f"Schedule() crashes: "
                                 f"{type(error).__name__}: {error}")) from None
    gpu = data.draw(st.sampled_from(["after", "no", "before"]))
    if gpu == "before":
        finish_for_the_gpu(program, sch, data, log)
    if os.environ.get("SCHED_FUZZ_DEFER"):
        before = sch.copy()
        log.append("with sch.concurrency_checked_at_end():   # the steps below, up to 'end'")
        try:
            with sch.concurrency_checked_at_end():
                random_steps(program, sch, data, log)
        except ScheduleError as error:
            event("deferred steps refused at the end")
            log.append(f"# end: refused ({str(error).splitlines()[0][:100]}); undone")
            sch = before
        else:
            log.append("# end: accepted")
    else:
        random_steps(program, sch, data, log)
    if gpu == "after" and not has_thread_bindings(sch.func):
        finish_for_the_gpu(program, sch, data, log)
    sch = replay_with_other_decision(program, sch, data, log)
    try:
        verify(sch.func)
    except Exception as error:     # noqa: BLE001
        raise Finding(reproducer(program, log, f"the scheduled function fails the verifier: "
                                 f"{error}")) from None
    return sch


def random_steps(program, sch, data, log: list[str]) -> None:
    """1-8 random steps on `sch`, each taken or refused."""
    for _ in range(data.draw(st.integers(1, 8))):
        checkpoint = {"func": sch.func}
        try:
            apply_random_step(sch, data, log, checkpoint, program.features)
            if sch.func is not checkpoint["func"]:
                event(f"took {log[-1].split('(')[0]}")
                check_round_trip(program, sch.func, log)
        except ScheduleError:
            event(f"refused {log[-1].split('(')[0]}")
            log[-1] = f"try:\n    {log[-1]}\nexcept ScheduleError:\n    pass   # refused"
            if sch.func is not checkpoint["func"]:
                raise Finding(reproducer(program, log,
                                          "a refused step changed the function")) from None
        except Exception as error:     # noqa: BLE001
            raise Finding(reproducer(program, log, f"the last step crashes: "
                                     f"{type(error).__name__}: {error}")) from None


def has_thread_bindings(func) -> bool:
    return any(loop.kind == "thread_binding" for loop in collect(func.body, For))


def finish_for_the_gpu(program, sch, data, log: list[str]) -> None:
    """The GPU recipe (steps_gpu.py) on `sch`: random steps alone seldom make a schedule the
    CUDA targets build (blocks and threads over every nest, one thread count per kernel), so
    two thirds of the schedules get the recipe before or after their random steps, and cuda-emu
    (check.py) runs on a good share of them."""
    log.append("# the GPU recipe (tests/fuzz/steps_gpu.py)")
    try:
        apply_gpu_recipe(sch, data, log)
    except Exception as error:     # noqa: BLE001 - a step must refuse, never crash
        raise Finding(reproducer(program, log, f"the last step crashes: "
                                 f"{type(error).__name__}: {error}")) from None
    event("gpu recipe" + (" bound threads" if has_thread_bindings(sch.func) else ""))
    check_round_trip(program, sch.func, log)


def replay_with_other_decision(program, sch, data, log: list[str]) -> sched.Schedule:
    """Sometimes (when the trace has sampling steps) the trace of `sch` replayed on the
    original function with one decision changed (`trace.with_decision`): the replay, or `sch`
    when a step of it is refused."""
    positions = sampling_steps(sch.trace)
    if not positions or not data.draw(st.booleans()):
        return sch
    index = data.draw(st.sampled_from(positions))
    instruction = sch.trace.instructions[index]
    if instruction.kind == "sample_perfect_tile":
        decision = data.draw(st.lists(st.sampled_from([1, 1, 2, 3, 4, 6, 9]),
                                      min_size=len(instruction.decision),
                                      max_size=len(instruction.decision)))
    else:
        decision = data.draw(st.integers(-3, 4))
    # the reproducer's calls record other steps (get_block, get_loops) than this run held
    # handles for: it finds the sampling step by its rank among the sampling steps
    rank = positions.index(index)
    text = (f"sch = sch.trace.with_decision([k for k, i in enumerate(sch.trace.instructions) "
            f"if i.decision is not None][{rank}], {decision!r}).apply(func)")
    log.append(text)
    try:
        replayed = sch.trace.with_decision(index, decision).apply(program.func)
    except ScheduleError:
        event("replay refused")
        log[-1] = f"try:\n    {text}\nexcept ScheduleError:\n    pass   # refused"
        return sch
    except Exception as error:     # noqa: BLE001
        raise Finding(reproducer(program, log, f"the replay with another decision crashes: "
                                 f"{type(error).__name__}: {error}")) from None
    event("replayed with another decision")
    check_round_trip(program, replayed.func, log)
    return replayed


@fuzz_settings()
@given(program=programs(), data=st.data())
def test_random_schedules_keep_the_interpreted_result(program, data):
    expected = oracle(program)
    assume(expected is not None)
    for feature in program.features:
        event(f"feature {feature}")
    log: list[str] = []
    sch = schedule(program, data, log)
    if sch is not None:
        check_interpreted(program, sch.func, expected, log)


@fuzz_settings(0.2)
@given(program=programs(), data=st.data())
def test_random_schedules_built_for_c_keep_the_result(program, data):
    expected = oracle(program)
    assume(expected is not None)
    log: list[str] = []
    sch = schedule(program, data, log)
    if sch is not None:
        check_c(program, sch.func, expected, log)
        if check_cuda_emu(program, sch.func, expected, log):
            event("ran on cuda-emu")


@fuzz_settings(0.2)
@given(program=programs())
def test_unscheduled_programs_built_for_c_equal_the_interpreter(program):
    expected = oracle(program)
    assume(expected is not None)
    check_c(program, program.func, expected, [])

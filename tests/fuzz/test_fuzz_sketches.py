"""The sketch fuzzer: random programs (programs.py) scheduled by the autoscheduler's own rules
(its sketches, sched/autoscheduler/space) with random decisions, or by a GPU recipe written as
people write GPU schedules (steps_gpu.py), checked against `sched.interpret` of the original
(check.py).

The random-step fuzzer (test_fuzz_schedules.py) rarely builds what a real GPU schedule is made
of: tiles bound to blocks and threads, operands staged in shared memory with cooperative
fetches, several stages under one thread block with barriers between them. The sketches build
exactly that (and the CPU's tiles, packing, rfactor and parallel loops), on programs far from
the operators they were written for. Whatever a sketch builds must give the original's result,
interpreted with concurrent loops in every order, built for C with its threads in every
order, and, for a GPU schedule, as the CUDA source run by the emulator (cuda-emu); a sketch
step may be refused (a ScheduleError), never crash.
"""

from __future__ import annotations

import random

from hypothesis import assume, event, given
from hypothesis import strategies as st

import sched
from sched.autoscheduler.space.sampler import SketchRefused
from sched.autoscheduler.space.sketch import SearchSpace
from sched.autoscheduler.workload import Workload
from sched.errors import ScheduleError
from tests.fuzz.check import (
    Canaries,
    Finding,
    check_c,
    check_canaries,
    check_cuda_emu,
    check_interpreted,
    compare,
    oracle,
    reproducer,
)
from tests.fuzz.profile import fuzz_settings
from tests.fuzz.programs import Program, programs
from tests.fuzz.steps_gpu import apply_gpu_recipe

TARGETS = ("c", "cuda", "gpu recipe")


def sketch_schedule(program: Program, data, log: list[str]):
    """A candidate schedule of `program` from a random sketch of a random target, or from the
    GPU recipe (steps_gpu.py), or None when the program has no sketch or the sample was
    refused. `log` gets the steps."""
    target = data.draw(st.sampled_from(TARGETS))
    if target == "gpu recipe":
        return _recipe_schedule(program, data, log)
    log.append(f"# a sample of the autoscheduler's sketches for target {target!r}")
    try:
        space = SearchSpace(Workload.of(program.func, target=target), seed=0)
    except ScheduleError as error:
        event(f"no space: {str(error)[:60]}")
        return None
    except Exception as error:     # noqa: BLE001 - building the space must not crash
        raise Finding(reproducer(program, log, f"SearchSpace({target!r}) crashes: "
                                 f"{type(error).__name__}: {error}")) from None
    if not space.sketches:
        event("no sketch")
        return None
    index = data.draw(st.integers(0, len(space.sketches) - 1))
    seed = data.draw(st.integers(0, 2 ** 16))
    event(f"target {target}")
    try:
        sample = space.sample(index, None, random.Random(seed))
    except (SketchRefused, ScheduleError):
        event("sample refused")
        return None
    except Exception as error:     # noqa: BLE001 - a rule must refuse, never crash
        log.append(f"# sketch {space.sketches[index].name}, rng seed {seed}")
        raise Finding(reproducer(program, log, f"sampling the sketch crashes: "
                                 f"{type(error).__name__}: {error}")) from None
    log.extend(instruction.to_python() for instruction in sample.schedule.trace.instructions)
    return sample.schedule


def _recipe_schedule(program: Program, data, log: list[str]):
    event("gpu recipe")
    try:
        sch = sched.Schedule(program.func)
    except ScheduleError:
        return None
    try:
        apply_gpu_recipe(sch, data, log)
    except Exception as error:     # noqa: BLE001 - a step must refuse, never crash
        raise Finding(reproducer(program, log, f"the last step crashes: "
                                 f"{type(error).__name__}: {error}")) from None
    return sch


@fuzz_settings(0.5)
@given(program=programs(), data=st.data())
def test_sketch_samples_keep_the_interpreted_result(program, data):
    expected = oracle(program)
    assume(expected is not None)
    log: list[str] = []
    sch = sketch_schedule(program, data, log)
    if sch is not None:
        check_interpreted(program, sch.func, expected, log)


@fuzz_settings(0.2)
@given(program=programs(), data=st.data())
def test_sketch_samples_built_for_c_keep_the_result(program, data):
    expected = oracle(program)
    assume(expected is not None)
    log: list[str] = []
    sch = sketch_schedule(program, data, log)
    if sch is not None:
        check_c(program, sch.func, expected, log)
        if check_cuda_emu(program, sch.func, expected, log):
            event("ran on cuda-emu")


@fuzz_settings(0.1)
@given(program=programs())
def test_default_cuda_schedule_of_random_programs_runs_correctly(program):
    # sched.build(func, target="cuda") of a function with no bindings takes the default
    # schedule: it must exist for every function and give the original's result
    expected = oracle(program)
    assume(expected is not None)
    log = ["# sched.build(func, target='cuda-emu'): the default schedule"]
    try:
        kernel = sched.build(program.func, target="cuda-emu")
    except Exception as error:     # noqa: BLE001 - every function gets a default schedule
        raise Finding(reproducer(program, log, f"no default CUDA schedule: "
                                 f"{type(error).__name__}: {error}")) from None
    canaries = Canaries(program.arrays(0))
    kernel(*canaries.arrays)
    run = 'sched.build(func, target="cuda-emu")(*got)'
    check_canaries(program, canaries, log, " (the default CUDA schedule on cuda-emu)", run)
    compare(program, expected, canaries.arrays, log, "the default CUDA schedule on cuda-emu",
            run)

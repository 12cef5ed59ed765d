"""A schedule with no measurement: the candidate the analytical cost model ranks first among a
few random samples of every sketch. `sched.build(func, target="cuda")` uses it for a function
with no thread bindings and no tuning record, so a first GPU kernel needs no hand-written
bindings.

    sch = default_schedule(func, target="cuda")      # a Schedule; sch.trace says what it did
"""

from __future__ import annotations

import random

from sched.autoscheduler.space.sampler import SketchRefused
from sched.autoscheduler.space.sketch import SearchSpace
from sched.autoscheduler.workload import Workload
from sched.errors import ScheduleError

DEFAULT_SAMPLES = 8


def default_schedule(func, target: str = "cuda", arch: str | None = None,
                     samples: int = DEFAULT_SAMPLES, seed: int = 0):
    """The best of `samples` random candidates by the memory-movement model."""
    from sched.autoscheduler.cost import MemoryMovementModel

    workload = Workload.of(func, target, arch)
    space = SearchSpace(workload, seed=seed)
    rng = random.Random(seed)
    drawn = []
    for attempt in range(samples * 3):
        if len(drawn) == samples or not space.sketches:
            break
        try:
            drawn.append(space.sample(attempt % len(space.sketches), None, rng))
        except (ScheduleError, SketchRefused):
            continue
    if not drawn:
        raise ScheduleError("build", f"no default {target} schedule applies to "
                            f"{workload.name!r}: schedule it by hand (bind its loops to "
                            f"blockIdx/threadIdx) or tune it with sched.tune")
    scores = MemoryMovementModel(target).predict(workload, [s.schedule.func for s in drawn])
    best = max(range(len(drawn)), key=lambda i: scores[i])
    return drawn[best].schedule

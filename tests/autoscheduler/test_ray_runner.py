"""The Ray runner on a local Ray instance (C target): one task per candidate, wrong, crashing,
hanging and unbuildable candidates each cost one result, in order."""

from __future__ import annotations

import sys

import pytest

from sched.autoscheduler.measure import Candidate, RayMeasurer, TimingOptions, make_measurer
from sched.autoscheduler.workload import Workload
from tests.autoscheduler.test_measure import (
    add,
    endless,
    gather,
    kinds,
    script_candidate,
    split_candidate,
)

TIMEOUT = 3.0
TIMING = TimingOptions(number=1, repeat=2, min_repeat_ms=1.0, warmup=1, timeout=TIMEOUT)


def test_a_clear_error_without_ray(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)         # import ray raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'sched\[ray\]'"):
        RayMeasurer()


@pytest.fixture(scope="module")
def ray_measurer():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with make_measurer("ray", timing=TIMING) as measurer:
            # room for a build on a loaded host (the test suite runs in parallel): the
            # hanging candidate is cancelled after TIMEOUT + this
            measurer.build_allowance = 12.0
            yield measurer
    finally:
        ray.shutdown()


def test_ray_tasks_measure_check_and_survive_crashes_and_hangs(ray_measurer):
    workload = Workload.of(add(1.0))
    candidates = [split_candidate(add(1.0), 8), script_candidate(add(2.0)),
                  script_candidate(gather(10 ** 9)), split_candidate(add(1.0), 16),
                  script_candidate(endless()), Candidate("[]", "not a script"),
                  split_candidate(add(1.0), 4)]
    # gather's and endless's parameters are not add's: B = A[I[i] + 1e9] takes three arrays,
    # so the crash is measured on its own workload below; here its call is a "run" error
    results = ray_measurer.measure(workload, candidates)
    assert kinds(results) == [None, "wrong", "run", None, "timeout", "build", None], \
        [r.error for r in results]
    assert results[0].ok and len(results[0].seconds) == TIMING.repeat
    assert "largest difference 1 " in results[1].error
    assert "cancelled" in results[4].error

    crashes = ray_measurer.measure(Workload.of(gather()), [script_candidate(gather(10 ** 9)),
                                                            split_candidate(gather(), 8)])
    assert kinds(crashes) == ["crash", None], [r.error for r in crashes]

"""Measuring on a Ray cluster: each candidate is one Ray task that builds, checks and times it.

    measurer = RayMeasurer(address="auto")      # a cluster from `ray start --head`; None: local
    results = measurer.measure(workload, candidates)

Ray is an optional extra (`pip install 'sched[ray]'`), imported only when a RayMeasurer is
made. A task runs in one of Ray's worker processes, which keep the workload's inputs and the
reference outputs (the unscheduled function's, computed there once) for the tasks that
follow. Tasks are never retried: a task still running `timing.timeout + build_allowance`
seconds after it was submitted is cancelled with its process killed ("timeout"), and a task
whose process dies is a "crash". No more tasks are in flight than the cluster has slots (a CPU
each for "c", a GPU each for "cuda"), so a task starts when it is submitted.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from sched.autoscheduler.measure.common import Candidate, MeasureResult, TimingOptions

BUILD_ALLOWANCE = 30.0     # seconds a task may build (and compute the reference) on top
DEFAULT_TIMING = TimingOptions()


def _import_ray():
    try:
        import ray
    except ImportError:
        raise ImportError("the Ray runner needs Ray, an optional extra: "
                          "pip install 'sched[ray]'") from None
    return ray


_MEASUREMENTS: dict = {}       # in a Ray worker: (workload key, seed) -> worker.Measurement


def measure_task(key: str, workload_script: str, target: str, arch: str | None, seed: int,
                 script: str, timing: TimingOptions, hopeless_after: float | None = None
                 ) -> tuple:
    """One candidate built, checked and timed in this (Ray worker) process: (kind, error,
    seconds, build_seconds, run_seconds); see `Measurement.measure` for `hopeless_after`."""
    from sched.autoscheduler.measure.builder import build_script
    from sched.autoscheduler.measure.worker import Measurement, describe

    error, build_seconds = build_script(script, target, arch)
    if error is not None:
        return "build", error, (), build_seconds, 0.0
    start = time.perf_counter()
    measurement = _MEASUREMENTS.get((key, seed))
    if measurement is None:
        try:
            measurement = Measurement(workload_script, target, arch, seed)
        except Exception as failure:  # noqa: BLE001 - reported as the candidate's run error
            return ("run", f"the unscheduled function (the reference every candidate is "
                    f"checked against) could not run: {describe(failure)}", (), build_seconds,
                    time.perf_counter() - start)
        _MEASUREMENTS.clear()                # one workload's arrays at a time
        _MEASUREMENTS[key, seed] = measurement
    outcome = measurement.measure(script, timing, hopeless_after)
    return (outcome.kind, outcome.error, outcome.seconds, build_seconds,
            time.perf_counter() - start)


class RayMeasurer:
    """Measures candidates as Ray tasks (see the module's doc). `address`: None starts a local
    Ray instance (shut down by `close`), "auto" or "ray://host:port" connects to a cluster;
    when Ray is already initialized in this process it is used as it is. `task_cpus`: CPUs
    each C-target task reserves (raise it to time alone on a node)."""

    def __init__(self, address: str | None = None, timing: TimingOptions = DEFAULT_TIMING,
                 reference_seed: int = 0, *, task_cpus: float = 1.0,
                 build_allowance: float = BUILD_ALLOWANCE):
        self._ray = ray = _import_ray()
        self.timing = timing
        self.reference_seed = reference_seed
        self.task_cpus = task_cpus
        self.build_allowance = build_allowance
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            if address is None:
                ray.init(include_dashboard=False)
            else:
                ray.init(address=address)
        self._remotes: dict[str, object] = {}

    def _remote(self, target: str):
        if target not in self._remotes:
            resources = {"num_gpus": 1} if target == "cuda" else {"num_cpus": self.task_cpus}
            self._remotes[target] = self._ray.remote(max_retries=0, **resources)(measure_task)
        return self._remotes[target]

    def _slots(self, target: str) -> int:
        resources = self._ray.cluster_resources()
        if target == "cuda":
            return max(1, int(resources.get("GPU", 1)))
        return max(1, int(resources.get("CPU", 1) // self.task_cpus))

    def measure(self, workload, candidates: list[Candidate], *,
                hopeless: float | None = None, best_seconds: float = math.inf,
                before_timing: Callable[[], None] | None = None,
                on_result: Callable[[int, MeasureResult], None] | None = None
                ) -> list[MeasureResult]:
        """One result per candidate, in order. `hopeless` and `best_seconds` as
        `LocalMeasurer`'s, except that each task compares with `best_seconds` alone (not with
        the other tasks of the batch); `before_timing` is called at the end (timings run on
        the cluster, not beside this process's work); `on_result(index, result)` as each
        task ends."""
        hopeless_after = (hopeless * best_seconds
                          if hopeless is not None and math.isfinite(best_seconds) else None)
        ray = self._ray
        remote, slots = self._remote(workload.target), self._slots(workload.target)
        arguments = (workload.key, workload.script, workload.target, workload.arch,
                     self.reference_seed)
        limit = self.timing.timeout + self.build_allowance
        results: list[MeasureResult | None] = [None] * len(candidates)
        pending: dict = {}        # ObjectRef -> (candidate index, submitted at)
        submitted = 0
        while submitted < len(candidates) or pending:
            while submitted < len(candidates) and len(pending) < slots:
                reference = remote.remote(*arguments, candidates[submitted].script, self.timing,
                                          hopeless_after)
                pending[reference] = (submitted, time.monotonic())
                submitted += 1
            first_deadline = min(start for _, start in pending.values()) + limit
            ready, _ = ray.wait(list(pending), num_returns=1,
                                timeout=max(0.0, first_deadline - time.monotonic()))
            for reference in ready:
                index, start = pending.pop(reference)
                results[index] = self._collect(reference, start)
                if on_result is not None:
                    on_result(index, results[index])
            now = time.monotonic()
            for reference, (index, start) in list(pending.items()):
                if now - start >= limit:
                    ray.cancel(reference, force=True)
                    del pending[reference]
                    results[index] = MeasureResult(
                        error_kind="timeout", run_seconds=now - start,
                        error=f"the candidate's task ran longer than {limit:g} s (timeout "
                              f"{self.timing.timeout:g} s + {self.build_allowance:g} s to "
                              f"build); it was cancelled and its worker killed")
                    if on_result is not None:
                        on_result(index, results[index])
        if before_timing is not None:
            before_timing()
        return results

    def reference_seconds(self, workload) -> float | None:
        """None: the reference runs in the cluster's processes."""
        return None

    def references(self) -> dict[str, list]:
        """Empty: the reference outputs stay in the cluster's processes."""
        return {}

    def _collect(self, reference, start: float) -> MeasureResult:
        exceptions = self._ray.exceptions
        try:
            kind, error, seconds, build_seconds, run_seconds = self._ray.get(reference)
        except exceptions.TaskCancelledError:
            return MeasureResult(error_kind="timeout", error="the candidate's task was cancelled",
                                 run_seconds=time.monotonic() - start)
        except (exceptions.WorkerCrashedError, exceptions.LocalRayletDiedError) as crash:
            return MeasureResult(error_kind="crash", run_seconds=time.monotonic() - start,
                                 error=f"the candidate's Ray worker process died: {crash}")
        except exceptions.RayTaskError as failure:
            return MeasureResult(error_kind="run", run_seconds=time.monotonic() - start,
                                 error=f"the candidate's task failed: {failure}")
        return MeasureResult(tuple(seconds), kind, error, build_seconds, run_seconds)

    def close(self) -> None:
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()
        self._owns_ray = False

    def __enter__(self) -> RayMeasurer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

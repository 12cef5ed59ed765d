"""Running candidates in an isolated worker process, and the local measurer built on it.

    with LocalMeasurer(workers=2) as measurer:
        results = measurer.measure(workload, candidates)     # one MeasureResult each, in order

`IsolatedRunner` keeps one worker process (`worker.py`) alive across candidates: its imports,
the workload's inputs and the reference outputs are loaded once. A candidate gets
`timing.timeout` seconds for its check (one run, the comparison with the reference) and as
many for its timing, counted from the moment its kernel is loaded: the worker's own build
(parsing and lowering the script, the cubin or library from the disk cache) has the builder's
allowance, `build_timeout(timing)`, since on a busy machine it can take longer than a run (seen on
the first GPU run: a CUDA matmul's check timed out at 3 s while its worker lowered it). Past
either limit the worker is killed ("timeout"). A worker that
dies under a candidate (a segfault, an abort) costs that candidate ("crash"). Either way the
next candidate runs in a fresh worker, started at once so that it imports while the parent
waits for the next build.
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Connection

from sched.autoscheduler.measure.builder import BuildPool, build_script
from sched.autoscheduler.measure.common import Candidate, MeasureResult, TimingOptions

SETUP_TIMEOUT = 600.0      # seconds for a fresh worker to import and compute the reference


def build_timeout(timing: TimingOptions) -> float:
    """Seconds a candidate's build may take, in the build pool or in the worker."""
    return max(timing.timeout, 60.0)
STDERR_TAIL = 2000         # characters of a dead worker's stderr kept in the message
DEFAULT_TIMING = TimingOptions()


class WorkerDied(Exception):
    """The worker process is gone (`kind` "timeout" or "crash")."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class WorkerProcess:
    """One `python -m sched.autoscheduler.measure.worker` process and its two pipes."""

    def __init__(self):
        to_child_read, to_child_write = os.pipe()
        from_child_read, from_child_write = os.pipe()
        self._stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sched.autoscheduler.measure.worker",
             str(to_child_read), str(from_child_write)],
            pass_fds=(to_child_read, from_child_write), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=self._stderr, env=_worker_environment(),
            start_new_session=True)         # its own process group: a kill takes gcc too
        os.close(to_child_read)
        os.close(from_child_write)
        self._requests = Connection(to_child_write, readable=False)
        self._replies = Connection(from_child_read, writable=False)
        self.workload_key: str | None = None

    def request(self, message: tuple, timeout: float, build_timeout: float | None = None):
        """The worker's reply to `message`; WorkerDied when it takes longer than `timeout`
        seconds (the worker is then killed) or the worker dies. With `build_timeout`, the
        worker may first build the candidate for that long: each ("running", start) it sends
        (a check or a timing starts) gives `timeout` seconds from then, measured by the
        worker's clock when its reply is read late."""
        limit, what = ((build_timeout, "its build in the worker") if build_timeout is not None
                       else (timeout, "it"))
        started = None
        try:
            self._requests.send(message)
            while self._replies.poll(limit):
                reply = self._replies.recv()
                if reply[0] != "running":
                    if reply[0] == "done" and started is not None and \
                            reply[-1] - started > timeout:
                        # read late (a busy parent), but the run itself took too long
                        return ("done", "timeout", f"ran {reply[-1] - started:.3g} s, longer "
                                f"than {timeout:g} s (its run)", (), reply[-2], reply[-1])
                    return reply
                started = reply[1]
                limit, what = timeout, "its run"
        except (EOFError, OSError):
            raise WorkerDied("crash", self._death()) from None
        if self.process.poll() is not None:
            raise WorkerDied("crash", self._death())
        self.kill()
        raise WorkerDied("timeout", f"ran longer than {limit:g} s ({what}); the worker process "
                                    f"was killed")

    def _death(self) -> str:
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.process.returncode
        cause = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0
                 else f"exited with status {code}")
        self._stderr.seek(0)
        tail = self._stderr.read().decode(errors="replace")[-STDERR_TAIL:].strip()
        self.close()
        return f"the worker process died ({cause})" + (f"; its stderr:\n{tail}" if tail else "")

    def kill(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()
        self.close()

    def stop(self) -> None:
        """Ask the worker to exit; kill it when it does not within a few seconds."""
        if self.process.poll() is None:
            try:
                self._requests.send(("stop",))
                self.process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def close(self) -> None:
        for handle in (self._requests, self._replies):
            handle.close()
        self._stderr.close()


def _worker_environment() -> dict[str, str]:
    """This environment, with the directory sched was imported from first on PYTHONPATH (the
    worker finds the same sched when it is not installed)."""
    import sched

    root = os.path.dirname(os.path.dirname(os.path.abspath(sched.__file__)))
    paths = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


class IsolatedRunner:
    """Runs one candidate at a time in a persistent worker process (see the module's doc)."""

    def __init__(self, timing: TimingOptions = DEFAULT_TIMING, reference_seed: int = 0,
                 references: dict[str, list] | None = None):
        self.timing = timing
        self.reference_seed = reference_seed
        self._worker: WorkerProcess | None = WorkerProcess()
        # workload key -> reference outputs (`references`: computed by another runner)
        self._references: dict[str, list] = dict(references or {})
        self.reference_seconds: dict[str, float] = {}   # workload key -> its reference run
        self._failed: dict[str, str] = {}            # workload key -> why it has none
        self.restarts = 0                            # workers killed or dead, for reports

    def run(self, workload, script: str) -> MeasureResult:
        """`script` checked against the reference, then timed, on `workload` (its
        build_seconds are left 0: the builder's)."""
        return self._request(workload, ("measure", script, self.timing))

    def check(self, workload, script: str) -> MeasureResult:
        """`script` run once and compared with the reference; one that passes (error_kind None,
        `seconds` the time of that one run: a first estimate) stays loaded in the worker for
        `time`."""
        return self._request(workload, ("check", script))

    def time(self, workload, script: str) -> MeasureResult:
        """The times of a candidate `check` passed."""
        return self._request(workload, ("time", script, self.timing))

    def _request(self, workload, message: tuple) -> MeasureResult:
        start = time.perf_counter()
        error = self.prepare(workload)
        if error is not None:
            return MeasureResult(error_kind="run", error=error,
                                 run_seconds=time.perf_counter() - start)
        try:
            _, kind, error, seconds, ends, _ = self._worker.request(
                message, self.timing.timeout, build_timeout(self.timing))
        except WorkerDied as death:
            self._replace_worker()
            return MeasureResult(error_kind=death.kind, error=f"the candidate {death}",
                                 run_seconds=time.perf_counter() - start)
        if ends:        # it exits after this reply: the next candidate gets a fresh one
            self._replace_worker()
        return MeasureResult(seconds=tuple(seconds), error_kind=kind, error=error,
                             run_seconds=time.perf_counter() - start)

    def prepare(self, workload) -> str | None:
        """Load `workload` into the worker (computing its reference the first time); the
        reason when that fails, else None."""
        if workload.key in self._failed:
            return self._failed[workload.key]
        if self._worker is None or self._worker.process.poll() is not None:
            self._replace_worker()      # gone since its last reply: no candidate's fault
        if self._worker.workload_key == workload.key:
            return None
        message = ("workload", workload.key, workload.script, workload.target, workload.arch,
                   self.reference_seed, self._references.get(workload.key))
        try:
            reply = self._worker.request(message, SETUP_TIMEOUT)
        except WorkerDied as death:
            self._replace_worker()
            reply = ("failed", str(death))
        if reply[0] != "ready":
            self._failed[workload.key] = (f"the unscheduled function (the reference every "
                                          f"candidate is checked against) could not run: "
                                          f"{reply[1]}")
            return self._failed[workload.key]
        self._references[workload.key] = reply[1]
        if reply[2] is not None:
            self.reference_seconds[workload.key] = reply[2]
        self._worker.workload_key = workload.key
        return None

    def references(self) -> dict[str, list]:
        """Workload key -> the reference outputs computed so far (for another runner)."""
        return dict(self._references)

    def _replace_worker(self) -> None:
        if self._worker is not None:
            self.restarts += 1
            self._worker.kill()
        self._worker = WorkerProcess()

    def close(self) -> None:
        if self._worker is not None:
            self._worker.stop()
            self._worker = None


def retime(workload, candidate: Candidate, timing: TimingOptions = DEFAULT_TIMING,
           reference_seed: int = 0, references: dict[str, list] | None = None
           ) -> MeasureResult:
    """`candidate` built here (or found in the disk cache), then checked and timed in a fresh
    worker process: the tuner's second opinion on its best record. `references` (a runner's
    `references()`) spares the fresh process the unscheduled function's run."""
    runner = IsolatedRunner(timing, reference_seed, references)
    try:
        error, build_seconds = build_script(candidate.script, workload.target, workload.arch)
        if error is not None:
            return MeasureResult(error_kind="build", error=error, build_seconds=build_seconds)
        result = runner.run(workload, candidate.script)
        return dataclasses.replace(result, build_seconds=build_seconds)
    finally:
        runner.close()


class LocalMeasurer:
    """Builds candidates in a process pool of `workers` processes (default: os.cpu_count())
    and runs them, one at a time, in an isolated worker process. Each candidate is checked
    against the unscheduled function's outputs on `workload.arrays(reference_seed)` as soon
    as it is built, while later ones build; the checked ones are timed once every build is
    done, so that no compiler competes with a timing (on a 2-core machine, timings taken
    beside gcc read about 1.7x slow). `time_during_builds=True` times each one at once: more
    candidates a minute, noisier times.

    `measure(..., hopeless=f, best_seconds=b)`: a candidate whose checked run took more than
    `f` times the fastest of `b` and this batch's checked runs is not timed again; its one
    checked run is its time. Its rank among the slow ones is all the search needs, and slow
    candidates' repeats are most of a round's timing. `before_timing`: called once the
    builds and checks are done, before the first timing (the tuner joins the thread that
    proposes its next round there, so that no replay competes with a timing either)."""

    def __init__(self, workers: int | None = None, timing: TimingOptions = DEFAULT_TIMING,
                 reference_seed: int = 0, *, time_during_builds: bool = False):
        self.timing = timing
        self.time_during_builds = time_during_builds
        self._builder = BuildPool(workers, timeout=build_timeout(timing))
        self._runner = IsolatedRunner(timing, reference_seed)

    def measure(self, workload, candidates: list[Candidate], *, hopeless: float | None = None,
                best_seconds: float = math.inf,
                before_timing: Callable[[], None] | None = None,
                on_result: Callable[[int, MeasureResult], None] | None = None
                ) -> list[MeasureResult]:
        """One result per candidate, in order (see `MeasureResult` and `ERROR_KINDS`; the
        class's doc for `hopeless`, `best_seconds` and `before_timing`); `on_result(index,
        result)` is called as soon as a candidate's result is final (a failure at once, a
        time after its timing)."""
        def final(index: int, result: MeasureResult) -> None:
            results[index] = result
            if on_result is not None:
                on_result(index, result)

        results: list[MeasureResult] = []
        checked = []              # (index, build seconds, check seconds) of those to time
        for candidate, built in zip(candidates, self._builder.outcomes(workload, candidates)):
            if built.kind is not None:
                results.append(MeasureResult())
                final(len(results) - 1, MeasureResult(error_kind=built.kind, error=built.error,
                                                      build_seconds=built.seconds))
                continue
            if self.time_during_builds:
                result = self._runner.run(workload, candidate.script)
            else:
                result = self._runner.check(workload, candidate.script)
                if result.error_kind is None:
                    checked.append((len(results), built.seconds, result.run_seconds))
            results.append(dataclasses.replace(result, build_seconds=built.seconds))
            if self.time_during_builds or result.error_kind is not None:
                final(len(results) - 1, results[-1])
        if hopeless is not None:
            fastest = min([best_seconds, *(results[i].median for i, _, _ in checked)])
            for index, _, _ in checked:         # their checked run is their time
                if results[index].median > hopeless * fastest:
                    final(index, results[index])
            checked = [c for c in checked if results[c[0]].median <= hopeless * fastest]
        if before_timing is not None:
            before_timing()
        for index, build_seconds, check_seconds in checked:
            timed = self._runner.time(workload, candidates[index].script)
            final(index, dataclasses.replace(timed, build_seconds=build_seconds,
                                             run_seconds=check_seconds + timed.run_seconds))
        return results

    def reference_seconds(self, workload) -> float | None:
        """The time of the run that made `workload`'s reference outputs (made now when they
        are not yet), or None when another process made them or they could not be made."""
        self._runner.prepare(workload)
        return self._runner.reference_seconds.get(workload.key)

    def references(self) -> dict[str, list]:
        """Workload key -> reference outputs, for `retime`."""
        return self._runner.references()

    @property
    def restarts(self) -> int:
        """Worker processes killed (timeout) or dead (crash) so far."""
        return self._runner.restarts

    def close(self) -> None:
        self._runner.close()
        self._builder.close()

    def __enter__(self) -> LocalMeasurer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

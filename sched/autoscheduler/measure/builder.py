"""Building candidates in a pool of processes, ahead of their runs.

    with BuildPool(workers=2) as pool:
        for outcome in pool.outcomes(workload, candidates):     # in order, as they finish
            ...

Each process parses a candidate's script and builds it for the workload's target: for "c",
gcc fills the disk cache (`sched.c.build`), so that the runner's own build of the same script
only lowers and loads the library; for "cuda", NVRTC compiles a cubin for `workload.arch`
(no GPU needed). The pool lives across calls (its start-up costs seconds) and its processes
come from a fork server that imported sched once: the parent has islpy and perhaps torch and
CUDA loaded, and forking it would be unsafe.

Like every multiprocessing program, a script that measures must keep its top level under
`if __name__ == "__main__":`, since each pool process imports the main module.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool

from sched.autoscheduler.measure.common import BuildResult, Candidate

PRELOAD = ("sched", "sched.c.kernel", "sched.lower", "sched.autoscheduler.measure.builder")


@dataclasses.dataclass(frozen=True)
class BuildOutcome:
    """One candidate's build: `kind` None (built), "build", "timeout" or "crash"."""

    kind: str | None = None
    error: str | None = None
    seconds: float = 0.0


def build_script(script: str, target: str, arch: str | None) -> tuple[str | None, float]:
    """(None, seconds) when `script` builds for `target`, else (the error message, seconds).
    Runs in a pool process."""
    start = time.perf_counter()
    try:
        import sched

        # every step of the candidate was checked when the search replayed it
        sched.build(sched.parse(script), target=target, arch=arch, check_races=False)
    except Exception as error:  # noqa: BLE001 - any failure is the candidate's
        return f"{type(error).__name__}: {error}", time.perf_counter() - start
    return None, time.perf_counter() - start


def _main_module_hint() -> str:
    """Why every build process may die at start: the main module they import runs its code."""
    import sys

    main = sys.modules.get("__main__")
    if getattr(main, "__file__", None) is None or getattr(main, "__spec__", None) is not None:
        return ""
    return (f" (if every candidate fails so: each build process imports the main module "
            f"{main.__file__}; keep its top level under `if __name__ == \"__main__\":`)")


def _context():
    """A fork server with sched imported (cheap process starts), else spawn."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))   # no effect once the server runs
    return context


def _own_process_group(tuner: int | None = None) -> None:
    """Each pool process leads a process group of its own, so that killing the group takes
    the compilers it started too (killed alone, it would leave a gcc compiling for minutes).
    With `tuner` (the pid of the process that made the pool), the group also ends when that
    process is gone: a tuner killed with kill -9 leaves no build process behind (the fork
    server and resource tracker then end too)."""
    os.setpgrp()
    if tuner is not None:
        threading.Thread(target=_end_with, args=(tuner,), daemon=True).start()


def _end_with(tuner: int) -> None:
    while True:
        time.sleep(1.0)
        try:
            os.kill(tuner, 0)
        except ProcessLookupError:
            os.killpg(0, signal.SIGKILL)        # this group: the process and its compilers
        except PermissionError:
            pass                                 # alive (another user's pid: not ours)


def _kill_group(process) -> None:
    """Kill a pool process and everything it started (its process group)."""
    try:
        if os.getpgid(process.pid) == process.pid:
            os.killpg(process.pid, signal.SIGKILL)
            return
    except ProcessLookupError:
        return
    process.kill()           # not yet in its own group: it has started nothing


class BuildPool:
    """`workers` build processes (default: os.cpu_count()); a build that lasts longer than
    `timeout` seconds is reported as "timeout" and its processes are replaced."""

    def __init__(self, workers: int | None = None, timeout: float = 60.0, *,
                 function=build_script):
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.timeout = timeout
        self.function = function       # (script, target, arch) -> (error, seconds); for tests
        self._executor: concurrent.futures.ProcessPoolExecutor | None = None

    def _pool(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._executor is None:
            self._executor = concurrent.futures.ProcessPoolExecutor(
                self.workers, mp_context=_context(), initializer=_own_process_group,
                initargs=(os.getpid(),))
        return self._executor

    def outcomes(self, workload, candidates: list[Candidate]) -> Iterator[BuildOutcome]:
        """Each candidate's build, in order; all are submitted at once, so the caller may run
        candidate i while later ones build. A build process that dies takes the pool's pending
        builds with it: the candidate is then built again alone in a fresh pool, and is a
        "crash" when that one dies too (the others are built again)."""
        scripts = [c.script for c in candidates]
        futures = {i: self._submit(workload, s) for i, s in enumerate(scripts)}
        for i in range(len(scripts)):
            outcome = self._outcome(futures[i])
            restarted = outcome is None or outcome.kind == "timeout"
            if outcome is None:
                self._restart()
                outcome = self._outcome(self._submit(workload, scripts[i]))
                if outcome is None:
                    outcome = BuildOutcome("crash", "a build process died building this "
                                           "candidate, twice" + _main_module_hint())
            if restarted or outcome.kind in ("timeout", "crash"):
                self._restart()        # a hung build holds its process; a dead pool is gone
                futures.update((j, self._submit(workload, scripts[j]))
                               for j in range(i + 1, len(scripts)))
            yield outcome

    def _outcome(self, future) -> BuildOutcome | None:
        """The build's outcome, or None when its pool died."""
        try:
            error, seconds = future.result(timeout=self.timeout)
        except concurrent.futures.TimeoutError:
            return BuildOutcome("timeout", f"the build ran longer than {self.timeout:g} s "
                                f"(its pool processes were replaced)", self.timeout)
        except BrokenProcessPool:
            return None
        return BuildOutcome(None if error is None else "build", error, seconds)

    def build(self, workload, candidates: list[Candidate]) -> list[BuildResult]:
        """Every candidate built (or its error), in order."""
        return [BuildResult(c, o.error if o.kind is None or o.kind == "build"
                            else f"{o.kind}: {o.error}", o.seconds)
                for c, o in zip(candidates, self.outcomes(workload, candidates))]

    def _submit(self, workload, script: str) -> concurrent.futures.Future:
        return self._pool().submit(self.function, script, workload.target, workload.arch)

    def _restart(self) -> None:
        """Kill the pool's processes (a hung build would hold one forever) and drop it."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        processes = list((getattr(executor, "_processes", None) or {}).values())
        executor.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            if process.is_alive():
                _kill_group(process)
        for process in processes:
            process.join(timeout=5)

    def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> BuildPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

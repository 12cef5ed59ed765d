"""`sched.tune`: search schedules for the blocks a function leaves unscheduled, measuring the
best predicted candidates of each round and recording every measurement in a database.

    result = sched.tune(func, target="c", trials=256, db="tune.db")
    result.schedule, result.trace, result.kernel, result.best_seconds, result.table()
    kernel = sched.build(func, target="c", db="tune.db")        # the best record

The loop, per round: the evolutionary search proposes candidates (children of the fastest
measured ones, random samples; every step of each checked by legality; duplicates of anything
measured before dropped); the cost model ranks them (the analytical memory-movement model
until the learned one has trained on enough measurements); the top of the ranking plus a few
random ones are built, checked against the unscheduled function and timed in isolated
processes; each result goes to the DB at once (a killed run loses nothing, `resume=True` goes
on from the DB). At the end the best record is re-timed in a fresh process (and the next
best, where the re-timing demoted it: _retime_best).

A candidate whose outputs differ from the unscheduled function's is a legality bug: it is
recorded with error kind "wrong", listed in `result.wrong` and warned about.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import math
import threading
import time
import warnings

from sched.autoscheduler.database import BASELINE, Database, Record
from sched.autoscheduler.measure.common import Candidate, MeasureResult, TimingOptions
from sched.autoscheduler.search import EvolutionarySearch
from sched.autoscheduler.space.sketch import SearchSpace
from sched.autoscheduler.workload import Workload
from sched.ir.functor import collect
from sched.ir.nodes import Buffer, For
from sched.schedule.trace import Trace
from sched.targets import parse_target

DEFAULT_ROUND = 16          # candidates measured per round
RETIMED = 8                 # schedules re-timed at the end, at most (_retime_best)
HOPELESS = 4.0              # a candidate whose checked run is this much slower than the best
                            # so far (or of its round) keeps that run as its time
# BASELINE (database.py): the sketch named in the record of the function with the user's steps
# only: a candidate too (a small kernel runs fastest as it is)


@dataclasses.dataclass
class TuneResult:
    workload: Workload
    trace: Trace | None                  # the best schedule's steps (user's and searched)
    best_seconds: float                  # the best median the search measured
    retimed_seconds: float               # the same candidate timed again in a fresh process
    baseline_seconds: float | None       # the function with the user's steps only
    trials: int                          # candidates measured in this run
    errors: dict[str, int]               # per error kind, this run
    wrong: list[Record]                  # candidates whose outputs differed (legality bugs)
    curve: list[float]                   # the best time after each trial
    correlations: dict[str, float]       # Spearman of each model with measured speed
    stats: dict[str, float]              # replays, refused, duplicates, replays per second
    sketches: list[str]

    @functools.cached_property
    def schedule(self):
        """The best schedule, replayed (and so checked) on the function."""
        if self.trace is None:
            return None
        return self.trace.apply(self.workload.func, concurrency_checked_at_end=True)

    @functools.cached_property
    def kernel(self):
        import sched

        if self.schedule is None:
            raise RuntimeError(
                f"tune: no candidate of {self.workload.name!r} ran correctly in this run "
                f"(errors: {self.errors or 'none'}; see result.errors and the records' "
                f"error texts), so there is no best kernel: sched.build(func, "
                f"target={self.workload.target!r}) builds the function as it is")
        return sched.build(self.schedule.func, target=self.workload.target,
                           arch=self.workload.arch)

    def table(self):
        from sched.autoscheduler.progress import results_table

        return results_table([{"workload": self.workload.name, "target": self.workload.target,
                               "trials": self.trials, "errors": sum(self.errors.values()),
                               "best_seconds": self.best_seconds,
                               "retimed_seconds": self.retimed_seconds,
                               "flops": self.workload.flops(),
                               "baseline_seconds": self.baseline_seconds}])


def tune(func, target: str = "c", *, arch: str | None = None, trials: int = 256,
         db=None, resume: bool | None = False, workers: int | None = None,
         time_budget: float | None = None, seed: int | None = None,
         runner: str | None = "local", address: str | None = None,
         timing: TimingOptions | None = None, per_round: int | None = None,
         progress: bool = True, console=None, plot: str | None = None) -> TuneResult:
    """Tune `func` (a PrimFunc, or a Schedule whose steps are kept) for `target` ("c" or
    "cuda", with `arch`): `trials` measurements (with `resume`, those already in `db` count),
    or fewer when `time_budget` seconds run out (each round after the first is cut to what
    the time left can measure at the rate so far) or the space is exhausted. `db`: a SQLite
    file (None: in memory). `runner`: "local" (a build pool of `workers` processes and an
    isolated runner) or "ray" (`address` of a cluster; None starts a local one). `seed`
    makes the search deterministic with one worker given its measurements: the first round
    (proposed before any measurement) is the same candidates in the same order; later
    rounds follow the measured times, which vary from run to run. `plot`: a PNG path for
    the tuning curve (needs matplotlib; otherwise a sparkline is printed)."""
    from sched.autoscheduler.cost import LearnedModel, MemoryMovementModel
    from sched.autoscheduler.measure import make_measurer
    from sched.autoscheduler.progress import TuneProgress, tuning_curve

    target, arch = parse_target(target, arch)
    _check_a_gpu_measures(target, runner or "local")
    workload = Workload.of(func, target, arch)
    symbolic = sorted({v.name for v in workload.func.symbolic_vars})
    if symbolic:        # (audit helper-92: a symbolic softmax's every trial was an error)
        raise ValueError(f"tune: the shapes of {workload.name!r} are symbolic "
                         f"({', '.join(symbolic)}): candidates are measured, and tiles "
                         f"chosen, at constant sizes; tune it with them fixed (each shape its "
                         f"own workload), or build it with sched.build (on the GPU with "
                         f"the default schedule, on the CPU as written)")
    scalars = [p.name for p in workload.func.params if not isinstance(p, Buffer)]
    if scalars:         # (helper-99: every trial an error, the kernel called without them)
        raise ValueError(f"tune: {workload.name!r} takes the scalar parameter(s) "
                         f"{', '.join(scalars)}; candidates are measured with arrays alone: "
                         f"tune it with them fixed (a constant in the function)")
    _refuse_unbuildable(workload)
    timing = timing or TimingOptions()
    database = Database(db if db is not None else ":memory:")
    space = SearchSpace(workload, seed=seed or 0)
    if not space.sketches:
        # the function as given is still measured and recorded (audit helper-105: a scan
        # was refused outright)
        bound = target == "c" and any(lp.kind == "thread_binding" for lp in
                                      collect(workload.base_schedule().func.body, For))
        why = ("its loops are bound to GPU threads, and the CPU sketches add parallel "
               "loops, which no GPU kernel holds: tune it for target 'cuda'" if bound else
               "a scan or a recurrence, say")
        warnings.warn(f"tune: no schedule sketch applies to {workload.name!r} on {target} "
                      f"({why}): only the function as given is measured; schedule its "
                      f"blocks by hand (tutorials 02 and 07)", stacklevel=2)
    search = EvolutionarySearch(space, seed=seed)
    previous = database.records(workload)
    search.remember(r.func_hash for r in previous)
    search.seed_genomes(_genomes(previous, space))
    analytical = MemoryMovementModel(target)
    learned = LearnedModel(seed=seed or 0)
    _pretrain(learned, workload, previous)
    done = sum(not _is_baseline(r) for r in previous) if resume else 0
    per_round = per_round or DEFAULT_ROUND
    errors: collections.Counter = collections.Counter()
    wrong: list[Record] = []
    scored: dict[str, list] = {"memory_movement": [], "learned": []}
    best = min((r.median for r in previous if r.ok), default=math.inf)
    curve: list[float] = []
    measured = 0
    start = time.monotonic()
    with make_measurer(runner or "local", workers=workers, address=address,
                       timing=timing) as measurer, \
            TuneProgress(workload.name, trials, workload.flops(), enabled=progress,
                         console=console, time_budget=time_budget, already=done) as bar:
        def time_left() -> bool:
            return time_budget is None or time.monotonic() - start < time_budget

        def propose(count: int):
            model = learned if learned.trained else analytical
            return search.propose(count, model=model, workload=workload)

        # the first round is proposed while the worker computes the reference outputs (the
        # unscheduled matmul 1024^3: 4 s) and the baseline is taken
        first = _Proposal(propose, min(per_round, trials - done)
                          if done < trials and time_left() else 0)
        baseline = _baseline(workload, measurer, before_timing=first.join)
        _record_baseline(database, workload, baseline, previous)
        if baseline is not None:        # a candidate to beat, as the database ranks it
            best = min(best, baseline)
        if math.isfinite(best):
            bar.best_seconds = best
        batch = first.result()
        measuring = time.monotonic()
        while batch:
            funcs = [s.schedule.func for s in batch]
            a_scores = analytical.predict(workload, funcs)
            l_scores = learned.predict(workload, funcs) if learned.trained else None
            following = _Proposal(propose, min(per_round, trials - done - len(batch)))
            records: dict[int, Record] = {}

            def keep(index: int, result: MeasureResult, batch=batch, records=records,
                     before=done) -> None:
                """Record a candidate as soon as it is measured (a run killed mid-round
                resumes with it, and the display and an interrupted run's summary count
                it)."""
                nonlocal best
                records[index] = _record(workload, batch[index], result, space)
                database.add(workload, records[index])
                if result.ok:
                    best = min(best, result.median)
                else:
                    errors[result.error_kind] += 1
                    if result.error_kind == "wrong":
                        wrong.append(records[index])
                        warnings.warn(f"tune: a candidate of {workload.name!r} computed a "
                                      f"different result than the unscheduled function (a "
                                      f"legality bug; please report it with its trace):\n"
                                      f"{batch[index].schedule.trace}\n{result.error}",
                                      stacklevel=2)
                curve.append(best)
                bar.update(before + len(records), best if math.isfinite(best) else None,
                           sum(errors.values()))

            results = measurer.measure(workload, [
                Candidate(s.schedule.trace.to_json(), s.schedule.func.script())
                for s in batch], hopeless=HOPELESS, best_seconds=best,
                before_timing=following.join, on_result=keep)
            for i, result in enumerate(results):
                if i not in records:
                    keep(i, result)
                if result.ok:
                    scored["memory_movement"].append((a_scores[i], -math.log(result.median)))
                    if l_scores is not None:
                        scored["learned"].append((l_scores[i], -math.log(result.median)))
            search.tell(batch, [r.median if r.ok else math.inf for r in results])
            learned.update(workload, funcs, results)
            measured += len(batch)
            done += len(batch)
            batch = _within_budget(following.result(), search, time_budget, start,
                                   (time.monotonic() - measuring) / measured)
        figures = _retime_best(workload, database, timing, measurer.references())
        top = database.best(workload)
        trace = Trace.from_json(top[0].trace_json) if top else None
        searched, retimed = figures.get(top[0].func_hash, (top[0].median, math.inf)) \
            if top else (math.inf, math.inf)
    if plot is not None or curve:
        text = tuning_curve(curve, plot)
        if plot is not None and text != str(plot):
            warnings.warn(f"tune: no plot written to {str(plot)!r}: matplotlib is not "
                          f"installed (pip install 'sched[plot]'); the tuning curve: {text}",
                          stacklevel=2)
        elif progress and console is not None:
            console.print(f"tuning curve: {text}")
    elapsed = search.stats.replay_seconds
    from sched.autoscheduler.cost import spearman

    correlations = {name: spearman([p for p, _ in pairs], [m for _, m in pairs])
                    for name, pairs in scored.items() if len(pairs) >= 3}
    stats = {"proposed": search.stats.proposed, "refused": search.stats.refused,
             "duplicates": search.stats.duplicates,
             "replays_per_second": search.stats.proposed / elapsed if elapsed else 0.0,
             "seconds": time.monotonic() - start}
    database.close()
    return TuneResult(workload, trace, searched, retimed, baseline,
                      measured, dict(errors), wrong, curve, correlations, stats,
                      [s.name for s in space.sketches])


def _retime_best(workload, database, timing, references) -> dict[str, tuple[float, float]]:
    """Re-time the best record in a fresh process and store the figure; the database ranks a
    schedule by its slower figure, so where the first was lucky another may now be best:
    re-time that one too, up to RETIMED schedules (a conv2d with many candidates within the
    noise of each other took more than 3; past RETIMED the best is reported not re-timed).
    Returns {func_hash: (the figure before, the re-timed one)}; the database keeps the
    re-timings (`Database.add_retime`). The search keeps the fastest of its candidates'
    figures, the extreme of noisy measurements: its best was re-timed 20-50% slower on this
    project's 2-core machine in some runs."""
    from sched.autoscheduler.measure import retime

    figures: dict[str, tuple[float, float]] = {}
    for _ in range(RETIMED):
        top = database.best(workload)
        if not top or top[0].func_hash in figures:
            break
        record = top[0]
        script = Trace.from_json(record.trace_json).apply(
            workload.func, concurrency_checked_at_end=True).func.script()
        again = retime(workload, Candidate(record.trace_json, script), timing,
                       references=references)
        figures[record.func_hash] = (record.median, again.median)
        if not again.ok:
            break
        database.add_retime(workload, record.func_hash, tuple(again.seconds))
    return figures


def _check_a_gpu_measures(target: str, runner: str) -> None:
    """CUDA candidates are timed on a GPU: with the local runner, this machine needs one."""
    from sched.cuda.device import gpu_available
    from sched.errors import NoGPUError

    if target == "cuda" and runner == "local" and not gpu_available():
        raise NoGPUError("tune: CUDA candidates are timed on a GPU and this machine has none: "
                         "tune on a GPU machine or a Ray cluster with GPU nodes "
                         "(runner='ray'), or build without tuning: sched.build(func, "
                         "target='cuda') applies the default schedule the cost model picks")


class _Proposal:
    """The search's next round, proposed in a thread while this round builds and is checked
    (the main thread only waits on other processes then). It sees the measurements up to the
    previous round: the round being measured is told to the search after `result`. Joined
    before this round's timings, so that no replay runs beside a timing."""

    def __init__(self, propose, count: int):
        self._batch: list = []
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(propose, count), daemon=True)
        if count > 0:
            self._thread.start()

    def _run(self, propose, count: int) -> None:
        try:
            self._batch = propose(count)
        except BaseException as error:  # noqa: BLE001 - raised again in the tuner's thread
            self._error = error

    def join(self) -> None:
        if self._thread.is_alive():
            self._thread.join()

    def result(self) -> list:
        self.join()
        if self._error is not None:
            raise self._error
        return self._batch


def _refuse_unbuildable(workload: Workload) -> None:
    """Refuse a function `sched.build` refuses as given (a loop marked parallel whose
    iterations race, an access out of bounds): every candidate keeps its steps, so none
    would build, and the run would end with nothing measured and no reason (audit
    helper-123)."""
    from sched.errors import BuildError
    from sched.lower.build_checks import refuse_out_of_bounds, refuse_races
    from sched.polyhedral.in_bounds import OutOfBoundsError

    func = workload.base_schedule().func
    try:
        refuse_out_of_bounds(func)
        refuse_races(func)
    except (BuildError, OutOfBoundsError) as error:
        raise type(error)(f"tune: {workload.name!r} cannot be built as given, so no "
                          f"candidate could: {str(error).removeprefix('build: ')}") from None


def _baseline(workload: Workload, measurer, before_timing=None) -> float | None:
    """The time of the function with only the user's steps (C target; a GPU function needs
    bindings first). With no user steps that function is the reference every candidate is
    checked against: the reference's own run is its time when it lasted a timing repeat or
    longer (the unscheduled kernel is often seconds long, and timed again it would cost more
    than a round of candidates). `before_timing`: called before a timing (see
    LocalMeasurer)."""
    if workload.target != "c":
        return None
    base = workload.base_schedule()
    if not workload.user_trace.instructions:
        seconds = measurer.reference_seconds(workload)
        if seconds is not None and seconds * 1e3 >= measurer.timing.min_repeat_ms:
            return seconds
    result, = measurer.measure(workload, [Candidate(base.trace.to_json(), base.func.script())],
                               before_timing=before_timing)
    return result.median if result.ok else None


def _within_budget(batch: list, search: EvolutionarySearch, time_budget: float | None,
                   start: float, seconds_each: float) -> list:
    """The first candidates of `batch` that the time budget left can measure at
    `seconds_each` (the run's rate so far), at least one while any time is left: the run
    ends within about one candidate of its budget, not one round. Those left out may be
    proposed again."""
    if time_budget is None:
        return batch
    left = time_budget - (time.monotonic() - start)
    if left <= 0:
        count = 0
    else:
        count = max(1, int(left / seconds_each)) if seconds_each > 0 else len(batch)
    search.forget(batch[count:])
    return batch[:count]


def _record_baseline(database: Database, workload: Workload, seconds: float | None,
                     previous: list[Record]) -> None:
    """Record the function with the user's steps only, timed as `seconds`, as a candidate
    (once per database): where no searched schedule beats it, the database's best, and so
    `build(db=)`, is that function."""
    if seconds is None or any(_is_baseline(r) for r in previous):
        return
    from sched.autoscheduler.space.sketch import func_hash

    base = workload.base_schedule()
    database.add(workload, Record(
        trace_json=base.trace.to_json(), func_hash=func_hash(base.func), seconds=(seconds,),
        decisions=json.dumps({"sketch": BASELINE}), target=workload.target,
        arch=workload.arch))


def _is_baseline(record: Record) -> bool:
    try:
        decisions = json.loads(record.decisions)
    except ValueError:
        return False
    return isinstance(decisions, dict) and decisions.get("sketch") == BASELINE


def _record(workload: Workload, sample, result: MeasureResult, space: SearchSpace) -> Record:
    decisions = json.dumps({"sketch": space.sketches[sample.sketch].name,
                            "genome": _plain(sample.genome), "kinds": list(sample.kinds)})
    return Record(trace_json=sample.schedule.trace.to_json(), func_hash=sample.hash,
                  seconds=tuple(result.seconds), error_kind=result.error_kind,
                  error=result.error, decisions=decisions, target=workload.target,
                  arch=workload.arch)


def _plain(value):
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def _genomes(records: list[Record], space: SearchSpace):
    """(median, sketch index, genome, kinds) of the DB's records of this space's sketches."""
    names = {s.name: i for i, s in enumerate(space.sketches)}
    found = []
    for record in records:
        try:
            decisions = json.loads(record.decisions)
        except ValueError:
            continue
        if not isinstance(decisions, dict) or decisions.get("sketch") not in names:
            continue
        genome = tuple(tuple(d) if isinstance(d, list) else d for d in decisions["genome"])
        found.append((record.median if record.ok else math.inf, names[decisions["sketch"]],
                      genome, tuple(decisions["kinds"])))
    return found


def _pretrain(learned, workload: Workload, records: list[Record]) -> None:
    """Train the learned model on the DB's records of this workload (replayed)."""
    pairs = []
    for record in records[-256:]:
        try:
            func = Trace.from_json(record.trace_json).apply(
                workload.func, concurrency_checked_at_end=True).func
        except Exception:       # a record of an older sched that no longer replays
            continue
        pairs.append((func, MeasureResult(seconds=record.seconds,
                                          error_kind=record.error_kind)))
    if pairs:
        learned.pretrain(workload, pairs)

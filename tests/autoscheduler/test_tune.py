"""sched.tune end to end on the C target: records, resume (also after kill -9), the user's
steps kept, a wrong candidate caught, build(db=), determinism, the command line."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.autoscheduler import tune as tune_module
from sched.autoscheduler.database import Database, Record
from sched.autoscheduler.measure.common import TimingOptions
from sched.autoscheduler.tune import RETIMED, tune
from sched.autoscheduler.workload import Workload
from sched.cuda.device import gpu_available
from sched.schedule.trace import Trace
from sched.script import T

FAST = TimingOptions(repeat=2, min_repeat_ms=1.0, timeout=20.0)


def _matmul(n=16):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    return te.create_prim_func([A, B, te.ops.matmul(A, B)], name="matmul")


def _two_blocks():
    """B = A * 2 (elementwise output), C = A @ A (matmul output)."""
    A = te.placeholder((16, 16), name="A")
    B = te.compute((16, 16), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.ops.matmul(A, A)
    return te.create_prim_func([A, B, C], name="two")


def _searched(records):
    """The records of searched candidates (not the function as given, a candidate too)."""
    return [r for r in records if json.loads(r.decisions)["sketch"] != "baseline"]


def _check_matmul(kernel, n=16):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    c = np.zeros((n, n), np.float32)
    kernel(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_tune_records_every_trial_and_returns_a_correct_kernel(tmp_path):
    db = tmp_path / "tune.db"
    result = tune(_matmul(), "c", trials=6, db=db, seed=0, per_round=3, workers=1,
                  timing=FAST, progress=False)
    assert result.trials == 6 and np.isfinite(result.best_seconds)
    assert np.isfinite(result.retimed_seconds) and result.baseline_seconds > 0
    assert len(result.curve) == 6 and result.curve == sorted(result.curve, reverse=True)
    _check_matmul(result.kernel)
    with Database(db) as database:
        records = database.records(Workload.of(_matmul()))
    # the six candidates, and the unscheduled function (a candidate too: at 16x16 it often
    # runs fastest, and then it is the best record)
    searched = _searched(records)
    assert len(searched) == 6 and len(records) == 7
    assert all("sample_perfect_tile" in r.trace_json for r in searched)
    assert len({r.func_hash for r in records}) == 7              # nothing measured twice
    # the end's re-timing, in a fresh process: of the best, and of any it then ranks first
    with Database(db) as database:
        retimed = database.retimed(Workload.of(_matmul()))
    assert 1 <= len(retimed) <= RETIMED and set(retimed) <= {r.func_hash for r in records}
    assert result.retimed_seconds in retimed.values()
    assert all(json.loads(r.decisions)["sketch"] in result.sketches for r in searched)
    # build(db=) applies the best record
    kernel = sched.build(_matmul(), target="c", db=db)
    assert kernel.func.script() == result.schedule.func.script()
    _check_matmul(kernel)


def test_resume_counts_the_records_already_there_and_measures_nothing_twice(tmp_path):
    db = tmp_path / "tune.db"
    tune(_matmul(), "c", trials=3, db=db, seed=0, per_round=3, workers=1, timing=FAST,
         progress=False)
    again = tune(_matmul(), "c", trials=5, db=db, seed=1, per_round=3, workers=1,
                 timing=FAST, progress=False, resume=True)
    assert again.trials == 2
    with Database(db) as database:
        records = database.records(Workload.of(_matmul()))
    assert len(_searched(records)) == 5 and len({r.func_hash for r in records}) == 6


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as command:
                if text.encode() in command.read():
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


def test_a_run_killed_with_sigkill_resumes_from_the_db(tmp_path):
    # one round of 16 candidates (a 64x64 matmul: most are timed, not left out as hopeless
    # against the unscheduled kernel), each timed for 60 ms or more: the kill comes in its middle,
    # and what it measured so far is in the database (each candidate is recorded when
    # measured, not at the round's end)
    db = tmp_path / "tune.db"
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        from sched import compute as te
        from sched.autoscheduler.measure.common import TimingOptions
        from sched.autoscheduler.tune import tune
        if __name__ == "__main__":
            A = te.placeholder((64, 64), name="A")
            B = te.placeholder((64, 64), name="B")
            func = te.create_prim_func([A, B, te.ops.matmul(A, B)], name="matmul")
            tune(func, "c", trials=16, db={str(db)!r}, seed=0, per_round=16, workers=1,
                 timing=TimingOptions(repeat=3, min_repeat_ms=20.0), progress=False)
    """))
    process = subprocess.Popen([sys.executable, str(script)], start_new_session=True)
    workload = Workload.of(_matmul(64))
    deadline = time.time() + 240
    count = 0
    try:
        while time.time() < deadline and count < 2 and process.poll() is None:
            time.sleep(0.1)
            if db.exists():
                with Database(db) as database:
                    count = len(_searched(database.records(workload)))
        os.kill(process.pid, signal.SIGKILL)         # the tuner alone, as a user would
        process.wait()
        assert 2 <= count < 16
        # its build processes notice and end, and with them the fork server
        for _ in range(20):
            if not _processes_mentioning(str(tmp_path)):
                break
            time.sleep(0.5)
        assert _processes_mentioning(str(tmp_path)) == []
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    with Database(db) as database:
        before = database.records(workload)
    assert len(_searched(before)) >= count
    result = tune(_matmul(64), "c", trials=len(_searched(before)) + 2, db=db, seed=0,
                  per_round=2, workers=1, timing=FAST, progress=False, resume=True)
    assert result.trials == 2
    with Database(db) as database:
        after = database.records(workload)
    assert after[:len(before)] == before and len(after) == len(before) + 2


def test_the_users_steps_are_kept_and_only_other_blocks_are_searched(tmp_path):
    sch = sched.Schedule(_two_blocks())
    i, j = sch.get_loops(sch.get_block("B"))
    sch.parallel(i)
    sch.vectorize(sch.split(j, [None, 4])[1])
    user = str(sch.trace)
    db = tmp_path / "tune.db"
    result = tune(sch, "c", trials=3, seed=0, per_round=3, workers=1, timing=FAST,
                  progress=False, db=db)
    # the best: a searched schedule, or the user's steps alone (the baseline) where faster
    assert str(result.trace) == user or str(result.trace).startswith(user + "\n")
    with Database(db) as database:
        searched = _searched(database.records(Workload.of(sch)))
    assert len(searched) == 3
    assert all(str(Trace.from_json(r.trace_json)).startswith(user + "\n") for r in searched)
    assert all("tile_cpu(C" in name for name in result.sketches)
    assert all("(B)" not in name for name in result.sketches)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 16)).astype(np.float32)
    b, c = np.zeros_like(a), np.zeros_like(a)
    result.kernel(a, b, c)
    np.testing.assert_allclose(b, a * 2)
    np.testing.assert_allclose(c, a.astype(np.float64) @ a, rtol=1e-4, atol=1e-4)


def _matmul_relu():
    A = te.placeholder((16, 16), name="A")
    C = te.ops.matmul(A, A)
    D = te.compute((16, 16), lambda i, j: te.max(C[i, j], 0.0), name="D")
    return te.create_prim_func([A, D], name="matmul_relu")


def _user_blocks(*steps) -> set[str]:
    sch = sched.Schedule(_matmul_relu())
    for step in steps:
        step(sch)
    return set(Workload.of(sch).user_blocks)


def test_the_blocks_a_users_steps_schedule_are_theirs_however_they_were_found():
    """A block is the user's (never searched: not inlined, not tiled) when a step took it,
    a loop around it or made it; finding handles schedules nothing (audit helper-70: the
    search inlined "D", which the user had parallelized through get_child_blocks, and never
    tiled "C", which the user had only looked up)."""
    def through_children(sch):
        _, d = sch.get_child_blocks(sch.get_block("root"))
        sch.parallel(sch.get_loops(d)[0])

    def through_consumers(sch):
        d, = sch.get_consumers(sch.get_block("C"))
        sch.vectorize(sch.get_loops(d)[1])

    def looked_up(sch):
        sch.get_loops(sch.get_block("C"))
        sch.get_producers(sch.get_block("D"))

    def cached(sch):
        sch.cache_write(sch.get_block("C"), 0, "local")

    assert _user_blocks(through_children) == {"D"}
    assert _user_blocks(through_consumers) == {"D"}
    assert _user_blocks(looked_up) == set()
    assert _user_blocks(cached) == {"C", "C_local"}


def test_build_of_the_scheduled_function_finds_the_records_of_its_schedule(tmp_path):
    """tune(sch) records a workload of the function as written plus the user's steps;
    build(sch.func, db=) is given the function with those steps applied, and applies the
    same best record (the user's steps, then the searched ones)."""
    sch = sched.Schedule(_two_blocks())
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.parallel(i)
    db = tmp_path / "tune.db"
    result = tune(sch, "c", trials=2, seed=0, per_round=2, workers=1, timing=FAST,
                  progress=False, db=db)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no "holds no record" warning
        kernel = sched.build(sch.func, target="c", db=db)
    assert kernel.func.script() == result.schedule.func.script()
    a = np.random.default_rng(1).standard_normal((16, 16)).astype(np.float32)
    b, c = np.zeros_like(a), np.zeros_like(a)
    kernel(a, b, c)
    np.testing.assert_allclose(b, a * 2)
    np.testing.assert_allclose(c, a.astype(np.float64) @ a, rtol=1e-4, atol=1e-4)
    # another function of the same name, or the same steps on another function: no record
    other = sched.Schedule(_two_blocks())
    other.parallel(other.get_loops(other.get_block("C"))[0])
    with pytest.warns(UserWarning, match="holds no record"):
        sched.build(other.func, target="c", db=db)


def test_an_interrupted_run_counts_each_candidate_measured(monkeypatch):
    """Ctrl-C in the middle of a round: the summary counts the candidates measured and
    recorded in it (it counted finished rounds)."""
    import io

    from rich.console import Console

    real, kept = tune_module._record, []

    def record_then_interrupt(*args, **kwargs):
        if len(kept) == 2:
            raise KeyboardInterrupt
        kept.append(real(*args, **kwargs))
        return kept[-1]

    monkeypatch.setattr(tune_module, "_record", record_then_interrupt)
    console = Console(file=io.StringIO(), width=120, color_system=None)
    with pytest.raises(KeyboardInterrupt):
        tune(_matmul(), "c", trials=4, seed=0, per_round=4, workers=1, timing=FAST,
             console=console)
    summary = console.file.getvalue()
    assert "matmul: 2 trials in" in summary and "(stopped: KeyboardInterrupt)" in summary


def test_the_time_budget_cuts_the_next_round_to_what_it_can_measure():
    """A round proposed in full is cut to the candidates that the time left can measure at
    the run's rate so far (one at least while time is left; none after); the rest may be
    proposed again."""
    class Search:
        forgotten: list = []

        def forget(self, samples):
            self.forgotten.extend(samples)

    batch, search = list(range(16)), Search()
    now = time.monotonic()
    assert tune_module._within_budget(batch, search, None, now - 100, 1.0) == batch
    assert tune_module._within_budget(batch, search, 10.0, now - 7.0, 0.9) == [0, 1, 2]
    assert search.forgotten == list(range(3, 16))
    assert tune_module._within_budget(batch, search, 10.0, now - 9.9, 5.0) == [0]
    assert tune_module._within_budget(batch, search, 10.0, now - 11.0, 0.1) == []


def test_a_wrong_candidate_is_caught_recorded_and_warned_about(monkeypatch):
    """A legality bug, simulated: the first candidate's script is changed to compute
    something else before it is measured."""
    real = tune_module.Candidate
    unscheduled = _matmul().script()
    calls = []

    def corrupt(trace_json, script):
        if script != unscheduled:     # not the baseline (measured when the reference is short)
            calls.append(script)
        if len(calls) == 1 and script != unscheduled:     # the first searched candidate
            script = script.replace("A[v_i, v_k] * B[v_k, v_j]", "A[v_i, v_k] * B[v_k, v_j] * "
                                    "T.float32(2.0)")
            assert "T.float32(2.0)" in script
        return real(trace_json, script)

    monkeypatch.setattr(tune_module, "Candidate", corrupt)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = tune(_matmul(), "c", trials=3, seed=0, per_round=3, workers=1, timing=FAST,
                      progress=False)
    assert result.errors.get("wrong") == 1 and len(result.wrong) == 1
    assert "differ" in result.wrong[0].error or "largest" in result.wrong[0].error
    assert any("legality bug" in str(w.message) for w in caught)
    _check_matmul(result.kernel)         # the best is one of the right ones


def test_build_with_a_database_that_does_not_hold_the_function_says_so(tmp_path):
    missing = tmp_path / "typo.db"
    with pytest.warns(UserWarning, match="no tuning database .*typo.db' \\(no such file\\)"):
        _check_matmul(sched.build(_matmul(), target="c", db=missing))
    assert not missing.exists()
    other = tmp_path / "other.db"
    with Database(other) as database:
        database.add(Workload.of(_matmul(8)), Record("[]", "h", (1e-6,)))
    with pytest.warns(UserWarning, match="holds no record of 'matmul' on c"):
        _check_matmul(sched.build(_matmul(), target="c", db=other))


@T.prim_func
def scale_in_place(A: T.Buffer((32, 24), "float32")):
    for i, j in T.grid(32, 24):
        with T.block("S"):
            vi, vj = T.axis.remap("SS", [i, j])
            A[vi, vj] = A[vi, vj] * T.float32(2) + T.float32(1)


def test_a_function_that_updates_an_argument_in_place_is_tuned():
    # every candidate was flagged wrong: the reference ran on the inputs the candidates then
    # got, so each computed f(f(x)) against f(x)
    result = tune(scale_in_place, "c", trials=4, seed=0, per_round=4, workers=1,
                  timing=FAST, progress=False)
    assert result.errors == {} and result.wrong == []
    a = np.random.default_rng(0).standard_normal((32, 24)).astype(np.float32)
    got = a.copy()
    result.kernel(got)
    np.testing.assert_allclose(got, a * 2 + 1)


@T.prim_func
def _row_cumsum(A: T.Buffer((16, 64), "float32"), B: T.Buffer((16, 64), "float32")):
    for i, j in T.grid(16, 64):
        with T.block("scan"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = T.if_then_else(vj > 0, B[vi, vj - 1], T.float32(0)) + A[vi, vj]


def test_a_function_no_sketch_applies_to_is_measured_as_given():
    # audit, helper-105: a scan was refused ("no schedule sketch applies"); the function as
    # given is a candidate, and the kernel it gives is correct
    with pytest.warns(UserWarning, match="no schedule sketch applies to '_row_cumsum' on c "
                                         ".*only the function as given is measured"):
        result = tune(_row_cumsum, "c", trials=4, seed=0, per_round=4, workers=1,
                      timing=FAST, progress=False)
    assert result.trials == 0 and result.trace is not None and result.sketches == []
    a = np.random.default_rng(0).standard_normal((16, 64)).astype(np.float32)
    b = np.zeros_like(a)
    result.kernel(a, b)
    np.testing.assert_allclose(b, np.cumsum(a, axis=1), rtol=1e-5, atol=1e-5)



def test_tuning_a_gpu_bound_schedule_for_the_cpu_says_why_no_sketch_applies():
    # the warning blamed "a scan or a recurrence" (audit helper-164)
    A, B = te.placeholder((12, 8), name="A"), te.placeholder((8, 10), name="B")
    C = te.ops.matmul(A, B)
    D = te.compute((12, 10), lambda i, j: te.max(C[i, j], 0.0), name="D")
    sch = sched.Schedule(te.create_prim_func([A, B, D], name="mm_relu"))
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    with pytest.warns(UserWarning, match="its loops are bound to GPU threads.*tune it for "
                                         "target 'cuda'"):
        tune(sch, "c", trials=1, seed=0, per_round=1, workers=1, timing=FAST,
             progress=False)

def test_with_no_candidate_that_ran_the_kernel_says_so():
    result = tune(_matmul(), "c", trials=2, seed=0, per_round=2, workers=1,
                  timing=TimingOptions(repeat=2, min_repeat_ms=1000.0, timeout=1e-4),
                  progress=False)
    # (min_repeat_ms: the reference's own run, shorter than 1 s, is never taken as the
    # baseline's time, so the baseline is measured and times out too; a build may also run
    # out of its time on a loaded machine: any error kind)
    assert result.trace is None and sum(result.errors.values()) == 2
    with pytest.raises(RuntimeError, match="no candidate of 'matmul' ran correctly in this "
                                           "run .*sched.build\\(func, target='c'\\)"):
        _ = result.kernel


def test_same_seed_same_first_round(tmp_path):
    """With one worker the search is deterministic given its measurements: the first round
    (which no measurement has influenced yet) is the same candidates in the same order."""
    traces = []
    for run in range(2):
        db = tmp_path / f"{run}.db"
        tune(_matmul(), "c", trials=3, seed=7, per_round=3, workers=1, timing=FAST,
             progress=False, db=db)
        with Database(db) as database:
            traces.append([r.trace_json
                           for r in _searched(database.records(Workload.of(_matmul())))])
    assert len(traces[0]) == 3 and traces[0] == traces[1]


def test_build_for_cuda_without_bindings_applies_a_default_schedule_that_is_correct():
    with pytest.warns(UserWarning, match="no thread bindings and no tuning record"):
        kernel = sched.build(_matmul(32), target="cuda", arch="sm_90")
    assert "blockIdx" in kernel.source and "threadIdx" in kernel.source
    # the same schedule's numbers, on the C target
    from sched.autoscheduler.default import default_schedule

    sch = default_schedule(_matmul(32), "cuda", "sm_90")
    _check_matmul(sched.build(sch.func, target="c"), n=32)


def test_default_cuda_schedule_of_symbolic_shapes_binds_without_fusing():
    n = te.var("n")
    A = te.placeholder((n, n), name="A")
    func = te.create_prim_func([A, te.compute((n, n), lambda i, j: A[i, j] * 2, name="B")])
    from sched.autoscheduler.default import default_schedule

    sch = default_schedule(func, "cuda", "sm_90")
    script = sch.func.script()
    assert "blockIdx.y" in script and "fused" not in script
    kernel = sched.build(sch.func, target="c")
    a = np.random.default_rng(0).random((37, 37), dtype=np.float32)
    b = np.zeros_like(a)
    kernel(a, b)
    np.testing.assert_allclose(b, 2 * a)


def _double_rows():
    n = te.var("n")
    A = te.placeholder((n, 256), name="A")
    return te.create_prim_func([A, te.compute((n, 256), lambda i, j: A[i, j] * 2, name="B")])


def test_default_cuda_schedule_puts_symbolic_rows_on_blockidx_x():
    # helper-88: n rows on blockIdx.y and 256 columns in one thread block along x: more than
    # CUDA's 65535 blocks along y at n = 70000 (refused at launch); x takes 2^31 - 1
    from sched.autoscheduler.default import default_schedule
    from sched.ir.functor import free_vars

    sch = default_schedule(_double_rows(), "cuda", "sm_90")
    kernel = sched.build(sch.func, target="cuda-emu")
    rows = {var: 70000 for var in free_vars(kernel.launch.grid[0])}
    assert rows and kernel.launch.grid_dims(rows)[0] >= 70000
    a = np.random.default_rng(0).random((37, 256), dtype=np.float32)
    for target in ("c", "cuda-emu"):
        b = np.full_like(a, np.nan)
        sched.build(sch.func, target=target)(a, b)
        np.testing.assert_array_equal(b, 2 * a, err_msg=target)


@pytest.mark.gpu
def test_default_cuda_schedule_runs_more_rows_than_a_grid_axis_y_holds():
    import torch

    with pytest.warns(UserWarning, match="no thread bindings"):
        kernel = sched.build(_double_rows(), target="cuda")
    a = torch.rand((70000, 256), device="cuda")
    b = torch.full_like(a, float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, 2 * a, rtol=0, atol=0)


def test_default_cuda_schedule_of_a_symbolic_matmul_spreads_it_over_threads():
    # audit, helper-36: no sketch tiles a symbolic matmul, and the default was one block of
    # one thread; now its spatial loops are spread (its reduction serial in each thread)
    n = te.var("n")
    A = te.placeholder((n, 64), name="A")
    B = te.placeholder((64, 32), name="B")
    func = te.create_prim_func([A, B, te.ops.matmul(A, B)], name="symbolic")
    from sched.autoscheduler.default import default_schedule

    sch = default_schedule(func, "cuda", "sm_90")
    script = sch.func.script()
    assert 'T.thread_binding(32, thread="threadIdx.x")' in script and "blockIdx.y" in script
    rng = np.random.default_rng(0)
    for target in ("c", "cuda-emu"):
        kernel = sched.build(sch.func, target=target)
        for rows in (1, 37):
            a = rng.uniform(-1, 1, (rows, 64)).astype(np.float32)
            b = rng.uniform(-1, 1, (64, 32)).astype(np.float32)
            c = np.full((rows, 32), np.nan, np.float32)
            kernel(a, b, c)
            np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5, err_msg=target)


@T.prim_func
def _prefix_sum_then_scale(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"),
                           C: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.block("scan"):
            vi = T.axis.spatial(64, i)
            B[vi] = T.if_then_else(vi > 0, B[vi - 1], T.float32(0)) + A[vi]
    for i in range(64):
        with T.block("scale"):
            vi = T.axis.spatial(64, i)
            C[vi] = B[vi] * T.float32(2)


@pytest.mark.parametrize("target", ["cuda-emu", "c"])
def test_default_cuda_schedule_runs_a_scan_on_one_thread(target):
    # the scan's iterations depend on each other: no sketch can spread them, so it runs
    # serially on one thread (a kernel of its own), and the scale beside it on many (before,
    # sched.build(target="cuda") refused such functions, 3 in 4 random programs)
    from sched.autoscheduler.default import default_schedule

    sch = default_schedule(_prefix_sum_then_scale, "cuda", "sm_90")
    script = sch.func.script()
    assert 'T.thread_binding(1, thread="blockIdx.x")' in script
    assert 'T.thread_binding(1, thread="threadIdx.x")' in script
    a = np.arange(64, dtype=np.float32) % 7
    b, c = np.zeros(64, np.float32), np.zeros(64, np.float32)
    sched.build(sch.func, target=target)(a, b, c)
    np.testing.assert_array_equal(b, np.cumsum(a))
    np.testing.assert_array_equal(c, 2 * np.cumsum(a))


def test_the_command_line_tunes_a_file(tmp_path):
    source = tmp_path / "kernels.py"
    source.write_text(textwrap.dedent("""
        from sched import compute as te
        A = te.placeholder((16, 16), name="A")
        B = te.placeholder((16, 16), name="B")
        matmul = te.create_prim_func([A, B, te.ops.matmul(A, B)], name="matmul")
    """))
    db = tmp_path / "tune.db"
    done = subprocess.run([sys.executable, "-m", "sched", "tune", f"{source}:matmul",
                           "--trials", "2", "--db", str(db), "--seed", "0", "--workers", "1"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "tuning results" in done.stdout and "re-timed ms" in done.stdout
    assert "sample_perfect_tile" in done.stdout or "the function as given" in done.stdout
    with Database(db) as database:
        assert database.workloads()[0]["records"] == 3      # 2 trials, and the baseline


def test_the_readme_tuning_snippet_runs_on_its_own(tmp_path):
    import pathlib
    import re

    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    snippet, = [block for block in re.findall(r"```python\n(.*?)```", readme, re.S)
                if "sched.tune(" in block]
    (tmp_path / "snippet.py").write_text(snippet)
    done = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "tuning results" in done.stdout and "sample_perfect_tile" in done.stdout
    assert (tmp_path / "tune.db").exists()


@pytest.mark.skipif(gpu_available(), reason="checks the refusal on a machine with no GPU")
def test_tuning_for_cuda_without_a_gpu_says_what_to_do_instead():
    with pytest.raises(sched.NoGPUError, match=r"no(ne)?\b.*runner='ray'.*sched.build"):
        sched.tune(_matmul(16), target="cuda", arch="sm_90", trials=2, progress=False)


def test_a_workload_of_symbolic_shape_is_refused_before_the_search():
    # a symbolic matmul had no sketch; a symbolic softmax had some, and every trial was an
    # error (audit helper-92)
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, 32), name="A")
    B = te.placeholder((32, 24), name="B")
    X = te.placeholder((n, m), name="X")
    for func, shown in ((te.create_prim_func([A, B, te.ops.matmul(A, B)], name="symmm"),
                         "'symmm' are symbolic \\(n\\)"),
                        (te.create_prim_func([X, te.ops.softmax(X)], name="symsm"),
                         "'symsm' are symbolic \\(m, n\\)")):
        with pytest.raises(ValueError, match=f"tune: the shapes of {shown}: candidates are "
                                             f"measured"):
            tune(func, "c", trials=2, progress=False)


def test_a_workload_with_a_scalar_parameter_is_refused_before_the_search():
    # audit, helper-99: every trial was an error (the kernel called without the scalar)
    @T.prim_func
    def scaled(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
               n: T.int32):
        for i, j in T.grid(16, 16):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.Cast("float32", n)

    with pytest.raises(ValueError, match="takes the scalar parameter\\(s\\) n"):
        tune(scaled, "c", trials=2, progress=False)


def test_a_function_build_refuses_as_given_is_refused_before_the_search():
    # audit, helper-123: a parallel loop whose iterations race gave 0 trials, no error and
    # no reason; result.kernel then said sched.build builds the function as it is
    @T.prim_func
    def racy(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for i in T.parallel(63):
            with T.block("B"):
                vi = T.axis.spatial(63, i)
                A[vi + 1] = A[vi] + B[vi]

    with pytest.raises(sched.BuildError, match="tune: 'racy' cannot be built as given, so no "
                                               "candidate could: the iterations of loop 'i'"):
        tune(racy, "c", trials=2, progress=False)


def test_a_record_that_does_not_replay_is_a_warning_and_the_function_still_builds(tmp_path):
    # audit, helper-36: a record another sched wrote (or an edited database) raised a bare
    # "get_block: no block named 'NOPE'" from sched.build, naming neither database nor record
    stale = tmp_path / "stale.db"
    sch = sched.Schedule(_matmul())
    block = sch.get_block(sch.get_child_blocks(sch.get_block("root"))[0].name)
    sch.parallel(sch.get_loops(block)[0])
    trace = sch.trace.to_json().replace(f'"{block.name}"', '"NOPE"')
    with Database(stale) as database:
        database.add(Workload.of(_matmul()), Record(trace, "h", (1e-6,)))
    with pytest.warns(UserWarning, match="best record of 'matmul' in .*stale.db' does not "
                                         "replay on it .*: built without a tuning record"):
        _check_matmul(sched.build(_matmul(), target="c", db=stale))


def test_the_default_schedule_ranks_the_validating_samples_once_its_time_is_up(monkeypatch):
    # audit, helper-92: the default GPU schedule of a stride-2 dilated conv2d drew 8 samples
    # of ~25 s each (5 minutes); each sketch's validating sample is a candidate now, and
    # drawing stops past DEFAULT_SECONDS
    from sched.autoscheduler import default
    from sched.autoscheduler.space.sketch import SearchSpace

    drawn = []
    monkeypatch.setattr(default, "DEFAULT_SECONDS", 0.0)
    monkeypatch.setattr(SearchSpace, "sample", lambda *args: drawn.append(args))
    sch = default.default_schedule(_matmul(32), "cuda", "sm_90")
    assert not drawn and "blockIdx" in sch.func.script()
    _check_matmul(sched.build(sch.func, target="c"), n=32)


def test_a_bfloat16_function_is_tuned():
    # the reference arrays were made with the class np.float32 for a dtype: every trial
    # failed as a "run" error, silently (audit helper-141)
    A = te.placeholder((33,), "bfloat16", name="A")
    B = te.compute((33,), lambda i: A[i] + te.const(1, "bfloat16"), name="B")
    result = sched.tune(te.create_prim_func([A, B]), target="c", trials=2, progress=False)
    assert not result.errors
    assert result.kernel is not None

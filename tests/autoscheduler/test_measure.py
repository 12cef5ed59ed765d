"""Measurement: candidates built in a pool, checked against the unscheduled function and timed
in an isolated worker; wrong, crashing, hanging and unbuildable candidates cost one result."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import time

import numpy as np
import pytest

import sched
from sched import compute as te
from sched import hand_schedules
from sched.autoscheduler.measure import (
    Candidate,
    IsolatedRunner,
    LocalMeasurer,
    TimingOptions,
    make_measurer,
    retime,
)
from sched.autoscheduler.measure.builder import BuildPool
from sched.autoscheduler.measure.worker import Measurement, _time, compare
from sched.autoscheduler.workload import Workload

TIMEOUT = 3.0
TIMING = TimingOptions(number=1, repeat=2, min_repeat_ms=1.0, warmup=1, timeout=TIMEOUT)


def add(value: float, n: int = 64):
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: A[i] + value, name="B")
    return te.create_prim_func([A, B])


def gather(offset: int = 0):
    """B[i] = A[I[i] + offset]: an indirect index, which no bounds check can see."""
    A = te.placeholder((64,), "float32", name="A")
    index = te.placeholder((64,), "int32", name="I")
    B = te.compute((64,), lambda i: A[index[i] + offset], name="B")
    return te.create_prim_func([A, index, B])


def endless():
    """B = A + 1's parameters, with a serial float sum of 2^31 - 1 terms per element."""
    A = te.placeholder((64,), "float32", name="A")
    r = te.reduce_axis((0, 2 ** 31 - 1), name="r")
    B = te.compute((64,), lambda i: te.sum(A[i], axis=r), name="B")
    return te.create_prim_func([A, B])


def split_candidate(func, factor: int, block: str = "B") -> Candidate:
    sch = sched.Schedule(func)
    (loop,) = sch.get_loops(sch.get_block(block))
    sch.split(loop, factors=[None, factor])
    return Candidate(trace_json=sch.trace.to_json(), script=sch.func.script())


def script_candidate(func) -> Candidate:
    return Candidate(trace_json="[]", script=func.script())


@pytest.fixture(scope="module")
def measurer():
    with LocalMeasurer(workers=1, timing=TIMING) as measurer:
        yield measurer


def kinds(results):
    return [r.error_kind for r in results]


def test_results_come_back_in_order_with_times_or_the_reason(measurer):
    workload = Workload.of(add(1.0))
    out_of_bounds = sched.parse(add(1.0).script().replace("A[v_i]", "A[v_i + 1000]"))
    candidates = [split_candidate(add(1.0), 8), script_candidate(add(2.0)),
                  Candidate("[]", "this is not a script"), split_candidate(add(1.0), 16),
                  script_candidate(out_of_bounds), script_candidate(add(1.0))]
    results = measurer.measure(workload, candidates)
    assert kinds(results) == [None, "wrong", "build", None, "build", None]
    for result in (results[0], results[3], results[5]):
        assert result.ok and len(result.seconds) == TIMING.repeat
        assert all(s > 0 for s in result.seconds) and result.build_seconds > 0
    assert "largest difference 1 " in results[1].error and "output 'B'" in results[1].error
    assert "ScriptError" in results[2].error or "Error" in results[2].error
    assert "out of bounds" in results[4].error.lower()


def test_a_crashing_candidate_costs_one_result(measurer):
    workload = Workload.of(gather())
    restarts = measurer.restarts
    results = measurer.measure(workload, [script_candidate(gather(10 ** 9)),
                                          split_candidate(gather(), 4)])
    assert kinds(results) == ["crash", None], [r.error for r in results]
    assert "SIGSEGV" in results[0].error
    assert measurer.restarts == restarts + 1


def test_a_hanging_candidate_times_out_and_the_next_runs(measurer):
    workload = Workload.of(add(0.0))
    results = measurer.measure(workload, [script_candidate(endless()),
                                          split_candidate(add(0.0), 32)])
    assert kinds(results) == ["timeout", None], [r.error for r in results]
    assert TIMEOUT <= results[0].run_seconds < TIMEOUT + 5
    assert results[1].ok


def test_workloads_alternate_in_one_worker(measurer):
    first, second = Workload.of(add(1.0)), Workload.of(add(3.0, n=32))
    for _ in range(2):
        assert measurer.measure(first, [split_candidate(add(1.0), 4)])[0].ok
        result = measurer.measure(second, [split_candidate(add(3.0, n=32), 4)])[0]
        assert result.ok
    assert kinds(measurer.measure(second, [script_candidate(add(1.0, n=32))])) == ["wrong"]


def test_timing_during_builds_gives_the_same_kinds():
    workload = Workload.of(add(1.0))
    candidates = [split_candidate(add(1.0), 8), script_candidate(add(2.0)),
                  Candidate("[]", "not a script"), split_candidate(add(1.0), 2)]
    with LocalMeasurer(workers=1, timing=TIMING, time_during_builds=True) as measurer:
        results = measurer.measure(workload, candidates)
    assert kinds(results) == [None, "wrong", "build", None]
    assert results[3].ok and len(results[3].seconds) == TIMING.repeat


def test_a_checked_candidate_is_timed_in_a_fresh_worker_after_a_death():
    workload = Workload.of(add(1.0))
    script = split_candidate(add(1.0), 8).script
    runner = IsolatedRunner(TIMING)
    try:
        assert runner.check(workload, script).error_kind is None
        runner._replace_worker()         # as after another candidate's crash
        timed = runner.time(workload, script)
        assert timed.ok and len(timed.seconds) == TIMING.repeat and runner.restarts == 1
    finally:
        runner.close()


def test_retime_measures_in_a_fresh_process():
    workload = Workload.of(add(1.0, n=48))
    result = retime(workload, split_candidate(add(1.0, n=48), 16), TIMING)
    assert result.ok and len(result.seconds) == TIMING.repeat
    assert retime(workload, script_candidate(add(5.0, n=48)), TIMING).error_kind == "wrong"


def test_retime_uses_the_references_it_is_given_instead_of_running_the_function_again():
    workload = Workload.of(add(1.0, n=48))
    candidate = split_candidate(add(1.0, n=48), 16)
    with LocalMeasurer(workers=1, timing=TIMING) as measurer:
        assert measurer.reference_seconds(workload) > 0      # made by this measurer's worker
        references = measurer.references()
    assert retime(workload, candidate, TIMING, references=references).ok
    # a reference that is not the function's output makes a right candidate "wrong": the
    # fresh process compared with what it was given, not with a run of its own
    off = {workload.key: [r + 1.0 for r in references[workload.key]]}
    assert retime(workload, candidate, TIMING, references=off).error_kind == "wrong"


def test_a_hopeless_candidate_keeps_its_checked_run_as_its_only_time(measurer):
    workload = Workload.of(add(1.0))
    candidates = [split_candidate(add(1.0), 8), split_candidate(add(1.0), 4)]
    calls = []
    hopeless = measurer.measure(workload, candidates, hopeless=4.0, best_seconds=1e-12,
                                before_timing=lambda: calls.append("before timing"))
    assert [len(r.seconds) for r in hopeless] == [1, 1] and all(r.ok for r in hopeless)
    assert calls == ["before timing"]
    timed = measurer.measure(workload, candidates, hopeless=1e6)
    assert [len(r.seconds) for r in timed] == [TIMING.repeat] * 2


def test_hopeless_compares_with_the_fastest_checked_run_of_the_batch(monkeypatch):
    workload = Workload.of(add(1.0))
    slow, fast = split_candidate(add(1.0), 8), split_candidate(add(1.0), 4)
    with LocalMeasurer(workers=1, timing=TIMING) as measurer:
        real_check = measurer._runner.check

        def check(workload, script):       # the checked runs' times, made 1 s and 0.1 s
            result = real_check(workload, script)
            return dataclasses.replace(result, seconds=(1.0 if script == slow.script else 0.1,))

        monkeypatch.setattr(measurer._runner, "check", check)
        results = measurer.measure(workload, [slow, fast], hopeless=4.0)
        assert all(r.ok for r in results)
        assert [len(r.seconds) for r in results] == [1, TIMING.repeat]
        assert results[0].seconds == (1.0,)
        # no faster run in the batch, but a best so far: both are 10x slower than that
        again = measurer.measure(workload, [slow, fast], hopeless=4.0, best_seconds=0.01)
        assert [r.seconds for r in again] == [(1.0,), (0.1,)]


def test_the_check_reports_its_one_run_time(measurer):
    workload = Workload.of(add(1.0))
    runner = IsolatedRunner(TIMING)
    try:
        checked = runner.check(workload, split_candidate(add(1.0), 8).script)
        assert checked.error_kind is None and len(checked.seconds) == 1
        assert 0 < checked.seconds[0] < checked.run_seconds
    finally:
        runner.close()


def test_the_reference_is_the_unscheduled_functions_output():
    func = sched.hand_schedules.cpu_matmul(16, 24, 8).original_func
    measurement = Measurement(func.script(), "c", None, seed=3)
    a, b, _ = Workload.of(func).arrays(3)
    (reference,) = measurement.reference
    np.testing.assert_allclose(reference, a @ b, rtol=1e-5, atol=1e-5)
    schedule = hand_schedules.cpu_matmul(16, 24, 8)
    outcome = measurement.measure(schedule.func.script(), TIMING)
    assert outcome.kind is None and len(outcome.seconds) == TIMING.repeat



def test_index_data_is_drawn_in_bounds_of_what_it_indexes():
    # a 4-row table's indices were drawn 0..4, and a CSR's row pointers (read in loop bounds)
    # over the whole int range: the reference read past its arrays and every candidate was
    # reported a legality bug (audit helper-164)
    from sched.script import T

    @T.prim_func
    def gather(A: T.Buffer((2, 8), "float32"), idx: T.Buffer((64,), "int32"),
               ptr: T.Buffer((9,), "int32"), data: T.Buffer((16,), "float32"),
               B: T.Buffer((64, 8), "float32"), y: T.Buffer((8,), "float32")):
        for i, j in T.grid(64, 8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[idx[vi], vj]
        for i in range(8):
            with T.block("y"):
                vi = T.axis.remap("S", [i])
                y[vi] = T.float32(0)
                for k in range(ptr[vi], ptr[vi + 1]):
                    y[vi] = y[vi] + data[k]

    _, idx, ptr, *_ = Workload.of(gather).arrays(0)
    assert set(idx) == {0, 1}
    assert ptr.min() >= 0 and ptr.max() <= 3


@pytest.mark.parametrize("body, low, high", [
    ("C[vi] = A[I[vi] - 1]", 1, 4),                     # index arithmetic
    ("C[vi] = A[I[vi] * 2 + 1]", 0, 2),
    ("x = I[vi]\n            C[vi] = A[x + 3]", 0, 2),   # through a let
    ("C[vi] = A[I[vi] - 20]", 20, 25),                  # past the small candidates
    ("C[vi] = A[40 - I[vi]]", 35, 40),                  # falling
    ("C[vi] = A[(I[vi] - 100) // 4]", 100, 123),        # a division's steps
])
def test_index_data_in_arithmetic_and_lets_is_drawn_in_bounds(body, low, high):
    # A[I[vi] - 1] read A[-1], a let's value was drawn over the int range (helper-168)
    func = sched.parse(f'''
@T.prim_func
def f(A: T.Buffer((6,), "float32"), I: T.Buffer((16,), "int32"), C: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            {body}
''')
    arrays = Workload.of(func).arrays(0)
    assert low <= arrays[1].min() and arrays[1].max() <= high
    sched.interpret(func, *arrays)                      # (in bounds: no OutOfBoundsError)


def test_index_data_of_a_block_binding_is_drawn_in_its_domain():
    func = sched.parse('''
@T.prim_func
def f(A: T.Buffer((3,), "float32"), I: T.Buffer((16,), "int32"), C: T.Buffer((3,), "float32")):
    for i in range(16):
        with T.block("C"):
            vj = T.axis.spatial(3, I[i])
            C[vj] = A[vj] + T.float32(1)
''')
    arrays = Workload.of(func).arrays(0)
    assert arrays[1].max() <= 2
    sched.interpret(func, *arrays)

def test_compare_allows_float_rounding_not_errors_and_integers_exactly():
    expected = np.linspace(-10, 10, 100, dtype=np.float32)
    assert compare("C", expected * (1 + 1e-5), expected, "float32") is None
    wrong = expected.copy()
    wrong[17] += 0.5
    message = compare("C", wrong, expected, "float32")
    assert "largest difference 0.5 at (17,)" in message and "1 of 100 elements" in message
    nan = expected.copy()
    nan[3] = np.nan
    assert compare("C", nan, nan.copy(), "float32") is None
    assert "at (3,)" in compare("C", nan, expected, "float32")
    ints = np.arange(12, dtype=np.int32).reshape(3, 4)
    off = ints.copy()
    off[2, 1] += 1
    assert compare("C", ints, ints.copy(), "int32") is None
    assert "first at (2, 1): got 10, expected 9" in compare("C", off, ints, "int32")


def test_timing_raises_number_until_a_repeat_lasts_min_repeat_ms():
    calls = []

    def repeat(number):          # a kernel of exactly 1 ms per call
        calls.append(number)
        return number * 1e-3

    timing = TimingOptions(number=1, repeat=3, min_repeat_ms=20.0, warmup=2)
    seconds = _time(repeat, timing)
    assert calls[0] == 2                                  # the warm-up
    assert calls[-3] * 1e-3 >= 0.02 and calls[-4] * 1e-3 < 0.02
    assert calls[-1] == calls[-2] == calls[-3]            # the repeats, at the calibrated number
    assert seconds == pytest.approx((1e-3,) * 3)


def fake_build(script: str, target: str, arch):
    """A build function for BuildPool's own failures: hang, die, fail or succeed."""
    if script == "hang":
        time.sleep(600)
    if script == "die":
        os.abort()
    return ("BuildError: refused", 0.01) if script == "fail" else (None, 0.01)


def spawning_build(script: str, target: str, arch):
    """A build that starts a long compiler-like child process (its pid written to the file
    `script` names) and hangs."""
    import subprocess

    child = subprocess.Popen(["sleep", "600"])
    pathlib.Path(script).write_text(str(child.pid))
    time.sleep(600)
    return None, 0.0


def _running(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"          # a zombie nobody reaped has stopped running


@pytest.mark.skipif(not pathlib.Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_timed_out_build_takes_its_compiler_processes_with_it(tmp_path):
    pid_file = tmp_path / "child.pid"
    workload = Workload.of(add(1.0))
    with BuildPool(workers=1, timeout=2.0, function=spawning_build) as pool:
        (outcome,) = pool.outcomes(workload, [Candidate("[]", str(pid_file))])
        assert outcome.kind == "timeout"
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(child), "the hung build's child process outlived the pool's restart"


def test_the_build_pool_survives_hung_and_dying_builds():
    scripts = ["ok", "die", "ok", "hang", "fail", "ok"]
    workload = Workload.of(add(1.0))
    with BuildPool(workers=2, timeout=2.0, function=fake_build) as pool:
        outcomes = list(pool.outcomes(workload, [Candidate("[]", s) for s in scripts]))
        assert [o.kind for o in outcomes] == [None, "crash", None, "timeout", "build", None]
        assert "died" in outcomes[1].error and "longer than 2 s" in outcomes[3].error
        assert [o.kind for o in pool.outcomes(workload, [Candidate("[]", "ok")])] == [None]


def test_cuda_candidates_build_without_a_gpu():
    schedule = hand_schedules.gpu_elementwise((64, 64))
    workload = Workload.of(schedule.original_func, target="cuda", arch="sm_90")
    broken = Candidate("[]", schedule.func.script().replace("T.thread_binding", "T.nonsense"))
    with BuildPool(workers=1) as pool:
        results = pool.build(workload, [Candidate(schedule.trace.to_json(),
                                                  schedule.func.script()), broken])
    assert results[0].error is None and results[0].seconds > 0
    assert results[1].error is not None


@pytest.mark.gpu
def test_cuda_candidates_are_checked_and_timed_on_the_gpu():
    schedule = hand_schedules.gpu_matmul(128, 128, 128)
    workload = Workload.of(schedule.original_func, target="cuda")
    good = Candidate(schedule.trace.to_json(), schedule.func.script())
    wrong = Candidate("[]", good.script.replace("T.float32(0.0)", "T.float32(1.0)"))
    with LocalMeasurer(workers=1, timing=TIMING) as measurer:
        results = measurer.measure(workload, [good, wrong])
    assert results[0].ok and len(results[0].seconds) == TIMING.repeat
    assert kinds(results)[1] == "wrong"


def test_make_measurer_names_its_runners():
    with pytest.raises(ValueError, match="unknown runner 'slurm'"):
        make_measurer("slurm")
    with pytest.raises(ValueError, match="runner='ray'"):
        make_measurer("local", address="auto")


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "bool", "uint16"])
def test_candidates_are_measured_on_64_byte_aligned_copies(dtype):
    from sched.autoscheduler.measure.worker import ARRAY_ALIGNMENT, aligned_copy

    array = (np.arange(3 * 17) % 5).astype(dtype).reshape(3, 17)
    copy = aligned_copy(array)
    assert ARRAY_ALIGNMENT == 64 and copy.ctypes.data % 64 == 0
    assert copy.shape == array.shape and copy.dtype == array.dtype and copy.flags.c_contiguous
    np.testing.assert_array_equal(copy, array)
    copy[0, 0] = 1
    assert array[0, 0] == 0                 # a copy, not a view


def _scripted_worker(replies_with_delays):
    """A WorkerProcess whose 'worker' is a thread sending `replies_with_delays` ((seconds,
    reply) pairs) after the first request; its process is a sleeping stand-in."""
    import subprocess
    import sys
    import threading
    from multiprocessing import Pipe

    from sched.autoscheduler.measure.runner import WorkerProcess

    worker = object.__new__(WorkerProcess)
    worker._requests, child_requests = Pipe()
    child_replies, worker._replies = Pipe()
    worker._stderr = open(os.devnull, "rb")
    worker.process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                      start_new_session=True)

    def play():
        child_requests.recv()
        for delay, reply in replies_with_delays:
            time.sleep(delay)
            try:
                child_replies.send(reply() if callable(reply) else reply)
            except OSError:
                return

    threading.Thread(target=play, daemon=True).start()
    return worker


def test_the_run_time_limit_counts_from_the_run_not_from_the_workers_build():
    """The worker's own build (lowering, the cache load) may take longer than the run's time
    limit: the limit counts from its ("running",). Seen on the first GPU run: a CUDA matmul's
    check was killed at 3 s while its worker was still lowering it."""
    from sched.autoscheduler.measure.runner import WorkerDied

    def running():
        return ("running", time.monotonic())

    def done():
        return ("done", None, None, (0.001,), False, time.monotonic())

    slow_build = _scripted_worker([(0.6, running), (0.1, done)])
    reply = slow_build.request(("check", "script"), timeout=0.3, build_timeout=5.0)
    assert reply[:4] == ("done", None, None, (0.001,))
    slow_build.kill()
    hung_build = _scripted_worker([(5.0, running)])
    with pytest.raises(WorkerDied, match=r"longer than 0.4 s \(its build in the worker\)"):
        hung_build.request(("check", "script"), timeout=0.2, build_timeout=0.4)
    hung_run = _scripted_worker([(0.1, running), (5.0, done)])
    with pytest.raises(WorkerDied, match=r"longer than 0.3 s \(its run\)"):
        hung_run.request(("check", "script"), timeout=0.3, build_timeout=5.0)
    timing_too = _scripted_worker([(0.1, running), (0.2, running), (0.2, done)])
    reply = timing_too.request(("measure", "script"), timeout=0.3, build_timeout=5.0)
    assert reply[:4] == ("done", None, None, (0.001,))
    timing_too.kill()


def test_a_run_longer_than_its_limit_is_a_timeout_even_when_its_reply_is_read_late():
    # found by a clean-clone run beside a fuzz hunt: a candidate's check took 2 ms, longer
    # than a limit of 0.1 ms, but its reply was already in the pipe when the busy parent read
    # the ("running",) before it, and it counted as measured
    # both replies at once, the worker's clock saying the run took 0.5 s
    late = _scripted_worker([(0.0, ("running", 100.0)), (0.0, ("done", None, None, (0.5,),
                                                                   False, 100.5))])
    reply = late.request(("check", "script"), timeout=0.3, build_timeout=5.0)
    assert reply[:2] == ("done", "timeout") and "ran 0.5 s, longer than 0.3 s" in reply[2]
    late.kill()


def test_a_worker_that_ends_after_its_reply_is_replaced_before_the_next_candidate(
        monkeypatch):
    # stop 39, the 4096^3 tuning run on an H200: a failed CUDA launch ends the worker after
    # its reply; the next candidate found the pipe closed and was counted a crash
    from types import SimpleNamespace

    from sched.autoscheduler.measure import runner as runner_module

    made = []

    class EndingWorker:
        def __init__(self):
            made.append(self)
            self.process = SimpleNamespace(poll=lambda: None)
            self.workload_key, self.replied = "k", False

        def request(self, message, timeout, build_timeout=None):
            if self.replied:
                raise runner_module.WorkerDied("crash", "the worker process died")
            self.replied = True
            return ("done", "run", "CUDA_ERROR_LAUNCH_FAILED", (), True, 0.0)

        def kill(self):
            pass

    monkeypatch.setattr(runner_module, "WorkerProcess", EndingWorker)
    runner = runner_module.IsolatedRunner()
    workload = SimpleNamespace(key="k")
    for script in ("first", "second"):
        assert runner.check(workload, script).error_kind == "run"
    assert len(made) == 3


def test_the_check_catches_a_lost_init_and_an_int8_read_as_uint8():
    # audit, helper-36: outputs started zeroed (a lost reduction init passed) and integers
    # were drawn from 0..3 (an int8 read as uint8 passed)
    from sched.autoscheduler.measure.worker import Measurement
    from sched.script import T

    @T.prim_func
    def matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
               C: T.Buffer((16, 16), "float32")):
        for i, j, k in T.grid(16, 16, 16):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    @T.prim_func
    def widen(A: T.Buffer((16, 16), "int8"), B: T.Buffer((16, 16), "int32")):
        for i, j in T.grid(16, 16):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.Cast("int32", A[vi, vj]) * 3

    no_init = matmul.script().replace("with T.init():", "if False:")
    as_uint8 = widen.script().replace('T.Cast("int32", A[vi, vj])',
                                      'T.Cast("int32", T.Cast("uint8", A[vi, vj]))')
    for reference, wrong in ((matmul, no_init), (widen, as_uint8)):
        measurement = Measurement(reference.script(), "c", None, 0)
        assert measurement.check(reference.script()).kind is None
        assert measurement.check(wrong).kind == "wrong"


def test_an_expensive_workloads_reference_runs_the_default_cpu_schedule(monkeypatch):
    # the unscheduled loops of a 4096^3 matmul took minutes on one core before a GPU tuning
    # run could check its first candidate: above SCHEDULED_REFERENCE_ABOVE operations the
    # reference runs the default CPU schedule, and still catches a wrong candidate
    from sched.autoscheduler.measure import worker

    monkeypatch.setattr(worker, "SCHEDULED_REFERENCE_ABOVE", 1000.0)
    func = sched.hand_schedules.cpu_matmul(32, 48, 16).original_func
    workload = Workload.of(func)
    assert "T.parallel" not in func.script()
    reference = worker.reference_kernel(workload)
    assert "#pragma omp parallel" in reference.source
    measurement = Measurement(func.script(), "c", None, seed=1)
    a, b, _ = workload.arrays(1)
    (outputs,) = measurement.reference
    np.testing.assert_allclose(outputs, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    assert measurement.check(hand_schedules.cpu_matmul(32, 48, 16).func.script()).kind is None
    wrong = func.script().replace("A[v_i, v_k] * B[v_k, v_j]", "A[v_i, v_k] * B[v_k, v_j] * 2")
    assert wrong != func.script()
    assert measurement.check(wrong).kind == "wrong"
    monkeypatch.setattr(worker, "SCHEDULED_REFERENCE_ABOVE", 2.0 ** 33)
    assert "omp" not in worker.reference_kernel(workload).source    # a small one: as written


def test_row_pointers_keep_a_csr_rows_reads_in_its_data():
    # the row pointers bound a loop that indexes data of 2 elements: drawn 0..3, the rows
    # read past data (audit helper-170)
    from sched.script import T

    @T.prim_func
    def row_sums(ptr: T.Buffer((5,), "int32"), data: T.Buffer((2,), "float32"),
                 y: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("row"):
                vi = T.axis.remap("S", [i])
                y[vi] = T.float32(0)
                for k in range(ptr[vi], ptr[vi + 1]):
                    y[vi] = y[vi] + data[k]

    for seed in range(4):
        arrays = Workload.of(row_sums).arrays(seed)
        assert arrays[0].min() >= 0 and arrays[0].max() <= 1
        sched.interpret(row_sums, *arrays)

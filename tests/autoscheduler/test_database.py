"""The tuning database: records come back as written, the best ignores errors, a writer killed
with SIGKILL loses no record it reported, two writers at once lose nothing."""

from __future__ import annotations

import math
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import sched
from sched import compute as te
from sched.autoscheduler.database import Database, Record, machine_name, package_version
from sched.autoscheduler.workload import Workload

ROOT = Path(__file__).resolve().parents[2]


def _scale(n: int = 8):
    A = te.placeholder((n, n), "float32", name="A")
    B = te.compute((n, n), lambda i, j: A[i, j] * 2, name="B")
    return te.create_prim_func([A, B])


def _ok(index: int, seconds: float) -> Record:
    return Record(f'[{{"step": {index}}}]', f"hash{index}", (seconds, seconds * 1.1, seconds),
                  decisions=f"[[{index}]]")


def test_records_round_trip(tmp_path):
    workload = Workload.of(_scale())
    record = Record('[{"kind": "split"}]', "h0", (1e-3, 2e-3, 1.5e-3), decisions="[[4, 2]]")
    failed = Record("[]", "h1", error_kind="timeout", error="ran past 10 s")
    with Database(tmp_path / "tune.db") as db:
        db.add(workload, record)
        db.add(workload, failed)
    with Database(tmp_path / "tune.db") as db:
        first, second = db.records(workload)
    assert (first.trace_json, first.func_hash, first.seconds, first.decisions) == \
        (record.trace_json, "h0", (1e-3, 2e-3, 1.5e-3), "[[4, 2]]")
    assert first.ok and first.median == 1.5e-3
    assert first.sched_version == package_version() and first.machine == machine_name()
    assert first.created > 0 and first.target == "c" and first.arch is None
    assert (second.error_kind, second.error, second.seconds) == ("timeout", "ran past 10 s", ())
    assert not second.ok and second.median == math.inf


def test_best_orders_by_median_and_skips_errors(tmp_path):
    workload = Workload.of(_scale())
    with Database(tmp_path / "tune.db") as db:
        db.add(workload, _ok(0, 3e-3))
        db.add(workload, Record("[]", "crashed", error_kind="crash", error="signal 11"))
        db.add(workload, _ok(1, 1e-3))
        db.add(workload, Record("[]", "wrong", (1e-6,), error_kind="wrong", error="max diff 3"))
        db.add(workload, _ok(2, 2e-3))
        assert [r.func_hash for r in db.best(workload, k=5)] == ["hash1", "hash2", "hash0"]
        assert [r.func_hash for r in db.best(workload)] == ["hash1"]
        assert db.measured_hashes(workload) == {"hash0", "hash1", "hash2", "crashed", "wrong"}
        [summary] = db.workloads()
    assert summary == {"key": workload.key, "target": "c", "arch": None, "name": "main",
                       "script": workload.script, "records": 5, "errors": 2,
                       "best_seconds": 1e-3, "baseline_seconds": None}


def test_a_retimed_schedule_ranks_by_its_slower_figure(tmp_path):
    """The tuner re-times its best in a fresh process (`add_retime`): a lucky first figure
    no longer outranks a schedule that held its own; a faster re-timing leaves the record's
    figure. `best_for` (what `sched.build(db=)` applies) ranks the same way."""
    workload = Workload.of(_scale())
    with Database(tmp_path / "tune.db") as db:
        db.add(workload, _ok(0, 1e-3))           # lucky: re-timed at 1.5 ms
        db.add(workload, _ok(1, 1.2e-3))
        db.add(workload, _ok(2, 1.3e-3))         # re-timed faster, at 1 ms: ranks at 1.3
        db.add_retime(workload, "hash0", (1.5e-3, 1.6e-3, 1.5e-3))
        db.add_retime(workload, "hash2", (1e-3,))
        assert [r.func_hash for r in db.best(workload, k=3)] == ["hash1", "hash2", "hash0"]
        assert db.best_for(_scale()).func_hash == "hash1"
        assert db.retimed(workload) == {"hash0": 1.5e-3, "hash2": 1e-3}
        assert len(db.records(workload)) == 3               # re-timings are not trials
    with Database(tmp_path / "tune.db") as db:              # kept in the file
        assert db.retimed(workload) == {"hash0": 1.5e-3, "hash2": 1e-3}


def test_workloads_are_told_apart_by_steps_target_and_arch(tmp_path):
    func = _scale()
    sch = sched.Schedule(func)
    sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 4])
    plain, stepped = Workload.of(func), Workload.of(sch)
    sm80, sm90 = Workload.of(func, "cuda", "sm_80"), Workload.of(func, "cuda", "sm_90")
    with Database(tmp_path / "tune.db") as db:
        for index, workload in enumerate([plain, stepped, sm80, sm90]):
            db.add(workload, _ok(index, (index + 1) * 1e-3))
        assert [r.func_hash for r in db.records(stepped)] == ["hash1"]
        assert db.best_for(func).func_hash == "hash0"
        assert db.best_for(sch).func_hash == "hash1"
        assert db.best_for(func, "cuda", "sm_90").func_hash == "hash3"
        assert db.best_for(func, "cuda").func_hash == "hash2"     # any arch: the fastest
        assert db.best_for(func, "cuda", "sm_75") is None
        assert db.best_for(_scale(16)) is None
        assert [(w["target"], w["arch"]) for w in db.workloads()] == \
            [("c", None), ("c", None), ("cuda", "sm_80"), ("cuda", "sm_90")]
        record = db.records(sm90)[0]
        assert (record.target, record.arch) == ("cuda", "sm_90")


def test_in_memory_database(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    workload = Workload.of(_scale())
    with Database(":memory:") as db:
        db.add(workload, _ok(0, 1e-3))
        assert [r.func_hash for r in db.best(workload)] == ["hash0"]
    assert list(tmp_path.iterdir()) == []


def test_unknown_workload_reads_empty(tmp_path):
    with Database(tmp_path / "tune.db") as db:
        workload = Workload.of(_scale())
        assert db.records(workload) == [] and db.best(workload) == []
        assert db.measured_hashes(workload) == set() and db.workloads() == []


def test_path_in_another_directory_and_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    workload = Workload.of(_scale())
    with Database("~/runs/deep/tune.db") as db:                 # parents are made
        db.add(workload, _ok(0, 1e-3))
    assert (tmp_path / "runs" / "deep" / "tune.db").is_file()
    monkeypatch.chdir(tmp_path / "runs")
    with Database(Path("deep") / "tune.db") as db:
        assert len(db.records(workload)) == 1


def test_directory_path_is_refused(tmp_path):
    with pytest.raises(ValueError, match="is a directory: give a file in it"):
        Database(tmp_path)


def test_file_that_is_not_a_database_is_refused(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("these are not the records you are looking for\n" * 100)
    with pytest.raises(ValueError, match="cannot use .* as a tuning database"):
        Database(path)


def test_an_sqlite_file_of_something_else_is_refused_untouched(tmp_path):
    # sched's tables were added to it, and `sched db` listed nothing (audit helper-156)
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE notes (text)")
    with pytest.raises(ValueError, match=r"an SQLite file of something else \(tables notes\)"):
        Database(path)
    with sqlite3.connect(path) as raw:
        tables = [r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert tables == ["notes"]


def test_newer_schema_is_refused(tmp_path):
    Database(tmp_path / "tune.db").close()
    with sqlite3.connect(tmp_path / "tune.db") as raw:
        raw.execute("PRAGMA user_version=99")
    with pytest.raises(ValueError, match="newer sched"):
        Database(tmp_path / "tune.db")


def test_file_is_in_wal_mode(tmp_path):
    Database(tmp_path / "tune.db").close()
    with sqlite3.connect(tmp_path / "tune.db") as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# A writer process: once told "go" on stdin, adds `count` records to the DB at argv[1],
# printing "added <i>" after each add returns (every line printed is a record the DB must keep).
WRITER = textwrap.dedent("""
    import sys
    from sched import compute as te
    from sched.autoscheduler.database import Database, Record
    from sched.autoscheduler.workload import Workload

    A = te.placeholder((8, 8), "float32", name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j] * 2, name="B")
    workload = Workload.of(te.create_prim_func([A, B]))
    path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    print("ready", flush=True)
    sys.stdin.readline()
    with Database(path) as db:
        for i in range(count):
            db.add(workload, Record("[]", f"{name}-{i}", (1e-3 * (i + 1),)))
            print("added", i, flush=True)
""")


def _writer(tmp_path, name: str, count: int) -> subprocess.Popen:
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    writer = subprocess.Popen([sys.executable, str(script), str(tmp_path / "tune.db"), name,
                               str(count)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=env)
    assert writer.stdout.readline() == "ready\n"
    return writer


def _go(writer: subprocess.Popen) -> None:
    writer.stdin.write("go\n")
    writer.stdin.close()


def test_writer_killed_with_sigkill_keeps_every_reported_record(tmp_path):
    writer = _writer(tmp_path, "w", 100_000)
    _go(writer)
    reported = []
    for line in writer.stdout:
        if line.startswith("added"):
            reported.append(int(line.split()[1]))
        if len(reported) == 30:
            writer.send_signal(signal.SIGKILL)
            break
    reported += [int(line.split()[1]) for line in writer.stdout if line.startswith("added")]
    assert writer.wait() == -signal.SIGKILL
    with Database(tmp_path / "tune.db") as db:
        [workload] = db.workloads()
        kept = {r.func_hash for r in db.records(Workload.of(_scale()))}
    assert {f"w-{i}" for i in reported} <= kept
    assert len(kept) < 100_000 and workload["records"] == len(kept)


def test_two_writers_at_once_lose_nothing(tmp_path):
    writers = [_writer(tmp_path, name, 150) for name in ("a", "b")]
    for writer in writers:                   # both imported: they open and write together
        _go(writer)
    outputs = [writer.stdout.read() for writer in writers]
    for writer in writers:
        writer.wait(timeout=120)
    assert [writer.returncode for writer in writers] == [0, 0]
    assert all(output.count("added") == 150 for output in outputs)
    with Database(tmp_path / "tune.db") as db:
        hashes = [r.func_hash for r in db.records(Workload.of(_scale()))]
        assert len(db.workloads()) == 1
    assert sorted(hashes) == sorted(f"{name}-{i}" for name in "ab" for i in range(150))

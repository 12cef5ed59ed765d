"""The tuning database: every measured schedule, in one SQLite file that survives crashes.

    db = Database("tune.db")
    db.add(workload, Record(trace_json, func_hash, seconds=(1.2e-3, 1.1e-3, 1.3e-3)))
    db.best(workload)                   # [the record with the lowest median time]
    db.measured_hashes(workload)        # the scheduled functions already measured: skip them
    db.best_for(func, target="c")       # what `sched.build(func, db=...)` applies

Two tables: `workloads` (one row per structural hash, target and arch, with the function's
script and the user's steps, so a DB explains itself) and `records` (one row per measured
candidate: its trace, decisions, times or error, and where and by which sched it was measured).

Crashes and concurrency are SQLite's job: the file is in WAL mode, and each `add` is one
`BEGIN IMMEDIATE ... COMMIT` transaction, synced before `add` returns, so a run killed with
`kill -9` loses no record already added, and a power cut none either. Two processes writing one
file at once wait for each other (the busy timeout, then retries with back-off), and neither
loses a record. WAL needs a local file system (not NFS). A `Database` object belongs to the
thread that opened it; each process opens its own.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import platform
import socket
import sqlite3
import statistics
import time
from pathlib import Path

SCHEMA_VERSION = 1               # PRAGMA user_version of a file this module wrote
BUSY_TIMEOUT = 30.0              # seconds SQLite waits for another writer's lock
BASELINE = "baseline"            # the sketch named in the record of the function as given
RETRY_SECONDS = 120.0            # how long a write retries "database is locked" in all

_SCHEMA = ("""
CREATE TABLE IF NOT EXISTS workloads (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL,           -- Workload.key: structural hash of the script and user steps
    target TEXT NOT NULL,        -- "c" or "cuda"
    arch TEXT NOT NULL,          -- "sm_90"; '' for none (NULLs would defeat UNIQUE)
    name TEXT NOT NULL,
    script TEXT NOT NULL,        -- the function as written, TVMScript-style
    user_trace TEXT NOT NULL,    -- the user's steps, Trace.to_json()
    created REAL NOT NULL,       -- seconds since the epoch
    UNIQUE (key, target, arch)
)""", """
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY AUTOINCREMENT,    -- insertion order
    workload_id INTEGER NOT NULL REFERENCES workloads(id),
    trace TEXT NOT NULL,         -- every step, the user's first: Trace.to_json()
    decisions TEXT NOT NULL,     -- JSON list of the sampling decisions
    func_hash TEXT NOT NULL,     -- the scheduled function's hash: measured once
    times TEXT NOT NULL,         -- JSON list: seconds per repeat
    median REAL,                 -- NULL when there is no time
    error_kind TEXT,             -- one of measure.common.ERROR_KINDS, NULL when it ran
    error TEXT,
    target TEXT NOT NULL,
    arch TEXT NOT NULL,
    sched_version TEXT NOT NULL,
    machine TEXT NOT NULL,
    created REAL NOT NULL
)""", """
CREATE INDEX IF NOT EXISTS records_by_workload ON records (workload_id, median)
""", """
CREATE TABLE IF NOT EXISTS retimes (
    workload_id INTEGER NOT NULL REFERENCES workloads(id),
    func_hash TEXT NOT NULL,     -- the schedule re-timed (its records: `records.func_hash`)
    times TEXT NOT NULL,         -- JSON list: seconds per repeat, in a fresh process
    median REAL NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (workload_id, func_hash)
)""")


@dataclasses.dataclass(frozen=True)
class Record:
    """One measured candidate. `add` fills `sched_version`, `machine` and `created` when they
    are empty, and stores the workload's target and arch (this record's are what was read)."""

    trace_json: str
    func_hash: str
    seconds: tuple[float, ...] = ()      # one time per repeat; empty on error
    error_kind: str | None = None        # one of measure.common.ERROR_KINDS
    error: str | None = None
    decisions: str = "[]"
    target: str = "c"
    arch: str | None = None
    sched_version: str = ""
    machine: str = ""
    created: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error_kind is None and self.error is None and bool(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds) if self.seconds else math.inf


class Database:
    """A tuning database in the SQLite file at `path` (created, with its tables, if needed;
    `~` is expanded and missing parent directories are made). ":memory:" is a database that
    lives as long as the object (a run with no file)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path).expanduser()
        self._workload_ids: dict[tuple[str, str, str], int] = {}
        if str(path) == ":memory:":
            self._db = sqlite3.connect(":memory:", isolation_level=None)
            self._open()
            return
        if self.path.is_dir():
            raise ValueError(f"tuning database {str(path)!r} is a directory: give a file in "
                             f"it, e.g. {str(self.path / 'tune.db')!r}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ValueError(f"cannot make the directory of the tuning database "
                             f"{str(path)!r}: {error}") from None
        try:
            # isolation_level=None: no implicit transactions; each write says BEGIN IMMEDIATE
            self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None)
        except sqlite3.OperationalError as error:
            raise ValueError(f"cannot open the tuning database {str(path)!r}: {error}") from None
        try:
            self._open()
        except sqlite3.DatabaseError as error:
            self._db.close()
            raise ValueError(f"cannot use {str(path)!r} as a tuning database: {error}") from None

    def _open(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        tables = [row[0] for row in self._db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")]
        if version == 0 and tables and "workloads" not in tables:
            # an SQLite file of something else: sched's tables were added to it (audit
            # helper-156)
            raise sqlite3.DatabaseError(f"it is an SQLite file of something else (tables "
                                        f"{', '.join(sorted(tables)[:5])}), not a tuning "
                                        f"database; give another file")
        if version > SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f"it was written by a newer sched (schema {version}, "
                                        f"this one reads {SCHEMA_VERSION}); upgrade sched")
        _retry(lambda: self._db.execute("PRAGMA journal_mode=WAL"))
        self._db.execute("PRAGMA synchronous=FULL")   # a commit is on disk when add returns
        self._db.execute("PRAGMA foreign_keys=ON")

        def create() -> None:
            with self._transaction():
                for statement in _SCHEMA:
                    self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

        _retry(create)

    # -- writing --------------------------------------------------------------------------

    def add(self, workload, record: Record) -> None:
        """Store `record` as a measurement of `workload` (registered if new), committed before
        this returns."""
        record = dataclasses.replace(
            record, sched_version=record.sched_version or package_version(),
            machine=record.machine or machine_name(), created=record.created or time.time())
        median = record.median if record.seconds else None

        def insert() -> int:
            with self._transaction():
                workload_id = self._register(workload)
                self._db.execute(
                    "INSERT INTO records (workload_id, trace, decisions, func_hash, times, "
                    "median, error_kind, error, target, arch, sched_version, machine, created) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (workload_id, record.trace_json, record.decisions, record.func_hash,
                     json.dumps(list(record.seconds)), median, record.error_kind, record.error,
                     workload.target, workload.arch or "", record.sched_version,
                     record.machine, record.created))
            return workload_id

        # remembered only once committed: a rolled-back insert made no row
        self._workload_ids[_names(workload)] = _retry(insert)

    def add_retime(self, workload, func_hash: str, seconds: tuple[float, ...]) -> None:
        """Store a second measurement (in a fresh process) of the schedule `func_hash` of
        `workload`: `best` ranks its records by the slower of their figure and this one."""
        def insert() -> None:
            with self._transaction():
                workload_id = self._register(workload)
                self._db.execute(
                    "INSERT OR REPLACE INTO retimes (workload_id, func_hash, times, median, "
                    "created) VALUES (?, ?, ?, ?, ?)",
                    (workload_id, func_hash, json.dumps(list(seconds)),
                     statistics.median(seconds), time.time()))
        _retry(insert)

    def retimed(self, workload) -> dict[str, float]:
        """{func_hash: median} of the schedules of `workload` re-timed (`add_retime`)."""
        workload_id = self._workload_id(*_names(workload))
        rows = self._db.execute("SELECT func_hash, median FROM retimes WHERE workload_id = ?",
                                (workload_id,))
        return dict(rows.fetchall())

    def _register(self, workload) -> int:
        """The id of `workload`'s row, inserted if it is new (inside a write transaction)."""
        names = _names(workload)
        if names in self._workload_ids:
            return self._workload_ids[names]
        self._db.execute(
            "INSERT OR IGNORE INTO workloads (key, target, arch, name, script, user_trace, "
            "created) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (*names, workload.name, workload.script, workload.user_trace.to_json(), time.time()))
        return self._workload_id(*names)

    def _transaction(self):
        return _Transaction(self._db)

    # -- reading --------------------------------------------------------------------------

    def records(self, workload) -> list[Record]:
        """Every record of `workload`, in the order they were added."""
        return self._select(workload, "", ())

    def best(self, workload, k: int = 1) -> list[Record]:
        """The `k` fastest records that ran (by median time; errors never count); a schedule
        re-timed (`add_retime`) counts by the slower of its two figures, so that one lucky
        measurement does not outrank it."""
        workload_id = self._workload_id(*_names(workload))
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM records LEFT JOIN retimes ON retimes.workload_id = "
            f"records.workload_id AND retimes.func_hash = records.func_hash WHERE "
            f"records.workload_id = ? AND {_RAN} ORDER BY {_RANKED}, records.id LIMIT ?",
            (workload_id, k))
        return [_record(row) for row in rows]

    def measured_hashes(self, workload) -> set[str]:
        """The scheduled functions measured for `workload`, failed ones included (a schedule
        that crashed or timed out would again): a resumed run skips them."""
        workload_id = self._workload_id(*_names(workload))
        rows = self._db.execute("SELECT DISTINCT func_hash FROM records WHERE workload_id = ?",
                                (workload_id,))
        return {row[0] for row in rows}

    def best_for(self, func_or_schedule, target: str = "c", arch: str | None = None):
        """The best record for a function (or a Schedule: its steps are part of the workload)
        on `target`, or None. With `arch` None, the best record of any arch is taken."""
        from sched.autoscheduler.workload import Workload

        workload = Workload.of(func_or_schedule, target, arch)
        if arch is not None:
            best = self.best(workload, 1)
            return best[0] if best else None
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM records JOIN workloads ON workloads.id = records.workload_id "
            "LEFT JOIN retimes ON retimes.workload_id = records.workload_id AND "
            "retimes.func_hash = records.func_hash "
            f"WHERE key = ? AND workloads.target = ? AND {_RAN} "
            f"ORDER BY {_RANKED}, records.id LIMIT 1",
            (workload.key, target)).fetchall()
        return _record(rows[0]) if rows else None

    def tuned_schedule_giving(self, func, target: str = "c", arch: str | None = None):
        """The Schedule that a run tuned (`tune(sch)`: the function as written and the user's
        steps) whose function is `func`, or None: `build(sch.func, db=)` finds the records of
        `tune(sch)` through it. Only workloads of `func`'s name with user steps are replayed
        (a few); one that does not replay with this sched is passed over."""
        import sched
        from sched.schedule import Trace

        script = func.script()
        query = ("SELECT script, user_trace FROM workloads WHERE name = ? AND target = ? AND "
                 "user_trace != ?" + (" AND arch = ?" if arch is not None else ""))
        parameters = (func.name, target, Trace().to_json(),
                      *((arch,) if arch is not None else ()))
        for original, user_trace in self._db.execute(query, parameters).fetchall():
            try:
                schedule = Trace.from_json(user_trace).apply(sched.parse(original))
            except Exception:  # noqa: BLE001 - another sched's workload: not this one
                continue
            if schedule.func.script() == script:
                return schedule
        return None

    def workloads(self) -> list[dict]:
        """One summary per workload: key, target, arch, name, script, records, errors and
        best_seconds (the best record's figure as `best` ranks them: a re-timed schedule by
        the slower of its two figures; None when no record ran)."""
        rows = self._db.execute(
            f"SELECT workloads.id, key, workloads.target, workloads.arch, name, script, "
            f"COUNT(records.id), "
            f"COUNT(CASE WHEN records.error_kind IS NOT NULL OR records.error IS NOT NULL "
            f"THEN 1 END), MIN(CASE WHEN {_RAN} THEN {_RANKED} END) "
            f"FROM workloads LEFT JOIN records ON workloads.id = records.workload_id "
            f"LEFT JOIN retimes ON retimes.workload_id = records.workload_id AND "
            f"retimes.func_hash = records.func_hash "
            f"GROUP BY workloads.id ORDER BY workloads.id")
        baselines = self._baseline_seconds()
        return [{"key": key, "target": target, "arch": arch or None, "name": name,
                 "script": script, "records": count, "errors": errors, "best_seconds": best,
                 "baseline_seconds": baselines.get(workload_id)}
                for workload_id, key, target, arch, name, script, count, errors, best in rows]

    def _baseline_seconds(self) -> dict[int, float]:
        """Each workload's time as given (the user's steps only: the tuner records it as a
        candidate of the sketch "baseline"), where it ran."""
        rows = self._db.execute(f"SELECT workload_id, decisions, median FROM records WHERE "
                                f"{_RAN} AND decisions LIKE ?", (f"%{BASELINE}%",))
        found: dict[int, float] = {}
        for workload_id, decisions, median in rows:
            try:
                sketch = json.loads(decisions).get("sketch")
            except (ValueError, AttributeError):
                continue
            if sketch == BASELINE and median is not None:
                found[workload_id] = min(median, found.get(workload_id, math.inf))
        return found

    def _workload_id(self, key: str, target: str, arch: str) -> int | None:
        row = self._db.execute("SELECT id FROM workloads WHERE key = ? AND target = ? AND "
                               "arch = ?", (key, target, arch)).fetchone()
        return row[0] if row else None

    def _select(self, workload, clause: str, parameters: tuple) -> list[Record]:
        workload_id = self._workload_id(*_names(workload))
        rows = self._db.execute(f"SELECT {_COLUMNS} FROM records WHERE workload_id = ? "
                                f"{clause or 'ORDER BY id'}", (workload_id, *parameters))
        return [_record(row) for row in rows]

    # -- lifetime -------------------------------------------------------------------------

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Database({str(self.path)!r})"


def _names(workload) -> tuple[str, str, str]:
    """A workload's unique columns: key, target, arch ('' for none)."""
    return workload.key, workload.target, workload.arch or ""


_RAN = "records.error_kind IS NULL AND records.error IS NULL AND records.median IS NOT NULL"
# a record's rank: the slower of its figure and its schedule's re-timing, where there is one
_RANKED = "max(records.median, coalesce(retimes.median, records.median))"
_COLUMNS = ("records.trace, records.func_hash, records.times, records.error_kind, "
            "records.error, records.decisions, records.target, records.arch, "
            "records.sched_version, records.machine, records.created")


def _record(row) -> Record:
    trace, func_hash, times, error_kind, error, decisions, target, arch, version, machine, \
        created = row
    return Record(trace, func_hash, tuple(json.loads(times)), error_kind, error, decisions,
                  target, arch or None, version, machine, created)


class _Transaction:
    """`with`: BEGIN IMMEDIATE (the write lock up front, so a reader never has to upgrade,
    which WAL would refuse without waiting), COMMIT on success, ROLLBACK on error."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            try:
                self.db.execute("COMMIT")
                return
            except sqlite3.Error:
                self.db.execute("ROLLBACK")    # so that a retry can BEGIN again
                raise
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")


def _retry(write):
    """Run `write`, again after a growing pause while another process holds the lock
    (SQLite's busy timeout covers most waits; a few paths return "locked" at once)."""
    deadline = time.monotonic() + RETRY_SECONDS
    pause = 0.01
    while True:
        try:
            return write()
        except sqlite3.OperationalError as error:
            message = str(error)
            if ("locked" not in message and "busy" not in message) \
                    or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


@functools.cache
def package_version() -> str:
    """The installed sched's version ("0+unknown" when it is run from a source tree)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sched")
    except PackageNotFoundError:
        return "0+unknown"


@functools.cache
def machine_name() -> str:
    """Where a record was measured: the host name and the CPU model."""
    model = ""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{socket.gethostname()} ({model or platform.processor() or platform.machine()})"

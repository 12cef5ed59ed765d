"""The `sched` command line: the version, the command list, `sched tune`'s arguments (the tuner
itself stands in as a fake: the end-to-end run is the tuner's test), loading FILE.py:NAME, and
mistakes as one line on stderr with status 1."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

import sched
from sched.autoscheduler.database import Database, Record, package_version
from sched.autoscheduler.loading import LoadError, load_function
from sched.autoscheduler.workload import Workload
from sched.cli import UsageError, main, parse_duration, parse_tune_args
from sched.ir.nodes import PrimFunc

ROOT = Path(__file__).resolve().parents[1]

KERNELS = '''
from sched import compute as te
from sched.script import T
import sched


def scale():
    A = te.placeholder((16,), "float32", name="A")
    B = te.compute((16,), lambda i: A[i] * 2, name="B")
    return te.create_prim_func([A, B], name="scale")


@T.prim_func
def copy(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi]


split = sched.Schedule(scale())
split.split(split.get_loops(split.get_block("B"))[0], [None, 4])


def sized(n):
    return scale()


def not_a_kernel():
    return 42


number = 3
X = te.placeholder((4,), "float32", name="X")
Y = te.compute((4,), lambda i: X[i] + 1, name="Y")
'''


@pytest.fixture
def kernels(tmp_path) -> Path:
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    return path


# -- the commands ---------------------------------------------------------------------------

def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"sched {package_version()}\n"


def test_help_lists_every_command_with_a_line(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command, line in [("demo", "compile, check and time"), ("tune", "search schedules"),
                          ("db", "list the workloads")]:
        assert any(text.split()[:1] == [command] and line in text
                   for text in out.splitlines()), out


def test_python_m_sched_runs_the_cli():
    done = subprocess.run([sys.executable, "-m", "sched", "--version"], capture_output=True,
                          text=True, cwd=ROOT)
    assert (done.returncode, done.stdout) == (0, f"sched {package_version()}\n")


def test_no_command_is_one_line(capsys):
    assert main([]) == 1
    assert capsys.readouterr().err == ("sched: error: the following arguments are required: "
                                       "COMMAND (see sched --help)\n")


# -- sched tune's arguments -----------------------------------------------------------------

def test_tune_arguments_defaults():
    assert parse_tune_args(["k.py:f"]) == {
        "spec": "k.py:f", "target": "c", "arch": None, "trials": 256, "db": None,
        "resume": False, "workers": None, "time_budget": None, "seed": None,
        "runner": "local", "address": None, "debug": False}


def test_tune_arguments_all_given():
    options = parse_tune_args(["k.py:f", "--target", "cuda", "--arch", "sm_90", "--trials",
                               "64", "--db", "tune.db", "--resume", "--workers", "4",
                               "--time-budget", "1h30m", "--seed", "7", "--runner", "ray",
                               "--address", "10.0.0.1:6379", "--debug"])
    assert options == {
        "spec": "k.py:f", "target": "cuda", "arch": "sm_90", "trials": 64, "db": "tune.db",
        "resume": True, "workers": 4, "time_budget": 5400.0, "seed": 7, "runner": "ray",
        "address": "10.0.0.1:6379", "debug": True}


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("10m", 600), ("1h", 3600),
                                           ("1h30m", 5400), ("1h30m15s", 5415), ("2.5h", 9000),
                                           ("45", 45), ("0.5", 0.5), (" 10M ", 600)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10x", "m", "1h30", "0", "0s", "-5", "inf", "nan"])
def test_bad_durations(text):
    with pytest.raises(ValueError, match="expected a"):
        parse_duration(text)


@pytest.mark.parametrize("argv, message", [
    (["k.py:f", "--trials", "0"], "argument --trials: expected a positive integer, got '0'"),
    (["k.py:f", "--workers", "two"], "argument --workers: expected a positive integer"),
    (["k.py:f", "--time-budget", "10x"], "argument --time-budget: expected a duration such "
     "as 90s, 10m, 1h30m"),
    (["k.py:f", "--target", "metal"], "argument --target: invalid choice: 'metal'"),
    (["k.py:f", "--arch", "sm_90"], "--arch sm_90 is for --target cuda, not --target c"),
    (["k.py:f", "--resume"], "--resume continues the run recorded in a database: give --db"),
    (["k.py:f", "--address", "x:1"], "--address is a Ray cluster's: give --runner ray too"),
    ([], "the following arguments are required: FILE.py:NAME"),
])
def test_bad_tune_arguments(argv, message, capsys):
    with pytest.raises(UsageError, match=f"^sched tune: error: {_escape(message)}"):
        parse_tune_args(argv)
    assert main(["tune", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"sched tune: error: {message}") and err.count("\n") == 1


def _escape(text: str) -> str:
    import re

    return re.escape(text)


# -- sched tune, with a stand-in tuner ------------------------------------------------------

@pytest.fixture
def fake_tune(monkeypatch):
    calls = []

    def tune(func, **options):
        calls.append((func, options))
        if func.name == "copy":
            raise ValueError("tune: the function has no block to search")
        return types.SimpleNamespace(trace=sched.Schedule(func).trace, best_seconds=1e-3)

    monkeypatch.setitem(sys.modules, "sched.autoscheduler.tune",
                        types.SimpleNamespace(tune=tune))
    return calls


def test_tune_calls_the_tuner(kernels, fake_tune, capsys):
    assert main(["tune", f"{kernels}:scale", "--trials", "8", "--db", "t.db",
                 "--time-budget", "90s", "--seed", "3"]) == 0
    [(func, options)] = fake_tune
    assert isinstance(func, PrimFunc) and func.name == "scale"
    assert options == {"target": "c", "arch": None, "trials": 8, "db": "t.db", "resume": False,
                       "workers": None, "time_budget": 90.0, "seed": 3, "runner": "local",
                       "address": None}
    out = capsys.readouterr().out
    assert "best schedule" in out and "db='t.db') applies the best" in out


def test_tune_error_is_one_line_and_debug_shows_it(kernels, fake_tune, capsys):
    assert main(["tune", f"{kernels}:copy"]) == 1
    assert capsys.readouterr().err == \
        "sched tune: error: tune: the function has no block to search\n"
    with pytest.raises(ValueError, match="no block to search"):
        main(["tune", f"{kernels}:copy", "--debug"])


def test_tune_of_a_missing_name_lists_the_file(kernels, fake_tune, capsys):
    assert main(["tune", f"{kernels}:scael"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no 'scael' (did you mean 'scale'?)" in err
    assert fake_tune == []


# -- loading FILE.py:NAME -------------------------------------------------------------------

def test_load_a_te_definition_in_a_function(kernels):
    func = load_function(f"{kernels}:scale")
    assert isinstance(func, PrimFunc) and func.name == "scale"


def test_load_a_prim_func(kernels):
    func = load_function(f"{kernels}:copy")
    assert isinstance(func, PrimFunc) and func.name == "copy"


def test_load_a_schedule_keeps_its_steps(kernels):
    sch = load_function(f"{kernels}:split")
    assert isinstance(sch, sched.Schedule)
    assert [i.kind for i in Workload.of(sch).user_trace.instructions] == \
        ["get_block", "get_loops", "split"]


def test_load_a_file_that_imports_its_neighbour(tmp_path, monkeypatch):
    (tmp_path / "shapes.py").write_text("N = 24\n")
    (tmp_path / "op.py").write_text(textwrap.dedent("""
        from shapes import N
        from sched import compute as te

        A = te.placeholder((N,), "float32", name="A")
        func = te.create_prim_func([A, te.compute((N,), lambda i: A[i] + 1, name="B")])
    """))
    monkeypatch.chdir(ROOT)
    func = load_function(str(tmp_path / "op.py"))          # the only candidate
    assert func.params[0].shape[0].value == 24
    assert str(tmp_path) not in sys.path


@pytest.mark.parametrize("name, message", [
    ("missing", r"has no 'missing'; it defines PrimFuncs: copy; Schedules: split; "
                r"functions: scale\(\), not_a_kernel\(\)$"),
    ("number", r"kernels.py:number is an int: expected a PrimFunc, a sched.Schedule, or a "
               r"function of no arguments returning one"),
    ("sized", r"kernels.py:sized takes arguments \(n\): give a function of no arguments"),
    ("not_a_kernel", r"kernels.py:not_a_kernel\(\) returned an int: expected a PrimFunc"),
    ("te", r"kernels.py:te is a module"),
    ("Y", r"kernels.py:Y is a te tensor: name a PrimFunc of it instead, e.g. func = "
          r"te.create_prim_func\(\[<its inputs>, Y\]\)"),
])
def test_load_refusals(kernels, name, message):
    with pytest.raises(LoadError, match=message):
        load_function(f"{kernels}:{name}")


def test_load_refusals_of_the_file(tmp_path, kernels):
    with pytest.raises(LoadError, match="no file .*nowhere.py"):
        load_function(f"{tmp_path}/nowhere.py:f")
    with pytest.raises(LoadError, match="expected FILE.py:NAME"):
        load_function("kernels:f")
    with pytest.raises(LoadError, match="name the function as .*kernels.py:NAME; it "
                                        "defines PrimFuncs: copy"):
        load_function(str(kernels))
    broken = tmp_path / "broken.py"
    broken.write_text("from sched import compute as te\nA = te.placeholder((4,), 'float32')\n"
                      "1 / 0\n")
    with pytest.raises(LoadError, match="broken.py: running the file raised "
                                        "ZeroDivisionError: division by zero"):
        load_function(f"{broken}:A")
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    with pytest.raises(LoadError, match="it defines no PrimFunc, Schedule or function"):
        load_function(f"{empty}:f")


# -- sched db -------------------------------------------------------------------------------

def test_db_lists_the_workloads(tmp_path, kernels, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "150")                    # the table on one line a row
    workload = Workload.of(load_function(f"{kernels}:scale"))
    with Database(tmp_path / "tune.db") as db:
        db.add(workload, Record("[]", "a", (2e-3,)))
        db.add(workload, Record("[]", "b", error_kind="crash", error="signal 11"))
    assert main(["db", str(tmp_path / "tune.db")]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "scale" in line)
    gflops = f"{workload.flops() / 2e-3 / 1e9:.2f}"       # from the stored script
    assert [c.strip() for c in row.strip("│").split("│")] == \
        [f"scale ({workload.key[:8]})", "c", "2", "1", "2.000", gflops, "-"]


def test_db_shows_the_speedup_over_the_function_as_given(tmp_path, kernels, capsys,
                                                        monkeypatch):
    """The tuner records the function as given (the sketch "baseline"); "vs baseline" is its
    time over the best (it was always "-")."""
    monkeypatch.setenv("COLUMNS", "150")
    workload = Workload.of(load_function(f"{kernels}:scale"))
    with Database(tmp_path / "tune.db") as db:
        db.add(workload, Record("[]", "a", (2e-3,)))
        db.add(workload, Record("[]", "base", (5e-3,), decisions='{"sketch": "baseline"}'))
        db.add(workload, Record("[]", "c", (1e-3,), decisions='{"sketch": "tile_cpu(B)"}'))
    assert main(["db", str(tmp_path / "tune.db")]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "scale" in line)
    assert [c.strip() for c in row.strip("│").split("│")][-1] == "5.00x"


def test_db_missing_file_is_one_line(tmp_path, capsys):
    assert main(["db", str(tmp_path / "none.db")]) == 1
    assert capsys.readouterr().err == f"sched db: error: no tuning database " \
                                      f"{str(tmp_path / 'none.db')!r}\n"

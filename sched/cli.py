"""The `sched` command line: each command wraps the library call of the same name.

    sched demo                                    # compile, check and time a few kernels here
    sched tune kernels/matmul.py:matmul --target c --trials 256 --db tune.db
    sched tune kernels/matmul.py:matmul --db tune.db --resume --time-budget 1h30m
    sched db tune.db                              # the workloads a tuning database holds
    sched show kernels/matmul.py:matmul --lowered --source c --trace
    sched build kernels/matmul.py:matmul --target cuda --arch sm_90   # the resource report
    sched export kernels/matmul.py:matmul --target cuda --arch sm_90 --out build/matmul
    sched --version

`show`, `build` and `export` live in `sched.cli_kernels`.

A mistake (a bad option, a missing file, a function that cannot be tuned) is one line on stderr
and exit status 1; `--debug` shows the traceback instead. `sched --help` lists the commands,
`sched tune --help` the options.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings

TUNE_EXAMPLE = "sched tune kernels/matmul.py:matmul --target c --trials 256 --db tune.db"


class UsageError(ValueError):
    """A command line argparse or a check of ours refused: `prog: error: message`."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise (one line, status 1) instead of printing the usage
    and exiting with status 2."""

    def error(self, message: str):
        raise UsageError(f"{self.prog}: error: {message} (see {self.prog} --help)")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = _parser().parse_args(argv)
    except UsageError as error:
        print(error, file=sys.stderr)
        return 1
    except SystemExit as exit_:         # --help, --version
        return exit_.code if isinstance(exit_.code, int) else 0
    if args.command == "demo":
        from sched.demo import run_demo

        return 0 if run_demo(tune_trials=args.tune) else 1
    from sched import cli_kernels

    command = {"tune": _tune, "db": _db, "show": cli_kernels.run_show,
               "build": cli_kernels.run_build, "export": cli_kernels.run_export}[args.command]
    try:
        with warnings.catch_warnings():
            # each command says its warnings, even one an earlier call in this process said
            warnings.simplefilter("default")
            warnings.showwarning = _one_line_warning(args.command)
            return command(args)
    except KeyboardInterrupt:
        print(f"sched {args.command}: interrupted", file=sys.stderr)
        return 130
    except UsageError as error:
        print(error, file=sys.stderr)
        return 1
    except Exception as error:
        if args.debug:
            raise
        print(f"sched {args.command}: error: {_describe(error)}", file=sys.stderr)
        return 1


def _parser() -> _Parser:
    from sched.autoscheduler.database import package_version

    parser = _Parser(prog="sched", description="a schedule-language compiler for tensor kernels")
    parser.add_argument("--version", action="version", version=f"sched {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=_Parser)
    demo = commands.add_parser("demo", help="compile, check and time a few kernels on this "
                               "machine", description="compile, check and time a few kernels "
                               "on this machine")
    demo.add_argument("--tune", type=int, default=0, metavar="TRIALS",
                      help="also tune the 512^3 matmul in TRIALS trials and time it "
                      "(default: 0, no tuning)")
    _add_tune_arguments(commands.add_parser(
        "tune", help="search schedules for the blocks a function leaves unscheduled",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Search schedules for the blocks of FILE.py:NAME that have none, measure\n"
        "them on this machine (or a Ray cluster), and record them in a tuning database.\n\n"
        f"example:\n  {TUNE_EXAMPLE}"))
    db = commands.add_parser("db", help="list the workloads and best times in a tuning database",
                             description="list the workloads and best times in a tuning "
                             "database")
    db.add_argument("path", metavar="DB", help="the database file (e.g. tune.db)")
    db.add_argument("--debug", action="store_true", help="show tracebacks")
    from sched.cli_kernels import add_commands

    add_commands(commands)
    return parser


def _add_tune_arguments(tune: argparse.ArgumentParser) -> None:
    tune.add_argument("spec", metavar="FILE.py:NAME",
                      help="a PrimFunc, a sched.Schedule, or a function of no arguments "
                      "returning one (a te definition, a @T.prim_func)")
    tune.add_argument("--target", choices=("c", "cuda"), default="c",
                      help="where kernels run (default: c, the CPU)")
    tune.add_argument("--arch", help="CUDA arch, e.g. sm_90 (default: the GPU's)")
    tune.add_argument("--trials", type=_positive_int, default=256, metavar="N",
                      help="candidates to measure (default: 256)")
    tune.add_argument("--db", metavar="FILE", help="tuning database (SQLite) to record in")
    tune.add_argument("--resume", action="store_true",
                      help="continue a run recorded in --db (after a crash or a stop)")
    tune.add_argument("--workers", type=_positive_int, metavar="N",
                      help="parallel builders (default: the tuner's)")
    tune.add_argument("--time-budget", type=_duration, metavar="TIME",
                      help="stop after this long: 90s, 10m, 1h30m, or seconds (the "
                      "first round of measurements always completes)")
    tune.add_argument("--seed", type=int, metavar="N", help="random seed (deterministic with "
                      "one worker)")
    tune.add_argument("--runner", choices=("local", "ray"), default="local",
                      help="measure here, or on a Ray cluster (pip install sched[ray])")
    tune.add_argument("--address", metavar="ADDR", help="Ray cluster address (--runner ray), "
                      "e.g. 10.0.0.1:6379; default: a local instance")
    tune.add_argument("--debug", action="store_true", help="show tracebacks")


def parse_tune_args(argv: list[str]) -> dict:
    """`sched tune`'s arguments (without "tune") as the keyword arguments of
    `sched.autoscheduler.tune.tune`, plus "spec" and "debug"; a `UsageError` if they are bad."""
    args = _parser().parse_args(["tune", *argv])
    return _tune_options(args)


def _tune_options(args: argparse.Namespace) -> dict:
    def refuse(message: str):
        raise UsageError(f"sched tune: error: {message} (see sched tune --help)")

    if args.arch is not None and args.target != "cuda":
        refuse(f"--arch {args.arch} is for --target cuda, not --target {args.target}")
    if args.resume and args.db is None:
        refuse("--resume continues the run recorded in a database: give --db FILE")
    if args.address is not None and args.runner != "ray":
        refuse("--address is a Ray cluster's: give --runner ray too")
    return {"spec": args.spec, "target": args.target, "arch": args.arch,
            "trials": args.trials, "db": args.db, "resume": args.resume,
            "workers": args.workers, "time_budget": args.time_budget, "seed": args.seed,
            "runner": args.runner, "address": args.address, "debug": args.debug}


def _tune(args: argparse.Namespace) -> int:
    import importlib

    from sched.autoscheduler.loading import load_function

    options = _tune_options(args)
    spec, _ = options.pop("spec"), options.pop("debug")
    func = load_function(spec)
    # the search loads only when run (and by module name, which a test may stand in for)
    tune = importlib.import_module("sched.autoscheduler.tune").tune
    result = tune(func, **options)
    if hasattr(result, "table"):
        from rich.console import Console

        # a pipe or a file has no width: wide enough that no figure is cut
        Console(width=None if sys.stdout.isatty() else 132).print(result.table())
    correlations = getattr(result, "correlations", None)
    if correlations:
        print("rank correlation of each cost model with measured speed (Spearman): " +
              ", ".join(f"{name} {value:.2f}" for name, value in correlations.items()))
    trace = getattr(result, "trace", None)
    if trace is not None and getattr(result, "best_seconds", None) is not None:
        given = getattr(getattr(result, "workload", None), "user_trace", None)
        if given is not None and len(trace.instructions) == len(given.instructions):
            print(f"best schedule ({spec}): the function as given (no searched schedule ran "
                  f"faster)")
        else:
            print(f"best schedule ({spec}, as steps on sch = sched.Schedule(func)):\n{trace}")
    if options["db"] is not None:
        print(f"records in {options['db']}; sched.build(func, target={options['target']!r}, "
              f"db={options['db']!r}) applies the best")
    return 0


def _db(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console

    from sched.autoscheduler.database import Database
    from sched.autoscheduler.progress import results_table

    if not Path(args.path).expanduser().is_file():
        raise FileNotFoundError(f"no tuning database {args.path!r}")
    with Database(args.path) as db:
        workloads = db.workloads()
    rows = [{"workload": f"{w['name']} ({w['key'][:8]})",
             "target": w["target"] + (f" {w['arch']}" if w["arch"] else ""),
             "trials": w["records"], "errors": w["errors"], "best_seconds": w["best_seconds"],
             "baseline_seconds": w["baseline_seconds"], "flops": _flops(w["script"])}
            for w in workloads]
    Console().print(results_table(rows))
    return 0


def _flops(script: str) -> float | None:
    """The arithmetic of one call of a stored workload's function (for its GFLOP/s), or None
    when the script does not parse with this sched."""
    import sched
    from sched.autoscheduler.workload import Workload

    try:
        return Workload(sched.parse(script), "c", None).flops()
    except Exception:  # noqa: BLE001 - a figure left out, never a failed listing
        return None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


_DURATION = re.compile(r"(?:(\d+(?:\.\d*)?)h)?(?:(\d+(?:\.\d*)?)m)?(?:(\d+(?:\.\d*)?)s)?")


def parse_duration(text: str) -> float:
    """Seconds in "90s", "10m", "1h", "1h30m", "2.5h" or a bare number of seconds."""
    text = text.strip().lower()
    try:
        seconds = float(text)
    except ValueError:
        match = _DURATION.fullmatch(text)
        if not text or match is None:
            raise ValueError(f"expected a duration such as 90s, 10m, 1h30m or a number of "
                             f"seconds, got {text!r}") from None
        hours, minutes, secs = (float(part) if part else 0.0 for part in match.groups())
        seconds = 3600 * hours + 60 * minutes + secs
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"expected a positive duration, got {text!r}")
    return seconds


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _one_line_warning(command: str):
    """A `warnings.showwarning` that prints `sched COMMAND: warning: message` on stderr."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"sched {command}: warning: {message}", file=sys.stderr)
    return show


def _describe(error: BaseException) -> str:
    """The error as the user reads it: our own messages as they are, others with their type."""
    from sched.errors import BuildError, NoGPUError

    if isinstance(error, ValueError | TypeError | OSError | BuildError | NoGPUError):
        return str(error)
    return f"{type(error).__name__}: {error}"


if __name__ == "__main__":
    sys.exit(main())

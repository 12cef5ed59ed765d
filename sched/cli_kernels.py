"""The `sched` commands that work on one kernel: `show`, `build` and `export`.

    sched show kernels.py:matmul                      # the IR (TVMScript-style)
    sched show kernels.py:matmul --lowered --trace    # the loop IR and the schedule's steps
    sched show kernels.py:matmul --source cuda --arch sm_90
    sched build kernels.py:matmul --target cuda --arch sm_90 --db tune.db   # resource report
    sched export kernels.py:matmul --target cuda --arch sm_90 --out build/matmul

FILE.py:NAME is read by `sched.autoscheduler.loading.load_function` (a PrimFunc, a Schedule,
or a function of no arguments returning one). Each command adds its own arguments to the
parser `sched.cli` builds and is run by it, so a mistake is one line on stderr.
"""

from __future__ import annotations

import argparse
import sys

SPEC_HELP = ("a PrimFunc, a sched.Schedule, or a function of no arguments returning one "
             "(a te definition, a @T.prim_func)")


def add_commands(commands) -> None:
    """Add `show`, `build` and `export` to the subparsers `commands` of `sched`."""
    show = commands.add_parser(
        "show", help="print a function's IR, lowered IR, generated code or schedule",
        description="Print the IR of FILE.py:NAME (TVMScript-style), and with the options its "
        "loop IR after lowering, the generated C or CUDA, and the schedule's steps.")
    show.add_argument("spec", metavar="FILE.py:NAME", help=SPEC_HELP)
    show.add_argument("--lowered", action="store_true", help="also the loop IR after lowering")
    show.add_argument("--source", choices=("c", "cuda"),
                      help="also the generated code for this target")
    show.add_argument("--arch", help="CUDA arch for --source cuda, e.g. sm_90 (default: the "
                      "GPU's, else sm_90)")
    show.add_argument("--trace", action="store_true",
                      help="also the schedule's steps, as Python that replays them")
    show.add_argument("--debug", action="store_true", help="show tracebacks")

    build = commands.add_parser(
        "build", help="build a function for a target and print its resource report",
        description="Build FILE.py:NAME for a target (lower, generate, compile) and print what "
        "was built: registers, spills, shared memory and occupancy on CUDA; the library and "
        "its checks on C. Exits with status 1 and the error when the build fails.")
    _add_target_arguments(build)

    export = commands.add_parser(
        "export", help="write C files that run a kernel without Python",
        description="Build FILE.py:NAME and write it to --out as files a product compiles "
        "without Python or sched: on CUDA the cubin as a byte array, a C header and a "
        "launcher on the driver API, and a CMakeLists.txt; on C a .c and a .h.")
    _add_target_arguments(export)
    export.add_argument("--out", required=True, metavar="DIR",
                        help="the directory to write (created if missing)")
    export.add_argument("--name", help="the C name of the exported function (default: the "
                        "function's)")
    export.add_argument("--shared-library", action="store_true",
                        help="--target c: also build libNAME.so from the files here")


def _add_target_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", metavar="FILE.py:NAME", help=SPEC_HELP)
    parser.add_argument("--target", choices=("c", "cuda"), default="c",
                        help="c (the CPU, through gcc) or cuda (default: c)")
    parser.add_argument("--arch", help="CUDA arch, e.g. sm_90 (default: the GPU's, else sm_90)")
    parser.add_argument("--db", metavar="FILE", help="tuning database whose best record to apply")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")


def run_show(args: argparse.Namespace) -> int:
    from sched.autoscheduler.loading import load_function
    from sched.schedule import Schedule

    loaded = load_function(args.spec)
    func = loaded.func if isinstance(loaded, Schedule) else loaded
    if args.arch is not None and args.source != "cuda":
        raise ValueError(f"--arch {args.arch} is for --source cuda")
    _section(f"{func.name}: the IR", func.script())
    if args.trace:
        steps = str(loaded.trace) if isinstance(loaded, Schedule) else ""
        _section("the schedule's steps", steps or f"(no steps: {args.spec} is a PrimFunc, "
                 f"not a sched.Schedule)")
    kernel = None if args.source is None else _build(loaded, args.source, args.arch, None)
    if args.lowered:
        from sched.lower import lower

        # the built kernel's own lowering where there is one: a function with no bindings
        # is built with the default GPU schedule (audit helper-156: the lowering of the
        # function as given was shown above that schedule's CUDA)
        lowered = getattr(kernel, "lowered", None) or lower(func, target=args.source or "c")
        _section(f"the loop IR, lowered for {args.source or 'c'}", lowered.script())
    if kernel is not None:
        _section(f"the generated {'CUDA C' if args.source == 'cuda' else 'C'}", kernel.source)
    return 0


def run_build(args: argparse.Namespace) -> int:
    kernel = _build_from_spec(args)
    print(build_report(kernel))
    return 0


def run_export(args: argparse.Namespace) -> int:
    if args.shared_library and args.target != "c":
        raise ValueError("--shared-library is for --target c (a CUDA export is built with its "
                         "CMakeLists.txt)")
    kernel = _build_from_spec(args)
    options = {"shared_library": True} if args.shared_library else {}
    exported = kernel.export(args.out, name=args.name, **options)
    print(exported.summary())
    return 0


def build_report(kernel) -> str:
    """What `sched build` prints of a built kernel."""
    if hasattr(kernel, "resources"):
        lines = [f"built {kernel.func.name!r} for cuda {kernel.arch} "
                 f"({kernel.compiler}): {kernel.launch}", str(kernel.resources)]
        if kernel.compiled.from_cache:
            lines.append(f"cubin from the cache: {kernel.compiled.path}")
        return "\n".join(lines)
    entry = ("checks calls on numpy arrays in C" if kernel.entry is not None
             else f"checks calls in Python ({kernel.entry_unused})")
    return "\n".join([f"built {kernel.func.name!r} for c: {kernel.library_path}",
                      f"source: {len(kernel.source.splitlines())} lines of C",
                      f"entry point: {entry}"])


def _build_from_spec(args: argparse.Namespace):
    from sched.autoscheduler.loading import load_function

    if args.arch is not None and args.target != "cuda":
        raise ValueError(f"--arch {args.arch} is for --target cuda, not --target {args.target}")
    return _build(load_function(args.spec), args.target, args.arch, args.db)


def _build(loaded, target: str, arch: str | None, db):
    from rich.console import Console

    import sched

    if db is not None:
        from pathlib import Path

        if not Path(db).expanduser().is_file():
            raise FileNotFoundError(f"no tuning database {db!r}")
    console = Console(stderr=True)
    if not console.is_terminal:             # a spinner only where someone watches
        return sched.build(loaded, target=target, arch=arch, db=db)
    with console.status(f"building for {target}..."):
        return sched.build(loaded, target=target, arch=arch, db=db)


def _section(title: str, text: str) -> None:
    print(f"# ---- {title} ----")
    sys.stdout.write(text if text.endswith("\n") else text + "\n")

"""The `sched` command line: `sched demo` (more subcommands come with the layers they wrap)."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sched", description="a schedule-language compiler "
                                     "for tensor kernels")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="compile, check and time a few kernels on this machine")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from sched.demo import run_demo

        return 0 if run_demo() else 1
    return 2


if __name__ == "__main__":
    sys.exit(main())

"""A long fuzz run that keeps going after a finding: every finding is classified, counted and
its first reproducers written to a log (no shrinking: reduce a class afterwards).

    python -m tests.fuzz.hunt --examples 5000 --log /tmp/fuzz_hunt.md [--c-every 5] [--all]
    python -m tests.fuzz.hunt --match "IndexError"      # shrink the first such finding
    python -m tests.fuzz.hunt --sketches                # the autoscheduler's sketches instead
                                                        # of random steps (test_fuzz_sketches)
    python -m tests.fuzz.hunt --tensor-cores            # fp16 matmuls and the tensor-core
                                                        # recipe (test_fuzz_tensorize)
    python -m tests.fuzz.hunt --deferred                # random steps with the concurrency
                                                        # rule asked at their end only

`--all` includes the known holes. Prints a summary of classes and counts at the end (and to the
log every 100 examples).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import time

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st


def classify(message: str) -> str:
    first = message.splitlines()[0]
    first = re.sub(r"\[[^\]]*\]", "[..]", first)
    first = re.sub(r"\b\d+\b", "N", first)
    first = re.sub(r"buffer \S+", "buffer X", first)
    first = re.sub(r"'[^']*'", "'..'", first)
    steps = re.findall(r"^(?:    )?sch\.(\w+)\(", message.split("--- reproducer ---")[-1],
                       re.MULTILINE)
    accepted = [s for s in steps]
    return f"{first[:160]} | last step: {accepted[-1] if accepted else '-'}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--log", default="/tmp/fuzz_hunt.md")
    parser.add_argument("--c-every", type=int, default=5, help="build for C every n-th example")
    parser.add_argument("--all", action="store_true", help="include the known holes")
    parser.add_argument("--sketches", action="store_true",
                        help="schedule with a random sample of the autoscheduler's sketches "
                             "(test_fuzz_sketches.py) instead of random steps")
    parser.add_argument("--tensor-cores", action="store_true",
                        help="fp16 matmuls scheduled by the tensor-core recipe "
                             "(steps_tensor_core.py) instead of random programs and steps")
    parser.add_argument("--deferred", action="store_true",
                        help="the random steps inside sch.concurrency_checked_at_end() "
                             "(test_fuzz_schedules.py): the rule of concurrent loops at the "
                             "end only")
    parser.add_argument("--match", default=None,
                        help="shrink: stop at the first finding whose text matches this regex "
                             "and print its smallest reproducer")
    args = parser.parse_args()
    if args.all:
        os.environ["SCHED_FUZZ_ALL"] = "1"
    if args.deferred:
        os.environ["SCHED_FUZZ_DEFER"] = "1"

    from tests.fuzz import check
    from tests.fuzz.check import Finding, check_c, check_cuda_emu, check_interpreted, oracle
    from tests.fuzz.programs import programs
    from tests.fuzz.steps_tensor_core import tensor_core_programs
    from tests.fuzz.test_fuzz_schedules import schedule
    from tests.fuzz.test_fuzz_sketches import sketch_schedule
    from tests.fuzz.test_fuzz_tensorize import tensor_core_schedule

    if args.tensor_cores:
        draw_program, draw_schedule = tensor_core_programs(), tensor_core_schedule
    else:
        draw_program = programs()
        draw_schedule = sketch_schedule if args.sketches else schedule

    classes: collections.Counter = collections.Counter()
    counts = collections.Counter()
    took: collections.Counter = collections.Counter()
    start = time.time()
    log = open(args.log, "a")
    log.write(f"\n# hunt started {time.ctime()} ({args.examples} examples)\n")

    def summary() -> str:
        lines = [f"{counts['examples']} examples ({counts['skipped']} skipped), "
                 f"{counts['c builds']} C builds, {counts['cuda-emu runs']} cuda-emu runs, "
                 f"{time.time() - start:.0f} s"]
        lines.append("steps: " + ", ".join(f"{k} {n}" for k, n in sorted(took.items())))
        lines += [f"  {n:5d}  {c}" for c, n in classes.most_common()]
        lines += [f"  cuda-emu refused {n}: {c}"
                  for c, n in check.CUDA_EMU_REFUSALS.most_common(6)]
        return "\n".join(lines)

    phases = [Phase.generate] + ([Phase.shrink] if args.match else [])

    @settings(max_examples=args.examples, deadline=None, phases=phases,
              suppress_health_check=list(HealthCheck), database=None)
    @given(program=draw_program, data=st.data())
    def run(program, data):
        counts["examples"] += 1
        expected = oracle(program)
        if expected is None:
            counts["skipped"] += 1
            return
        steps: list[str] = []
        try:
            sch = draw_schedule(program, data, steps)
            for step in steps:
                kind = re.search(r"sch\.(\w+)\(", step)
                if kind is not None:
                    took[("refused " if step.startswith("try:") else "took ") + kind.group(1)] += 1
            if sch is not None:
                check_interpreted(program, sch.func, expected, steps)
                if counts["examples"] % args.c_every == 0:
                    counts["c builds"] += 1
                    check_c(program, sch.func, expected, steps)
                    if check_cuda_emu(program, sch.func, expected, steps):
                        counts["cuda-emu runs"] += 1
        except Finding as finding:
            if args.match and re.search(args.match, str(finding)):
                raise
            key = classify(str(finding))
            classes[key] += 1
            if classes[key] <= 2:
                log.write(f"\n## {key}\n```\n{finding}\n```\n")
                log.flush()
        except Exception as error:     # noqa: BLE001 - the harness must go on
            key = f"harness: {type(error).__name__}: {str(error)[:100]}"
            classes[key] += 1
            if classes[key] <= 1:
                log.write(f"\n## {key}\n")
        if counts["examples"] % 100 == 0:
            log.write(f"\n### progress\n{summary()}\n")
            log.flush()

    try:
        run()
    except Finding as finding:
        print(f"smallest finding matching {args.match!r}:\n{finding}")
        return
    text = summary()
    log.write(f"\n### final\n{text}\n")
    log.close()
    print(text)


if __name__ == "__main__":
    main()

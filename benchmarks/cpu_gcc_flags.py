"""What-if: the CPU hand schedules compiled with other gcc flags than the C target's own
(sched/c/build.py `compiler_flags()`), one thread, timed in alternating rounds in one process.

With -march=native on Zen 3, gcc 12 tunes for znver3 and then keeps the register tile's shared
operands (B's vectors in matmul, the input rows in conv2d) in memory, reloading them for every
FMA; -mtune=generic or -fschedule-insns keep them in registers. This measured which flag helps
which kernel: the C target has compiled with -mtune=generic on x86 since (`X86_FLAGS`); the
row "host tuning" is without it.

    OMP_NUM_THREADS=1 python benchmarks/cpu_gcc_flags.py   # results/<cpu>/cpu_gcc_flags.json
"""

from __future__ import annotations

import os
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from benchmarks.cpu_common import alternate, isa_info, relative_error  # noqa: E402

# label -> (the x86 flags used instead of X86_FLAGS, flags added)
FLAG_SETS = {"C target flags": (None, ()), "host tuning (no -mtune=generic)": ((), ()),
             "+ -fschedule-insns": (None, ("-fschedule-insns",)),
             "+ -fno-tree-slp-vectorize": (None, ("-fno-tree-slp-vectorize",)),
             "without -fno-tree-vrp": (None, ("-ftree-vrp",))}


def workloads():
    """name -> (schedule function, arguments, expected output)."""
    from sched import hand_schedules

    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 1024)).astype(np.float32)
    data = rng.standard_normal((1, 64, 56, 56)).astype(np.float32)
    weight = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
    x = rng.standard_normal((4096, 1024)).astype(np.float32)
    gamma = rng.standard_normal(1024).astype(np.float32)
    beta = rng.standard_normal(1024).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    mean = x.mean(axis=1, keepdims=True)
    from benchmarks.cpu_conv2d import im2col_conv

    return {
        "matmul 1024^3": (hand_schedules.cpu_matmul(1024, 1024, 1024), [a, b], a @ b),
        "conv2d 64x56x56 3x3": (hand_schedules.cpu_conv2d(1, 64, 56, 56, 64), [data, weight],
                                im2col_conv(data, weight)),
        "softmax 4096x1024": (hand_schedules.cpu_softmax(4096, 1024), [x],
                              e / e.sum(axis=1, keepdims=True)),
        "layer_norm 4096x1024": (hand_schedules.cpu_layer_norm(4096, 1024), [x, gamma, beta],
                                 (x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5)
                                 * gamma + beta)}


def main() -> None:
    import sched
    import sched.c.build as c_build
    from benchmarks.common import cpu_name, write_results

    results = {}
    for name, (schedule, args, expected) in workloads().items():
        calls, errors = {}, {}
        for label, (x86, extra) in FLAG_SETS.items():
            saved = c_build.FLAGS, c_build.X86_FLAGS
            c_build.FLAGS = (*saved[0], *extra)
            c_build.X86_FLAGS = saved[1] if x86 is None else x86
            try:
                kernel = sched.build(schedule.func, target="c")
            finally:
                c_build.FLAGS, c_build.X86_FLAGS = saved
            out = np.full(expected.shape, np.nan, np.float32)
            kernel(*args, out)
            errors[label] = relative_error(out, expected)
            calls[label] = lambda k=kernel, o=out, a=args: k(*a, o)
        timings = alternate(calls, rounds=6, repeats=5)
        base = timings["C target flags"]
        results[name] = {label: {**timing, "max_relative_error": errors[label],
                                 "speedup_median": base["median_s"] / timing["median_s"],
                                 "speedup_min": base["min_s"] / timing["min_s"]}
                         for label, timing in timings.items()}
        for label, row in results[name].items():
            print(f"{name:22s} {label:20s} median {row['median_s'] * 1e3:7.2f} ms, min "
                  f"{row['min_s'] * 1e3:7.2f} ms, x{row['speedup_median']:.2f} "
                  f"(min x{row['speedup_min']:.2f})", flush=True)
    path = write_results("cpu_gcc_flags", cpu_name(), {
        "vector_isa": isa_info(), "threads": os.environ.get("OMP_NUM_THREADS"),
        "note": "shared 2-core machine; speedups are against the C target's flags in the same "
                "process, alternating rounds", "flag_sets": FLAG_SETS, "results": results})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

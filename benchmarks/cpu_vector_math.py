"""Vector math on the C target (sched/c/vector_math.py), one thread, in one process with
numpy, timed in alternating rounds:

- row softmax 4096x1024 fp32: a simple schedule of `te.ops.softmax` (its two elementwise
  stages vectorized, the reductions left as they are), exact and with `fast_math=True`; the
  hand schedule `hand_schedules.cpu_softmax` (rfactor'd vector reductions) with and without
  fast_math; numpy's exp(x - max) / sum;
- elementwise exp, tanh, erf, sigmoid over 512x1024 fp32 (2 MB in, 2 MB out: in the L3
  cache, so the math rather than DRAM is timed), and exp, log in fp64: the vectorized kernel
  (exact, fast_math) against the same kernel unvectorized (a libm call per element) and numpy
  where it has the function.

Target (issue 14): softmax >= 2x numpy exact. The machine may be shared: compare the ratios
of one run, not the times of different runs.

    python benchmarks/cpu_vector_math.py   # writes benchmarks/results/<cpu>/cpu_vector_math.json
"""

from __future__ import annotations

import os
import pathlib
import sys

os.environ["OMP_NUM_THREADS"] = "1"          # before libgomp loads: one thread throughout

import numpy as np  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from benchmarks.common import cpu_name, write_results  # noqa: E402
from benchmarks.cpu_common import alternate, isa_info  # noqa: E402

ROWS, COLS = 4096, 1024
MATH_ROWS = 512


def numpy_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def simple_softmax_schedule():
    """te.ops.softmax with its elementwise stages vectorized along the columns."""
    import sched
    from sched import compute as te

    X = te.placeholder((ROWS, COLS), name="X")
    sch = sched.Schedule(te.create_prim_func([X, te.ops.softmax(X)], name="softmax"))
    for block in ("softmax_exp", "softmax"):
        sch.vectorize(sch.get_loops(sch.get_block(block))[-1])
    return sch.func


def elementwise(op: str, vectorize: bool, dtype: str = "float32"):
    import sched
    from sched import compute as te

    X = te.placeholder((MATH_ROWS, COLS), dtype, name="X")
    Y = te.compute((MATH_ROWS, COLS), lambda i, j: getattr(te, op)(X[i, j]), name="Y")
    sch = sched.Schedule(te.create_prim_func([X, Y], name=op))
    if vectorize:
        sch.vectorize(sch.get_loops(sch.get_block("Y"))[-1])
    return sch.func


def max_relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    expected = expected.astype(np.float64)
    scale = np.maximum(np.abs(expected), np.finfo(np.float32).tiny)
    return float(np.max(np.abs(actual.astype(np.float64) - expected) / scale))


def softmax_rows(x: np.ndarray) -> list[dict]:
    import sched
    from sched import hand_schedules

    out = np.empty_like(x)
    e = np.exp((x - x.max(1, keepdims=True)).astype(np.float64))
    expected = e / e.sum(1, keepdims=True)
    kernels = {}
    simple = simple_softmax_schedule()
    kernels["sched simple vectorized, exact"] = sched.build(simple, target="c")
    kernels["sched simple vectorized, fast_math"] = sched.build(simple, target="c",
                                                                fast_math=True)
    hand = hand_schedules.cpu_softmax(ROWS, COLS).func
    kernels["sched hand schedule, exact"] = sched.build(hand, target="c")
    kernels["sched hand schedule, fast_math"] = sched.build(hand, target="c", fast_math=True)
    variants = {"numpy": lambda: numpy_softmax(x)}
    errors = {"numpy": max_relative_error(numpy_softmax(x), expected)}
    for name, kernel in kernels.items():
        variants[name] = (lambda k=kernel: k(x, out))
        kernel(x, out)
        errors[name] = max_relative_error(out, expected)
    times = alternate(variants, rounds=7, repeats=5)
    base = times["numpy"]["median_s"]
    return [{"variant": name, **times[name], "ratio_to_numpy": base / times[name]["median_s"],
             "max_relative_error": errors[name]} for name in variants]


_NUMPY = {"exp": np.exp, "tanh": np.tanh, "log": np.log}


def elementwise_rows(x: np.ndarray) -> list[dict]:
    import sched

    rows = []
    for op, dtype in (("exp", "float32"), ("tanh", "float32"), ("erf", "float32"),
                      ("sigmoid", "float32"), ("exp", "float64"), ("log", "float64")):
        data = (np.abs(x) if op == "log" else x).astype(dtype)
        out = np.empty_like(data)
        variants = {
            "scalar (libm per element)": sched.build(elementwise(op, False, dtype), target="c"),
            "vectorized, exact": sched.build(elementwise(op, True, dtype), target="c"),
        }
        if dtype == "float32":
            variants["vectorized, fast_math"] = sched.build(elementwise(op, True, dtype),
                                                            target="c", fast_math=True)
        calls = {name: (lambda k=kernel, d=data, o=out: k(d, o))
                 for name, kernel in variants.items()}
        if op in _NUMPY:
            calls["numpy"] = lambda f=_NUMPY[op], d=data: f(d)
        times = alternate(calls, rounds=7, repeats=9)
        base = times["scalar (libm per element)"]["median_s"]
        for name, timing in times.items():
            rows.append({"op": op, "dtype": dtype, "variant": name, **timing,
                         "gelements_per_s": x.size / timing["median_s"] / 1e9,
                         "speedup_over_scalar": base / timing["median_s"]})
    return rows


def main() -> None:
    x = np.random.default_rng(0).standard_normal((ROWS, COLS)).astype(np.float32) * 4
    softmax = softmax_rows(x)
    math_rows = elementwise_rows(np.ascontiguousarray(x[:MATH_ROWS]))
    device = cpu_name()
    path = write_results("cpu_vector_math", device, {
        "cpu": device, "vector_isa": isa_info(), "threads": 1,
        "softmax_shape": [ROWS, COLS], "elementwise_shape": [MATH_ROWS, COLS],
        "note": "one process, alternating rounds; the machine may have been shared",
        "softmax": softmax, "elementwise": math_rows})
    for row in softmax:
        print(f"softmax {row['variant']:36s} {row['median_s'] * 1e3:8.2f} ms  "
              f"{row['ratio_to_numpy']:5.2f}x numpy  err {row['max_relative_error']:.1e}")
    for row in math_rows:
        print(f"{row['op']:8s} {row['dtype']:8s} {row['variant']:26s} "
              f"{row['median_s'] * 1e3:8.2f} ms  "
              f"{row['gelements_per_s']:6.2f} Gelem/s  {row['speedup_over_scalar']:5.2f}x scalar")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""conv2d 3x3 NCHW (N=1, C=K=64, 56x56, pad 1, fp32) on the C target: the hand schedule
(sched.hand_schedules.cpu_conv2d) against numpy im2col + GEMM (OpenBLAS) in the same process,
with 1 and with 2 threads (a child process each), timed in alternating rounds; numpy's GEMM
alone is shown too. TVM's hand schedule comes from a log of /work/shared/peers/tvm_cpu.py
(another process).

Target (issue 14): >= 3x numpy im2col + GEMM.

    python benchmarks/cpu_conv2d.py     # writes benchmarks/results/<cpu>/cpu_conv2d.json
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from benchmarks.cpu_common import (  # noqa: E402
    add_ratios,
    aligned,
    alternate,
    child_threads,
    relative_error,
    report,
    run_per_thread_count,
)

N, C, H, W, K, R, PADDING = 1, 64, 56, 56, 64, 3, 1


def im2col_conv(data: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """conv2d as numpy users write it: the padded input's 3x3 windows as columns, one GEMM."""
    padded = np.pad(data, ((0, 0), (0, 0), (PADDING,) * 2, (PADDING,) * 2))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (R, R), axis=(2, 3))
    columns = windows.transpose(0, 2, 3, 1, 4, 5).reshape(N * H * W, C * R * R)
    return (weight.reshape(K, -1) @ columns.T).reshape(K, N, H, W).transpose(1, 0, 2, 3)


def child(threads: int) -> dict:
    import sched
    from sched import hand_schedules

    rng = np.random.default_rng(0)
    data = aligned(rng.standard_normal((N, C, H, W)).astype(np.float32))
    weight = aligned(rng.standard_normal((K, C, R, R)).astype(np.float32))
    expected = im2col_conv(data.astype(np.float64), weight.astype(np.float64))
    scheduled = hand_schedules.cpu_conv2d(N, C, H, W, K, R, padding=PADDING)
    kernel = sched.build(scheduled.func, target="c")
    out = aligned(np.full(expected.shape, np.nan, np.float32))
    kernel(data, weight, out)
    weight_matrix = weight.reshape(K, -1)
    columns = np.ascontiguousarray(
        np.lib.stride_tricks.sliding_window_view(
            np.pad(data, ((0, 0), (0, 0), (1, 1), (1, 1))), (R, R), axis=(2, 3))
        .transpose(0, 2, 3, 1, 4, 5).reshape(N * H * W, C * R * R).T)
    errors = {"sched hand schedule": relative_error(out, expected),
              "numpy im2col + GEMM": relative_error(im2col_conv(data, weight), expected),
              "numpy GEMM only (columns ready)": 0.0}
    timings = alternate({"sched hand schedule": lambda: kernel(data, weight, out),
                         "numpy im2col + GEMM": lambda: im2col_conv(data, weight),
                         "numpy GEMM only (columns ready)": lambda: weight_matrix @ columns},
                        rounds=5, repeats=10)
    rows = [{"variant": name, "max_relative_error": errors[name],
             "matches_reference": errors[name] < 1e-4, **timing}
            for name, timing in timings.items()]
    add_ratios(rows, "numpy im2col + GEMM", 2.0 * N * K * H * W * C * R * R, "gflops")
    return {"threads": threads, "variants": rows, "schedule_trace": str(scheduled.trace)}


def main() -> None:
    threads = child_threads()
    if threads is not None:
        print(json.dumps(child(threads)))
        return
    report("cpu_conv2d", {"op": "conv2d_nchw", "N": N, "C": C, "H": H, "W": W, "K": K, "R": R,
                          "stride": 1, "padding": PADDING, "dtype": "float32"},
           run_per_thread_count(__file__), "conv", "gflops", "GFLOP/s",
           {"ratio_to_numpy_im2col_gemm": 3.0})


if __name__ == "__main__":
    main()

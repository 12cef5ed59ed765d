"""sched's CPU hand schedules and TVM's, timed in one process: same inputs, alternating rounds.

Issue 14 compares sched with TVM 0.27 "side by side in one process"; on a shared machine,
figures from two processes minutes apart differ by more than the kernels do. This script builds
sched's kernels here (matmul 1024^3, row softmax 4096x1024 exact and with `fast_math`, conv2d
3x3 N=1 C=K=64 56x56), then runs a child in TVM's own venv (TVM and sched need different numpy
and torch stacks) that builds TVM's hand schedules and fast_softmax from the peer script
(/work/shared/peers/tvm_cpu.py), loads sched's compiled libraries with ctypes (the plain kernel
function, raw pointers: no argument checks on either side) and times every kernel and numpy in
alternating rounds on the same arrays, checking each result against numpy.

    python benchmarks/tvm_side_by_side.py [--tvm-python /tmp/peers/tvm/bin/python]
Writes benchmarks/results/<cpu>/tvm_side_by_side_1_thread.json with `--threads 1`, the
comparison this script is for. With 2 threads (the default, TVM's pool beside libgomp with
OMP_WAIT_POLICY=passive) the figures are not a fair comparison: in TVM's process sched's
kernels and numpy's matmul ran at their one-thread speed (measured twice on Zen 5, also with
TVM_THREAD_POOL_SPIN_COUNT=0 and sched's threads started before TVM's binds the calling
thread), while each alone uses both cores; time 2 threads in separate processes
(cpu_matmul.py and the others beside tvm_cpu.py).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
PEERS = pathlib.Path("/work/shared/peers")
M = N = K = 1024
ROWS, COLS = 4096, 1024
CONV = (1, 64, 56, 56, 64, 3)


def sched_kernels() -> dict:
    """name -> (library path, function name, workload) of sched's hand schedules."""
    sys.path.insert(0, str(ROOT))
    import sched
    from sched import hand_schedules as hs
    from sched.c.codegen import c_function_name

    n, c, h, w, k, r = CONV
    built = {
        "matmul": (sched.build(hs.cpu_matmul(M, N, K).func, target="c"), "matmul"),
        "softmax": (sched.build(hs.cpu_softmax(ROWS, COLS).func, target="c"), "softmax"),
        "softmax fast_math": (sched.build(hs.cpu_softmax(ROWS, COLS).func, target="c",
                                          fast_math=True), "softmax"),
        "conv2d": (sched.build(hs.cpu_conv2d(n, c, h, w, k, r).func, target="c"), "conv2d"),
    }
    return {name: {"library": str(kernel.library_path),
                   "function": c_function_name(kernel.lowered), "workload": workload}
            for name, (kernel, workload) in built.items()}


# -- the child, in TVM's venv -------------------------------------------------------------------

def child(spec: dict, threads: int) -> dict:
    import ctypes

    sys.path.insert(0, str(PEERS))
    sys.path.insert(0, str(ROOT))
    import tvm
    import tvm_cpu as peer
    from tvm import te, topi

    from benchmarks.cpu_common import aligned

    cpu = tvm.get_global_func("target.llvm_get_system_cpu")()       # as the peer script
    target = tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": threads})
    dev = tvm.cpu()
    rng = np.random.default_rng(0)
    a = aligned(rng.random((M, K), dtype=np.float32))
    b = aligned(rng.random((K, N), dtype=np.float32))
    x = aligned(rng.standard_normal((ROWS, COLS)).astype(np.float32))
    n, c, h, w, k, r = CONV
    data = aligned(rng.standard_normal((n, c, h, w)).astype(np.float32))
    weight = aligned(rng.standard_normal((k, c, r, r)).astype(np.float32))

    def np_softmax(v):
        e = np.exp(v - v.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def np_conv(d, wt):
        padded = np.pad(d, ((0, 0), (0, 0), (1, 1), (1, 1)))
        windows = np.lib.stride_tricks.sliding_window_view(padded, (r, r), axis=(2, 3))
        cols = windows.transpose(0, 2, 3, 1, 4, 5).reshape(n * h * w, c * r * r)
        return (wt.reshape(k, -1) @ cols.T).reshape(k, n, h, w).transpose(1, 0, 2, 3)

    inputs = {"matmul": (a, b), "softmax": (x,), "conv2d": (data, weight)}
    shapes = {"matmul": (M, N), "softmax": (ROWS, COLS), "conv2d": (n, k, h, w)}
    expected = {"matmul": a.astype(np.float64) @ b, "softmax": np_softmax(x.astype(np.float64)),
                "conv2d": np_conv(data.astype(np.float64), weight.astype(np.float64))}
    numpy_calls = {"matmul": lambda: a @ b, "softmax": lambda: np_softmax(x),
                   "conv2d": lambda: np_conv(data, weight)}
    calls, outputs = {}, {}

    def add(name, workload, call, out):
        calls[name] = (workload, call)
        outputs[name] = out

    for name, entry in spec.items():
        library = ctypes.CDLL(entry["library"])
        function = getattr(library, entry["function"])
        function.restype = None
        workload = entry["workload"]
        out = aligned(np.full(shapes[workload], np.nan, np.float32))
        pointers = [ctypes.c_void_p(arr.ctypes.data) for arr in (*inputs[workload], out)]
        # libgomp starts its threads at the first call; TVM's pool binds the calling thread to
        # core 0 once it runs, and threads started after that would inherit the binding (sched
        # measured with 2 threads ran as fast as with 1): start them now, unbound
        os.sched_setaffinity(0, range(os.cpu_count()))
        function(*pointers)
        add(f"sched {name}", workload, lambda f=function, p=pointers: f(*p), out)

    def tvm_kernel(name, workload, mod):
        lib = tvm.compile(mod, target=target).jit()
        out = np.full(shapes[workload], np.nan, np.float32)
        tensors = [tvm.runtime.tensor(arr, dev) for arr in (*inputs[workload], out)]
        main = lib["main"]
        add(f"TVM {name}", workload, lambda: main(*tensors), tensors[-1])

    tvm_kernel("matmul", "matmul", peer.sched_matmul().mod)
    tvm_kernel("softmax", "softmax", peer.sched_softmax(peer.softmax).mod)
    xp = te.placeholder((ROWS, COLS), "float32", name="X")
    fast = te.create_prim_func([xp, topi.nn.fast_softmax(xp, axis=1)])
    tvm_kernel("fast_softmax", "softmax",
               peer.sched_softmax(fast, ("T_softmax_maxelem", "T_fast_exp", "T_softmax_expsum",
                                         "T_softmax_norm"), inline=("T_softmax_delta",)).mod)
    tvm_kernel("conv2d", "conv2d", peer.sched_conv().mod)
    for workload, call in numpy_calls.items():
        add(f"numpy {workload}", workload, call, None)

    errors = {}
    for name, (workload, call) in calls.items():
        call()
        got = outputs[name]
        got = got.numpy() if hasattr(got, "numpy") else got if got is not None else call()
        errors[name] = float(np.max(np.abs(got - expected[workload])) /
                             np.max(np.abs(expected[workload])))
    times = {name: [] for name in calls}
    cpu_times = {name: [] for name in calls}
    for _ in range(7):                                  # rounds: every kernel once per round
        for name, (_, call) in calls.items():
            call()
            start, cpu_start = time.perf_counter(), time.thread_time()
            for _ in range(5):
                call()
            times[name].append((time.perf_counter() - start) / 5)
            cpu_times[name].append((time.thread_time() - cpu_start) / 5)
    rows = []
    for name, (workload, _) in calls.items():
        row = {"variant": name, "workload": workload, "median_s": float(np.median(times[name])),
               "min_s": float(np.min(times[name])), "max_relative_error": errors[name]}
        if threads == 1:        # the calling thread runs the kernel: its CPU time, unaffected
            row["cpu_min_s"] = float(np.min(cpu_times[name]))     # by waits for a core
        rows.append(row)
    return {"threads": threads, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tvm-python", default="/tmp/peers/tvm/bin/python")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(pathlib.Path(args.child).read_text()), args.threads)))
        return
    if not pathlib.Path(args.tvm_python).exists():
        print(f"no TVM venv at {args.tvm_python} (see /work/shared/peers/README.md): skipped")
        return
    spec = sched_kernels()
    spec_path = ROOT / "build" / "tvm_side_by_side_spec.json"
    spec_path.parent.mkdir(exist_ok=True)
    spec_path.write_text(json.dumps(spec))
    env = {**os.environ, "TVM_NUM_THREADS": str(args.threads),
           "OMP_NUM_THREADS": str(args.threads), "OMP_WAIT_POLICY": "passive",
           "TVM_THREAD_POOL_SPIN_COUNT": "0"}   # TVM's idle workers would hold the cores
    done = subprocess.run([args.tvm_python, __file__, "--child", str(spec_path),
                           "--threads", str(args.threads)], env=env, capture_output=True,
                          text=True)
    if done.returncode:
        sys.exit(f"the TVM child failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    by_workload: dict[str, dict] = {}
    for row in result["rows"]:
        by_workload.setdefault(row["workload"], {})[row["variant"]] = row
    for workload, rows in by_workload.items():
        numpy_s = rows[f"numpy {workload}"]["median_s"]
        for row in rows.values():
            row["vs_numpy"] = numpy_s / row["median_s"]
            cpu = f" cpu {row['cpu_min_s'] * 1e3:7.3f}" if "cpu_min_s" in row else ""
            print(f"{row['variant']:>26}: {row['median_s'] * 1e3:8.3f} ms (min "
                  f"{row['min_s'] * 1e3:7.3f}{cpu})  {row['vs_numpy']:5.2f}x numpy  "
                  f"err {row['max_relative_error']:.1e}")
    sys.path.insert(0, str(ROOT))
    from benchmarks.common import cpu_name, write_results

    tvm_version = subprocess.run([args.tvm_python, "-c", "import tvm; print(tvm.__version__)"],
                                 capture_output=True, text=True).stdout.strip()
    name = "tvm_side_by_side" + ("" if args.threads == 2 else f"_{args.threads}_thread")
    path = write_results(name, cpu_name(), {
        "threads": args.threads, "tvm_version": tvm_version,
        "note": "one process (TVM's venv): sched's compiled kernels loaded with ctypes beside "
                "TVM's hand schedules and numpy, alternating rounds of 5 calls, medians of 7 "
                "rounds", "rows": result["rows"]})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""What the CPU kernel benchmarks (cpu_matmul, cpu_conv2d, cpu_softmax, cpu_layer_norm) share:
one child process per thread setting (1 thread, 2 threads, 2 threads with libgomp's passive
wait policy: libgomp and OpenBLAS read their settings once, when they load), timing in
alternating rounds so that every variant sees the same load on a shared machine, the host's
vector ISA, and TVM's figures read from a log of /work/shared/peers/tvm_cpu.py (run in another
process, so only its ratios to its own numpy can be compared with ours).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

THREADS = (1, 2)
# label -> (threads, extra environment): each runs in a child of its own
THREAD_RUNS = {"1": (1, {}), "2": (2, {}),
               "2, OMP_WAIT_POLICY=passive": (2, {"OMP_WAIT_POLICY": "passive"})}
CHILD_FLAG = "--child-threads"
TVM_LOGS = {1: pathlib.Path("/tmp/peers/tvm_1thread.log"),
            2: pathlib.Path("/tmp/peers/tvm_2threads.log")}
TVM_COMMAND = ("env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE [TVM_NUM_THREADS=1 "
               "OPENBLAS_NUM_THREADS=1] /tmp/peers/tvm/bin/python /work/shared/peers/tvm_cpu.py "
               "--trials 0 --trials-other 0 > /tmp/peers/tvm_<n>thread(s).log")


def aligned(array, alignment: int = 64):
    """A copy of numpy `array` on an `alignment`-byte boundary (sched.autoscheduler's
    `aligned_copy`, which the tuner measures on). sched's vector loads assume nothing about
    alignment, but on numpy's usual 16-byte placement every 64-byte load crosses a cache line:
    a row softmax took 1.9-2.0 ms of CPU time where it took 1.3-1.5 ms on 64-byte-aligned data
    (Zen 5). torch's CPU tensors and TVM's are 64-byte aligned; the benchmarks give sched and
    numpy the same aligned arrays. numpy only: tvm_side_by_side.py calls it in TVM's venv,
    where sched does not import."""
    import numpy as np

    raw = np.empty(array.nbytes + alignment, np.uint8)
    start = -raw.ctypes.data % alignment
    copy = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


def isa_info() -> dict[str, object]:
    """The host's vector ISA as the C target sees it (gcc -march=native)."""
    from sched.c.isa import host_isa

    isa = host_isa()
    return {"name": isa.name, "vector_bytes": isa.vector_bytes,
            "fp32_lanes": isa.lanes("float32")}


def child_threads() -> int | None:
    """The thread count this process was started for by `run_per_thread_count`, else None."""
    if CHILD_FLAG in sys.argv:
        return int(sys.argv[sys.argv.index(CHILD_FLAG) + 1])
    return None


def thread_environment(threads: int) -> dict[str, str]:
    """The environment of a child timing with `threads` threads: OpenMP (sched's kernels) and
    OpenBLAS (numpy) both limited to it; numpy's OpenBLAS defaults otherwise (PERF.md)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env.update(OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    return env


def run_child(script: str, threads: int, extra_env: dict[str, str] | None = None,
              args: tuple[str, ...] = ()) -> dict:
    """Run `script` in a fresh Python process for `threads` threads; it prints one JSON document
    on its last line of output, which is returned."""
    env = {**thread_environment(threads), **(extra_env or {})}
    result = subprocess.run([sys.executable, script, CHILD_FLAG, str(threads), *args], env=env,
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{script} with {threads} thread(s) failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def run_per_thread_count(script: str, runs: dict | None = None) -> dict[str, dict]:
    """Run `script` in a child per entry of `runs` (default THREAD_RUNS): label -> its JSON."""
    results = {}
    for label, (threads, extra) in (runs or THREAD_RUNS).items():
        results[label] = {**run_child(script, threads, extra), "environment": extra}
    return results


PAUSE_S = 0.3   # between two variants' rounds: OpenBLAS's workers spin about 0.1 s after a call


def alternate(variants: dict[str, Callable[[], object]], rounds: int = 5, repeats: int = 5,
              warmup: int = 2, pause_s: float = PAUSE_S) -> dict[str, dict[str, float]]:
    """Time every variant in `rounds` alternating rounds of `repeats` calls each (after `warmup`
    calls): median, min and max over all calls, and the median of the per-round medians.

    Each round starts after a pause of `pause_s`: a thread pool that spins after its calls
    (OpenBLAS's, by default for about 2^28 cycles) would otherwise hold the cores while the
    next variant runs (sched's two-thread matmul measured 25 ms right after numpy, 12 ms
    alone). `cpu_median_s` is the process's CPU time per call (all its threads): about twice
    the wall time where two threads ran side by side, about equal where they shared a core
    (another process held the other one)."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    round_medians: dict[str, list[float]] = {name: [] for name in variants}
    for run in variants.values():
        for _ in range(warmup):
            run()
    for _ in range(rounds):
        for name, run in variants.items():
            time.sleep(pause_s)
            times = []
            for _ in range(repeats):
                start, cpu_start = time.perf_counter(), time.process_time()
                run()
                times.append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - cpu_start)
            samples[name] += times
            round_medians[name].append(statistics.median(times))
    return {name: {"median_s": statistics.median(times), "min_s": min(times),
                   "max_s": max(times), "calls": len(times),
                   "median_of_round_medians_s": statistics.median(round_medians[name]),
                   "cpu_median_s": statistics.median(cpu[name])}
            for name, times in samples.items()}


def add_ratios(rows: list[dict], reference: str, work: float, unit: str) -> None:
    """Give every row its rate (`work` / median, in G`unit`/s) and its ratio to the row named
    `reference` (reference time / its time: above 1 is faster)."""
    base = next(row for row in rows if row["variant"] == reference)["median_s"]
    for row in rows:
        row[unit] = work / row["median_s"] / 1e9
        row["ratio_to_numpy"] = base / row["median_s"]


_TVM_ROW = re.compile(r"^\s+(\w+)\s+(\S+)\s+([\d.]+) ms\s+([\d.]+) (\S+)\s+ok=(\w+)")


def tvm_peer(op: str, threads: int) -> dict | None:
    """TVM's figures for `op` ("matmul", "softmax", "conv") with `threads` threads, read from
    the log of tvm_cpu.py (another process, another time: compare ratios to numpy only)."""
    path = TVM_LOGS.get(threads)
    if path is None or not path.exists():
        return None
    rows = {}
    for line in path.read_text().splitlines():
        match = _TVM_ROW.match(line)
        if match and match.group(1) == op:
            rows[match.group(2)] = {"median_ms": float(match.group(3)),
                                    "rate": float(match.group(4)), "unit": match.group(5),
                                    "matches_reference": match.group(6) == "True"}
    if not rows:
        return None
    numpy_row = next((rows[name] for name in ("numpy", "numpy_im2col") if name in rows), None)
    if numpy_row:
        for row in rows.values():
            row["ratio_to_numpy_in_its_process"] = numpy_row["median_ms"] / row["median_ms"]
    return {"source": f"another process: {TVM_COMMAND} (log {path}, written "
                      f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(path.stat().st_mtime))})",
            "tvm_threads": threads, "variants": rows}


def relative_error(got, expected) -> float:
    import numpy as np

    return float(np.max(np.abs(got - expected)) / max(float(np.max(np.abs(expected))), 1e-30))


def report(benchmark: str, workload: dict, runs: dict[str, dict], tvm_op: str | None,
           rate_key: str, rate_label: str, targets: dict) -> pathlib.Path:
    """Write the JSON of a per-thread-count benchmark (with TVM's figures from its log, the
    host's CPU and vector ISA) and print its table; returns the JSON's path."""
    from rich.console import Console
    from rich.table import Table

    from benchmarks.common import cpu_name, write_results

    for run in runs.values():
        run["tvm_peer"] = tvm_peer(tvm_op, run["threads"]) if tvm_op else None
    device, isa = cpu_name(), isa_info()
    path = write_results(benchmark, device, {
        "workload": workload, "cores": os.cpu_count(), "vector_isa": isa,
        "note": "shared 2-core machine (other sessions compiling and testing): compare the "
                "same-process ratios, timed in alternating rounds; TVM's figures come from "
                "another process",
        "runs": runs, "targets": targets})
    table = Table(title=f"{benchmark} on {device} ({isa['name']})")
    for column in ("threads", "variant", "median ms", "min-max ms", rate_label, "x numpy"):
        table.add_column(column)
    for count, run in runs.items():
        for row in run["variants"]:
            table.add_row(str(count), row["variant"], f"{row['median_s'] * 1e3:.2f}",
                          f"{row['min_s'] * 1e3:.2f}-{row['max_s'] * 1e3:.2f}",
                          f"{row[rate_key]:.1f}", f"{row['ratio_to_numpy']:.2f}")
        for name, row in (run["tvm_peer"] or {}).get("variants", {}).items():
            if name.startswith("hand"):
                table.add_row(str(count), f"TVM {name} (another process)",
                              f"{row['median_ms']:.2f}", "", f"{row['rate']:.1f}",
                              f"{row.get('ratio_to_numpy_in_its_process', float('nan')):.2f}")
    Console().print(table)
    print(f"wrote {path}")
    return path

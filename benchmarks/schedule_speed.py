"""How long schedule steps take (issue 14, item 1): every step is checked by the polyhedral
engine, and the autoscheduler replays thousands of traces.

- applying hand schedules: `cpu_matmul` (CPU, TVM applies its matmul schedule in 4.6 ms),
  `gpu_matmul` and `gpu_conv2d` (GPU schedules, checked on the CPU), and TVM's own
  tensor-core (mma) schedule at 128x128x64 and at 4096^3;
- compute_at along a chain of N elementwise blocks (each block computed at the last block's
  loop, last to first), N = 4 ... 32: the total and how it grows (log-log slope between the
  two largest N: 1 is linear);
- replaying a trace (`Trace.apply`) of a conv2d schedule;
- the default GPU schedule (`sched.build(func, target="cuda")` of a function with no thread
  bindings, chosen by the cost model, every sampled sketch checked) of small conv2d and an
  odd matmul: the shapes that took minutes (helper-59), timed once, cold.

Each figure is taken cold (`sched.polyhedral.clear_caches()` before every repeat: nothing
remembered from an earlier analysis, as for the first schedule of a new workload) and warm
(the same steps again in one process, as an autoscheduler replaying a workload's traces meets
the same statements again).

    python benchmarks/schedule_speed.py      # writes benchmarks/results/<cpu>/schedule_speed.json
"""

from __future__ import annotations

import math
import pathlib
import sys
import time

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sched  # noqa: E402
from benchmarks.common import cpu_name, measure, write_results  # noqa: E402
from sched import compute as te  # noqa: E402
from sched import hand_schedules  # noqa: E402
from sched.polyhedral import clear_caches  # noqa: E402

CHAIN_LENGTHS = (4, 8, 16, 32)
TARGETS_MS = {"cpu_matmul": 15, "chain_32": 500, "conv2d_trace_replay": 30}


def _cold(run):
    def call():
        clear_caches()
        return run()
    return call


def _plus_one(x, name: str):
    return te.compute((1024,), lambda j: x[j] + 1.0, name=name)


def chain_function(n: int):
    """B0 = A + 1, B1 = B0 + 1, ..., B{n-1}: n elementwise blocks in a chain."""
    x = te.placeholder((1024,), name="A")
    inputs = [x]
    for i in range(n):
        x = _plus_one(x, f"B{i}")
    return te.create_prim_func([*inputs, x], name=f"chain{n}")


def compute_at_chain(func, n: int) -> None:
    sch = sched.Schedule(func)
    loop = sch.get_loops(sch.get_block(f"B{n - 1}"))[0]
    for i in range(n - 2, -1, -1):
        sch.compute_at(sch.get_block(f"B{i}"), loop)


def chain_rows() -> list[dict]:
    rows = []
    for n in CHAIN_LENGTHS:
        func = chain_function(n)
        cold = measure(_cold(lambda f=func, n=n: compute_at_chain(f, n)), repeats=3, warmup=0)
        rows.append({"blocks": n, "steps": n - 1, "cold": cold})
    a, b = rows[-2], rows[-1]
    slope = (math.log(b["cold"]["median_s"] / a["cold"]["median_s"])
             / math.log(b["blocks"] / a["blocks"]))
    for row in rows:
        row["slope_to_largest"] = slope
    return rows


def tvm_mma_schedule(m: int, n: int, k: int, i_factors, j_factors, k_factors):
    """TVM's own mma schedule (tvm.testing's `mma_schedule`, whose steps
    tests/cuda/test_tvm_mma_schedule.py replays) on an fp16 matmul, with TVM's factors."""
    from tests.cuda import test_tvm_mma_schedule as tvm

    return tvm.mma_schedule(tvm.matmul_te(m, n, k), 16, "float16", i_factors, j_factors,
                            k_factors, tvm.index_map, tvm.index_map, tvm.index_map,
                            tvm.LDMATRIX_16x16_A_INTRIN, tvm.LDMATRIX_16x16_B_INTRIN,
                            tvm.MMA_f16f16f32_INTRIN, tvm.MMA_fill_16x16_f32_INTRIN,
                            tvm.MMA_store_16x16_f32_global_INTRIN)


def _steps(schedule) -> int:
    return sum(1 for i in schedule.trace.instructions if not i.kind.startswith("get_"))


def schedule_rows() -> list[dict]:
    workloads = {
        "cpu_matmul": lambda: hand_schedules.cpu_matmul(1024, 1024, 1024),
        "gpu_matmul": lambda: hand_schedules.gpu_matmul(1024, 1024, 1024),
        "gpu_conv2d": lambda: hand_schedules.gpu_conv2d(1, 64, 56, 56, 64),
    }
    # the slow kind (seconds, cold only, few repeats): tensor-core schedules, whose fetches
    # of a K step split by 3 give isl quasi-affine schedules, and TVM's own mma schedule at a
    # small size and at TVM's 4096^3 (what a TVM user's schedule meets)
    slow = {"gpu_matmul_mma_k_split_by_3":
            (lambda: hand_schedules.gpu_matmul_mma(256, 128, 96, k_tiles=3), 3),
            "tvm_mma_schedule_128x128x64":
            (lambda: tvm_mma_schedule(128, 128, 64, [2, 2, 1, 2, 1], [1, 2, 2, 2, 1],
                                      [2, 2, 1]), 2),
            "tvm_mma_schedule_4096x4096x4096":
            (lambda: tvm_mma_schedule(4096, 4096, 4096, [4, 8, 2, 4, 1], [1, 64, 2, 1, 2],
                                      [128, 2, 1]), 1)}
    rows = []
    for name, apply in workloads.items():
        rows.append({"workload": name, "steps": _steps(apply()),
                     "cold": measure(_cold(apply), repeats=5, warmup=0),
                     "warm": measure(apply, repeats=5, warmup=1)})
    for name, (apply, repeats) in slow.items():
        last: list = []
        cold = measure(_cold(lambda apply=apply, last=last: last.append(apply())),
                       repeats=repeats, warmup=0)
        rows.append({"workload": name, "steps": _steps(last[-1]), "cold": cold})
    return rows


def conv2d_function(N=1, C=64, H=56, W=56, K=64, R=3):
    """The function `hand_schedules.cpu_conv2d` schedules (its trace replays on it)."""
    data = te.placeholder((N, C, H, W), name="data")
    weight = te.placeholder((K, C, R, R), name="weight")
    out = te.ops.conv2d_nchw(data, weight, stride=1, padding=1)
    return te.create_prim_func([data, weight, out], name="conv2d")


def replay_rows() -> list[dict]:
    """The conv2d trace replayed as a user replays it (the rule of concurrent loops asked
    after each step) and as the autoscheduler replays records (asked once at the end)."""
    trace = hand_schedules.cpu_conv2d(1, 64, 56, 56, 64).trace
    func = conv2d_function()
    rows = []
    for name, at_end in (("conv2d_trace_replay", False),
                         ("conv2d_trace_replay, concurrency checked at the end", True)):
        replay = lambda at_end=at_end: trace.apply(  # noqa: E731
            func, concurrency_checked_at_end=at_end)
        rows.append({"workload": name, "instructions": len(trace),
                     "steps": sum(1 for i in trace.instructions
                                  if not i.kind.startswith("get_")),
                     "cold": measure(_cold(replay), repeats=5, warmup=0),
                     "warm": measure(replay, repeats=5, warmup=1)})
    return rows


# (name, function arguments): conv2d (N, C, H, W, K, R, stride, padding), matmul (M, N, K)
DEFAULT_GPU_CASES = (
    ("conv2d 1x4x9x9, 32 3x3 filters", ("conv2d", 1, 4, 9, 9, 32, 3, 1, 0)),
    ("conv2d 1x4x8x8, 32 3x3 filters, stride 2", ("conv2d", 1, 4, 8, 8, 32, 3, 2, 1)),
    ("conv2d 1x16x14x14, 16 1x1 filters", ("conv2d", 1, 16, 14, 14, 16, 1, 1, 0)),
    ("matmul 257x255x63", ("matmul", 257, 255, 63)))


def default_gpu_rows() -> list[dict]:
    """The default GPU schedule of each of DEFAULT_GPU_CASES, cold, timed once."""
    from sched.autoscheduler.default import default_schedule

    rows = []
    for name, (kind, *shape) in DEFAULT_GPU_CASES:
        if kind == "conv2d":
            n, c, h, w, k, r, stride, padding = shape
            data = te.placeholder((n, c, h, w), name="data")
            weight = te.placeholder((k, c, r, r), name="weight")
            func = te.create_prim_func(
                [data, weight, te.ops.conv2d_nchw(data, weight, stride=stride, padding=padding)])
        else:
            m, n, k = shape
            a, b = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
            func = te.create_prim_func([a, b, te.ops.matmul(a, b)])
        rows.append({"workload": f"default GPU schedule, {name}", "steps": 1,
                     "cold": measure(_cold(lambda func=func: default_schedule(func, "cuda")),
                                     repeats=1, warmup=0)})
    return rows


def main() -> None:
    started = time.perf_counter()
    applied = schedule_rows()
    replays = replay_rows()
    defaults = default_gpu_rows()
    chain = chain_rows()
    device = cpu_name()
    path = write_results("schedule_speed", device, {
        "unit": "seconds", "targets_ms": TARGETS_MS,
        "tvm_cpu_matmul_schedule_ms": 4.6, "tvm_figure_source": "issue 14 (another process)",
        "hand_schedules": applied, "trace_replay": replays[0],
        "trace_replay_concurrency_at_end": replays[1], "compute_at_chain": chain,
        "default_gpu_schedule": defaults})
    table = Table(title=f"schedule steps on {device} (median ms; cold: caches cleared)")
    for column in ("what", "steps", "cold", "warm", "cold per step"):
        table.add_column(column)
    for row in [*applied, *replays, *defaults]:
        cold = row["cold"]["median_s"] * 1e3
        warm = f"{row['warm']['median_s'] * 1e3:.1f}" if "warm" in row else ""
        table.add_row(row["workload"], str(row["steps"]), f"{cold:.1f}", warm,
                      f"{cold / row['steps']:.1f}")
    for row in chain:
        cold = row["cold"]["median_s"] * 1e3
        table.add_row(f"compute_at chain, {row['blocks']} blocks", str(row["steps"]),
                      f"{cold:.1f}", "", f"{cold / row['steps']:.1f}")
    Console().print(table)
    print(f"chain growth: time ~ N^{chain[-1]['slope_to_largest']:.2f} between N = "
          f"{CHAIN_LENGTHS[-2]} and {CHAIN_LENGTHS[-1]}; took {time.perf_counter() - started:.0f}"
          f" s; wrote {path}")


if __name__ == "__main__":
    main()

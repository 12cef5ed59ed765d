"""The cost of one CUDA kernel call from Python: a 16x16 float32 add launched on torch CUDA
tensors (CPU time per call, launches queued without a sync), beside torch's own
`torch.add(a, b, out=c)`, the first call of a layout (every argument checked in Python) and a
call whose layout was checked before (pointers only); then the GPU time of the layer norm
4096 x 4096 hand schedule measured with CUDA events, whose launch the call's cost can hide
behind or not; last the GPU time per call the tuner's timer (`time_cuda`, launches queued
behind a spin kernel) reports for both kernels, beside the events around launches issued back
to back (the CPU's launch rate for the small add). Variants timed in alternating rounds
(median per call over the rounds).

    python benchmarks/gpu_call_overhead.py   # writes results/<gpu>/gpu_call_overhead.json
"""

from __future__ import annotations

import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from benchmarks.common import gpu_device, gpu_versions, measure_gpu, write_results  # noqa: E402

CALLS, ROUNDS = 2_000, 7


def main() -> None:
    device = gpu_device()
    import torch

    import sched
    from sched import compute as te
    from sched import hand_schedules as hs

    A = te.placeholder((16, 16), name="A")
    B = te.placeholder((16, 16), name="B")
    add = te.create_prim_func([A, B, te.compute((16, 16), lambda i, j: A[i, j] + B[i, j],
                                                name="C")], name="add")
    kernel = sched.build(add, target="cuda")        # the default schedule
    a, b, c = (torch.randn(16, 16, device="cuda") for _ in range(3))

    def checked():                  # every argument checked in Python (a new layout)
        kernel._torch_calls.dims.clear()
        kernel(a, b, c)

    variants = {"sched call (layout known)": lambda: kernel(a, b, c),
                "sched call (all checks in Python)": checked,
                "torch.add(a, b, out=c)": lambda: torch.add(a, b, out=c)}
    for run in variants.values():
        run()
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)
    per_call = {name: [] for name in variants}
    for _ in range(ROUNDS):
        for name, run in variants.items():
            start = time.perf_counter()
            for _ in range(CALLS):
                run()
            per_call[name].append((time.perf_counter() - start) / CALLS)
            torch.cuda.synchronize()
    calls = {name: statistics.median(times) for name, times in per_call.items()}
    rows, cols = 4096, 4096
    x = torch.randn(rows, cols, device="cuda")
    gamma, beta = torch.randn(cols, device="cuda"), torch.randn(cols, device="cuda")
    out = torch.empty_like(x)
    norm = sched.build(hs.gpu_layer_norm_rows(rows, cols, 512).func, target="cuda")
    layer_norm = {"sched": measure_gpu(lambda: norm(x, gamma, beta, out)),
                  "torch": measure_gpu(lambda: torch.nn.functional.layer_norm(
                      x, (cols,), gamma, beta))}
    from sched.autoscheduler.measure.common import TimingOptions
    from sched.autoscheduler.measure.worker import time_cuda

    timing = TimingOptions(number=1, repeat=5, min_repeat_ms=20.0, warmup=10)
    tuner = {"add 16x16": min(time_cuda(kernel, (a, b, c), timing)),
             "layer norm 4096^2": min(time_cuda(norm, (x, gamma, beta, out), timing))}
    back_to_back = _events_around(lambda: kernel(a, b, c), CALLS)
    for name, seconds in calls.items():
        print(f"{name:36s} {seconds * 1e6:7.2f} us per call")
    for name, timing in layer_norm.items():
        print(f"layer norm 4096^2 {name:6s} {timing['median_s'] * 1e6:7.1f} us (events)")
    for name, seconds in tuner.items():
        print(f"tuner's time_cuda {name:18s} {seconds * 1e6:7.2f} us per call")
    print(f"events around back-to-back add 16x16 {back_to_back * 1e6:7.2f} us per call")
    path = write_results("gpu_call_overhead", device, {
        "versions": gpu_versions(), "seconds_per_call": calls,
        "layer_norm_4096": layer_norm, "time_cuda_seconds_per_call": tuner,
        "add_events_back_to_back": back_to_back})
    print(f"wrote {path}")


def _events_around(run, calls: int) -> float:
    """GPU seconds per call between two events around `calls` launches issued back to back."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / calls


if __name__ == "__main__":
    main()

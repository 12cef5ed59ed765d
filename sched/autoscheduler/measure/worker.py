"""The isolated process's side of measurement: check a candidate's outputs, then time it.

The parent (`runner.IsolatedRunner`) starts this module as its own Python process,

    python -m sched.autoscheduler.measure.worker READ_FD WRITE_FD

and talks to it through two pipes, one request and one reply at a time, pickled (`seconds` of
"ready": the reference run's time, None when the reference was given; `run` of "check": the
time of the candidate's one checked run, a first estimate):

    ("workload", key, script, target, arch, seed, reference)  -> ("ready", reference, seconds)
    ("check", script)                           -> ("done", kind, error, (run,), ends, end)
    ("time", script, timing)                    -> ("done", kind, error, seconds, ends, end)
    ("measure", script, timing) (check, then time) -> ("done", kind, error, seconds, ends, end)

Before each run (a check, a timing) the worker sends ("running", start); `start` and `end` are
`time.monotonic()` readings, which the parent compares with the time limit: a reply it reads
late (a busy machine) still says how long the run took. `ends`: the process exits after this
reply (a failed CUDA launch may leave the context unusable): the parent starts a fresh one
before the next candidate, which would otherwise find the pipe closed and be counted a crash.
    ("stop",)                                                 -> the process exits

The process is started once and serves many candidates: its imports, its workload's arrays and
the reference outputs stay loaded. A candidate that hangs or crashes it takes it down; the
parent notices (a deadline, a closed pipe) and starts a fresh one. The same functions serve
the Ray runner, whose tasks run `Measurement` in Ray's own worker processes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import sys
import time

import numpy as np

from sched.autoscheduler.measure.common import TimingOptions

FLOAT_TOLERANCE = 1e-3       # rtol, and atol as a fraction of the largest reference value
HALF_TOLERANCE = 1e-2        # the same for float16 and bfloat16 outputs
DEFAULT_CACHE_BYTES = 32 << 20
MAX_CHECKED = 512            # checked kernels kept loaded, waiting to be timed
ARRAY_ALIGNMENT = 64         # bytes: where candidates' inputs start (see aligned_copy)
# arithmetic operations above which the reference runs a CPU schedule, not the unscheduled
# loops (a 4096^3 matmul's: ~1.4e11, minutes of one core's naive loops; see reference_kernel)
SCHEDULED_REFERENCE_ABOVE = 2.0 ** 33


@dataclasses.dataclass
class Outcome:
    """What one candidate's measurement found (`kind` None: it ran, `seconds` hold its times)."""

    kind: str | None = None
    error: str | None = None
    seconds: tuple[float, ...] = ()


def reference_kernel(workload):
    """The C kernel whose outputs every candidate is compared with: the function as written
    (its loops as the user wrote them, which no schedule step touched: the most independent
    reference); above SCHEDULED_REFERENCE_ABOVE operations, the function under the default
    CPU schedule (sched.autoscheduler.default: tiled, vectorized, on every core), which
    shares the front end with a candidate but none of a GPU candidate's code (threads,
    shared memory, the CUDA emitter): an error in either shows as a mismatch. A function no
    CPU sketch applies to keeps its own loops."""
    import sched
    from sched.errors import ScheduleError

    func = workload.func
    if workload.flops() > SCHEDULED_REFERENCE_ABOVE:
        from sched.autoscheduler.default import default_schedule

        try:
            func = default_schedule(func, "c").func
        except ScheduleError:
            pass
    return sched.build(func, target="c")


class Measurement:
    """One workload's inputs and reference outputs, and the measurement of candidates on it.

    `reference` (one array per output, from `reference_outputs`) may be given when another
    process computed it already; otherwise it is computed here, once.
    """

    def __init__(self, script: str, target: str, arch: str | None, seed: int,
                 reference: list[np.ndarray] | None = None):
        import sched
        from sched.autoscheduler.workload import Workload

        self.workload = Workload(sched.parse(script), target, arch)
        self.target, self.arch = target, arch
        self.arrays = self.workload.arrays(seed)
        self.dtypes = [b.dtype for b in self.workload.buffers]
        self.names = [b.name for b in self.workload.buffers]
        self.reference_seconds: float | None = None     # the reference run's, when made here
        self.reference = reference if reference is not None else self.reference_outputs()
        self._flush = None
        self._arguments = None
        self.checked: dict[str, object] = {}      # script -> kernel that passed `check`
        self.poisoned = False                      # a CUDA error: this process must end
        # called when a candidate's kernel is built and its run (check or timing) starts: the
        # parent's time limit for the run counts from there, not from the build
        self.on_run_start = None

    def reference_outputs(self) -> list[np.ndarray]:
        """The unscheduled function's outputs, built for the C target (`reference_kernel`), on
        copies of this seed's inputs (a function that updates an argument in place leaves
        them as they are, for the candidates)."""
        kernel = reference_kernel(self.workload)
        arguments = [_to_kernel(aligned_copy(a), d, "c") for a, d in zip(self.arrays, self.dtypes)]
        start = time.perf_counter()
        kernel(*arguments)
        self.reference_seconds = time.perf_counter() - start
        return [_to_numpy(arguments[i], self.dtypes[i]) for i in self.workload.outputs]

    def measure(self, script: str, timing: TimingOptions,
                hopeless_after: float | None = None) -> Outcome:
        """`check`, then `time`; a candidate whose checked run took longer than
        `hopeless_after` seconds keeps that run as its only time."""
        outcome = self.check(script)
        if outcome.kind is not None:
            return outcome
        if hopeless_after is not None and outcome.seconds[0] > hopeless_after:
            self.checked.pop(script, None)
            return outcome
        return self.time(script, timing)

    def check(self, script: str) -> Outcome:
        """Build `script` (its library is in the disk cache when a builder made it), run it once
        on fresh copies of the inputs and compare its outputs with the reference; a candidate
        that passes is kept loaded for `time`; its `seconds` hold that one run's time."""
        kernel = self._build(script)
        if isinstance(kernel, Outcome):
            return kernel
        self._run_starts()
        arguments = [_to_kernel(aligned_copy(a), d, self.target)
                     for a, d in zip(self.arrays, self.dtypes)]
        try:
            start = time.perf_counter()
            kernel(*arguments)
            if self.target == "cuda":
                _synchronize()
            run = time.perf_counter() - start
        except Exception as error:  # noqa: BLE001 - any failure is this candidate's
            # a failed launch may leave the CUDA context unusable (an illegal address is
            # sticky): the process ends after replying, and the next candidate gets a fresh one
            self.poisoned = self.target == "cuda"
            return Outcome("run", describe(error))
        for position, expected in zip(self.workload.outputs, self.reference):
            got = _to_numpy(arguments[position], self.dtypes[position])
            difference = compare(self.names[position], got, expected, self.dtypes[position])
            if difference is not None:
                return Outcome("wrong", difference)
        self.checked[script] = kernel
        while len(self.checked) > MAX_CHECKED:          # a parent that never timed them
            del self.checked[next(iter(self.checked))]
        return Outcome(seconds=(run,))

    def time(self, script: str, timing: TimingOptions) -> Outcome:
        """Time a candidate `check` passed (built again when this process did not check it: a
        fresh worker after a crash)."""
        kernel = self.checked.pop(script, None)
        if kernel is None:
            kernel = self._build(script)
        if isinstance(kernel, Outcome):
            return kernel
        self._run_starts()
        if self._arguments is None:         # one set for every timing: outputs overwritten
            self._arguments = [_to_kernel(aligned_copy(a), d, self.target)
                               for a, d in zip(self.arrays, self.dtypes)]
        try:
            if self.target == "cuda":
                seconds = time_cuda(kernel, self._arguments, timing, self._cuda_flush(timing))
            else:
                seconds = time_cpu(kernel, self._arguments, timing, self._cpu_flush(timing))
        except Exception as error:  # noqa: BLE001
            self.poisoned = self.target == "cuda"
            return Outcome("run", describe(error))
        return Outcome(seconds=seconds)

    def _run_starts(self) -> None:
        if self.on_run_start is not None:
            self.on_run_start()

    def _build(self, script: str):
        import sched

        try:
            return sched.build(sched.parse(script), target=self.target, arch=self.arch,
                               check_bounds="off", check_races=False)   # checked before
        except Exception as error:  # noqa: BLE001
            return Outcome("build", describe(error))

    def _cpu_flush(self, timing: TimingOptions):
        if not timing.flush_cache:
            return None
        if self._flush is None:
            self._flush = np.ones(2 * last_level_cache_bytes() // 8)

        def flush():
            self._flush += 1.0
        return flush

    def _cuda_flush(self, timing: TimingOptions):
        if not timing.flush_cache:
            return None
        if self._flush is None:
            import torch

            size = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
            self._flush = torch.empty(2 * max(size, 1 << 20) // 4, device="cuda")
        return self._flush.zero_


def time_cpu(kernel, arguments, timing: TimingOptions, flush=None) -> tuple[float, ...]:
    """Mean seconds per call of each repeat, TVM-style (see `TimingOptions`)."""
    def repeat(number: int) -> float:
        if flush is not None:
            flush()
        start = time.perf_counter()
        for _ in range(number):
            kernel(*arguments)
        return time.perf_counter() - start

    return _time(repeat, timing)


def time_cuda(kernel, arguments, timing: TimingOptions, flush=None) -> tuple[float, ...]:
    """Like `time_cpu`, with CUDA events on torch's current stream.

    A launch costs the CPU more than a small kernel runs on the GPU, so launches issued back
    to back would time the CPU's launch rate. The launches of a repeat are therefore issued in
    chunks that fit the stream's launch queue, each behind a spin kernel (`torch.cuda._sleep`)
    lasting longer than the CPU needs to issue the chunk: its launches wait in the queue and
    the GPU runs them without gaps between the chunk's two events, as a CUDA graph would. A
    chunk whose spin ended before its last launch was queued (the GPU may have waited for the
    CPU) is timed again with a longer spin."""
    import torch

    stream = torch.cuda.current_stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    issue_seconds = [0.0]                     # CPU seconds to issue one call, last measured
    margin = [1.5]                            # the spin, in times the chunk's issue time

    def chunk(number: int) -> float:
        while True:
            hold = min(number * issue_seconds[0] * margin[0] + 20e-6, MAX_HOLD_SECONDS)
            torch.cuda._sleep(max(1, int(hold * _spin_cycles_per_second())))
            start.record(stream)
            issued = time.perf_counter()
            for _ in range(number):
                kernel(*arguments)
            issue_seconds[0] = (time.perf_counter() - issued) / number
            end.record(stream)
            held = not start.query()          # the spin still ran: no launch waited
            end.synchronize()
            if held or hold >= MAX_HOLD_SECONDS:
                return start.elapsed_time(end) / 1e3
            margin[0] *= 2

    def repeat(number: int) -> float:
        if flush is not None:
            flush()
        return sum(chunk(min(LAUNCHES_PER_CHUNK, number - done))
                   for done in range(0, number, LAUNCHES_PER_CHUNK))

    return _time(repeat, timing)


LAUNCHES_PER_CHUNK = 256    # launches queued behind one spin: well inside the launch queue
MAX_HOLD_SECONDS = 0.2      # a chunk issued slower than this is timed with gaps, never hung


@functools.cache
def _spin_cycles_per_second() -> float:
    """Cycles of `torch.cuda._sleep` per second on the current device, measured once (the
    clock may rise later: a spin then ends early, which `time_cuda` notices)."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(100_000)                                      # warm-up
    cycles = 2_000_000
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return cycles / max(start.elapsed_time(end) / 1e3, 1e-6)


def _time(repeat, timing: TimingOptions) -> tuple[float, ...]:
    """`warmup` calls, then `repeat` repeats; the first repeat raises `number` until it lasts
    `min_repeat_ms` and counts once it does."""
    if timing.warmup > 0:
        repeat(timing.warmup)
    number = max(1, timing.number)
    while True:
        elapsed = repeat(number)
        if elapsed * 1e3 >= timing.min_repeat_ms:
            break
        # aim a little past the minimum so that the next try usually suffices
        wanted = math.ceil(number * 1.2 * timing.min_repeat_ms / max(elapsed * 1e3, 1e-3))
        number = max(number * 2 if elapsed <= 0 else number + 1, wanted)
    seconds = [elapsed / number]
    for _ in range(max(0, timing.repeat - 1)):
        seconds.append(repeat(number) / number)
    return tuple(seconds)


def compare(name: str, got: np.ndarray, expected: np.ndarray, dtype: str) -> str | None:
    """None when `got` matches `expected`, else a message with the largest difference.

    Floats within rtol * (|expected| + max |expected|) (1e-3, 1e-2 for 16-bit floats): a
    reordered float32 reduction rounds differently, by a fraction of the output's magnitude
    (of small outputs too: a softmax's); NaNs must sit in the same places. Integers and
    booleans are exact."""
    if got.shape != expected.shape:
        return f"output '{name}': shape {got.shape}, expected {expected.shape}"
    if got.dtype.kind in "iub":
        bad = got != expected
        if not bad.any():
            return None
        where = np.unravel_index(np.argmax(bad), got.shape)
        return (f"output '{name}' differs from the unscheduled function's at {bad.sum()} of "
                f"{got.size} elements; first at {tuple(int(i) for i in where)}: got "
                f"{got[where]}, expected {expected[where]}")
    got64, expected64 = got.astype(np.float64), expected.astype(np.float64)
    tolerance = HALF_TOLERANCE if dtype in ("float16", "bfloat16") else FLOAT_TOLERANCE
    finite = np.isfinite(expected64)
    scale = float(np.abs(expected64[finite]).max()) if finite.any() else 0.0
    scale = max(scale, np.finfo(np.float32).tiny)
    difference = np.abs(got64 - expected64)
    same_special = (got64 == expected64) | (np.isnan(got64) & np.isnan(expected64))
    bad = ~same_special & ~(difference <= tolerance * (np.abs(expected64) + scale))
    if not bad.any():
        return None
    difference = np.where(bad, np.nan_to_num(difference, nan=np.inf), 0.0)
    where = np.unravel_index(np.argmax(difference), got.shape)
    return (f"output '{name}' differs from the unscheduled function's: largest difference "
            f"{difference[where]:.6g} at {tuple(int(i) for i in where)} (got {got64[where]:.6g}, "
            f"expected {expected64[where]:.6g}); {int(bad.sum())} of {got.size} elements "
            f"beyond the tolerance {tolerance:g} * (|expected| + {scale:.3g})")


def describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def last_level_cache_bytes() -> int:
    """The largest CPU cache's size (Linux sysfs), or 32 MiB when it cannot be read."""
    sizes = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(base):
            with open(os.path.join(base, entry, "size")) as file:
                text = file.read().strip()
            units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
            sizes.append(int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text))
    except (OSError, ValueError, KeyError):
        pass
    return max(sizes, default=DEFAULT_CACHE_BYTES)


def aligned_copy(array: np.ndarray, alignment: int = ARRAY_ALIGNMENT) -> np.ndarray:
    """A copy of `array` whose data starts at a multiple of `alignment` bytes, as torch
    allocates (numpy's large arrays start 16 bytes past a page). Candidates are measured on
    such inputs: a matmul that reads B in place ran 4.7 ms on numpy's placement and 10.4 ms on
    64-byte aligned rows (the rows of A, B and C, 4 KB apart, then fight over the same cache
    sets), while the hand schedule, which packs B, ran 4.4 ms on both."""
    buffer = np.empty(array.nbytes + alignment, np.uint8)
    start = -buffer.ctypes.data % alignment
    copy = buffer[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


def _to_kernel(array: np.ndarray, dtype: str, target: str):
    """The argument a kernel of `target` takes for a buffer of `dtype` holding `array`'s values
    (`Workload.arrays` gives bfloat16 buffers as float32)."""
    if target == "cuda":
        import torch

        tensor = torch.from_numpy(array)
        if dtype == "bfloat16":
            tensor = tensor.to(torch.bfloat16)
        return tensor.cuda()
    if dtype == "bfloat16":
        bits = array.astype(np.float32).view(np.uint32).astype(np.uint64)
        return (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)
    return array


def _to_numpy(argument, dtype: str) -> np.ndarray:
    if not isinstance(argument, np.ndarray):        # a torch tensor
        import torch

        if argument.dtype == torch.bfloat16:
            argument = argument.float()
        return argument.cpu().numpy()
    if dtype == "bfloat16":
        return (argument.astype(np.uint32) << 16).view(np.float32)
    return argument


def _synchronize() -> None:
    import torch

    torch.cuda.synchronize()


def serve(requests, replies) -> None:
    """Answer the parent's requests until it says stop or goes away."""
    measurement = None
    while True:
        try:
            request = requests.recv()
        except EOFError:
            return
        kind = request[0]
        if kind == "stop":
            return
        if kind == "workload":
            _, _key, script, target, arch, seed, reference = request
            try:
                measurement = Measurement(script, target, arch, seed, reference)
                measurement.on_run_start = lambda: replies.send(("running", time.monotonic()))
                replies.send(("ready", measurement.reference, measurement.reference_seconds))
            except Exception as error:  # noqa: BLE001 - reported to the parent
                measurement = None
                replies.send(("failed", describe(error)))
        elif kind in ("check", "time", "measure"):
            script, *timing = request[1:]
            outcome = getattr(measurement, kind)(script, *timing)
            replies.send(("done", outcome.kind, outcome.error, outcome.seconds,
                          measurement.poisoned, time.monotonic()))
            if measurement.poisoned:
                return
        else:
            replies.send(("failed", f"unknown request {kind!r}"))


def main(argv: list[str]) -> None:
    import faulthandler
    from multiprocessing.connection import Connection

    faulthandler.enable()          # a segfault's Python stack goes to stderr, for the parent
    import sched.c.kernel  # noqa: F401 - sched loaded before the first request

    requests = Connection(int(argv[0]), writable=False)
    replies = Connection(int(argv[1]), readable=False)
    serve(requests, replies)


if __name__ == "__main__":
    main(sys.argv[1:])

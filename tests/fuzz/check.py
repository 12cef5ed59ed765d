"""The checks the fuzz tests make, and the reproducer a failure prints.

Oracle: `sched.interpret` of the original program. A schedule must give the same arrays, run by
the interpreter with its concurrent loops forward, reversed, shuffled and from a snapshot (each
iteration of a parallel or vectorized loop from the memory at the loop's entry: a lost update,
which commuting read-modify-writes hide from every order, shows), and built for C.
A built kernel's arguments lie inside larger arrays whose other bytes hold a pattern: a store
out of bounds that the comparison cannot see changes it (`Canaries`).
"""

from __future__ import annotations

import collections
import os
import re

import numpy as np

import sched
from sched.interpreter import InterpretError, OutOfBoundsError
from sched.ir import For, collect
from sched.polyhedral.in_bounds import OutOfBoundsError as BuildOutOfBounds
from tests.fuzz.known_holes import allowed, known_build_refusal
from tests.fuzz.programs import Program

ORDERS = ("forward", "reverse", "shuffle", "snapshot")
# Steps should refuse what cannot be built (issue 9, items 13 and 26); a BuildError after
# accepted steps is reported as a finding, except these: a schedule that binds some loop nests
# to the GPU and not others is a schedule in progress, not a wrong step.
REFUSED_AT_BUILD_IS_A_FINDING = True
# Also (issue 12 item 4): a shared or local buffer between stages that must be separate kernels
# is refused at build, which splits the kernels; no step can tell before the stages are bound.
# And a loop with a software_pipeline_order but no stage yet, or a stage but no order yet: the
# two annotations are two steps, checked together once both are there
# (schedule/software_pipeline.py; the build of a stage alone takes the body's order).
BUILD_REFUSALS_THAT_ARE_FINE = ("is not under any loop bound to blockIdx or threadIdx",
                                "does not outlive a kernel",
                                "but no software_pipeline_stage: annotate it too",
                                "has no software_pipeline_order yet")


class Finding(AssertionError):
    """A schedule, a build or a step that did something wrong; the message is a reproducer."""


def oracle(program: Program, seed: int = 0) -> list[np.ndarray] | None:
    """The arguments after interpreting the original program (None when it is out of bounds,
    which the generator should never produce)."""
    arrays = program.arrays(seed)
    try:
        sched.interpret(program.func, *arrays)
    except (OutOfBoundsError, InterpretError):
        return None
    return arrays


INTERPRETED = 'sched.interpret(sch.func, *got, thread_order="forward")   # or reverse / shuffle'


def interpreted(order: str) -> str:
    """The reproducer's line that runs the scheduled function as the check did."""
    return f'sched.interpret(sch.func, *got, thread_order="{order}", seed=1)'


def built(target: str, thread_order: str | None = None) -> str:
    """The reproducer's lines that build and run the scheduled function as the check did
    (unchecked races: the oracle is running the threads in every order)."""
    lines = [] if thread_order is None else [
        "import os", f'os.environ["SCHED_THREAD_ORDER"] = "{thread_order}"']
    return "\n".join([*lines, f'sched.build(sch.func, target="{target}", '
                                f'check_races=False)(*got)'])


def reproducer(program: Program, log: list[str], problem: str, run: str = INTERPRETED) -> str:
    """Runnable Python for a finding: the program, the steps, the check (`run`: the lines
    that run the scheduled function on `got`, as the check that found it did)."""
    steps = "\n".join(log) if log else "# (no step)"
    shapes = [tuple(program.dims[d.name] if hasattr(d, "name") else d.value
                    for d in b.shape) for b in program.func.buffers]
    dtypes = [b.dtype for b in program.func.buffers]
    return f'''{problem}
features: {sorted(program.features)}
--- reproducer ---
import numpy as np
import sched
from sched.errors import ScheduleError

func = sched.parse("""
{program.func.script()}""")
sch = sched.Schedule(func, seed=0)
{steps}
def arrays():
    rng = np.random.default_rng(0)
    return [rng.integers(0, 4, s).astype(np.int32) if d == "int32" else
            rng.integers(-3, 4, s).astype(d) for s, d in zip({shapes!r}, {dtypes!r})]
expected, got = arrays(), arrays()
sched.interpret(func, *expected)
{run}
for e, g, b in zip(expected, got, func.buffers):
    if not np.array_equal(e, g, equal_nan=True):
        print(b.name, "expected", e.ravel(), "got", g.ravel())
'''


class Canaries:
    """The program's arrays, each inside a larger one whose bytes before and after it hold a
    pattern (`arrays` are the views to pass to a kernel); `touched()` names the arguments a
    store outside their bounds changed the pattern of."""

    PAD, PATTERN = 256, 0xA5       # bytes on each side: keeps each view's 64-byte alignment

    def __init__(self, arrays: list[np.ndarray]) -> None:
        self.wholes, self.arrays = [], []
        for array in arrays:
            whole = np.full(array.nbytes + 2 * self.PAD, self.PATTERN, np.uint8)
            view = whole[self.PAD:self.PAD + array.nbytes].view(array.dtype).reshape(
                array.shape)
            view[...] = array
            self.wholes.append(whole)
            self.arrays.append(view)

    def touched(self) -> list[int]:
        return [number for number, whole in enumerate(self.wholes)
                if (whole[:self.PAD] != self.PATTERN).any()
                or (whole[len(whole) - self.PAD:] != self.PATTERN).any()]


def check_canaries(program: Program, canaries: Canaries, log, how: str, run: str) -> None:
    touched = canaries.touched()
    if touched:
        names = [program.func.buffers[n].name for n in touched]
        raise Finding(reproducer(program, log, f"the kernel stores outside argument(s) "
                                 f"{', '.join(names)}{how}", run))


def check_round_trip(program: Program, func, log) -> None:
    """`func`'s printed script parses back to `func` (sched's TVMScript round trip)."""
    from sched.ir.parser import parse

    text = func.script()
    try:
        back = parse(text)
    except Exception as error:     # noqa: BLE001 - any failure to read back is a finding
        raise Finding(reproducer(program, log, f"the script after the last step does not "
                                 f"parse back: {type(error).__name__}: {error}\n{text}")) from None
    if back != func:
        raise Finding(reproducer(program, log, f"the script after the last step parses back "
                                 f"to another function:\n{text}\n--- reparsed ---\n"
                                 f"{back.script()}"))


# why cuda-emu did not run a GPU schedule (hunt.py prints the most common)
CUDA_EMU_REFUSALS: collections.Counter = collections.Counter()

EXACT_FLOAT32 = 2 ** 24      # integers up to here are exact in float32: any order of sums agrees


def same_values(e: np.ndarray, g: np.ndarray) -> bool:
    """Equal, exactly: the inputs are small integers, so every order of the arithmetic gives
    the same floats, until a value passes 2^24 (a chain of reductions that grows). Beyond
    that, float32 rounds, and a C build (which contracts a * b + c into an FMA) legitimately
    differs from the interpreter in the last bits: such a buffer is compared within 1e-5 of
    its largest magnitude."""
    if np.array_equal(e, g, equal_nan=True):
        return True
    if e.dtype.kind != "f" or not np.array_equal(np.isnan(e), np.isnan(g)):
        return False
    finite = np.abs(e[np.isfinite(e)])
    largest = float(finite.max()) if finite.size else 0.0
    if largest <= EXACT_FLOAT32:
        return False
    close = np.isclose(e, g, rtol=0, atol=1e-5 * largest) | (e == g)
    return bool(close.all())


def compare(program: Program, expected: list[np.ndarray], got: list[np.ndarray], log,
            how: str, run: str) -> None:
    for buffer, e, g in zip(program.func.buffers, expected, got):
        if not same_values(e, g):
            raise Finding(reproducer(
                program, log, f"{how}: buffer {buffer.name} differs from the original's "
                f"result\nexpected {e.ravel().tolist()}\ngot      {g.ravel().tolist()}", run))


def check_interpreted(program: Program, func, expected, log) -> None:
    """`func` (scheduled) interpreted in every order gives `expected`."""
    for order in ORDERS:
        got = program.arrays(0)
        try:
            sched.interpret(func, *got, thread_order=order, seed=1)
        except (OutOfBoundsError, InterpretError) as error:
            raise Finding(reproducer(program, log, f"the scheduled function, interpreted "
                                     f"({order}), fails: {error}", interpreted(order))) from None
        compare(program, expected, got, log, f"interpreted in {order} order", interpreted(order))


def check_c(program: Program, func, expected, log) -> None:
    """`func` built for C gives `expected` (not checked for the features whose C build is a
    known hole, see known_holes.py). A GPU schedule runs on the C target's emulation with its
    blocks and threads in each of SCHED_THREAD_ORDER's orders."""
    if not all(allowed(f"c_build+{feature}") for feature in program.features):
        return
    if not any(isinstance(node, For) and node.kind == "thread_binding"
               for node in collect(func.body, For)):
        _check_c_once(program, func, expected, log, None)
        return
    saved = os.environ.get("SCHED_THREAD_ORDER")
    try:
        for order in ("forward", "reverse", "shuffle:1"):
            os.environ["SCHED_THREAD_ORDER"] = order
            _check_c_once(program, func, expected, log, order)
    finally:
        if saved is None:
            os.environ.pop("SCHED_THREAD_ORDER", None)
        else:
            os.environ["SCHED_THREAD_ORDER"] = saved


def in_progress(func) -> bool:
    """Whether `func` is a GPU schedule in progress that a build refuses before running it: a
    block outside the threadIdx loops that reads what it writes (every thread would run it at
    once: thread_redundancy.py). The fuzzers build with `check_races=False`, whose oracle is
    the thread orders; this refusal is a rule of its own, for a race the C target's thread
    orders cannot all show."""
    from sched.lower.thread_redundancy import redundant_update

    return redundant_update(func) is not None


def _check_c_once(program: Program, func, expected, log, thread_order: str | None) -> None:
    how = "" if thread_order is None else f" (SCHED_THREAD_ORDER={thread_order})"
    run = built("c", thread_order)
    canaries = Canaries(program.arrays(0))
    got = canaries.arrays
    if in_progress(func):
        return
    try:
        # the race check at build is the steps' own rule: the oracle here is running the
        # threads in every order, which shares no code with it
        kernel = sched.build(func, target="c", check_races=False)
    except (sched.BuildError, sched.ScheduleError, BuildOutOfBounds) as error:
        if REFUSED_AT_BUILD_IS_A_FINDING and not known_build_refusal(str(error)) and not any(
                fine in str(error) for fine in BUILD_REFUSALS_THAT_ARE_FINE):
            raise Finding(reproducer(program, log, f"accepted by every step, refused at "
                                     f"build{how}: {error}", run)) from None
        return
    except Exception as error:     # noqa: BLE001 - a crash of the build is a finding
        raise Finding(reproducer(program, log, f"C build crashes{how}: "
                                 f"{type(error).__name__}: {error}", run)) from None
    try:
        kernel(*got)
    except Exception as error:     # noqa: BLE001 - any build or call failure is a finding
        raise Finding(reproducer(program, log, f"the C kernel's call fails{how}: "
                                 f"{type(error).__name__}: {error}", run)) from None
    check_canaries(program, canaries, log, " built for C" + how, run)
    compare(program, expected, got, log, "built for C" + how, run)


def check_cuda_emu(program: Program, func, expected, log) -> bool:
    """`func`, a GPU schedule (some loop bound to a thread axis), as the CUDA source the "cuda"
    target ships, run by the emulator (target "cuda-emu": host threads, so a race may show as
    a wrong value), gives `expected`. A build refusal is not a finding here (the C check
    judges those); a crash or a wrong value is. Returns whether it ran."""
    if not any(isinstance(node, For) and node.kind == "thread_binding"
               for node in collect(func.body, For)):
        CUDA_EMU_REFUSALS["(no thread binding)"] += 1
        return False
    canaries = Canaries(program.arrays(0))
    got = canaries.arrays
    if in_progress(func):
        CUDA_EMU_REFUSALS["(in progress: a redundant update outside threadIdx)"] += 1
        return False
    try:
        kernel = sched.build(func, target="cuda-emu", check_races=False)
    except (sched.BuildError, sched.ScheduleError, BuildOutOfBounds) as error:
        CUDA_EMU_REFUSALS[re.sub(r"'[^']*'|\b\d+\b", "..", str(error))[:90]] += 1
        return False
    except Exception as error:     # noqa: BLE001 - a crash of the build is a finding
        raise Finding(reproducer(program, log, f"cuda-emu build crashes: "
                                 f"{type(error).__name__}: {error}", built("cuda-emu"))) from None
    try:
        kernel(*got)
    except Exception as error:     # noqa: BLE001
        raise Finding(reproducer(program, log, f"the cuda-emu kernel's call fails: "
                                 f"{type(error).__name__}: {error}", built("cuda-emu"))) from None
    check_canaries(program, canaries, log, " run by cuda-emu", built("cuda-emu"))
    compare(program, expected, got, log, "the CUDA source run by cuda-emu", built("cuda-emu"))
    return True

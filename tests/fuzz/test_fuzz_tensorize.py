"""The tensorize fuzzer: programs shaped like the CPU intrinsics' computations (a dot product
over rows, a matmul), random steps around the usual recipe (split to the intrinsic's shape,
decompose_reduction, tensorize, each at a drawn loop, valid or not), and random steps of every
primitive before and after (steps.py), checked against `sched.interpret` of the original
(check.py), built for C too.

The random-step fuzzer's programs (programs.py) almost never have an intrinsic's shape, so
tensorize is refused there; here it is taken often, and what follows it sees the tensorized
block. The tensor-core intrinsics (wmma, mma) get fp16 matmuls of 16x16x16 multiples and the
tensor-core recipe (steps_tensor_core.py), checked on the C target and on cuda-emu too.
"""

from __future__ import annotations

from hypothesis import assume, event, given
from hypothesis import strategies as st

import sched
from sched import compute as te
from sched.errors import ScheduleError
from tests.fuzz.check import (
    Finding,
    check_c,
    check_cuda_emu,
    check_interpreted,
    check_round_trip,
    oracle,
    reproducer,
)
from tests.fuzz.profile import fuzz_settings
from tests.fuzz.programs import Program
from tests.fuzz.steps import apply_random_step
from tests.fuzz.steps_tensor_core import apply_tensor_core_recipe, tensor_core_programs


@st.composite
def intrinsic_programs(draw) -> tuple[Program, str]:
    """(a program, the intrinsic its shape suits)."""
    if draw(st.booleans()):
        m, n, k = draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.sampled_from([8, 16]))
        A = te.placeholder((m, k), "float32", name="A")
        B = te.placeholder((n, k), "float32", name="B")
        r = te.reduce_axis((0, k), name="k")
        C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[j, r], axis=r), name="C")
        return Program(te.create_prim_func([A, B, C]), {}), "dot_product_8_f32"
    m, n, k = draw(st.sampled_from([4, 8])), draw(st.sampled_from([16, 32])), \
        draw(st.integers(1, 3))
    A = te.placeholder((m, k), "float32", name="A")
    B = te.placeholder((k, n), "float32", name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return Program(te.create_prim_func([A, B, C]), {}), "outer_product_4x16_f32"


def _step(sch, log, text: str, run) -> None:
    log.append(text)
    before = sch.func
    try:
        run()
    except ScheduleError:
        log[-1] = f"try:\n    {text}\nexcept ScheduleError:\n    pass   # refused"
        if sch.func is not before:
            raise Finding("a refused step changed the function") from None


def tensorize_schedule(program: Program, intrinsic: str, data, log: list[str]):
    sch = sched.Schedule(program.func, seed=0)
    current = {"name": "C"}

    def loops():
        return sch.get_loops(sch.get_block(current["name"]))

    def loop_text(k: int) -> str:
        return f"sch.get_loops(sch.get_block({current['name']!r}))[{k}]"

    def random_steps(count: int) -> None:
        for _ in range(count):
            checkpoint = {"func": sch.func}
            try:
                apply_random_step(sch, data, log, checkpoint)
            except ScheduleError:
                log[-1] = f"try:\n    {log[-1]}\nexcept ScheduleError:\n    pass   # refused"
                if sch.func is not checkpoint["func"]:
                    raise Finding("a refused step changed the function") from None

    try:
        random_steps(data.draw(st.integers(0, 2)))
        blocks = sched.schedule.state.block_names(sch.func)
        if not any(n in blocks for n in ("C", "C_update")):
            return sch
        current["name"] = "C" if "C" in blocks else "C_update"
        names = [lp.name for lp in loops()]
        if not names:
            return sch
        if intrinsic == "dot_product_8_f32":
            k = data.draw(st.integers(0, len(names) - 1))
            factor = data.draw(st.sampled_from([8, 8, 8, 4]))
            _step(sch, log, f"sch.split({loop_text(k)}, factors=[None, {factor}])",
                  lambda: sch.split(loops()[k], factors=[None, factor]))
        else:
            if len(names) >= 2:
                x, y = data.draw(st.sampled_from([(4, 16), (4, 16), (2, 16), (4, 8)]))
                _step(sch, log, f"sch.tile({loop_text(0)}, {loop_text(1)}, {x}, {y})",
                      lambda: sch.tile(loops()[0], loops()[1], x, y))
            if len(loops()) >= 5:
                order = data.draw(st.sampled_from([[0, 1, 4, 2, 3], [0, 1, 2, 3, 4],
                                                   [4, 0, 1, 2, 3]]))
                _step(sch, log, f"sch.reorder({', '.join(loop_text(k) for k in order)})",
                      lambda: sch.reorder(*[loops()[k] for k in order]))
        n = len(loops())
        k = data.draw(st.integers(0, n - 1))
        if current["name"] == "C" and data.draw(st.integers(0, 4)):
            _step(sch, log, f"sch.decompose_reduction(sch.get_block('C'), {loop_text(k)})",
                  lambda: sch.decompose_reduction(sch.get_block("C"), loops()[k]))
        block = "C_update" if "C_update" in sched.schedule.state.block_names(sch.func) else "C"
        target_loops = sch.get_loops(sch.get_block(block))
        if target_loops:
            t = data.draw(st.integers(0, len(target_loops) - 1))
            _step(sch, log, f"sch.tensorize(sch.get_loops(sch.get_block({block!r}))[{t}], "
                  f"{intrinsic!r})",
                  lambda: sch.tensorize(target_loops[t], intrinsic))
            event("tensorized" if "tensorize" in str(sch.trace) else "tensorize refused")
        random_steps(data.draw(st.integers(0, 3)))
    except Finding as finding:
        raise Finding(reproducer(program, log, str(finding))) from None
    except Exception as error:     # noqa: BLE001 - a step must refuse, never crash
        raise Finding(reproducer(program, log, f"the last step crashes: "
                                 f"{type(error).__name__}: {error}")) from None
    return sch


@fuzz_settings(0.3)
@given(case=intrinsic_programs(), data=st.data())
def test_tensorized_schedules_keep_the_result(case, data):
    program, intrinsic = case
    expected = oracle(program)
    assume(expected is not None)
    log: list[str] = []
    sch = tensorize_schedule(program, intrinsic, data, log)
    if sch is not None:
        check_interpreted(program, sch.func, expected, log)
        check_c(program, sch.func, expected, log)


def tensor_core_schedule(program: Program, data, log: list[str]):
    """`program` (tensor_core_programs) scheduled by the tensor-core recipe, with random steps
    after it now and then."""
    sch = sched.Schedule(program.func, seed=0)
    a, _, c = program.func.buffers
    k_dim = 0 if "trans_a" in program.features else 1
    shape = (c.shape[0].value, c.shape[1].value, a.shape[k_dim].value)
    try:
        apply_tensor_core_recipe(sch, data, log, shape, program.features)
        taken = sorted({str(i.inputs[1]) for i in sch.trace.instructions
                        if i.kind == "tensorize"})
        event(f"tensorized {len(taken)} kinds")
        for _ in range(data.draw(st.sampled_from([0, 0, 1, 2]))):
            checkpoint = {"func": sch.func}
            try:
                apply_random_step(sch, data, log, checkpoint)
            except ScheduleError:
                log[-1] = f"try:\n    {log[-1]}\nexcept ScheduleError:\n    pass   # refused"
                if sch.func is not checkpoint["func"]:
                    raise Finding("a refused step changed the function") from None
    except Finding as finding:
        raise Finding(reproducer(program, log, str(finding))) from None
    except Exception as error:     # noqa: BLE001 - a step must refuse, never crash
        raise Finding(reproducer(program, log, f"the last step crashes: "
                                 f"{type(error).__name__}: {error}")) from None
    check_round_trip(program, sch.func, log)
    return sch


@fuzz_settings(0.1)
@given(program=tensor_core_programs(), data=st.data())
def test_tensor_core_schedules_keep_the_result(program, data):
    # fp16 matmuls scheduled for wmma / mma (steps_tensor_core.py): interpreted, built for C
    # (the intrinsics' reference loops) and as the CUDA source on cuda-emu
    expected = oracle(program)
    assume(expected is not None)
    log: list[str] = []
    sch = tensor_core_schedule(program, data, log)
    check_interpreted(program, sch.func, expected, log)
    check_c(program, sch.func, expected, log)
    if check_cuda_emu(program, sch.func, expected, log):
        event("ran on cuda-emu")

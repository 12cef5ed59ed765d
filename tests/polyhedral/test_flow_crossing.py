"""flows_cross ("does a value of this buffer flow from one iteration of the loops up to this
time position to another?"), decided by joining reads and writes on the element, against
isl's value-based flow analysis (compute_flow, per run) asked the same question: on a few
programs whose answer is known, on hand schedules, and on random scheduled programs, for every
storage and every position."""

from __future__ import annotations

import islpy as isl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sched
from sched import hand_schedules
from sched.errors import ScheduleError
from sched.polyhedral import build_model, names
from sched.polyhedral.dependences import value_flows
from sched.polyhedral.flow_crossing import flows_cross
from sched.script import T
from tests.fuzz.programs import programs
from tests.fuzz.steps import apply_random_step
from tests.lower.test_plan_buffer_allocation import previous_iteration


def flow_analysis_crosses(model, storage: str, position: int) -> bool:
    """The oracle: some flow of isl's compute_flow (last write -> read, per run) goes from one
    value of the time entries 0..position to another."""
    flows = value_flows(model, storage)
    if flows.is_empty():
        return False
    width = max(len(s.time) for s in model.statements.values())
    a = [names.local("a", i) for i in range(width)]
    b = [names.local("b", i) for i in range(width)]
    same = " and ".join(f"{a[i]} = {b[i]}" for i in range(position + 1))
    prefix = isl.UnionMap(f"[{', '.join(model.params)}] -> {{ [{', '.join(a)}] -> "
                          f"[{', '.join(b)}] : {same} }}")
    return not flows.is_subset(prefix)


def assert_agrees(func) -> int:
    """flows_cross equals the oracle for every storage and time position of `func`; returns
    how many questions were compared."""
    model = build_model(func)
    if not model.statements:
        return 0
    width = max(len(s.time) for s in model.statements.values())
    compared = 0
    for storage in sorted(model.views):
        answers = []
        for position in range(width):
            expected = flow_analysis_crosses(model, storage, position)
            assert flows_cross(model, storage, position) == expected, (storage, position)
            answers.append(expected)
            compared += 1
        # a flow across the entries up to a position crosses those up to any later one (the
        # concurrency rule asks the innermost concurrent loop first and reuses a "no")
        assert answers == sorted(answers), (storage, answers)
    return compared


@T.prim_func
def rewritten_in_each_iteration(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8, 4), "float32")):
    with T.block("root"):
        P = T.alloc_buffer((4,), "float32")
        for i in range(8):
            for j in range(4):
                with T.block("P"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    P[vj] = A[vi, vj] * T.float32(2)
            for j in range(4):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = P[vj] + T.float32(1)


@T.prim_func
def rewritten_under_a_condition(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8, 4), "float32")):
    with T.block("root"):
        P = T.alloc_buffer((4,), "float32")
        for i in range(8):
            for j in range(4):
                with T.block("P"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    if A[vi, vj] > T.float32(0):
                        P[vj] = A[vi, vj]
            for j in range(4):
                with T.block("B"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    B[vi, vj] = P[vj]


@T.prim_func
def never_written(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    with T.block("root"):
        P = T.alloc_buffer((8,), "float32")
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = P[vi] + A[vi]


@T.prim_func
def read_then_rewritten(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    with T.block("root"):
        P = T.alloc_buffer((1,), "float32")
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = P[0]
            with T.block("P"):
                vi = T.axis.spatial(8, i)
                P[0] = A[vi]


@T.prim_func
def written_ahead_in_an_inner_loop(A: T.Buffer((8, 4), "float32"),
                                   B: T.Buffer((8, 4), "float32")):
    with T.block("root"):
        P = T.alloc_buffer((5,), "float32")
        for i, k in T.grid(8, 4):
            with T.block("P"):
                vi, vk = T.axis.remap("SS", [i, k])
                P[vk] = A[vi, vk]
            with T.block("B"):
                vi, vk = T.axis.remap("SS", [i, k])
                B[vi, vk] = P[vk + 1]


@pytest.mark.parametrize("func, storage, position, crosses", [
    # B at i reads P[i - 1], written at i - 1
    (previous_iteration, "P", 1, True),
    # B reads P[0] before P rewrites it in the same iteration: the value of the iteration
    # before
    (read_then_rewritten, "P", 1, True),
    # in iteration i, B at k reads P[k + 1], which P writes at k + 1, later in the
    # iteration: the value of iteration i - 1 (the statements are not in whole order there:
    # both are under k)
    (written_ahead_in_an_inner_loop, "P", 1, True),
    (written_ahead_in_an_inner_loop, "P", 3, True),
    # P[j] is rewritten before each read in the same iteration of i
    (rewritten_in_each_iteration, "P", 1, False),
    # ... but across iterations of j (the writes and the reads are in separate j loops)
    (rewritten_in_each_iteration, "P", 3, True),
    # a conditional write kills nothing: the value may come from an earlier iteration of i
    (rewritten_under_a_condition, "P", 1, True),
    # no write: no flow (the read sees whatever the buffer held)
    (never_written, "P", 1, False),
])
def test_known_answers(func, storage, position, crosses):
    model = build_model(func)
    assert flows_cross(model, storage, position) == crosses
    assert flow_analysis_crosses(model, storage, position) == crosses


def relaid_through_the_mma_layout():
    """A buffer read twice per instance (B[i, j] and B[j, i]), computed per row tile of its
    consumer and stored in the ldmatrix layout (divisions in every element): each read is one
    element per run, asked on the read times."""
    from sched import compute as te
    from sched.tensor_intrin.cuda import shared_16x16_to_ldmatrix_32x8_layout

    a = te.placeholder((32, 32), name="A")
    b = te.compute((32, 32), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((32, 32), lambda i, j: b[i, j] + b[j, i], name="C")
    sch = sched.Schedule(te.create_prim_func([a, c]))
    i, _ = sch.get_loops(sch.get_block("C"))
    io, _ = sch.split(i, [None, 16])
    sch.compute_at(sch.get_block("B"), io)
    sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (
        i // 16, j // 16, *shared_16x16_to_ldmatrix_32x8_layout(i % 16, j % 16)))
    return sch


def conv2d_fetched_by_odd_thread_extents():
    """The default GPU schedule's shape for a small conv2d (1x4x9x9, 32 filters, stride 2):
    both operands fetched into shared memory at the outer reduction loop by all 80 threads,
    the fused copy split by thread extents (16, 5) and 4 lanes that do not divide it, under
    the thread loops of the consumer it does not use. Its first runs and its flows took
    minutes before (a quasi-affine instance set of 1,152 points)."""
    from sched import compute as te

    data = te.placeholder((1, 4, 9, 9), name="X")
    weight = te.placeholder((32, 4, 3, 3), name="W")
    sch = sched.Schedule(te.create_prim_func(
        [data, weight, te.ops.conv2d_nchw(data, weight, stride=2, padding=1)]))
    sch.compute_inline(sch.get_block("conv2d_pad"))
    conv = sch.get_block("conv2d")
    n, k, p, q, rc, ry, rx = sch.get_loops(conv)
    k0, k1, k2 = sch.split(k, [1, 16, 2])
    p0, p1 = sch.split(p, [1, 5])
    q0, q1 = sch.split(q, [1, 5])
    rc0, rc1 = sch.split(rc, [2, 2])
    sch.reorder(n, k0, p0, q0, k1, q1, rc0, ry, rx, k2, p1, rc1)
    for loop, tag in ((sch.fuse(n, k0), "blockIdx.z"), (p0, "blockIdx.y"),
                      (q0, "blockIdx.x"), (k1, "threadIdx.z"), (q1, "threadIdx.x")):
        sch.bind(loop, tag)
    for name in ("W", "X"):
        reads = [region.buffer.name for region in sch.get(conv).reads]
        fetch = sch.cache_read(conv, reads.index(name), "shared")
        sch.compute_at(fetch, rc0)
        fused = sch.fuse(*sch.get_loops(fetch)[6:])           # its loops inside rc0
        _, tz, tx, lanes = sch.split(fused, [None, 16, 5, 4])
        sch.bind(tz, "threadIdx.z")
        sch.bind(tx, "threadIdx.x")
        sch.vectorize(lanes)
    return sch


@pytest.mark.parametrize("schedule", [
    relaid_through_the_mma_layout,
    conv2d_fetched_by_odd_thread_extents,
    lambda: hand_schedules.gpu_matmul_mma(64, 64, 64),
    lambda: hand_schedules.cpu_matmul(64, 64, 64),
    lambda: hand_schedules.cpu_conv2d(1, 16, 14, 14, 16),
    lambda: hand_schedules.gpu_matmul(128, 128, 64),
    lambda: hand_schedules.gpu_matmul_tensor_core(64, 64, 64, pad=8, stages=2),
    lambda: hand_schedules.cpu_softmax(64, 128),
], ids=["mma_layout", "conv2d_fetched", "mma", "cpu_matmul", "cpu_conv2d", "gpu_matmul",
        "wmma_pipelined", "cpu_softmax"])
def test_agrees_with_flow_analysis_on_hand_schedules(schedule):
    assert assert_agrees(schedule().func) > 0


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(program=programs(), data=st.data())
def test_agrees_with_flow_analysis_on_random_scheduled_programs(program, data):
    try:
        sch = sched.Schedule(program.func, seed=0)
    except ScheduleError:
        return
    log: list[str] = []
    for _ in range(data.draw(st.integers(0, 6))):
        try:
            apply_random_step(sch, data, log, None, program.features)
        except ScheduleError:
            pass
    assert_agrees(sch.func)

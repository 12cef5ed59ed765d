"""Hypothesis: random sequences of primitives on matmul, conv2d and softmax. Every step is
either taken or refused with a ScheduleError (never another exception), and whatever schedule
results computes what numpy does, on the C target."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import sched
from sched import compute as te
from sched.errors import ScheduleError
from tests.conftest import assert_close


def matmul():
    A = te.placeholder((12, 10), name="A")
    B = te.placeholder((10, 9), name="B")
    func = te.create_prim_func([A, B, te.ops.matmul(A, B)])

    def reference(a, b):
        return a @ b
    return func, [(12, 10), (10, 9)], (12, 9), reference


def conv2d():
    data = te.placeholder((1, 2, 7, 6), name="data")
    weight = te.placeholder((3, 2, 3, 3), name="weight")
    func = te.create_prim_func([data, weight, te.ops.conv2d_nchw(data, weight, padding=1)])

    def reference(x, w):
        return torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                                          padding=1).numpy()
    return func, [(1, 2, 7, 6), (3, 2, 3, 3)], (1, 3, 7, 6), reference


def softmax():
    X = te.placeholder((5, 11), name="X")
    func = te.create_prim_func([X, te.ops.softmax(X)])

    def reference(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return func, [(5, 11)], (5, 11), reference


WORKLOADS = {"matmul": matmul, "conv2d": conv2d, "softmax": softmax}
LOOP_STEPS = ("split", "fuse", "reorder", "parallel", "vectorize", "unroll")
BLOCK_STEPS = ("compute_at", "reverse_compute_at", "compute_inline", "reverse_compute_inline",
               "decompose_reduction", "rfactor", "cache_read", "cache_write")
PRIMITIVES = LOOP_STEPS + BLOCK_STEPS + ("get_loops",)


def apply_random_step(sch: sched.Schedule, data) -> None:
    blocks = [b for b in sched.schedule.state.block_names(sch.func)]
    block = sch.get_block(data.draw(st.sampled_from(blocks)))
    loops = sch.get_loops(block)
    if not loops:
        return
    step = data.draw(st.sampled_from(LOOP_STEPS + BLOCK_STEPS))
    loop = data.draw(st.sampled_from(loops))
    if step in BLOCK_STEPS:
        apply_block_step(sch, step, block, loop, blocks, data)
    elif step == "split":
        sch.split(loop, factors=[None, data.draw(st.integers(1, 5))])
    elif step == "fuse" and len(loops) >= 2:
        start = data.draw(st.integers(0, len(loops) - 2))
        sch.fuse(loops[start], loops[start + 1])
    elif step == "reorder" and len(loops) >= 2:
        chosen = data.draw(st.lists(st.sampled_from(loops), min_size=2, max_size=len(loops),
                                    unique=True))
        sch.reorder(*chosen)
    elif step == "parallel":
        sch.parallel(loop)
    elif step == "vectorize":
        sch.vectorize(loop)
    elif step == "unroll":
        sch.unroll(loop)


def apply_block_step(sch, step, block, loop, blocks, data) -> None:
    if step in ("compute_at", "reverse_compute_at"):
        other = sch.get_block(data.draw(st.sampled_from(blocks)))
        target = data.draw(st.sampled_from(sch.get_loops(other) or [loop]))
        getattr(sch, step)(block, target)
    elif step in ("compute_inline", "reverse_compute_inline"):
        getattr(sch, step)(block)
    elif step == "decompose_reduction":
        sch.decompose_reduction(block, loop)
    elif step == "rfactor":
        sch.rfactor(loop, 0)
    elif step == "cache_read":
        sch.cache_read(block, data.draw(st.integers(0, 2)), data.draw(
            st.sampled_from(["global", "local"])))
    else:
        sch.cache_write(block, 0, data.draw(st.sampled_from(["global", "local"])))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(name=st.sampled_from(sorted(WORKLOADS)), steps=st.integers(1, 6), data=st.data())
def test_random_schedules_are_refused_or_correct(name, steps, data):
    func, input_shapes, output_shape, reference = WORKLOADS[name]()
    sch = sched.Schedule(func)
    for _ in range(steps):
        before = sch.func
        try:
            apply_random_step(sch, data)
            if sch.func is not before:
                event(f"took {sch.trace.instructions[-1].kind}")
        except ScheduleError as error:
            event(f"refused {str(error).split(':')[0]}")
            assert str(error).split(":")[0] in PRIMITIVES
            assert sch.func is before         # a refused step changes nothing
    assert sch.trace.apply(func).func == sch.func
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape).astype(np.float32) for shape in input_shapes]
    out = np.zeros(output_shape, np.float32)
    sched.build(sch.func, target="c")(*inputs, out)
    assert_close(out, reference(*inputs), rtol=1e-4, atol=1e-4)

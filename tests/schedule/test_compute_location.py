"""sample_compute_location (sched/schedule/compute_location.py): TVM's candidates, decisions
recorded and replayed, the inline and root marks read by compute_at."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.schedule.compute_location import LocationMark, compute_locations
from sched.schedule.trace import Trace


def scaled_matmul(n=16):
    A = te.placeholder((n, n), "float32", name="A")
    W = te.placeholder((n, n), "float32", name="W")
    S = te.compute((n, n), lambda i, k: A[i, k] * 2.0, name="S")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(S[i, k] * W[k, j], axis=k), name="C")
    return te.create_prim_func([A, W, C])


def check(func, n=16):
    rng = np.random.default_rng(0)
    a, w = (rng.random((n, n), dtype=np.float32) for _ in range(2))
    c = np.zeros((n, n), np.float32)
    sched.build(func, target="c")(a, w, c)
    np.testing.assert_allclose(c, (a * 2) @ w, rtol=1e-4, atol=1e-4)


def test_candidates_are_inline_root_and_the_legal_consumer_loops():
    sch = sched.Schedule(scaled_matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(j, [None, 4])
    # C's loops: i, j_0, j_1, k. S can go under the data-parallel ones (recomputed for each
    # j: idempotent); the trailing reduce loop k is no candidate (TVM's rule)
    decisions = [d for d, _ in compute_locations(sch, "S")]
    assert decisions == [-2, -1, 0, 1, 2]


def test_data_parallel_loops_after_a_reduce_loop_are_not_candidates():
    sch = sched.Schedule(scaled_matmul())
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.reorder(k, i, j)
    # TVM's rule: stop at the first data-parallel loop after a reduce loop, and at reduce
    # loops after the last data-parallel one: k (0) is kept, i and j after it are not
    assert [d for d, _ in compute_locations(sch, "S")] == [-2, -1, 0]


def test_every_sampled_location_computes_the_same():
    func = scaled_matmul()
    seen = set()
    for seed in range(8):
        sch = sched.Schedule(func, seed=seed)
        block = sch.get_block("S")
        loop = sch.sample_compute_location(block)
        sch.compute_at(block, loop, preserve_unit_loops=True)
        seen.add(sch.trace.instructions[1].decision)
        check(sch.func)
        assert sch.trace.apply(func).func == sch.func
        assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func
    assert len(seen) > 1


def test_a_replayed_trace_takes_another_decision():
    func = scaled_matmul()
    sch = sched.Schedule(func)
    block = sch.get_block("S")
    loop = sch.sample_compute_location(block, decision=-1)
    sch.compute_at(block, loop, preserve_unit_loops=True)
    assert sch.func == sched.Schedule(func).func            # root: compute_at did nothing
    assert "l1 = sch.sample_compute_location(b0, decision=-1)" in str(sch.trace)
    inlined = sch.trace.with_decision(1, -2).apply(func)
    assert "S" not in [b.name for b in inlined.get_child_blocks(inlined.get_block("root"))]
    assert "A[v_i, v_k] * T.float32(2.0) * W[v_k, v_j]" in inlined.func.script()
    check(inlined.func)
    under_i = sch.trace.with_decision(1, 0).apply(func)
    script = under_i.func.script()
    assert script.index('T.block("S")') < script.index('T.block("C")')
    assert script.count("for i in range(16):") + script.count("for i_1 in range(16):") == 1
    check(under_i.func)


def test_a_decision_that_is_no_candidate_falls_back_to_the_one_before():
    func = scaled_matmul()
    sch = sched.Schedule(func)
    block = sch.get_block("S")
    # C's loops are i, j, k; k is a trailing reduce loop, so j (1) is the last candidate
    loop = sch.sample_compute_location(block, decision=7)
    assert sch.trace.instructions[1].decision == 1
    sch.compute_at(block, loop)
    check(sch.func)


def test_a_metaschedule_trace_runs_unchanged():
    func = scaled_matmul()
    sch = sched.Schedule(func)
    exec('b0 = sch.get_block(name="S", func_name="main")\n'
         'l1 = sch.sample_compute_location(block=b0, decision=1)\n'
         'sch.compute_at(block=b0, loop=l1, preserve_unit_loops=True, index=-1)\n'
         'l2, l3, l4 = sch.get_loops(block=sch.get_block(name="C", func_name="main"))\n'
         'l5, l6 = sch.split(loop=l3, factors=[None, 4], preserve_unit_iters=True)\n'
         'l7 = sch.fuse(l2, l5, preserve_unit_iters=True)\n'
         'sch.enter_postproc()\n'
         'sch.annotate(block_or_loop=l7, ann_key="pragma_auto_unroll_max_step", ann_val=16)\n'
         'sch.unannotate(block_or_loop=l7, ann_key="pragma_auto_unroll_max_step")\n',
         {"sch": sch})
    assert "sch.enter_postproc()" in str(sch.trace)
    assert 'T.block("S")' in sch.func.script()
    check(sch.func)
    assert sch.trace.apply(func).func == sch.func


def test_the_inline_mark_inlines_and_stales_the_handle():
    sch = sched.Schedule(scaled_matmul())
    block = sch.get_block("S")
    mark = sch.sample_compute_location(block, decision=-2)
    assert isinstance(mark, LocationMark)
    sch.compute_at(block, mark)
    with pytest.raises(ScheduleError, match=r"block 'S' no longer exists"):
        sch.get_loops(block)
    check(sch.func)


def test_a_mark_is_not_a_loop_for_other_steps():
    sch = sched.Schedule(scaled_matmul())
    mark = sch.sample_compute_location(sch.get_block("S"), decision=-1)
    with pytest.raises(ScheduleError, match=r"split: .*<compute root>"):
        sch.split(mark, [None, 2])


def test_a_bad_decision_is_refused():
    sch = sched.Schedule(scaled_matmul())
    with pytest.raises(ScheduleError, match=r"argument 'decision': expected -2 \(inline\)"):
        sch.sample_compute_location(sch.get_block("S"), decision="root")


def test_get_block_names_the_only_function():
    sch = sched.Schedule(scaled_matmul())
    with pytest.raises(ScheduleError, match=r"get_block: argument 'func_name': this schedule "
                                            r"holds one function, 'main'"):
        sch.get_block("S", func_name="other")


def test_the_innermost_consumer_loop_is_a_candidate():
    # an elementwise chain: B may go under C's i and under its innermost loop j (the
    # candidate list used to stop one loop short, so decision=1 fell back to 0)
    A = te.placeholder((8, 8), name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((8, 8), lambda i, j: B[i, j] + 1.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    assert [d for d, _ in compute_locations(sch, "B")] == [-2, -1, 0, 1]
    block = sch.get_block("B")
    loop = sch.sample_compute_location(block, decision=1)
    sch.compute_at(block, loop)
    assert "decision=1" in str(sch.trace)
    assert "for i_1, j_1 in T.grid(8, 8):" in sch.func.script()   # B under C's j loop
    a = np.random.default_rng(0).random((8, 8), dtype=np.float32)
    c = np.zeros((8, 8), np.float32)
    sched.build(sch.func, target="c")(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)

"""loop_partition (sched/schedule/loop_partition.py): a loop cut into consecutive parts, each a
copy of its nest; TVM's rules for the factors and TVM's names; numbers unchanged on the C
target (and cuda-emu for a bound schedule); later steps on a part; the trace."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.schedule.trace import Trace


def scaled(n=16, m=12):
    """B = A * 2 + 1 over (n, m): loops i, j, block B."""
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    return te.create_prim_func([A, B])


def two_stages():
    """B = A * 2 (loops i, j), C = B + 1 (loops i_1, j_1)."""
    A = te.placeholder((16, 12), name="A")
    B = te.compute((16, 12), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((16, 12), lambda i, j: B[i, j] + 1.0, name="C")
    return te.create_prim_func([A, C])


def matmul():
    A = te.placeholder((8, 32), name="A")
    B = te.placeholder((32, 6), name="B")
    return te.create_prim_func([A, B, te.ops.matmul(A, B)])


def run_scaled(func, target="c", n=16, m=12):
    a = np.random.default_rng(0).random((n, m), dtype=np.float32)
    b = np.zeros_like(a)
    sched.build(func, target=target)(a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


def run_two_stages(func):
    a = np.random.default_rng(1).random((16, 12), dtype=np.float32)
    c = np.zeros_like(a)
    sched.build(func, target="c")(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def run_matmul(func):
    rng = np.random.default_rng(2)
    a = rng.random((8, 32), dtype=np.float32)
    b = rng.random((32, 6), dtype=np.float32)
    c = np.full((8, 6), 7.0, np.float32)            # the init must overwrite this
    sched.build(func, target="c")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def check_replays(func, sch):
    """The schedule's trace replays to the same function: printed, applied, through JSON."""
    assert sched.parse(sch.func.script()) == sch.func
    assert sch.trace.apply(func).func == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func
    replay = sched.Schedule(func)
    exec(str(sch.trace), {"sch": replay})
    assert replay.func == sch.func


def test_partition_of_an_outer_loop_makes_a_last_part_for_the_rest():
    func = scaled()
    sch = sched.Schedule(func)
    i, j = sch.get_loops(sch.get_block("B"))
    parts = sch.loop_partition(i, factors=[4, 5])         # TVM: [0, 4), [4, 9), [9, 16)
    assert [p.name for p in parts] == ["i0", "i1", "i2"]
    script = sch.func.script()
    assert "for i0, j_i0 in T.grid(4, 12):" in script
    assert "for i1 in T.serial(4, 9):" in script
    assert "for i2 in T.serial(9, 16):" in script
    for k in range(3):                                       # TVM's block names
        assert f'with T.block("B_i{k}"):' in script
        assert f'v_i, v_j = T.axis.remap("SS", [i{k}, j_i{k}])' in script
    assert 'T.block("B")' not in script
    check_replays(func, sch)
    assert str(sch.trace).splitlines()[2] == "l3, l4, l5 = sch.loop_partition(l1, factors=[4, 5])"
    run_scaled(sch.func)


def test_partition_with_none_takes_the_rest():
    func = scaled()
    sch = sched.Schedule(func)
    i, _ = sch.get_loops(sch.get_block("B"))
    parts = sch.loop_partition(i, factors=[None, 5])       # [0, 11), [11, 16): no third part
    assert [p.name for p in parts] == ["i0", "i1"]
    script = sch.func.script()
    assert "for i0, j_i0 in T.grid(11, 12):" in script
    assert "for i1 in T.serial(11, 16):" in script
    check_replays(func, sch)
    run_scaled(sch.func)


def test_partition_of_an_inner_loop_copies_under_the_outer_one():
    func = scaled()
    sch = sched.Schedule(func)
    i, j = sch.get_loops(sch.get_block("B"))
    j0, j1 = sch.loop_partition(j, factors=[5])            # uneven: [0, 5), [5, 12)
    script = sch.func.script()
    assert "for i in range(16):" in script                 # i stays, both parts under it
    assert "for j0 in range(5):" in script
    assert "for j1 in T.serial(5, 12):" in script
    assert [lp.name for lp in sch.get_loops(sch.get_block("B_j1"))] == ["i", "j1"]
    check_replays(func, sch)
    run_scaled(sch.func)


def test_a_loop_whose_name_ends_in_a_digit_gets_parts_apart_from_it():
    func = two_stages()                                    # C's loops are i_1, j_1
    sch = sched.Schedule(func)
    _, j = sch.get_loops(sch.get_block("C"))
    parts = sch.loop_partition(j, factors=[5, None])
    assert [p.name for p in parts] == ["j_1_0", "j_1_1"]   # not TVM's j_10, j_11
    assert {b.name for b in sch.get_child_blocks(sch.get_block("root"))} >= {"C_j_1_0",
                                                                             "C_j_1_1"}
    run_two_stages(sch.func)


def test_a_part_is_split_vectorized_and_parallel():
    func = scaled(16, 32)
    sch = sched.Schedule(func)
    i, j = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.loop_partition(i, factors=[6, None])
    sch.parallel(i0)                                        # the first part: rows in parallel
    _, j_i1 = sch.get_loops(sch.get_block("B_i1"))
    jo, ji = sch.split(j_i1, factors=[None, 8])             # the second: vectorized columns
    sch.vectorize(ji)
    sch.parallel(i1)
    script = sch.func.script()
    assert "for i0 in T.parallel(6):" in script
    assert "for i1 in T.parallel(6, 16):" in script or "T.parallel(6, 16)" in script
    assert "T.vectorized(8)" in script
    check_replays(func, sch)
    run_scaled(sch.func, m=32)


def test_compute_at_into_the_parts_of_a_consumer():
    # partition producer and consumer alike, then compute each producer part into the
    # consumer part that reads it
    func = two_stages()
    sch = sched.Schedule(func)
    sch.loop_partition(sch.get_loops(sch.get_block("B"))[0], factors=[4, None])
    c0, c1 = sch.loop_partition(sch.get_loops(sch.get_block("C"))[0], factors=[4, None])
    sch.compute_at(sch.get_block("B_i0"), c0)
    sch.compute_at(sch.get_block("B_i1"), c1)
    script = sch.func.script()
    assert "for i_1_0 in range(4):" in script
    assert "for i_1_1 in T.serial(4, 16):" in script
    assert script.index('T.block("B_i0")') < script.index('T.block("C_i_1_0")') < \
        script.index('T.block("B_i1")') < script.index('T.block("C_i_1_1")')
    check_replays(func, sch)
    run_two_stages(sch.func)


def test_compute_at_of_a_part_under_its_consumer():
    func = two_stages()
    sch = sched.Schedule(func)
    sch.loop_partition(sch.get_loops(sch.get_block("B"))[0], factors=[4, None])
    sch.compute_at(sch.get_block("B_i1"), sch.get_loops(sch.get_block("C"))[0])
    assert "T.where(i_1 >= 4)" in sch.func.script()        # rows 4.. only, per row of C
    check_replays(func, sch)
    run_two_stages(sch.func)


def test_compute_at_into_one_part_of_two_readers_is_refused():
    # part 1 of C reads rows of B that part 0's loop would no longer compute
    func = two_stages()
    sch = sched.Schedule(func)
    c0, _ = sch.loop_partition(sch.get_loops(sch.get_block("C"))[0], factors=[4, None])
    with pytest.raises(ScheduleError, match=r"compute_at: under loop 'i_1_0', block 'B' would "
                                            r"run only what its consumers there read"):
        sch.compute_at(sch.get_block("B"), c0)


def test_partition_of_a_reduce_loop_keeps_the_init_in_the_first_part():
    func = matmul()
    sch = sched.Schedule(func)
    _, _, k = sch.get_loops(sch.get_block("C"))
    sch.loop_partition(k, factors=[8, None])
    first = sched.parse(sch.func.script())
    script = sch.func.script()
    # the reduce variable keeps its domain (its init runs at v_k == 0), in part 0 only
    assert script.count("v_k = T.axis.reduce(32, k0)") == 1
    assert script.count("v_k = T.axis.reduce(32, k1)") == 1
    assert script.count("with T.init():") == 1
    assert script.index("T.init()") < script.index('T.block("C_k1")')
    assert first == sch.func
    check_replays(func, sch)
    run_matmul(sch.func)


def test_partition_of_a_spatial_loop_of_a_reduction_keeps_every_init():
    func = matmul()
    sch = sched.Schedule(func)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.loop_partition(i, factors=[3])
    assert sch.func.script().count("with T.init():") == 2
    sch.reorder(*sch.get_loops(sch.get_block("C_i1"))[::-1][:2])   # k, j of part 1
    check_replays(func, sch)
    run_matmul(sch.func)


def test_partition_after_decompose_reduction():
    func = matmul()
    sch = sched.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.decompose_reduction(sch.get_block("C"), k)
    _, _, k = sch.get_loops(sch.get_block("C_update"))
    sch.loop_partition(k, factors=[None, 16])
    assert 'T.block("C_update_k1")' in sch.func.script()
    check_replays(func, sch)
    run_matmul(sch.func)


def test_parts_bound_to_threads_run_on_cuda_emu():
    func = scaled(100, 1)
    sch = sched.Schedule(func)
    i, _ = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.loop_partition(i, factors=[64, None])
    bo, bi = sch.split(i0, factors=[None, 32])
    sch.bind(bo, "blockIdx.x")
    sch.bind(bi, "threadIdx.x")
    sch.bind(i1, "threadIdx.x")                            # the rest: one block of 36 threads
    assert 'T.thread_binding(64, 100, thread="threadIdx.x")' in sch.func.script()
    check_replays(func, sch)
    for target in ("c", "cuda-emu"):
        run_scaled(sch.func, target, 100, 1)


def test_a_sampled_factor_replays_with_another_decision():
    func = scaled(16, 4)
    sch = sched.Schedule(func, seed=3)
    i, _ = sch.get_loops(sch.get_block("B"))
    size = sch.sample_categorical([2, 4, 8], [0.3, 0.3, 0.4], decision=1)
    sch.loop_partition(i, factors=[size, None])
    assert "l4, l5 = sch.loop_partition(l1, factors=[v3, None])" in str(sch.trace)
    assert "for i1 in T.serial(4, 16):" in sch.func.script()
    index = next(n for n, step in enumerate(sch.trace.instructions)
                 if step.kind == "sample_categorical")
    other = Trace.from_json(sch.trace.with_decision(index, 2).to_json()).apply(func)
    assert "for i1 in T.serial(8, 16):" in other.func.script()
    run_scaled(other.func, m=4)


def test_handles_to_the_old_block_and_loops_say_where_the_copies_are():
    sch = sched.Schedule(scaled())
    block = sch.get_block("B")
    i, j = sch.get_loops(block)
    sch.loop_partition(i, factors=[4])
    with pytest.raises(ScheduleError, match=r"block 'B' no longer exists: loop_partition "
                                            r"copied it into B_i0, B_i1: get one with "
                                            r"sch.get_block\('B_i0'\)"):
        sch.get_loops(block)
    with pytest.raises(ScheduleError, match=r"loop 'i' no longer exists: loop_partition "
                                            r"replaced it by i0, i1"):
        sch.split(i, factors=[2, None])
    with pytest.raises(ScheduleError, match=r"loop 'j' no longer exists: loop_partition "
                                            r"copied it into each part"):
        sch.vectorize(j)


def test_a_loop_that_is_gone_is_refused():
    sch = sched.Schedule(scaled())
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.split(i, factors=[None, 4])
    # i was replaced by the split: partition one of its loops instead
    with pytest.raises(ScheduleError, match=r"loop_partition: loop 'i' no longer exists: "
                                            r"split replaced it by i_0, i_1"):
        sch.loop_partition(i, factors=[2])


def test_a_zero_factor_is_refused():
    sch = sched.Schedule(scaled())
    i, _ = sch.get_loops(sch.get_block("B"))
    # a part of no iterations: TVM's NonPositiveFactorError
    with pytest.raises(ScheduleError, match=r"loop_partition: cannot partition loop 'i' with "
                                            r"the factor 0 \(at position 1\): every factor must be "
                                            r"a positive integer"):
        sch.loop_partition(i, factors=[4, 0])
    assert len(sch.trace) == 2                              # nothing recorded


def test_two_nones_are_refused():
    sch = sched.Schedule(scaled())
    i, _ = sch.get_loops(sch.get_block("B"))
    # two parts would share the rest: which gets what is not said
    with pytest.raises(ScheduleError, match=r"at most one factor may be None"):
        sch.loop_partition(i, factors=[None, 4, None])


def test_factors_that_reach_the_extent_are_refused():
    sch = sched.Schedule(scaled())
    i, _ = sch.get_loops(sch.get_block("B"))
    # without a None the last part is the rest, which would be empty (TVM's WrongFactorError)
    with pytest.raises(ScheduleError, match=r"the factors \[8, 8\] of loop 'i' sum to 16, not "
                                            r"less than its extent 16: .*drop the last factor, "
                                            r"or make one factor None"):
        sch.loop_partition(i, factors=[8, 8])
    with pytest.raises(ScheduleError, match=r"sum to 20, not less than its extent 16"):
        sch.loop_partition(i, factors=[20, None])


def test_a_symbolic_extent_is_refused():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    (i,) = sch.get_loops(sch.get_block("B"))
    # the parts' bounds would depend on n (TVM refuses dynamic shapes too)
    with pytest.raises(ScheduleError, match=r"loop 'i' has the symbolic extent n: the parts "
                                            r"of a loop must have constant bounds .*sch.split"):
        sch.loop_partition(i, factors=[4, None])


def test_a_parallel_loop_is_refused():
    sch = sched.Schedule(scaled())
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.parallel(i)
    # the parts are serial loops: which of them should run in parallel is the user's choice
    with pytest.raises(ScheduleError, match=r"loop 'i' is parallel; loop_partition makes serial "
                                            r"loops"):
        sch.loop_partition(i, factors=[4])


def test_refusal_marks_the_loop_in_the_printed_ir():
    sch = sched.Schedule(scaled())
    i, _ = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError) as error:
        sch.loop_partition(i, factors=[16])
    assert "# <-- loop 'i'" in str(error.value)


def test_a_part_is_partitioned_again_from_its_own_start():
    func = scaled()
    sch = sched.Schedule(func)
    i, _ = sch.get_loops(sch.get_block("B"))
    _, i1 = sch.loop_partition(i, factors=[4])
    sch.loop_partition(i1, factors=[5])                    # [4, 16) -> [4, 9), [9, 16)
    script = sch.func.script()
    assert "for i1_0 in T.serial(4, 9):" in script
    assert "for i1_1 in T.serial(9, 16):" in script
    assert 'T.block("B_i1_i1_0")' in script
    check_replays(func, sch)
    run_scaled(sch.func)


def test_a_buffer_allocated_under_the_loop_is_copied_per_part():
    from sched.script import T

    @T.prim_func
    def rows(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8, 4), "float32")):
        for i in range(8):
            with T.block("row"):
                vi = T.axis.spatial(8, i)
                T.reads(A[vi, 0:4])
                T.writes(B[vi, 0:4])
                tmp = T.alloc_buffer((4,), "float32")
                for j in range(4):
                    with T.block("t"):
                        vj = T.axis.spatial(4, j)
                        tmp[vj] = A[vi, vj] * 2.0
                for j in range(4):
                    with T.block("b"):
                        vj = T.axis.spatial(4, j)
                        B[vi, vj] = tmp[vj] + 1.0

    sch = sched.Schedule(rows)
    (i,) = sch.get_loops(sch.get_block("row"))
    sch.loop_partition(i, factors=[3])
    script = sch.func.script()
    assert 'tmp_i0 = T.alloc_buffer((4,), "float32")' in script
    assert 'tmp_i1 = T.alloc_buffer((4,), "float32")' in script
    assert {"t_i0", "b_i0", "t_i1", "b_i1"} <= set(sched.schedule.state.block_names(sch.func))
    check_replays(rows, sch)
    a = np.random.default_rng(3).random((8, 4), dtype=np.float32)
    b = np.zeros_like(a)
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)

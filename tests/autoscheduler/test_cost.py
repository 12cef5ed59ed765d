"""The cost models: the analytical model ranks schedules the way their memory traffic says
(tiled above naive above a stride-N inner loop; shared-memory staging and coalesced threads
move fewer global bytes), the learned model fits what it is shown, and Spearman's rank
correlation is the textbook one."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import sched
from sched import compute as te
from sched import hand_schedules
from sched.autoscheduler.cost import (
    FEATURE_NAMES,
    LearnedModel,
    Machine,
    MemoryMovementModel,
    features,
    spearman,
)
from sched.autoscheduler.cost.levels import by_buffer, union_box
from sched.autoscheduler.cost.nests import interval, loop_nests
from sched.autoscheduler.cost.rank import ranks
from sched.autoscheduler.measure.common import MeasureResult
from sched.autoscheduler.workload import Workload
from sched.ir.nodes import Var
from sched.polyhedral import buffer_region

# the machine of these tests, fixed so that the answers do not depend on the host
CPU = dataclasses.replace(Machine(), cores=2, clock_hz=2.5e9, vector_bytes=32,
                          l1_bytes=32 << 10, l2_bytes=512 << 10, llc_bytes=32 << 20)


def matmul(n: int, m: int | None = None, k: int | None = None):
    m, k = m or n, k or n
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return te.create_prim_func([A, B, C])


def loop_order(func, order: str):
    """The matmul with its loops in `order` ("ijk", "kji", ...)."""
    sch = sched.Schedule(func)
    loops = dict(zip("ijk", sch.get_loops(sch.get_block("C"))))
    sch.reorder(*(loops[name] for name in order))
    return sch.func


def tiled(func, tile: int):
    """i, j, k tiled by `tile`, the tile loops outside."""
    sch = sched.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, tile])
    jo, ji = sch.split(j, [None, tile])
    ko, ki = sch.split(k, [None, tile])
    sch.reorder(io, jo, ko, ii, ki, ji)
    return sch.func


# -- spearman ------------------------------------------------------------------------------


def test_ranks_average_ties():
    assert list(ranks([10, 20, 20, 5])) == [2.0, 3.5, 3.5, 1.0]


def test_spearman_matches_hand_computed_value_with_ties():
    # ranks: a -> [1, 2.5, 2.5, 4], b -> [1, 3, 2, 4]; centred: [-1.5, 0, 0, 1.5] and
    # [-1.5, .5, -.5, 1.5]; sum of products 4.5; norms^2 4.5 and 5: 4.5 / sqrt(22.5)
    assert spearman([1, 2, 2, 4], [1, 3, 2, 4]) == pytest.approx(3 / math.sqrt(10))
    assert spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_spearman_refuses_different_lengths():
    with pytest.raises(ValueError, match="differ in length"):
        spearman([1, 2], [1, 2, 3])


# -- footprints ----------------------------------------------------------------------------


def test_interval_follows_split_and_fuse_indices():
    f, t = Var("f"), Var("t")
    ranges = {f: (0, 0), t: (0, 15)}
    assert interval((f * 16 + t) // 4, ranges) == (0, 3)
    assert interval((f * 16 + t) % 8, ranges) == (0, 7)
    assert interval(t * t, ranges) is None          # not affine: the caller assumes it all


def test_footprint_of_a_tile_is_its_box():
    nest = loop_nests(tiled(matmul(128), 16))[0]
    a, b = (x for x in nest.accesses if x.buffer.name in ("A", "B"))
    inside = range(3, 6)                           # ii, ki, ji
    assert nest.box(a, inside) == (16, 16)
    assert nest.box(b, inside) == (16, 16)
    assert nest.box(a, range(6)) == (128, 128)
    assert nest.stride(b, 5) == 1 and nest.stride(a, 5) == 0 and nest.stride(b, 4) == 128


@pytest.mark.parametrize("schedule", [
    lambda: hand_schedules.cpu_matmul(64, 64, 64),
    lambda: hand_schedules.gpu_matmul(128, 128, 128),          # fused, split thread indices
    lambda: hand_schedules.cpu_conv2d(1, 8, 16, 16, 8),        # sliding windows, padding
], ids=["cpu_matmul", "gpu_matmul", "cpu_conv2d"])
def test_footprints_agree_with_isl_box_at_every_loop(schedule):
    # the cost model's interval boxes against sched.polyhedral's isl box hull, for every
    # block, buffer and loop level of the hand schedules
    func = schedule().func
    compared = 0
    for nest in loop_nests(func, compact=False):     # isl sees buffers as declared
        for accesses in by_buffer(nest).values():
            for position, loop in enumerate(nest.loops):
                region = buffer_region(func, nest.name, accesses[0].buffer.name,
                                       loop=loop.var.name)
                isl_box = tuple(r.extent.value for r in region)
                assert union_box(nest, accesses, range(position, len(nest.loops))) == isl_box
                compared += 1
    assert compared > 30


# -- the CPU model -------------------------------------------------------------------------


def test_tiled_schedule_beats_naive_which_beats_stride_n_inner_loop():
    func = matmul(512)
    workload = Workload.of(func)
    model = MemoryMovementModel("c", CPU)
    cpu_matmul = hand_schedules.cpu_matmul(512, 512, 512).func
    # j-k-i: i innermost, A and C read a column each (stride 512; measured 1.4x slower than
    # the naive order on a Zen 3 with 32 KB L1 and 512 KB L2)
    naive, reversed_order = func, loop_order(func, "jki")
    tiled_score, naive_score, reversed_score = model.predict(
        workload, [cpu_matmul, naive, reversed_order])
    assert tiled_score > naive_score > reversed_score
    # i-k-j (j innermost, contiguous and vectorizable) is the good naive order
    assert model.predict(workload, [loop_order(func, "ikj")])[0] > naive_score


def test_bytes_into_l1_shrink_when_the_tile_fits():
    func = matmul(256)
    workload = Workload.of(func)
    model = MemoryMovementModel("c", CPU)
    fits, too_big = (model.estimate(workload, tiled(func, t))["bytes"]["l1"] for t in (32, 128))
    assert fits < too_big / 2            # three 32x32 fp32 tiles (12 KB) fit 32 KB
    # the same schedule on a machine whose L1 holds the 128-tiles (192 KB) moves less
    big_l1 = MemoryMovementModel("c", dataclasses.replace(CPU, l1_bytes=1 << 20))
    assert big_l1.estimate(workload, tiled(func, 128))["bytes"]["l1"] < too_big / 2


def test_parallel_loop_divides_the_estimate_over_cores():
    func = matmul(256)
    sch = sched.Schedule(loop_order(func, "ikj"))
    sch.parallel(sch.get_loops(sch.get_block("C"))[0])
    workload = Workload.of(func)
    model = MemoryMovementModel("c", CPU)
    serial, parallel = (model.estimate(workload, f)["seconds"]
                        for f in (loop_order(func, "ikj"), sch.func))
    assert parallel == pytest.approx(serial / 2, rel=0.2)


def test_estimate_reports_flops_and_levels():
    func = matmul(64)
    parts = MemoryMovementModel("c", CPU).estimate(Workload.of(func), func)
    assert parts["flops"] == Workload.of(func).flops() == 2 * 64 ** 3
    assert set(parts["bytes"]) == {"registers", "l1", "l2", "llc"}
    assert parts["seconds"] > 0 and parts["nests"][0]["name"] == "C"


def test_non_affine_index_is_estimated_not_refused():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[(i * i) % 64] * 2.0, name="B")
    func = te.create_prim_func([A, B])
    score = MemoryMovementModel("c", CPU).predict(Workload.of(func), [func])[0]
    assert np.isfinite(score) and score > 0


def test_a_failing_analysis_gives_a_conservative_estimate(monkeypatch):
    from sched.autoscheduler.cost import memory_movement

    def broken(nest, machine):
        raise RuntimeError("not understood")

    func = matmul(64)
    model = MemoryMovementModel("c", CPU)
    good = model.estimate(Workload.of(func), hand_schedules.cpu_matmul(64, 64, 64).func)
    monkeypatch.setattr(memory_movement, "estimate_cpu_nest", broken)
    parts = model.estimate(Workload.of(func), func)
    assert parts["nests"][0]["conservative"] and "not understood" in parts["nests"][0]["note"]
    assert parts["seconds"] > good["seconds"]


def test_host_machine_is_detected():
    from sched.c.isa import host_isa

    host = Machine.host()
    assert host.l1_bytes > 0 and host.cores >= 1
    assert host.vector_bytes == host_isa().vector_bytes


# -- the GPU model -------------------------------------------------------------------------


def _bound_matmul(n: int, stage: bool):
    """C in 64x64 block tiles, 16x16 threads of 4x4 each; with `stage`, A and B through
    shared memory (hand_schedules.gpu_matmul), else read from global memory directly."""
    if stage:
        return hand_schedules.gpu_matmul(n, n, n).func
    sch = sched.Schedule(matmul(n))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    bi, ty, ii = sch.split(i, [None, 16, 4])
    bj, tx, ji = sch.split(j, [None, 16, 4])
    sch.reorder(bi, bj, ty, tx, k, ii, ji)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(local, tx)
    return sch.func


def _one_element_per_thread(n: int, tx_on_columns: bool):
    """One element of C per thread, 32 x 8 threads; threadIdx.x along the columns (B and C
    read and written in consecutive addresses by a warp) or along the rows (stride n)."""
    sch = sched.Schedule(matmul(n))
    i, j, k = sch.get_loops(sch.get_block("C"))
    bi, ti = sch.split(i, [None, 8 if tx_on_columns else 32])
    bj, tj = sch.split(j, [None, 32 if tx_on_columns else 8])
    sch.reorder(bi, bj, ti, tj, k)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(ti, "threadIdx.y" if tx_on_columns else "threadIdx.x")
    sch.bind(tj, "threadIdx.x" if tx_on_columns else "threadIdx.y")
    return sch.func


def test_shared_memory_staging_moves_fewer_global_bytes():
    workload = Workload.of(matmul(512), target="cuda")
    model = MemoryMovementModel("cuda")
    staged, direct = (model.estimate(workload, _bound_matmul(512, s)) for s in (True, False))
    assert staged["bytes"]["global"] < direct["bytes"]["global"] / 2
    assert staged["bytes"]["shared"] > 0 == direct["bytes"]["shared"]
    assert staged["seconds"] < direct["seconds"]


def test_uncoalesced_thread_index_scores_worse():
    workload = Workload.of(matmul(512), target="cuda")
    model = MemoryMovementModel("cuda")
    coalesced, strided = (_one_element_per_thread(512, c) for c in (True, False))
    parts = [model.estimate(workload, f) for f in (coalesced, strided)]
    assert parts[0]["bytes"]["global"] * 4 < parts[1]["bytes"]["global"]
    good, bad = model.predict(workload, [coalesced, strided])
    assert good > bad


def test_gpu_estimate_counts_a_launch_for_a_nest_with_no_block_loop():
    # a schedule in progress: one nest bound to blocks, one not (found by the sketch fuzzer:
    # the estimate crashed instead of counting it as a kernel of its own)
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((64,), lambda i: B[i] * 2.0, name="C")
    func = te.create_prim_func([A, B, C])
    sch = sched.Schedule(func)
    sch.bind(sch.get_loops(sch.get_block("C"))[0], "blockIdx.x")
    model = MemoryMovementModel("cuda")
    estimate = model.estimate(Workload.of(func, "cuda"), sch.func)
    both_bound = model.estimate(Workload.of(func, "cuda"), _bound_both(func))
    machine = model.machine
    assert estimate["seconds"] - sum(p["seconds"] for p in estimate["nests"]) == \
        pytest.approx(2 * machine.launch_seconds)
    assert both_bound["seconds"] - sum(p["seconds"] for p in both_bound["nests"]) == \
        pytest.approx(2 * machine.launch_seconds)


def _bound_both(func):
    sch = sched.Schedule(func)
    for name in ("B", "C"):
        sch.bind(sch.get_loops(sch.get_block(name))[0], "blockIdx.x")
    return sch.func


def test_gpu_estimate_reports_occupancy_and_shared_memory():
    func = hand_schedules.gpu_matmul(256, 256, 256).func
    parts = MemoryMovementModel("cuda").estimate(Workload.of(matmul(256), "cuda"), func)
    # decompose_reduction renamed the update block C_update, as TVM does
    compute = next(p for p in parts["nests"] if p["name"] == "C_update")
    assert compute["threads"] == 256 and compute["blocks"] == 16
    assert compute["shared_bytes_per_block"] == 2 * 64 * 16 * 4      # A and B tiles
    assert 0 < compute["occupancy"] <= 1


def test_a_pipelined_k_loop_multiplies_the_shared_tiles_and_is_a_feature():
    workload = Workload.of(matmul(256), "cuda")
    model = MemoryMovementModel("cuda")
    plain = hand_schedules.gpu_matmul(256, 256, 256).func
    pipelined = hand_schedules.gpu_matmul_pipelined(256, 256, 256, stages=3).func
    bytes_per_block = [next(p for p in model.estimate(workload, f)["nests"]
                            if p["name"] == "C_update")["shared_bytes_per_block"]
                       for f in (plain, pipelined)]
    assert bytes_per_block == [2 * 64 * 16 * 4, 3 * 2 * 64 * 16 * 4]   # A and B, 3 copies
    stages = FEATURE_NAMES.index("pipeline_stages")
    assert [features(workload, f, model)[stages] for f in (plain, pipelined)] == [1, 3]


# -- the learned model ---------------------------------------------------------------------


def _candidates(count: int, seed: int = 0):
    """Random tilings of a 64^3 matmul: (function, inner tile of i, inner tile of j)."""
    rng = np.random.default_rng(seed)
    func = matmul(64)
    found = []
    for _ in range(count):
        ti, tj = (int(2 ** rng.integers(0, 7)) for _ in range(2))
        sch = sched.Schedule(func)
        i, j, k = sch.get_loops(sch.get_block("C"))
        io, ii = sch.split(i, [None, ti])
        jo, ji = sch.split(j, [None, tj])
        sch.reorder(io, jo, k, ii, ji)
        found.append((sch.func, ti, tj))
    return func, found


def _synthetic_seconds(ti: int, tj: int) -> float:
    """A made-up machine that likes i tiles of 8 and j tiles of 4."""
    return 1e-3 * (1 + (math.log2(ti) - 3) ** 2 + 0.5 * (math.log2(tj) - 2) ** 2)


def test_learned_model_ranks_held_out_candidates_of_a_synthetic_relation():
    func, candidates = _candidates(60)
    workload = Workload.of(func)
    model = LearnedModel(seed=0)
    train, test = candidates[:45], candidates[45:]
    model.update(workload, [f for f, _, _ in train],
                 [MeasureResult(seconds=(_synthetic_seconds(ti, tj),)) for _, ti, tj in train])
    assert model.trained
    scores = model.predict(workload, [f for f, _, _ in test])
    speeds = [1 / _synthetic_seconds(ti, tj) for _, ti, tj in test]
    assert spearman(scores, speeds) > 0.6


def test_learned_model_uses_the_analytical_scores_before_training():
    func, candidates = _candidates(4)
    workload = Workload.of(func)
    funcs = [f for f, _, _ in candidates]
    model = LearnedModel()
    np.testing.assert_allclose(model.predict(workload, funcs),
                               MemoryMovementModel("c").predict(workload, funcs))
    model.update(workload, funcs, [MeasureResult(seconds=(1e-3,))] * 4)
    assert not model.trained                        # fewer than min_records
    np.testing.assert_allclose(model.predict(workload, funcs),
                               MemoryMovementModel("c").predict(workload, funcs))


def test_learned_model_scores_failed_candidates_worst():
    func, candidates = _candidates(30, seed=1)
    workload = Workload.of(func)
    model = LearnedModel(seed=0, min_records=4)
    failing = {id(f) for f, ti, tj in candidates if tj == 64}
    results = [MeasureResult(error_kind="run", error="crash") if id(f) in failing
               else MeasureResult(seconds=(1e-3,)) for f, _, _ in candidates]
    model.pretrain(workload, [(f, r) for (f, _, _), r in zip(candidates, results)])
    scores = model.predict(workload, [f for f, _, _ in candidates])
    bad = [s for (f, _, _), s in zip(candidates, scores) if id(f) in failing]
    good = [s for (f, _, _), s in zip(candidates, scores) if id(f) not in failing]
    assert bad and max(bad) < min(good)


def test_features_have_fixed_length_and_carry_the_analytical_estimate():
    func = matmul(64)
    workload = Workload.of(func)
    model = MemoryMovementModel("c", CPU)
    vectors = [features(workload, f, model) for f in (func, tiled(func, 16),
                                                       hand_schedules.cpu_matmul(64, 64, 64).func)]
    assert all(v.shape == (len(FEATURE_NAMES),) and np.isfinite(v).all() for v in vectors)
    position = FEATURE_NAMES.index("log_estimate_seconds")
    assert vectors[0][position] == pytest.approx(
        math.log2(model.estimate(workload, func)["seconds"]))


def test_tensor_core_fragments_count_as_per_thread_storage_in_both_models():
    """A function with wmma fragment buffers (tensorize) is scored, not a KeyError: the
    fragments are per thread (or warp) storage, like "local"."""
    from sched import hand_schedules
    from sched.autoscheduler.cost import MemoryMovementModel
    from sched.autoscheduler.cost.features import features
    from sched.autoscheduler.workload import Workload

    schedule = hand_schedules.gpu_matmul_tensor_core(64, 64, 32)
    workload = Workload.of(schedule.original_func, target="cuda", arch="sm_80")
    model = MemoryMovementModel("cuda")
    (score,) = model.predict(workload, [schedule.func])
    assert np.isfinite(score)
    assert np.all(np.isfinite(features(workload, schedule.func, model)))


# -- the vectors the C target emits ----------------------------------------------------------


def _vectorized_row(length: int, lanes_loop: int, guard_on_lanes: bool | None = None):
    """Y[i, j] = X[i, j] * 2 (or a padding-like select of it), j split by `lanes_loop`, the
    inner part vectorized."""
    X = te.placeholder((64, length), name="X")
    if guard_on_lanes is None:
        body = lambda i, j: X[i, j] * 2.0                                   # noqa: E731
    elif guard_on_lanes:
        body = lambda i, j: te.if_then_else(j >= 1, X[i, j], 0.0) * 2.0      # noqa: E731
    else:
        body = lambda i, j: te.if_then_else(i >= 1, X[i, j], 0.0) * 2.0      # noqa: E731
    func = te.create_prim_func([X, te.compute((64, length), body, name="Y")])
    sch = sched.Schedule(func)
    i, j = sch.get_loops(sch.get_block("Y"))
    _, inner = sch.split(j, [None, lanes_loop])
    sch.vectorize(inner)
    return func, sch.func


def test_a_vector_loop_counts_the_vectors_the_c_target_emits():
    """The vectors sched/c/vectorize.py emits: 16 lanes on AVX-512 are one vector, 28 are
    seven of 4 lanes, 18 one of 16 and two scalar elements; 14 hold none (no power-of-two
    width of at least 16 bytes divides 14, and 14 < 16): scalar code, as slow as an
    unvectorized loop (measured: a conv2d tile of 14 lanes 9.3 ms, of 8 lanes 1.3)."""
    avx512 = dataclasses.replace(CPU, vector_bytes=64, registers=32)
    model = MemoryMovementModel("c", avx512)
    lanes = {}
    for width in (16, 14, 28, 8):
        func, scheduled = _vectorized_row(16 * 14, width)
        (nest,) = model.estimate(Workload(func, "c"), scheduled)["nests"]
        lanes[width] = nest["lanes"]
    assert lanes[16] == 16 and lanes[8] == 8 and lanes[14] == 1
    assert lanes[28] == 4                      # seven 4-lane vectors (4 divides 28)
    func, scheduled = _vectorized_row(16 * 18, 18)
    (nest,) = model.estimate(Workload(func, "c"), scheduled)["nests"]
    assert nest["lanes"] == 18 / (1 + 2)       # one 16-lane vector, 2 elements scalar


def test_a_select_on_the_vector_lanes_costs_more_than_one_outside_them():
    """Padding on the vectorized axis takes a mask and a masked load per vector; a condition
    the lanes share is one scalar test per vector."""
    model = MemoryMovementModel("c", CPU)
    cycles = {}
    for on_lanes in (True, False):
        func, scheduled = _vectorized_row(256, 8, guard_on_lanes=on_lanes)
        (nest,) = model.estimate(Workload(func, "c"), scheduled)["nests"]
        cycles[on_lanes] = nest["cycles"]["compute"]
    plain_func, plain = _vectorized_row(256, 8)
    (nest,) = model.estimate(Workload(plain_func, "c"), plain)["nests"]
    assert cycles[True] > 2 * cycles[False]
    assert cycles[False] <= 2 * nest["cycles"]["compute"]

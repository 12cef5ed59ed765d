"""The complement-free legality answers (order by lex_ge intersections, idempotence per writer
instance) against the subtractions they replace, on every question some hand schedules ask:
they must agree (the fast answers may only be more cautious where the old ones ran over
budget)."""

from __future__ import annotations

import importlib

import islpy as isl
import pytest

from sched import hand_schedules
from sched.polyhedral import clear_caches, pairs, runs
from sched.polyhedral.dependences import first_runs
from sched.polyhedral.isl_text import within_operations

BUDGET = 5_000_000      # isl operations the old answer may take; past them it is not compared


def _old_idempotent(first, last, window, other_runs, written, reads, writes, itself,
                    rerun_writer):
    times = isl.Set.universe(first.get_space().range())
    time_writes = other_runs.reverse().apply_range(isl.Map(written))
    read_window = window
    if rerun_writer:
        rewrites = first.apply_range(times.lex_gt_set(times)).apply_range(
            first_runs(other_runs).reverse()).apply_range(other_runs)
        read_window = window.subtract(rewrites)
    if reads is not None and not read_window.apply_range(time_writes).intersect(
            isl.Map(reads)).is_empty():
        return False
    if writes is None:
        return True
    between = window.subtract(first)
    if itself:
        between = between.subtract(other_runs)
    return between.apply_range(time_writes).intersect(isl.Map(writes)).is_empty()


@pytest.mark.parametrize("schedule, recomputes", [
    (lambda: hand_schedules.gpu_matmul_mma(64, 64, 96, k_tiles=3), True),
    (lambda: hand_schedules.gpu_matmul_tensor_core(64, 64, 64, pad=8, stages=2), True),
    (lambda: hand_schedules.gpu_matmul(128, 128, 64), False),
    (lambda: hand_schedules.cpu_matmul(64, 64, 64), False),
], ids=["mma_k_by_3", "wmma_pipelined", "gpu_matmul", "cpu_matmul"])
def test_fast_order_and_idempotence_answers_agree_with_the_subtractions(schedule, recomputes,
                                                                        monkeypatch):
    compared = {"order": 0, "idempotence": 0}
    fast_order, fast_idempotent = pairs.kept_in_order, runs._idempotent_by_instances

    def order(relation, source, sink, *domains):
        fast = fast_order(relation, source, sink, *domains)
        old = within_operations(BUDGET, lambda: relation.subtract(
            source.lex_lt_map(sink)).is_empty())
        if old is not None:
            compared["order"] += 1
            assert not fast or old, f"kept_in_order said kept: {relation}"
        return fast

    def idempotent(*args):
        fast = fast_idempotent(*args)
        old = within_operations(BUDGET, lambda: _old_idempotent(*args))
        if old is not None:
            compared["idempotence"] += 1
            assert fast == old
        return fast

    monkeypatch.setattr(pairs, "kept_in_order", order)
    monkeypatch.setattr(runs, "_idempotent_by_instances", idempotent)
    clear_caches()
    try:
        schedule()
    finally:
        clear_caches()          # no answer of the patched functions stays remembered
    assert compared["order"] > 0
    assert (compared["idempotence"] > 0) == recomputes     # the warps' recomputed fetches


def _recomputed_padding_under_a_parallel_tile():
    """A conv2d's padding computed per tile of a parallel loop (recomputed at the tiles'
    borders), as the autoscheduler's CPU sketch places it: the concurrency rule asks whether
    runs cross the parallel loop for every dependence of it."""
    from sched import Schedule
    from sched import compute as te

    data = te.placeholder((1, 4, 12, 12), name="D")
    weight = te.placeholder((8, 4, 3, 3), name="W")
    func = te.create_prim_func([data, weight, te.ops.conv2d_nchw(data, weight, 1, 1)])
    sch = Schedule(func)
    block = sch.get_block("conv2d")
    n, k, p, q, *_ = sch.get_loops(block)
    po, pi = sch.split(p, [None, 4])
    sch.reorder(n, po, k, pi)
    sch.parallel(po)
    sch.compute_at(sch.get_block("conv2d_pad"), k)
    return sch


@pytest.mark.parametrize("schedule, crosses", [
    (_recomputed_padding_under_a_parallel_tile, True),
    (lambda: hand_schedules.gpu_matmul(128, 128, 64), True),
    (lambda: hand_schedules.cpu_conv2d(1, 8, 10, 10, 16), False),
], ids=["recomputed_padding", "gpu_matmul", "cpu_conv2d"])
def test_crossing_exists_agrees_with_the_crossing_runs(schedule, crosses, monkeypatch):
    """`crossing_exists` asks on the time positions the question constrains; the whole runs
    (`crossing_runs`) must say the same on every dependence the concurrency rule meets."""
    from sched.polyhedral import concurrency, time_pairs

    compared = []
    fast = time_pairs.crossing_exists

    def exists(dep, between):
        answer = fast(dep, between)
        assert answer == (time_pairs.crossing_runs(dep, between) is not None)
        compared.append(answer)
        return answer

    monkeypatch.setattr(concurrency, "crossing_exists", exists)
    # every dependence asked (iterations_touch would accept most loops before any question,
    # and may_count leave out costly pairs whose runs touch nothing across the loop)
    monkeypatch.setattr(concurrency, "iterations_touch", lambda *args: True)
    monkeypatch.setattr(concurrency._Concurrency, "may_count", lambda *args: True)
    clear_caches()
    try:
        schedule()
    finally:
        clear_caches()
    assert False in compared and (True in compared) == crosses


def _value_passed_to_the_next_iteration():
    """A loop whose iteration i writes B[i + 1] and reads B[i] (written by iteration i - 1):
    no two iterations write one element, one reads what another wrote; `parallel` refuses
    it."""
    from sched import Schedule
    from sched.errors import ScheduleError
    from sched.script import T

    @T.prim_func
    def shifted(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
        B = T.alloc_buffer((17,), "float32")
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                B[vi + 1] = A[vi]
            with T.block("C"):
                vi = T.axis.spatial(16, i)
                C[vi] = B[vi]

    sch = Schedule(shifted)
    with pytest.raises(ScheduleError, match="carries"):
        sch.parallel(sch.get_loops(sch.get_block("C"))[0])
    return sch


@pytest.mark.parametrize("schedule", [
    _value_passed_to_the_next_iteration,
    _recomputed_padding_under_a_parallel_tile,
    lambda: hand_schedules.gpu_matmul(128, 128, 64),
    lambda: hand_schedules.gpu_matmul_mma(64, 64, 96, k_tiles=3),
    lambda: hand_schedules.gpu_matmul_tensor_core(64, 64, 64, pad=8, stages=2),
    lambda: hand_schedules.gpu_softmax_rows(64, 256),
], ids=["passed_on", "recomputed_padding", "gpu_matmul", "mma_k_by_3", "wmma_pipelined",
        "softmax_rows"])
def test_pairs_left_out_before_their_dependences_have_no_crossing_runs(schedule,
                                                                       monkeypatch):
    """The concurrency rule leaves out a pair of statements under the loop and a storage
    where no runs under the loop touch an element of it across the loop (`may_count`, asked
    without an order): every dependence between the two on it, either way, must then have no
    crossing runs."""
    from sched.polyhedral import concurrency, private_buffers, time_pairs

    dependences = importlib.import_module("sched.polyhedral.dependences")
    answers = {True: 0, False: 0}
    filtered = concurrency._Concurrency.may_count

    def may_count(rule, source, sink, storage_tuple):
        answer = filtered(rule, source, sink, storage_tuple)
        answers[answer] += 1
        if not answer:
            ends = {source.name, sink.name}
            for dep in dependences.dependences_where(
                    rule.func, lambda a, b: {a.name, b.name} == ends, rule.model):
                if rule.model.buffer_tuple(dep.buffer) != storage_tuple:
                    continue
                storage = dep.buffer
                private = storage in rule.allocations and private_buffers.contains(
                    rule.loop.body, rule.allocations[storage][1])
                assert private or time_pairs.crossing_runs(dep, rule.carried_key) is None, \
                    f"{dep.kind} dependence {dep.source.name} -> {dep.sink.name} crosses"
        return answer

    monkeypatch.setattr(concurrency._Concurrency, "may_count", may_count)
    monkeypatch.setattr(concurrency, "iterations_touch", lambda *args: True)
    clear_caches()
    try:
        schedule()
    finally:
        clear_caches()
    assert answers[False] > 0

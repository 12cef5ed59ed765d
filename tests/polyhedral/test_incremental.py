"""The analysis a schedule step reuses instead of recomputing: it must be the analysis a fresh
computation gives (same dependences, same loops), and reuse only where nothing it depends on
changed."""

from __future__ import annotations

import dataclasses

import sched
from sched import compute as te
from sched.ir import For, collect
from sched.polyhedral.dependences import (
    _dependences,
    carry_over_loop_kinds,
    dependences_where,
    model_and_dependences,
    same_but_loop_kinds,
)
from sched.polyhedral.model import build_model


def matmul_schedule():
    A = te.placeholder((16, 8), name="A")
    B = te.placeholder((8, 16), name="B")
    sch = sched.Schedule(te.create_prim_func([A, B, te.ops.matmul(A, B)]))
    i, j, k = sch.get_loops(sch.get_block("C"))
    jo, ji = sch.split(j, [None, 8])
    return sch, (i, jo, ji, k)


def _summary(deps):
    return sorted((d.kind, d.source.name, d.sink.name, d.buffer, str(d.relation), d.distance,
                   d.is_reduction) for d in deps)


def _fresh(func):
    _dependences.cache_clear()
    build_model.cache_clear()
    return model_and_dependences(func)


def test_marking_a_loop_carries_the_analysis_over_and_it_equals_a_fresh_one():
    sch, (i, jo, ji, k) = matmul_schedule()
    model_and_dependences(sch.func)
    misses = _dependences.cache_info().misses
    sch.parallel(i)
    sch.vectorize(ji)
    sch.unroll(k)
    sch.annotate(jo, "note", 1)
    carried_model, carried = model_and_dependences(sch.func)
    assert _dependences.cache_info().misses == misses         # no analysis recomputed
    kinds = {lp.var.name: lp.kind for s in carried_model.statements.values() for lp in s.loops}
    assert kinds[i.name] == "parallel" and kinds[ji.name] == "vectorized"
    assert kinds[k.name] == "unrolled"
    assert carried_model.func is sch.func
    fresh_model, fresh = _fresh(sch.func)
    assert _summary(carried) == _summary(fresh)
    assert carried_model.domain.is_equal(fresh_model.domain)
    assert carried_model.schedule.is_equal(fresh_model.schedule)


def test_a_change_beyond_loop_kinds_is_not_carried():
    sch, (i, jo, ji, k) = matmul_schedule()
    before = sch.func
    loop = next(lp for lp in collect(before.body, For) if lp.loop_var.name == ji.name)
    widened = sched.schedule.state.replace(before, loop, dataclasses.replace(
        loop, kind="vectorized", extent=loop.extent + 1))
    model_and_dependences(before)
    assert not same_but_loop_kinds(before, widened)
    assert not carry_over_loop_kinds(before, widened)
    assert _dependences.get(widened) is None
    relabelled = sched.schedule.state.replace(before, loop, dataclasses.replace(
        loop, kind="vectorized", annotations=(("x", 1),)))
    assert same_but_loop_kinds(before, relabelled)


def test_refused_steps_stay_refused_after_carried_analyses():
    """A reduce loop marked after other loops were marked (each carrying the analysis over)
    is still refused: the carried dependences include the reduction's."""
    sch, (i, jo, ji, k) = matmul_schedule()
    sch.parallel(i)
    sch.vectorize(ji)
    try:
        sch.parallel(k)
    except sched.ScheduleError as error:
        assert "rfactor" in str(error)
    else:
        raise AssertionError("parallel over the reduce loop was accepted")


def test_dependences_of_some_pairs_are_those_of_the_whole_analysis():
    # dependences_where computes only the pairs asked for: each must be the dependence the
    # whole analysis lists, in its order, and the pairs not asked for must not be computed
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((16,), lambda i: B[i] * 2.0, name="C")
    k = te.reduce_axis((0, 16), name="k")
    D = te.compute((1,), lambda i: te.sum(C[k], axis=k), name="D")
    func = te.create_prim_func([A, D])
    _dependences.cache_clear()
    build_model.cache_clear()

    def touches_c(source, sink):
        return "C" in (source.block.name, sink.block.name)
    some = dependences_where(func, touches_c)
    assert _dependences.get(func) is None                      # the whole was not computed
    assert _summary(some) == _summary(d for d in model_and_dependences(func)[1]
                                      if touches_c(d.source, d.sink))
    assert [(d.kind, d.source.name, d.sink.name) for d in dependences_where(func, touches_c)] \
        == [(d.kind, d.source.name, d.sink.name) for d in some]
    assert any(d.sink.block.name == "D" for d in some) and \
        all(touches_c(d.source, d.sink) for d in some)

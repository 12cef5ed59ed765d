"""What isl cannot represent is over-approximated, never dropped (issue 9, items 1 and 20):
a non-affine binding leaves its iteration variable free in its domain and keys the instance by
the binding's affine arguments, so every run is still one instance at one time and the
dependences between runs survive; the model's notes say so."""

from __future__ import annotations

import islpy as isl
import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.polyhedral import build_model, check_parallel, dependences
from sched.script import T


@T.prim_func
def rotate_in_place(A: T.Buffer((8,), "float32"), m: T.int32):
    for i in range(8):
        with T.block("S"):
            vi = T.axis.spatial(8, (i * m) % 8)
            A[vi] = A[(vi + 7) % 8] + T.float32(1)


def reference(a, m):
    a = a.copy()
    for i in range(8):
        vi = (i * m) % 8
        a[vi] = a[(vi + 7) % 8] + 1
    return a


def test_a_non_affine_binding_keeps_a_single_valued_schedule_and_its_dependences():
    model = build_model(rotate_in_place)
    assert model.schedule.is_single_valued()
    assert any("binding of 'vi'" in note and "not affine" in note for note in model.notes)
    kinds = {d.kind for d in dependences(rotate_in_place)}
    assert {"flow", "anti", "output"} <= kinds
    assert all(not d.exact for d in dependences(rotate_in_place))


def test_parallel_over_a_non_affine_binding_is_refused():
    assert check_parallel(rotate_in_place, "S", "i") is not None
    sch = sched.Schedule(rotate_in_place)
    (i,) = sch.get_loops(sch.get_block("S"))
    with pytest.raises(ScheduleError, match="conservative"):
        sch.parallel(i)


def test_split_then_reorder_over_a_non_affine_binding_is_refused():
    sch = sched.Schedule(rotate_in_place)
    (i,) = sch.get_loops(sch.get_block("S"))
    outer, inner = sch.split(i, factors=[2, 4])
    with pytest.raises(ScheduleError, match="dependence"):
        sch.reorder(inner, outer)


def test_a_split_keeps_the_runs_and_the_numbers(rng):
    sch = sched.Schedule(rotate_in_place)
    (i,) = sch.get_loops(sch.get_block("S"))
    sch.split(i, factors=[2, 4])             # keeps the order: accepted
    kernel = sched.build(sch.func, target="c")
    a = rng.standard_normal(8).astype(np.float32)
    for m in (1, 3, 2):
        got = a.copy()
        kernel(got, m)
        np.testing.assert_allclose(got, reference(a, m), rtol=1e-6)


@T.prim_func
def spread_first_column(a: T.handle):
    n = T.int32()
    m = T.int32()
    A = T.match_buffer(a, (n, m), "float32")
    for i, j in T.grid(n, m):
        with T.block("S"):
            vi, vj = T.axis.remap("SS", [i, j])
            A[vi, vj] = A[vi, vj] + A[vi, 0]


def test_parallel_of_loops_fused_over_symbolic_extents_is_refused():
    # fusing makes the bindings vi = f // m, vj = f % m: not affine in isl
    sch = sched.Schedule(spread_first_column)
    i, j = sch.get_loops(sch.get_block("S"))
    fused = sch.fuse(i, j)
    model = build_model(sch.func)
    assert model.schedule.is_single_valued()
    assert any("not affine" in note for note in model.notes)
    assert dependences(sch.func)
    with pytest.raises(ScheduleError, match="carries"):
        sch.parallel(fused)


@T.prim_func
def non_affine_conditions(A: T.Buffer((8,), "float32"), m: T.int32):
    for i in range(8):
        with T.block("S"):
            vi = T.axis.spatial(8, i)
            T.where(i * m < 5)
            A[vi] = A[vi] + T.float32(1)
    for i in range(8):
        if i * m < 3:
            with T.block("T"):
                vi = T.axis.spatial(8, i)
                A[vi] = A[vi] * T.float32(2)
        else:
            with T.block("U"):
                vi = T.axis.spatial(8, i)
                A[vi] = A[(vi + 1) % 8] * T.float32(3)


def test_non_affine_predicates_and_if_conditions_may_hold():
    model = build_model(non_affine_conditions)
    assert model.schedule.is_single_valued()
    for name in ("S", "T", "U"):
        (statement,) = model.statements_of_block(name)
        every = isl.Set(f"[m] -> {{ {statement.name}[vi] : 0 <= vi < 8 }}")
        assert statement.domain.is_equal(every)          # every instance may run
        assert not statement.exact
    assert any("predicate of block 'S'" in note for note in model.notes)
    assert any("an if condition" in note for note in model.notes)
    pairs = {(d.source.block.name, d.sink.block.name) for d in dependences(non_affine_conditions)}
    assert {("S", "T"), ("S", "U"), ("T", "U")} <= pairs

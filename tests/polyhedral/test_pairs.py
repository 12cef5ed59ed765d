"""The pair-by-pair order (pairs.py): the canonical form of two time vectors keeps their order,
so `order_between` equals the lexicographic order of the statements' own (first-run)
schedules, and a step that only shifts nests keeps every pair's key."""

from __future__ import annotations

import islpy as isl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sched
from sched import compute as te
from sched import hand_schedules
from sched.polyhedral import build_model, clear_caches
from sched.polyhedral.dependences import first_runs
from sched.polyhedral.domain_boxes import box_by_count, box_by_points
from sched.polyhedral.pairs import (
    canonical_time_set,
    canonical_times,
    deciding_times,
    order_between,
    order_key,
    ordered_before,
)


@pytest.mark.parametrize("first, second, expected", [
    (["2", "i", "0", "1"], ["2", "i", "1", "1"], (["0", "i", "0", "0"], ["0", "i", "1", "0"])),
    (["2", "5", "j", "1"], ["2", "3", "k", "1"], (["0", "1", "j", "0"], ["0", "0", "k", "0"])),
    (["2", "i", "1"], ["2", "i", "1"], (["0", "i", "0"], ["0", "i", "0"])),
    (["2", "i", "1"], ["2", "j", "1"], (["2", "i", "1"], ["2", "j", "1"])),   # left as is
])
def test_canonical_times(first, second, expected):
    assert canonical_times(tuple(first), tuple(second)) == tuple(map(tuple, expected))


@pytest.mark.parametrize("times, expected", [
    # sequence positions 3 and 7 among the statements with equal entries before them: 0 and 1
    ([("3", "i", "0"), ("7", "j", "2")], [("0", "i", "0"), ("1", "j", "0")]),
    # ranks among the statements that share the prefix only
    ([("0", "i", "4"), ("0", "i", "6"), ("1", "j", "5")],
     [("0", "i", "0"), ("0", "i", "1"), ("1", "j", "0")]),
    # a loop against a constant under one prefix: left as is
    ([("0", "i", "1"), ("0", "2", "1")], [("0", "i", "1"), ("0", "2", "1")]),
])
def test_canonical_time_set(times, expected):
    assert canonical_time_set(tuple(times)) == tuple(expected)


def _first_difference(a: list[int], b: list[int]) -> tuple[int, int] | None:
    """The first position where two runs' times differ, and which comes first there."""
    for p, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return p, (-1 if x < y else 1)
    return None


@settings(max_examples=300, deadline=None, derandomize=True)
@given(data=st.data())
def test_canonical_time_set_keeps_where_and_how_two_runs_differ(data):
    """Random time vectors (constants and loop names) and random loop values: any two runs
    differ first at the same position, in the same direction, before and after."""
    width = data.draw(st.integers(1, 6))
    entry = st.one_of(st.integers(0, 4).map(str), st.sampled_from(["i", "j", "k"]))
    times = tuple(tuple(data.draw(entry) for _ in range(width))
                  for _ in range(data.draw(st.integers(1, 4))))
    canonical = canonical_time_set(times)

    def run(time, values):
        return [int(e) if e.isdigit() else values[e] for e in time]

    for _ in range(6):
        values = [{v: data.draw(st.integers(0, 2)) for v in "ijk"} for _ in times]
        for s, t in [(s, t) for s in range(len(times)) for t in range(len(times))]:
            assert _first_difference(run(times[s], values[s]), run(times[t], values[t])) == \
                _first_difference(run(canonical[s], values[s]), run(canonical[t], values[t]))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(data=st.data())
def test_a_domain_proven_abox_by_counting_is_the_domain(data):
    """Nest maps of two instance dimensions split in two (a partial last tile where the
    factors overshoot) and the outer loops fused (divisions in the domain), the first
    dimension strided or not (every other instance: not a box): where `box_by_count`
    answers, its box is the domain isl computes."""
    extents = [data.draw(st.integers(1, 9)) for _ in range(2)]
    inner = [data.draw(st.integers(1, 4)) for _ in range(2)]
    outer = [-(-n // f) + data.draw(st.integers(0, 1)) for n, f in zip(extents, inner)]
    fused, stride = outer[0] * outer[1], data.draw(st.integers(1, 2))
    text = (f"{{ S[i, j] -> [f, a, b] : 0 <= f < {fused} and 0 <= a < {inner[0]} and "
            f"0 <= b < {inner[1]} and i = (floor(f / {outer[1]}) * {inner[0]} + a) * "
            f"{stride} and j = (f mod {outer[1]}) * {inner[1]} + b and "
            f"i < {extents[0] * stride} and j < {extents[1]} }}")
    mapping = isl.Map(text)
    found = box_by_count(mapping, mapping.domain())
    exact = stride == 1 and all(o * f == n for o, f, n in zip(outer, inner, extents))
    if found is not None:
        assert found.is_equal(mapping.domain())
    if exact:                     # a full tiling: one to one onto a box of loops
        assert found is not None


@settings(max_examples=100, deadline=None, derandomize=True)
@given(data=st.data())
def test_a_domain_proven_abox_point_by_point_is_the_domain(data):
    """Nest maps that run instances several times (tiles of a fused loop overlapping by a
    halo: not one to one, so box_by_count does not apply), with a stride or a shift that
    leaves holes or not: where `box_by_points` answers, its box is the domain isl computes,
    and it answers wherever the domain is its bounding box."""
    tiles, tile, halo = (data.draw(st.integers(1, 5)), data.draw(st.integers(1, 4)),
                         data.draw(st.integers(0, 2)))
    stride, rows = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3))
    text = (f"{{ S[i, j] -> [t, f] : 0 <= t < {tiles} and 0 <= f < {rows * (tile + halo)} "
            f"and i = floor(f / {tile + halo}) and j = (t * {tile} + (f mod {tile + halo})) * "
            f"{stride} }}")
    mapping = isl.Map(text)
    domain = mapping.domain()
    found = box_by_points(domain)
    if found is not None:
        assert found.is_equal(domain)
        assert all(piece.dim(isl.dim_type.div) == 0 for piece in found.get_basic_sets())
    if stride == 1 or (tiles == 1 and tile + halo == 1):
        assert found is not None


def test_box_by_points_under_parameters():
    """A domain in a function's parameter space that does not involve them is proven as
    one without (isl enumerates no set with parameters); one that involves them is not."""
    free = isl.Map("[n] -> { S[i] -> [t, f] : n >= 1 and 0 <= t < 3 and 0 <= f < 3 and "
                   "i = 2t + (f mod 3) }").domain()
    found = box_by_points(free)
    assert found is not None and found.is_equal(free)
    bound = isl.Map("[n] -> { S[i] -> [t, f] : 0 <= t < 3 and 0 <= f < 3 and "
                    "i = 2t + (f mod 3) and i < n }").domain()
    assert box_by_points(bound) is None


@pytest.mark.parametrize("first, second, expected", [
    # equal constants never decide; the first differing constant does, nothing after it
    (("0", "i", "0", "j", "0"), ("0", "i", "1", "k", "0"), (("i", "0"), ("i", "1"))),
    (("0", "i", "j", "1"), ("0", "i", "j", "1"), (("i", "j"), ("i", "j"))),
    # a loop against a constant may decide: kept
    (("0", "i", "0"), ("0", "2", "j"), (("i", "0"), ("2", "j"))),
])
def test_deciding_times(first, second, expected):
    assert deciding_times(first, second) == expected


def test_reorder_keeps_the_nest_and_domain_texts():
    """The nest map and the domain are written canonically (loops and constraints sorted), so
    a reorder, which keeps a statement's loops and constraints, keeps both texts."""
    func = te.create_prim_func(_matmul())
    sch = sched.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    before = build_model(sch.func).statements["S_C"]
    sch.reorder(k, i, j)
    after = build_model(sch.func).statements["S_C"]
    assert before.time != after.time
    assert before.nest_text() == after.nest_text()
    assert before.domain_texts == after.domain_texts
    assert before.schedule.is_equal(after.schedule) is False


def _matmul():
    a = te.placeholder((16, 8), name="A")
    b = te.placeholder((8, 16), name="B")
    k = te.reduce_axis((0, 8), name="k")
    c = te.compute((16, 16), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return [a, b, c]


def _absolute_order(source, sink):
    def first(statement):
        schedule = statement.schedule
        return schedule if schedule.is_single_valued() else first_runs(schedule)
    return first(source).lex_lt_map(first(sink))


def _chain(n):
    x = te.placeholder((64,), name="A")
    inputs = [x]
    for i in range(n):
        x = _plus_one(x, f"B{i}")
    sch = sched.Schedule(te.create_prim_func([*inputs, x]))
    loop = sch.get_loops(sch.get_block(f"B{n - 1}"))[0]
    sch.compute_at(sch.get_block(f"B{n - 2}"), loop)
    return sch.func


def _plus_one(x, name):
    return te.compute((64,), lambda j: x[j] + 1.0, name=name)


@pytest.mark.parametrize("func", [
    lambda: hand_schedules.cpu_matmul(32, 32, 16).func,
    lambda: hand_schedules.gpu_matmul(64, 64, 32, block_tile=(32, 32), thread_tile=(4, 4),
                                      k_tile=8).func,      # shared fetches run once per thread
    lambda: _chain(5),
], ids=["cpu_matmul", "gpu_matmul", "chain"])
def test_order_between_equals_the_order_of_the_own_schedules(func):
    clear_caches()
    model = build_model(func())
    statements = list(model.statements.values())
    for source in statements:
        for sink in statements:
            assert order_between(source, sink).is_equal(_absolute_order(source, sink)), \
                (source.name, sink.name)


def test_shifting_a_nest_keeps_the_keys_of_the_pairs_after_it():
    """compute_at of B0 into B1's loop removes a nest before B3 and B4: their absolute times
    change (a position in the root sequence), the key of their pair does not. (Keys change when
    the deepest statement gets deeper: every time vector is padded to its length.)"""
    x = te.placeholder((64,), name="A")
    inputs = [x]
    for i in range(5):
        x = _plus_one(x, f"B{i}")
    sch = sched.Schedule(te.create_prim_func([*inputs, x]))
    sch.compute_at(sch.get_block("B3"), sch.get_loops(sch.get_block("B4"))[0])
    before = build_model(sch.func).statements
    sch.compute_at(sch.get_block("B0"), sch.get_loops(sch.get_block("B1"))[0])
    after = build_model(sch.func).statements
    b3, b4 = "S_B3", "S_B4"
    assert before[b3].time != after[b3].time
    assert order_key(before[b3], before[b4]) == order_key(after[b3], after[b4])


def test_ordered_before_equals_lex_order_of_the_absolute_schedules():
    """The order of two schedules asked on their deciding positions (as decompose_reduction's
    check does) is isl's lexicographic order of the whole time vectors."""
    clear_caches()
    model = build_model(hand_schedules.cpu_matmul(32, 32, 16).func)
    statements = list(model.statements.values())
    for source in statements:
        for sink in statements:
            expected = source.schedule.lex_lt_map(sink.schedule)
            got = ordered_before(source.schedule, tuple(source.time), sink.schedule,
                                 tuple(sink.time))
            assert got.is_equal(expected), (source.name, sink.name)

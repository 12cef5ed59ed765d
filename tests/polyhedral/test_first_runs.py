"""The first run of each instance, computed without isl's lexmin (which loses instances of
some quasi-affine schedules: then their dependences vanished and decompose_reduction hoisted
inits above updates that read other elements; found by the program fuzzer)."""

import islpy as isl
import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.polyhedral.dependences import first_runs, last_runs

# the schedule of an init after `fuse(k, i)` with the binding vx = k * 5 % 6
FUSED_INIT = isl.Map("{ I[vx] -> [f] : (-floor(f / 5)) mod 6 = vx and f mod 5 = 0 and "
                     "0 <= vx <= 5 and 0 <= f <= 29 }")


def test_first_runs_keeps_every_instance_of_a_quasi_affine_schedule():
    assert first_runs(FUSED_INIT).is_equal(FUSED_INIT)
    assert last_runs(FUSED_INIT).is_equal(FUSED_INIT)


def test_first_and_last_runs_of_an_instance_that_runs_twice():
    twice = isl.Map("{ S[v] -> [t] : 0 <= t < 8 and v = t mod 4 }")
    assert first_runs(twice).is_equal(isl.Map("{ S[v] -> [v] : 0 <= v < 4 }"))
    assert last_runs(twice).is_equal(isl.Map("{ S[v] -> [v + 4] : 0 <= v < 4 }"))


# found by the fuzzer: B runs each instance twice (so the schedule is not single-valued and
# its first runs are taken); C.1's update reads another element of its output, initialized
# later in the original order; after fuse, isl's lexmin kept only C.1's init of element 0
PROGRAM = """
@T.prim_func
def fuzz(a0: T.Buffer((6,), "float32"), fmaxf: T.Buffer((6, 3), "float32"),
         Idx: T.Buffer((16,), "int32"), exp: T.Buffer((6,), "float32")):
    with T.block("root"):
        v0 = T.alloc_buffer((6,), "float32")
        for t, x in T.grid(6 * 2, 4):
            with T.block("B"):
                vi = T.axis.spatial(6, t % 6)
                vr = T.axis.reduce(4, x)
                T.reads(v0[vi], a0[vi + 1])
                T.writes(v0[vi])
                with T.init():
                    v0[vi] = T.float32(-100.0)
                v0[vi] = T.max(v0[vi], T.if_then_else(vi + 1 < 6, a0[vi + 1], T.float32(0.0)))
        for k, i in T.grid(6, 5):
            with T.block("C.1"):
                vx = T.axis.spatial(6, k * 5 % 6)
                a0_ = T.axis.reduce(5, i)
                T.reads(exp[0:6], a0[vx])
                T.writes(exp[vx])
                with T.init():
                    exp[vx] = T.float32(0.0)
                exp[vx] = exp[vx] + (exp[(vx + 1) % 6] + a0[vx])
"""


def test_decompose_reduction_keeps_the_init_after_an_earlier_read_of_its_element():
    func = sched.parse(PROGRAM)
    sch = sched.Schedule(func)
    sch.fuse(*sch.get_loops(sch.get_block("C.1")))
    with pytest.raises(ScheduleError, match="decompose_reduction: the new order runs C.1"):
        sch.decompose_reduction(sch.get_block("C.1"), sch.get_loops(sch.get_block("C.1"))[0])
    rng = np.random.default_rng(0)
    args = [rng.integers(-3, 4, 6).astype("float32"), np.zeros((6, 3), "float32"),
            np.zeros(16, "int32"), rng.integers(-3, 4, 6).astype("float32")]
    expected, got = [a.copy() for a in args], [a.copy() for a in args]
    sched.interpret(func, *expected)
    sched.build(sch.func, target="c")(*got)
    np.testing.assert_array_equal(got[3], expected[3])


@pytest.mark.parametrize("schedule", [
    FUSED_INIT,
    isl.Map("{ S[v] -> [t] : 0 <= t < 8 and v = t mod 4 }"),
    # a cooperative fetch split by 3: each instance runs once per warp (o1), at a quasi-affine
    # position of the fused loop
    isl.Map("{ S[v] -> [o1, o2] : 0 <= v < 96 and 0 <= o1 < 2 and 0 <= o2 < 96 and "
            "(v + 16 * o1 - o2) mod 48 = 0 }"),
])
def test_first_runs_through_lexmin_are_checked_against_the_schedule(schedule, monkeypatch):
    """With the subtraction's budget spent at once, first and last runs come from isl's
    lexmin/lexmax, used only when they pass the check (every instance, one run each, none
    earlier): on FUSED_INIT, where lexmin loses instances, the subtraction answers."""
    import importlib

    dependences = importlib.import_module("sched.polyhedral.dependences")   # not the function
    exact_first, exact_last = first_runs(schedule), last_runs(schedule)
    monkeypatch.setattr(dependences, "SUBTRACT_OPERATIONS", 1)
    assert first_runs(schedule).is_equal(exact_first)
    assert last_runs(schedule).is_equal(exact_last)


def test_the_lexmin_check_refuses_a_map_that_loses_an_instance_or_is_not_first():
    from sched.polyhedral.dependences import _is_extreme

    twice = isl.Map("{ S[v] -> [t] : 0 <= t < 8 and v = t mod 4 }")
    times = isl.Set("{ [t] }")
    earlier = times.lex_lt_set(times).reverse()
    assert _is_extreme(isl.Map("{ S[v] -> [v] : 0 <= v < 4 }"), twice, earlier)
    assert not _is_extreme(isl.Map("{ S[v] -> [v] : 0 <= v < 3 }"), twice, earlier)
    assert not _is_extreme(isl.Map("{ S[v] -> [v + 4] : 0 <= v < 4 }"), twice, earlier)


def test_a_domain_loses_its_existentials_only_where_that_is_the_same_set():
    from sched.polyhedral.domain_boxes import exact_domain

    covered = isl.Map("{ S[v] -> [a, b] : v = 4a + b and 0 <= a < 3 and 0 <= b < 4 }")
    assert str(exact_domain(covered)) == "{ S[v] : 0 <= v <= 11 }"
    strided = isl.Map("{ S[v] -> [a] : v = 3a and 0 <= a < 4 }")
    assert exact_domain(strided).is_equal(isl.Set("{ S[v] : v mod 3 = 0 and 0 <= v <= 9 }"))
    assert not exact_domain(strided).is_equal(isl.Set("{ S[v] : 0 <= v <= 9 }"))
    holes = isl.Map("{ S[v] -> [a, b] : v = 8a + b and 0 <= a < 3 and 0 <= b < 4 }")
    assert exact_domain(holes).is_equal(holes.domain())
    assert not exact_domain(holes).is_equal(isl.Set("{ S[v] : 0 <= v <= 19 }"))


def first_runs_by_points(nest: isl.Map, loops: tuple[str, ...], time: tuple[str, ...]
                         ) -> isl.Map:
    """The oracle: every point of a parameter-free nest map (instance -> loop values)
    enumerated, each instance's runs timed in Python and the least kept."""
    found: dict[tuple, tuple] = {}

    def visit(point: isl.Point) -> None:
        values = [point.get_coordinate_val(isl.dim_type.set, p).to_python()
                  for p in range(nest.dim(isl.dim_type.in_) + len(loops))]
        instance, loop_values = tuple(values[:-len(loops)]), dict(zip(loops, values[-len(loops):]))
        stamp = tuple(int(t) if t.lstrip("-").isdigit() else loop_values[t] for t in time)
        found[instance] = min(found.get(instance, stamp), stamp)
    nest.wrap().foreach_point(visit)
    name = nest.get_tuple_name(isl.dim_type.in_)
    expected = isl.Map(f"{{ {name}[{', '.join(f'i{p}' for p in range(nest.dim(isl.dim_type.in_)))}]"
                       f" -> [{', '.join(f't{p}' for p in range(len(time)))}] : false }}")
    for instance, stamp in found.items():
        expected = expected.union(isl.Map(
            f"{{ {name}[{', '.join(map(str, instance))}] -> [{', '.join(map(str, stamp))}] }}"))
    return expected


# (nest text, its loops, a time vector): the nest's loops in order, as Statement.nest_text
# writes them
NESTS = [
    # a cooperative fetch under two thread loops it does not use (tz, tx), its fused loop
    # split by the thread extents (the shape of the default GPU schedule of a conv2d)
    ("{ S[v0, v1] -> [f0, f1, f2, tz, tx, r] : 0 <= f0 < 2 and 0 <= f1 < 4 and 0 <= f2 < 3 "
     "and 12 * f0 + 3 * f1 + f2 < 21 and 0 <= tz < 4 and 0 <= tx < 3 and 0 <= r < 2 and "
     "v0 = floor((12 * f0 + 3 * f1 + f2) / 7) and v1 = 2 * r + ((12 * f0 + 3 * f1 + f2) mod 7) }",
     ("f0", "f1", "f2", "tz", "tx", "r"), ("tz", "tx", "r", "0")),
    # the same with the fused loops in the time, and a free loop with a lower bound of 2
    ("{ S[v] -> [a, b, t] : 0 <= a < 3 and 0 <= b < 2 and 2 <= t < 5 and v = 2 * a + b }",
     ("a", "b", "t"), ("t", "a", "1", "b")),
    # t is not free: a predicate ties it to the instance (first run at t = v)
    ("{ S[v] -> [a, t] : 0 <= a < 4 and 0 <= t < 4 and v = a and t >= a }",
     ("a", "t"), ("t", "a")),
    # free in one piece only
    ("{ S[v] -> [a, t] : 0 <= a < 3 and 1 <= t < 3 and v = a; "
     "S[v] -> [a, t] : 3 <= a < 5 and 0 <= t < 3 and v = a and t <= a - 3 }",
     ("a", "t"), ("t", "a")),
    # a division of the free-looking loop makes it used
    ("{ S[v] -> [a, t] : 0 <= a < 2 and 0 <= t < 6 and v = a + floor(t / 2) }",
     ("a", "t"), ("t", "a")),
]


@pytest.mark.parametrize("nest_text, loops, time", NESTS)
def test_first_run_schedule_matches_the_runs_enumerated(nest_text, loops, time):
    from sched.polyhedral.pairs import first_run_schedule, free_loops_at_lower_bounds

    nest = isl.Map(nest_text)
    expected = first_runs_by_points(nest, loops, time)
    got = first_run_schedule(((nest_text, loops), time), "[] -> { : }")
    assert got.is_equal(expected), f"{got} != {expected}"
    # the restricted nest has the same instances, and fixes only loops no constraint ties
    fixed = free_loops_at_lower_bounds(nest)
    assert fixed.domain().is_equal(nest.domain()) and fixed.is_subset(nest)


def test_free_loops_are_the_unconstrained_ones():
    from sched.polyhedral.pairs import free_loops_at_lower_bounds

    nest = isl.Map("[n] -> { S[v] -> [a, t, u] : 0 <= a < n and 1 <= t < n and 0 <= u < 4 "
                   "and v = a + u }")
    assert free_loops_at_lower_bounds(nest).is_equal(isl.Map(
        "[n] -> { S[v] -> [a, 1, u] : 0 <= a < n and n >= 2 and 0 <= u < 4 and v = a + u }"))
    tied = isl.Map("{ S[v] -> [a, t] : 0 <= a < 4 and 0 <= t < 4 and v = a and t >= a }")
    assert free_loops_at_lower_bounds(tied) is tied
    for nest_text, _, _ in NESTS[:2]:
        nest = isl.Map(nest_text)
        assert free_loops_at_lower_bounds(nest) is not nest


def test_a_domain_proven_a_box_point_by_point_has_no_existentials():
    """A cooperative fetch run once per thread of loops it does not use (no proof by
    counting: not one to one) is proven a box point by point; the box came back with the
    domain's existentials (isl kept them in the empty parameter context intersected with
    it), and every question on the domain stayed slow (0.4-2.4 s a subset test in
    compact_buffers, for the default GPU schedule of a small conv2d)."""
    from sched.polyhedral import build_model
    from tests.polyhedral.test_flow_crossing import conv2d_fetched_by_odd_thread_extents

    model = build_model(conv2d_fetched_by_odd_thread_extents().func)
    domain = model.statements["S_W_shared"].domain
    assert [piece.dim(isl.dim_type.div) for piece in domain.get_basic_sets()] == [0]
    assert domain.is_equal(isl.Set("{ S_W_shared[v0, v1, v2, v3] : 0 <= v0 < 32 and "
                                   "0 <= v1 < 4 and 0 <= v2 < 3 and 0 <= v3 < 3 }"))

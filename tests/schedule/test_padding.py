"""decompose_padding and can_decompose_padding (sched/schedule/padding.py): the pad value
filled by a block of its own, the inside copied without the condition; numbers unchanged."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.schedule.trace import Trace
from sched.script import T


def padded_box_sum(n=8):
    """P: A padded by one on each side; S: the 3x3 box sum over P."""
    A = te.placeholder((n, n), name="A")
    P = te.compute((n + 2, n + 2), lambda h, w: te.if_then_else(
        te.all(h >= 1, h < n + 1, w >= 1, w < n + 1), A[h - 1, w - 1], 0.0), name="P")
    ry = te.reduce_axis((0, 3), name="ry")
    rx = te.reduce_axis((0, 3), name="rx")
    S = te.compute((n, n), lambda i, j: te.sum(P[i + ry, j + rx], axis=[ry, rx]), name="S")
    return te.create_prim_func([A, S])


def expected(a):
    p = np.pad(a, 1)
    n = a.shape[0]
    return sum(p[y:y + n, x:x + n] for y in range(3) for x in range(3))


def run(func, n=8):
    a = np.random.default_rng(0).random((n, n), dtype=np.float32)
    s = np.zeros((n, n), np.float32)
    sched.build(func, target="c")(a, s)
    np.testing.assert_allclose(s, expected(a), rtol=1e-5)


def test_decompose_at_the_outer_loop_shrinks_the_copy_to_the_inside():
    func = padded_box_sum()
    sch = sched.Schedule(func)
    block = sch.get_block("P")
    h, w = sch.get_loops(block)
    assert sch.can_decompose_padding(block, h)
    fill = sch.decompose_padding(block, h)
    assert fill.name == "P_pad_const"
    script = sch.func.script()
    assert "for h_1, w_1 in T.grid(10, 10):" in script       # the fill: everywhere
    assert "P[v_h, v_w] = T.float32(0.0)" in script
    assert "for h, w in T.grid(8, 8):" in script             # the copy: the inside only
    assert "P[v_h, v_w] = A[v_h - 1, v_w - 1]" in script
    assert "if_then_else" not in script
    assert sched.parse(script) == sch.func
    assert sch.trace.apply(func).func == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func
    run(sch.func)
    sch.parallel(h)                                          # the copy's loops stay usable
    run(sch.func)


def test_decompose_at_an_inner_loop_guards_by_the_outer_condition():
    func = padded_box_sum()
    sch = sched.Schedule(func)
    block = sch.get_block("P")
    h, w = sch.get_loops(block)
    sch.decompose_padding(block, w)
    script = sch.func.script()
    # under each h: fill the row, then copy its inside (h's part of the condition stays)
    assert "for w_1 in range(10):" in script
    assert "T.where(" in script
    assert sch.trace.apply(func).func == sch.func
    a = np.random.default_rng(0).random((8, 8), dtype=np.float32)
    s = np.zeros((8, 8), np.float32)
    sched.interpret(sch.func, a, s)                  # the reference interpreter
    np.testing.assert_allclose(s, expected(a), rtol=1e-5)


def test_decompose_at_an_inner_loop_on_the_c_target():
    # gcc 12.2 at -O3 -march=native miscompiled this row loop (a fill, then a guarded copy)
    # through loop if-conversion, dropping rows: the C target compiles with
    # -fno-tree-loop-if-convert (sched/c/build.py)
    sch = sched.Schedule(padded_box_sum())
    block = sch.get_block("P")
    sch.decompose_padding(block, sch.get_loops(block)[1])
    run(sch.func)


def test_decompose_a_padding_computed_at_its_consumer():
    func = padded_box_sum()
    sch = sched.Schedule(func)
    i = sch.get_loops(sch.get_block("S"))[0]
    sch.compute_at(sch.get_block("P"), i)                   # three rows of P per row of S
    block = sch.get_block("P")
    ax0 = sch.get_loops(block)[1]
    fill = sch.decompose_padding(block, ax0)
    assert fill.name == "P_pad_const"
    assert sch.trace.apply(func).func == sch.func
    run(sch.func)


def test_a_block_that_is_no_padding_is_refused():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    block = sch.get_block("B")
    (i,) = sch.get_loops(block)
    assert not sch.can_decompose_padding(block, i)
    with pytest.raises(ScheduleError, match=r"decompose_padding: block 'B' does not store a "
                                            r"T.if_then_else; a padding block is spatial"):
        sch.decompose_padding(block, i)


def test_a_pad_value_read_from_a_buffer_is_refused():
    A = te.placeholder((8,), name="A")
    F = te.placeholder((10,), name="F")
    P = te.compute((10,), lambda i: te.if_then_else(te.all(i >= 1, i < 9), A[i - 1], F[i]),
                   name="P")
    sch = sched.Schedule(te.create_prim_func([A, F, P]))
    block = sch.get_block("P")
    # the fill block would have to read F: it is no constant fill
    with pytest.raises(ScheduleError, match=r"the pad value F\[v_i\] of block 'P' reads a "
                                            r"buffer"):
        sch.decompose_padding(block, sch.get_loops(block)[0])


def test_a_loop_holding_more_than_the_nest_is_refused():
    func = padded_box_sum()
    sch = sched.Schedule(func)
    i = sch.get_loops(sch.get_block("S"))[0]
    sch.compute_at(sch.get_block("P"), i)
    # loop i also holds S: filling P before all of i would not be the same split
    with pytest.raises(ScheduleError, match=r"loop 'i' holds more than the nest of block 'P'"):
        sch.decompose_padding(sch.get_block("P"), i)


def test_decompose_padding_of_a_triangular_nest():
    # the fill nest's copy of range(i + 1) named the old i: a raw isl error (audit helper-154)
    @T.prim_func
    def tri(A: T.Buffer((8, 8), "float32"), P: T.Buffer((10, 10), "float32")):
        for i in range(10):
            for j in range(i + 1):
                with T.block("P"):
                    vi = T.axis.spatial(10, i)
                    vj = T.axis.spatial(10, j)
                    P[vi, vj] = T.if_then_else(1 <= vi and vi < 9 and 1 <= vj and vj < 9,
                                               A[vi - 1, vj - 1], T.float32(-1))

    sch = sched.Schedule(tri)
    sch.decompose_padding(sch.get_block("P"), sch.get_loops(sch.get_block("P"))[0])
    a = np.random.default_rng(0).random((8, 8), dtype=np.float32)
    p = np.zeros((10, 10), np.float32)
    sched.build(sch.mod, target="c")(a, p)
    expected = np.full((10, 10), -1, np.float32)
    expected[1:9, 1:9] = a
    np.testing.assert_array_equal(np.tril(p), np.tril(expected))


def test_a_padding_condition_whose_int32_arithmetic_wraps_is_not_moved_into_loop_bounds():
    # in the stored value vi * 2**30 < 1 is data, true at vi = 2, 3, 4 (wrapped); the step
    # shrank the inside loop to vi = 0 (audit helper-155). A symbolic size's v < n + 1 wraps
    # at n = 2**31 - 1, a legal size, where the unscheduled kernel pads everything and the
    # moved condition nothing (helper-157): refused too
    @T.prim_func
    def wrapping(A: T.Buffer((8,), "float32"), P: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("P"):
                vi = T.axis.spatial(8, i)
                P[vi] = T.if_then_else(vi * 1073741824 < 1, A[vi], T.float32(0))

    sch = sched.Schedule(wrapping)
    with pytest.raises(ScheduleError, match="computes int32 arithmetic that may wrap"):
        sch.decompose_padding(sch.get_block("P"), sch.get_loops(sch.get_block("P"))[0])
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    P = te.compute((n + 2,), lambda i: te.if_then_else(te.all(i >= 1, i < n + 1), A[i - 1], 0.0),
                   name="P")
    sch = sched.Schedule(te.create_prim_func([A, P]))
    with pytest.raises(ScheduleError, match="computes int32 arithmetic that may wrap .* or "
                                            "declare n int64"):
        sch.decompose_padding(sch.get_block("P"), sch.get_loops(sch.get_block("P"))[0])
    # the advice: an int64 size, whose n + 1 does not wrap (helper-178 was told to pad with
    # constant bounds, which a symbolic size cannot)
    n = te.var("n", "int64")
    A = te.placeholder((n,), name="A")
    P = te.compute((n + 2,), lambda i: te.if_then_else(te.all(i >= 1, i < n + 1), A[i - 1], 0.0),
                   name="P")
    sch = sched.Schedule(te.create_prim_func([A, P]))
    sch.decompose_padding(sch.get_block("P"), sch.get_loops(sch.get_block("P"))[0])
    a = np.random.default_rng(0).standard_normal(7).astype(np.float32)
    p = np.full(9, -1, np.float32)
    sched.build(sch.func, target="c")(a, p)
    np.testing.assert_array_equal(p, np.pad(a, 1))


def test_a_padding_condition_of_int64_arithmetic_past_2_63_keeps_its_wrap_as_a_predicate():
    # i * 2**62 wraps at i % 4 in (2, 3), where the stored value pads; moved into the
    # predicate, the lowering read it exactly and dropped it: nothing padded (helper-161)
    @T.prim_func
    def wrapping(A: T.Buffer((12,), "int32"), P: T.Buffer((12,), "int32")):
        for i in range(12):
            with T.block("P"):
                vi = T.axis.spatial(12, i)
                P[vi] = T.if_then_else(T.Cast("int64", vi) * T.int64(2**62) >= T.int64(0),
                                       A[vi], -7)

    sch = sched.Schedule(wrapping)
    sch.decompose_padding(sch.get_block("P"), sch.get_loops(sch.get_block("P"))[0])
    a = np.arange(12, dtype=np.int32) * 5 + 3
    p = np.zeros(12, np.int32)
    sched.build(sch.mod, target="c")(a, p)
    wrapped = (np.arange(12, dtype=object) * 2**62 + 2**63) % 2**64 - 2**63
    np.testing.assert_array_equal(p, np.where(wrapped >= 0, a, -7))

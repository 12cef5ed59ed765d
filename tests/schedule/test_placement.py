"""Placement primitives: compute_at, reverse_compute_at, compute_inline, reverse_compute_inline:
the IR after each, trace round-trips, numbers on the C target, and every refusal."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.schedule import Trace
from sched.script import T
from tests.conftest import assert_close
from tests.schedule.conftest import run_c


def chain(n=10):
    """B = A * 2, C = B + 1: a producer and its consumer."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    return te.create_prim_func([A, te.compute((n,), lambda i: B[i] + 1.0, name="C")])


def softmax(rows=16, cols=10):
    X = te.placeholder((rows, cols), name="X")
    return te.create_prim_func([X, te.ops.softmax(X)])


def softmax_reference(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def assert_replays(sch, func):
    """The trace replays, also from JSON, and the result prints as a script that reads back."""
    assert sched.parse(sch.func.script()) == sch.func
    assert sch.trace.apply(func).func == sch.func
    restored = Trace.from_json(sch.trace.to_json())
    assert restored == sch.trace and restored.apply(func).func == sch.func


# -- compute_at ------------------------------------------------------------------------------

CHAIN_AT_NON_DIVIDING_SPLIT = """
@T.prim_func
def main(A: T.Buffer((10,), "float32"), C: T.Buffer((10,), "float32")):
    with T.block("root"):
        B = T.alloc_buffer((10,), "float32")
        for i_1_0 in range(3):
            for ax0 in range(4):
                with T.block("B"):
                    v_i = T.axis.spatial(10, i_1_0 * 4 + ax0)
                    T.where(i_1_0 * 4 + ax0 < 10)
                    T.reads(A[v_i])
                    T.writes(B[v_i])
                    B[v_i] = A[v_i] * T.float32(2.0)
            for i_1_1 in range(4):
                with T.block("C"):
                    v_i = T.axis.spatial(10, i_1_0 * 4 + i_1_1)
                    T.where(i_1_0 * 4 + i_1_1 < 10)
                    T.reads(B[v_i])
                    T.writes(C[v_i])
                    C[v_i] = B[v_i] + T.float32(1.0)
"""


def test_compute_at_non_dividing_split_guards_the_producer(rng):
    func = chain()
    sch = sched.Schedule(func)
    io, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, 4])
    sch.compute_at(sch.get_block("B"), io)
    assert sch.func == sched.parse(CHAIN_AT_NON_DIVIDING_SPLIT)
    assert_replays(sch, func)
    a = rng.standard_normal(10, np.float32)
    assert_close(run_c(sch.func, a, np.zeros(10, np.float32))[1], a * 2 + 1)


def test_compute_at_symbolic_extent_keeps_tiles_in_range(rng):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    func = te.create_prim_func([A, te.compute((n,), lambda i: B[i] + 1.0, name="C")])
    sch = sched.Schedule(func)
    io, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, 4])
    sch.compute_at(sch.get_block("B"), io)
    assert "T.where(i_1_0 * 4 + ax0 < n)" in sch.func.script()
    for size in (1, 8, 13):
        a = rng.standard_normal(size, np.float32)
        assert_close(run_c(sch.func, a, np.zeros(size, np.float32))[1], a * 2 + 1)


def test_compute_at_stencil_recomputes_the_halo(rng):
    A = te.placeholder((12,), name="A")
    B = te.compute((12,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((10,), lambda i: B[i] + B[i + 1] + B[i + 2], name="C")
    func = te.create_prim_func([A, C])
    for inner in (False, True):
        sch = sched.Schedule(func)
        io, ii = sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, 4])
        sch.compute_at(sch.get_block("B"), ii if inner else io)
        text = sch.func.script()
        # per tile 4 + 2 elements; under ii, 3 from each i; the last tile stops at 12
        assert f"for ax0 in range({3 if inner else 6}):" in text
        assert " + ax0 < 12)" in text
        a = rng.standard_normal(12, np.float32)
        b = a * 2
        assert_close(run_c(sch.func, a, np.zeros(10, np.float32))[1], b[:10] + b[1:11] + b[2:])


def test_compute_at_preserve_unit_loops_keeps_the_unit_loop():
    sch = sched.Schedule(chain(8))
    _, ii = sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, 4])
    sch.compute_at(sch.get_block("B"), ii, preserve_unit_loops=True)
    assert "for ax0 in range(1):" in sch.func.script()
    assert "sch.compute_at(b4, l3, preserve_unit_loops=True)" in str(sch.trace)
    plain = sched.Schedule(chain(8))
    _, ii = plain.split(plain.get_loops(plain.get_block("C"))[0], factors=[None, 4])
    plain.compute_at(plain.get_block("B"), ii)
    assert "ax0" not in plain.func.script()
    assert "T.axis.spatial(8, i_1_0 * 4 + i_1_1)" in plain.func.script()


def conv2d(padding=1):
    data = te.placeholder((1, 3, 9, 9), name="data")
    weight = te.placeholder((4, 3, 3, 3), name="weight")
    return te.create_prim_func([data, weight,
                                te.ops.conv2d_nchw(data, weight, padding=padding)])


def conv2d_reference(d, w):
    padded = np.pad(d, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    return np.einsum("ncpqrs,kcrs->nkpq", windows, w)


def conv2d_inputs(rng):
    return (rng.standard_normal((1, 3, 9, 9), np.float32),
            rng.standard_normal((4, 3, 3, 3), np.float32), np.zeros((1, 4, 9, 9), np.float32))


def test_compute_at_conv_padding_at_the_row_loop(rng):
    func = conv2d()
    sch = sched.Schedule(func)
    _, _, p, *_ = sch.get_loops(sch.get_block("conv2d"))
    sch.compute_at(sch.get_block("conv2d_pad"), p)
    text = sch.func.script()
    assert "for ax0, ax1, ax2 in T.grid(3, 3, 11):" in text      # three padded rows per row
    assert "v_y = T.axis.spatial(11, p + ax1)" in text and "T.where" not in text
    assert_replays(sch, func)
    d, w, out = conv2d_inputs(rng)
    assert_close(run_c(sch.func, d, w, out)[2], conv2d_reference(d, w))


def test_softmax_exp_computed_at_the_row_loop_of_the_sum(rng):
    func = softmax()
    sch = sched.Schedule(func)
    row = sch.get_loops(sch.get_block("softmax_sum"))[0]
    sch.compute_at(sch.get_block("softmax_exp"), row)
    assert "v_i, v_j = T.axis.remap(\"SS\", [i_2, ax0])" in sch.func.script()
    assert_replays(sch, func)
    x = rng.standard_normal((16, 10), np.float32)
    assert_close(run_c(sch.func, x, np.zeros_like(x))[1], softmax_reference(x))


# -- reverse_compute_at ----------------------------------------------------------------------

CONSUMER_AFTER_PRODUCER_TILES = """
@T.prim_func
def main(A: T.Buffer((10,), "float32"), C: T.Buffer((10,), "float32")):
    with T.block("root"):
        B = T.alloc_buffer((10,), "float32")
        for i_0 in range(3):
            for i_1_1 in range(4):  # i_1 is the loop of C
                with T.block("B"):
                    v_i = T.axis.spatial(10, i_0 * 4 + i_1_1)
                    T.where(i_0 * 4 + i_1_1 < 10)
                    T.reads(A[v_i])
                    T.writes(B[v_i])
                    B[v_i] = A[v_i] * T.float32(2.0)
            for ax0 in range(4):
                with T.block("C"):
                    v_i = T.axis.spatial(10, i_0 * 4 + ax0)
                    T.where(i_0 * 4 + ax0 < 10)
                    T.reads(B[v_i])
                    T.writes(C[v_i])
                    C[v_i] = B[v_i] + T.float32(1.0)
"""


def test_reverse_compute_at_covers_what_the_producer_wrote(rng):
    func = chain()
    sch = sched.Schedule(func)
    (i,) = sch.get_loops(sch.get_block("B"))
    io, _ = sch.split(i, factors=[None, 4])
    sch.reverse_compute_at(sch.get_block("C"), io)
    assert sch.func == sched.parse(CONSUMER_AFTER_PRODUCER_TILES)
    assert_replays(sch, func)
    a = rng.standard_normal(10, np.float32)
    assert_close(run_c(sch.func, a, np.zeros(10, np.float32))[1], a * 2 + 1)


def test_reverse_compute_at_fuses_softmax_into_one_row_loop(rng):
    func = softmax()
    sch = sched.Schedule(func)
    row = sch.get_loops(sch.get_block("softmax_max"))[0]
    for name in ("softmax_exp", "softmax_sum", "softmax"):
        sch.reverse_compute_at(sch.get_block(name), row)
    text = sch.func.script()
    assert text.count("for ") == 5 and "for i in range(16):" in text
    assert_replays(sch, func)
    x = rng.standard_normal((16, 10), np.float32)
    assert_close(run_c(sch.func, x, np.zeros_like(x))[1], softmax_reference(x))


# -- compute_inline and reverse_compute_inline -----------------------------------------------

ELEMENTWISE_CHAIN_INLINED = """
@T.prim_func
def main(A: T.Buffer((8, 4), "float32"), D: T.Buffer((8, 4), "float32")):
    with T.block("root"):
        for i_2, j_2 in T.grid(8, 4):
            with T.block("D"):
                v_i, v_j = T.axis.remap("SS", [i_2, j_2])
                T.reads(A[v_i, v_j])
                T.writes(D[v_i, v_j])
                D[v_i, v_j] = T.exp(A[v_i, v_j] * T.float32(2.0) + T.float32(1.0)) - T.float32(3.0)
"""


def test_compute_inline_elementwise_chain(rng):
    A = te.placeholder((8, 4), name="A")
    B = te.compute((8, 4), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((8, 4), lambda i, j: te.exp(B[i, j] + 1.0), name="C")
    func = te.create_prim_func([A, te.compute((8, 4), lambda i, j: C[i, j] - 3.0, name="D")])
    sch = sched.Schedule(func)
    sch.compute_inline(sch.get_block("B"))
    sch.compute_inline(sch.get_block("C"))
    assert sch.func == sched.parse(ELEMENTWISE_CHAIN_INLINED)
    assert_replays(sch, func)
    a = rng.standard_normal((8, 4), np.float32)
    assert_close(run_c(sch.func, a, np.zeros_like(a))[1], np.exp(a * 2 + 1) - 3)


def test_compute_inline_conv_padding_into_the_conv(rng):
    func = conv2d()
    sch = sched.Schedule(func)
    sch.compute_inline(sch.get_block("conv2d_pad"))
    text = sch.func.script()
    assert "conv2d_pad" not in text and "T.alloc_buffer" not in text
    assert "T.if_then_else(v_p * 1 + v_ry >= 1" in text
    assert_replays(sch, func)
    d, w, out = conv2d_inputs(rng)
    assert_close(run_c(sch.func, d, w, out)[2], conv2d_reference(d, w))


RELU_FOLDED_INTO_BIAS_ADD = """
@T.prim_func
def main(X: T.Buffer((6, 5), "float32"), W: T.Buffer((5, 4), "float32"),
         bias: T.Buffer((4,), "float32"), relu: T.Buffer((6, 4), "float32")):
    with T.block("root"):
        C = T.alloc_buffer((6, 4), "float32")
        for i, j, k in T.grid(6, 4, 5):
            with T.block("C"):
                v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
                T.reads(X[v_i, v_k], W[v_k, v_j], C[v_i, v_j])
                T.writes(C[v_i, v_j])
                with T.init():
                    C[v_i, v_j] = T.float32(0.0)
                C[v_i, v_j] = C[v_i, v_j] + X[v_i, v_k] * W[v_k, v_j]
        for i_1, j_1 in T.grid(6, 4):
            with T.block("bias_add"):
                v_i, v_j = T.axis.remap("SS", [i_1, j_1])
                T.reads(C[v_i, v_j], bias[v_j])
                T.writes(relu[v_i, v_j])
                relu[v_i, v_j] = T.max(C[v_i, v_j] + bias[v_j], T.float32(0.0))
"""


def matmul_bias_relu():
    X = te.placeholder((6, 5), name="X")
    W = te.placeholder((5, 4), name="W")
    bias = te.placeholder((4,), name="bias")
    return te.create_prim_func([X, W, bias, te.ops.relu(te.ops.bias_add(te.ops.matmul(X, W),
                                                                         bias))])


def test_reverse_compute_inline_relu_epilogue(rng):
    func = matmul_bias_relu()
    sch = sched.Schedule(func)
    sch.reverse_compute_inline(sch.get_block("relu"))
    assert sch.func == sched.parse(RELU_FOLDED_INTO_BIAS_ADD)
    assert_replays(sch, func)
    x, w = rng.standard_normal((6, 5), np.float32), rng.standard_normal((5, 4), np.float32)
    bias = rng.standard_normal(4, np.float32)
    out = run_c(sch.func, x, w, bias, np.zeros((6, 4), np.float32))[3]
    assert_close(out, np.maximum(x @ w + bias, 0))


def test_reverse_compute_inline_transposed_read(rng):
    A = te.placeholder((4, 6), name="A")
    B = te.compute((4, 6), lambda i, j: A[i, j] + 1.0, name="B")
    func = te.create_prim_func([A, te.compute((6, 4), lambda j, i: B[i, j] * 3.0, name="C")])
    sch = sched.Schedule(func)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert "C[v_j, v_i] = (A[v_i, v_j] + T.float32(1.0)) * T.float32(3.0)" in sch.func.script()
    a = rng.standard_normal((4, 6), np.float32)
    assert_close(run_c(sch.func, a, np.zeros((6, 4), np.float32))[1], ((a + 1) * 3).T)


# -- refusals --------------------------------------------------------------------------------

@T.prim_func
def overwritten_between(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(8):
        with T.block("W"):
            vi = T.axis.spatial(8, i)
            A[vi] = T.float32(0)
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = B[vi] + T.float32(1)


@T.prim_func
def shifted_store(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((9,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi + 1] = A[vi]
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = B[vi + 1]


def first_column():
    """B = A * 2 over (4, 6); C[i] = B[i, 0]: C reads one element of each row of B."""
    A = te.placeholder((4, 6), name="A")
    B = te.compute((4, 6), lambda i, j: A[i, j] * 2.0, name="B")
    return te.create_prim_func([A, te.compute((4,), lambda i: B[i, 0], name="C")])


def refused(sch, step, match):
    """Run `step`, which must raise ScheduleError matching `match` and change nothing."""
    before, steps = sch.func, len(sch.trace)
    with pytest.raises(ScheduleError, match=match) as info:
        step()
    assert sch.func is before and len(sch.trace) == steps
    return str(info.value)


def test_compute_at_refuses_a_loop_of_its_own_nest():
    # the block is already under that loop: nothing to move
    sch = sched.Schedule(chain())
    b = sch.get_block("B")
    (i,) = sch.get_loops(b)
    message = refused(sch, lambda: sch.compute_at(b, i), "block 'B' is already under loop 'i'")
    assert "sch.compute_at(B, i_1)" in message                  # the legal loop, as a call


def test_compute_at_refuses_a_loop_without_consumer_and_lists_the_legal_loops():
    # D does not read B: under D's loop nothing says which part of B to compute
    A = te.placeholder((10,), name="A")
    B = te.compute((10,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((10,), lambda i: B[i] + 1.0, name="C")
    D = te.compute((10,), lambda i: A[i] - 1.0, name="D")
    sch = sched.Schedule(te.create_prim_func([A, C, D]))
    (i_d,) = sch.get_loops(sch.get_block("D"))
    block = sch.get_block("B")
    message = refused(sch, lambda: sch.compute_at(block, i_d),
                      r"no consumer of block 'B' is under loop 'i_2' \(its consumers: 'C'\)")
    assert "legal alternatives:\n    sch.compute_at(B, i_1)" in message


def test_compute_at_refuses_when_a_block_between_overwrites_its_input():
    # W zeroes A after B read it; computed at C's loop, B would read the zeros
    sch = sched.Schedule(overwritten_between)
    (i_c,) = sch.get_loops(sch.get_block("C"))
    block = sch.get_block("B")
    message = refused(sch, lambda: sch.compute_at(block, i_c),
                      "anti dependence on 'A': W\\[vi=0\\] overwrites A\\[0\\] read before by "
                      "B\\[vi=0\\]")
    assert "for i_2 in range(8):  # <-- loop 'i_2'" in message


def test_compute_at_computes_only_the_part_the_consumers_read(rng):
    # C reads B[0:5] only: under C's loop, B[5:10] (which nothing reads) is not computed
    A = te.placeholder((10,), name="A")
    B = te.compute((10,), lambda i: A[i] * 2.0, name="B")
    sch = sched.Schedule(te.create_prim_func([A, te.compute((5,), lambda i: B[i], name="C")]))
    (i_c,) = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i_c)
    assert "for i_1 in range(5):" in sch.func.script()
    a = rng.standard_normal(10, np.float32)
    assert_close(run_c(sch.func, a, np.zeros(5, np.float32))[1], a[:5] * 2)


def test_compute_at_of_a_store_off_the_iteration_variables():
    # B stores B[vi + 1]: isl maps the region C reads back to the instances that store it
    # (sched/schedule/preimage.py), one per iteration of C's loop
    sch = sched.Schedule(shifted_store)
    (i_c,) = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i_c)
    assert "B[vi + 1] = A[vi]\n            with T.block(\"C\")" in sch.func.script()
    a = np.arange(8, dtype="float32")
    c = np.zeros(8, "float32")
    sched.build(sch.func, target="c")(a, c)
    np.testing.assert_array_equal(c, a)


def test_reverse_compute_at_refuses_softmax_exp_under_the_reduce_loop_of_max():
    # under k the maximum is partial: exp of row 0 at k = 0 would miss X[0, 1:]
    sch = sched.Schedule(softmax())
    _, k = sch.get_loops(sch.get_block("softmax_max"))
    block = sch.get_block("softmax_exp")
    message = refused(sch, lambda: sch.reverse_compute_at(block, k),
                      "loop 'k' is a reduce loop of producer 'softmax_max'")
    assert ("violated dependence: flow dependence on 'softmax_max': softmax_exp[v_i=0, v_j=0] "
            "reads softmax_max[0] written by softmax_max[v_i=0, v_k=1]") in message
    assert "sch.reverse_compute_at(softmax_exp, i)" in message
    cheap = sched.Schedule(softmax(), render_errors=False)
    _, k = cheap.get_loops(cheap.get_block("softmax_max"))
    with pytest.raises(ScheduleError) as info:
        cheap.reverse_compute_at(cheap.get_block("softmax_exp"), k)
    assert "\n" not in str(info.value)


def test_reverse_compute_at_refuses_to_run_instances_in_several_iterations():
    # loop j of B decides nothing about C[i] = B[i, 0]: C would run again for every j
    sch = sched.Schedule(first_column())
    _, j = sch.get_loops(sch.get_block("B"))
    block = sch.get_block("C")
    message = refused(sch, lambda: sch.reverse_compute_at(block, j),
                      "block 'C' would run some instances in more than one iteration of loop 'j'")
    assert "sch.reverse_compute_at(C, i)" in message


def test_compute_inline_refuses_an_output():
    # C is a parameter: its values must reach memory
    sch = sched.Schedule(chain())
    block = sch.get_block("C")
    refused(sch, lambda: sch.compute_inline(block),
            "block 'C' writes 'C', an output of the function")


def test_compute_inline_refuses_a_reduction():
    # the matmul's value is final only after its last update
    sch = sched.Schedule(matmul_bias_relu())
    block = sch.get_block("C")
    refused(sch, lambda: sch.compute_inline(block),
            r"block 'C' is a reduction \(reduce variable\(s\) v_k\).*compute_at")


def test_compute_inline_refuses_a_store_off_the_iteration_variables():
    sch = sched.Schedule(shifted_store)
    block = sch.get_block("B")
    refused(sch, lambda: sch.compute_inline(block),
            r"block 'B' stores B\[vi \+ 1\]: the indices must be its iteration variables")


def test_compute_inline_refuses_when_a_block_between_overwrites_its_input():
    # inlined into C, A * 2 would be read after W zeroed A
    sch = sched.Schedule(overwritten_between)
    block = sch.get_block("B")
    refused(sch, lambda: sch.compute_inline(block),
            "block 'W' overwrites 'A', which 'B' reads, before a consumer runs(.|\n)*"
            "violated dependence: anti dependence on 'A'")


def test_reverse_compute_inline_refuses_a_reduction_producer():
    # relu applied to every partial sum of the matmul would be wrong
    A = te.placeholder((4, 3), name="A")
    B = te.placeholder((3, 5), name="B")
    sch = sched.Schedule(te.create_prim_func([A, B, te.ops.relu(te.ops.matmul(A, B))]))
    block = sch.get_block("relu")
    refused(sch, lambda: sch.reverse_compute_inline(block),
            "producer 'C' is a reduction .*reverse_compute_at")


def test_reverse_compute_inline_refuses_two_producers():
    # the softmax block divides softmax_exp by softmax_sum: two producers
    sch = sched.Schedule(softmax())
    block = sch.get_block("softmax")
    refused(sch, lambda: sch.reverse_compute_inline(block),
            "block 'softmax' reads 2 buffer\\(s\\) written by block\\(s\\) softmax_exp, "
            "softmax_sum")


def test_reverse_compute_inline_of_a_consumer_reading_part_of_its_producer(rng):
    """C[i] = B[i, 0]: the instances of B whose element C reads compute C there, the others
    nothing (the condition from isl; dlight's Matmul inlines the copy back of a padded output
    into its producer this way, TVM adding the same in-bounds predicate)."""
    sch = sched.Schedule(first_column())
    sch.reverse_compute_inline(sch.get_block("C"))
    assert "T.where(j == 0)" in sch.func.script()
    assert "C[v_i] = A[v_i, v_j] * T.float32(2.0)" in sch.func.script()
    a = rng.standard_normal((4, 6), dtype=np.float32)
    assert_close(run_c(sch.func, a, np.full(4, np.nan, np.float32))[1], a[:, 0] * 2)


def test_reverse_compute_inline_refuses_a_consumer_reading_what_is_not_written():
    """C reads B[i, i + 1], which B (its columns 0 to 2 only) writes for rows 0 and 1: no
    instance of B could run C's rows 2 and 3."""
    @T.prim_func
    def partial(A: T.Buffer((4, 3), "float32"), C: T.Buffer((4,), "float32")):
        B = T.alloc_buffer((4, 6), "float32")
        for i, j in T.grid(4, 3):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for i in range(4):
            with T.block("C"):
                vi = T.axis.remap("S", [i])
                C[vi] = B[vi, vi + 1]

    sch = sched.Schedule(partial)
    block = sch.get_block("C")
    refused(sch, lambda: sch.reverse_compute_inline(block),
            r"block 'C' reads B\[vi, vi \+ 1\]: it reads elements block 'B' does not write")


def test_reverse_compute_inline_refuses_a_guarded_consumer():
    # a predicate selects some instances of C; B computes all of its own
    sch = sched.Schedule(chain())
    sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, 4])
    block = sch.get_block("C")
    refused(sch, lambda: sch.reverse_compute_inline(block),
            "block 'C' runs under the predicate")


def test_reverse_compute_inline_refuses_an_output_producer():
    # B is a parameter too: it must still be stored
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    sch = sched.Schedule(te.create_prim_func([A, B, te.compute((8,), lambda i: B[i] + 1.0,
                                                                name="C")]))
    block = sch.get_block("C")
    refused(sch, lambda: sch.reverse_compute_inline(block),
            "'B' is an output of the function")


def test_handles_of_an_inlined_block_are_stale():
    sch = sched.Schedule(chain())
    b = sch.get_block("B")
    (i,) = sch.get_loops(b)
    sch.compute_inline(b)
    refused(sch, lambda: sch.get_loops(b), "block 'B' no longer exists: compute_inline removed")
    refused(sch, lambda: sch.split(i, [None, 2]), "loop 'i' no longer exists")


def test_preserve_unit_loops_must_be_a_bool():
    sch = sched.Schedule(chain())
    (i,) = sch.get_loops(sch.get_block("C"))
    with pytest.raises(TypeError, match="argument 3, 'preserve_unit_loops' to compute_at"):
        sch.compute_at(sch.get_block("B"), i, preserve_unit_loops=1)


def test_compute_at_two_producers_into_one_tile(rng):
    # C at D's tile loop first, then B at the same loop: B covers what C now reads there
    A = te.placeholder((10,), name="A")
    B = te.compute((10,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((10,), lambda i: B[i] + 1.0, name="C")
    func = te.create_prim_func([A, te.compute((10,), lambda i: C[i] * C[i], name="D")])
    sch = sched.Schedule(func)
    io, _ = sch.split(sch.get_loops(sch.get_block("D"))[0], factors=[None, 4])
    sch.compute_at(sch.get_block("C"), io)
    sch.compute_at(sch.get_block("B"), io)
    text = sch.func.script()
    assert text.index('T.block("B")') < text.index('T.block("C")') < text.index('T.block("D")')
    assert "T.where(i_2_0 * 4 + ax0_1 < 10)" in text
    assert_replays(sch, func)
    a = rng.standard_normal(10, np.float32)
    assert_close(run_c(sch.func, a, np.zeros(10, np.float32))[1], (a * 2 + 1) ** 2)


def test_recomputing_an_init_under_its_reduction_is_refused():
    # conv2d_init under the ry loop of conv2d would run once per (rc, ry) and reset the sums
    data = te.placeholder((1, 2, 7, 6), name="data")
    weight = te.placeholder((3, 2, 3, 3), name="weight")
    sch = sched.Schedule(te.create_prim_func(
        [data, weight, te.ops.conv2d_nchw(data, weight, padding=1)]))
    conv = sch.get_block("conv2d")
    init = sch.decompose_reduction(conv, sch.get_loops(conv)[0])
    ry = sch.get_loops(conv)[5]
    with pytest.raises(ScheduleError, match="block 'conv2d_init' would run some instances more "
                                            "than once, but block 'conv2d_update' also "
                                            "writes"):
        sch.compute_at(init, ry)


def test_moving_a_reduction_under_a_parallel_loop_is_refused():
    # pad's channel loop c runs in parallel; conv2d under it would sum over rc = c from
    # several threads at once
    data = te.placeholder((1, 2, 7, 6), name="data")
    weight = te.placeholder((3, 2, 3, 3), name="weight")
    sch = sched.Schedule(te.create_prim_func(
        [data, weight, te.ops.conv2d_nchw(data, weight, padding=1)]))
    pad = sch.get_block("conv2d_pad")
    _, c, _, _ = sch.get_loops(pad)
    sch.parallel(c)
    before = sch.func
    with pytest.raises(ScheduleError, match="it would make the concurrent loop 'c' carry a "
                                            "dependence"):
        sch.reverse_compute_at(sch.get_block("conv2d"), c)
    assert sch.func is before


def _row_normalize(rows=5, cols=37):
    X = te.placeholder((rows, cols), name="X")
    k = te.reduce_axis((0, cols), name="k")
    S = te.compute((rows,), lambda i: te.sum(X[i, k], axis=k), name="S")
    Y = te.compute((rows, cols), lambda i, j: X[i, j] / S[i], name="Y")
    return te.create_prim_func([X, Y])


def test_compute_at_keeps_the_guard_of_a_split_that_does_not_divide(rng):
    """The rfactor block of a reduction split by 8 over 37 carries `T.where(k_0 * 8 + k_1 <
    37)`; computed at the row loop it keeps that predicate on its new loops (it used to run
    the excluded instances too, and was refused)."""
    sch = sched.Schedule(_row_normalize())
    _, k = sch.get_loops(sch.get_block("S"))
    _, ki = sch.split(k, [None, 8])
    partial = sch.rfactor(ki, factor_axis=0)
    row = sch.get_loops(sch.get_block("Y"))[0]
    sch.compute_at(sch.get_block("S"), row)
    sch.compute_at(partial, row)
    assert "T.where(ax1 * 8 + ax0_1 < 37)" in sch.func.script()
    x = rng.random((5, 37)).astype(np.float32)
    out = np.zeros_like(x)
    sched.build(sch.func, target="c")(x, out)
    np.testing.assert_allclose(out, x / x.sum(axis=1, keepdims=True), rtol=1e-5)


def test_a_predicate_on_a_loop_not_bound_as_is_still_decides_the_move():
    """`T.where` over a loop that binds no iteration variable as is cannot be carried: the
    move is judged without it, and refused when the moved block would run other instances."""
    func = sched.parse("""
# from sched.script import T

@T.prim_func
def main(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    with T.block("root"):
        B = T.alloc_buffer((16,), "float32")
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i // 2 * 2 + i % 2)
                T.where(i % 2 == 0)
                B[vi] = A[vi] + T.float32(1)
        for j in range(16):
            with T.block("C"):
                vj = T.axis.spatial(16, j)
                C[vj] = B[vj] * T.float32(2)
""")
    sch = sched.Schedule(func)
    with pytest.raises(sched.ScheduleError, match="compute_at"):
        sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])


def padded_stencil(n):
    """B: A padded by a row above and below; C[i] = B[i] + 2 B[i + 1] + 3 B[i + 2]."""
    A = te.placeholder((n, 6), name="A")
    B = te.compute((n + 2, 6), lambda i, j: te.if_then_else(
        te.all(i >= 1, i <= n), A[i - 1, j], 0.0), name="B")
    C = te.compute((n, 6), lambda i, j: B[i, j] + B[i + 1, j] * 2.0 + B[i + 2, j] * 3.0,
                   name="C")
    return te.create_prim_func([A, C])


@pytest.mark.parametrize("symbolic", [False, True])
def test_compute_at_a_fused_tile_that_does_not_divide_takes_its_largest_region(symbolic, rng):
    """Under a split by 4 whose inner loops are fused, the rows of B one iteration needs are
    6, or fewer in the last: isl's largest size over the loops bounds the new loop (audit,
    helper-38: refused, "no linear bound"), the guard keeps it in B's domain."""
    sch = sched.Schedule(padded_stencil(te.var("n") if symbolic else 13))
    io, ii = sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, 4])
    sch.fuse(ii, sch.get_loops(sch.get_block("C"))[2])
    sch.compute_at(sch.get_block("B"), io)
    script = sch.func.script()
    assert ("T.grid(T.min(6, n + 2), 6)" if symbolic else "T.grid(6, 6)") in script
    kernel = sched.build(sch.func, target="c")
    for n in ((1, 2, 3, 5, 9, 13) if symbolic else (13,)):
        a = rng.standard_normal((n, 6), np.float32)
        c = np.full((n, 6), np.nan, np.float32)
        kernel(a, c)
        p = np.concatenate([np.zeros((1, 6), np.float32), a, np.zeros((1, 6), np.float32)])
        assert_close(c, p[:-2] + 2 * p[1:-1] + 3 * p[2:])


def test_reverse_compute_inline_under_a_predicate_names_where_it_may_come_from():
    """The predicate of D came from reverse_compute_at under a split that does not divide;
    the refusal said "inline it before splitting its loops" of loops D never had."""
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[i] + 1.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, te.compute((n,), lambda i: C[i] * C[i],
                                                            name="D")]))
    io, _ = sch.split(sch.get_loops(sch.get_block("B"))[0], factors=[None, 4])
    sch.reverse_compute_at(sch.get_block("C"), io)
    sch.reverse_compute_at(sch.get_block("D"), io)
    with pytest.raises(ScheduleError, match=r"runs under the predicate .*before the step "
                                            r"that made it \(a split that does not divide, "
                                            r"compute_at / reverse_compute_at\), or, where the "
                                            r"script wrote it \(T.where\)"):
        sch.reverse_compute_inline(sch.get_block("D"))


def cancelling(dtype):
    """B = A * 3.3 + 1000, C = B - 1000 in a 16-bit float: B rounds to the type's spacing at
    1000 (0.5 for float16, 4 for bfloat16), so C is a multiple of it, not A * 3.3."""
    A = te.placeholder((64,), dtype, name="A")
    B = te.compute((64,), lambda i: A[i] * te.const(3.3, dtype) + te.const(1000.0, dtype),
                   name="B")
    return te.create_prim_func([A, te.compute((64,), lambda i: B[i] - te.const(1000.0, dtype),
                                              name="C")])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("inline", ["compute_inline", "reverse_compute_inline"])
@pytest.mark.parametrize("vectorized", [False, True])
def test_inlining_a_16_bit_float_value_keeps_the_rounding_of_its_store(dtype, inline,
                                                                       vectorized):
    """16-bit floats compute in float32 and round where stored: inlined bare, B's value lost
    its rounding and C came out A * 3.3 (0.03) where the function as written gives 0."""
    import torch

    func = cancelling(dtype)
    a = torch.rand(64, dtype=torch.float32).mul(0.01).to(getattr(torch, dtype))
    b = (a * torch.tensor(3.3, dtype=a.dtype) + torch.tensor(1000.0, dtype=a.dtype))
    want = b - torch.tensor(1000.0, dtype=a.dtype)               # torch rounds every operation
    sch = sched.Schedule(func)
    getattr(sch, inline)(sch.get_block("B" if inline == "compute_inline" else "C"))
    assert f'T.Cast("{dtype}", T.Cast("float32", A[v_i] * ' in sch.func.script()
    if vectorized:
        (loop,) = sch.get_loops(sch.get_block("C" if inline == "compute_inline" else "B"))
        sch.vectorize(sch.split(loop, [None, 16])[1])
    for target in ("c", "cuda-emu", "interpreter"):
        out = torch.full((64,), 7.0, dtype=a.dtype)
        if target == "interpreter":      # numpy arrays; bfloat16 as its bits
            def bits(t):
                return t.view(torch.int16).numpy().view(np.uint16) if dtype == "bfloat16" \
                    else t.numpy()
            sched.interpret(sch.func, bits(a), bits(out))
        else:
            sched.build(sch.func, target=target)(a, out)
        assert torch.equal(out, want), target


def test_compute_at_of_int64_loops_drops_unit_loops_as_of_int32_ones(rng):
    """`T.int64(1)` is one iteration (a Relax function's loops are int64): compared with the
    int32 `1`, the unit loop stayed with preserve_unit_loops=False."""
    @T.prim_func
    def chain64(A: T.Buffer((T.int64(8), T.int64(4)), "float32"),
                C: T.Buffer((T.int64(8), T.int64(4)), "float32")):
        B = T.alloc_buffer((T.int64(8), T.int64(4)))
        for i, j in T.grid(T.int64(8), T.int64(4)):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for i, j in T.grid(T.int64(8), T.int64(4)):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj] + T.float32(1)

    sch = sched.Schedule(chain64)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0],
                   preserve_unit_loops=False)
    script = sch.func.script()
    assert "for ax0 in range(4):" in script and "vi = T.axis.spatial(T.int64(8), i_1)" in script
    a = rng.standard_normal((8, 4), dtype=np.float32)
    assert_close(run_c(sch.func, a, np.zeros_like(a))[1], a * 2 + 1)
    # the unit loop's value is T.int64(...), the variable's type (audit helper-43: an int32
    # 0 for an int64 variable, and the script parsed back as another function)
    sch = sched.Schedule(sched.parse(ONE_ROW64))
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[1],
                   preserve_unit_loops=False)
    assert "v0 = T.axis.spatial(T.int64(1), T.int64(0))" in sch.func.script()
    assert sched.parse(sch.func.script()) == sch.func
    row = rng.standard_normal((1, 8), dtype=np.float32)
    assert_close(run_c(sch.func, row, np.zeros_like(row))[1], row * 2 + 1)


ONE_ROW64 = """
@T.prim_func
def f(A: T.Buffer((T.int64(1), T.int64(8)), "float32"),
      C: T.Buffer((T.int64(1), T.int64(8)), "float32")):
    B = T.alloc_buffer((T.int64(1), T.int64(8)), "float32")
    for i0, i1 in T.grid(T.int64(1), T.int64(8)):
        with T.block("B"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            B[v0, v1] = A[v0, v1] * T.float32(2)
    for i0, i1 in T.grid(T.int64(1), T.int64(8)):
        with T.block("C"):
            v0, v1 = T.axis.remap("SS", [i0, i1])
            C[v0, v1] = B[v0, v1] + T.float32(1)
"""


def test_compute_inline_of_a_store_at_0_of_a_unit_dimension(rng):
    """TVM's reindex and normalize_prim_func store `B[0, vi, vj]` into a (1, 8, 16) buffer:
    every load reads the one element of that dimension (audit, helper-42: refused, and dlight's
    Matmul rule left its reindex stages unbound)."""
    @T.prim_func
    def reindexed(A: T.Buffer((8, 16), "float32"), C: T.Buffer((8, 16), "float32")):
        B = T.alloc_buffer((1, 8, 16), "float32")
        for i, j in T.grid(8, 16):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[0, vi, vj] = A[vi, vj] * T.float32(2)
        for i, j in T.grid(8, 16):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[0, vj // 2, vi * 2 + vj % 2] + T.float32(1)

    sch = sched.Schedule(reindexed)
    sch.compute_inline(sch.get_block("B"))
    assert "C[vi, vj] = A[vj // 2, vi * 2 + vj % 2] * T.float32(2.0) + T.float32(1.0)" in \
        sch.func.script()
    a = rng.standard_normal((8, 16), dtype=np.float32)
    want = np.array([[a[j // 2, i * 2 + j % 2] * 2 + 1 for j in range(16)] for i in range(8)])
    assert_close(run_c(sch.func, a, np.zeros_like(a))[1], want)


LAYER_NORM_TUPLE = """
@T.prim_func
def layer_norm(var_A: T.handle, B: T.Buffer((T.int64(32),), "float32"),
               C: T.Buffer((T.int64(32),), "float32"), var_T_layer_norm: T.handle):
    n = T.int64()
    A = T.match_buffer(var_A, (n, T.int64(32)))
    T_layer_norm = T.match_buffer(var_T_layer_norm, (n, T.int64(32)))
    A_red_temp_v0 = T.alloc_buffer((n,))
    A_red_temp_v1 = T.alloc_buffer((n,))
    for ax0, k1 in T.grid(n, T.int64(32)):
        with T.block("A_red_temp"):
            v_ax0, v_k1 = T.axis.remap("SR", [ax0, k1])
            with T.init():
                A_red_temp_v0[v_ax0] = T.float32(0)
                A_red_temp_v1[v_ax0] = T.float32(0)
            v_A_red_temp_v0: T.float32 = A_red_temp_v0[v_ax0] + A[v_ax0, v_k1]
            v_A_red_temp_v1: T.float32 = A_red_temp_v1[v_ax0] + A[v_ax0, v_k1] * A[v_ax0, v_k1]
            A_red_temp_v0[v_ax0] = v_A_red_temp_v0
            A_red_temp_v1[v_ax0] = v_A_red_temp_v1
    for ax0, ax1 in T.grid(n, T.int64(32)):
        with T.block("T_layer_norm"):
            v_ax0, v_ax1 = T.axis.remap("SS", [ax0, ax1])
            T_layer_norm[v_ax0, v_ax1] = (A[v_ax0, v_ax1] - A_red_temp_v0[v_ax0]
                * T.float32(0.03125)) * T.rsqrt(A_red_temp_v1[v_ax0] * T.float32(0.03125)
                - A_red_temp_v0[v_ax0] * T.float32(0.03125) * (A_red_temp_v0[v_ax0]
                * T.float32(0.03125)) + T.float32(1e-05)) * B[v_ax1] + C[v_ax1]
"""


def test_compute_at_of_a_tuple_reduction_runs_the_rows_its_consumer_reads(rng):
    """TOPI's layer norm reduces into two buffers at once (A_red_temp_v0, _v1); dlight's
    GeneralReduction computes it at the consumer's row (audit helper-42: refused, 'writes 2
    buffers')."""
    sch = sched.Schedule(sched.parse(LAYER_NORM_TUPLE))
    row, column = sch.get_loops(sch.get_block("T_layer_norm"))
    sch.compute_at(sch.get_block("A_red_temp"), row)
    outer, inner = sch.get_loops(sch.get_block("A_red_temp"))
    assert outer.name == row.name    # (an int64 loop, as the function's: helper-115)
    assert f"for {inner.name} in range(T.int64(32)):" in sch.func.script()
    sch.parallel(row)
    kernel = sched.build(sch.func, target="c")
    for n in (1, 5):
        a = rng.standard_normal((n, 32), np.float32)
        b, c = rng.standard_normal(32, np.float32), rng.standard_normal(32, np.float32)
        out = np.full((n, 32), np.nan, np.float32)
        kernel(a, b, c, out)
        mean = a.mean(1, keepdims=True)
        var = (a * a).mean(1, keepdims=True) - mean * mean
        assert_close(out, (a - mean) / np.sqrt(var + 1e-5) * b + c)


def test_reverse_compute_inline_refuses_a_consumer_whose_instances_overwrite_one_element():
    """C[0] = B[7 - vi]: the last instance decides C[0]; inlined into B, the instances would
    run in B's order (audit helper-44: it kept B[0]'s value where the function keeps B[7]'s)."""
    @T.prim_func
    def last_wins(A: T.Buffer((8,), "float32"), C: T.Buffer((1,), "float32")):
        B = T.alloc_buffer((8,), "float32")
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] * T.float32(2)
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[0] = B[7 - vi]

    sch = sched.Schedule(last_wins)
    block = sch.get_block("C")
    refused(sch, lambda: sch.reverse_compute_inline(block),
            r"instances of block 'C' write one element of C\[0\] .*depends on their order")


def test_reverse_compute_inline_into_a_guarded_producer_names_the_predicate():
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] * 2.0, name="B")
    sch = sched.Schedule(te.create_prim_func([A, te.compute((8,), lambda i: B[15 - 2 * i],
                                                            name="C")]))
    sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 5])
    block = sch.get_block("C")
    refused(sch, lambda: sch.reverse_compute_inline(block),
            r"producer 'B' runs under the predicate .* inline it before the step that made "
            r"the predicate")


def test_compute_at_leaves_out_instances_whose_writes_nothing_reads():
    """compute_at runs what the consumers under the loop read, as TVM's: a producer's
    instances writing elements nothing reads (of a buffer the function allocates) are left
    out, where they were refused before (audit helper-50): a cache of a padded layout (its
    padding elements). Only where the model sees every read exactly (below)."""
    A = te.placeholder((10, 8), name="A")
    B = te.compute((10, 8), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((10, 8), lambda i, j: B[9 - i, j] + 1.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (i // 4, j, i % 4),
                         pad_value=0.0)
    cache = sch.cache_read(sch.get_block("C"), "B", "local")
    sch.compute_at(cache, sch.get_loops(sch.get_block("C"))[0])
    a = np.random.default_rng(0).standard_normal((10, 8)).astype(np.float32)
    assert_close(run_c(sch.func, a, np.zeros((10, 8), np.float32))[1], a[::-1] * 2 + 1)



@pytest.mark.parametrize("size", [10, "n"])
def test_compute_at_at_a_partial_tile_leaves_out_what_no_tile_reads(size):
    """A consumer split into tiles that do not divide it has a predicate (`i_0 * 4 + i_1 <
    n`): affine, read exactly by the model and by the code (a guard, in int64 where int32
    could wrap), so the producer's instances no tile reads are left out (B[0] here; refused
    before: audit helper-61)."""
    n = te.var("n") if size == "n" else size
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[te.min(i + 1, n - 1)] + 1.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    outer, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 4])
    sch.compute_at(sch.get_block("B"), outer)
    kernel = sched.build(sch.func, target="c")
    for m in ([10] if size == 10 else [1, 2, 5, 10, 13]):
        a = np.random.default_rng(m).standard_normal(m).astype(np.float32)
        c = np.zeros(m, np.float32)
        kernel(a, c)
        i = np.arange(m)
        assert_close(c, 2 * a[np.minimum(i + 1, m - 1)] + 1)


def _predicate_function(where: str):
    """B (8 elements) read by D (B[0:4]) and, under `T.where(where)`, by C."""
    return sched.parse(f"""
@T.prim_func
def func(A: T.Buffer((8,), "float32"), C: T.Buffer((8, 2), "float32"),
         D: T.Buffer((4,), "float32")):
    B = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] * T.float32(2.0)
    for i in range(4):
        with T.block("D"):
            vi = T.axis.remap("S", [i])
            D[vi] = B[vi] + T.float32(1.0)
    for i in T.thread_binding(8, thread="threadIdx.x"):
        for j in range(2):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.where({where})
                C[vi, vj] = B[vi]
""")


WRAPPING_PREDICATES = {
    "int64 product": 'T.Cast("int64", i) * T.int64(4611686018427387904) + T.Cast("int64", j) '
                     '< T.int64(5)',
    "cast of an int32 product": 'T.Cast("int64", i * 1000000000) + T.Cast("int64", j) '
                                '< T.int64(5)'}


@pytest.mark.parametrize("where", list(WRAPPING_PREDICATES), ids=list(WRAPPING_PREDICATES))
def test_a_predicate_whose_arithmetic_may_wrap_keeps_the_instances_it_may_read(where):
    """isl reads these predicates in exact integers (true at i = 0 at most); the code may
    wrap (the int64 product, and the int32 product under the program's cast, did: C read
    B[4], B[6], B[7] after compute_at left them out; audit helper-72). compute_at leaves
    instances out only where the predicate's values provably stay in int32, or in int64
    where the lowering computes int32 index arithmetic that may pass int32."""
    sch = sched.Schedule(_predicate_function(WRAPPING_PREDICATES[where]))
    with pytest.raises(ScheduleError, match="would run only what its consumers there read"):
        sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("D"))[0])


def test_an_int32_predicate_past_int32_is_computed_in_int64_and_read_exactly():
    # `i * 1000000000 < 0` holds at no i >= 0 in exact integers, and the lowering computes
    # it in int64 (lower/wide_integers.py): C never runs, and compute_at leaves out the B
    # elements only C reads
    func = _predicate_function("i * 1000000000 < 0")
    sch = sched.Schedule(func)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("D"))[0])
    a = np.arange(8, dtype=np.float32) + 1
    for run in (lambda *args: sched.interpret(func, *args),
                sched.build(sch.func, target="cuda-emu", check_races=True)):
        c, d = np.full((8, 2), 7.0, np.float32), np.zeros(4, np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")       # (the default schedule of the GPU build)
            run(a, c, d)
        np.testing.assert_array_equal(c, 7.0)
        np.testing.assert_array_equal(d, 2 * a[:4] + 1)


@pytest.mark.parametrize("factor", [3, 5])
def test_compute_at_under_tiles_that_do_not_divide_a_symbolic_extent(factor):
    # the partial tile's `i_0 * 3 + i_1 < n` may pass int32 over a symbolic n, and is computed
    # in int64: the B elements no tile reads (C reads B[i // 2]) are left out (refused at
    # factor 3, accepted at 4, whose product stays in int32: audit helper-122)
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    C = te.compute((n,), lambda i: B[i // 2] + 0.5, name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    outer, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, factor])
    sch.compute_at(sch.get_block("B"), outer)
    kernel = sched.build(sch.func, target="c")
    for m in (1, 2, 4, 11, 16):
        a = np.random.default_rng(m).standard_normal(m).astype(np.float32)
        c = np.zeros(m, np.float32)
        kernel(a, c)
        assert_close(c, (a * 2 + 1)[np.arange(m) // 2] + 0.5)


@T.prim_func
def read_in_a_loop_extent(A: T.Buffer((8,), "int32"), X: T.Buffer((4, 8), "float32"),
                          C: T.Buffer((4,), "float32")):
    L = T.alloc_buffer((8,), "int32")
    for i in range(8):
        with T.block("L"):
            vi = T.axis.spatial(8, i)
            L[vi] = A[vi] + 1
    for i in range(4):
        with T.block("C"):
            vi = T.axis.spatial(4, i)
            C[vi] = T.Cast("float32", L[vi])
            for j in range(L[vi + 4]):
                C[vi] = C[vi] + X[vi, j]


@T.prim_func
def read_in_an_outer_if(A: T.Buffer((8,), "float32"), C: T.Buffer((4,), "float32")):
    L = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("L"):
            vi = T.axis.spatial(8, i)
            L[vi] = A[vi] * T.float32(2)
    for i in range(4):
        if L[i + 4] > T.float32(0):
            with T.block("C"):
                vi = T.axis.spatial(4, i)
                C[vi] = L[vi]


@T.prim_func
def read_under_a_wrapping_guard(A: T.Buffer((8,), "float32"), C: T.Buffer((4,), "float32")):
    L = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("L"):
            vi = T.axis.spatial(8, i)
            L[vi] = A[vi] * T.float32(2)
    for i in range(4):
        with T.block("C"):
            vi = T.axis.spatial(4, i)
            C[vi] = L[vi]
            if vi * 1000000000 < 0:
                C[vi] = L[vi + 4]


@pytest.mark.parametrize("func", [read_in_an_outer_if, read_under_a_wrapping_guard])
def test_compute_at_keeps_instances_whose_reads_the_model_may_not_see(func):
    """Reads of the producer in an `if` around the consumer, or under a condition whose int32
    arithmetic wraps in the code but not in the model's exact integers (audit helper-51: each
    made compute_at leave out instances the consumer reads)."""
    sch = sched.Schedule(func)
    with pytest.raises(ScheduleError, match="would run only what its consumers there read"):
        sch.compute_at(sch.get_block("L"), sch.get_loops(sch.get_block("C"))[0])


def test_a_load_in_a_loop_extent_is_a_read(rng):
    """`for j in range(L[vi + 4])` reads L[vi + 4]: the model sees it (it did not, and
    compute_at left L[4:8] out; audit helper-51), so L is computed where C reads it."""
    sch = sched.Schedule(read_in_a_loop_extent)
    sch.compute_at(sch.get_block("L"), sch.get_loops(sch.get_block("C"))[0])
    a = np.array([1, 2, 3, 4, 2, 3, 4, 5], np.int32)
    x = rng.standard_normal((4, 8), np.float32)
    c = np.zeros(4, np.float32)
    sched.build(sch.func, target="c")(a, x, c)
    assert_close(c, [a[i] + 1 + x[i, :a[i + 4] + 1].sum() for i in range(4)])


@pytest.mark.parametrize("outputs", ["B read by another block", "B an output"])
def test_compute_at_keeps_instances_another_block_reads_or_that_write_an_output(outputs):
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((4,), lambda i: B[i] + 1.0, name="C")
    D = te.compute((4,), lambda i: B[i + 4] + 1.0, name="D")
    func = te.create_prim_func([A, C, D] if outputs.endswith("block") else [A, B, C])
    sch = sched.Schedule(func)
    with pytest.raises(ScheduleError, match="would run only what its consumers there read"):
        sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])


def test_compute_at_leaves_out_a_reduction_nothing_else_reads(rng):
    """Row sums half of which the consumer reads: the other rows' updates read only their
    own accumulators, which are left out with them (audit helper-51: refused)."""
    A = te.placeholder((8, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    B = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="B")
    C = te.compute((4,), lambda i: B[i] * 2.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
    a = rng.standard_normal((8, 6), np.float32)
    assert_close(run_c(sch.func, a, np.zeros(4, np.float32))[1], a[:4].sum(1) * 2, rtol=1e-5)


@T.prim_func
def read_in_an_outer_loop_extent(A: T.Buffer((8,), "int32"), X: T.Buffer((4, 8), "float32"),
                                 C: T.Buffer((4, 8), "float32")):
    L = T.alloc_buffer((8,), "int32")
    for i in range(8):
        with T.block("L"):
            vi = T.axis.spatial(8, i)
            L[vi] = A[vi] + 1
    for i in range(4):
        for j in range(L[i + 4]):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = X[vi, vj] + T.Cast("float32", L[vi])


def test_compute_inline_of_a_buffer_read_in_a_loop_bound_between_blocks(rng):
    """The root block reads L in the extent of a loop around C: compute_inline rewrites it
    there too (it raised an AssertionError looking for the root among the top statements;
    audit helper-51, through the default GPU schedule)."""
    sch = sched.Schedule(read_in_an_outer_loop_extent)
    sch.compute_inline(sch.get_block("L"))
    assert "for j in range(A[i_1 + 4] + 1):" in sch.func.script()
    a = np.array([1, 2, 3, 4, 2, 3, 6, 5], np.int32)
    x = rng.standard_normal((4, 8), np.float32)
    c = np.zeros((4, 8), np.float32)
    sched.build(sch.func, target="c")(a, x, c)
    expected = np.zeros((4, 8), np.float32)
    for i in range(4):
        expected[i, :a[i + 4] + 1] = x[i, :a[i + 4] + 1] + a[i] + 1
    assert_close(c, expected)


@pytest.mark.parametrize("copy", ["cache_read", "reindex"])
def test_inlining_a_copy_of_a_gather_index_updates_the_regions_indexed_through_it(copy):
    """B reads A[k, G[i]]: a copy of G (cache_read or reindex), then inlined, left B's
    declared read `A[v_k, G_global[v_i]]` naming the copy, which is gone: the build's
    verifier refused the kernel (audit helper-71). The region is inferred again."""
    n = 6
    A = te.placeholder((n, n), name="A")
    G = te.placeholder((n,), "int32", name="G")
    k = te.reduce_axis((0, n), name="k")
    B = te.compute((n,), lambda i: te.sum(A[k, G[i]], axis=k), name="B")
    sch = sched.Schedule(te.create_prim_func([A, G, B]))
    block = sch.get_block("B")
    if copy == "cache_read":
        made = sch.cache_read(block, 1, "global")
    else:
        made = sch.reindex(block, ("read", 1))
    sch.compute_inline(made)
    assert "T.reads(B[v_i], A[v_k, G[v_i]], G[v_i])" in sch.func.script()
    bx, tx = sch.split(sch.get_loops(block)[0], [None, 2])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    g = rng.integers(0, n, n).astype(np.int32)
    out = np.zeros(n, np.float32)
    sched.build(sch.func, target="c")(a, g, out)
    assert_close(out, a[:, g].sum(axis=0))


@T.prim_func
def _consumer_with_a_body_loop(A: T.Buffer((40,), "float32"), C: T.Buffer((8,), "float32")):
    P = T.alloc_buffer((40,), "float32")
    for i in range(40):
        with T.block("P"):
            vi = T.axis.spatial(40, i)
            P[vi] = A[vi] * T.float32(2)
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = T.float32(0)
            for k in range(vi + 1):
                C[vi] = C[vi] + P[vi * 4 + k]


def test_compute_at_a_consumer_whose_body_loops_over_the_producer():
    """The consumer's region under its loop spans its body's loop k (P[i * 4 : i * 5 + 1]):
    compute_at was refused as needing k, which is not defined there (audit helper-177); the
    producer recomputes the largest such region, 8 elements, in each iteration."""
    sch = sched.Schedule(_consumer_with_a_body_loop)
    (i,) = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("P"), i)
    script = sch.func.script()
    assert "for ax0 in range(8):" in script and "T.axis.spatial(40, i_1 * 4 + ax0)" in script
    a = np.random.default_rng(0).standard_normal(40).astype(np.float32)
    (_, c) = run_c(sch.func, a, np.zeros(8, np.float32))
    assert_close(c, [sum(a[v * 4 + k] * 2 for k in range(v + 1)) for v in range(8)])

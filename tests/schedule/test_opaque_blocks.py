"""Opaque blocks (`T.evaluate(T.call_extern(...))` with declared regions): the C target runs
them with the user's C code, schedules move the loops around them where the declared regions
prove it legal, and every step that would need more than MAY-accesses is refused."""

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.ir.extern import is_opaque
from sched.script import T

ROW_C = """
void scale_row(const float* a, float* b, int n) {
    for (int k = 0; k < n; ++k) b[k] = 2.0f * a[k] + 1.0f;
}
void add_one_in_place(float* x, int n) { for (int k = 0; k < n; ++k) x[k] += 1.0f; }
void add_row(const float* a, float* b, int n) { for (int k = 0; k < n; ++k) b[k] += a[k]; }
"""


@T.prim_func
def row_then_scale(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32"),
                   C: T.Buffer((8, 16), "float32")):
    for i in range(8):
        with T.block("E"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi, 0:16])
            T.writes(B[vi, 0:16])
            T.evaluate(T.call_extern("int32", "scale_row", T.address_of(A[vi, 0]),
                                     T.address_of(B[vi, 0]), 16))
    for i, j in T.grid(8, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] * T.float32(3)


# the consumer reads the next row of what the opaque block writes
@T.prim_func
def row_then_next_row(A: T.Buffer((8, 16), "float32"), B: T.Buffer((9, 16), "float32"),
                      C: T.Buffer((8, 16), "float32")):
    for i in range(9):
        with T.block("E"):
            vi = T.axis.spatial(9, i)
            T.reads(A[T.min(vi, 7), 0:16])
            T.writes(B[vi, 0:16])
            T.evaluate(T.call_extern("int32", "scale_row", T.address_of(A[T.min(vi, 7), 0]),
                                     T.address_of(B[vi, 0]), 16))
    for i, j in T.grid(8, 16):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi + 1, vj]


# a producer, then an opaque block that updates rows in place (reads and writes X)
@T.prim_func
def produce_then_update(A: T.Buffer((8, 16), "float32"), X: T.Buffer((8, 16), "float32")):
    for i, j in T.grid(8, 16):
        with T.block("P"):
            vi, vj = T.axis.remap("SS", [i, j])
            X[vi, vj] = A[vi, vj] * T.float32(2)
    for i in range(8):
        with T.block("U"):
            vi = T.axis.spatial(8, i)
            T.reads(X[vi, 0:16])
            T.writes(X[vi, 0:16])
            T.evaluate(T.call_extern("int32", "add_one_in_place",
                                     T.address_of(X[vi, 0]), 16))


def _arrays(*shapes):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype("float32") for s in shapes]


def _run(func, *arrays):
    copies = [np.array(a, copy=True) for a in arrays]
    sched.build(func, target="c", extern_c=ROW_C)(*copies)
    return copies


def test_opaque_block_round_trips_and_runs_with_extern_c():
    text = row_then_scale.script()
    assert 'T.evaluate(T.call_extern("int32", "scale_row", T.address_of(A[vi, 0])' in text
    assert sched.parse(text) == row_then_scale
    a, b, c = _arrays((8, 16), (8, 16), (8, 16))
    _, _, c = _run(row_then_scale, a, b, c)
    np.testing.assert_allclose(c, (2 * a + 1) * 3, rtol=1e-6)


def test_loops_around_an_opaque_block_are_scheduled_and_checked():
    sch = sched.Schedule(row_then_scale)
    (i,) = sch.get_loops(sch.get_block("E"))
    io, ii = sch.split(i, [None, 2])
    sch.parallel(io)                      # rows are independent by the declared regions
    sch.reverse_compute_at(sch.get_block("C"), ii)
    text = sch.func.script()
    assert "T.parallel(4)" in text and text.index('block("E")') < text.index('block("C")')
    a, b, c = _arrays((8, 16), (8, 16), (8, 16))
    _, _, c = _run(sch.func, a, b, c)
    np.testing.assert_allclose(c, (2 * a + 1) * 3, rtol=1e-6)


def test_producer_computed_at_an_opaque_consumer_loop():
    # the producer's row vi must be ready before U updates it: the declared read region
    # X[vi, 0:16] tells compute_at which row
    sch = sched.Schedule(produce_then_update)
    (i,) = sch.get_loops(sch.get_block("U"))
    sch.compute_at(sch.get_block("P"), i)
    (a, x) = _arrays((8, 16), (8, 16))
    _, got = _run(sch.func, a, x)
    np.testing.assert_allclose(got, a * 2 + 1, rtol=1e-6)


# -- refusals ---------------------------------------------------------------------------------

def test_reverse_compute_at_follows_the_declared_write_region():
    # C's row r reads B[r + 1], which E writes in iteration r + 1 (by its declared region): C
    # goes one iteration behind E, under a guard
    sch = sched.Schedule(row_then_next_row)
    (i,) = sch.get_loops(sch.get_block("E"))
    sch.reverse_compute_at(sch.get_block("C"), i)
    assert "vi = T.axis.spatial(8, i - 1)" in sch.func.script()
    a, b, c = _arrays((8, 16), (9, 16), (8, 16))
    expected = 2 * a[np.minimum(np.arange(1, 9), 7)] + 1
    for func in (row_then_next_row, sch.func):
        _, _, got = _run(func, a, b, c)
        np.testing.assert_allclose(got, expected, rtol=1e-6)


@T.prim_func
def chained_rows(X: T.Buffer((8, 16), "float32")):
    for i, j in T.grid(7, 2):
        with T.block("U"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(X[vi:vi + 2, 0:16])
            T.writes(X[vi + 1, 0:16])
            T.evaluate(T.call_extern("int32", "add_row", T.address_of(X[vi, 0]),
                                     T.address_of(X[vi + 1, 0]), 16))


def test_reorder_refused_when_it_reverses_a_declared_region_dependence():
    # (i, j) adds row i into row i + 1 twice; with j outside, (i=1, j=0) would read row 1
    # before (i=0, j=1) adds into it: a flow dependence of the declared regions
    sch = sched.Schedule(chained_rows)
    i, j = sch.get_loops(sch.get_block("U"))
    with pytest.raises(ScheduleError, match="reorder"):
        sch.reorder(j, i)
    (x,) = _arrays((8, 16))
    expected = x.copy()
    for r in range(7):
        for _ in range(2):
            expected[r + 1] += expected[r]
    (got,) = _run(chained_rows, x)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


@pytest.mark.parametrize("step, message", [
    # inlining needs what the block certainly writes; an opaque block only MAY write
    (lambda s: s.compute_inline(s.get_block("E")), "compute_inline cannot be applied"),
    # the copy back of a cache_write would store elements the call may not have written
    (lambda s: s.cache_write(s.get_block("E"), 0, "local"), "cache_write cannot be applied"),
    # the callee reads A through a pointer with A's layout: a cache would change it
    (lambda s: s.cache_read(s.get_block("E"), 0, "local"), "would change it"),
    # moving it into C's loop would need its certain writes (and run it per element)
    (lambda s: s.compute_at(s.get_block("E"), s.get_loops(s.get_block("C"))[1]),
     "compute_at cannot be applied"),
])
def test_steps_that_need_certain_writes_or_change_the_block_are_refused(step, message):
    sch = sched.Schedule(row_then_scale)
    before = sch.func
    with pytest.raises(ScheduleError, match=message):
        step(sch)
    assert sch.func is before


def test_transform_layout_of_a_buffer_an_opaque_call_points_into_is_refused():
    @T.prim_func
    def local(A: T.Buffer((8, 16), "float32"), C: T.Buffer((8, 16), "float32")):
        B = T.alloc_buffer((8, 16))
        for i in range(8):
            with T.block("E"):
                vi = T.axis.spatial(8, i)
                T.reads(A[vi, 0:16])
                T.writes(B[vi, 0:16])
                T.evaluate(T.call_extern("int32", "scale_row", A.data, B.data, 16))
        for i, j in T.grid(8, 16):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = B[vi, vj]

    # the callee indexes B with B's row-major layout
    sch = sched.Schedule(local)
    with pytest.raises(ScheduleError, match="would change it"):
        sch.transform_layout(sch.get_block("C"), ("read", 0), lambda i, j: (j, i))


def test_reverse_compute_inline_into_an_opaque_producer_is_refused():
    sch = sched.Schedule(row_then_scale)
    with pytest.raises(ScheduleError, match="reverse_compute_inline"):
        sch.reverse_compute_inline(sch.get_block("C"))


def test_parallel_refused_when_the_declared_regions_overlap():
    # each row's call declares the whole of X: the iterations may touch the same elements
    @T.prim_func
    def whole(X: T.Buffer((8, 16), "float32")):
        for i in range(8):
            with T.block("U"):
                vi = T.axis.spatial(8, i)  # noqa: F841 (every row declares all of X)
                T.reads(X[0:8, 0:16])
                T.writes(X[0:8, 0:16])
                T.evaluate(T.call_extern("int32", "add_one_in_place", X.data, 16))

    sch = sched.Schedule(whole)
    with pytest.raises(ScheduleError, match="parallel"):
        sch.parallel(sch.get_loops(sch.get_block("U"))[0])
    (x,) = _arrays((8, 16))
    (got,) = _run(whole, x)
    expected = x.copy()
    expected[0] += 8
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_undeclared_pointer_target_is_read_and_written_whole():
    # no T.reads/T.writes: the parser infers the whole buffer for an address it cannot see
    # through, so the rows may not run in parallel
    @T.prim_func
    def undeclared(X: T.Buffer((8, 16), "float32")):
        for i in range(8):
            with T.block("U"):
                vi = T.axis.spatial(8, i)
                T.evaluate(T.call_extern("int32", "add_one_in_place",
                                         T.address_of(X[vi, 0]), 16))

    block = undeclared.body.block.body.body.block
    assert is_opaque(block)
    assert [str(r) for r in block.writes] == ["X[0:8, 0:16]"]
    sch = sched.Schedule(undeclared)
    with pytest.raises(ScheduleError, match="parallel"):
        sch.parallel(sch.get_loops(sch.get_block("U"))[0])


def test_impure_extern_in_a_value_makes_the_block_opaque_but_pure_does_not():
    @T.prim_func
    def calls(A: T.Buffer((16,), "float32"), D: T.Buffer((16,), "float32")):
        B = T.alloc_buffer((16,))
        C = T.alloc_buffer((16,))
        for i in range(16):
            with T.block("Q"):
                vi = T.axis.spatial(16, i)
                B[vi] = T.call_extern("float32", "expf", A[vi])
        for i in range(16):
            with T.block("P"):
                vi = T.axis.spatial(16, i)
                C[vi] = T.call_pure_extern("float32", "expf", B[vi])
        for i in range(16):
            with T.block("R"):
                vi = T.axis.spatial(16, i)
                D[vi] = C[vi] + T.float32(1)

    assert sched.parse(calls.script()) == calls
    sch = sched.Schedule(calls)
    sch.compute_inline(sch.get_block("P"))          # a pure function: inlined
    with pytest.raises(ScheduleError, match="opaque"):
        sch.compute_inline(sch.get_block("Q"))
    a = np.linspace(-1, 1, 16).astype("float32")
    d = np.zeros(16, "float32")
    sched.build(sch.func, target="c")(a, d)
    np.testing.assert_allclose(d, np.exp(np.exp(a)) + 1, rtol=1e-5)


def test_interpreter_refuses_opaque_calls():
    a, b, c = _arrays((8, 16), (8, 16), (8, 16))
    with pytest.raises(NotImplementedError, match="extern_c"):
        sched.interpret(row_then_scale, a, b, c)


def test_cuda_source_emits_the_call_as_written():
    sch = sched.Schedule(row_then_scale)
    (i,) = sch.get_loops(sch.get_block("E"))
    sch.bind(i, "blockIdx.x")
    i, j = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    from sched.cuda.build import generate_kernel

    source = generate_kernel(sch.func, extern_c="__device__ int scale_row(const float*, "
                                                 "float*, int);")[2]
    assert "scale_row((&A[" in source and "__device__ int scale_row" in source

"""compute_at and reverse_compute_at with affine indices (sched/schedule/preimage.py): a consumer
that reads its producer, or a producer that stores, at affine indices of several of its
variables, `//` and `%` included: the new loops cover the instances one iteration makes
computable or needs; the move is checked as every move is."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError

A = te.placeholder((16,), "float32", name="A")
B = te.compute((16,), lambda i: A[i] * 2, name="B")


def moved(consumer, factor):
    func = te.create_prim_func([A, consumer])
    sch = sched.Schedule(func)
    (i,) = sch.get_loops(sch.get_block("B"))
    io, _ = sch.split(i, [None, factor])
    sch.reverse_compute_at(sch.get_block(consumer.name), io)
    assert sch.trace.apply(func).func == sch.func
    return sch


def run(sch, shape):
    a = np.random.default_rng(0).random(16, dtype=np.float32)
    out = np.zeros(shape, np.float32)
    sched.build(sch.func, target="c")(a, out)
    out2 = np.zeros(shape, np.float32)
    sched.interpret(sch.func, a, out2)
    np.testing.assert_allclose(out2, out, rtol=1e-6)
    return a, out


def test_a_reshaping_consumer_runs_one_row_per_tile():
    C = te.compute((4, 4), lambda i, j: B[i * 4 + j] + 1, name="C")
    sch = moved(C, 4)
    assert 'v_i, v_j = T.axis.remap("SS", [i_0, ax0])' in sch.func.script()
    a, c = run(sch, (4, 4))
    np.testing.assert_allclose(c, (a * 2 + 1).reshape(4, 4), rtol=1e-6)


def test_a_consumer_with_floordiv_and_floormod_indices():
    C = te.compute((16,), lambda i: B[i // 4 * 4 + (3 - i % 4)] + 1, name="C")
    sch = moved(C, 4)
    assert "v_i = T.axis.spatial(16, i_0 * 4 + ax0)" in sch.func.script()
    a, c = run(sch, (16,))
    np.testing.assert_allclose(c, (a * 2 + 1).reshape(4, 4)[:, ::-1].reshape(16), rtol=1e-6)


@pytest.mark.parametrize("index, reference", [
    ("T.truncdiv(vi, 2)", lambda v: v // 2),
    ("T.truncmod(vi, 8) + vi // 8 * 8", lambda v: v),
    ("T.if_then_else(vi < 8, vi, 23 - vi)", lambda v: v if v < 8 else 23 - v),
])
def test_a_consumer_with_piecewise_indices_runs_what_each_tile_makes_computable(index,
                                                                               reference):
    # the consumer instances whose reads a tile writes, with truncating division and
    # selects in the index (refused as "run more than once" before: audit helper-110)
    f = sched.parse(f"""
@T.prim_func
def f(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = B[{index}] + T.float32(1)
""")
    sch = sched.Schedule(f)
    io, _ = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 4])
    sch.reverse_compute_at(sch.get_block("C"), io)
    a = np.random.default_rng(0).random(16, dtype=np.float32)
    c = np.zeros(16, np.float32)
    sched.build(sch.func, target="c")(a, c)
    np.testing.assert_allclose(c, [a[reference(v)] * 2 + 1 for v in range(16)], rtol=1e-6)


def test_several_rows_per_tile():
    C = te.compute((8, 2), lambda i, j: B[i * 2 + j] * 3, name="C")
    sch = moved(C, 8)
    assert "v_i = T.axis.spatial(8, i_0 * 4 + ax0)" in sch.func.script()
    a, c = run(sch, (8, 2))
    np.testing.assert_allclose(c, (a * 6).reshape(8, 2), rtol=1e-6)


def test_a_stencil_across_tiles_is_refused():
    # C[i] needs B[i + 1], written in the next tile for the last i of each tile
    C = te.compute((15,), lambda i: B[i] + B[i + 1], name="C")
    func = te.create_prim_func([A, C])
    sch = sched.Schedule(func)
    (i,) = sch.get_loops(sch.get_block("B"))
    io, _ = sch.split(i, [None, 4])
    before = sch.func
    with pytest.raises(ScheduleError, match=r"reverse_compute_at: the new order runs C before B"):
        sch.reverse_compute_at(sch.get_block("C"), io)
    assert sch.func == before


def test_compute_at_of_a_producer_storing_at_an_affine_index():
    from sched.script import T

    @T.prim_func
    def reversed_store(A: T.Buffer((16,), "float32"), E: T.Buffer((16,), "float32")):
        D = T.alloc_buffer((16,), "float32")
        for i in range(16):
            with T.block("D"):
                vi = T.axis.spatial(16, i)
                D[15 - vi] = A[vi] + T.float32(1)
        for i in range(16):
            with T.block("E"):
                vi = T.axis.spatial(16, i)
                E[vi] = D[vi] * T.float32(3)

    sch = sched.Schedule(reversed_store)
    (i,) = sch.get_loops(sch.get_block("E"))
    io, _ = sch.split(i, [None, 4])
    # tile io of E reads D[4 io : 4 io + 4], stored by instances 12 - 4 io ... 15 - 4 io
    sch.compute_at(sch.get_block("D"), io)
    assert "vi = T.axis.spatial(16, i_1_0 * -4 + 12 + ax0)" in sch.func.script()
    assert sched.parse(sch.func.script()) == sch.func
    a, e = run(sch, (16,))
    np.testing.assert_allclose(e, (a[::-1] + 1) * 3, rtol=1e-6)


LAYOUTS = {"offset": lambda i: (i + 2,), "reversed": lambda i: (9 - i,),
           "pairs": lambda i: (i // 2, i % 2)}


@pytest.mark.parametrize("reverse", [False, True], ids=["compute_at", "reverse_compute_at"])
@pytest.mark.parametrize("layout", list(LAYOUTS), ids=list(LAYOUTS))
def test_a_partial_last_tile_is_covered_by_the_largest_extent(layout, reverse):
    """B's layout moved (transform_layout) so that the consumer reads B at affine indices,
    then tiles of 4 over 10 elements: the last tile's range is shorter (`[8, 9]`), and the
    moved block's loop takes the largest extent, 4, under its domain guard (refused before:
    "no constant-extent range", "runs some instances more than once"; audit helper-69). A
    reversed layout's box is piecewise (`T.if_then_else(io == 2, 0, 6 - io * 4)`)."""
    a_ = te.placeholder((10,), name="A")
    b_ = te.compute((10,), lambda i: a_[i] * 2.0, name="B")
    c_ = te.compute((10,), lambda i: b_[i] + 1.0, name="C")
    sch = sched.Schedule(te.create_prim_func([a_, c_]))
    sch.transform_layout(sch.get_block("B"), ("write", 0), LAYOUTS[layout])
    tiled, moved_block = ("B", "C") if reverse else ("C", "B")
    io, _ = sch.split(sch.get_loops(sch.get_block(tiled))[0], [None, 4])
    move = sch.reverse_compute_at if reverse else sch.compute_at
    move(sch.get_block(moved_block), io)
    assert "for ax0 in range(4)" in sch.func.script()
    a = np.random.default_rng(1).standard_normal(10).astype(np.float32)
    c = np.zeros(10, np.float32)
    sched.build(sch.func, target="c")(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def test_a_placement_whose_region_starts_at_a_minimum_is_accepted(rng):
    """B is read at rows i and 9 - i, so its rows under loop i start at min(i, 9 - i): isl's
    AST builder wrote that as a select, which the model cannot read in a binding (audit,
    helper-93/98: refused, "is not affine (T.if_then_else(i_1 <= 4, i_1, 9 - i_1))"); a
    piecewise bound that is the minimum or maximum of its pieces is written with T.min/T.max,
    as TVM writes it."""
    A = te.placeholder((10, 6), name="A")
    B = te.compute((10, 6), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((10, 6), lambda i, j: B[i, j] + B[9 - i, j], name="C")
    func = te.create_prim_func([A, C])
    sch = sched.Schedule(func)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
    assert "v_i = T.axis.spatial(10, T.min(i_1, 9 - i_1) + ax0)" in sch.func.script()
    a = rng.standard_normal((10, 6)).astype(np.float32)
    c = np.full((10, 6), np.nan, np.float32)
    sched.build(sch.func, target="c")(a, c)
    np.testing.assert_allclose(c, 2 * a + 2 * a[::-1], rtol=1e-6)

@pytest.mark.parametrize("symbolic", [False, True])
def test_compute_at_a_split_loop_reading_both_ends_runs_the_union_of_the_rows(symbolic, rng):
    """Under io of a split by 4, C reads B's rows 4io..4io+3 and n-4-4io..n-1-4io: the rows
    B runs start at their minimum (audit helper-98: refused as not affine)."""
    n = te.var("n") if symbolic else 16
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[i] + B[n - 1 - i], name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    io, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 4])
    sch.compute_at(sch.get_block("B"), io)
    assert "T.min(" in sch.func.script() and "T.if_then_else" not in sch.func.script()
    sch.parallel(io)
    kernel = sched.build(sch.func, target="c")
    for size in ((1, 3, 4, 9, 16, 21) if symbolic else (16,)):
        a = rng.standard_normal(size).astype(np.float32)
        c = np.full(size, np.nan, np.float32)
        kernel(a, c)
        np.testing.assert_allclose(c, 2 * a + 2 * a[::-1], rtol=1e-6)


def test_compute_at_under_split_symbolic_loops_with_divided_reads_raises_no_isl_error():
    # audit, helper-106: isl "position or range out of bounds" from pairs._fix_free_loops
    # (a division whose own space holds fewer divisions than the map's)
    func = sched.parse("""
@T.prim_func
def f(a: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "int32")
    C = T.match_buffer(c, (n,), "int32")
    B = T.alloc_buffer((n,), "int32")
    for i in range(n):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            B[vi] = A[vi] * 3 + 1
    for i in range(n):
        with T.block("C"):
            vi = T.axis.spatial(n, i)
            C[vi] = B[vi // 2] + B[(n - vi) // 2] + B[T.max(vi - 2, 0)]
""")
    sch = sched.Schedule(func)
    io, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 5])
    _, io1 = sch.split(io, [None, 2])
    try:
        sch.compute_at(sch.get_block("B"), io1)
    except ScheduleError:
        return                                    # refused: fine, a ScheduleError
    kernel = sched.build(sch.func, target="c")
    for size in (1, 4, 11, 23):
        a = np.arange(size, dtype=np.int32)
        c = np.zeros(size, np.int32)
        kernel(a, c)
        b = a * 3 + 1
        v = np.arange(size)
        np.testing.assert_array_equal(c, b[v // 2] + b[(size - v) // 2] + b[np.maximum(v - 2, 0)])


@pytest.mark.parametrize("offset", [0, 3])
@pytest.mark.parametrize("shape", ["16", "17", "n"])
def test_a_cache_of_the_elements_an_upsampling_reads_moves_under_a_tile(shape, offset):
    # the copy runs `for ax0 in range(9)` over a domain of 17: a tile reading A[8] boxes
    # A[8:10], and its copy of A[9], an instance never run, was refused as an added instance
    # (audit helper-110); the new loops keep the old loop's range as a guard, also where the
    # copy's variable is the loop shifted, `v0 = ax0 + 3` (helper-117)
    f = sched.parse(f"""
@T.prim_func
def f(a: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, ({shape} + {offset},), "float32")
    C = T.match_buffer(c, ({shape},), "float32")
    for i in range({shape}):
        with T.block("C"):
            vi = T.axis.spatial({shape}, i)
            C[vi] = A[vi // 2 + {offset}]
""")
    sch = sched.Schedule(f)
    block = sch.get_block("C")
    io, _ = sch.split(sch.get_loops(block)[0], [None, 4])
    sch.compute_at(sch.cache_read(block, 0, "global"), io)
    if shape == "17" and offset == 0:
        assert "T.where(i_0 * 4 // 2 + ax0_1 < 9)" in sch.func.script()
    kernel = sched.build(sch.func, target="c")
    for size in ((16,) if shape == "16" else (17,) if shape == "17" else (1, 5, 17)):
        a = np.random.default_rng(size).random(size + offset, dtype=np.float32)
        c = np.zeros(size, np.float32)
        kernel(a, c)
        np.testing.assert_array_equal(c, a[np.arange(size) // 2 + offset])

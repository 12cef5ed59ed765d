"""rolling_buffer (sched/schedule/rolling_buffer.py): an intermediate buffer filled tile by tile
under a loop shared with its consumers is folded to a window along its sliding axis, with TVM's
predicate; isl proves every read keeps its value. Numbers on the C target and cuda-emu, printed
IR, round trips, and one test per refusal."""

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.schedule.trace import Trace
from sched.script import T


@T.prim_func
def tvm_cascade(A: T.Buffer((12, 12), "int8"), C: T.Buffer((8, 8), "int8")):
    # TVM's docstring example (two 3x3 max pools, the first computed per 4x4 output tile),
    # with the T.init a max pool needs
    B = T.alloc_buffer((10, 10), "int8")
    for i0, i1 in T.grid(2, 2):
        for ax0, ax1, ax2, ax3 in T.grid(6, 6, 3, 3):
            with T.block("B"):
                ax0_1 = T.axis.spatial(10, i0 * 4 + ax0)
                ax1_1 = T.axis.spatial(10, i1 * 4 + ax1)
                rv0, rv1 = T.axis.remap("RR", [ax2, ax3])
                with T.init():
                    B[ax0_1, ax1_1] = T.int8(-128)
                B[ax0_1, ax1_1] = T.max(B[ax0_1, ax1_1], A[ax0_1 + rv0, ax1_1 + rv1])
        for ax0, ax1, ax2, ax3 in T.grid(4, 4, 3, 3):
            with T.block("C"):
                ax0_1 = T.axis.spatial(8, i0 * 4 + ax0)
                ax1_1 = T.axis.spatial(8, i1 * 4 + ax1)
                rv0, rv1 = T.axis.remap("RR", [ax2, ax3])
                with T.init():
                    C[ax0_1, ax1_1] = T.int8(-128)
                C[ax0_1, ax1_1] = T.max(C[ax0_1, ax1_1], B[ax0_1 + rv0, ax1_1 + rv1])


@T.prim_func
def tvm_cascade_no_init(A: T.Buffer((12, 12), "int8"), C: T.Buffer((8, 8), "int8")):
    # TVM's docstring example as written: B reads its elements before writing them
    B = T.alloc_buffer((10, 10), "int8")
    for i0, i1 in T.grid(2, 2):
        for ax0, ax1, ax2, ax3 in T.grid(6, 6, 3, 3):
            with T.block("B"):
                ax0_1 = T.axis.spatial(10, i0 * 4 + ax0)
                ax1_1 = T.axis.spatial(10, i1 * 4 + ax1)
                rv0, rv1 = T.axis.remap("RR", [ax2, ax3])
                B[ax0_1, ax1_1] = T.max(B[ax0_1, ax1_1], A[ax0_1 + rv0, ax1_1 + rv1])
        for ax0, ax1, ax2, ax3 in T.grid(4, 4, 3, 3):
            with T.block("C"):
                ax0_1 = T.axis.spatial(8, i0 * 4 + ax0)
                ax1_1 = T.axis.spatial(8, i1 * 4 + ax1)
                rv0, rv1 = T.axis.remap("RR", [ax2, ax3])
                C[ax0_1, ax1_1] = T.max(C[ax0_1, ax1_1], B[ax0_1 + rv0, ax1_1 + rv1])


@T.prim_func
def lagging(A: T.Buffer((24,), "float32"), C: T.Buffer((12,), "float32")):
    # C, from the second tile on, reads the previous tile's rows of B too: rows 4t - 4..4t - 1
    B = T.alloc_buffer((18,), "float32")
    for t in range(4):
        for ax in range(6):
            with T.block("B"):
                vb = T.axis.spatial(18, t * 4 + ax)
                B[vb] = A[vb] * T.float32(2.0)
        for ax in range(4):
            with T.block("C"):
                vc = T.axis.spatial(12, t * 4 + ax - 4)
                T.where(1 <= t)
                C[vc] = B[vc] + B[vc + 6]


def pool(a, k=3):
    return sliding_window_view(a, (k, k)).max(axis=(2, 3))


def check_replays(func, sch):
    assert sched.parse(sch.func.script()) == sch.func
    assert sch.trace.apply(func).func == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func


def test_tvm_example_folds_rows_to_six_with_tvms_predicate():
    sch = sched.Schedule(tvm_cascade)
    sch.rolling_buffer(sch.get_block("B"), write_buffer_index=0)
    script = sch.func.script()
    assert 'B = T.alloc_buffer((6, 10), "int8")' in script
    assert "T.where((i0 < 1 or 2 <= ax0) and (i1 < 1 or 2 <= ax1))" in script
    assert "B[ax0_1 % 6, ax1_1] = T.max(B[ax0_1 % 6, ax1_1], A[ax0_1 + rv0, ax1_1 + rv1])" \
        in script
    assert "B[(ax0_1 + rv0) % 6, ax1_1 + rv1]" in script
    assert str(sch.trace).splitlines()[-1] == "sch.rolling_buffer(b0, 0)"
    check_replays(tvm_cascade, sch)
    a = np.random.default_rng(0).integers(-128, 128, (12, 12)).astype(np.int8)
    c = np.zeros((8, 8), np.int8)
    sched.build(sch.func, target="c")(a, c)
    np.testing.assert_array_equal(c, pool(pool(a)))


def test_tvm_example_without_init_is_refused():
    # each tile's B starts from what the buffer holds: before the fold a recomputed row
    # starts from its own old value, after it from another row's
    sch = sched.Schedule(tvm_cascade_no_init)
    with pytest.raises(ScheduleError, match="two runs may read different values.*T.init"):
        sch.rolling_buffer("B", 0)
    assert len(sch.trace) == 0 and sch.func is tvm_cascade_no_init


def stencil_cascade(n, taps, stages):
    """`stages` 1-D sums of `taps` neighbours, the last one n long."""
    size = n + stages * (taps - 1)
    A = te.placeholder((size,), name="A")
    def taps_of(prev):
        return lambda i: sum((prev[i + k] for k in range(1, taps)), prev[i])
    stage = A
    for s in range(stages):
        length = size - (s + 1) * (taps - 1)
        stage = te.compute((length,), taps_of(stage), name=f"S{s}")
    return te.create_prim_func([A, stage]), size


def tiled(func, stages, tile):
    """The last stage split by `tile`, every other stage computed at its tile loop."""
    sch = sched.Schedule(func)
    last = sch.get_block(f"S{stages - 1}")
    outer, _ = sch.split(sch.get_loops(last)[0], [None, tile])
    for s in reversed(range(stages - 1)):
        sch.compute_at(sch.get_block(f"S{s}"), outer)
    return sch


def stencil_reference(a, taps, stages):
    for _ in range(stages):
        a = sliding_window_view(a, taps).sum(axis=1)
    return a


@pytest.mark.parametrize("taps, tile, windows", [
    (3, 4, [8, 6]),      # three stages: each stage's window, overlap 4 and 2
    (3, 1, [5, 3]),      # one row per tile: stride 1, the window is the stencil
    (5, 3, [11, 7]),     # a split by 3 of a 5-tap stencil: overlaps 8 and 4
    (2, 8, [10, 9]),
])
def test_three_stage_cascade_rolls_every_intermediate(taps, tile, windows):
    func, size = stencil_cascade(24, taps, 3)
    sch = tiled(func, 3, tile)
    for s, window in enumerate(windows):
        sch.rolling_buffer(f"S{s}", 0)
        assert f'S{s} = T.alloc_buffer(({window},), "float32")' in sch.func.script()
    check_replays(func, sch)
    a = np.random.default_rng(1).random(size, dtype=np.float32)
    out = np.zeros(24, np.float32)
    sched.build(sch.func, target="c")(a, out)
    np.testing.assert_allclose(out, stencil_reference(a, taps, 3), rtol=1e-5)


def test_rolling_the_inner_stage_first_then_the_outer():
    func, size = stencil_cascade(16, 3, 3)
    sch = tiled(func, 3, 4)
    sch.rolling_buffer("S1", 0)
    sch.rolling_buffer("S0", 0)
    a = np.random.default_rng(2).random(size, dtype=np.float32)
    out = np.zeros(16, np.float32)
    sched.build(sch.func, target="c")(a, out)
    np.testing.assert_allclose(out, stencil_reference(a, 3, 3), rtol=1e-5)


def test_a_consumer_reading_further_back_than_the_window_is_refused():
    # at t = 2, C reads B[4], written at t = 0 in slot 4, which B[10] overwrote at t = 2
    sch = sched.Schedule(lagging)
    with pytest.raises(ScheduleError, match=r"block C\[vc=\d+\] reads B\[\d+\] \(slot B\[\d\]\), "
                       r"the value of block B\[vb=\d+\], but after the fold the write of "
                       r"B\[\d+\] to that slot lands between the two"):
        sch.rolling_buffer("B", 0)


def test_an_output_buffer_is_refused():
    func, _ = stencil_cascade(16, 3, 2)
    sch = tiled(func, 2, 4)
    with pytest.raises(ScheduleError, match="'S1' is a parameter of the function, an output"):
        sch.rolling_buffer("S1", 0)


def test_no_overlap_is_refused():
    # a 1-tap stencil: each tile writes exactly the rows its consumer reads
    func, _ = stencil_cascade(16, 1, 2)
    sch = tiled(func, 2, 4)
    with pytest.raises(ScheduleError, match=r"writes S0\[i_1_0 \* 4:i_1_0 \* 4 \+ 4\] in one "
                       r"iteration of loop 'i_1_0': no dimension slides with a loop .* and "
                       r"overlaps"):
        sch.rolling_buffer("S0", 0)


def test_a_tile_that_does_not_divide_says_the_window_changes_size():
    """A last tile cut short makes the window's size piecewise: the refusal says so, where it
    asked for the tiling the user had done (audit helper-50)."""
    func, _ = stencil_cascade(14, 3, 2)
    sch = tiled(func, 2, 4)
    with pytest.raises(ScheduleError, match="its window changes size between iterations .* "
                                            "tile the consumer by a factor that divides"):
        sch.rolling_buffer("S0", 0)


def test_producer_and_consumer_without_a_common_loop_are_refused():
    func, _ = stencil_cascade(16, 3, 2)
    sch = sched.Schedule(func)
    with pytest.raises(ScheduleError, match=r"lowest common ancestor .* is not a loop \(S1 and "
                       r"S0 share no loop\); tile the consumer and sch.compute_at"):
        sch.rolling_buffer("S0", 0)


def test_a_bad_index_is_refused():
    func, _ = stencil_cascade(16, 3, 2)
    sch = tiled(func, 2, 4)
    with pytest.raises(ScheduleError, match=r"expected an index in \[0, 1\) into the writes"):
        sch.rolling_buffer("S0", 1)


def test_a_second_writer_is_refused():
    @T.prim_func
    def two_writers(A: T.Buffer((20,), "float32"), C: T.Buffer((16,), "float32")):
        B = T.alloc_buffer((18,), "float32")
        for t in range(4):
            for ax in range(6):
                with T.block("B"):
                    vb = T.axis.spatial(18, t * 4 + ax)
                    B[vb] = A[vb]
            with T.block("Z"):
                vz = T.axis.spatial(4, t)
                B[vz] = T.float32(0.0)
            for ax in range(4):
                with T.block("C"):
                    vc = T.axis.spatial(16, t * 4 + ax)
                    C[vc] = B[vc] + B[vc + 2]
    with pytest.raises(ScheduleError, match="block\\(s\\) Z write 'B' too"):
        sched.Schedule(two_writers).rolling_buffer("B", 0)


def channels_cascade():
    A = te.placeholder((4, 20), name="A")
    B = te.compute((4, 18), lambda c, i: A[c, i] + A[c, i + 1] + A[c, i + 2], name="B")
    D = te.compute((4, 16), lambda c, i: B[c, i] * B[c, i + 2], name="D")
    func = te.create_prim_func([A, D])
    sch = sched.Schedule(func)
    c, i = sch.get_loops(sch.get_block("D"))
    io, _ = sch.split(i, [None, 4])
    sch.compute_at(sch.get_block("B"), io)
    return func, sch, c, io


def test_gpu_channels_on_blocks_roll_their_rows_on_cuda_emu():
    func, sch, c, _ = channels_cascade()
    sch.bind(c, "blockIdx.x")
    sch.rolling_buffer("B", 0)
    assert 'B = T.alloc_buffer((4, 6), "float32")' in sch.func.script()
    check_replays(func, sch)
    a = np.random.default_rng(3).random((4, 20), dtype=np.float32)
    b = a[:, :-2] + a[:, 1:-1] + a[:, 2:]
    for target in ("c", "cuda-emu"):
        out = np.zeros((4, 16), np.float32)
        sched.build(sch.func, target=target)(a, out)
        np.testing.assert_allclose(out, b[:, :-2] * b[:, 2:], rtol=1e-5)


def test_binding_the_rolling_loop_afterwards_is_refused():
    # the tiles would run at once: each reads rows of the window the previous tile wrote
    _, sch, _, io = channels_cascade()
    sch.rolling_buffer("B", 0)
    with pytest.raises(ScheduleError, match="bind: loop 'i_1_0' carries a flow dependence"):
        sch.bind(io, "blockIdx.x")


def test_a_window_of_symbolic_size_says_the_window_changes_size():
    # the refusal asked for the tiling and compute_at the user had done (audit helper-111)
    n = te.var("n")
    A = te.placeholder((n + 4,), "float32", name="A")
    B = te.compute((n + 2,), lambda i: A[i] + A[i + 1] + A[i + 2], name="B")
    C = te.compute((n,), lambda i: B[i] + B[i + 2], name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    io, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 4])
    sch.compute_at(sch.get_block("B"), io)
    with pytest.raises(ScheduleError, match=r"T.min\(n - i_1_0 \* 4 \+ 2, 6\).* its window "
                       r"changes size between iterations") as refusal:
        sch.rolling_buffer(sch.get_block("B"), 0)
    assert "compute_at the producer under the tile loop first" not in str(refusal.value)


@T.prim_func
def _tiles_from_the_end(A: T.Buffer((20,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((18,), "float32")
    for t in range(4):
        for ax in range(6):
            with T.block("B"):
                vb = T.axis.spatial(18, (3 - t) * 4 + ax)
                B[vb] = A[vb] + A[vb + 1] + A[vb + 2]
        for ax in range(4):
            with T.block("C"):
                vc = T.axis.spatial(16, (3 - t) * 4 + ax)
                C[vc] = B[vc] * B[vc + 2]


def test_a_window_sliding_backwards_says_to_run_the_tiles_forwards():
    # it said no dimension slides and advised tiling and compute_at, already done (audit
    # helper-181)
    with pytest.raises(ScheduleError, match="its window slides backwards .* run the tiles in "
                                            "increasing order"):
        sched.Schedule(_tiles_from_the_end).rolling_buffer("B", 0)

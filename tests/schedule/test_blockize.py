"""blockize (sched/schedule/blockize.py): the subtree of a loop becomes one block with the old
blocks nested inside; the numbers do not change and later steps work on the new block."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.script import T


def matmul(n=16):
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def check_matmul(func, n=16):
    rng = np.random.default_rng(0)
    a, b = (rng.random((n, n), dtype=np.float32) for _ in range(2))
    for run in (lambda *x: sched.build(func, target="c")(*x),
                lambda *x: sched.interpret(func, *x)):
        c = np.zeros((n, n), np.float32)
        run(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def tiled(func):
    sch = sched.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 4])
    ko, ki = sch.split(k, [None, 8])
    sch.reorder(io, jo, ko, ii, ji, ki)
    return sch, (io, jo, ko, ii, ji, ki)


def test_blockize_a_matmul_tile():
    func = matmul()
    sch, (io, jo, ko, ii, ji, ki) = tiled(func)
    tile = sch.blockize(ii)
    script = sch.func.script()
    assert tile.name == "C_o"
    assert 'v_i_0, v_j_0, v_k_0 = T.axis.remap("SSR", [i_0, j_0, k_0])' in script
    assert "T.writes(C[v_i_0 * 4:v_i_0 * 4 + 4, v_j_0 * 4:v_j_0 * 4 + 4])" in script
    assert "A[v_i_0 * 4:v_i_0 * 4 + 4, v_k_0 * 8:v_k_0 * 8 + 8]" in script
    assert "v_k = T.axis.reduce(16, v_k_0 * 8 + k_1)" in script
    assert sched.parse(script) == sch.func
    assert sch.trace.apply(func).func == sch.func
    # the loops of the nested block stop at the new block, as in TVM
    assert [lp.name for lp in sch.get_loops(sch.get_block("C"))] == ["i_1", "j_1", "k_1"]
    assert [lp.name for lp in sch.get_loops(tile)] == ["i_0", "j_0", "k_0"]
    check_matmul(sch.func)


def test_steps_on_a_blockized_tile_are_still_checked():
    sch, (io, jo, ko, ii, ji, ki) = tiled(matmul())
    sch.blockize(ii)
    sch.parallel(io)
    # the outer block's k_0 is a reduce variable: its loop carries the reduction
    with pytest.raises(ScheduleError, match=r"parallel: loop 'k_0' carries a reduction"):
        sch.parallel(ko)
    sch.cache_read(sch.get_block("C_o"), "A", "local")
    check_matmul(sch.func)


def test_blockize_of_a_loop_feeding_spatial_and_reduce_variables_is_refused():
    A = te.placeholder((8, 8), "float32", name="A")
    k = te.reduce_axis((0, 8), name="k")
    S = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="S")
    sch = sched.Schedule(te.create_prim_func([A, S]))
    i, k = sch.get_loops(sch.get_block("S"))
    fused = sch.fuse(i, k)
    outer, inner = sch.split(fused, [None, 4])
    # outer gives both vi and vk: the new block's variable would be neither
    with pytest.raises(ScheduleError, match=r"blockize: loop 'i_k_fused_0' outside loop "
                                            r"'i_k_fused_1' feeds both spatial and reduce "
                                            r"iteration variables"):
        sch.blockize(inner)


@T.prim_func
def rows_summed_twice(X: T.Buffer((4,), "float32"), Z: T.Buffer((4, 3), "float32")):
    for i in range(8):
        with T.block("outer"):
            vo = T.axis.spatial(4, i % 4)
            T.reads(Z[0:4, 0:3])
            T.writes(X[0:4])
            for t in range(3):
                with T.block("inner"):
                    vj = T.axis.spatial(4, vo)
                    vk = T.axis.reduce(3, t)
                    with T.init():
                        X[vj] = T.float32(0)
                    X[vj] = X[vj] + Z[vj, vk]


def test_blockize_inside_a_nested_block():
    # the new block's regions came from polyhedral/ over the loops around the nested block,
    # including `i` outside block "outer", which the new block (inside "outer") may not name:
    # the step crashed in the verifier (found by the fuzzer). Such a box is the whole buffer
    sch = sched.Schedule(rows_summed_twice)
    sch.blockize(sch.get_loops(sch.get_block("inner"))[0])
    script = sch.func.script()
    assert "v_vo = T.axis.spatial(4, vo)" in script
    assert sched.parse(script) == sch.func
    z = np.arange(12, dtype=np.float32).reshape(4, 3)
    x = np.zeros(4, np.float32)
    sched.build(sch.func, target="c")(x, z)
    np.testing.assert_array_equal(x, z.sum(axis=1))


def uneven_matmul(m=36, n=16):
    A = te.placeholder((m, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def check_uneven(func, m=36, n=16):
    rng = np.random.default_rng(0)
    a, b = rng.random((m, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    for run in (lambda *x: sched.build(func, target="c")(*x),
                lambda *x: sched.interpret(func, *x)):
        c = np.zeros((m, n), np.float32)
        run(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tile_loop", ["j_1", "i_2"])
def test_a_guard_that_holds_for_whole_tiles_moves_to_the_new_block(tile_loop):
    # i over 36 in 3 x 4 x 4 (the last 12 rows out of range): (i_0 * 4 + i_1) * 4 + i_2 < 36
    # holds for all of a 4-row tile or for none; blockized at the tile (i_2) or inside it
    # (j_1), the new block takes the guard and the tile's block has none
    func = uneven_matmul()
    sch = sched.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i_0, i_1, i_2 = sch.split(i, [None, 4, 4])
    j_0, j_1 = sch.split(j, [None, 4])
    sch.reorder(i_0, i_1, j_0, i_2, j_1, k)
    sch.blockize(i_2 if tile_loop == "i_2" else j_1)
    script = sch.func.script()
    where = [line.strip() for line in script.splitlines() if "T.where" in line]
    assert where == (["T.where((i_0 * 4 + i_1) * 4 < 36)"] if tile_loop == "i_2" else
                     ["T.where((i_0 * 4 + i_1) * 4 + i_2 < 36)"])
    inner = script[script.index('with T.block("C"):'):]
    assert "T.where" not in inner
    check_uneven(sch.func)


def test_a_guard_that_cuts_a_tile_stays_in_the_nested_block():
    # 36 rows in tiles of 8: the last tile is half in range
    func = uneven_matmul()
    sch = sched.Schedule(func)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    _, i_1 = sch.split(i, [None, 8])
    sch.blockize(i_1)
    script = sch.func.script()
    inner = script[script.index('with T.block("C"):'):]
    assert "T.where(v_i_0 * 8 + i_1 < 36)" in inner
    assert script.count("T.where") == 1
    check_uneven(sch.func)


def _matmul_then_scale(m=24, n=20, k=12):
    A, B = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    D = te.compute((m, n), lambda i, j: C[i, j] * 2.0 + 1.0, name="D")
    return te.create_prim_func([A, B, D])


def test_a_blockized_blocks_neighbours_are_those_of_the_blocks_inside():
    # audit (helper-84): the dependences are between the innermost blocks, and a block
    # blockize made had no consumer ("its consumers: none") though D reads what it writes
    sch = sched.Schedule(_matmul_then_scale())
    i, _, _ = sch.get_loops(sch.get_block("C"))
    _, inner = sch.split(i, [None, 6])
    outer = sch.blockize(inner)
    assert [b.name for b in sch.get_consumers(outer)] == ["D"]
    assert sch.get_producers(outer) == []
    assert [b.name for b in sch.get_producers(sch.get_block("D"))] == ["C"]
    d_outer, _ = sch.split(sch.get_loops(sch.get_block("D"))[0], [None, 6])
    before = sch.func
    with pytest.raises(ScheduleError, match=r"block 'C_o' holds blocks \(blockize made it\).*"
                       r"move the inner block first, then blockize"):
        sch.compute_at(outer, d_outer)
    assert sch.func is before


def test_compute_at_then_blockize_as_the_refusal_advises():
    sch = sched.Schedule(_matmul_then_scale())
    d_outer, _ = sch.split(sch.get_loops(sch.get_block("D"))[0], [None, 6])
    sch.compute_at(sch.get_block("C"), d_outer)
    sch.blockize(sch.get_loops(sch.get_block("C"))[1])
    assert 'T.block("C_o")' in sch.func.script()
    rng = np.random.default_rng(0)
    a, b = rng.random((24, 12), np.float32), rng.random((12, 20), np.float32)
    d = np.zeros((24, 20), np.float32)
    sched.build(sch.func, target="c")(a, b, d)
    np.testing.assert_allclose(d, (a.astype(np.float64) @ b) * 2 + 1, rtol=1e-5)


def test_cache_write_of_a_block_nested_in_a_blockized_one_names_the_outer_block():
    # the outer block was called another writer of C (audit helper-133); caching it works
    A, B = te.placeholder((12, 9), name="A"), te.placeholder((9, 20), name="B")
    sch = sched.Schedule(te.create_prim_func([A, B, te.ops.matmul(A, B)]))
    block = sch.get_block("C")
    sch.blockize(sch.get_loops(block)[2])
    with pytest.raises(ScheduleError, match=r"block 'C' is nested in block 'C_o', which writes "
                                            r"'C' through it; cache the outer block"):
        sch.cache_write(block, 0, "global")
    sch.cache_write(sch.get_block("C_o"), 0, "global")
    rng = np.random.default_rng(2)
    a, b = rng.random((12, 9), dtype=np.float32), rng.random((9, 20), dtype=np.float32)
    c = np.zeros((12, 20), np.float32)
    sched.build(sch.mod, target="c")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


@T.prim_func
def _scaled_then_bumped(A: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    B = T.alloc_buffer((64, 64))
    for i, j in T.grid(64, 64):
        with T.block("b"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(64, 64):
        with T.block("c"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + 1.0


def test_a_blockized_block_declares_what_its_blocks_read_after_an_inline():
    # c_o kept reading B once b was inlined into c: its script read a buffer nothing wrote,
    # and cache_read of its read 0 copied B, not A (audit helper-133)
    sch = sched.Schedule(_scaled_then_bumped)
    io, _ = sch.split(sch.get_loops(sch.get_block("c"))[0], [None, 16])
    outer = sch.blockize(sch.get_loops(sch.get_block("c"))[1])
    assert "T.reads(B[v_i_1_0 * 16:v_i_1_0 * 16 + 16, 0:64])" in sch.mod.script()
    sch.compute_inline(sch.get_block("b"))
    assert "T.reads(A[0:64, 0:64])" in sch.mod.script()
    assert "T.reads(B" not in sch.mod.script()
    sch.cache_read(outer, 0, "shared")
    script = sch.mod.script()
    assert 'with T.block("A_shared")' in script and "T.reads(A_shared[0:64, 0:64])" in script
    a = np.random.default_rng(0).random((64, 64), dtype=np.float32)
    c = np.zeros((64, 64), np.float32)
    sched.build(sch.mod, target="c")(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)
    assert sched.parse(script) is not None


@T.prim_func
def _outer_with_own_reads(A: T.Buffer((16,), "float32"), N: T.Buffer((4,), "int32"),
                          B: T.Buffer((16,), "float32"), D: T.Buffer((8,), "float32")):
    for io in range(4):
        with T.block("outer"):
            vo = T.axis.spatial(4, io)
            T.reads(A[vo * 4:vo * 4 + 4], N[vo])
            T.writes(B[vo * 4:vo * 4 + 4])
            for ii in range(4):
                if N[vo] > ii:
                    with T.block("inner"):
                        vi = T.axis.spatial(16, vo * 4 + ii)
                        B[vi] = A[vi] + 1.0
    for k in range(8):
        with T.block("d"):
            vk = T.axis.spatial(8, k)
            D[vk] = 1.0


def test_an_outer_block_with_accesses_of_its_own_keeps_its_regions():
    # its `if N[vo] > ii` read N outside the nested block: the refreshed regions lost N, and
    # the next step, elsewhere, failed to verify (audit helper-149)
    sch = sched.Schedule(_outer_with_own_reads)
    sch.split(sch.get_loops(sch.get_block("d"))[0], [2, 4])
    assert "T.reads(A[vo * 4:vo * 4 + 4], N[vo])" in sch.mod.script()


def test_tvm_keyword_spellings_of_blockize_and_cache_read():
    # blockize(loop, preserve_unit_iters=True) was a raw TypeError; consumer_blocks=[] (what
    # TVM's wrapper passes for None) was refused (audit helper-151)
    sch = sched.Schedule(_scaled_then_bumped)
    i_0, i_1 = sch.split(sch.get_loops(sch.get_block("c"))[0], [None, 16])
    sch.blockize(i_1, preserve_unit_iters=True)
    sch.cache_read(sch.get_block("b"), 0, "global", consumer_blocks=[])
    a = np.random.default_rng(1).random((64, 64), dtype=np.float32)
    c = np.zeros((64, 64), np.float32)
    sched.build(sch.mod, target="c")(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


@T.prim_func
def _shifted_then_added(A: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    B = T.alloc_buffer((64, 64))
    for i, j in T.grid(64, 64):
        with T.block("b"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[(vi + 16) % 64, vj] * 2.0
    for i, j in T.grid(64, 64):
        with T.block("c"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + A[vi, vj]


def test_a_blockized_block_declares_more_of_a_buffer_its_blocks_read_more_of():
    # b inlined into a blockized c: its nested block reads every row of A, the outer block
    # kept declaring 16 (audit helper-149)
    sch = sched.Schedule(_shifted_then_added)
    sch.split(sch.get_loops(sch.get_block("c"))[0], [None, 16])
    sch.blockize(sch.get_loops(sch.get_block("c"))[1])
    assert "T.reads(B[v_i_1_0 * 16:v_i_1_0 * 16 + 16, 0:64], A[v_i_1_0 * 16:v_i_1_0 * 16 " \
        "+ 16, 0:64])" in sch.mod.script()
    sch.compute_inline(sch.get_block("b"))
    assert "T.reads(A[0:64, 0:64])" in sch.mod.script()


@T.prim_func
def _tvm_blockized_reduction(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
                             C: T.Buffer((16, 16), "float32")):
    A1 = T.alloc_buffer((16, 16))
    A2 = T.alloc_buffer((16, 16))
    for i, k in T.grid(16, 16):
        with T.block("A1"):
            vi, vk = T.axis.remap("SS", [i, k])
            A1[vi, vk] = A[vi, vk] + T.float32(1)
    for i, k in T.grid(16, 16):
        with T.block("A2"):
            vi, vk = T.axis.remap("SS", [i, k])
            A2[vi, vk] = A1[vi, vk] * T.float32(2)
    for io, jo, ko in T.grid(2, 2, 2):
        with T.block("C_o"):
            vio, vjo, vko = T.axis.remap("SSR", [io, jo, ko])
            T.reads(A2[vio * 8:vio * 8 + 8, vko * 8:vko * 8 + 8],
                    B[vko * 8:vko * 8 + 8, vjo * 8:vjo * 8 + 8])
            T.writes(C[vio * 8:vio * 8 + 8, vjo * 8:vjo * 8 + 8])
            with T.init():
                for ii, ji in T.grid(8, 8):
                    with T.block("C_init"):
                        vi, vj = T.axis.remap("SS", [ii, ji])
                        C[vio * 8 + vi, vjo * 8 + vj] = T.float32(0)
            for ii, ji, ki in T.grid(8, 8, 8):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [ii, ji, ki])
                    C[vio * 8 + vi, vjo * 8 + vj] = C[vio * 8 + vi, vjo * 8 + vj] + \
                        A2[vio * 8 + vi, vko * 8 + vk] * B[vko * 8 + vk, vjo * 8 + vj]


def test_a_blockized_reduction_with_an_init_declares_what_its_blocks_read_after_an_inline():
    # TVM's blockized reduction holds its init's blocks in a T.init(): C_o kept reading A2
    # once A2 was inlined, and cache_read(C_o, "A1") was refused (audit helper-161)
    sch = sched.Schedule(_tvm_blockized_reduction)
    sch.compute_inline(sch.get_block("A2"))
    assert "A2[" not in sch.mod.script()
    sch.cache_read(sch.get_block("C_o"), "A1", "shared")
    a, b = (np.random.default_rng(s).random((16, 16), dtype=np.float32) for s in (0, 1))
    c = np.zeros((16, 16), np.float32)
    sched.build(sch.mod, target="c")(a, b, c)
    np.testing.assert_allclose(c, ((a + 1) * 2) @ b, rtol=1e-5)

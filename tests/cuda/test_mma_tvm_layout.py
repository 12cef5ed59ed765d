"""TVM's mma schedules carry over: the "warp" buffers laid out with transform_layout and
TVM's `shared_16x16_to_ldmatrix_32x8_layout`, tensorized with TVM's intrinsic names (their
32x8 forms, sched/tensor_intrin/mma_layout.py), build for the C target, for cuda-emu and
for sm_80/sm_90 (no spills, ldmatrix and mma.sync in the source, HMMA in the SASS); the
numbers match numpy; a layout or a map that the 32x8 forms do not describe is refused."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.ir.nodes import Range, Var, const
from sched.polyhedral.expr_equality import equal_on_box
from sched.tensor_intrin.cuda import (
    ldmatrix_32x8_to_shared_16x16_layout,
    shared_16x16_to_ldmatrix_32x8_layout,
)
from tests.cuda.test_wmma_codegen import sass_of
from tests.schedule.test_tensorize_wmma import fp16_inputs


def warp_tiles(i, j):
    """TVM's index map for a warp buffer: 16x16 tiles, each in the 32x8 ldmatrix layout."""
    return (i // 16, j // 16, *shared_16x16_to_ldmatrix_32x8_layout(i % 16, j % 16))


def tvm_mma_schedule(M, N, K, warps=(2, 2), fragments=(2, 2), k_tiles=2, index_map=warp_tiles,
                     names=("mma_ldmatrix_f16_a", "mma_ldmatrix_f16_b"), stop=None,
                     trans_b=False):
    """TVM's mma_schedule, as sched takes it: C tiled per block/warp/fragment, A and B staged
    in shared memory by the whole block (16-byte vectors) and in warp buffers per 16 of k;
    the three warp buffers laid out with `index_map`; blockize + tensorize with TVM's names.
    The steps come in another order than TVM's (both levels cached before compute_at;
    decompose_reduction on the inner block, before blockize), which stays legal too;
    tests/cuda/test_tvm_mma_schedule.py runs TVM's own order. `trans_b`: B held n x k (TVM's
    `_trans` load and `mma_f16f16f32_trans_b`)."""
    A = te.placeholder((M, K), "float16", name="A")
    B = te.placeholder((N, K) if trans_b else (K, N), "float16", name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(
        te.cast(A[i, k], "float32") * te.cast(B[j, k] if trans_b else B[k, j], "float32"),
        axis=k), name="C")
    sch = sched.Schedule(te.create_prim_func([A, B, C], name="mma_tvm_layout"))
    block = sch.get_block("C")
    i, j, r = sch.get_loops(block)
    bi, wi, fi, ii = sch.split(i, [None, warps[0], fragments[0], 16])
    bj, wj, fj, jj = sch.split(j, [None, warps[1], fragments[1], 16])
    ko, ki, kk = sch.split(r, [None, k_tiles, 16])
    sch.reorder(bi, bj, wi, wj, ko, ki, fi, fj, ii, jj, kk)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(wi, "threadIdx.z")
    sch.bind(wj, "threadIdx.y")
    c_warp = sch.cache_write(block, 0, "warp")
    sch.reverse_compute_at(c_warp, wj)
    operands = []
    for index in (0, 1):
        shared = sch.cache_read(block, index, "shared")
        warp = sch.cache_read(block, index, "warp")
        sch.compute_at(warp, ki)
        sch.compute_at(shared, ko)
        fused = sch.fuse(*sch.get_loops(shared)[-2:])
        _, tz, ty, tx, vector = sch.split(fused, [None, warps[0], warps[1], 32, 8])
        sch.bind(tz, "threadIdx.z")
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        sch.vectorize(vector)
        operands.append(warp)
    init = sch.decompose_reduction(block, ko)

    def tile(stage):
        rows, cols = sch.get_loops(stage)[-2:]
        row_tiles, row = sch.split(rows, [None, 16])
        col_tiles, col = sch.split(cols, [None, 16])
        sch.reorder(row_tiles, col_tiles, row, col)
        return row

    loop_a, loop_b, loop_c = tile(operands[0]), tile(operands[1]), tile(c_warp)
    sch.transform_layout(operands[0], ("write", 0), index_map)
    sch.transform_layout(operands[1], ("write", 0), index_map)
    sch.transform_layout(c_warp, ("read", 0), index_map)
    if stop == "layout":
        return sch
    sch.tensorize(loop_a, names[0])
    sch.tensorize(loop_b, names[1])
    update = sch.blockize(sch.get_loops(block)[-3])
    sch.tensorize(update, "mma_f16f16f32_trans_b" if trans_b else "mma_f16f16f32")
    sch.tensorize(sch.get_loops(init)[-2], "mma_fill_16x16_f32")
    sch.tensorize(loop_c, "mma_store_16x16_f32_global_")
    return sch


M, N, K = 64, 64, 64       # two thread blocks of four warps, each warp two 16x16 tiles of C


@pytest.fixture(scope="module")
def schedule_64():
    return tvm_mma_schedule(M, N, K, fragments=(1, 2))


def test_the_map_and_its_inverse_are_tvms_bijection():
    places = [shared_16x16_to_ldmatrix_32x8_layout(i, j) for i in range(16) for j in range(16)]
    assert sorted(places) == [(r, c) for r in range(32) for c in range(8)]
    assert shared_16x16_to_ldmatrix_32x8_layout(9, 3) == (4 * 1 + 1, 0 + 2 + 1)
    assert all(ldmatrix_32x8_to_shared_16x16_layout(*shared_16x16_to_ldmatrix_32x8_layout(i, j))
               == (i, j) for i in range(16) for j in range(16))


def test_transform_layout_gives_32x8_blocks_and_tensorize_takes_the_32x8_forms(schedule_64):
    script = schedule_64.func.script()
    assert 'A_shared_warp = T.alloc_buffer((4, 4, 32, 8), "float16", scope="warp")' in script
    assert 'C_warp = T.alloc_buffer((4, 4, 32, 8), "float32", scope="warp")' in script
    # the ldmatrix implementation's loops, over the 32x8 layout of TVM's description
    assert ("A_shared_warp[v_i_0_1 * 2 + v_i_1_1, v_k_0_1 * 2 + v_k_1_1, 4 * (vi % 8) + "
            "vj % 8 // 2, 4 * (vj // 8) + vi // 8 * 2 + vj % 2] = A_shared[v_i_0_1 * 32 + "
            "v_i_1_1 * 16 + vi, v_k_0_1 * 32 + v_k_1_1 * 16 + vj]") in script
    assert 'T.serial(16, annotations={"warp_intrinsic": "ptx_mma_m16n8k16"})' in script
    trace = str(schedule_64.trace)
    assert ("lambda i, j: (i // 16, j // 16, 4 * (i % 16 % 8) + j % 16 % 8 // 2, "
            "4 * (j % 16 // 8) + i % 16 // 8 * 2 + j % 16 % 2)") in trace
    for name in ("mma_ldmatrix_f16_a", "mma_ldmatrix_f16_b", "mma_f16f16f32",
                 "mma_fill_16x16_f32", "mma_store_16x16_f32_global_"):
        assert f"{name!r}" in trace


def test_the_trace_replays_from_json():
    from sched.schedule.trace import Trace

    sch = tvm_mma_schedule(32, 32, 32, (1, 1), (1, 1), 1)
    replayed = Trace.from_json(sch.trace.to_json()).apply(sch.original_func)
    assert replayed.func.script() == sch.func.script()


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_tvm_layout_matmul_matches_numpy(target, schedule_64):
    a, b, expected = fp16_inputs(M, N, K)
    c = np.zeros((M, N), np.float32)
    sched.build(schedule_64.func, target=target)(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_tvm_layout_matmul_compiles_without_spills(arch, schedule_64):
    kernel = sched.build(schedule_64.func, target="cuda", arch=arch)
    resources = kernel.resources
    assert (resources.spill_stores, resources.spill_loads, resources.local_bytes) == (0, 0, 0)
    assert resources.registers <= 128
    source = kernel.source
    # the 32x8 blocks are registers of the lanes, loaded by ldmatrix, multiplied by mma.sync
    assert "float C_warp[16];" in source and "uint32_t A_shared_warp[4];" in source
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in source
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in source
    assert source.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 2


def test_the_sass_holds_hmma(tmp_path, schedule_64):
    kernel = sched.build(schedule_64.func, target="cuda", arch="sm_90")
    sass = sass_of(kernel, tmp_path)
    assert "HMMA.16816.F32" in sass and "LDSM.16.M88.4" in sass
    assert "LDL" not in sass and "STL" not in sass


def test_the_interpreter_runs_the_32x8_forms():
    a, b, expected = fp16_inputs(32, 32, 32)
    c = np.zeros((32, 32), np.float32)
    sch = tvm_mma_schedule(32, 32, 32, warps=(1, 1), fragments=(1, 1), k_tiles=1)
    sched.interpret(sch.func, a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)


def test_a_map_that_is_not_tvms_layout_is_refused_by_tensorize():
    # the transposed placement is a bijection too (transform_layout accepts it), but the
    # 32x8 forms put element (i, j) where TVM's map does; any other place would give the
    # lanes the wrong elements
    def transposed(i, j):
        return (i // 16, j // 16, *shared_16x16_to_ldmatrix_32x8_layout(j % 16, i % 16))

    with pytest.raises(ScheduleError, match=r"cannot tensorize loop .* with "
                                            r"'mma_ldmatrix_f16_a': .*its form over 32x8 warp, "
                                            r"16x16 shared: block .* accesses A_shared_warp"):
        tvm_mma_schedule(32, 32, 32, (1, 1), (1, 1), 1, index_map=transposed)


def test_a_map_that_merges_elements_is_refused_by_transform_layout():
    # lane 4 (i % 8) + (j % 8) // 2 without the column's low bit: two elements per place
    def merging(i, j):
        return (i // 16, j // 16, 4 * (i % 8) + (j % 8) // 2, 4 * (j // 16) + (i % 16) // 8)

    with pytest.raises(ScheduleError, match=r"transform_layout: the index map .* sends two "
                                            r"elements of 'A_shared_warp' to one place"):
        tvm_mma_schedule(32, 32, 32, (1, 1), (1, 1), 1, index_map=merging, stop="layout")


def test_a_transposed_load_is_the_copy_its_description_says():
    # TVM's mma_ldmatrix_f16_b_trans copies the shared tile into the warp buffer as it is
    # held (for its mma_f16f16f32_trans_b); used on a B held k x n with the plain mma, it is
    # that copy still, and the warp buffer gets the registers the mma reading it needs
    sch = tvm_mma_schedule(32, 32, 32, (1, 1), (1, 1), 1,
                           names=("mma_ldmatrix_f16_a", "mma_ldmatrix_f16_b_trans"))
    a, b, expected = fp16_inputs(32, 32, 32)
    for target in ("c", "cuda-emu"):
        c = np.zeros((32, 32), np.float32)
        sched.build(sch.func, target=target)(a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3, err_msg=target)


def test_a_32x8_warp_buffer_read_element_by_element_is_refused_on_cuda():
    # the accumulator stored by the threads themselves: the C target runs it, the GPU cannot
    # (a lane holds one row of each 32x8 block)
    sch = tvm_mma_schedule(32, 32, 32, (1, 1), (1, 1), 1, stop="layout")
    with pytest.raises(ScheduleError, match=r"buffer 'C_warp' \(warp\) is accessed element "
                                            r"by element outside an mma intrinsic"):
        sched.build(sch.func, target="cuda", arch="sm_80")
    a, b, expected = fp16_inputs(32, 32, 32)
    c = np.zeros((32, 32), np.float32)
    sched.build(sch.func, target="c")(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)


def test_isl_decides_equality_of_quasi_affine_indices():
    i, j, o = (Var(n, "int32") for n in "ijo")
    tile = Range(const(0, "int32"), const(16, "int32"))
    lane = 4 * ((o * 16 + i) % 16 % 8) + j % 16 % 8 // 2
    assert equal_on_box(lane, 4 * (i % 8) + j % 8 // 2, {i: tile, j: tile}) is True
    assert equal_on_box(lane, 4 * (j % 8) + i % 8 // 2, {i: tile, j: tile}) is False
    assert equal_on_box(i % 8, i, {i: Range(const(0, "int32"), const(8, "int32"))}) is True
    assert equal_on_box(i * j, i, {i: tile}) is None


def test_cache_write_of_a_blockized_block():
    # TVM's order: blockize first, then cache_write of the outer block (its inner block
    # writes through the cache too)
    a, b, expected = fp16_inputs(32, 32, 32)
    A = te.placeholder((32, 32), "float16", name="A")
    B = te.placeholder((32, 32), "float16", name="B")
    k = te.reduce_axis((0, 32), name="k")
    C = te.compute((32, 32), lambda i, j: te.sum(te.cast(A[i, k], "float32")
                                                 * te.cast(B[k, j], "float32"), axis=k), name="C")
    sch = sched.Schedule(te.create_prim_func([A, B, C]))
    i, j, r = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 16])
    jo, ji = sch.split(j, [None, 16])
    ko, ki = sch.split(r, [None, 16])
    sch.reorder(io, jo, ko, ii, ji, ki)
    outer = sch.blockize(ii)
    sch.cache_write(outer, 0, "local")
    c = np.zeros((32, 32), np.float32)
    sched.build(sch.func, target="c")(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)


def test_tvm_layout_with_b_held_n_by_k_matches_numpy(tmp_path):
    """TVM's NT schedule (B n x k, the weight of a linear layer): mma_ldmatrix_f16_b_trans
    copies the shared n x k tile into the 32x8 layout as it is held, mma_f16f16f32_trans_b
    reads B[map(j, k)]; on cuda-emu the warp tile takes the A operand's registers."""
    sch = tvm_mma_schedule(32, 64, 64, warps=(1, 2), fragments=(2, 2), trans_b=True,
                           names=("mma_ldmatrix_f16_a", "mma_ldmatrix_f16_b_trans"))
    assert "'mma_f16f16f32_trans_b'" in str(sch.trace)
    a, b, expected = fp16_inputs(32, 64, 64)
    for target in ("c", "cuda-emu"):
        c = np.zeros((32, 64), np.float32)
        sched.build(sch.func, target=target)(a, np.ascontiguousarray(b.T), c)
        np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3, err_msg=target)
    kernel = sched.build(sch.func, target="cuda", arch="sm_90")
    resources = kernel.resources
    assert (resources.spill_stores, resources.spill_loads, resources.local_bytes) == (0, 0, 0)
    # both operands held as ldmatrix lays rows out: no .trans; B's registers one apart
    assert "ldmatrix.sync.aligned.m8n8.x4.trans" not in kernel.source
    assert '"r"(B_shared_warp[4 * (j_2) + 0]), "r"(B_shared_warp[4 * (j_2) + 2])' \
        in kernel.source
    sass = sass_of(kernel, tmp_path)
    assert "HMMA.16816.F32" in sass and "LDSM.16.M88.4" in sass and "LDL" not in sass

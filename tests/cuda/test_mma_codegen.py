"""mma.sync m16n8k16 with ldmatrix (sched/cuda/mma.py, sched/tensor_intrin/cuda.py): "warp"
buffers become per-lane registers, the mma intrinsics inline PTX that the emulator runs; the
numbers match numpy on the C target and on cuda-emu (A and B row-major, and both stored
transposed: the four ldmatrix variants); the cubin compiles for sm_80 and sm_90 with no
spills and its SASS holds HMMA and LDSM; schedules the GPU would run differently are refused."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.hand_schedules.gpu import (
    _MMA,
    _fragment_loops,
    _tensor_core_matmul,
    gpu_matmul_mma,
    gpu_matmul_tensor_core,
)
from tests.cuda.test_wmma_codegen import sass_of
from tests.schedule.test_tensorize_wmma import fp16_inputs


@pytest.fixture(scope="module")
def mma_kernel():
    return sched.build(gpu_matmul_mma(64, 64, 64).func, target="cuda", arch="sm_80")


def test_warp_buffers_are_lane_registers_and_the_intrinsics_inline_ptx(mma_kernel):
    source = mma_kernel.source
    assert "float C_warp[32];  // warp: 4 float32 16x16 tile(s), 8 per lane" in source
    assert "uint32_t A_shared_warp[8];" in source and "uint32_t B_shared_warp[8];" in source
    # A row-major in shared: ldmatrix as is; B (k x n) row-major: transposed by ldmatrix
    assert '"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];' in source
    assert '"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16' in source
    assert source.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 2
    assert "#include <mma.h>" not in source          # no nvcuda::wmma


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_mma_matmul_compiles_without_spills(arch, mma_kernel):
    kernel = mma_kernel if arch == "sm_80" else \
        sched.build(gpu_matmul_mma(64, 64, 64).func, target="cuda", arch=arch)
    resources = kernel.resources
    assert (resources.spill_stores, resources.spill_loads, resources.local_bytes) == (0, 0, 0)
    assert resources.registers <= 128


def test_the_sass_holds_hmma_and_ldsm(tmp_path):
    kernel = sched.build(gpu_matmul_mma(64, 64, 64).func, target="cuda", arch="sm_90")
    sass = sass_of(kernel, tmp_path)
    assert "HMMA.16816.F32" in sass            # mma.sync m16n8k16, fp32 accumulate
    assert "LDSM.16.M88.4" in sass             # ldmatrix .x4
    assert "LDSM.16.MT88.4" in sass            # ldmatrix .x4.trans (B)
    assert "LDL" not in sass and "STL" not in sass     # nothing in local memory


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_mma_matmul_numbers(target):
    M, N, K = 64, 64, 96
    a, b, expected = fp16_inputs(M, N, K)
    c = np.zeros((M, N), np.float32)
    sched.build(gpu_matmul_mma(M, N, K, k_tiles=3).func, target=target)(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("schedule", [gpu_matmul_mma, gpu_matmul_tensor_core])
def test_hand_schedules_with_b_held_n_by_k(schedule, tmp_path):
    """`trans_b=True`: C = A @ B.T with B held N x K (a linear layer), pipelined over K
    (cp.async, 3 stages): numbers on the C target and cuda-emu; for sm_90 no spills and the
    tensor-core instructions in the SASS (for mma, B's tiles loaded as A's, without .trans)."""
    M, N, K = 64, 64, 128
    sch = schedule(M, N, K, k_tiles=2, stages=3, trans_b=True)
    a, b, expected = fp16_inputs(M, N, K)
    for target in ("c", "cuda-emu"):
        c = np.zeros((M, N), np.float32)
        sched.build(sch.func, target=target)(a, np.ascontiguousarray(b.T), c)
        np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3, err_msg=target)
    kernel = sched.build(sch.func, target="cuda", arch="sm_90")
    resources = kernel.resources
    assert (resources.spill_stores, resources.spill_loads, resources.local_bytes) == (0, 0, 0)
    sass = sass_of(kernel, tmp_path)
    assert "HMMA.16816.F32" in sass and "LDL" not in sass
    if schedule is gpu_matmul_mma:
        assert "LDSM.16.M88.4" in sass and "LDSM.16.MT88.4" not in sass


def test_the_interpreter_runs_the_mma_intrinsics_reference_loops():
    a, b, expected = fp16_inputs(32, 32, 32)
    c = np.zeros((32, 32), np.float32)
    sched.interpret(gpu_matmul_mma(32, 32, 32, fragments=(1, 1), warps=(1, 1), k_tiles=1).func,
                    a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)


def transposed_matmul(M=32, N=32, K=32):
    """C = AT^T @ BT^T with AT stored (K, M) and BT (N, K), one warp per 16x16 tile of C: the
    warp tiles take the operands' logical layout (reindex_cache_read from the shared tiles)
    and load with mma_ldmatrix_f16_a_trans / _b_trans."""
    AT = te.placeholder((K, M), "float16", name="AT")
    BT = te.placeholder((N, K), "float16", name="BT")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(te.cast(AT[k, i], "float32")
                                               * te.cast(BT[j, k], "float32"), axis=k), name="C")
    sch = sched.Schedule(te.create_prim_func([AT, BT, C], name="mm_tt"))
    block = sch.get_block("C")
    i, j, r = sch.get_loops(block)
    bi, ii = sch.split(i, [None, 16])
    bj, jj = sch.split(j, [None, 16])
    ko, kk = sch.split(r, [None, 16])
    sch.reorder(bi, bj, ko, ii, jj, kk)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    accumulator = sch.cache_write(block, 0, "warp")
    sch.reverse_compute_at(accumulator, bj)
    tiles = []
    for name, layout in (("AT", lambda i, j, k: (i, k)), ("BT", lambda i, j, k: (k, j))):
        shared = sch.cache_read(block, name, "shared")
        tile = sch.reindex_cache_read(block, f"{name}_shared", "warp", layout)
        sch.compute_at(tile, ko)
        sch.compute_at(shared, ko)
        _, tx = sch.split(sch.fuse(*sch.get_loops(shared)[-2:]), [None, 32])
        sch.bind(tx, "threadIdx.x")
        tiles.append(tile)
    init = sch.decompose_reduction(block, ko)
    sch.tensorize(_fragment_loops(sch, tiles[0]), "mma_ldmatrix_f16_a_trans")
    rows = _fragment_loops(sch, tiles[1])          # the copy runs over (n, k): make k outer
    columns = sch.get_loops(tiles[1])[-1]
    sch.reorder(columns, rows)
    sch.tensorize(columns, "mma_ldmatrix_f16_b_trans")
    sch.tensorize(sch.get_loops(init)[-2], "mma_fill_16x16_f32")
    sch.tensorize(sch.get_loops(block)[-3], "mma_f16f16f32")
    sch.tensorize(_fragment_loops(sch, accumulator), "mma_store_16x16_f32_global_")  # TVM's
    return sch


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_operands_stored_transposed_load_with_the_trans_intrinsics(target, rng):
    sch = transposed_matmul()
    at = rng.standard_normal((32, 32)).astype(np.float16)
    bt = rng.standard_normal((32, 32)).astype(np.float16)
    c = np.zeros((32, 32), np.float32)
    kernel = sched.build(sch.func, target=target)
    kernel(at, bt, c)
    expected = at.astype(np.float64).T @ bt.astype(np.float64).T
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)
    if target == "cuda-emu":     # A transposed by ldmatrix .trans, B (n x k) taken as is
        assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in kernel.source
        assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in kernel.source


def test_a_warp_buffer_loaded_with_the_a_load_and_multiplied_as_b_gets_bs_registers():
    # the loads are copies (one description): the B tile loaded with mma_ldmatrix_f16_a gets
    # the registers the mma reading it as B needs (its ldmatrix the B one), on cuda-emu as
    # on the C target
    sch = _tensor_core_matmul("mixed", 32, 32, 32, (1, 1), (1, 1), 1,
                              {**_MMA, "load_b": "mma_ldmatrix_f16_a"})
    a, b, expected = fp16_inputs(32, 32, 32)
    for target in ("c", "cuda-emu"):
        c = np.zeros((32, 32), np.float32)
        sched.build(sch.func, target=target)(a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3, err_msg=target)
    assert sched.build(sch.func, target="cuda", arch="sm_80").source == sched.build(
        _tensor_core_matmul("mixed", 32, 32, 32, (1, 1), (1, 1), 1, _MMA).func,
        target="cuda", arch="sm_80").source


def test_a_warp_buffer_stored_element_by_element_is_refused():
    # 32 threads store the accumulator's elements themselves: on the GPU a lane holds only
    # its part of the tile
    sch = _tensor_core_matmul("by_threads", 32, 32, 32, (1, 1), (1, 1), 1,
                              {**_MMA, "store": None})
    accumulator = sch.get_block("C_warp")
    _, tx = sch.split(sch.fuse(*sch.get_loops(accumulator)[-2:]), [None, 32])
    sch.bind(tx, "threadIdx.x")
    with pytest.raises(ScheduleError, match=r"buffer 'C_warp' \(warp\) is accessed element by "
                                            r"element outside an mma intrinsic"):
        sched.build(sch.func, target="cuda", arch="sm_80")


@pytest.mark.gpu
def test_mma_matmul_on_the_device():
    import torch

    M, N, K = 256, 128, 96
    a, b, expected = fp16_inputs(M, N, K)
    out = torch.zeros((M, N), device="cuda")
    kernel = sched.build(gpu_matmul_mma(M, N, K, k_tiles=3).func, target="cuda")
    kernel(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), out)
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-4, atol=1e-3)
    sch = transposed_matmul(64, 64, 64)
    at, bt = (np.ascontiguousarray(x.T) for x in fp16_inputs(64, 64, 64)[:2])
    out = torch.zeros((64, 64), device="cuda")
    sched.build(sch.func, target="cuda")(torch.from_numpy(at).cuda(),
                                         torch.from_numpy(bt).cuda(), out)
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), fp16_inputs(64, 64, 64)[2], rtol=1e-4,
                               atol=1e-3)


def _padded_by_4(sch):
    """`sch` with its shared tiles' rows 4 halves (8 bytes) past 32 * n apart."""
    for name in ("A_shared", "B_shared"):
        sch.storage_align(sch.get_block(name), 0, axis=0, factor=32, offset=4)
    return sch


def test_rows_padded_off_16_bytes_are_refused_with_the_padding_as_the_reason():
    # the refusal ended "a step after tensorize changed it?", where only the padding did
    # (audit helper-112)
    with pytest.raises(ScheduleError, match=r"ptx_ldmatrix_a: .* not 16-byte aligned, as "
                       r"ldmatrix reads them: pad the shared tile's rows to a multiple of 8 "
                       r"elements; the C target") as refusal:
        sched.build(_padded_by_4(gpu_matmul_mma(64, 64, 64, pad=0)).func, target="cuda",
                    arch="sm_80")
    assert "tensorize" not in str(refusal.value)

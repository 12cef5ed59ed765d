"""TVM's mma_schedule (tvm.testing.tir.mma_schedule, written here from its steps) runs in sched
as TVM writes it, only the imports changed: on a `te` matmul and on the same matmul written
as TVMScript with TVM's `T.reads(A, B)`, it builds for the C target and cuda-emu and matches
numpy, and compiles for sm_80 with NVRTC without spills (no GPU needed).

The steps it relies on, each as TVM has it: cache_read(block, 0) names A (a reduction's
accumulated output is not among the first reads); blockize of a reduction block moves the
init to the outer block (decompose_reduction of the outer block then makes `C_init`);
cache_read of a buffer written inside the consumer's loop nest copies after the writer;
compute_at under the fused, thread-bound `fuse(j2, i2)` leaves no always-true guard; and
storage_align keeps later steps fast."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.tensor_intrin.cuda import (
    LDMATRIX_16x16_A_INTRIN,
    LDMATRIX_16x16_B_INTRIN,
    MMA_f16f16f32_INTRIN,
    MMA_fill_16x16_f32_INTRIN,
    MMA_store_16x16_f32_global_INTRIN,
    shared_16x16_to_ldmatrix_32x8_layout,
)
from tests.schedule.test_tensorize_wmma import fp16_inputs

# 2 x 2 thread blocks of 2 warps (TVM's i2 * j2), each warp 2 x 1 tiles of 16x16, K in 2 steps
# of 2 k-tiles (128x128x64 takes about 25 s to schedule, 2.5 min before stop 21: the checks
# of the fused loops' steps)
M, N, K = 64, 64, 64
I_FACTORS, J_FACTORS, K_FACTORS = [2, 1, 1, 2, 1], [1, 2, 2, 1, 1], [2, 2, 1]


def index_map(i, j):
    return (i // 16, j // 16, *shared_16x16_to_ldmatrix_32x8_layout(i % 16, j % 16))


def matmul_te(m, n, k):
    a = te.placeholder((m, k), name="A", dtype="float16")
    b = te.placeholder((k, n), name="B", dtype="float16")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((m, n), lambda i, j: te.sum(te.cast(a[i, r], "float32")
                                               * te.cast(b[r, j], "float32"), axis=[r]),
                   name="C")
    return te.create_prim_func([a, b, c])


MATMUL_SCRIPT = f'''
@T.prim_func
def main(A: T.Buffer(({M}, {K}), "float16"), B: T.Buffer(({K}, {N}), "float16"),
         C: T.Buffer(({M}, {N}), "float32")):
    for i, j, k in T.grid({M}, {N}, {K}):
        with T.block("C"):
            v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
            T.reads(A[v_i, v_k], B[v_k, v_j])
            T.writes(C[v_i, v_j])
            with T.init():
                C[v_i, v_j] = T.float32(0)
            C[v_i, v_j] = C[v_i, v_j] + T.Cast("float32", A[v_i, v_k]) \\
                * T.Cast("float32", B[v_k, v_j])
'''


def mma_schedule(workload, k_inner, in_dtype, i_factors, j_factors, k_factors, index_map_A,
                 index_map_B, index_map_C, ldmatrix_a_intrin, ldmatrix_b_intrin, mma_intrin,
                 mma_fill_intrin, mma_store_intrin, shared_scope="shared"):
    """TVM's steps, in TVM's order, with TVM's arguments (b not transposed)."""
    sch = sched.Schedule(workload)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i, i_tc = sch.split(i, factors=[None, 16])
    j, j_tc = sch.split(j, factors=[None, 16])
    k, k_tc = sch.split(k, factors=[None, k_inner])
    sch.reorder(i, j, k, i_tc, j_tc, k_tc)
    block_inner = sch.blockize(i_tc)
    block_outer, block_inner = block_inner, block

    num_ty = i_factors[2] * j_factors[2]
    i0, i1, i2, i3, i4 = sch.split(i, factors=i_factors)
    j0, j1, j2, j3, j4 = sch.split(j, factors=j_factors)
    k0, k1, k2 = sch.split(k, k_factors)
    sch.reorder(i0, j0, i1, j1, j2, i2, k0, k1, i3, j3, k2, i4, j4)
    block_idx = sch.fuse(i0, j0)
    block_idy = sch.fuse(i1, j1)
    thread_idy = sch.fuse(j2, i2)
    sch.bind(block_idx, "blockIdx.x")
    sch.bind(block_idy, "blockIdx.y")
    sch.bind(thread_idy, "threadIdx.y")

    def fetch_to_shared(block, idx, ndim):
        block_read = sch.cache_read(block, idx, shared_scope)
        sch.compute_at(block_read, k0)
        vector_size = 16 if in_dtype == "int8" else 8
        warp_size = 32
        fused = sch.fuse(*sch.get_loops(block_read)[-ndim:])
        _, f_1, f_2, f_3 = sch.split(fused, factors=[None, num_ty, warp_size, vector_size])
        sch.bind(f_2, "threadIdx.x")
        sch.bind(f_1, "threadIdx.y")
        sch.vectorize(f_3)
        offset = 8 if in_dtype == "float16" else 16
        sch.storage_align(block_read, 0, axis=-2, factor=32, offset=offset)
        return block_read

    fetch_to_shared(block_outer, 0, 2)
    fetch_to_shared(block_outer, 1, 2)

    A_warp = sch.cache_read(block_outer, 0, "warp")
    B_warp = sch.cache_read(block_outer, 1, "warp")
    sch.compute_at(A_warp, k1)
    sch.compute_at(B_warp, k1)
    C_warp = sch.cache_write(block_outer, 0, "warp")
    sch.reverse_compute_at(C_warp, thread_idy)

    ii, jj = sch.get_loops(C_warp)[-2:]
    io, ii = sch.split(ii, factors=[None, 16])
    jo, ji = sch.split(jj, factors=[None, 16])
    sch.reorder(io, jo, ii, ji)

    sch.decompose_reduction(block_outer, sch.get_loops(block_outer)[3])
    block_init_c = sch.get_block("C_init")

    def tile_wmma_fragment(block_read, height, width):
        i, j = sch.get_loops(block_read)[-2:]
        i0, i1 = sch.split(i, factors=[None, height])
        j0, j1 = sch.split(j, factors=[None, width])
        sch.reorder(i0, j0, i1, j1)
        return i1

    loop_a = tile_wmma_fragment(A_warp, 16, k_inner)
    loop_b = tile_wmma_fragment(B_warp, k_inner, 16)

    sch.transform_layout(A_warp, ("write", 0), index_map_A)
    sch.transform_layout(B_warp, ("write", 0), index_map_B)
    sch.transform_layout(C_warp, ("read", 0), index_map_C)

    sch.tensorize(loop_a, ldmatrix_a_intrin)
    sch.tensorize(loop_b, ldmatrix_b_intrin)
    sch.tensorize(sch.get_loops(block_inner)[-3], mma_intrin)
    sch.tensorize(sch.get_loops(block_init_c)[-2], mma_fill_intrin)
    sch.tensorize(sch.get_loops(C_warp)[-2], mma_store_intrin)
    return sch


def schedule(workload):
    return mma_schedule(workload, 16, "float16", I_FACTORS, J_FACTORS, K_FACTORS, index_map,
                        index_map, index_map, LDMATRIX_16x16_A_INTRIN, LDMATRIX_16x16_B_INTRIN,
                        MMA_f16f16f32_INTRIN, MMA_fill_16x16_f32_INTRIN,
                        MMA_store_16x16_f32_global_INTRIN)


@pytest.fixture(scope="module")
def scheduled():
    return schedule(matmul_te(M, N, K))


def test_the_schedule_tensorizes_every_stage(scheduled):
    trace = str(scheduled.trace)
    for name in ("mma_ldmatrix_f16_a", "mma_ldmatrix_f16_b", "mma_f16f16f32",
                 "mma_fill_16x16_f32", "mma_store_16x16_f32_global_"):
        assert repr(name) in trace
    script = scheduled.func.script()
    assert "T.where(" not in script          # no always-true guard left by compute_at


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_tvm_mma_schedule_matches_numpy(target, scheduled):
    a, b, expected = fp16_inputs(M, N, K)
    c = np.zeros((M, N), np.float32)
    sched.build(scheduled.func, target=target)(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)


def test_tvm_mma_schedule_compiles_for_sm80_without_spills(scheduled):
    kernel = sched.build(scheduled.func, target="cuda", arch="sm_80")
    resources = kernel.resources
    assert (resources.spill_stores, resources.spill_loads, resources.local_bytes) == (0, 0, 0)
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in kernel.source
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in kernel.source


def test_tvm_mma_schedule_on_a_tvmscript_matmul_with_tvms_reads():
    func = sched.parse(MATMUL_SCRIPT)
    scheduled = schedule(func)
    a, b, expected = fp16_inputs(M, N, K)
    c = np.zeros((M, N), np.float32)
    sched.build(scheduled.func, target="c")(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)


@pytest.fixture(scope="module")
def one_block():
    # blockIdx loops of extent 1 and one k step: isl writes the warp's tile bounds
    # piecewise (ty <= 1 ? 0 : 32); the copies and moved blocks take the program's ty // 2
    return mma_schedule(matmul_te(64, 64, 32), 16, "float16", [1, 1, 2, 2, 1], [1, 1, 2, 1, 2],
                        [1, 2, 1], index_map, index_map, index_map, LDMATRIX_16x16_A_INTRIN,
                        LDMATRIX_16x16_B_INTRIN, MMA_f16f16f32_INTRIN,
                        MMA_fill_16x16_f32_INTRIN, MMA_store_16x16_f32_global_INTRIN)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_tvm_mma_schedule_on_one_thread_block(target, one_block):
    a, b, expected = fp16_inputs(64, 64, 32)
    c = np.zeros((64, 64), np.float32)
    sched.build(one_block.func, target=target)(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)

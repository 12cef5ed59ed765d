"""The CUDA target's tensor-core code (sched/cuda/wmma.py, sched/lower/wmma_fragments.py):
fragments become `nvcuda::wmma::fragment` arrays, the wmma intrinsics' nests become
load_matrix_sync / fill_fragment / mma_sync / store_matrix_sync calls; the cubin compiles for
sm_80 and sm_90 with no spills and its SASS holds HMMA (when cuobjdump is at hand). Schedules
that the GPU would run differently from the C target are refused with the reason."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sched
from sched import compute as te
from sched import hand_schedules as hs
from sched.errors import ScheduleError
from tests.schedule.test_tensorize_wmma import fp16_inputs


@pytest.fixture(scope="module")
def tensor_core_source():
    return sched.build(hs.gpu_matmul_tensor_core(128, 128, 64).func, target="cuda",
                       arch="sm_80").source


def test_fragments_are_wmma_fragments_and_the_intrinsics_wmma_calls(tensor_core_source):
    source = tensor_core_source
    assert "#include <mma.h>" in source
    for declaration in (
            "nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> "
            "C_wmma_accumulator[4];",
            "nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, "
            "nvcuda::wmma::row_major> A_shared_wmma_matrix_a[2];"):
        assert declaration in source
    for call in ("fill_fragment(C_wmma_accumulator[", "load_matrix_sync(A_shared_wmma_matrix_a[",
                 "load_matrix_sync(B_shared_wmma_matrix_b[", "mma_sync(C_wmma_accumulator[",
                 "store_matrix_sync(&C["):
        assert "nvcuda::wmma::" + call in source
    assert "__shared__ __align__(32) __half A_shared" in source
    assert "C_wmma_accumulator[256]" not in source     # no per-thread copy of the tile


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_tensor_core_matmul_compiles_without_spills(arch):
    kernel = sched.build(hs.gpu_matmul_tensor_core(128, 128, 64).func, target="cuda",
                         arch=arch)
    resources = kernel.resources
    assert (resources.spill_stores, resources.spill_loads, resources.local_bytes) == (0, 0, 0)
    assert resources.registers <= 128


def _cuobjdump() -> str | None:
    """cuobjdump on the PATH or from the nvidia-cuda-cuobjdump wheel (with nvdisasm beside
    it, from nvidia-cuda-nvdisasm)."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    for entry in sys.path:
        for candidate in Path(entry).glob("nvidia/cu*/bin/cuobjdump"):
            return str(candidate)
    return None


def sass_of(kernel, tmp_path) -> str:
    """`cuobjdump -sass` of a built kernel's cubin (skips the test without the tools)."""
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not found (pip install nvidia-cuda-cuobjdump "
                    "nvidia-cuda-nvdisasm)")
    cubin = tmp_path / "kernel.cubin"
    cubin.write_bytes(kernel.cubin)
    env = dict(os.environ, PATH=f"{Path(tool).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True,
                            env=env)
    if result.returncode != 0 and "nvdisasm" in result.stderr:
        pytest.skip("cuobjdump needs nvdisasm (pip install nvidia-cuda-nvdisasm)")
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_sass_holds_tensor_core_instructions(tmp_path):
    kernel = sched.build(hs.gpu_matmul_tensor_core(128, 128, 64).func, target="cuda",
                         arch="sm_90")
    sass = sass_of(kernel, tmp_path)
    assert "HMMA.16816.F32" in sass           # the tensor-core multiply
    assert "LDSM" in sass                      # fragments loaded from shared by ldmatrix
    assert "LDL" not in sass and "STL" not in sass     # nothing in local memory


def _matmul(M=32, N=32, K=32):
    A = te.placeholder((M, K), "float16", name="A")
    B = te.placeholder((K, N), "float16", name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(te.cast(A[i, k], "float32")
                                               * te.cast(B[k, j], "float32"), axis=k), name="C")
    return sched.Schedule(te.create_prim_func([A, B, C], name="mm"))


def _one_tile_per_block(store_by_threads: bool):
    """A thread block per 16x16 tile of C, fragments loaded straight from global memory, no
    loop bound to threadIdx; with `store_by_threads`, the accumulator is stored element by
    element by 32 threads (threadIdx.x) instead of by the store intrinsic."""
    sch = _matmul()
    block = sch.get_block("C")
    i, j, r = sch.get_loops(block)
    io, ii = sch.split(i, [None, 16])
    jo, ji = sch.split(j, [None, 16])
    ko, ki = sch.split(r, [None, 16])
    sch.reorder(io, jo, ko, ii, ji, ki)
    sch.bind(io, "blockIdx.y")
    sch.bind(jo, "blockIdx.x")
    accumulator = sch.cache_write(block, 0, "wmma.accumulator")
    sch.reverse_compute_at(accumulator, jo)
    a = sch.cache_read(block, 0, "wmma.matrix_a")
    b = sch.cache_read(block, 1, "wmma.matrix_b")
    sch.compute_at(a, ko)
    sch.compute_at(b, ko)
    init = sch.decompose_reduction(block, ko)
    sch.tensorize(sch.get_loops(a)[-2], "wmma_load_16x16x16_f16_a_global")
    sch.tensorize(sch.get_loops(b)[-2], "wmma_load_16x16x16_f16_b_global")
    sch.tensorize(sch.get_loops(init)[-2], "wmma_fill_16x16x16_f32")
    sch.tensorize(sch.get_loops(block)[-3], "wmma_sync_16x16x16_f16f16f32")
    if store_by_threads:           # 32 threads each store 8 elements of the accumulator
        fused = sch.fuse(*sch.get_loops(accumulator)[-2:])
        _, tx = sch.split(fused, [None, 32])
        sch.bind(tx, "threadIdx.x")
        return sch
    sch.tensorize(sch.get_loops(accumulator)[-2], "wmma_store_16x16x16_f32_global")
    return sch


def test_a_fragment_read_element_by_element_is_refused_on_cuda_but_runs_on_c():
    # the accumulator's elements are stored by 32 threads, 8 each: on the GPU a thread does
    # not hold the elements it would read (their places among the lanes are unspecified)
    sch = _one_tile_per_block(store_by_threads=True)
    with pytest.raises(ScheduleError, match=r"fragment 'C_wmma_accumulator' \(wmma.accumulator"
                       r"\) is accessed element by element outside a tensor-core intrinsic"):
        sched.build(sch.func, target="cuda", arch="sm_80")
    a, b, expected = fp16_inputs(32, 32, 32)
    c = np.zeros((32, 32), np.float32)
    sched.build(sch.func, target="c")(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)


def test_rows_padded_off_16_bytes_are_refused_naming_the_padding():
    # storage_align pads the shared rows by 4 halves (8 bytes): wmma's row stride must be a
    # multiple of 16 bytes; the message points at the padding, not at a step after tensorize
    sch = hs.gpu_matmul_tensor_core(64, 64, 64, pad=0)
    for name in ("A_shared", "B_shared"):
        sch.storage_align(sch.get_block(name), 0, axis=0, factor=32, offset=4)
    with pytest.raises(ScheduleError, match=r"the rows of the tile of 'A_shared' are 36 "
                       r"elements apart: wmma needs a multiple of 16 bytes\. The buffer's row "
                       r"length sets it \(its shape, or the padding storage_align adds\): make "
                       r"it a multiple of 8 float16 elements"):
        sched.build(sch.func, target="cuda", arch="sm_80")
    a, b, expected = fp16_inputs(64, 64, 64)
    c = np.zeros((64, 64), np.float32)
    sched.build(sch.func, target="c")(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)


def test_a_kernel_of_less_than_a_warp_is_refused():
    # nothing is bound to threadIdx: one thread per block cannot run a warp collective
    sch = _one_tile_per_block(store_by_threads=False)
    with pytest.raises(ScheduleError, match=r"thread block of 1 x 1 x 1 threads, not whole "
                                            r"warps of 32.*Bind a loop of extent 32 to "
                                            r"threadIdx.x"):
        sched.build(sch.func, target="cuda", arch="sm_80")


def test_an_intrinsic_whose_operands_differ_across_a_warp_is_refused():
    # each of 32 lanes (threadIdx.x) would store its own 16x16 tile of a 16 x 512 output:
    # the store's pointer differs between the lanes of one warp
    M, N, K = 16, 512, 16
    sch = _matmul(M, N, K)
    block = sch.get_block("C")
    i, j, r = sch.get_loops(block)
    jo, ji = sch.split(j, [None, 16])
    sch.reorder(jo, i, ji, r)
    sch.bind(jo, "threadIdx.x")
    accumulator = sch.cache_write(block, 0, "wmma.accumulator")
    sch.reverse_compute_at(accumulator, jo)
    a = sch.cache_read(block, 0, "wmma.matrix_a")
    b = sch.cache_read(block, 1, "wmma.matrix_b")
    sch.compute_at(a, jo)
    sch.compute_at(b, jo)
    init = sch.decompose_reduction(block, i)
    sch.tensorize(sch.get_loops(a)[-2], "wmma_load_16x16x16_f16_a_global")
    sch.tensorize(sch.get_loops(b)[-2], "wmma_load_16x16x16_f16_b_global")
    sch.tensorize(sch.get_loops(init)[-2], "wmma_fill_16x16x16_f32")
    sch.tensorize(sch.get_loops(block)[-3], "wmma_sync_16x16x16_f16f16f32")
    sch.tensorize(sch.get_loops(accumulator)[-2], "wmma_store_16x16x16_f32_global")
    with pytest.raises(ScheduleError, match=r"nvcuda::wmma::\w+ is a warp collective.*differs: "
                                            r"j_0 is threadIdx.x, which differs in a warp"):
        sched.build(sch.func, target="cuda", arch="sm_80")
    a, b, expected = fp16_inputs(M, N, K)        # the C target runs it (per thread)
    c = np.zeros((M, N), np.float32)
    sched.build(sch.func, target="c")(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)


def test_an_intrinsic_nest_changed_after_tensorize_is_refused_at_that_step():
    # the store's column loop split in two after tensorize would no longer be the 16x16 nest
    # the call stands for: the split is refused (the CUDA build used to refuse the schedule,
    # "cannot emit nvcuda::wmma::store_matrix_sync: loop .. does not run 0..15")
    sch = hs.gpu_matmul_tensor_core(64, 64, 32)
    column = sch.get_loops(sch.get_block("C_wmma_accumulator_o_store"))[-1]
    with pytest.raises(ScheduleError, match=r"split: it changes the loops of the tensor "
                                            r"intrinsic nvcuda::wmma::store_matrix_sync"):
        sch.split(column, [2, 8])
    sched.build(sch.func, target="cuda", arch="sm_80")          # the schedule is unchanged


@pytest.mark.gpu
def test_tensor_core_matmul_with_shared_staging_on_the_device():
    import torch

    M, N, K = 256, 128, 96
    a, b, expected = fp16_inputs(M, N, K)
    out = torch.zeros((M, N), device="cuda")
    sch = hs.gpu_matmul_tensor_core(M, N, K, k_tiles=3)
    kernel = sched.build(sch.func, target="cuda")
    kernel(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), out)
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("operand, accumulator, instruction", [
    ("int8", "int32", "IMMA.16816.S8.S8"), ("float16", "float16", "HMMA.16816.F16"),
])
def test_int8_and_fp16_accumulating_wmma_compile_to_their_tensor_core_instructions(
        operand, accumulator, instruction, tmp_path):
    """TVM's s8s8s32 and f16f16f16 wmma intrinsics (tests/schedule/test_tensorize_wmma.py
    checks their numbers) become the integer and fp16-accumulating tensor-core multiplies."""
    from tests.schedule.test_tensorize_wmma import _matmul_of, _tvm_style_schedule

    short = {"int8": "s8", "int32": "s32", "float16": "f16"}
    sch = _tvm_style_schedule(_matmul_of(operand, accumulator), short[operand],
                              short[accumulator], k_tiles=1, warp_columns=1)
    kernel = sched.build(sch.func, target="cuda", arch="sm_80")
    sass = sass_of(kernel, tmp_path)
    assert instruction in sass
    assert "LDL" not in sass and "STL" not in sass

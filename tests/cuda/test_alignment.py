"""Alignment a CUDA kernel needs beyond its element sizes (sched/cuda/alignment.py): wmma on
a global tile needs 32-byte aligned pointers, checked at each call with the reason (the
emulator checks a view's offset in its allocation, as the GPU would see it); the export
launcher checks the same; local arrays moved as float4/half2 are declared aligned."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sched
from sched import compute as te
from sched import hand_schedules as hs
from sched.cuda.alignment import (
    Alignment,
    allocation_offsets,
    check_pointer_alignment,
)
from sched.cuda.build import generate_kernel
from sched.errors import KernelArgumentError
from tests.schedule.test_tensorize_wmma import fp16_inputs


def wmma_kernel_func():
    """One warp, one 32x32 block: C stored by wmma_store_16x16x16_f32_global."""
    return hs.gpu_matmul_tensor_core(32, 32, 32, fragments=(1, 1), warps=(1, 1),
                                     k_tiles=1).func


def test_a_wmma_store_to_global_needs_32_bytes_and_float4_moves_16():
    *_, aligned = generate_kernel(wmma_kernel_func())
    assert aligned["C"].bytes == 32 and "store_matrix_sync" in aligned["C"].why
    # the shared tiles are fetched 8 halves (16 bytes) at a time
    assert aligned["A"] == aligned["B"] == Alignment(16, "moves it as float4 (16 bytes)")
    A = te.placeholder((64, 64), "float32", name="A")
    B = te.compute((64, 64), lambda i, j: A[i, j], name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    i, j = sch.get_loops(sch.get_block("B"))
    jo, ji = sch.split(j, [None, 4])
    sch.bind(i, "blockIdx.x")
    sch.bind(jo, "threadIdx.x")
    sch.vectorize(ji)
    *_, aligned = generate_kernel(sch.func)
    assert aligned["A"] == aligned["B"] == Alignment(16, "moves it as float4 (16 bytes)")


def test_the_check_names_the_argument_the_bytes_and_why():
    func = wmma_kernel_func()
    needs = [(2, Alignment(32, "stores 16x16 tiles of it with wmma"))]
    check_pointer_alignment(func, needs, [None, None, 0x1000])
    with pytest.raises(KernelArgumentError, match=r"argument 'C': its data is not 32-byte "
                                                  r"aligned \(address 0x1010, 16 bytes past a "
                                                  r"multiple of 32.*this kernel stores 16x16 "
                                                  r"tiles of it with wmma"):
        check_pointer_alignment(func, needs, [None, None, 0x1010])


def test_offsets_in_the_allocation_of_numpy_and_torch_views():
    base = np.zeros(64, np.float32)
    assert allocation_offsets([base, base[4:], base[4:].reshape(6, 10)[1:]]) == [0, 16, 56]
    tensor = torch.zeros(64)
    assert allocation_offsets([tensor, tensor[8:]]) == [0, 32]


def test_a_view_16_bytes_into_its_allocation_is_refused_by_cuda_emu():
    kernel = sched.build(wmma_kernel_func(), target="cuda-emu")
    a, b, expected = fp16_inputs(32, 32, 32)
    storage = np.zeros(32 * 32 + 8, np.float32)
    with pytest.raises(KernelArgumentError, match=r"argument 'C': its data is not 32-byte "
                                                  r"aligned \(offset in its allocation 0x10.*"
                                                  r"store_matrix_sync"):
        kernel(a, b, storage[4:4 + 1024].reshape(32, 32))   # float4-aligned, not 32
    c = storage[8:].reshape(32, 32)                      # 32 bytes in: fine
    kernel(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)
    with pytest.raises(KernelArgumentError, match=r"not 32-byte aligned"):
        kernel(a, b, torch.zeros(32 * 32 + 4)[4:].view(32, 32))   # torch: the same


def test_the_export_launcher_checks_32_bytes_and_says_why(tmp_path):
    kernel = sched.build(wmma_kernel_func(), target="cuda", arch="sm_80")
    exported = kernel.export(tmp_path)
    launcher = next(p for p in exported.files if p.suffix == ".c").read_text()
    assert "(uint64_t)C % 32u != 0" in launcher
    assert "buffer C is not 32-byte aligned: the kernel stores 16x16 tiles of it with " \
           "nvcuda::wmma::store_matrix_sync" in launcher


def local_copy(dtype: str, lanes: int):
    """B = A + A through a local copy of A that a vectorized loop fills."""
    A = te.placeholder((64, 64), dtype, name="A")
    B = te.compute((64, 64), lambda i, j: A[i, j] + A[i, j], name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    block = sch.get_block("B")
    i, j = sch.get_loops(block)
    jo, ji = sch.split(j, [None, lanes])
    sch.bind(i, "blockIdx.x")
    sch.bind(jo, "threadIdx.x")
    cache = sch.cache_read(block, 0, "local")
    sch.compute_at(cache, jo)
    sch.vectorize(sch.get_loops(cache)[-1])
    return sch.func


@pytest.mark.parametrize("dtype, lanes, declaration", [
    ("float32", 4, "__align__(16) float A_local[4];"),
    ("float16", 8, "__align__(16) __half A_local[8];"),
    ("float16", 2, "__align__(4) __half A_local[2];"),
])
def test_local_arrays_moved_as_vectors_are_declared_aligned(dtype, lanes, declaration):
    kernel = sched.build(local_copy(dtype, lanes), target="cuda", arch="sm_80")
    assert declaration in kernel.source
    assert "// vectorized:" in kernel.source

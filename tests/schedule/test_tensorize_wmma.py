"""The wmma tensor intrinsics (sched/tensor_intrin/cuda.py, TVM's names) and the fragment
scopes: a tensor-core schedule (hand_schedules.gpu_matmul_tensor_core) computes fp16 x fp16 ->
fp32 on the C target and on the emulated CUDA; mismatched scopes are refused. The
intrinsics run their reference semantics on every target (no nvcuda::wmma calls yet)."""

import numpy as np
import pytest

import sched
from sched import TensorIntrin
from sched import compute as te
from sched import hand_schedules as hs
from sched.errors import ScheduleError

TVM_NAMES = ("wmma_load_16x16x16_f16_a", "wmma_load_16x16x16_f16_b", "wmma_fill_16x16x16_f32",
             "wmma_sync_16x16x16_f16f16f32", "wmma_store_16x16x16_f32_global")


def fp16_inputs(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    return a, b, a.astype(np.float32) @ b.astype(np.float32)


def test_the_wmma_intrinsics_are_registered_under_tvm_names_with_fragment_scopes():
    assert set(TVM_NAMES) <= set(TensorIntrin.names())
    sync = TensorIntrin.get("wmma_sync_16x16x16_f16f16f32").desc
    assert [(b.dtype, b.scope) for b in sync.params] == [
        ("float16", "wmma.matrix_a"), ("float16", "wmma.matrix_b"),
        ("float32", "wmma.accumulator")]
    assert TensorIntrin.get("wmma_load_16x16x16_f16_a").desc.params[0].scope == "shared"


@pytest.mark.parametrize("shape", [(64, 64, 64), (32, 96, 48)])
def test_tensor_core_matmul_matches_numpy_on_c_and_emulated_cuda(shape):
    M, N, K = shape
    sch = hs.gpu_matmul_tensor_core(M, N, K)
    script = sch.func.script()
    for scope in ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator"):
        assert f'scope="{scope}"' in script
    assert sched.parse(script) == sch.func
    assert sch.trace.apply(sch.original_func).func == sch.func
    a, b, expected = fp16_inputs(M, N, K)
    for target in ("c", "cuda-emu"):
        c = np.zeros((M, N), np.float32)
        sched.build(sch.func, target=target)(a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3, err_msg=target)


def test_tensor_core_matmul_compiles_to_a_cubin_for_sm_80():
    # NVRTC, no GPU needed; the fragments are per-thread arrays for now
    kernel = sched.build(hs.gpu_matmul_tensor_core(64, 64, 32).func, target="cuda", arch="sm_80")
    assert "__global__" in kernel.source


@pytest.mark.gpu
def test_tensor_core_matmul_on_the_device():
    import torch

    a, b, expected = fp16_inputs(64, 64, 64)
    out = torch.zeros((64, 64), device="cuda")
    kernel = sched.build(hs.gpu_matmul_tensor_core(64, 64, 64).func, target="cuda")
    kernel(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), out)
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-4, atol=1e-3)


def test_partial_fragments_are_refused_by_the_hand_schedule():
    with pytest.raises(ValueError, match="M must be a multiple of 32, N of 32 and K of 16"):
        hs.gpu_matmul_tensor_core(40, 32, 16)


def _fp16_matmul_tiles(caches=()):
    A = te.placeholder((32, 32), "float16", name="A")
    B = te.placeholder((32, 32), "float16", name="B")
    k = te.reduce_axis((0, 32), name="k")
    C = te.compute((32, 32), lambda i, j: te.sum(te.cast(A[i, k], "float32")
                                                 * te.cast(B[k, j], "float32"), axis=k),
                   name="C")
    sch = sched.Schedule(te.create_prim_func([A, B, C]))
    block = sch.get_block("C")
    i, j, r = sch.get_loops(block)
    io, ii = sch.split(i, [None, 16])
    jo, ji = sch.split(j, [None, 16])
    ko, ki = sch.split(r, [None, 16])
    sch.reorder(io, jo, ko, ii, ji, ki)
    for cache, index, scope in caches:
        cache(sch, block, index, scope)
    sch.decompose_reduction(block, ko)
    return sch, block, ii


def test_sync_refused_on_global_operands():
    # the multiply reads A and B where they are (global), not from fragments
    sch, block, ii = _fp16_matmul_tiles()
    with pytest.raises(ScheduleError, match=r"C of block 'C_update_o' has scope 'global', the "
                       r"intrinsic's C has scope 'wmma.accumulator'"):
        sch.tensorize(ii, "wmma_sync_16x16x16_f16f16f32")


def test_sync_refused_on_a_fragment_of_the_wrong_kind():
    # A cached as a matrix_b fragment cannot be the intrinsic's matrix_a operand
    sch, block, ii = _fp16_matmul_tiles([
        (sched.Schedule.cache_write, 0, "wmma.accumulator"),
        (sched.Schedule.cache_read, 1, "wmma.matrix_b")])
    with pytest.raises(ScheduleError, match=r"A_wmma_matrix_b of block 'C_update_o' has scope "
                       r"'wmma.matrix_b', the intrinsic's A has scope 'wmma.matrix_a'"):
        sch.tensorize(ii, "wmma_sync_16x16x16_f16f16f32")

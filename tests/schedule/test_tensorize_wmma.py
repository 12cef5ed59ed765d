"""The wmma tensor intrinsics (sched/tensor_intrin/cuda.py, TVM's names) and the fragment
scopes: TVM's tensor-core matmul schedule (A and B staged global -> shared -> fragment, one
accumulator tile per warp) computes fp16 x fp16 -> fp32 on the C target (reference loops) and on
the emulated CUDA (nvcuda::wmma calls); mismatched scopes are refused.
tests/cuda/test_wmma_codegen.py checks the CUDA source, cubin and SASS."""

import numpy as np
import pytest

import sched
from sched import TensorIntrin
from sched import compute as te
from sched import hand_schedules as hs
from sched.errors import ScheduleError

TVM_NAMES = ("wmma_load_16x16x16_f16_a", "wmma_load_16x16x16_f16_b", "wmma_fill_16x16x16_f32",
             "wmma_sync_16x16x16_f16f16f32", "wmma_store_16x16x16_f32_global",
             "wmma_store_16x16x16_f32_shared")


def fp16_inputs(M, N, K, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    return a, b, a.astype(np.float32) @ b.astype(np.float32)


def bf16_inputs(M, N, K, seed=0):
    """bfloat16 operands as sched takes them from numpy (uint16 bit patterns: float32 with
    the low 16 bits cut), and their fp32 product."""
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal(shape).astype(np.float32) for shape in ((M, K), (K, N)))
    a_bits, b_bits = ((x.view(np.uint32) >> 16).astype(np.uint16) for x in (a, b))
    a, b = ((x.astype(np.uint32) << 16).view(np.float32) for x in (a_bits, b_bits))
    return a_bits, b_bits, a @ b


def test_the_wmma_intrinsics_are_registered_under_tvm_names_with_fragment_scopes():
    assert set(TVM_NAMES) <= set(TensorIntrin.names())
    sync = TensorIntrin.get("wmma_sync_16x16x16_f16f16f32").desc
    assert [(b.dtype, b.scope) for b in sync.params] == [
        ("float16", "wmma.matrix_a"), ("float16", "wmma.matrix_b"),
        ("float32", "wmma.accumulator")]
    assert TensorIntrin.get("wmma_load_16x16x16_f16_a").desc.params[0].scope == "shared"
    # the impl is the reference loop nest, marked as the call the CUDA target emits
    impl = TensorIntrin.get("wmma_sync_16x16x16_bf16bf16f32").impl.script()
    assert 'annotations={"warp_intrinsic": "nvcuda::wmma::mma_sync"}' in impl


@pytest.mark.parametrize("shape, options", [
    ((64, 64, 64), {}),
    ((32, 96, 48), {"fragments": (1, 2), "warps": (2, 3), "k_tiles": 3}),
])
def test_tensor_core_matmul_matches_numpy_on_c_and_emulated_cuda(shape, options):
    M, N, K = shape
    sch = hs.gpu_matmul_tensor_core(M, N, K, **options)
    script = sch.func.script()
    for scope in ("shared", "wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator"):
        assert f'scope="{scope}"' in script
    assert sched.parse(script) == sch.func
    assert sch.trace.apply(sch.original_func).func == sch.func
    a, b, expected = fp16_inputs(M, N, K)
    for target in ("c", "cuda-emu"):
        c = np.zeros((M, N), np.float32)
        sched.build(sch.func, target=target)(a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3, err_msg=target)


def _bf16_matmul(M, N, K):
    A = te.placeholder((M, K), "bfloat16", name="A")
    B = te.placeholder((K, N), "bfloat16", name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(te.cast(A[i, k], "float32")
                                               * te.cast(B[k, j], "float32"), axis=k), name="C")
    return te.create_prim_func([A, B, C], name="matmul_bf16")


def _tvm_style_schedule(func, operand: str, accumulator: str, k_tiles: int = 2,
                        warp_columns: int = 2, trans_b: bool = False, names=None,
                        shared_scope: str = "shared",
                        scopes=("wmma.accumulator", "wmma.matrix_a", "wmma.matrix_b")):
    """TVM's tensor-core schedule, step by step (one warp row, two warp columns, M x N x K =
    32 x 64 x 64): the shared tile is computed under k_0, inside the warp loops, so each warp
    recomputes (rewrites) it with the same values; each warp's fragment is reread per k_1
    from it. RUNS_RULE allows the fragment's runs: between them only reruns of the shared
    tile's idempotent instances write what it reads. `operand`, `accumulator`: the short
    names of the intrinsics' types (bf16 and f32, s8 and s32, f16 and f16); `k_tiles`: 16-wide
    K tiles per shared tile; `warp_columns`: warps along N; `trans_b`: B is held n x k (TVM's
    `_trans` intrinsics). `names`: the intrinsics by role (TVM's get_wmma_intrin_group) in
    place of the names made from `operand` and `accumulator`; `shared_scope`: the scope given
    to cache_read for the shared tiles; `scopes`: of the accumulator and the A and B operands
    ("warp" for TVM's mma intrinsics)."""
    trans = "_trans" if trans_b else ""
    names = names or {
        "load_a": f"wmma_load_16x16x16_{operand}_a",
        "load_b": f"wmma_load_16x16x16_{operand}_b{trans}",
        "init": f"wmma_fill_16x16x16_{accumulator}",
        "compute": f"wmma_sync_16x16x16_{operand}{operand}{accumulator}{trans}",
        "store": f"wmma_store_16x16x16_{accumulator}_global"}
    sch = sched.Schedule(func)
    block = sch.get_block("C")
    i, j, r = sch.get_loops(block)
    i0, i1, i2 = sch.split(i, [None, 2, 16])
    j0, j1, j2 = sch.split(j, [None, warp_columns, 16])
    k0, k1, k2 = sch.split(r, [None, k_tiles, 16])
    sch.reorder(i0, j0, j1, k0, k1, i1, i2, j2, k2)
    sch.bind(i0, "blockIdx.x")
    sch.bind(j0, "blockIdx.y")
    sch.bind(j1, "threadIdx.y")
    fragment_c = sch.cache_write(block, 0, scopes[0])
    sch.reverse_compute_at(fragment_c, j1)
    stages = {}
    for index, name in ((0, "a"), (1, "b")):
        shared = sch.cache_read(block, index, shared_scope)
        fragment = sch.cache_read(block, index, scopes[1 + index])
        sch.compute_at(fragment, k1)
        sch.compute_at(shared, k0)
        fused = sch.fuse(*sch.get_loops(shared)[-2:])
        _, ty, tx = sch.split(fused, [None, warp_columns, 32])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        stages[name] = fragment
    init = sch.decompose_reduction(block, k0)
    for name, stage in stages.items():
        rows, cols = sch.get_loops(stage)[-2:]
        ro, ri = sch.split(rows, [None, 16])
        co, ci = sch.split(cols, [None, 16])
        sch.reorder(ro, co, ri, ci)
        sch.tensorize(ri, names[f"load_{name}"])
    sch.tensorize(sch.get_loops(init)[-2], names["init"])
    sch.tensorize(sch.get_loops(block)[-3], names["compute"])
    rows, cols = sch.get_loops(fragment_c)[-2:]
    ro, ri = sch.split(rows, [None, 16])
    sch.reorder(ro, ri, cols)
    sch.tensorize(ri, names["store"])
    assert sched.parse(sch.func.script()) == sch.func
    return sch


def test_tvm_style_two_level_staging_is_legal_and_exact():
    M, N, K = 32, 64, 64
    sch = _tvm_style_schedule(_bf16_matmul(M, N, K), "bf16", "f32")
    a, b, expected = bf16_inputs(M, N, K)
    for target in ("c", "cuda-emu"):
        c = np.zeros((M, N), np.float32)
        sched.build(sch.func, target=target)(a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3, err_msg=target)
    source = sched.build(sch.func, target="cuda", arch="sm_80").source
    assert "nvcuda::wmma::mma_sync" in source and "__nv_bfloat16" in source


def _matmul_of(operand: str, accumulator: str, M=32, N=64, K=64, trans_b=False):
    """C = A @ B (with B held N x K where `trans_b`: C = A @ B.T)."""
    A = te.placeholder((M, K), operand, name="A")
    B = te.placeholder((N, K) if trans_b else (K, N), operand, name="B")
    k = te.reduce_axis((0, K), name="k")
    b = (lambda j: B[j, k]) if trans_b else (lambda j: B[k, j])                  # noqa: E731
    if operand == accumulator:
        body = lambda i, j: te.sum(A[i, k] * b(j), axis=k)                       # noqa: E731
    else:
        body = lambda i, j: te.sum(te.cast(A[i, k], accumulator)                  # noqa: E731
                                   * te.cast(b(j), accumulator), axis=k)
    return te.create_prim_func([A, B, te.compute((M, N), body, name="C")], name="matmul")


def test_int8_wmma_accumulates_exactly_in_int32():
    """TVM's int8 intrinsics (wmma_load_16x16x16_s8_a/b, wmma_fill_16x16x16_s32,
    wmma_sync_16x16x16_s8s8s32, wmma_store_16x16x16_s32_global): the same schedule as the
    bf16 one; products up to 127 * 127, summed exactly (the emulated CUDA sums integers, not
    floats); the CUDA fragments are signed char in and int out, and NVRTC compiles them.
    wmma needs 32-byte aligned tiles: two 16-wide int8 K tiles side by side in shared memory
    put the second 16 bytes in, which the CUDA build refuses, naming the tile; one K tile per
    shared tile and one warp along N (B's tiles side by side would be 16 bytes apart too:
    TVM's int8 schedules hold B transposed for that, its `_trans` intrinsics) are aligned."""
    misaligned = _tvm_style_schedule(_matmul_of("int8", "int32"), "s8", "s32", k_tiles=2)
    with pytest.raises(ScheduleError, match="the tile of 'A_shared' starts at element .* which "
                       "wmma needs 32-byte aligned .* A row of a 16x16 int8 tile is 16 bytes, so "
                       "tiles side by side along a row start only 16 bytes apart: keep one tile "
                       "per row"):
        sched.build(misaligned.func, target="cuda", arch="sm_80")
    sch = _tvm_style_schedule(_matmul_of("int8", "int32"), "s8", "s32", k_tiles=1,
                              warp_columns=1)
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (32, 64)).astype(np.int8)
    b = rng.integers(-128, 128, (64, 64)).astype(np.int8)
    expected = a.astype(np.int64) @ b.astype(np.int64)
    for target in ("c", "cuda-emu"):
        c = np.zeros((32, 64), np.int32)
        sched.build(sch.func, target=target)(a, b, c)
        np.testing.assert_array_equal(c, expected, err_msg=target)
    source = sched.build(sch.func, target="cuda", arch="sm_80").source
    assert "nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, signed char, " \
        "nvcuda::wmma::row_major>" in source
    assert "nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, int>" in source


@pytest.mark.parametrize("operand, accumulator", [("int8", "int32"), ("float16", "float32"),
                                                  ("float16", "float16")])
def test_trans_intrinsics_take_b_held_n_by_k(operand, accumulator):
    """TVM's `_trans` forms (wmma_load_16x16x16_s8_b_trans, wmma_sync_16x16x16_s8s8s32_trans,
    ...): C = A @ B.T with B held N x K; the CUDA matrix_b fragment is column-major. With B
    so held, int8 tiles of two warps side by side are aligned (what TVM holds B this way
    for)."""
    short = {"int8": "s8", "int32": "s32", "float16": "f16", "float32": "f32"}
    sch = _tvm_style_schedule(_matmul_of(operand, accumulator, trans_b=True), short[operand],
                              short[accumulator], k_tiles=1, trans_b=True)
    rng = np.random.default_rng(1)
    if operand == "int8":
        a, b = (rng.integers(-128, 128, shape).astype(np.int8) for shape in ((32, 64), (64, 64)))
    else:
        a, b = (rng.standard_normal(shape).astype(np.float16) for shape in ((32, 64), (64, 64)))
    expected = a.astype(np.float64) @ b.astype(np.float64).T
    for target in ("c", "cuda-emu"):
        c = np.zeros((32, 64), accumulator)
        sched.build(sch.func, target=target)(a, b, c)
        np.testing.assert_allclose(c.astype(np.float64), expected, err_msg=target,
                                   rtol=2e-2 if accumulator == "float16" else 1e-5,
                                   atol=0.25 if accumulator == "float16" else 1e-3)
    source = sched.build(sch.func, target="cuda", arch="sm_80").source
    assert "nvcuda::wmma::matrix_b, 16, 16, 16, " in source
    assert "nvcuda::wmma::col_major> B_shared_wmma_matrix_b" in source


def test_fp16_wmma_accumulates_in_fp16():
    """wmma_sync_16x16x16_f16f16f16 (with wmma_fill_16x16x16_f16 and
    wmma_store_16x16x16_f16_global): C = C + A * B in half, as TVM describes it (no cast)."""
    sch = _tvm_style_schedule(_matmul_of("float16", "float16"), "f16", "f16")
    a, b, expected = fp16_inputs(32, 64, 64)
    for target in ("c", "cuda-emu"):
        c = np.zeros((32, 64), np.float16)
        sched.build(sch.func, target=target)(a, b, c)
        np.testing.assert_allclose(c.astype(np.float32), expected, rtol=2e-2, atol=0.25,
                                   err_msg=target)
    source = sched.build(sch.func, target="cuda", arch="sm_80").source
    assert "nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, half>" in source


@pytest.mark.gpu
def test_tensor_core_matmul_on_the_device():
    import torch

    a, b, expected = fp16_inputs(128, 128, 64)
    out = torch.zeros((128, 128), device="cuda")
    kernel = sched.build(hs.gpu_matmul_tensor_core(128, 128, 64).func, target="cuda")
    kernel(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), out)
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-4, atol=1e-3)


def test_partial_fragments_are_refused_by_the_hand_schedule():
    with pytest.raises(ValueError, match="M must be a multiple of 64, N of 64 and K of 32"):
        hs.gpu_matmul_tensor_core(40, 64, 32)
    with pytest.raises(ValueError, match=r"gpu_matmul_mma: pad must be 0, 8, 16 or 24 halves"):
        hs.gpu_matmul_mma(64, 64, 32, pad=40)
    # rows 4 halves past 32 * n are 8 bytes apart: no CUDA build took them (helper-163)
    for schedule in (hs.gpu_matmul_mma, hs.gpu_matmul_tensor_core):
        with pytest.raises(ValueError, match="a multiple of 16 bytes apart"):
            schedule(64, 64, 32, pad=4)


def _fp16_matmul_tiles(caches=(), dtype="float16"):
    A = te.placeholder((32, 32), dtype, name="A")
    B = te.placeholder((32, 32), dtype, name="B")
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
        (sched.Schedule.cache_read, 0, "wmma.matrix_b")])
    with pytest.raises(ScheduleError, match=r"A_wmma_matrix_b of block 'C_update_o' has scope "
                       r"'wmma.matrix_b', the intrinsic's A has scope 'wmma.matrix_a'"):
        sch.tensorize(ii, "wmma_sync_16x16x16_f16f16f32")


def test_sync_on_fp32_data_names_the_dtypes():
    # fp32 fragments against an fp16 intrinsic (whose body casts what it reads): the
    # mismatch of the bodies is told as one of dtypes
    sch, block, ii = _fp16_matmul_tiles([
        (sched.Schedule.cache_write, 0, "wmma.accumulator"),
        (sched.Schedule.cache_read, 0, "wmma.matrix_a"),
        (sched.Schedule.cache_read, 1, "wmma.matrix_b")], dtype="float32")
    with pytest.raises(ScheduleError, match=r"\(the intrinsic reads float16, the block "
                       r"float32: choose the intrinsic of the block's dtypes\)"):
        sch.tensorize(ii, "wmma_sync_16x16x16_f16f16f32")


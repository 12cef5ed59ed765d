"""TVM's current tensor-intrinsic names and group helpers (sched/tensor_intrin/tvm_names.py)
and its "shared.dyn" scope (read as "shared"): a schedule written with them, as TVM users
write it today, computes what numpy does on the C target and the emulated CUDA."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import TensorIntrin
from sched import compute as te
from sched import hand_schedules as hs
from sched.errors import ScheduleError
from sched.hand_schedules import gpu
from sched.tensor_intrin import get_mma_intrin_group, get_wmma_intrin_group
from sched.tensor_intrin.cuda import (
    shared_16x16_to_ldmatrix_32x8_layout,
    shared_16x32_to_ldmatrix_32x16_layout,
)
from tests.cuda.test_wmma_codegen import sass_of
from tests.schedule.test_tensorize_wmma import _matmul_of, _tvm_style_schedule, fp16_inputs

WMMA_GROUPS = [(load, store, operand, out, trans_b)
               for load in ("shared", "shared.dyn")
               for store in ("global", "shared", "shared.dyn")
               for operand, outs in (("float16", ("float16", "float32")), ("int8", ("int32",)),
                                     ("bfloat16", ("float32",)))
               for out in outs for trans_b in (False, True)]


@pytest.mark.parametrize("group", WMMA_GROUPS)
def test_every_wmma_group_names_registered_intrinsics(group):
    names = get_wmma_intrin_group(*group)
    assert set(names) == {"init", "load_a", "load_b", "compute", "store"}
    assert set(names.values()) <= set(TensorIntrin.names())


def test_the_new_names_are_the_intrinsics_they_stand_for():
    load, store = "wmma_load_16x16x16", "wmma_store_16x16x16"
    for alias, original in ((f"{load}_f16_a_shared_dyn", f"{load}_f16_a"),
                            (f"{load}_s8_b_trans_shared", f"{load}_s8_b_trans"),
                            (f"{load}_f16_a_trans", f"{load}_f16_a"),
                            (f"{store}_f32_shared_dyn", f"{store}_f32_shared"),
                            ("mma_ldmatrix_f16_b_trans_dyn", "mma_ldmatrix_f16_b_trans"),
                            ("mma_store_16x16_f32_shared_dyn_simple_",
                             "mma_store_16x16_f32_shared")):
        ours, theirs = TensorIntrin.forms(alias), TensorIntrin.forms(original)
        assert [(f.desc, f.impl) for f in ours] == [(f.desc, f.impl) for f in theirs], alias
    # the 32x8 warp-register form of the mma store comes with its new names
    assert len(TensorIntrin.forms("mma_store_16x16_f32_global_simple_")) == 2


def test_groups_sched_lacks_are_refused_naming_what_is_missing():
    with pytest.raises(ValueError, match="no intrinsic .*'mma_i8i8i32_trans_a'"):
        get_mma_intrin_group("shared", "global", "int8", "int32", True, False)
    with pytest.raises(ValueError, match="no intrinsic .*'mma_e4m3e4m3f32'"):
        get_mma_intrin_group("shared", "global", "e4m3_float8", "float32", False, False)
    with pytest.raises(ValueError, match="argument 'load_scope': expected one of 'shared', "
                       "'shared.dyn', got 'global'"):
        get_wmma_intrin_group("global", "global", "float16", "float32", False)


@pytest.mark.parametrize("trans_b", [False, True])
def test_a_tvm_wmma_schedule_with_shared_dyn_and_group_names_matches_numpy(trans_b):
    names = get_wmma_intrin_group("shared.dyn", "global", "float16", "float32", trans_b)
    sch = _tvm_style_schedule(_matmul_of("float16", "float32", trans_b=trans_b), "f16", "f32",
                              k_tiles=1, trans_b=trans_b, names=names,
                              shared_scope="shared.dyn")
    script = sch.func.script()
    assert 'scope="shared"' in script and "shared.dyn" not in script
    assert 'sch.cache_read(b0, 0, "shared.dyn")' in str(sch.trace).replace("'", '"')
    assert sch.trace.apply(sch.original_func).func == sch.func
    a, b, _ = fp16_inputs(32, 64, 64)
    if trans_b:
        b = np.ascontiguousarray(b.T)
    expected = a.astype(np.float32) @ (b.T if trans_b else b).astype(np.float32)
    for target in ("c", "cuda-emu"):
        c = np.zeros((32, 64), np.float32)
        sched.build(sch.func, target=target)(a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3, err_msg=target)


def test_a_tvm_mma_schedule_with_group_names_matches_numpy():
    names = get_mma_intrin_group("shared.dyn", "global", "float16", "float32", False, False)
    intrinsics = {"scopes": ("warp", "warp", "warp"), "fill": names["init"],
                  "load_a": names["load_a"], "load_b": names["load_b"],
                  "compute": names["compute"], "store": names["store"]}
    sch = gpu._tensor_core_matmul("mma_group", 32, 64, 32, (1, 2), (1, 2), 2, intrinsics)
    a, b, expected = fp16_inputs(32, 64, 32)
    for target in ("c", "cuda-emu"):
        c = np.zeros((32, 64), np.float32)
        sched.build(sch.func, target=target)(a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3, err_msg=target)
    reference = hs.gpu_matmul_mma(32, 64, 32, fragments=(1, 2), warps=(1, 2))
    assert sched.build(sch.func, target="cuda", arch="sm_80").source == \
        sched.build(reference.func, target="cuda", arch="sm_80").source


def test_shared_dyn_is_read_as_shared_in_scripts_and_primitives():
    func = sched.parse('''
@T.prim_func
def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    S = T.alloc_buffer((64,), "float32", scope="shared.dyn")
    for i in range(64):
        with T.block("S"):
            vi = T.axis.remap("S", [i])
            S[vi] = A[vi]
    for i in range(64):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = S[vi] * T.float32(2)
''')
    (shared,) = func.body.block.alloc_buffers
    assert (shared.name, shared.scope) == ("S", "shared")
    sch = sched.Schedule(func)
    sch.set_scope(sch.get_block("S"), 0, "shared.dyn")
    cached = sch.cache_read(sch.get_block("B"), 0, "shared.dyn")
    assert 'scope="shared"' in sch.func.script() and "shared.dyn" not in sch.func.script()
    assert sch.get(cached).writes[0].buffer.scope == "shared"
    with pytest.raises(ScheduleError, match="unknown storage scope 'shared.static'"):
        sch.cache_read(sch.get_block("B"), 0, "shared.static")
    sch.reindex_cache_read(sch.get_block("B"), 0, "shared.dyn", lambda vi: (vi,))
    assert "shared.dyn" not in sch.func.script()
    # TVM's lowered form: T.allocate and the buffer over it in "shared.dyn"
    lowered = sched.parse('''
@T.prim_func
def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            S = T.allocate([64], "float32", "shared.dyn")
            S_1 = T.Buffer((64,), data=S, scope="shared.dyn")
            S_1[tx] = A[tx]
            B[tx] = S_1[tx] * T.float32(2)
''')
    assert 'T.decl_buffer((64,), "float32", scope="shared")' in lowered.script()
    a = np.arange(64, dtype=np.float32)
    for target in ("c", "cuda-emu"):
        b = np.zeros(64, np.float32)
        sched.build(lowered, target=target)(a, b)
        np.testing.assert_array_equal(b, 2 * a, err_msg=target)


def _matmul_held(trans_a: bool, trans_b: bool, M=32, N=64, K=64, out="float32"):
    """C = A @ B in `out` from fp16, A held k x m where `trans_a`, B held n x k where
    `trans_b` (C = A.T @ B.T...); in fp16 without casts (as TVM describes it)."""
    A = te.placeholder((K, M) if trans_a else (M, K), "float16", name="A")
    B = te.placeholder((N, K) if trans_b else (K, N), "float16", name="B")
    k = te.reduce_axis((0, K), name="k")

    def c(i, j):
        a = A[k, i] if trans_a else A[i, k]
        b = B[j, k] if trans_b else B[k, j]
        if out == "float16":
            return te.sum(a * b, axis=k)
        return te.sum(te.cast(a, out) * te.cast(b, out), axis=k)
    return te.create_prim_func([A, B, te.compute((M, N), c, name="C")], name="matmul")


@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (False, True), (True, False),
                                              (True, True)])
def test_tvm_mma_groups_with_operands_held_transposed_match_numpy(trans_a, trans_b):
    """TVM's mma groups for operands held transposed (B n x k: a linear layer's weight; A
    k x m): the `_trans` loads copy the shared tile as it is held and mma_f16f16f32_trans_b
    (`_trans_a`...) reads it transposed; such a warp tile gets the other operand's registers
    (sched/cuda/mma.py), so its ldmatrix is the other operand's. Numbers on the C target and
    the emulated CUDA, whose PTX emulation gives each lane its registers as the PTX ISA says."""
    names = get_mma_intrin_group("shared", "global", "float16", "float32", trans_a, trans_b)
    names["store"] = "mma_store_16x16_f32_global"
    sch = _tvm_style_schedule(_matmul_held(trans_a, trans_b), "f16", "f32", k_tiles=2,
                              names=names, scopes=("warp", "warp", "warp"))
    a, b, _ = fp16_inputs(32, 64, 64)
    expected = a.astype(np.float32) @ b.astype(np.float32)
    a = np.ascontiguousarray(a.T) if trans_a else a
    b = np.ascontiguousarray(b.T) if trans_b else b
    for target in ("c", "cuda-emu"):
        c = np.zeros((32, 64), np.float32)
        sched.build(sch.func, target=target)(a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3, err_msg=target)
    source = sched.build(sch.func, target="cuda", arch="sm_80").source
    loads = [line for line in source.splitlines() if "ldmatrix.sync" in line]
    # A m x k and B n x k load as ldmatrix lays rows out; A k x m and B k x n transposed
    assert len(loads) == 2
    assert sum(".trans" in line for line in loads) == (not trans_b) + trans_a


@pytest.mark.parametrize("trans_b", [False, True])
def test_mma_accumulating_in_fp16_matches_numpy(trans_b):
    """mma_f16f16f16 (with mma_fill_16x16_f16 and mma_store_16x16_f16_global): two halves
    of the accumulator to a register, mma.sync .f16.f16.f16.f16; the C target sums in half
    at every step, the emulated CUDA in float over each 16 of k: both near numpy's float
    sum."""
    names = get_mma_intrin_group("shared", "global", "float16", "float16", False, trans_b)
    names["store"] = "mma_store_16x16_f16_global"
    sch = _tvm_style_schedule(_matmul_held(False, trans_b, out="float16"), "f16", "f16",
                              k_tiles=2, names=names, scopes=("warp", "warp", "warp"))
    a, b, _ = fp16_inputs(32, 64, 64)
    expected = a.astype(np.float32) @ b.astype(np.float32)
    b = np.ascontiguousarray(b.T) if trans_b else b
    for target in ("c", "cuda-emu"):
        c = np.zeros((32, 64), np.float16)
        sched.build(sch.func, target=target)(a, b, c)
        np.testing.assert_allclose(c.astype(np.float32), expected, rtol=2e-2, atol=0.25,
                                   err_msg=target)
    kernel = sched.build(sch.func, target="cuda", arch="sm_80")
    assert kernel.source.count("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16") == 2
    assert "uint32_t C_warp[" in kernel.source
    resources = kernel.resources
    assert (resources.spill_stores, resources.spill_loads) == (0, 0)


def _int8_nt_schedule(M=32, N=64, K=128, load_scope="shared", trans_b=True,
                      tvm_layout=False):
    """TVM's int8 mma schedule for C = A @ B.T (int32 out), B held n x k (as cuBLAS' and TVM's
    int8 GEMMs hold it; k x n where not `trans_b`): K in tiles of 32 (m16n8k32), the tile
    loops split so; `tvm_layout`: the warp buffers laid out in TVM's 32x16 (operands) and
    32x8 (accumulator) register layouts before tensorize, as TVM's schedules do."""
    A = te.placeholder((M, K), "int8", name="A")
    B = te.placeholder((N, K) if trans_b else (K, N), "int8", name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(
        te.cast(A[i, k], "int32") * te.cast(B[j, k] if trans_b else B[k, j], "int32"),
        axis=k), name="C")
    names = get_mma_intrin_group(load_scope, "global", "int8", "int32", False, trans_b)
    sch = sched.Schedule(te.create_prim_func([A, B, C], name="matmul_i8"))
    block = sch.get_block("C")
    i, j, r = sch.get_loops(block)
    i0, i1, i2 = sch.split(i, [None, 2, 16])
    j0, j1, j2 = sch.split(j, [None, 2, 16])
    k0, k1, k2 = sch.split(r, [None, 2, 32])
    sch.reorder(i0, j0, j1, k0, k1, i1, i2, j2, k2)
    sch.bind(i0, "blockIdx.x")
    sch.bind(j0, "blockIdx.y")
    sch.bind(j1, "threadIdx.y")
    accumulator = sch.cache_write(block, 0, "warp")
    sch.reverse_compute_at(accumulator, j1)
    operands = []
    for index in (0, 1):
        shared = sch.cache_read(block, index, load_scope)
        warp = sch.cache_read(block, index, "warp")
        sch.compute_at(warp, k1)
        sch.compute_at(shared, k0)
        fused = sch.fuse(*sch.get_loops(shared)[-2:])
        _, ty, tx = sch.split(fused, [None, 2, 32])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        operands.append(warp)
    init = sch.decompose_reduction(block, k0)
    loads = []
    for name, stage in zip(("load_a", "load_b"), operands):
        rows, cols = sch.get_loops(stage)[-2:]
        row_tile, col_tile = (16, 32) if name == "load_a" or trans_b else (32, 16)
        ro, ri = sch.split(rows, [None, row_tile])
        co, ci = sch.split(cols, [None, col_tile])
        sch.reorder(ro, co, ri, ci)
        loads.append((name, ri))
    rows, cols = sch.get_loops(accumulator)[-2:]
    ro, store = sch.split(rows, [None, 16])
    sch.reorder(ro, store, cols)
    if tvm_layout:
        for stage in operands:
            sch.transform_layout(stage, ("write", 0), lambda i, j: (
                i // 16, j // 32, *shared_16x32_to_ldmatrix_32x16_layout(i % 16, j % 32)))
        sch.transform_layout(accumulator, ("read", 0), lambda i, j: (
            i // 16, j // 16, *shared_16x16_to_ldmatrix_32x8_layout(i % 16, j % 16)))
    for name, loop in loads:
        sch.tensorize(loop, names[name])
    sch.tensorize(sch.get_loops(init)[-2], names["init"])
    sch.tensorize(sch.get_loops(block)[-3], names["compute"])
    sch.tensorize(store, "mma_store_16x16_i32_global")
    return sch


@pytest.mark.parametrize("tvm_layout", [False, True])
def test_int8_mma_with_b_held_n_by_k_is_exact(tvm_layout, tmp_path):
    """mma.sync m16n8k32 .s32.s8.s8.s32: int8 warp tiles of 16x32 (four int8 to a register,
    laid out as a 16x16 tile of 16-bit elements would be, so ldmatrix loads them), B held
    n x k in the A operand's registers; int32 sums are exact on the C target and cuda-emu.
    With TVM's 32x16 layout of the operands (its schedules' transform_layout) the 32x16
    forms match and the build restores the 16x32 tiles."""
    sch = _int8_nt_schedule(tvm_layout=tvm_layout)
    if tvm_layout:
        assert 'A_shared_warp = T.alloc_buffer((2, 4, 32, 16), "int8", scope="warp")' \
            in sch.func.script()
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (32, 128)).astype(np.int8)
    b = rng.integers(-128, 128, (64, 128)).astype(np.int8)
    expected = a.astype(np.int64) @ b.astype(np.int64).T
    for target in ("c", "cuda-emu"):
        c = np.zeros((32, 64), np.int32)
        sched.build(sch.func, target=target)(a, b, c)
        np.testing.assert_array_equal(c, expected, err_msg=target)
    kernel = sched.build(sch.func, target="cuda", arch="sm_80")
    assert kernel.source.count("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32") == 2
    assert "ldmatrix.sync.aligned.m8n8.x4.trans" not in kernel.source
    resources = kernel.resources
    assert (resources.spill_stores, resources.spill_loads) == (0, 0)
    sass = sass_of(sched.build(sch.func, target="cuda", arch="sm_90"), tmp_path)
    assert "IMMA.16832.S8.S8" in sass and "LDSM.16.M88.4" in sass and "LDL" not in sass


def test_int8_mma_with_b_held_k_by_n_runs_on_c_and_is_refused_for_the_gpu():
    """ldmatrix transposes 16-bit elements: an int8 B held k x n cannot be loaded so; the C
    target runs it, the CUDA build refuses it saying how to hold B."""
    sch = _int8_nt_schedule(trans_b=False)
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (32, 128)).astype(np.int8)
    b = rng.integers(-128, 128, (128, 64)).astype(np.int8)
    c = np.zeros((32, 64), np.int32)
    sched.build(sch.func, target="c")(a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))
    with pytest.raises(ScheduleError, match=r"'B_shared_warp' \(warp\) has the shape \(32, "
                       r"16\).*hold A as m x k and B as n x k"):
        sched.build(sch.func, target="cuda", arch="sm_80")

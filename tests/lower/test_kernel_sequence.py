"""Several kernels per function: stages that cannot share one launch run as kernels in order,
with their global intermediates in a workspace; numbers on the C target and cuda-emu, the CUDA
source with several `__global__` functions compiled by NVRTC, launches on a GPU."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import BuildError, ScheduleError
from sched.lower.kernel_sequence import split_kernels
from sched.script import T
from tests.conftest import assert_close


def transpose_through_intermediate(as_output: bool = False):
    """B = 2A bound (block i, thread j); C = B^T + 1 bound the same way: each thread reads
    what another block wrote (needs two kernels)."""
    n = 64
    A = te.placeholder((n, n), "float32", name="A")
    B = te.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((n, n), lambda i, j: B[j, i] + 1.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, B, C] if as_output else [A, C]))
    for name in ("B", "C"):
        i, j = sch.get_loops(sch.get_block(name))
        sch.bind(i, "blockIdx.x")
        sch.bind(j, "threadIdx.x")
    return sch


def softmax_three_stages():
    """Row softmax as three stages with three launches: the row max with 32 rows per block,
    the sum of exponentials with one row per block, the normalization over the flattened
    elements 256 per block; n (the rows) is symbolic."""
    n, m = te.var("n"), 128
    X = te.placeholder((n, m), "float32", name="X")
    k = te.reduce_axis((0, m), name="k")
    M = te.compute((n,), lambda i: te.max(X[i, k], axis=k), name="M")
    k2 = te.reduce_axis((0, m), name="k2")
    S = te.compute((n,), lambda i: te.sum(te.exp(X[i, k2] - M[i]), axis=k2), name="S")
    Y = te.compute((n, m), lambda i, j: te.exp(X[i, j] - M[i]) / S[i], name="Y")
    sch = sched.Schedule(te.create_prim_func([X, Y]))
    i, _ = sch.get_loops(sch.get_block("M"))
    io, ii = sch.split(i, factors=[None, 32])
    sch.bind(io, "blockIdx.x")
    sch.bind(ii, "threadIdx.x")
    i, _ = sch.get_loops(sch.get_block("S"))
    sch.bind(i, "blockIdx.x")
    i, j = sch.get_loops(sch.get_block("Y"))
    fused = sch.fuse(i, j)
    bx, tx = sch.split(fused, factors=[None, 256])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch


def matmul_then_transpose():
    """C = A @ B in 8x8 tiles (block (i, j) tiles, thread (i, j) in a tile), then D = C^T
    with block = column of C: D reads C across blocks (two kernels, C in the workspace)."""
    n = 32
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((n, n), lambda i, j: C[j, i], name="D")
    sch = sched.Schedule(te.create_prim_func([A, B, D]))
    i, j, _ = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, factors=[None, 8])
    jo, ji = sch.split(j, factors=[None, 8])
    sch.reorder(io, jo, ii, ji)
    sch.bind(io, "blockIdx.y")
    sch.bind(jo, "blockIdx.x")
    sch.bind(ii, "threadIdx.y")
    sch.bind(ji, "threadIdx.x")
    i, j = sch.get_loops(sch.get_block("D"))
    sch.bind(j, "blockIdx.x")
    sch.bind(i, "threadIdx.x")
    return sch


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_transpose_through_global_intermediate_runs_as_two_kernels(target, rng):
    sch = transpose_through_intermediate()
    plan = split_kernels(sch.func)
    assert len(plan.kernels) == 2 and [b.name for b in plan.workspace] == ["B"]
    a = rng.standard_normal((64, 64)).astype("float32")
    c = np.zeros_like(a)
    sched.build(sch, target=target)(a, c)
    assert_close(c, a.T * 2 + 1)


def test_declared_output_is_the_intermediate_no_workspace(rng):
    sch = transpose_through_intermediate(as_output=True)
    plan = split_kernels(sch.func)
    assert len(plan.kernels) == 2 and plan.workspace == ()
    a = rng.standard_normal((64, 64)).astype("float32")
    b, c = np.zeros_like(a), np.zeros_like(a)
    sched.build(sch, target="cuda-emu")(a, b, c)
    assert_close(b, a * 2)
    assert_close(c, a.T * 2 + 1)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_softmax_as_three_kernels_with_symbolic_rows(target, rng):
    sch = softmax_three_stages()
    assert len(split_kernels(sch.func).kernels) == 3
    kernel = sched.build(sch, target=target)
    for rows in (64, 37):           # 37: the 32-row blocks and 256-element blocks overhang
        x = rng.standard_normal((rows, 128)).astype("float32")
        y = np.zeros_like(x)
        kernel(x, y)
        assert_close(y, _softmax(x))


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_matmul_then_transpose_bound_differently(target, rng):
    sch = matmul_then_transpose()
    a, b = (rng.standard_normal((32, 32)).astype("float32") for _ in range(2))
    d = np.zeros_like(a)
    sched.build(sch, target=target)(a, b, d)
    assert_close(d, (a @ b).T, rtol=1e-4, atol=1e-4)


def test_c_target_runs_kernels_in_order_whatever_the_thread_order(rng):
    # before kernels, the C target merged the two blockIdx loops into one and read B before
    # other blocks wrote it
    sch = transpose_through_intermediate()
    a = rng.standard_normal((64, 64)).astype("float32")
    for order in ("reverse", "shuffle:3"):
        c = np.zeros_like(a)
        sched.build(sch, target="c", thread_order=order)(a, c)
        assert_close(c, a.T * 2 + 1)


def test_cuda_source_holds_one_global_function_per_kernel_and_nvrtc_compiles_it():
    kernel = sched.build(softmax_three_stages(), target="cuda", arch="sm_80")
    assert kernel.source.count("__global__") == 3
    assert [k.name for k in kernel.kernels] == ["main_kernel0", "main_kernel1",
                                                "main_kernel2"]
    assert [k.launch.block for k in kernel.kernels] == [(32, 1, 1), (1, 1, 1), (256, 1, 1)]
    assert [b.name for b in kernel.workspace] == ["M", "S"]
    assert len(kernel.kernel_resources) == 3 and kernel.cubin
    # the report covers every kernel; a figure asked of it is the largest (the limiting one)
    report = str(kernel.resources)
    assert all(f"kernel                   main_kernel{n} (sm_80)" in report for n in range(3))
    assert kernel.resources.registers == max(r.registers for r in kernel.kernel_resources)
    assert kernel.resources.threads_per_block == 256
    assert [c.header for c in kernel.resources.table().columns] == [
        "what", "main_kernel0", "main_kernel1", "main_kernel2"]
    assert sched.build(matmul_then_transpose(), target="cuda",
                       arch="sm_90").source.count("__global__") == 2


def test_stages_on_their_own_threads_stay_one_kernel():
    # D[i, j] = C[i, j] * 2 bound as C is: each thread reads what it wrote
    n = 64
    A = te.placeholder((n, n), "float32", name="A")
    C = te.compute((n, n), lambda i, j: A[i, j] + 1.0, name="C")
    D = te.compute((n, n), lambda i, j: C[i, j] * 2.0, name="D")
    sch = sched.Schedule(te.create_prim_func([A, C, D]))
    for name in ("C", "D"):
        i, j = sch.get_loops(sch.get_block(name))
        sch.bind(i, "blockIdx.x")
        sch.bind(j, "threadIdx.x")
    assert split_kernels(sch.func) is None
    kernel = sched.build(sch, target="cuda", arch="sm_80")
    assert kernel.source.count("__global__") == 1


def test_shared_buffer_used_by_two_kernels_is_refused():
    # B lives in shared memory, but its stages launch 64 and 32 threads: two kernels, and
    # shared memory does not outlive the first
    n = 64
    A = te.placeholder((n, n), "float32", name="A")
    B = te.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((n, n), lambda i, j: B[i, j] + 1.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    sch.set_scope(sch.get_block("B"), 0, "shared")
    i, j = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    i, j = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    _, ji = sch.split(j, factors=[None, 32])
    sch.bind(ji, "threadIdx.x")
    with pytest.raises(ScheduleError, match=r"buffer 'B' in shared memory is used by kernels "
                                            r"0 and 1 .* shared memory does not outlive a "
                                            r"kernel: give it scope \"global\""):
        sched.build(sch, target="c")


STAGE_READS_OTHER_BLOCKS = """
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    with T.block("root"):
        B = T.alloc_buffer((8, 8), "float32")
        for i in T.thread_binding(8, thread="blockIdx.x"):
            for j in range(8):
                with T.block("B"):
                    v_i, v_j = T.axis.remap("SS", [i, j])
                    B[v_i, v_j] = A[v_i, v_j] * T.float32(2.0)
            for j in range(8):
                with T.block("C"):
                    v_i, v_j = T.axis.remap("SS", [i, j])
                    C[v_i, v_j] = B[v_j, v_i]
"""


def test_dependence_between_blocks_inside_one_stage_is_still_refused():
    # one root stage is one kernel: nothing orders block i's read of B[j, i] after block j's
    # write; split the loop nest into two root stages instead
    func = sched.parse(STAGE_READS_OTHER_BLOCKS)
    with pytest.raises(BuildError, match=r"loop 'i' of 'main' run at the same time but "
                                         r"depend on each other: flow dependence on 'B'"):
        sched.build(func, target="c")


@pytest.mark.gpu
def test_kernel_sequences_on_the_gpu(rng):
    import torch

    x = torch.randn(37, 128, device="cuda")
    y = torch.empty_like(x)
    sched.build(softmax_three_stages(), target="cuda")(x, y)
    torch.testing.assert_close(y, torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)
    a = torch.randn(64, 64, device="cuda")
    c = torch.empty_like(a)
    sched.build(transpose_through_intermediate(), target="cuda")(a, c)
    torch.testing.assert_close(c, a.T * 2 + 1)
    a, b = torch.randn(32, 32, device="cuda"), torch.randn(32, 32, device="cuda")
    d = torch.empty_like(a)
    sched.build(matmul_then_transpose(), target="cuda")(a, b, d)
    torch.testing.assert_close(d, (a @ b).T, rtol=1e-4, atol=1e-4)


def test_export_launches_every_kernel_with_a_stream_ordered_workspace(tmp_path):
    import subprocess

    from tests.cuda.test_export import GCC, INCLUDE

    kernel = sched.build(softmax_three_stages(), target="cuda", arch="sm_90")
    exported = kernel.export(tmp_path, name="softmax3")
    source = (tmp_path / "softmax3.c").read_text()
    for name in ["main_kernel0", "main_kernel1", "main_kernel2"]:
        assert f'"{name}"' in source and f"cuLaunchKernel({name})" in source
    assert source.count("cuMemAllocAsync(&") == 2 and source.count("cuMemFreeAsync(") == 2
    if INCLUDE is None:
        pytest.skip("no cuda.h to compile the launcher against")
    done = subprocess.run([*GCC, f"-I{INCLUDE}", "-c", f"{exported.name}.c", "-o", "k.o"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.gpu
def test_exported_kernel_sequence_runs_from_c_on_the_gpu(tmp_path, rng):
    from sched.cuda.device import current_arch
    from tests.cuda.test_export import run_on_gpu

    kernel = sched.build(softmax_three_stages(), target="cuda", arch=current_arch())
    exported = kernel.export(tmp_path)
    x = rng.standard_normal((37, 128)).astype(np.float32)
    done = run_on_gpu(exported, [x, np.zeros_like(x), 37])
    assert done.status == 0, done.message
    assert_close(done.arrays[1], _softmax(x))


@T.prim_func
def _rows_then_running_sum(A: T.Buffer((4, 2), "float32"), Y: T.Buffer((4, 2), "float32"),
                           X: T.Buffer((4, 2), "float32")):
    for i, j in T.grid(4, 2):
        with T.block("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(4, 2):
        with T.block("X"):
            vi, vj = T.axis.remap("SS", [i, j])
            X[vi, vj] = T.if_then_else(vi > 0, X[vi - 1, vj], T.float32(0)) + A[vi, vj]


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_stage_without_block_loops_beside_a_grid_gets_a_kernel_of_one_block(target):
    # X's rows depend on each other (serial i), its columns on threads; Y runs on 4 blocks. In
    # one kernel X would run in every one of Y's blocks, each adding to what another already
    # added (found by the GPU-recipe fuzzer: wrong X on cuda-emu, right on the C target,
    # which ran it once); a grid that differs now splits the kernels
    sch = sched.Schedule(_rows_then_running_sum)
    i, j = sch.get_loops(sch.get_block("Y"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    _, j = sch.get_loops(sch.get_block("X"))
    sch.bind(j, "threadIdx.x")
    assert len(split_kernels(sch.func).kernels) == 2
    a = np.arange(8, dtype="float32").reshape(4, 2)
    y, x = np.zeros_like(a), np.zeros_like(a)
    sched.build(sch.func, target=target)(a, y, x)
    np.testing.assert_array_equal(y, a * 2)
    np.testing.assert_array_equal(x, np.cumsum(a, axis=0))


def _workspace_read_outside_blocks(read: str):
    """L = A % 4 + 1 on (blockIdx, threadIdx); B reads another block's row of L in `read`
    (a predicate or a loop bound), which the model's statements do not hold."""
    predicate = read == "predicate"
    return sched.parse(f'''
@T.prim_func
def main(A: T.Buffer((8, 4), "int32"), B: T.Buffer((8, 4), "int32")):
    with T.block("root"):
        L = T.alloc_buffer((8, 4), "int32")
        for i, t in T.grid(8, 4):
            with T.block("L"):
                vi, vt = T.axis.remap("SS", [i, t])
                L[vi, vt] = A[vi, vt] % 4 + 1
        for i2 in range(8):
            for r in range({4 if predicate else "L[7 - i2, 3]"}):
                with T.block("B"):
                    vi = T.axis.spatial(8, i2)
                    vj = T.axis.spatial(4, r)
                    {"T.where(r < L[7 - i2, 3])" if predicate else ""}
                    B[vi, vj] = A[vi, vj] * 2
''')


@pytest.mark.parametrize("read", ["predicate", "loop bound"])
def test_a_workspace_read_outside_blocks_is_read_in_a_later_kernel(read):
    # audit, helper-96: read in a T.where, the stages stayed one kernel and block i read row
    # 7 - i of L before its block stored it (wrong numbers on cuda-emu, a race under TSan);
    # read in a loop bound of the second kernel, a VerifyError
    sch = sched.Schedule(_workspace_read_outside_blocks(read))
    x, y = sch.get_loops(sch.get_block("L"))
    sch.bind(x, "blockIdx.x")
    sch.bind(y, "threadIdx.x")
    sch.bind(sch.get_loops(sch.get_block("B"))[0], "blockIdx.x")
    assert len(split_kernels(sch.func).kernels) == 2
    a = np.random.default_rng(1).integers(0, 100, (8, 4)).astype(np.int32)
    expected = np.full((8, 4), -1, np.int32)
    for i in range(8):
        for r in range((a % 4 + 1)[7 - i, 3]):
            expected[i, r] = a[i, r] * 2
    for target in ("c", "cuda-emu"):
        b = np.full((8, 4), -1, np.int32)
        sched.build(sch.func, target=target)(a, b)
        np.testing.assert_array_equal(b, expected, err_msg=target)


def test_a_load_outside_blocks_then_a_store_of_it_on_other_threads_are_two_kernels():
    # audit, helper-97: B reads row 7 - i of the parameter L in its predicate, then a stage
    # zeroes L: in one kernel, block 7 - i zeroed it first (rows 4-7 of B left unwritten)
    sch = sched.Schedule(sched.parse('''
@T.prim_func
def main(A: T.Buffer((8, 4), "int32"), L: T.Buffer((8, 4), "int32"),
         B: T.Buffer((8, 4), "int32")):
    with T.block("root"):
        T.reads(L[0:8, 0:4], A[0:8, 0:4])
        for i2 in range(8):
            for r in range(4):
                with T.block("B"):
                    vi = T.axis.spatial(8, i2)
                    vj = T.axis.spatial(4, r)
                    T.where(r < L[7 - i2, 3])
                    B[vi, vj] = A[vi, vj] * 2
        for i, t in T.grid(8, 4):
            with T.block("L"):
                vi, vt = T.axis.remap("SS", [i, t])
                L[vi, vt] = 0
'''))
    x, y = sch.get_loops(sch.get_block("L"))
    sch.bind(x, "blockIdx.x")
    sch.bind(y, "threadIdx.x")
    sch.bind(sch.get_loops(sch.get_block("B"))[0], "blockIdx.x")
    assert len(split_kernels(sch.func).kernels) == 2
    rng = np.random.default_rng(1)
    a = rng.integers(0, 100, (8, 4)).astype(np.int32)
    lengths = rng.integers(1, 5, (8, 4)).astype(np.int32)
    expected = np.full((8, 4), -1, np.int32)
    for i in range(8):
        expected[i, :lengths[7 - i, 3]] = a[i, :lengths[7 - i, 3]] * 2
    for target in ("c", "cuda-emu"):
        b = np.full((8, 4), -1, np.int32)
        sched.build(sch.func, target=target)(a, lengths.copy(), b)
        np.testing.assert_array_equal(b, expected, err_msg=target)

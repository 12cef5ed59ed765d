"""lower_cross_thread_reductions: a reduce loop bound to threadIdx.x as an allreduce, numbers
against numpy on the C target (every thread order), the CUDA source (warp shuffles, then shared
memory across warps) compiled with NVRTC, and on a GPU."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.ir.functor import collect
from sched.ir.nodes import Allocate, Call
from sched.lower.cross_thread_reduction import identity
from sched.lower.pipeline import lower
from sched.script import T
from tests.conftest import assert_close

REDUCERS = {"sum": (te.sum, np.sum), "max": (te.max, np.max), "min": (te.min, np.min)}


def row_reduction(op: str, rows: int, cols: int, threads: int, dtype: str = "float32",
                  layout: str = "strided", init=None) -> sched.Schedule:
    """B[i] = op over k of A[i, k]: one thread block per row, the columns over `threads`
    threads: "strided" (thread t takes columns t, t + threads, ...) or "chunked" (thread t a
    contiguous run), the loop inside the thread loop serial."""
    A = te.placeholder((rows, cols), dtype, name="A")
    k = te.reduce_axis((0, cols), name="k")
    reducer = REDUCERS[op][0]
    B = te.compute((rows,), lambda i: reducer(A[i, k], axis=k, init=init), name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    i, kk = sch.get_loops(sch.get_block("B"))
    if layout == "strided":
        outer, thread = sch.split(kk, [None, threads])
        sch.reorder(thread, outer)
    else:
        thread, _ = sch.split(kk, [threads, None])
    sch.bind(i, "blockIdx.x")
    sch.bind(thread, "threadIdx.x")
    return sch


def run_c(sch: sched.Schedule, a: np.ndarray, thread_order: str | None = None) -> np.ndarray:
    kernel = sched.build(sch.func, target="c", thread_order=thread_order)
    out = np.zeros(a.shape[0], a.dtype)
    kernel(a, out)
    return out


@pytest.mark.parametrize("threads", [32, 64, 128, 48, 96])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_row_reduction_over_threads_matches_numpy(rng, op, threads):
    # 100 columns: a multiple of no thread count, so the last columns are guarded
    a = rng.standard_normal((5, 100)).astype("float32")
    out = run_c(row_reduction(op, 5, 100, threads), a)
    assert_close(out, REDUCERS[op][1](a, axis=1))


@pytest.mark.parametrize("threads, cols", [(48, 100), (128, 1000), (32, 7), (96, 96)])
def test_contiguous_chunks_per_thread_match_numpy(rng, threads, cols):
    a = rng.standard_normal((3, cols)).astype("float32")
    out = run_c(row_reduction("sum", 3, cols, threads, layout="chunked"), a)
    assert_close(out, a.sum(axis=1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("order", ["reverse", "shuffle:3"])
def test_result_does_not_depend_on_thread_order(rng, order):
    a = rng.standard_normal((4, 300)).astype("float32")
    out = run_c(row_reduction("max", 4, 300, 96), a, thread_order=order)
    assert_close(out, a.max(axis=1))


@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_integer_rows_use_the_integer_identity(rng, op):
    # all values negative for max, positive for min: an identity of 0 would show
    low, high = (-1000, -1) if op == "max" else (1, 1000)
    a = rng.integers(low, high, size=(4, 70)).astype("int32")
    out = run_c(row_reduction(op, 4, 70, 48, dtype="int32"), a)
    np.testing.assert_array_equal(out, REDUCERS[op][1](a, axis=1))


def test_an_init_that_is_not_the_identity_is_added_once(rng):
    a = rng.standard_normal((4, 130)).astype("float32")
    out = run_c(row_reduction("sum", 4, 130, 64, init=5.0), a)
    assert_close(out, a.sum(axis=1) + 5.0, rtol=1e-4, atol=1e-4)


def test_identities_per_dtype():
    values = {(op, dtype): identity(op, dtype).value
              for op in ("add", "mul", "max", "min")
              for dtype in ("float16", "float32", "int8", "int32", "uint8")}
    assert values[("add", "int32")] == 0 and values[("mul", "float32")] == 1.0
    assert values[("max", "float16")] == float("-inf") and values[("min", "float32")] == \
        float("inf")
    assert (values[("max", "int8")], values[("min", "int8")]) == (-128, 127)
    assert (values[("max", "uint8")], values[("min", "uint8")]) == (0, 255)
    assert values[("max", "int32")] == -(2 ** 31)


def test_c_target_combines_a_shared_array_of_partials():
    lowered = lower(row_reduction("sum", 2, 100, 48).func, target="c")
    scopes = {a.buffer.name: a.buffer.scope for a in collect(lowered.body, Allocate)}
    assert scopes["B_partials"] == "shared" and scopes["B_partial"] == "local"
    assert not [c for c in collect(lowered.body, Call) if c.op == "shfl_down_sync"]


@pytest.mark.parametrize("threads, warps", [(32, 1), (48, 2), (96, 3), (128, 4)])
def test_cuda_source_shuffles_within_warps_then_across_them(threads, warps):
    kernel = sched.build(row_reduction("sum", 8, 1000, threads).func, target="cuda",
                         arch="sm_90")
    source = kernel.source
    assert "__shfl_down_sync(" in source
    if warps == 1:
        assert "__syncthreads" not in source and "__shared__" not in source
    else:
        assert f"float B_warp_partials[{warps}];" in source
        assert source.count("__syncthreads();") == 1
    if threads % 32:     # the last warp is partial: its mask holds only its lanes
        assert "(1u << " in source


@pytest.mark.parametrize("threads", [8, 16, 40, 48, 100])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_partial_warps_on_the_emulated_gpu(rng, op, threads):
    # the last warp has fewer than 32 lanes: no lane may read one outside the shuffle's mask
    # (its value is undefined, and cuda-emu stops on it); the CUDA source itself runs here
    sch = row_reduction(op, 5, 300, threads)
    a = rng.standard_normal((5, 300)).astype("float32")
    out = np.zeros(5, "float32")
    sched.build(sch.func, target="cuda-emu")(a, out)
    assert_close(out, REDUCERS[op][1](a, axis=1), rtol=1e-5, atol=1e-5)
    source = sched.build(sch.func, target="cuda", arch="sm_90").source
    assert "__shfl_sync(" in source and "sched_lane_below(" in source


def _with_canaries(shape, dtype, fill):
    """An array of `shape` inside a larger one whose other elements hold `fill`: a store past
    its end lands there."""
    size = int(np.prod(shape))
    whole = np.full(size + 64, fill, dtype)
    return whole, whole[32:32 + size].reshape(shape)


def test_an_uneven_split_of_the_rows_stores_no_element_past_the_end(rng):
    # rows split by 4 over 10: the last block's rows 10 and 11 run no iteration, and the
    # combine stores nothing for them (it stored past the end of B)
    A = te.placeholder((10, 100), name="A")
    k = te.reduce_axis((0, 100), name="k")
    B = te.compute((10,), lambda i: te.sum(A[i, k], axis=k), name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    i, kk = sch.get_loops(sch.get_block("B"))
    block, _ = sch.split(i, [None, 4])
    sch.bind(block, "blockIdx.x")
    sch.bind(kk, "threadIdx.x")
    a = rng.standard_normal((10, 100)).astype("float32")
    for target in ("c", "cuda-emu"):
        whole, out = _with_canaries((10,), "float32", -7.0)
        sched.build(sch.func, target=target)(a, out)
        assert_close(out, a.sum(axis=1), rtol=1e-4, atol=1e-4)
        assert (whole[:32] == -7.0).all() and (whole[42:] == -7.0).all()
    source = sched.build(sch.func, target="cuda", arch="sm_90").source
    assert "if (k == 0 && i_0 * 4 + i_1 < 10) {" in source


def test_cuda_source_of_a_half_max_shuffles_floats():
    kernel = sched.build(row_reduction("max", 4, 256, 64, dtype="float16").func,
                         target="cuda", arch="sm_80")
    assert "__shfl_down_sync(0xffffffffu, (float)(" in kernel.source


@pytest.mark.gpu
@pytest.mark.parametrize("threads", [32, 48, 96, 128])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_row_reduction_on_the_gpu(op, threads):
    import torch

    kernel = sched.build(row_reduction(op, 64, 1000, threads).func, target="cuda")
    a = torch.randn(64, 1000, device="cuda")
    out = torch.empty(64, device="cuda")
    kernel(a, out)
    expected = {"sum": a.sum(1), "max": a.amax(1), "min": a.amin(1)}[op]
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("threads, rows_per_block", [(8, 4), (16, 3), (64, 2), (96, 2)])
def test_rows_on_threadidx_y_on_the_gpu(threads, rows_per_block):
    """Groups of threads (threadIdx.y) reducing apart on threadIdx.x, on the device."""
    import torch

    A = te.placeholder((50, 300), name="A")
    k = te.reduce_axis((0, 300), name="k")
    sch = sched.Schedule(te.create_prim_func(
        [A, te.compute((50,), lambda i: te.sum(A[i, k], axis=k), name="B")]))
    i, kk = sch.get_loops(sch.get_block("B"))
    block, row = sch.split(i, [None, rows_per_block])
    outer, thread = sch.split(kk, [None, threads])
    sch.reorder(block, row, outer, thread)
    sch.bind(block, "blockIdx.x")
    sch.bind(row, "threadIdx.y")
    sch.bind(thread, "threadIdx.x")
    a = torch.randn(50, 300, device="cuda")
    out = torch.full((50,), float("nan"), device="cuda")
    sched.build(sch.func, target="cuda")(a, out)
    torch.testing.assert_close(out, a.sum(1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("threads", [32, 64])
def test_decomposed_init_in_every_thread_lands_before_the_result(rng, threads):
    # decompose_reduction puts B's init outside the thread loop: every thread stores it, so
    # thread 0's store of the result must come after a barrier (one warp has none otherwise)
    sch = row_reduction("sum", 4, 100, threads)
    sch.decompose_reduction(sch.get_block("B"), sch.get_loops(sch.get_block("B"))[1])
    a = rng.standard_normal((4, 100)).astype("float32")
    assert_close(run_c(sch, a), a.sum(axis=1), rtol=1e-4, atol=1e-4)
    source = sched.build(sch.func, target="cuda", arch="sm_90").source
    assert source.count("__syncthreads();") == 1
    assert source.index("__syncthreads();") < source.index("B[i] = B[i] + B_update_partial[0];")


@T.prim_func
def row_product(A: T.Buffer((3, 40), "float32"), B: T.Buffer((3,), "float32")):
    for i, k in T.grid(3, 40):
        with T.block("B"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                B[vi] = T.float32(1)
            B[vi] = B[vi] * A[vi, vk]


def test_product_over_more_threads_than_columns_matches_numpy(rng):
    # 48 threads, 40 columns: threads 40..47 contribute the identity 1
    sch = sched.Schedule(row_product)
    i, k = sch.get_loops(sch.get_block("B"))
    k_0, k_1 = sch.split(k, [None, 48])
    sch.reorder(k_1, k_0)
    sch.bind(i, "blockIdx.x")
    sch.bind(k_1, "threadIdx.x")
    a = rng.uniform(0.5, 1.5, (3, 40)).astype("float32")
    assert_close(run_c(sch, a), a.prod(axis=1), rtol=1e-5)


def test_half_max_matches_numpy(rng):
    a = rng.standard_normal((4, 300)).astype("float16")
    np.testing.assert_array_equal(run_c(row_reduction("max", 4, 300, 96, dtype="float16"), a),
                                  a.max(axis=1))


@T.prim_func
def _one_live_thread(A: T.Buffer((4, 2), "float32"), B: T.Buffer((4,), "float32")):
    for i, t in T.grid(4, 2):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            vk = T.axis.reduce(1, t)
            T.where(t < 1)
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk] + B[(vi + 1) % 4]


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_reduce_loop_on_threads_with_no_carried_dependence_is_a_plain_thread_loop(target):
    # not a cross-thread reduction (the update reads another element of B), but only thread 0
    # runs an iteration: the rule finds nothing carried and accepts the bind, so the build
    # lowers an ordinary thread loop (it refused, found by the GPU-recipe fuzzer)
    sch = sched.Schedule(_one_live_thread)
    _, t = sch.get_loops(sch.get_block("B"))
    sch.bind(t, "threadIdx.x")
    a = np.arange(8, dtype="float32").reshape(4, 2)
    expected, got = np.zeros(4, "float32"), np.zeros(4, "float32")
    sched.interpret(_one_live_thread, a, expected)
    sched.build(sch.func, target=target)(a, got)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("threads, groups", [(16, 3), (8, 5)])
def test_a_partial_last_warp_of_groups_shuffles_with_its_own_lanes(rng, threads, groups):
    """48 threads in groups of 16: the second warp has 16 lanes, and its shuffles' mask holds
    those only (it was 0xffffffff: lanes that do not exist, undefined in CUDA)."""
    A = te.placeholder((30, 50), name="A")
    k = te.reduce_axis((0, 50), name="k")
    sch = sched.Schedule(te.create_prim_func(
        [A, te.compute((30,), lambda i: te.sum(A[i, k], axis=k), name="B")]))
    i, kk = sch.get_loops(sch.get_block("B"))
    block, row = sch.split(i, [None, groups])
    outer, thread = sch.split(kk, [None, threads])
    sch.reorder(block, row, outer, thread)
    sch.bind(block, "blockIdx.x")
    sch.bind(row, "threadIdx.y")
    sch.bind(thread, "threadIdx.x")
    source = sched.build(sch.func, target="cuda", arch="sm_90").source
    assert f"{threads * groups} - " in source and "0xffffffffu, (float)" not in source
    a = rng.standard_normal((30, 50)).astype("float32")
    out = np.full(30, np.nan, "float32")
    sched.build(sch.func, target="cuda-emu")(a, out)
    assert_close(out, a.sum(1), rtol=1e-5, atol=1e-5)


TRIANGLE_OF_ROW_SUMS = """
@T.prim_func
def f(A: T.Buffer((4, 4, 16), "float32"), S: T.Buffer((4, 4), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for ty in T.thread_binding(4, thread="threadIdx.y"):
            for r in range({extent}):
                for tx in T.thread_binding(8, thread="threadIdx.x"):
                    for ki in range(2):
                        with T.block("S"):
                            vi = T.axis.spatial(4, ty)
                            vr = T.axis.spatial(4, r)
                            vk = T.axis.reduce(16, tx * 2 + ki)
                            with T.init():
                                S[vi, vr] = T.float32(0)
                            S[vi, vr] = S[vi, vr] + A[vi, vr, vk]
"""


def test_shuffles_in_a_loop_whose_trip_count_depends_on_the_row_are_refused(rng):
    # four threadIdx.y rows of 8 lanes share a warp, whose shuffles they make together: with
    # `range(ty + 1)` around the reduction the rows left the loop at different times (a
    # deadlock on cuda-emu, undefined on a GPU; audit helper-186)
    func = sched.parse(TRIANGLE_OF_ROW_SUMS.format(extent="ty + 1"))
    for target in ("cuda-emu", "c"):
        with pytest.raises(sched.ScheduleError, match="bounds .* depend on the thread"):
            sched.build(func, target=target)
    # the same rows over a loop of uniform bounds run
    func = sched.parse(TRIANGLE_OF_ROW_SUMS.format(extent="4"))
    a = rng.standard_normal((4, 4, 16)).astype("float32")
    out = np.zeros((4, 4), "float32")
    sched.build(func, target="cuda-emu")(a, out)
    assert_close(out, a.sum(axis=2))


ROWS_THEN_EPILOGUE = """
@T.prim_func
def f(A: T.Buffer((8, 32), "float32"), B: T.Buffer((8, 32), "float32")):
    S = T.alloc_buffer((8,), "float32", scope="shared")
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for ty in T.thread_binding(4, thread="threadIdx.y"):
            for tx in T.thread_binding({threads}, thread="threadIdx.x"):
                for ko in range({chunks}):
                    with T.block("S"):
                        vi = T.axis.spatial(8, bx * 4 + ty)
                        vk = T.axis.reduce(32, ko * {threads} + tx)
                        with T.init():
                            S[vi] = T.float32(0)
                        S[vi] = S[vi] + A[vi, vk]
        for ty2 in T.thread_binding({epilogue_rows}, thread="threadIdx.y"):
            for tx2 in T.thread_binding({threads}, thread="threadIdx.x"):
                for jo in range({chunks}):
                    with T.block("B"):
                        vi = T.axis.spatial(8, bx * 4 + ty2 % 4)
                        vj = T.axis.spatial(32, jo * {threads} + tx2)
                        B[vi, vj] = A[vi, vj] / S[vi]
"""


@pytest.mark.parametrize("threads", [8, 32])
@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_rows_on_threadidx_y_then_an_epilogue_on_the_same_threads(rng, target, threads):
    # the epilogue's own threadIdx.y loop (the rows divided by their totals) was taken for a
    # group loop not around the reduction, and the kernel refused (audit helper-186)
    func = sched.parse(ROWS_THEN_EPILOGUE.format(threads=threads, chunks=32 // threads,
                                                 epilogue_rows=4))
    a = rng.random((8, 32)).astype("float32") + 0.5
    out = np.zeros((8, 32), "float32")
    options = {"sanitize": "thread"} if target == "cuda-emu" else {}
    sched.build(func, target=target, **options)(a, out)
    assert_close(out, a / a.sum(axis=1, keepdims=True))


def test_a_reduce_loop_on_threadidx_x_that_is_no_cross_thread_reduction_says_why():
    func = sched.parse("""
@T.prim_func
def f(A: T.Buffer((4, 32), "float32"), S: T.Buffer((4,), "float32")):
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("S"):
                vi = T.axis.spatial(4, bx)
                vk = T.axis.reduce(32, tx)
                T.where(tx >= 28)
                with T.init():
                    S[vi] = T.float32(0)
                S[vi] = S[vi] + A[vi, vk]
""")
    with pytest.raises(sched.BuildError, match=r"not a cross-thread reduction on threadIdx.x: "
                                               r"the predicate tx >= 28"):
        sched.build(func, target="c")


REDUCTION_UNDER = """
@T.prim_func
def f(A: T.Buffer((4, 16), "float32"), S: T.Buffer((4,), "float32")):
    for i in range(4):
        for tx in T.thread_binding(8, thread="threadIdx.x"):
{between}
"""
ROW_REDUCTION = """\
for ki in range(2):
    with T.block("S"):
        vi = T.axis.spatial(4, {row})
        vk = T.axis.reduce(16, tx * 2 + ki)
        with T.init():
            S[vi] = T.float32(0)
        S[vi] = S[vi] + A[vi, vk]"""


@pytest.mark.parametrize("between, row, reason", [
    ("if i < 2:", "i", r"the condition `if i < 2` stands between loop 'tx' and block 'S'"),
    ("row = 3 - i", "row", r"the let `row = 3 - i` stands between loop 'tx' and block 'S'")])
def test_an_if_or_a_let_between_the_reduce_loop_and_its_block_is_no_cross_thread_reduction(
        between, row, reason):
    # the lowering applied the `if` to each thread's accumulation only: rows it leaves out
    # were stored 0; a let's variable was used by the total's store out of its scope, a
    # VerifyError (audit helper-190)
    indent = "    " if between.startswith("if") else ""
    body = "\n".join(" " * 12 + indent + line
                     for line in ROW_REDUCTION.format(row=row).splitlines())
    func = sched.parse(REDUCTION_UNDER.format(between=" " * 12 + between + "\n" + body))
    for target in ("c", "cuda-emu"):
        with pytest.raises(sched.BuildError, match=reason):
            sched.build(func, target=target)


ROWS_UNDER_A_CONDITION = """
@T.prim_func
def f(A: T.Buffer((4, 16), "float32"), S: T.Buffer((4,), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for i in range(4):
            if {condition}:
                for tx in T.thread_binding(8, thread="threadIdx.x"):
                    for ki in range(2):
                        with T.block("S"):
                            vi = T.axis.spatial(4, i)
                            vk = T.axis.reduce(16, tx * 2 + ki)
                            with T.init():
                                S[vi] = T.float32(0)
                            S[vi] = S[vi] + A[vi, vk]
"""


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_reduction_under_a_condition_on_read_only_data_at_the_rows_index(rng, target):
    # `if A[i, 0] > 0` reads an input no thread writes, at an index of no thread: the same
    # for every thread. It was refused as "reads memory and may differ between threads"
    # (audit helper-190)
    func = sched.parse(ROWS_UNDER_A_CONDITION.format(condition="A[i, 0] > T.float32(0)"))
    a = rng.standard_normal((4, 16)).astype("float32")
    a[:, 0] = [1, -1, -1, 1]
    out = np.full(4, -7, "float32")
    sched.build(func, target=target)(a, out)
    assert_close(out, np.where(a[:, 0] > 0, a.sum(axis=1), -7))


def test_a_reduction_under_a_condition_that_calls_a_function_is_refused():
    # each thread calls it, and a stateful one answered threads differently: the rows of a
    # warp left the shuffles apart, a deadlock on cuda-emu (audit helper-193)
    func = sched.parse(ROWS_UNDER_A_CONDITION.format(
        condition='T.call_extern("int32", "pick", i) > 0'))
    extern = "static int pick(int i) { return i % 2; }\n"
    for target in ("c", "cuda-emu"):
        with pytest.raises(sched.ScheduleError, match="reads memory or calls a function"):
            sched.build(func, target=target, extern_c=extern)

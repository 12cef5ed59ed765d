"""tensorize and the TensorIntrin registry (sched/schedule/tensorize.py, tensor_intrin.py,
tensorize_match.py; the CPU intrinsics in sched/tensor_intrin/cpu.py): a matched block computes
the same numbers through the implementation; every mismatch is refused, the first one named."""

import numpy as np
import pytest

import sched
from sched import TensorIntrin
from sched import compute as te
from sched.c.isa import host_isa
from sched.errors import ScheduleError
from sched.interpreter.runtime import numpy_dtype


def matmul(m=32, n=32, k=16, dtype="float32", transposed_b=False):
    A = te.placeholder((m, k), dtype, name="A")
    B = te.placeholder((n, k) if transposed_b else (k, n), dtype, name="B")
    r = te.reduce_axis((0, k), name="k")
    if transposed_b:
        C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[j, r], axis=r), name="C")
    else:
        C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return te.create_prim_func([A, B, C])


def tiled(func, tile_i=4, tile_j=16, tile_k=1, decompose=True):
    """The matmul's loops as (i_0, j_0, k_0, i_1, j_1, k_1), the reduction split off its init
    under k_0 when `decompose`."""
    sch = sched.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, tile_i])
    jo, ji = sch.split(j, [None, tile_j])
    ko, ki = sch.split(k, [None, tile_k])
    sch.reorder(io, jo, ko, ii, ji, ki)
    if decompose:
        sch.decompose_reduction(sch.get_block("C"), ko)
    return sch, (io, jo, ko, ii, ji, ki)


def run_matmul(func, m=32, n=32, k=16, transposed_b=False):
    rng = np.random.default_rng(0)
    a = rng.random((m, k), dtype=np.float32)
    b = rng.random((n, k) if transposed_b else (k, n), dtype=np.float32)
    c = np.zeros((m, n), np.float32)
    sched.build(func, target="c")(a, b, c)
    np.testing.assert_allclose(c, a @ (b.T if transposed_b else b), rtol=1e-5, atol=1e-5)


def test_outer_product_micro_kernel_matches_numpy_on_c():
    func = matmul()
    sch, (io, jo, ko, ii, ji, ki) = tiled(func)
    sch.tensorize(ii, "outer_product_4x16_f32")
    script = sch.func.script()
    assert 'with T.block("C_update_o_fma")' in script and "T.vectorized(16)" in script
    assert "v_i_0 * 4:v_i_0 * 4 + 4" in script      # the block keeps its regions
    assert sched.parse(script) == sch.func
    assert sch.trace.apply(func).func == sch.func
    assert sched.Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func
    kernel = sched.build(sch.func, target="c")
    lanes = min(16, host_isa().lanes("float32"))    # (16 with AVX-512, 8 with AVX2)
    assert f"vectorized: {lanes} lanes" in kernel.source   # the implementation's vector FMA
    run_matmul(sch.func)
    c = np.zeros((32, 32), np.float32)
    rng = np.random.default_rng(0)
    a, b = rng.random((32, 16), dtype=np.float32), rng.random((16, 32), dtype=np.float32)
    sched.interpret(sch.func, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_tensorize_a_blockized_block_by_its_handle():
    sch, (io, jo, ko, ii, ji, ki) = tiled(matmul())
    tile = sch.blockize(ii)
    sch.tensorize(tile, "outer_product_4x16_f32")
    assert "C_update_o_fma" in sch.func.script()
    run_matmul(sch.func)


def test_dot_product_on_an_inner_product_and_steps_after_it():
    # C[i, j] = sum_k A[i, k] * B[j, k]: the k loop split by 8 is one dot product
    func = matmul(m=8, n=8, k=32, transposed_b=True)
    sch = sched.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    ko, ki = sch.split(k, [None, 8])
    sch.decompose_reduction(sch.get_block("C"), ko)
    sch.tensorize(ki, "dot_product_8_f32")
    sch.parallel(i)                          # spatial: still checked, and legal
    run_matmul(sch.func, m=8, n=8, k=32, transposed_b=True)
    assert sch.trace.apply(func).func == sch.func


def test_the_tensorized_block_stays_visible_to_the_dependence_analysis():
    # k_0 carries the accumulation into C through the tensorized block: running it in
    # parallel would race, and the analysis must still see that after tensorize
    sch, (io, jo, ko, ii, ji, ki) = tiled(matmul())
    sch.tensorize(ii, "outer_product_4x16_f32")
    with pytest.raises(ScheduleError, match="parallel.*'k_0'"):
        sch.parallel(ko)
    sch.parallel(io)
    run_matmul(sch.func)


def test_refused_when_a_tile_is_not_the_intrinsic_shape():
    # j split by 8: the block's tile is 4x8, the intrinsic's 4x16
    sch, (io, jo, ko, ii, ji, ki) = tiled(matmul(), tile_j=8)
    before = sch.func
    with pytest.raises(ScheduleError, match=r"tensorize: cannot tensorize loop 'i_1' with "
                       r"'outer_product_4x16_f32': loop 1 \('j_1'\) has extent 8, the "
                       r"intrinsic's loop 'j' has extent 16"):
        sch.tensorize(ii, "outer_product_4x16_f32")
    assert sch.func == before and "tensorize" not in str(sch.trace)    # nothing changed


def test_refused_with_the_loop_count():
    # the loops under j_1 are two (16, 1), the intrinsic's three (4, 16, 1)
    sch, (io, jo, ko, ii, ji, ki) = tiled(matmul())
    with pytest.raises(ScheduleError, match=r"the intrinsic has 3 loops \(4, 16, 1\), the "
                       r"block 2 \(16, 1\)"):
        sch.tensorize(ji, "outer_product_4x16_f32")


def test_refused_while_the_block_still_has_its_init():
    # the intrinsic only accumulates; the block would also zero C
    sch, (io, jo, ko, ii, ji, ki) = tiled(matmul(), decompose=False)
    sch.reorder(ko, io)      # keep the shape: loops i_1, j_1, k_1 under k_0 hold the init too
    with pytest.raises(ScheduleError, match=r"has init, the intrinsic's block does not; "
                       r"sch.decompose_reduction\(block, loop\) first"):
        sch.tensorize(ii, "outer_product_4x16_f32")


def test_refused_when_an_access_differs():
    # B is read transposed (B[j, k]): the intrinsic reads B[k, j]
    sch, (io, jo, ko, ii, ji, ki) = tiled(matmul(transposed_b=True))
    with pytest.raises(ScheduleError, match=r"the region of B in block 'C_update_o' is 16x1, the "
                       r"intrinsic's B is 1x16"):
        sch.tensorize(ii, "outer_product_4x16_f32")


def test_refused_when_the_dtype_differs():
    # a float16 matmul against a float32 intrinsic
    sch, (io, jo, ko, ii, ji, ki) = tiled(matmul(dtype="float16"))
    with pytest.raises(ScheduleError, match=r"C of block 'C_update_o' has dtype 'float16', the "
                       r"intrinsic's C has dtype 'float32'"):
        sch.tensorize(ii, "outer_product_4x16_f32")


def test_refused_when_the_scope_differs():
    # A staged in shared memory: the intrinsic's A is global
    sch, (io, jo, ko, ii, ji, ki) = tiled(matmul())
    sch.cache_read(sch.get_block("C_update"), 0, "shared")   # reads: A, B, C
    with pytest.raises(ScheduleError, match=r"A_shared of block 'C_update_o' has scope "
                       r"'shared', the intrinsic's A has scope 'global'"):
        sch.tensorize(ii, "outer_product_4x16_f32")


def test_refused_when_a_spatial_loop_stands_for_a_reduce_one():
    # an elementwise product over 8 elements is not a dot product
    A = te.placeholder((64,), name="A")
    B = te.placeholder((64,), name="B")
    C = te.compute((64,), lambda i: A[i] * B[i], name="C")
    sch = sched.Schedule(te.create_prim_func([A, B, C]))
    io, ii = sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 8])
    with pytest.raises(ScheduleError, match=r"loop 0 \('i_1'\) feeds spatial iteration "
                       r"variables, the intrinsic's loop 'k' feeds reduce ones"):
        sch.tensorize(ii, "dot_product_8_f32")


def test_refused_when_the_body_differs():
    # C += A * A is not C += A * B (one buffer cannot stand for both A and B)
    A = te.placeholder((8, 32), name="A")
    r = te.reduce_axis((0, 32), name="k")
    C = te.compute((8,), lambda i: te.sum(A[i, r] * A[i, r], axis=r), name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    i, k = sch.get_loops(sch.get_block("C"))
    ko, ki = sch.split(k, [None, 8])
    sch.decompose_reduction(sch.get_block("C"), ko)
    with pytest.raises(ScheduleError, match=r"A of block 'C_update_o' would be both A and B of the "
                       r"intrinsic"):
        sch.tensorize(ki, "dot_product_8_f32")


def test_refused_under_a_predicate():
    # 30 split by 8 leaves a partial tile: the intrinsic covers whole ones
    func = matmul(m=4, n=4, k=30, transposed_b=True)
    sch = sched.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    ko, ki = sch.split(k, [None, 8])
    sch.decompose_reduction(sch.get_block("C"), ko)
    with pytest.raises(ScheduleError, match=r"has the predicate .* the intrinsic covers whole"):
        sch.tensorize(ki, "dot_product_8_f32")


def test_a_guard_on_the_loops_outside_the_tile_is_kept_outside_the_intrinsic():
    # 37 rows split by 16: the guard is on rows, the k tile of 8 is whole; blockize moves the
    # guard to the outer block and the intrinsic runs on whole tiles
    W = te.placeholder((37, 56), name="W")
    x = te.placeholder((56,), name="x")
    k = te.reduce_axis((0, 56), name="k")
    y = te.compute((37,), lambda i: te.sum(W[i, k] * x[k], axis=k), name="y")
    sch = sched.Schedule(te.create_prim_func([W, x, y]))
    i, r = sch.get_loops(sch.get_block("y"))
    sch.split(i, [None, 16])
    k_0, k_1 = sch.split(r, [None, 8])
    sch.decompose_reduction(sch.get_block("y"), k_0)
    sch.tensorize(k_1, "dot_product_8_f32")
    script = sch.func.script()
    # the init's guard, and the outer block's; none inside the intrinsic's tile
    assert [line.strip() for line in script.splitlines() if "T.where" in line] == [
        "T.where(i_0 * 16 + i_1 < 37)"] * 2
    assert "T.where" in script[script.index('with T.block("y_update_o"):'):]
    rng = np.random.default_rng(0)
    w, v = rng.random((37, 56), dtype=np.float32), rng.random(56, dtype=np.float32)
    out = np.zeros(37, np.float32)
    sched.build(sch.func, target="c")(w, v, out)
    np.testing.assert_allclose(out, w @ v, rtol=1e-4)


def test_refused_for_an_unknown_intrinsic():
    sch, (io, jo, ko, ii, ji, ki) = tiled(matmul())
    with pytest.raises(ScheduleError, match=r"no tensor intrinsic named 'nope'; registered: "
                       r".*outer_product_4x16_f32"):
        sch.tensorize(ii, "nope")


def test_register_refuses_a_taken_name_and_mismatched_parameters():
    from sched.tensor_intrin import cpu

    with pytest.raises(ValueError, match="'dot_product_8_f32' is already registered; pass "
                       "override=True"):
        TensorIntrin.register("dot_product_8_f32", cpu.dot_product_8_f32_desc,
                              cpu.dot_product_8_f32_impl)
    with pytest.raises(ValueError, match="must take the same number of buffer parameters"):
        TensorIntrin.register("bad", cpu.dot_product_8_f32_desc, _two_buffer_impl())
    assert TensorIntrin.get("bad", allow_missing=True) is None
    # two stages are no single block to match against
    with pytest.raises(ValueError, match="must be a nest of loops around one block"):
        TensorIntrin.register("bad", _two_stages(), _two_stages())
    with pytest.raises(TypeError, match="argument 'desc': expected a PrimFunc"):
        TensorIntrin.register("bad", "not a function", cpu.dot_product_8_f32_impl)


def _two_stages():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    return te.create_prim_func([A, B, te.compute((8,), lambda i: B[i] + 1.0, name="C")])


def _two_buffer_impl():
    A = te.placeholder((8,), name="A")
    return te.create_prim_func([A, te.compute((8,), lambda i: A[i], name="B")])


@pytest.mark.parametrize("name, form", [(name, form) for name in TensorIntrin.names()
                                        for form in range(len(TensorIntrin.forms(name)))])
def test_every_registered_implementation_computes_its_description(name, form):
    # the contract tensorize relies on, checked with the reference interpreter (for each form
    # of the intrinsic: TensorIntrin.register_form)
    intrin = TensorIntrin.forms(name)[form]
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal([int(d.value) for d in b.shape]).astype(numpy_dtype(b.dtype))
              for b in intrin.desc.params]
    expected, got = [x.copy() for x in inputs], [x.copy() for x in inputs]
    sched.interpret(intrin.desc, *expected)
    sched.interpret(intrin.impl, *got)
    for want, have in zip(expected, got):
        np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-5)


def gpu_tensorized_matmul():
    # thread blocks over row tiles, one thread per 16-column tile: the intrinsic is block IR,
    # so it runs under thread bindings as any code does
    sch, (io, jo, ko, ii, ji, ki) = tiled(matmul(m=32, n=64, k=16))
    sch.bind(io, "blockIdx.x")
    sch.bind(jo, "threadIdx.x")
    sch.tensorize(ii, "outer_product_4x16_f32")
    return sch.func


def test_a_cpu_intrinsic_in_a_gpu_schedule_on_c_and_emulated_cuda():
    func = gpu_tensorized_matmul()
    rng = np.random.default_rng(2)
    a, b = rng.random((32, 16), dtype=np.float32), rng.random((16, 64), dtype=np.float32)
    for target in ("c", "cuda-emu"):
        c = np.zeros((32, 64), np.float32)
        sched.build(func, target=target)(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-5, err_msg=target)


@pytest.mark.gpu
def test_a_cpu_intrinsic_in_a_gpu_schedule_on_the_device():
    import torch

    rng = np.random.default_rng(2)
    a, b = rng.random((32, 16), dtype=np.float32), rng.random((16, 64), dtype=np.float32)
    out = torch.zeros((32, 64), device="cuda")
    sched.build(gpu_tensorized_matmul(), target="cuda")(torch.from_numpy(a).cuda(),
                                                         torch.from_numpy(b).cuda(), out)
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), a @ b, rtol=1e-5)


def test_refused_when_an_access_is_not_affine():
    # A[i, (3 * k) % 64]: the 8 elements a k tile reads are no 8-element window of A
    A = te.placeholder((8, 64), name="A")
    B = te.placeholder((8, 64), name="B")
    r = te.reduce_axis((0, 64), name="k")
    D = te.compute((8,), lambda i: te.sum(A[i, (r * 3) % 64] * B[i, r], axis=r), name="D")
    sch = sched.Schedule(te.create_prim_func([A, B, D]))
    i, k = sch.get_loops(sch.get_block("D"))
    ko, ki = sch.split(k, [None, 8])
    sch.decompose_reduction(sch.get_block("D"), ko)
    with pytest.raises(ScheduleError, match=r"the region of A in block 'D_update_o' is 1x.*, the "
                       r"intrinsic's A is 8"):
        sch.tensorize(ki, "dot_product_8_f32")


def test_refused_for_a_symbolic_dim_that_may_leave_a_partial_tile():
    # n rows split by 4: the last tile may be partial (a predicate), the intrinsic covers 4
    n = te.var("n")
    A = te.placeholder((n, 16), name="A")
    B = te.placeholder((16, 32), name="B")
    r = te.reduce_axis((0, 16), name="k")
    C = te.compute((n, 32), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    sch, (io, jo, ko, ii, ji, ki) = tiled(te.create_prim_func([A, B, C]))
    with pytest.raises(ScheduleError, match=r"block 'C_update' has the predicate v_i_0 \* 4 \+ i_1 "
                       r"< n .* the intrinsic covers whole tiles"):
        sch.tensorize(ii, "outer_product_4x16_f32")


def test_a_tile_across_the_layout_is_refused_with_the_layout_named():
    # B2[k, j]: the 8 values of the dot product run down a column of B2
    A = te.placeholder((4, 32), name="A")
    B2 = te.placeholder((32, 6), name="B2")
    k = te.reduce_axis((0, 32), name="k")
    C = te.compute((4, 6), lambda i, j: te.sum(A[i, k] * B2[k, j], axis=k), name="C")
    sch = sched.Schedule(te.create_prim_func([A, B2, C]))
    _, _, r = sch.get_loops(sch.get_block("C"))
    k_0, k_1 = sch.split(r, [None, 8])
    sch.decompose_reduction(sch.get_block("C"), k_0)
    with pytest.raises(ScheduleError, match=r"the region of B2 in block 'C_update_o' is 8x1, "
                                            r"the intrinsic's B is 8 \(the same size along "
                                            r"other dimensions"):
        sch.tensorize(k_1, "dot_product_8_f32")


MMA_DESC = """
@T.prim_func
def mma_desc(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), align=128, offset_factor=1)
    B = T.match_buffer(b, (16, 16), align=128, offset_factor=1)
    C = T.match_buffer(c, (16, 16), align=128, offset_factor=1)
    with T.block("root"):
        T.reads(C[0 : 16, 0 : 16], A[0 : 16, 0 : 16], B[0 : 16, 0 : 16])
        T.writes(C[0 : 16, 0 : 16])
        for i, j, k in T.grid(16, 16, 16):
            with T.block("update"):
                vii, vjj, vkk = T.axis.remap("SSR", [i, j, k])
                C[vii, vjj] = C[vii, vjj] + A[vii, vkk] * B[vjj, vkk]
"""
MMA_EXTERN_IMPL = """
@T.prim_func
def mma_intrin(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), align=128, offset_factor=1)
    B = T.match_buffer(b, (16, 16), align=128, offset_factor=1)
    C = T.match_buffer(c, (16, 16), align=128, offset_factor=1)
    with T.block("root"):
        T.reads(C[0 : 16, 0 : 16], A[0 : 16, 0 : 16], B[0 : 16, 0 : 16])
        T.writes(C[0 : 16, 0 : 16])
        T.evaluate(T.call_extern("int32", "gemm16", T.address_of(C[0, 0]),
                                 T.address_of(A[0, 0]), T.address_of(B[0, 0])))
"""


def test_an_implementation_calling_external_code_is_refused_saying_so():
    # audit (helper-29): TVM's tensorize docstring example, an extern micro-kernel, was
    # refused as "a copy or rewrite of an opaque call"
    name = "test_mma_extern_impl"
    if TensorIntrin.get(name, allow_missing=True) is None:
        TensorIntrin.register(name, sched.parse(MMA_DESC), sched.parse(MMA_EXTERN_IMPL))
    A = te.placeholder((32, 32), name="A")
    B = te.placeholder((32, 32), name="B")
    k = te.reduce_axis((0, 32), name="k")
    C = te.compute((32, 32), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="update")
    sch = sched.Schedule(te.create_prim_func([A, B, C]))
    block = sch.get_block("update")
    i, j, kk = sch.get_loops(block)
    io, ii = sch.split(i, [None, 16])
    jo, ji = sch.split(j, [None, 16])
    ko, ki = sch.split(kk, [None, 16])
    sch.reorder(io, jo, ko, ii, ji, ki)
    sch.decompose_reduction(block, ko)
    before = sch.func
    with pytest.raises(ScheduleError, match=r"tensorize: the intrinsic's implementation calls "
                       r"code sched cannot read \(an opaque call.*Write the implementation "
                       r"with loops over its buffers"):
        sch.tensorize(ii, name)
    assert sch.func is before


DOT8_WITH_INIT = """
@T.prim_func
def dot8_with_init(a: T.handle, b: T.handle, c: T.handle):
    A = T.match_buffer(a, (8,), "float32", offset_factor=1)
    B = T.match_buffer(b, (8,), "float32", offset_factor=1)
    C = T.match_buffer(c, (1,), "float32", offset_factor=1)
    with T.block("root"):
        T.reads(A[0:8], B[0:8])
        T.writes(C[0:1])
        for k in range(8):
            with T.block("update"):
                vk = T.axis.remap("R", [k])
                with T.init():
                    C[0] = T.float32(0)
                C[0] = C[0] + A[vk] * B[vk]
"""


def _row_dots(k: int):
    A, B = te.placeholder((3, k), name="A"), te.placeholder((3, k), name="B")
    r = te.reduce_axis((0, k), name="k")
    D = te.compute((3,), lambda i: te.sum(A[i, r] * B[i, r], axis=r), name="D")
    return te.create_prim_func([A, B, D])


def test_an_intrinsic_with_an_init_only_on_a_tile_holding_the_whole_reduction():
    # audit (helper-84): an intrinsic whose description zeroes its output (T.init) was
    # accepted on the inner 8 of a reduction of 16: it zeroed D again on every tile, and D
    # held the last tile's partial sums
    name = "test_dot8_with_init"
    if TensorIntrin.get(name, allow_missing=True) is None:
        desc = sched.parse(DOT8_WITH_INIT)
        TensorIntrin.register(name, desc, desc)
    rng = np.random.default_rng(0)
    for k in (8, 16):
        sch = sched.Schedule(_row_dots(k))
        _, r = sch.get_loops(sch.get_block("D"))
        _, r_inner = sch.split(r, [None, 8])
        a, b = rng.random((3, k), np.float32), rng.random((3, k), np.float32)
        if k == 16:
            before = sch.func
            with pytest.raises(ScheduleError, match=r"the reduction of block 'D' goes on "
                               r"outside the tensorized loops \(its reduce variable v_k = "
                               r"v_k_0 \* 8 \+ k_1 uses v_k_0\).*decompose_reduction"):
                sch.tensorize(r_inner, name)
            assert sch.func is before
            continue
        sch.tensorize(r_inner, name)        # the tile is the whole reduction: one init
        d = np.full(3, np.nan, np.float32)
        sched.build(sch, target="c")(a, b, d)
        np.testing.assert_allclose(d, (a.astype(np.float64) * b).sum(axis=1), rtol=1e-5)


def test_a_loop_starting_elsewhere_than_the_intrinsics_is_refused_saying_so():
    # audit (helper-85): "has extent 8, the intrinsic's loop has extent 8" for range(4, 12)
    name = "test_dot8_with_init"
    if TensorIntrin.get(name, allow_missing=True) is None:
        desc = sched.parse(DOT8_WITH_INIT)
        TensorIntrin.register(name, desc, desc)
    func = sched.parse("""
@T.prim_func
def main(A: T.Buffer((3, 16), "float32"), B: T.Buffer((3, 16), "float32"),
         D: T.Buffer((3,), "float32")):
    for i in range(3):
        for k in range(4, 12):
            with T.block("D"):
                vi = T.axis.spatial(3, i)
                vk = T.axis.reduce((4, 12), k)
                with T.init():
                    D[vi] = T.float32(0)
                D[vi] = D[vi] + A[vi, vk] * B[vi, vk]
""")
    sch = sched.Schedule(func)
    _, k = sch.get_loops(sch.get_block("D"))
    with pytest.raises(ScheduleError, match=r"loop 0 \('k'\) starts at 4, the intrinsic's "
                       r"loop 'k' at 0"):
        sch.tensorize(k, name)

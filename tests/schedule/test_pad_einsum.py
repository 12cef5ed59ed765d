"""pad_einsum (sched/schedule/pad_einsum.py): an einsum block's domain padded to multiples,
through padded copies of its buffers; numbers checked against numpy on the C target, and the
refusals where padding would change a result."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.schedule.trace import Trace
from sched.script import T


def matmul(m=127, n=127, k=127, dtype="float32"):
    A = te.placeholder((m, k), name="A", dtype=dtype)
    B = te.placeholder((k, n), name="B", dtype=dtype)
    r = te.reduce_axis((0, k), name="r")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return te.create_prim_func([A, B, C])


def run_matmul(func, m=127, n=127, k=127, dtype="float32"):
    rng = np.random.default_rng(0)
    if dtype == "float32":
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
    else:
        a = rng.integers(-100, 100, (m, k)).astype(dtype)
        b = rng.integers(-100, 100, (k, n)).astype(dtype)
    c = np.full((m, n), 7, dtype)               # every element must be written
    sched.build(func, target="c")(a, b, c)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want.astype(dtype), rtol=1e-4, atol=1e-3)


def test_matmul_padded_to_tiles_of_32_computes_the_same():
    func = matmul()
    sch = sched.Schedule(func)
    sch.pad_einsum("C", [32, 32, 32])
    script = sch.func.script()
    assert 'A_pad = T.alloc_buffer((128, 128), "float32")' in script
    assert 'C_pad = T.alloc_buffer((128, 128), "float32")' in script
    assert "for i, j, r in T.grid(128, 128, 128):" in script
    assert "C_pad[v_i, v_j] = C_pad[v_i, v_j] + A_pad[v_i, v_r] * B_pad[v_r, v_j]" in script
    assert "for ax0_2, ax1_2 in T.grid(127, 127):" in script          # the copy back
    assert "C[v0_2, v1_2] = C_pad[v0_2, v1_2]" in script
    assert sched.parse(script) == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func
    run_matmul(sch.func)
    # the point of it: tiles of 32 now divide every loop (no predicate)
    i, j, r = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 32])
    jo, ji = sch.split(j, [None, 32])
    sch.reorder(io, jo, ii, ji)
    sch.parallel(io)
    sch.vectorize(ji)
    assert "T.where" not in sch.func.script()
    run_matmul(sch.func)


def test_only_the_growing_variables_pad_and_integers_too():
    func = matmul(64, 10, 30, "int32")
    sch = sched.Schedule(func)
    sch.pad_einsum("C", [1, 16, 1])          # j only: A is not copied
    script = sch.func.script()
    assert "A_pad" not in script and "B_pad = T.alloc_buffer((30, 16)" in script
    assert "C_pad = T.alloc_buffer((64, 16)" in script
    run_matmul(sch.func, 64, 10, 30, "int32")
    unchanged = sched.Schedule(func)
    unchanged.pad_einsum("C", [8, 5, 3])     # every extent a multiple already
    assert unchanged.func == func


def test_an_elementwise_block_with_a_broadcast_and_a_constant_index():
    @T.prim_func
    def add_row(A: T.Buffer((3, 13, 7), "float32"), b: T.Buffer((7,), "float32"),
                C: T.Buffer((13, 7), "float32")):
        for i, j in T.grid(13, 7):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[2, vi, vj] + b[vj]

    sch = sched.Schedule(add_row)
    sch.pad_einsum("C", [16, 8])
    script = sch.func.script()
    assert 'A_pad = T.alloc_buffer((1, 16, 8), "float32")' in script     # A[2] only
    assert "A_pad[v0, v1, v2] = T.if_then_else(v1 < 13 and v2 < 7, A[2, v1, v2]" in script
    assert "C_pad[vi, vj] = A_pad[0, vi, vj] + b_pad[vj]" in script
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 13, 7)).astype(np.float32)
    b = rng.standard_normal(7).astype(np.float32)
    c = np.full((13, 7), np.nan, np.float32)
    sched.build(sch.func, target="c")(a, b, c)
    np.testing.assert_array_equal(c, a[2] + b)


def test_a_block_inside_an_outer_loop_is_padded_below_it():
    """A batch loop that is not padded stays around the nest; the copies run outside it."""
    A = te.placeholder((3, 5, 6), name="A")
    r = te.reduce_axis((0, 6), name="r")
    S = te.compute((3, 5), lambda b, i: te.sum(A[b, i, r] * A[b, i, r], axis=r), name="S")
    func = te.create_prim_func([A, S])
    sch = sched.Schedule(func)
    sch.pad_einsum("S", [1, 8, 8])
    assert "for b, i, r in T.grid(3, 8, 8):" in sch.func.script()
    a = np.random.default_rng(2).standard_normal((3, 5, 6)).astype(np.float32)
    s = np.full((3, 5), np.nan, np.float32)
    sched.build(sch.func, target="c")(a, s)
    np.testing.assert_allclose(s, (a * a).sum(-1), rtol=1e-5)


def max_reduce():
    A = te.placeholder((10, 10), name="A")
    r = te.reduce_axis((0, 10), name="r")
    return te.create_prim_func(
        [A, te.compute((10,), lambda i: te.max(A[i, r], axis=r), name="M")])


def test_a_max_reduction_padded_along_its_reduction_is_refused():
    """max(M, 0) is not M: padding the reduction with zeros would change rows of negatives.
    Padding its spatial variable alone is fine."""
    sch = sched.Schedule(max_reduce())
    with pytest.raises(ScheduleError, match=r"at a padded 'v_r' .* would store .*max.*"
                                            r"the padding would change the result"):
        sch.pad_einsum("M", [1, 16])
    sch.pad_einsum("M", [16, 1])
    a = -np.random.default_rng(3).random((10, 10)).astype(np.float32) - 1.0
    m = np.zeros(10, np.float32)
    sched.build(sch.func, target="c")(a, m)
    np.testing.assert_array_equal(m, a.max(1))


def test_a_float_factor_that_does_not_depend_on_the_padded_variable_is_refused():
    """0 * D[i] is not 0 where D[i] is inf: the sum would take a NaN."""
    A = te.placeholder((4, 5), name="A")
    D = te.placeholder((4,), name="D")
    r = te.reduce_axis((0, 5), name="r")
    S = te.compute((4,), lambda i: te.sum(A[i, r] * D[i], axis=r), name="S")
    sch = sched.Schedule(te.create_prim_func([A, D, S]))
    with pytest.raises(ScheduleError, match="pad a sum of products of reads that all depend"):
        sch.pad_einsum("S", [1, 8])



@pytest.mark.parametrize("update, oracle", [
    (lambda a, b: a * te.exp(b), lambda a, b: a @ np.exp(b)),      # 0 * exp(0): a zero
    (lambda a, b: te.log(a + 1.0) * b, lambda a, b: np.log(a + 1) @ b),     # log(1) * 0
    (lambda a, b: a * te.rsqrt(b), None),             # 0 * rsqrt(0) = 0 * inf: NaN
    (lambda a, b: te.log(a) * b, None),               # log(0) * 0: NaN
])
def test_a_factor_of_math_functions_at_the_padding_is_judged_by_its_value(update, oracle):
    # 0 * T.exp(0) was refused as if exp(0) could be inf (audit helper-165)
    A = te.placeholder((13, 7), name="A")
    B = te.placeholder((7, 11), name="B")
    k = te.reduce_axis((0, 7), name="k")
    C = te.compute((13, 11), lambda i, j: te.sum(update(A[i, k], B[k, j]), axis=k), name="C")
    sch = sched.Schedule(te.create_prim_func([A, B, C]))
    if oracle is None:
        with pytest.raises(ScheduleError, match="the padding would change the result"):
            sch.pad_einsum("C", [1, 1, 8])
        return
    sch.pad_einsum("C", [1, 1, 8])
    rng = np.random.default_rng(0)
    a, b = rng.random((13, 7), dtype=np.float32), rng.random((7, 11), dtype=np.float32)
    c = np.zeros((13, 11), np.float32)
    sched.build(sch.func, target="c")(a, b, c)
    np.testing.assert_allclose(c, oracle(a, b), rtol=1e-5)

def test_refusals_name_what_to_change():
    sch = sched.Schedule(matmul())
    with pytest.raises(ScheduleError, match="padding must be a list of 3 positive integers"):
        sch.pad_einsum("C", [32, 32])
    with pytest.raises(ScheduleError, match="padding must be a list of 3"):
        sch.pad_einsum("C", [32, 0, 1])
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, [None, 2])
    with pytest.raises(ScheduleError, match="not to one loop over its extent: pad the block "
                                            "before splitting"):
        sch.pad_einsum("C", [32, 1, 1])

    @T.prim_func
    def shifted(A: T.Buffer((9,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi + 1]

    with pytest.raises(ScheduleError, match=r"an einsum indexes by iteration variables and "
                                            r"constants only \(vi \+ 1 is neither\)"):
        sched.Schedule(shifted).pad_einsum("B", [16])

    @T.prim_func
    def broadcast_write(A: T.Buffer((4, 5), "float32"), B: T.Buffer((4,), "float32")):
        for i, j in T.grid(4, 5):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi] = A[vi, vj]

    with pytest.raises(ScheduleError, match="spatial variable 'vj' of block 'B' does not index "
                                            "its output 'B'"):
        sched.Schedule(broadcast_write).pad_einsum("B", [1, 8])


def test_a_neighbour_in_the_same_nest_is_refused():
    """A consumer computed at the block's loop reads the output before the copy back."""
    A = te.placeholder((6, 6), name="A")
    B = te.compute((6, 6), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((6, 6), lambda i, j: B[i, j] + 1.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    sch.reverse_compute_at(sch.get_block("C"), sch.get_loops(sch.get_block("B"))[0])
    with pytest.raises(ScheduleError, match="block 'C' reads the output 'B' in the same nest"):
        sch.pad_einsum("B", [1, 8])


def test_a_block_that_reads_its_output_without_an_init_is_refused():
    """After decompose_reduction the update reads C's values from the init block, which the
    padded copy would not hold; an in-place update likewise."""
    sch = sched.Schedule(matmul())
    block = sch.get_block("C")
    sch.decompose_reduction(block, sch.get_loops(block)[2])
    with pytest.raises(ScheduleError, match="reads its output 'C' and has no T.init"):
        sch.pad_einsum("C_update", [32, 32, 32])

    @T.prim_func
    def scale_in_place(A: T.Buffer((10,), "float32")):
        for i in range(10):
            with T.block("A"):
                vi = T.axis.remap("S", [i])
                A[vi] = A[vi] * 2.0

    with pytest.raises(ScheduleError, match="reads its output 'A' and has no T.init"):
        sched.Schedule(scale_in_place).pad_einsum("A", [16])


def test_a_float16_matmul_pads_and_computes_the_same():
    """0 * 0 in float16 is 0, which the simplifier does not fold (audit, helper-40: refused
    the tensor-core use of pad_einsum)."""
    func = matmul(13, 11, 7, "float16")
    sch = sched.Schedule(func)
    sch.pad_einsum("C", [16, 16, 8])
    rng = np.random.default_rng(4)
    a = rng.standard_normal((13, 7)).astype(np.float16)
    b = rng.standard_normal((7, 11)).astype(np.float16)
    want, got = np.full((13, 11), 7, np.float16), np.full((13, 11), 7, np.float16)
    sched.build(func, target="c")(a, b, want)
    sched.build(sch.func, target="c")(a, b, got)
    np.testing.assert_array_equal(got, want)


def test_an_output_at_a_repeated_variable_or_a_loop_of_two_variables_is_refused():
    """C[vi, vi] writes a diagonal: the copy back of the whole padded box overwrote the rest
    of C; a loop binding vi and vj grew for one and took the other out of its domain (audit,
    helper-40)."""
    @T.prim_func
    def diagonal(A: T.Buffer((5,), "float32"), C: T.Buffer((5, 5), "float32")):
        for i in range(5):
            with T.block("C"):
                vi = T.axis.spatial(5, i)
                C[vi, vi] = A[vi] * T.float32(2)

    with pytest.raises(ScheduleError, match=r"stores C\[vi, vi\], a variable at two indices"):
        sched.Schedule(diagonal).pad_einsum("C", [8])

    @T.prim_func
    def one_loop(A: T.Buffer((5,), "float32"), C: T.Buffer((5, 5), "float32")):
        for i in range(5):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, i])
                C[vi, vj] = A[vi] * T.float32(2)

    for padding in ([8, 1], [1, 8]):
        with pytest.raises(ScheduleError, match="loop 'i' binds 'v[ij]' and 'v[ij]' of block "
                                                "'C'"):
            sched.Schedule(one_loop).pad_einsum("C", padding)


def test_a_symbolic_extent_pads_to_a_multiple_that_a_split_divides(rng):
    """dlight's Matmul rule pads a dynamic dim (audit helper-42: refused, 'constant extents');
    the padded loop, (n + 31) // 32 * 32, splits by 32 with no guard."""
    n = te.var("n", "int64")
    A = te.placeholder((n, 16), name="A")
    B = te.placeholder((16, 24), name="B")
    r = te.reduce_axis((0, 16), name="r")
    func = te.create_prim_func([A, B, te.compute((n, 24), lambda i, j: te.sum(
        A[i, r] * B[r, j], axis=r), name="C")])
    sch = sched.Schedule(func)
    sch.pad_einsum("C", [32, 8, 1])
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, [None, 32])
    script = sch.func.script()
    assert "A_pad = T.alloc_buffer(((n + T.int64(31)) // T.int64(32) * T.int64(32), 16)" in script
    assert "T.grid((n + T.int64(31)) // T.int64(32), T.int64(32), 24, 16)" in script
    assert "T.where" not in script
    assert sched.parse(script) == sch.func
    kernel = sched.build(sch.func, target="c")
    for size in (1, 31, 33, 64):
        a = rng.standard_normal((size, 16)).astype(np.float32)
        b = rng.standard_normal((16, 24)).astype(np.float32)
        c = np.full((size, 24), np.nan, np.float32)
        kernel(a, b, c)
        np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@T.prim_func
def lower_sums(A: T.Buffer((5, 5), "float32"), X: T.Buffer((5, 3), "float32")):
    for i, j in T.grid(5, 3):
        for k in range(i + 1):
            with T.block("X"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    X[vi, vj] = T.float32(0)
                X[vi, vj] = X[vi, vj] + A[vi, vk]


def test_a_triangular_nest_is_refused():
    """Padding i of a sum over `range(i + 1)` rebuilt k over its whole domain: whole rows
    summed (audit helper-79)."""
    sch = sched.Schedule(lower_sums)
    with pytest.raises(ScheduleError, match="loop 'k' around block 'X' runs from 0 over "
                                            r"i \+ 1, which moves with loop 'i'"):
        sch.pad_einsum(sch.get_block("X"), [2, 1, 1])
    sch.pad_einsum(sch.get_block("X"), [1, 1, 1])        # nothing padded: nothing changes
    a = np.arange(1, 26, dtype=np.float32).reshape(5, 5)
    x = np.zeros((5, 3), np.float32)
    sched.build(sch.func, target="c")(a, x)
    np.testing.assert_allclose(x, [[a[i, :i + 1].sum()] * 3 for i in range(5)])


@T.prim_func
def _reduction_over_m_minus_1(var_A: T.handle, var_B: T.handle, var_C: T.handle):
    n = T.int32()
    m = T.int32()
    A = T.match_buffer(var_A, (n, m), "float32")
    B = T.match_buffer(var_B, (m, 4), "float32")
    C = T.match_buffer(var_C, (n, 4), "float32")
    for i, j, k in T.grid(n, 4, m - 1):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(1)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@pytest.mark.parametrize("m", [1, 2, 6])
def test_a_reduce_range_that_may_be_empty_leaves_the_output_as_the_caller_passed_it(m):
    # at m = 1 the reduction runs no instance, so C keeps its values (README, "Reductions");
    # padded, C_pad was never initialized and its garbage copied into C (audit helper-122)
    sch = sched.Schedule(_reduction_over_m_minus_1)
    sch.pad_einsum(sch.get_block("C"), [4, 4, 4])
    assert "T.where(m - 1 >= 1)" in sch.mod.script()
    rng = np.random.default_rng(m)
    a = rng.standard_normal((3, m)).astype(np.float32)
    b = rng.standard_normal((m, 4)).astype(np.float32)
    expected = np.full((3, 4), 42.0, np.float32)
    if m > 1:
        expected = 1 + a[:, :m - 1] @ b[:m - 1]
    for run in (sched.build(sch.func, target="c"),
                lambda *args: sched.interpret(sch.func, *args)):
        c = np.full((3, 4), 42.0, np.float32)
        run(a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-5)

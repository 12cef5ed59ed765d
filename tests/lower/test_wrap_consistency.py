"""Integer arithmetic that wraps, read alike by the model (which proves accesses in bounds)
and by the lowering (which simplifies and widens indices): audit helper-166's and -168's
programs. Each is either refused as out of bounds (where the wrapped index leaves the buffer)
or builds to what a numpy oracle computing the wrap gives."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched.polyhedral.in_bounds import OutOfBoundsError


def wrap64(value: int) -> int:
    return (value + 2**63) % 2**64 - 2**63


def parse(body: str, params: str = 'A: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")'):
    return sched.parse(f'''
@T.prim_func
def f({params}):
    for i in range(4):
        with T.block("C"):
            vi = T.axis.spatial(4, i)
{body}
''')


def run_guarded(func, a, size: int, *scalars) -> tuple[np.ndarray, np.ndarray]:
    """C's elements, and the memory just past it (which must stay -1)."""
    storage = np.full(size + 16, -1, np.float32)
    sched.build(func, target="c", check_bounds="strict")(a, storage[:size], *scalars)
    return storage[:size], storage[size:]


def test_a_let_of_int64_arithmetic_past_2_63_is_bounded_by_its_value():
    # x = vi * 2**62 was taken as at most 2**40: (x * 4) // 4 simplified to x, which the
    # kernel wraps; it wrote 15 elements before C (helper-166) and past C (helper-168)
    func = parse('''            x = T.Cast("int64", vi) * T.int64(2**62)
            C[(x * T.int64(4)) // T.int64(4) // T.int64(2**62) * T.int64(8)
              + T.int64(1)] = A[vi]''')
    c, past = run_guarded(func, np.arange(4, dtype=np.float32) + 10, 4)
    targets = [wrap64(wrap64(v * 2**62) * 4) // 4 // 2**62 * 8 + 1 for v in range(4)]
    assert set(targets) == {1} and c[1] == 13 and (past == -1).all()


def test_an_int32_let_past_int32_keeps_its_products_exact_only_where_they_fit():
    # x = vi * 2**30 holds up to 3 * 2**30 (an int64 let after widening); x * 2**30 * 3
    # passes 2**63 and wraps: `// 3` was dropped as if exact, and C[8..10] written
    # (helper-166)
    func = parse('''            x = vi * 1073741824
            C[x * 1073741824 * 3 // 3 // 1073741824 // 1073741824 + 3] = A[vi]''',
                 'A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")')
    a = np.arange(8, dtype=np.float32) + 10
    expected = np.full(8, -1, np.float32)
    for v in range(4):
        expected[wrap64(v * 2**30 * 2**30 * 3) // 3 // 2**30 // 2**30 + 3] = a[v]
    c, past = run_guarded(func, a, 8)
    np.testing.assert_array_equal(c, expected)
    assert (past == -1).all()


def test_an_index_of_a_bitwise_operation_beside_arithmetic_past_int32_is_computed_in_int64():
    # T.min(T.bitwise_and(vi, 3), vi * 2**30 - 4): the min was left in int32 and its
    # operand narrowed alone, wrapped: C[-4] at vi = 4 (helper-166)
    func = sched.parse('''
@T.prim_func
def f(A: T.Buffer((5,), "float32"), C: T.Buffer((4,), "float32")):
    for i in range(2):
        with T.block("C"):
            vi = T.axis.spatial(5, i * 3 + 1)
            C[T.min(T.bitwise_and(vi, 3), vi * 1073741824 - 4)] = A[vi]
''')
    c, past = run_guarded(func, np.arange(10, 15, dtype=np.float32), 4)
    expected = np.full(4, -1, np.float32)
    for v in (1, 4):
        expected[min(v & 3, v * 2**30 - 4)] = 10 + v
    np.testing.assert_array_equal(c, expected)
    assert (past == -1).all()


@pytest.mark.parametrize("index", [
    # INT64_MIN // -1 wraps to INT64_MIN; the model read 2**63
    "(T.Cast(\"int64\", vi) * T.int64(2**62) // T.int64(-1)) // T.int64(2**62) * T.int64(-1)"
    " + T.int64(2)",
    # truncdiv(-2**63, 2**62) is -2; the model negated -2**63, which wraps, and read +2
    "T.int64(2) - T.truncdiv(T.Cast(\"int64\", vi) * T.int64(2**62), T.int64(2**62))",
])
def test_divisions_of_int64_min_are_read_as_the_kernel_computes_them(index):
    func = parse(f"            C[{index}] = A[vi]")
    with pytest.raises(OutOfBoundsError, match=r"C\[vi=2\] writes C\[4\]"):
        sched.build(func, target="c")


def test_int32_data_divided_by_minus_one_wraps_in_the_model():
    # INT32_MIN // -1 is INT32_MIN in the stored value: the far branch is taken at vi = 2
    func = parse("            C[vi] = T.if_then_else(vi * 1073741824 // -1 >= 0, A[vi], A[vi * 5])",
                 'A: T.Buffer((8,), "float32"), C: T.Buffer((4,), "float32")')
    with pytest.raises(OutOfBoundsError, match=r"reads A\[10\]"):
        sched.build(func, target="c")


def test_an_unsigned_scalar_reaches_its_whole_range():
    # a uint32 scalar was taken as at most 2**31: p * (2**32 - 1) // (2**32 - 1) == p read
    # as always true, and A[vi + 16] never read; at p = 2**32 - 1 the kernel wraps
    func = parse('''            C[vi] = T.if_then_else(T.Cast("int64", p) * T.int64(4294967295)
                // T.int64(4294967295) == T.Cast("int64", p), A[vi], A[vi + 16])''',
                 'A: T.Buffer((16,), "float32"), C: T.Buffer((4,), "float32"), p: T.uint32')
    kernel = sched.build(func, target="c")
    a, c = np.arange(16, dtype=np.float32), np.zeros(4, np.float32)
    kernel(a, c, 7)
    np.testing.assert_array_equal(c, a[:4])
    with pytest.raises(sched.KernelArgumentError, match="out of bounds"):
        kernel(a, c, 2**32 - 1)


def test_an_int64_scalar_under_a_division_inside_a_product_is_checked_at_the_call():
    # T.min(m // 2 * 4, 0): m was not checked against 2**40, and at m = 2**63 - 4 the
    # kernel's product wrapped and wrote C[vi + 8]
    func = parse('''            C[T.Cast("int64", vi)
              - T.min(m // T.int64(2) * T.int64(4), T.int64(0))] = A[vi]''',
                 'A: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32"), m: T.int64')
    kernel = sched.build(func, target="c", check_bounds="strict")
    a, c = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    kernel(a, c, 6)
    np.testing.assert_array_equal(c, a)
    with pytest.raises(sched.KernelArgumentError, match="up to 2\\*\\*40 in magnitude"):
        kernel(a, c, 2**63 - 4)


def test_bounds_past_int64_are_a_whole_dimension_not_a_raw_error():
    # isl's exact bound of (vo * (2**62 + 1)) // 2**62 + 2, 2**63, is no IR constant:
    # compute_at and the build's compaction raised a raw TypeError (helper-166)
    func = sched.parse('''
@T.prim_func
def f(a: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (8,), "float32")
    C = T.match_buffer(c, (n,), "float32")
    B = T.alloc_buffer((8,), "float32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] * T.float32(2)
    for i in range(n):
        with T.block("C"):
            vi = T.axis.spatial(n, i)
            C[vi] = B[(T.Cast("int64", vi) * T.int64(4611686018427387905))
                      // T.int64(4611686018427387904) + T.int64(2)]
''')
    sch = sched.Schedule(func)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
    a = np.arange(8, dtype=np.float32)
    for n in (1, 5):
        expected = np.array([a[wrap64(v * (2**62 + 1)) // 2**62 + 2] * 2 for v in range(n)],
                            np.float32)
        c = np.zeros(n, np.float32)
        sched.build(sch.mod, target="c")(a, c)
        np.testing.assert_array_equal(c, expected)


def test_int64_shapes_index_as_int32_ones_do():
    # with every int64 variable taken as up to 2**40, i * 2**24 counted as passing 2**63:
    # the fused and split index of a (4, 4096, 4096) int64 shape stayed unsimplified and
    # its vector loop became scalar (helper-168)
    from sched import compute as te
    from sched.c.codegen import generate_c
    from sched.lower import lower

    shape = tuple(sched.ir.IntImm(d, "int64") for d in (4, 4096, 4096))
    A = te.placeholder(shape, name="A")
    C = te.compute(shape, lambda i, j, k: A[i, j, k] * 2.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    _, j, k = sch.get_loops(sch.get_block("C"))
    _, inner = sch.split(sch.fuse(j, k), [None, 16])
    sch.vectorize(inner)
    source = generate_c(lower(sch.func))
    assert "i * 16777216 + j_k_fused_0 * 16 + j_k_fused_1" in source


def test_an_int64_loop_past_2_40_is_refused_at_build():
    # the model takes an int64 variable as at most 2**40: over range(2**50, 2**50 + 4) it
    # read i * 8192 exactly where the kernel wraps it, and A was read past its end
    # (helpers 166, 168)
    func = sched.parse('''
@T.prim_func
def f(A: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
    for i in T.serial(T.int64(2**50), T.int64(2**50 + 4)):
        with T.block("C"):
            vi = T.axis.spatial(T.int64(2**51), i)
            C[vi - T.int64(2**50)] = A[(vi * T.int64(8192)) // T.int64(2**62) + T.int64(1)]
''')
    with pytest.raises(sched.BuildError, match="the int64 variable 'i' takes values past "
                                               "2\\*\\*40 in magnitude"):
        sched.build(func, target="c")


def test_a_low_bits_mask_is_index_arithmetic_to_the_model_the_kernel_and_the_interpreter():
    # T.bitwise_and(x, 2**k - 1) is x's floor remainder modulo 2**k: the model read the
    # index below exactly (4..7), the kernel wrapped the product in int32 and stored before C,
    # and the interpreter wrapped it too (helper-169)
    func = sched.parse('''
@T.prim_func
def f(A: T.Buffer((4,), "float32"), C: T.Buffer((8,), "float32")):
    for i in range(4):
        with T.block("C"):
            vi = T.axis.spatial(4, i)
            C[T.bitwise_and(vi + 4, 7) * 1073741824 // 1073741824] = A[vi]
''')
    a = np.arange(4, dtype=np.float32) + 10
    expected = np.full(8, -1, np.float32)
    expected[4:] = a
    interpreted = np.full(8, -1, np.float32)
    sched.interpret(func, a, interpreted)
    c, past = run_guarded(func, a, 8)
    np.testing.assert_array_equal(interpreted, expected)
    np.testing.assert_array_equal(c, expected)
    assert (past == -1).all()


def test_a_shift_by_a_variable_count_keeps_the_int32_wrap_of_its_operand():
    # widened with its operand, the shift ran on the exact value: positions 5 where numpy
    # and the interpreter give 3 (helper-169)
    func = sched.parse('''
@T.prim_func
def f(A: T.Buffer((4, 2), "float32"), C: T.Buffer((4, 2, 8), "float32")):
    for i, j in T.grid(4, 2):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj, T.shift_right(vi * 1073741824, vj + 31) + 4] = A[vi, vj]
''')
    a = (np.arange(8, dtype=np.float32) + 10).reshape(4, 2)
    c = np.zeros((4, 2, 8), np.float32)
    sched.build(func, target="c")(a, c)
    for v in range(4):
        for j in range(2):
            wrapped = np.int32((v * 2**30 + 2**31) % 2**32 - 2**31)
            position = int(wrapped >> (j + 31)) + 4 if j + 31 < 32 else 4 - (wrapped < 0)
            assert c[v, j, position] == a[v, j]


@pytest.mark.parametrize("body", [
    # the product of a mask and 2**62 wraps in int64 (the mask's magnitude was unknown)
    "C[(T.bitwise_and(T.Cast(\"int64\", vi) + T.int64(4), T.int64(7)) * T.int64(2**62))"
    " // T.int64(2**62)] = A[vi]",
    # an int32 product marked as wrapping, then an int64 product past 2**63: the far branch
    "C[vi] = T.if_then_else(T.Cast(\"int64\", vi * 1073741824) * T.int64(8589934592)"
    " < T.int64(0), A[vi + 100000000], A[vi])",
])
def test_int64_products_over_masks_and_wrapped_int32_values_wrap_in_the_model(body):
    func = parse(f"            {body}")
    with pytest.raises(OutOfBoundsError):
        sched.build(func, target="c")


@pytest.mark.parametrize("operand, value, check", [
    ("T.if_then_else(vi < 100, T.Cast(\"int64\", vi), T.int64(0))", lambda v: v, "strict"),
    # (the model cannot read a xor: strict refuses it, static runs it unchecked)
    ("T.Cast(\"int64\", T.bitwise_xor(vi, 1))", lambda v: v ^ 1, "static"),
])
def test_int64_products_of_selects_and_intrinsics_wrap_in_the_lowering(operand, value, check):
    """A select or an intrinsic times 5 * 2**60: the lowering took the product as unable to
    pass int64 (the operand's magnitude was unknown), read it exactly and simplified
    `(p * 5 * 2**60) // 2**60` to `p * 5`: stores past C under strict (audit helper-176)."""
    func = parse(f"            C[{operand} * T.int64({5 * 2**60}) // T.int64({2**60})"
                 f" + T.int64(6)]"
                 f" = A[vi]", params='A: T.Buffer((4,), "float32"), C: T.Buffer((16,), '
                                    '"float32")')
    a = np.arange(4, dtype=np.float32) + 1
    expected = np.full(16, -1, np.float32)        # run_guarded's fill: unwritten
    for v in range(4):
        expected[wrap64(value(v) * 5 * 2**60) // 2**60 + 6] = a[v]
    storage = np.full(32, -1, np.float32)
    sched.build(func, target="c", check_bounds=check)(a, storage[:16])
    c, past = storage[:16], storage[16:]
    np.testing.assert_array_equal(c, expected)
    assert (past == -1).all()


@pytest.mark.parametrize("dtype, limit", [("int32", 2**31 - 1), ("int64", 2**31)])
def test_a_guard_on_a_size_near_its_types_end_is_kept(dtype, limit):
    # sizes were taken as below 2**31 - 1, int64 ones too: `if n < limit` was dropped, and
    # at n = limit a store went past C (helper-169)
    from sched.c.codegen import generate_c
    from sched.lower import lower

    func = sched.parse(f'''
@T.prim_func
def f(a: T.handle, C: T.Buffer((8,), "float32")):
    n = T.{dtype}()
    A = T.match_buffer(a, (n,), "int8")
    for i in range(1):
        with T.block("C"):
            vi = T.axis.spatial(1, i)
            if n < T.{dtype}({limit}):
                C[n - T.{dtype}({limit - 7})] = T.float32(1)
''')
    assert f"n < {limit}" in generate_c(lower(func)).replace(f"INT64_C({limit})", str(limit))


@pytest.mark.parametrize("nest", [
    # a block binding adds the offset
    """    for i in T.serial(T.int64(4)):
        with T.block("B"):
            vi = T.axis.spatial((T.int64(2**50), T.int64(2**50 + 4)), i + T.int64(2**50))
            B[vi - T.int64(2**50)] = A[vi * T.int64(8192) // T.int64(2**60) - T.int64(8)]""",
    # a let gives the loop's bounds
    """    x = T.int64(2**50)
    for i in T.serial(x, x + T.int64(4)):
        with T.block("B"):
            vi = T.axis.spatial((T.int64(2**50), T.int64(2**50 + 4)), i)
            B[vi - T.int64(2**50)] = A[vi * T.int64(8192) // T.int64(2**60) - T.int64(8)]""",
])
def test_int64_values_past_2_40_through_bindings_and_lets_are_refused_at_build(nest):
    # the check looked at loops of constant bounds only: the kernel read A[-16] (helper-170)
    func = sched.parse(f'''
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((4,), "float32")):
{nest}
''')
    with pytest.raises(sched.BuildError, match="takes values past 2\\*\\*40 in magnitude"):
        sched.build(func, target="c")


@pytest.mark.parametrize("header, nest", [
    # an int64 size beside a constant past 2**40 in the bounds
    ("a: T.handle, B: T.Buffer((16,), \"float32\")", """    n = T.int64()
    A = T.match_buffer(a, (n,), "float32")
    for i in T.serial(T.int64(2**50), T.int64(2**50) + n):
        with T.block("B"):
            vi = T.axis.spatial((T.int64(2**50), T.int64(2**50) + n), i)
            B[vi - T.int64(2**50)] = A[vi * T.int64(8192) // T.int64(2**60) - T.int64(8)]"""),
    # an int32 scalar's loop, bound as a product past 2**40
    ("A: T.Buffer((16,), \"float32\"), B: T.Buffer((16,), \"float32\"), n: T.int32",
     """    for i in T.serial(n - 4, n):
        with T.block("B"):
            vi = T.axis.spatial(T.int64(2**62), T.Cast("int64", i) * T.int64(2**20))
            B[vi // T.int64(2**50)] = A[vi * T.int64(8192) // T.int64(2**62)]"""),
])
def test_int64_values_past_2_40_from_sizes_and_scalars_are_refused_at_build(header, nest):
    # a bound with a size or a scalar in it was not judged (audit helper-171)
    func = sched.parse(f'''
@T.prim_func
def f({header}):
{nest}
''')
    with pytest.raises(sched.BuildError, match="takes values past 2\\*\\*40 in magnitude"):
        sched.build(func, target="c")



def test_a_let_of_a_let_in_a_loop_bound_reaches_the_model_as_its_value():
    # the model wrote the inner let's name into isl text: a raw isl syntax error (helper-173)
    func = sched.parse('''
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((4,), "float32")):
    y: T.int32 = 3
    x: T.int64 = T.Cast("int64", y) * T.int64(2)
    for i in T.serial(x, x + T.int64(4)):
        with T.block("B"):
            vi = T.axis.spatial((T.int64(6), T.int64(10)), i)
            B[vi - T.int64(6)] = A[vi]
''')
    sched.Schedule(func)
    a = np.arange(16, dtype=np.float32)
    b = np.zeros(4, np.float32)
    sched.build(func, target="c")(a, b)
    np.testing.assert_array_equal(b, a[6:10])


def test_an_int64_loop_over_an_int32_size_times_a_constant_builds():
    # the check took the int32 size at its whole range (n * 4096 past 2**40) and refused a
    # flattened loop of an (n, 4096) buffer (audit helper-173)
    func = sched.parse('''
@T.prim_func
def f(var_A: T.handle, var_B: T.handle):
    n = T.int32()
    A = T.match_buffer(var_A, (n, T.int64(4096)), "float32")
    B = T.match_buffer(var_B, (n, T.int64(4096)), "float32")
    for i_j_fused in range(T.Cast("int64", n) * T.int64(4096)):
        with T.block("B"):
            vi = T.axis.spatial(T.Cast("int64", n), i_j_fused // T.int64(4096))
            vj = T.axis.spatial(T.int64(4096), i_j_fused % T.int64(4096))
            B[vi, vj] = A[vi, vj] * T.float32(2)
''')
    a = np.random.default_rng(0).random((3, 4096), dtype=np.float32)
    b = np.zeros_like(a)
    sched.build(func, target="c", check_bounds="strict")(a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_a_binding_the_intervals_cannot_follow_is_judged_by_its_domain():
    # vi = T.bitwise_or(2**50, i) past 2**40: the check skipped it (helper-173)
    func = sched.parse('''
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((4,), "float32")):
    for i in T.serial(T.int64(4)):
        with T.block("B"):
            vi = T.axis.spatial((T.int64(2**50), T.int64(2**50 + 4)),
                                T.bitwise_or(T.int64(2**50), i))
            B[vi - T.int64(2**50)] = A[vi * T.int64(8192) // T.int64(2**60) - T.int64(8)]
''')
    with pytest.raises(sched.BuildError, match="'vi' takes values past 2\\*\\*40"):
        sched.build(func, target="c")


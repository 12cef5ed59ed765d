"""Every access proven in bounds (issue 9, item 8): constant shapes at build (and through
`check_in_bounds`, which Schedule creation calls), symbolic shapes by a condition on the dims
checked at each kernel call (Halide-style), guarded padding reads accepted, what cannot be
proven listed and refused only under check_bounds="strict"."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import KernelArgumentError
from sched.polyhedral.in_bounds import OutOfBoundsError, bounds_report, check_in_bounds
from sched.script import T


@T.prim_func
def shifted(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("S"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi + 1]


def te_shifted():
    P = te.placeholder((4, 4), name="P")
    return te.create_prim_func([P, te.compute((4, 4), lambda i, j: P[i, j + 1], name="Q")])


def test_a_constant_shape_read_out_of_bounds_is_refused_at_build():
    found = check_in_bounds(shifted)
    assert found is not None and "S[vi=7] reads A[8]" in str(found)
    with pytest.raises(OutOfBoundsError, match=r"block 'S' reads A\[vi \+ 1\] out of bounds: "
                                                r"S\[vi=7\] reads A\[8\], but A has shape"):
        sched.build(shifted, target="c")
    with pytest.raises(OutOfBoundsError, match=r"reads P\[v_i, v_j \+ 1\].*P\[0, 4\]"):
        sched.build(te_shifted(), target="c")


def test_check_bounds_off_builds_anyway():
    sched.build(te_shifted(), target="c", check_bounds="off")


@T.prim_func
def binding_outside_its_domain(A: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("S"):
            vi = T.axis.spatial(8, i + 1)
            A[vi] = T.float32(0)


def test_a_binding_outside_its_iteration_domain_is_refused():
    with pytest.raises(OutOfBoundsError, match="at i=7 the binding of 'vi' is outside its "
                                                r"domain \[0, 8\)"):
        sched.build(binding_outside_its_domain, target="c")


@T.prim_func
def padded(A: T.Buffer((8,), "float32"), B: T.Buffer((10,), "float32")):
    for i in range(10):
        with T.block("pad"):
            vi = T.axis.spatial(10, i)
            B[vi] = T.if_then_else(1 <= vi and vi < 9, A[vi - 1], T.float32(0))


@T.prim_func
def where_guarded(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
    for io, ii in T.grid(3, 4):
        with T.block("S"):
            vi = T.axis.spatial(10, io * 4 + ii)
            T.where(io * 4 + ii < 10)
            B[vi] = A[vi]


def test_guarded_accesses_are_in_bounds(rng):
    assert bounds_report(padded).violations == ()
    assert bounds_report(where_guarded).violations == ()
    a = rng.standard_normal(8).astype(np.float32)
    b = np.zeros(10, np.float32)
    sched.build(padded, target="c")(a, b)
    np.testing.assert_array_equal(b, np.pad(a, 1))


def test_padding_introduced_by_a_schedule_stays_accepted():
    A = te.placeholder((10,), name="A")
    func = te.create_prim_func([A, te.compute((10,), lambda i: A[i] * 2.0, name="B")])
    sch = sched.Schedule(func)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, factors=[None, 4])                # adds T.where(i_0 * 4 + i_1 < 10)
    assert check_in_bounds(sch.func) is None


@T.prim_func
def symbolic_shift(a: T.handle, b: T.handle):
    n = T.int32()
    m = T.int32()
    A = T.match_buffer(a, (m,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.block("S"):
            vi = T.axis.spatial(n, i)
            B[vi] = A[vi + 1]


def test_symbolic_shapes_are_checked_at_each_call(rng):
    assert check_in_bounds(symbolic_shift) is None           # in bounds when m > n
    kernel = sched.build(symbolic_shift, target="c")
    a = rng.standard_normal(9).astype(np.float32)
    b = np.zeros(8, np.float32)
    kernel(a, b)
    np.testing.assert_array_equal(b, a[1:])
    with pytest.raises(KernelArgumentError, match=r"with m = 8, n = 8, block 'S' reads "
                                                   r"A\[vi \+ 1\] out of bounds \(S\[vi=7\] "
                                                   r"reads A\[8\]"):
        kernel(a[:8].copy(), b)


@T.prim_func
def always_out_for_any_size(a: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    for i in range(n):
        with T.block("S"):
            vi = T.axis.spatial(n, i)
            A[vi] = A[vi + 1]


def test_symbolic_shapes_out_of_bounds_for_every_size_are_refused_at_build():
    with pytest.raises(OutOfBoundsError, match=r"reads A\[vi \+ 1\]"):
        sched.build(always_out_for_any_size, target="c")


@T.prim_func
def gather(A: T.Buffer((8,), "float32"), index: T.Buffer((8,), "int32"),
           B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("G"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[index[vi]]


def test_an_indirect_index_is_unproven_and_refused_only_when_strict(rng):
    report = bounds_report(gather)
    assert report.violations == ()
    assert any("A[index[vi]]" in u for u in report.unproven)
    sched.build(gather, target="c")
    with pytest.raises(OutOfBoundsError, match="cannot be proven in bounds"):
        sched.build(gather, target="c", check_bounds="strict")


@T.prim_func
def guarded_by_a_non_affine_condition(A: T.Buffer((8,), "float32"), m: T.int32):
    for i in range(8):
        with T.block("S"):
            vi = T.axis.spatial(8, i)
            if vi * m < 7 - m:
                A[vi + 1] = T.float32(0)


def test_an_access_under_a_condition_isl_cannot_represent_is_unproven_not_refused():
    report = bounds_report(guarded_by_a_non_affine_condition)
    assert report.violations == ()
    assert any("may be out of bounds" in u for u in report.unproven)
    assert check_in_bounds(guarded_by_a_non_affine_condition) is None


def test_build_warns_of_an_access_out_of_bounds_under_a_condition_it_cannot_read():
    # a read past A under a bool scalar or a data-dependent guard is neither proven nor
    # checked at run time: it was silent and read garbage or segfaulted (audit helpers 113,
    # 114); an access only widened by a non-affine index (a gather) is not warned of
    from sched.errors import ConservativeAnalysisWarning

    @T.prim_func
    def guarded(A: T.Buffer((10,), "float32"), B: T.Buffer((5,), "float32"), off: T.int32,
                flag: T.bool):
        for i in range(5):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = T.if_then_else(flag, A[vi * 2 + off], T.float32(0))

    assert bounds_report(guarded).possible
    with pytest.warns(ConservativeAnalysisWarning, match=r"build: function 'guarded': block "
                      r"'B' reads A\[vi \* 2 \+ off\]: may be out of bounds .* neither proven "
                      r"in bounds nor checked when the kernel runs"):
        sched.build(guarded, target="c")
    assert bounds_report(gather).possible == ()
    with pytest.raises(OutOfBoundsError, match="cannot be proven in bounds"):
        sched.build(guarded, target="c", check_bounds="strict")


@T.prim_func
def offset_by_an_unsigned_scalar(A: T.Buffer((8,), "int32"), B: T.Buffer((4,), "int32"),
                                 s: T.uint32):
    for i in range(4):
        with T.block("S"):
            vi = T.axis.spatial(4, i)
            B[vi] = A[T.Cast("uint32", vi) + s]


def test_build_warns_of_an_index_of_arithmetic_it_cannot_read():
    # unsigned (or narrowing) index arithmetic is neither proven nor checked: s = 5 read
    # A[8] silently, s = 2**32 - 1 wrapped and segfaulted (audit helpers 117, 125); a
    # gather's index, read from memory, is not warned of
    from sched.errors import ConservativeAnalysisWarning

    report = bounds_report(offset_by_an_unsigned_scalar)
    assert report.unread and not bounds_report(gather).unread
    with pytest.warns(ConservativeAnalysisWarning, match=r"build: function "
                      r"'offset_by_an_unsigned_scalar': block 'S' reads "
                      r"A\[T.Cast\(\"uint32\", vi\) \+ s\]: its index is arithmetic the "
                      r"compiler cannot read as affine .* neither proven in bounds nor checked"):
        sched.build(offset_by_an_unsigned_scalar, target="c")
    with pytest.raises(OutOfBoundsError, match="cannot be proven in bounds"):
        sched.build(offset_by_an_unsigned_scalar, target="c", check_bounds="strict")


@T.prim_func
def shifted_past_int32(A: T.Buffer((8,), "int32"), C: T.Buffer((8,), "int32")):
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = A[(T.shift_left(vi, 32) + 8) // 2]


def test_build_warns_of_a_shift_it_cannot_read():
    # a shift by 32 of an int32 loop variable is arithmetic, not a gather: it was built with
    # no warning and read A[-2147483644] (audit helper-131)
    from sched.errors import ConservativeAnalysisWarning

    assert bounds_report(shifted_past_int32).unread
    with pytest.warns(ConservativeAnalysisWarning, match=r"reads A\[\(T.shift_left\(vi, 32\) "
                      r"\+ 8\) // 2\]: its index is arithmetic the compiler cannot read"):
        sched.build(shifted_past_int32, target="c")
    with pytest.raises(OutOfBoundsError, match="cannot be proven in bounds"):
        sched.build(shifted_past_int32, target="c", check_bounds="strict")


@pytest.mark.parametrize("index", ["T.abs(vi - 20)", "T.bitwise_xor(vi, 16)"])
def test_build_warns_of_an_intrinsic_of_the_loops_it_cannot_read(index):
    # calls of the loops are arithmetic, not gathers: these wrote 5 and 16 elements past C
    # with no warning (audit helper-132)
    from sched.errors import ConservativeAnalysisWarning

    f = sched.parse(f'''
@T.prim_func
def f(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            C[{index}] = A[vi]
''')
    with pytest.warns(ConservativeAnalysisWarning, match="its index is arithmetic the "
                                                         "compiler cannot read"):
        sched.build(f, target="c")


@T.prim_func
def where_past_int64(A: T.Buffer((16,), "float32"), C: T.Buffer((2,), "float32"), x: T.int64):
    for i in range(16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            T.where(T.Cast("int64", i) * T.int64(2**61) < x)
            C[vi] = A[vi] + T.float32(1)


def test_int64_arithmetic_past_int64_is_read_as_the_kernel_wraps_it():
    # i * 2**61 wraps to -2**63 at i = 4, where the predicate holds again: read exactly, x =
    # 2**62 passed the call's check and 12 elements past C were written (audit helper-132)
    kernel = sched.build(where_past_int64, target="c")
    with pytest.raises(KernelArgumentError, match=r"with x = 4611686018427387904, block 'C' "
                                                  r"writes C\[vi\] out of bounds"):
        kernel(np.arange(16, dtype=np.float32), np.zeros(2, np.float32), 2**62)


def test_build_warns_of_a_load_in_a_predicate_it_does_not_check():
    # no access of the model: it was built silently, and read A[10**8] (audit helper-138)
    from sched.errors import ConservativeAnalysisWarning

    f = sched.parse('''
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("b"):
            vi = T.axis.spatial(16, i)
            T.where(A[i + 100000000] > T.float32(0))
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = T.float32(1)
''')
    with pytest.warns(ConservativeAnalysisWarning, match=r"block 'b' loads A\[i \+ 100000000\] "
                                                         r"in a binding, predicate, bound or "
                                                         r"condition"):
        sched.build(f, target="c")
    with pytest.raises(OutOfBoundsError, match="cannot be proven in bounds"):
        sched.build(f, target="c", check_bounds="strict")


@pytest.mark.parametrize("index", [
    'T.truncdiv((T.Cast("int64", vi) + T.int64(2**40)) * T.int64(2**30), T.int64(2**40)) '
    '- T.int64(2**30) + T.Cast("int64", vi)',
    "T.truncdiv(T.truncdiv((vi + 8) * 1073741824 * 1073741824, 1073741824), 1073741824) - 8",
])
def test_index_arithmetic_past_int64_is_read_as_the_kernel_wraps_it(index):
    # exactly, each index is vi; the kernels compute it modulo 2**64 (int32 widened):
    # proven in bounds, it wrote before C (a segfault, heap corruption: audit helper-136)
    f = sched.parse(f'''
@T.prim_func
def f(A: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("C"):
            vi = T.axis.spatial(4, i)
            C[{index}] = A[vi]
''')
    with pytest.raises(OutOfBoundsError, match="accesses memory out of bounds"):
        sched.build(f, target="c")


def test_a_load_in_a_predicate_kept_in_a_constant_shape_is_not_warned_of():
    # i < 16 over M's 16 elements (warned of by the first version of the rule: helper-140)
    import warnings

    from sched.errors import ConservativeAnalysisWarning

    f = sched.parse('''
@T.prim_func
def f(M: T.Buffer((16,), "int32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("b"):
            vi = T.axis.spatial(16, i)
            T.where(M[i] > 0)
            T.reads(M[vi])
            T.writes(B[vi])
            B[vi] = T.float32(1)
''')
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConservativeAnalysisWarning)
        sched.build(f, target="c", check_bounds="strict")


@pytest.mark.parametrize("index", [
    'T.Cast("int32", T.max((T.Cast("uint32", i) - T.uint32(1)) // T.uint32(268435456), '
    'T.uint32(0)))',                                              # 15 at i = 0
    'T.Cast("int32", T.Cast("int8", i) * T.int8(64)) // 961',     # -1 at i = 2
])
def test_a_predicate_load_through_narrow_or_unsigned_arithmetic_that_wraps_is_not_proven(index):
    # interval arithmetic took their mathematical values: built silently under strict, it
    # read M[15] and M[-1] (audit helper-143)
    f = sched.parse(f'''
@T.prim_func
def f(M: T.Buffer((1,), "int32"), C: T.Buffer((16,), "int32")):
    for i in range(16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            T.where(M[{index}] > 0)
            C[vi] = 1
''')
    with pytest.raises(OutOfBoundsError, match="cannot be proven in bounds"):
        sched.build(f, target="c", check_bounds="strict")


def _one_block(params: str, body: str, n: int):
    """`f(params)`: one block "C" over `for i in range(n)` (vi = i), whose body is `body`
    (lines at the block's indentation)."""
    return sched.parse(f"""
@T.prim_func
def f({params}):
    for i in range({n}):
        with T.block("C"):
            vi = T.axis.spatial({n}, i)
{body}
""")


def test_an_int64_scalar_in_index_arithmetic_is_checked_against_the_magnitude_it_is_proven_for():
    # the model reads int64 sums and products exactly for variables up to 2**40; at
    # m = 2**62 + 1 the kernel's 3 * m wrapped to -2**62 + 3 and read A[vi + 3] past A
    # (audit helper-143). A scalar used as data only takes any value.
    f = _one_block('A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32"), m: T.int64, '
                   'n: T.int64',
                   '            C[vi] = A[T.Cast("int64", vi) + T.min(m * T.int64(3), '
                   'T.int64(0))] + T.Cast("float32", n)', 8)
    kernel = sched.build(f, target="c")
    a, c = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    kernel(a, c, 2**40, 2**62)
    np.testing.assert_array_equal(c, a + np.float32(2**62))
    for m in (2**62 + 1, 2**40 + 1):
        with pytest.raises(KernelArgumentError, match=f"with m = {m}, n = 0, block 'C' "
                                                      f"computes integer arithmetic with m"):
            kernel(a, c, m, 0)
    with pytest.raises(KernelArgumentError, match="reads A"):
        kernel(a, c, -1, 0)


@pytest.mark.parametrize("body", [
    '            x: T.int64 = m * T.int64(3)\n'
    '            C[vi] = A[T.Cast("int64", vi) + T.min(x, T.int64(0))]',
    '            vj = T.axis.opaque(T.int64(9223372036854775807), m)\n'
    '            C[vi] = A[T.Cast("int64", vi) + T.min(vj * T.int64(3), T.int64(0))]',
])
def test_the_magnitude_check_follows_lets_and_bindings_of_the_scalar(body):
    # (they carried m * 3 past the check, which looked for m itself: audit helper-147)
    f = _one_block('A: T.Buffer((4,), "int32"), C: T.Buffer((4,), "int32"), m: T.int64', body, 4)
    kernel = sched.build(f, target="c")
    a, c = np.arange(4, dtype=np.int32), np.zeros(4, np.int32)
    kernel(a, c, 5)
    np.testing.assert_array_equal(c, a)
    with pytest.raises(KernelArgumentError, match="computes integer arithmetic with m"):
        kernel(a, c, 2**62 + 1)


def test_a_scalar_compared_as_it_is_takes_any_value():
    # no sum or product of it can wrap: a "no limit" sentinel (refused by the first version
    # of the magnitude check: audit helper-147)
    f = _one_block('A: T.Buffer((4,), "int32"), C: T.Buffer((4,), "int32"), limit: T.int64',
                   '            C[vi] = T.if_then_else(T.Cast("int64", vi) < limit, A[vi], 0)',
                   4)
    kernel = sched.build(f, target="c")
    a, c = np.arange(1, 5, dtype=np.int32), np.zeros(4, np.int32)
    kernel(a, c, 2**63 - 1)
    np.testing.assert_array_equal(c, a)


def test_a_loop_bound_of_an_int64_product_is_checked_too():
    # the kernel compares i < m * 4: at m = -2**62 + 1 the product wrapped to 4 and wrote
    # B[2], B[3]; the model read no iteration (audit helper-149)
    f = sched.parse('''
@T.prim_func
def f(B: T.Buffer((2,), "float32"), m: T.int64):
    for i in range(m * T.int64(4)):
        with T.block("b"):
            vi = T.axis.spatial(T.int64(2), i)
            B[vi] = T.float32(1.0)
''')
    kernel = sched.build(f, target="c")
    with pytest.raises(KernelArgumentError, match="computes integer arithmetic with m"):
        kernel(np.zeros(2, np.float32), -2**62 + 1)
    with pytest.raises(KernelArgumentError, match=r"binds vi out of bounds"):
        kernel(np.zeros(2, np.float32), 1)


def test_a_left_shift_wraps_as_a_product_does():
    # read exactly, m << 4 at m = 2**60 - 4 (-64 in the kernel) and (vi + 2**60 - 8) << 4 were
    # proven in bounds (audit helper-152)
    f = _one_block('A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32"), m: T.int64',
                   '            C[vi] = A[T.Cast("int64", vi) + T.min(T.shift_left(m, '
                   'T.int64(4)), T.int64(0))]', 8)
    kernel = sched.build(f, target="c")
    a, c = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    kernel(a, c, 3)
    np.testing.assert_array_equal(c, a)
    with pytest.raises(KernelArgumentError, match="computes integer arithmetic with m"):
        kernel(a, c, 2**60 - 4)
    g = sched.parse('''
@T.prim_func
def g(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = A[T.Cast("int64", vi) + T.min(T.shift_left(T.Cast("int64", vi) +
                                                               T.int64(1152921504606846968),
                                                               T.int64(4)), T.int64(0))]
''')
    with pytest.raises(OutOfBoundsError, match="accesses memory out of bounds"):
        sched.build(g, target="c")


@pytest.mark.parametrize("shape", ["(m * T.int64(3),)", "(m, T.int64(3))"])
def test_an_allocation_sized_by_an_int64_product_is_checked_too(shape):
    # (m * 3) mod 2**64 elements were allocated, 5 at m = (2**64 + 5) // 3, and 64 written
    # (heap corruption: audit helper-154); the dims' product too (helper-157)
    index = "vi" if shape.startswith("(m *") else "vi // T.int64(3), vi % T.int64(3)"
    f = sched.parse(f'''
@T.prim_func
def g(a: T.handle, c: T.handle, m: T.int64):
    n = T.int64()
    A = T.match_buffer(a, (n,), "float32")
    C = T.match_buffer(c, (n,), "float32")
    B = T.alloc_buffer({shape}, "float32")
    for i in range(n):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            B[{index}] = A[vi] * T.float32(2)
    for i in range(n):
        with T.block("C"):
            vi = T.axis.spatial(n, i)
            C[vi] = B[{index}] + T.float32(1)
''')
    kernel = sched.build(f, target="c")
    a, c = np.ones(64, np.float32), np.zeros(64, np.float32)
    kernel(a, c, 30)
    np.testing.assert_array_equal(c, 3 * a)
    with pytest.raises(KernelArgumentError, match="computes integer arithmetic with m"):
        kernel(a, c, (2**64 + 5) // 3)


def test_an_int64_scalar_in_a_data_only_condition_takes_any_value():
    # no access depends on `now - A[vi] < 6e10`: a nanosecond timestamp was refused (audit
    # helper-159)
    f = _one_block('A: T.Buffer((4,), "int64"), C: T.Buffer((4,), "int32"), now: T.int64',
                   '            C[vi] = T.if_then_else(now - A[vi] < T.int64(60000000000), 1, 0)',
                   4)
    now = 1_700_000_000_000_000_000
    a = np.array([now - 10, now - 10**11, now, now - 5 * 10**10], np.int64)
    c = np.zeros(4, np.int32)
    sched.build(f, target="c")(a, c, now)
    np.testing.assert_array_equal(c, [1, 0, 1, 1])

"""Arithmetic on the C target (and the emulated CUDA) computes what numpy computes, as the
interpreter does (audit, helper-32): signed integers wrap (arithmetic whose values may
leave its type is written unsigned, so gcc cannot fold `a + 1 > a` to true), an integer
division or modulo by 0 gives 0 and INT_MIN // -1 wraps (C's operators trap: the process died
with SIGFPE), and a float `//` or `%` is numpy's (exact, from fmod: `a - floor(a / b) * b`
left remainders outside [0, b))."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.script import T

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint32", "uint64"]


def _division(dtype: str, n: int = 64):
    A = te.placeholder((n,), dtype, name="A")
    B = te.placeholder((n,), dtype, name="B")
    Q = te.compute((n,), lambda i: A[i] // B[i], name="Q")
    R = te.compute((n,), lambda i: A[i] % B[i], name="R")
    return te.create_prim_func([A, B, Q, R])


def _on_threads(func, names=("Q", "R")):
    sch = sched.Schedule(func)
    for name in names:
        bx, tx = sch.split(sch.get_loops(sch.get_block(name))[0], [None, 32])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    return sch.func


@pytest.mark.parametrize("dtype", DTYPES)
def test_division_by_zero_and_of_the_minimum_by_minus_one_as_numpy(dtype, rng):
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, 64, endpoint=True, dtype=dtype)
    b = rng.integers(-3 if info.min else 0, 4, 64, dtype=dtype)
    a[:4] = [info.min, info.min, 7, info.max]
    b[:4] = [-1 if info.min else 1, 0, 0, 0]
    with np.errstate(all="ignore"):
        expected = (a // b, a % b)
    func = _division(dtype)
    runs = {"interpret": lambda *args: sched.interpret(func, *args),
            "c": sched.build(func, target="c"),
            "cuda-emu": sched.build(_on_threads(func), target="cuda-emu")}
    for name, run in runs.items():
        q, r = np.zeros(64, dtype), np.zeros(64, dtype)
        run(a, b, q, r)
        np.testing.assert_array_equal(q, expected[0], err_msg=name)
        np.testing.assert_array_equal(r, expected[1], err_msg=name)


@T.prim_func
def _quotients(A: T.Buffer((8,), "int32"), B: T.Buffer((8,), "int32"),
               C: T.Buffer((8,), "int32")):
    for i in range(8):
        with T.block("C"):
            vi = T.axis.remap("S", [i])
            C[vi] = A[vi] // 4 + T.truncdiv(A[vi], B[vi])


def test_a_constant_divisor_uses_the_operator_and_others_the_helper():
    source = sched.build(_quotients, target="c").source
    assert "if (b == 0) return 0;" in source and "sched_div_i32(" in source
    assert "sched_floordiv_i32(" in source and ", 4)" in source   # A may be negative
    a = np.array([-9, 9, -1, 0, 5, 7, -8, 3], np.int32)
    b = np.array([2, -2, 0, 3, 0, -1, 3, 3], np.int32)
    c = np.zeros(8, np.int32)
    sched.build(_quotients, target="c")(a, b, c)
    np.testing.assert_array_equal(c, a // 4 + np.where(b == 0, 0, np.trunc(a / np.where(
        b == 0, 1, b)).astype(np.int32)))


@pytest.mark.parametrize("vectorized", [False, True])
def test_signed_overflow_wraps(vectorized):
    A = te.placeholder((32,), "int32", name="A")
    grows = te.compute((32,), lambda i: te.if_then_else(A[i] + 1 > A[i], 1, 0), name="grows")
    wrapped = te.compute((32,), lambda i: (A[i] * 65536) // 65536, name="wrapped")
    func = te.create_prim_func([A, grows, wrapped])
    sch = sched.Schedule(func)
    if vectorized:
        for name in ("grows", "wrapped"):
            sch.vectorize(sch.get_loops(sch.get_block(name))[0])
    a = np.full(32, 2 ** 31 - 1, np.int32)
    a[1::2] = 40000
    with np.errstate(all="ignore"):
        expected = ((a + np.int32(1) > a).astype(np.int32), (a * np.int32(65536)) // 65536)
    for run in (sched.build(sch.func, target="c"),
                lambda *args: sched.interpret(func, *args)):
        out = np.zeros(32, np.int32), np.zeros(32, np.int32)
        run(a, *out)
        np.testing.assert_array_equal(out[0], expected[0])
        np.testing.assert_array_equal(out[1], expected[1])


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "int64", "uint64"])
@pytest.mark.parametrize("vectorized", [False, True])
def test_products_sums_and_differences_wrap_as_numpy(dtype, vectorized, rng):
    # without -fwrapv (gcc 12.2 miscompiled a kernel with it), arithmetic whose values may
    # leave its C type is written unsigned: uint16 * uint16 overflows C's int, into which C
    # promotes it; int32 and int64 lanes of a vector wrap too
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, 64, endpoint=True, dtype=dtype)
    b = rng.integers(info.min, info.max, 64, endpoint=True, dtype=dtype)
    a[:3], b[:3] = [info.max, info.min, info.max], [info.max, info.max, info.min]
    A = te.placeholder((64,), dtype, name="A")
    B = te.placeholder((64,), dtype, name="B")
    C = te.compute((64,), lambda i: A[i] * B[i] + A[i] - B[i], name="C")
    func = te.create_prim_func([A, B, C])
    sch = sched.Schedule(func)
    if vectorized:
        sch.vectorize(sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 8])[1])
    with np.errstate(all="ignore"):
        expected = a * b + a - b
    kernel = sched.build(sch.func, target="c")
    if vectorized and dtype == "int32":     # (int64 products are not vectorized: scalar code)
        assert "(sched_u32x8)" in kernel.source      # the lanes computed unsigned
    runs = {"c": kernel, "interpret": lambda *args: sched.interpret(func, *args),
            "cuda-emu": sched.build(_on_threads(func, ["C"]), target="cuda-emu")}
    for name, run in runs.items():
        c = np.zeros(64, dtype)
        run(a, b, c)
        np.testing.assert_array_equal(c, expected, err_msg=name)


def test_index_arithmetic_stays_plain_and_data_arithmetic_is_unsigned():
    # the ranges of loop variables bound index arithmetic: C's operators, which gcc's
    # vectorizer reasons about; a value read from memory may be anything
    source = sched.build(_quotients, target="c").source
    assert "C[i] = (int32_t)((uint32_t)sched_floordiv_i32(A[i], 4) + (uint32_t)" in source
    A = te.placeholder((16, 16), "int32", name="A")
    B = te.compute((16, 16), lambda i, j: A[i, j] + 1, name="B")
    source = sched.build(te.create_prim_func([A, B]), target="c").source
    assert "B[i * 16 + j] = (int32_t)((uint32_t)A[i * 16 + j] + (uint32_t)1);" in source


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("vectorized", [False, True])
def test_float_floor_division_and_modulo_as_numpy(dtype, vectorized, rng):
    n = 4096
    a = (rng.uniform(-1, 1, n) * 10.0 ** rng.integers(0, 8, n)).astype(dtype)
    b = (rng.uniform(0.1, 5, n) * rng.choice([-1, 1], n)).astype(dtype)
    a[:8] = [-5, 5, -5, 0, -0.0, 3, np.inf, np.nan]
    b[:8] = [np.inf, -np.inf, 0, -2, 2, 0, 2, 2]
    func = _division(dtype, n)
    sch = sched.Schedule(func)
    if vectorized:
        for name in ("Q", "R"):
            sch.vectorize(sch.split(sch.get_loops(sch.get_block(name))[0], [None, 8])[1])
    with np.errstate(all="ignore"):
        expected = (np.floor_divide(a, b), np.remainder(a, b))
    for name, run in (("c", sched.build(sch.func, target="c")),
                      ("interpret", lambda *args: sched.interpret(func, *args))):
        q, r = np.zeros(n, dtype), np.zeros(n, dtype)
        run(a, b, q, r)
        for got, want in zip((q, r), expected):
            np.testing.assert_array_equal(got, want, err_msg=name)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=name)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_abs_of_the_minimum_is_the_minimum_as_numpy(dtype):
    info = np.iinfo(dtype)
    a = np.array([info.min, info.min + 1, -1, 0, 1, info.max, -7, 7], dtype)
    A = te.placeholder((8,), dtype, name="A")
    func = te.create_prim_func([A, te.compute((8,), lambda i: te.abs(A[i]), name="B")])
    for name, run in (("c", sched.build(func, target="c")),
                      ("interpret", lambda *args: sched.interpret(func, *args))):
        b = np.zeros(8, dtype)
        run(a, b)
        np.testing.assert_array_equal(b, np.abs(a), err_msg=name)


@pytest.mark.parametrize("source", ["float32", "float64"])
@pytest.mark.parametrize("target", ["int8", "uint16", "int32", "uint32", "int64", "uint64"])
@pytest.mark.parametrize("vectorized", [False, True])
def test_float_to_int_casts_saturate_on_every_target(source, target, vectorized, rng):
    # C leaves a conversion beyond the type's range (or of NaN) undefined: sched gives what
    # CUDA's cvt gives (NaN 0, beyond the range its nearest end), truncating inside it
    info = np.iinfo(target)
    edges = [np.nan, np.inf, -np.inf, 0.5, -0.5, -0.99, 1.99, -1.0, float(info.max),
             float(info.min), float(info.max) * 2 + 5, float(info.min) * 2 - 5,
             float(info.max) + 1, float(info.min) - 1]
    a = np.concatenate([np.array(edges), rng.normal(0, 1, 64 - len(edges)) *
                        10.0 ** rng.integers(0, 20, 64 - len(edges))]).astype(source)
    truncated = np.trunc(a.astype(np.float64)).tolist()
    expected = np.array([0 if np.isnan(x) else int(info.max) if x > info.max else
                         int(info.min) if x < info.min else int(x) for x in truncated],
                        dtype=object).astype(target)
    A = te.placeholder((64,), source, name="A")
    func = te.create_prim_func([A, te.compute((64,), lambda i: te.cast(A[i], target),
                                              name="B")])
    sch = sched.Schedule(func)
    if vectorized:
        sch.vectorize(sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 8])[1])
    runs = {"c": sched.build(sch.func, target="c"),
            "interpret": lambda *args: sched.interpret(func, *args),
            "cuda-emu": sched.build(_on_threads(func, ["B"]), target="cuda-emu")}
    for name, run in runs.items():
        b = np.zeros(64, target)
        run(a, b)
        np.testing.assert_array_equal(b, expected, err_msg=name)


def _shifts(dtype: str, n: int = 32):
    A = te.placeholder((n,), dtype, name="A")
    S = te.placeholder((n,), dtype, name="S")
    left = te.compute((n,), lambda i: A[i] << S[i], name="L")
    right = te.compute((n,), lambda i: A[i] >> S[i], name="R")
    return te.create_prim_func([A, S, left, right])


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "uint32", "int64",
                                   "uint64"])
def test_shifts_by_any_count_as_numpy(dtype, rng):
    # C leaves a count outside [0, width) undefined (x86 took it modulo 32: 1 << 33 was 2);
    # numpy gives 0, or -1 for a right shift of a negative value
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, 32, endpoint=True, dtype=dtype)
    counts = [c for c in (0, 1, 7, 8, 9, 15, 16, 31, 32, 33, 63, 64, 65, 200) if c <= info.max]
    counts += [info.max] + ([-1, -32, info.min] if info.min else [])
    s = np.array(counts + list(rng.integers(0, 70, 32 - len(counts))), dtype)
    with np.errstate(all="ignore"):
        expected = np.left_shift(a, s), np.right_shift(a, s)
    func = _shifts(dtype)
    runs = {"interpret": lambda *args: sched.interpret(func, *args),
            "c": sched.build(func, target="c"),
            "cuda-emu": sched.build(_on_threads(func, ["L", "R"]), target="cuda-emu")}
    for name, run in runs.items():
        left, right = np.zeros(32, dtype), np.zeros(32, dtype)
        run(a, s, left, right)
        np.testing.assert_array_equal(left, expected[0], err_msg=name)
        np.testing.assert_array_equal(right, expected[1], err_msg=name)


def test_a_shift_by_a_count_in_range_is_c_operator():
    A = te.placeholder((16,), "int32", name="A")
    func = te.create_prim_func([A, te.compute((16,), lambda i: A[i] << i % 8,
                                              name="B")])
    source = sched.build(func, target="c").source
    assert "sched_shl" not in source and " << (i % 8)" in source


@pytest.mark.parametrize("dtype, constant", [("float32", 1e39), ("float32", -1e39),
                                             ("float16", 70000.0), ("bfloat16", 3.5e38)])
def test_a_constant_beyond_its_float_type_is_infinite_on_every_target(dtype, constant):
    # audit (helper-82): T.float32(1e39) and T.float16(70000.0) were written `inf.0f`, and
    # the C and the CUDA source did not compile
    inf = np.float32(np.inf if constant > 0 else -np.inf)
    A = te.placeholder((8,), "float32", name="A")
    func = te.create_prim_func([A, te.compute(
        (8,), lambda i: te.cast(te.const(constant, dtype), "float32") + A[i] * 0.0,
        name="B")])
    a = np.arange(8, dtype=np.float32)
    runs = {"c": sched.build(func, target="c"),
            "interpret": lambda *args: sched.interpret(func, *args),
            "cuda-emu": sched.build(_on_threads(func, ["B"]), target="cuda-emu")}
    for name, run in runs.items():
        b = np.zeros(8, np.float32)
        run(a, b)
        np.testing.assert_array_equal(b, np.full(8, inf), err_msg=name)


INT64_EXTREMES = """
@T.prim_func
def main(A: T.Buffer((8,), "int64"), B: T.Buffer((8,), "int64")):
    for i in range(8):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = T.if_then_else(T.Cast("int64", vi) > T.int64(-9223372036854775808)
                                   and T.Cast("int64", vi) * T.int64(4611686018427387904)
                                   < T.int64(9223372036854775807), A[vi], T.int64(-1))
"""


def test_int64_extremes_in_a_condition_are_read_by_the_analyses():
    # audit (helper-82): -2**63 is read as the negation of 2**63, which isl's int_from_si
    # (a C long) refused with a raw TypeError at Schedule(...) and at the build
    func = sched.parse(INT64_EXTREMES)
    sched.Schedule(func)
    a = np.arange(10, 18, dtype=np.int64)
    for run in (sched.build(func, target="c"), lambda *args: sched.interpret(func, *args)):
        b = np.zeros(8, np.int64)
        run(a, b)
        # int64 arithmetic wraps on every path: vi * 2**62 is -2**63 at vi = 2, -2**62 at 3,
        # ... and always below 2**63 - 1
        np.testing.assert_array_equal(b, a)


def test_max_and_min_of_signed_zeros_and_nans_agree_on_every_path():
    # audit (helper-82): the interpreter (numpy's maximum: `b` on ties) gave -0.0 for
    # max(0.0, -0.0) where the C, the vector C and the emulated CUDA give `a`, 0.0; the
    # interpreter is the fuzzers' oracle
    a = np.array([0.0, -0.0, 0.0, -0.0, np.nan, 1.0, np.nan, -2.0], np.float32)
    b = np.array([-0.0, 0.0, 0.0, -0.0, 1.0, np.nan, np.nan, -2.0], np.float32)
    A, B = (te.placeholder((8,), "float32", name=n) for n in "AB")
    func = te.create_prim_func([A, B, te.compute((8,), lambda i: te.max(A[i], B[i]), name="M"),
                                te.compute((8,), lambda i: te.min(A[i], B[i]), name="N")])
    vector = sched.Schedule(func)
    for name in "MN":
        vector.vectorize(vector.get_loops(vector.get_block(name))[0])
    runs = {"interpret": lambda *args: sched.interpret(func, *args),
            "c": sched.build(func, target="c"), "vector c": sched.build(vector, target="c"),
            "cuda-emu": sched.build(_on_threads(func, ["M", "N"]), target="cuda-emu")}
    expected = (a, a)                    # `a` on ties, NaN wherever one is NaN
    for name, run in runs.items():
        got = (np.ones(8, np.float32), np.ones(8, np.float32))
        run(a, b, *got)
        for value, want in zip(got, expected):
            assert np.isnan(value[4:7]).all(), (name, value)
            np.testing.assert_array_equal(np.signbit(value[:4]), np.signbit(want[:4]),
                                          err_msg=name)
            np.testing.assert_array_equal(value[7], -2.0)


@pytest.mark.parametrize("target, vectorized", [("c", False), ("c", True), ("cuda-emu", False)])
def test_a_bool_array_reads_any_nonzero_byte_as_true(target, vectorized):
    # numpy and torch read a bool array's bytes as nonzero = True (a view of uint8 data holds
    # 2 or 255); a C bool holding 2 is undefined, and gcc read it as 2: a count of Trues
    # gave 258 (audit helper-125)
    import warnings

    A = te.placeholder((64,), "bool", name="A")
    C = te.compute((64,), lambda i: A[i].astype("int32") + te.if_then_else(A[i], 10, 0),
                   name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    (loop,) = sch.get_loops(sch.get_block("C"))
    if target == "cuda-emu":
        bx, tx = sch.split(loop, [None, 32])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    elif vectorized:
        sch.vectorize(sch.split(loop, [None, 16])[1])
    raw = np.array([0, 2, 255, 1] * 16, np.uint8)
    out = np.zeros(64, np.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sched.build(sch.func, target=target)(raw.view(bool), out)
    np.testing.assert_array_equal(out, (raw != 0) * 11)


@pytest.mark.parametrize("source", ["int8", "float16"])
def test_an_integer_cast_to_float16_overflows_to_infinity(source):
    # gcc 12 (-O2, AVX512-FP16 hosts) folded (float)(_Float16) of an integer whose bits fit
    # float16's mantissa: 127 * 1024 became 130048, not inf; -inf through int32 -2**31
    # (audit helper-167)
    A = te.placeholder((4,), source, name="A")
    B = te.compute((4,), lambda i: te.cast(te.cast(te.cast(A[i], "int32") * 1024, "float16"),
                                           "float32"), name="B")
    a = np.array([127, -128, 64, 1], dtype=source)
    if source == "float16":
        a = np.array([np.inf, -np.inf, 64, 1], np.float16)
    b = np.zeros(4, np.float32)
    sched.build(te.create_prim_func([A, B]), target="c")(a, b)
    with np.errstate(invalid="ignore", over="ignore"):
        wide = np.where(np.isfinite(a), a, np.where(a > 0, 2**31 - 1, -2**31)).astype(np.int64)
        expected = (wide.astype(np.int32) * 1024).astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(b, expected)

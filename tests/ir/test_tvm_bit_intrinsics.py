"""TVM's bit intrinsics (sched/ir/bit_intrinsics.py): `T.reinterpret`, `T.popcount`, `T.clz`,
`T.ldexp` and `T.q_multiply_shift` parse, print back, and compute on the interpreter, the C
target and the emulated CUDA what numpy (or exact integer arithmetic) computes, edge values
included; the CUDA source compiles with NVRTC. Before, a TVM script using them failed with
"unknown construct 'T.popcount'"."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.cuda.compile import compile_cuda
from sched.errors import ConservativeAnalysisWarning, DSLError, ScriptError
from sched.ir.functor import IRMutator, collect
from sched.ir.nodes import Call, FloatImm, IntImm, Var
from sched.ir.simplify import simplify
from sched.ir.verify import VerifyError, verify
from sched.polyhedral.isl_expr import to_isl

N = 64


def script(inputs: dict[str, str], outputs: dict[str, tuple[str, str]]) -> str:
    """A TVM script with one block over N elements: `name = value` for each output."""
    params = [f'{name}: T.Buffer(({N},), "{dtype}")' for name, dtype in inputs.items()]
    params += [f'{name}: T.Buffer(({N},), "{dtype}")' for name, (dtype, _) in outputs.items()]
    stores = "\n".join(f"            {name}[vi] = {value}" for name, (_, value) in
                       outputs.items())
    return f'''
@T.prim_func
def f({", ".join(params)}):
    for i in range({N}):
        with T.block("B"):
            vi = T.axis.spatial({N}, i)
{stores}
'''


def parsed(inputs: dict[str, str], outputs: dict[str, tuple[str, str]]):
    """The function of `script`, checked to print back to itself."""
    func = sched.parse(script(inputs, outputs))
    assert sched.parse(func.script()) == func
    return func


def on_threads(func):
    """`func` with its loop over blocks of 32 threads (for the CUDA targets)."""
    sch = sched.Schedule(func)
    bx, tx = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 32])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch.func


def runs(func) -> dict:
    """The interpreter, the C target and the emulated CUDA target, each a function of the
    arrays."""
    return {"interpret": lambda *arrays: sched.interpret(func, *arrays),
            "c": sched.build(func, target="c"),
            "cuda-emu": sched.build(on_threads(func), target="cuda-emu")}


def outputs_of(func, inputs, out_dtypes) -> dict[str, list[np.ndarray]]:
    """Each target's output arrays (zeros of `out_dtypes` before the call)."""
    results = {}
    for name, run in runs(func).items():
        outs = [np.zeros(N, dtype) for dtype in out_dtypes]
        with np.errstate(all="ignore"):
            run(*inputs, *outs)
        results[name] = outs
    return results


def padded(values, dtype, rng) -> np.ndarray:
    """`values` (edge cases) followed by random values of `dtype` up to N."""
    values = np.array(values, dtype=dtype)
    info = np.iinfo(dtype)
    fill = rng.integers(info.min, info.max, N - len(values), endpoint=True, dtype=dtype)
    return np.concatenate([values, fill])


def bits_of(array: np.ndarray) -> np.ndarray:
    """The unsigned bit patterns of `array`."""
    return array.view(f"uint{array.dtype.itemsize * 8}")


# -- reinterpret -------------------------------------------------------------------------------

FLOAT_EDGES = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e-45, 3.4e38, -1.17549435e-38]
# numpy has no bfloat16: a bfloat16 buffer holds its uint16 bits
NUMPY_STORAGE = {"bfloat16": "uint16"}


def float_inputs(dtype: str, rng) -> np.ndarray:
    """Edge values (0, -0, inf, NaN, subnormals, the largest) and random ones of float
    `dtype`, as the buffer's numpy array."""
    if dtype == "bfloat16":                   # bits: 0, -0, 1, inf, -inf, NaN, subnormal, max
        return quiet_nans(padded([0, 0x8000, 0x3F80, 0x7F80, 0xFF80, 0x7FC0, 0x0001, 0x7F7F],
                                 "uint16", rng), dtype)
    with np.errstate(all="ignore"):
        edges = np.array(FLOAT_EDGES, dtype=dtype)
    if dtype == "float32":
        edges = np.append(edges, np.array([0x7FC00001, 0x7F800001], np.uint32).view(dtype))
    if dtype == "float16":
        edges = np.append(edges, np.array([0x0001, 0x7BFF], np.uint16).view(dtype))
    return np.concatenate([edges, rng.standard_normal(N - len(edges)).astype(dtype) * 1e3])


def int_inputs(dtype: str, target: str, rng) -> np.ndarray:
    """Edge patterns and random ones of integer `dtype` (read as a 16-bit float, NaNs quiet:
    `quiet_nans`)."""
    info = np.iinfo(dtype)
    values = padded([0, 1, -1 if info.min else info.max, info.min, info.max], dtype, rng)
    if target == "float32":
        values[5:9] = np.array([0x7F800000, 0x7FC00001, 0x7F800001, 0x00000001],
                               np.uint32).view(dtype)
    if target in ("float16", "bfloat16"):
        values = quiet_nans(bits_of(values), target).view(dtype)
    return values


def quiet_nans(pattern: np.ndarray, dtype: str) -> np.ndarray:
    """16-bit patterns with each NaN of 16-bit float `dtype` made its quiet NaN: the targets
    compute 16-bit floats in float32, and the conversion back may quiet a NaN or drop its
    payload (bit_intrinsics.py says so)."""
    exponent, quiet = (0x7C00, 0x7E00) if dtype == "float16" else (0x7F80, 0x7FC0)
    mantissa = 0x7FFF & ~exponent
    pattern = pattern.copy()
    pattern[(pattern & exponent == exponent) & (pattern & mantissa != 0)] = quiet
    return pattern


REINTERPRET_PAIRS = [
    ("float32", "int32"), ("float32", "uint32"), ("int32", "float32"), ("uint32", "float32"),
    ("float64", "int64"), ("float64", "uint64"), ("int64", "float64"), ("uint64", "float64"),
    ("float16", "int16"), ("int16", "float16"), ("bfloat16", "uint16"), ("int16", "bfloat16"),
    ("int8", "uint8"), ("uint32", "int32"),
]


@pytest.mark.parametrize(("source", "target"), REINTERPRET_PAIRS)
def test_reinterpret_keeps_every_bit_as_numpy_view(source, target, rng):
    func = parsed({"A": source}, {"B": (target, f'T.reinterpret("{target}", A[vi])')})
    a = (float_inputs(source, rng) if source.startswith(("float", "bfloat"))
         else int_inputs(source, target, rng))
    stored = NUMPY_STORAGE.get(target, target)
    expected = bits_of(a)       # numpy's view: the same bits, read as the target
    for name, (b,) in outputs_of(func, [a], [stored]).items():
        np.testing.assert_array_equal(bits_of(b), expected, err_msg=name)


def test_reinterpret_of_a_value_s_own_dtype_is_the_value():
    value = sched.parse(script({"A": "float32"}, {"B": ("float32", 'T.reinterpret("float32", '
                                                                  'A[vi])')}))
    assert "reinterpret" not in value.script()        # as TVM's: no call


def test_reinterpret_of_a_computed_float16_rounds_it_first(rng):
    # a float16 expression is computed in float32: its bits are those of the value rounded to
    # float16, as a store would round it
    func = parsed({"A": "float32"},
                  {"B": ("int16", 'T.reinterpret("int16", T.Cast("float16", A[vi]) * '
                                  'T.float16(3))')})
    a = rng.standard_normal(N).astype(np.float32)
    expected = (a.astype(np.float16).astype(np.float32) * np.float32(3)).astype(
        np.float16).view(np.int16)
    for name, (b,) in outputs_of(func, [a], ["int16"]).items():
        np.testing.assert_array_equal(b, expected, err_msg=name)


def test_reinterpret_of_differing_widths_is_refused_naming_both():
    # a bit cast keeps every bit: a 32-bit float has no 16-bit pattern
    with pytest.raises(ScriptError, match=r"T.reinterpret: float32 \(32 bits\) cannot be "
                                          r"reinterpreted as int16 \(16 bits\).*int32, "
                                          r"uint32.*T.Cast\(\"int16\", x\)"):
        sched.parse(script({"A": "float32"}, {"B": ("int16", 'T.reinterpret("int16", A[vi])')}))
    with pytest.raises(ScriptError, match=r"int64 \(64 bits\) cannot be reinterpreted as "
                                          r"float32 \(32 bits\)"):
        sched.parse(script({"A": "int64"},
                           {"B": ("float32", 'T.reinterpret("float32", A[vi])')}))
    with pytest.raises(ScriptError, match="a bool has no bit pattern"):
        sched.parse(script({"A": "int8"}, {"B": ("bool", 'T.reinterpret("bool", A[vi])')}))


# -- popcount and clz --------------------------------------------------------------------------

BIT_COUNT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def leading_zeros(a: np.ndarray) -> np.ndarray:
    """The leading 0 bits of each element's pattern, by Python's int (the width for 0)."""
    width = a.dtype.itemsize * 8
    return np.array([width - int(v).bit_length() for v in bits_of(a)], np.int32)


@pytest.mark.parametrize("dtype", BIT_COUNT_DTYPES)
def test_popcount_and_clz_count_the_two_s_complement_pattern(dtype, rng):
    func = parsed({"A": dtype}, {"P": (dtype, "T.popcount(A[vi])"),
                                 "Z": ("int32", "T.clz(A[vi])")})
    info = np.iinfo(dtype)
    # 0 (clz: the width, where __builtin_clz is undefined), -1, the minimum, powers of 2
    a = padded([0, -1 if info.min else info.max, info.min, info.max, 1, 2, 3, 1 << 6], dtype,
               rng)
    popcount = np.bitwise_count(bits_of(a)).astype(dtype)   # of the pattern, not of |a|
    assert popcount[1] == info.bits and leading_zeros(a)[0] == info.bits
    for name, (p, z) in outputs_of(func, [a], [dtype, "int32"]).items():
        np.testing.assert_array_equal(p, popcount, err_msg=name)
        np.testing.assert_array_equal(z, leading_zeros(a), err_msg=name)


def test_popcount_has_its_operand_s_dtype_and_clz_int32_as_tvm_s():
    func = sched.parse(script({"A": "int8"}, {"P": ("int8", "T.popcount(A[vi])"),
                                              "Z": ("int32", "T.clz(A[vi])")}))
    assert {(c.op, c.dtype) for c in collect(func.body, Call)} == {("popcount", "int8"),
                                                                   ("clz", "int32")}
    A = te.placeholder((4,), "uint16", name="A")
    assert te.popcount(A[0]).dtype == "uint16" and te.clz(A[0]).dtype == "int32"


@pytest.mark.parametrize("name", ["popcount", "clz"])
def test_a_float_s_bit_count_is_refused_pointing_at_reinterpret(name):
    # the bits of a float are counted on its pattern, which T.reinterpret gives
    with pytest.raises(ScriptError, match=rf"T.{name} counts the bits of an integer, got "
                                          rf"float32: T.{name}\(T.reinterpret\(\"int32\", "
                                          rf"x\)\)"):
        sched.parse(script({"A": "float32"}, {"B": ("int32", f"T.{name}(A[vi])")}))
    with pytest.raises(DSLError, match=f"T.{name} counts the bits of an integer"):
        getattr(te, name)(te.placeholder((4,), "float64", name="A")[0])


# -- ldexp -------------------------------------------------------------------------------------

def ldexp_inputs(dtype: str, rng) -> tuple[np.ndarray, np.ndarray]:
    """(x, e): 0, -0, inf, NaN, subnormals, the largest, with exponents that overflow to
    inf, underflow to a subnormal (rounded) or to 0, and the int32 extremes."""
    with np.errstate(all="ignore"):
        x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, 1.5, -1.0, 1.0, 1.0, 3.0,
                      1.0, -1.0, 1e-40, 0.75, 2.0, 65504.0], dtype)
    e = np.array([5, -5, -3, 3, 7, 200, -200, 2 ** 31 - 1, -2 ** 31, -149, -150, 127, 128,
                  100, -1074, 1023, -25], np.int32)
    rest = N - len(x)
    x = np.concatenate([x, (rng.standard_normal(rest) * 100).astype(dtype)])
    e = np.concatenate([e, rng.integers(-40, 40, rest, dtype=np.int32)])
    return x, e


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_ldexp_is_numpy_s_overflow_underflow_and_nan_included(dtype, rng):
    func = parsed({"X": dtype, "E": "int32"}, {"Y": (dtype, "T.ldexp(X[vi], E[vi])")})
    x, e = ldexp_inputs(dtype, rng)
    with np.errstate(all="ignore"):
        expected = np.ldexp(x, e)
    assert expected.dtype == np.dtype(dtype)
    assert np.isinf(expected[7]) and expected[8] == 0    # overflow, underflow to 0
    for name, (y,) in outputs_of(func, [x, e], [dtype]).items():
        np.testing.assert_array_equal(np.isnan(y), np.isnan(expected), err_msg=name)
        finite = ~np.isnan(expected)       # -0.0 and 0.0 differ in their bits
        np.testing.assert_array_equal(bits_of(y)[finite], bits_of(expected)[finite],
                                      err_msg=name)


def test_ldexp_takes_a_literal_exponent_and_refuses_other_dtypes():
    func = sched.parse(script({"X": "float32"}, {"Y": ("float32", "T.ldexp(X[vi], 3)")}))
    assert sched.parse(func.script()) == func
    # an int x: ldexp scales a float
    with pytest.raises(ScriptError, match=r"T.ldexp scales a float by a power of 2, got int32"):
        sched.parse(script({"X": "int32"}, {"Y": ("int32", "T.ldexp(X[vi], 3)")}))
    # C's ldexp takes an int: a float or int64 exponent is cast by the user
    with pytest.raises(ScriptError, match=r"T.ldexp takes an int32 exponent, got float32"):
        sched.parse(script({"X": "float32"}, {"Y": ("float32", "T.ldexp(X[vi], X[vi])")}))
    with pytest.raises(ScriptError, match=r"T.ldexp takes an int32 exponent, got int64"):
        sched.parse(script({"X": "float32", "E": "int64"},
                           {"Y": ("float32", "T.ldexp(X[vi], E[vi])")}))


# -- q_multiply_shift --------------------------------------------------------------------------

def rounded_product(x: np.ndarray, y, q, s) -> np.ndarray:
    """round(x * y * 2**(s - q)), halves rounded up, wrapped to int32: exact, in Python's
    integers."""
    out = []
    for xi, yi, qi, si in np.broadcast(x, y, q, s):
        product, k = int(xi) * int(yi), int(qi) - int(si)
        value = (product + (1 << (k - 1))) >> k if k > 0 else product << -k
        out.append((value + 2 ** 31) % 2 ** 32 - 2 ** 31)
    return np.array(out, np.int32)


def tvm_lowering_in_numpy(x, y, q, s) -> np.ndarray:
    """TVM's default lowering of q_multiply_shift, step by step in numpy's int64 (which wraps,
    and shifts by 64 or more to 0, or -1 for a negative value)."""
    x, y, q, s = (np.asarray(v, np.int64) for v in (x, y, q, s))
    left, right = np.maximum(s, 0), np.maximum(-s, 0) + q
    with np.errstate(all="ignore"):
        product = np.left_shift(x, left) * y
        rounded = product + np.left_shift(np.int64(1), right - 1)
        return np.right_shift(rounded, right).astype(np.int32)


def test_q_multiply_shift_rounds_halves_up_as_tvm_s_lowering(rng):
    func = parsed({"X": "int32", "Y": "int32", "Q": "int32", "S": "int32"},
                  {"D": ("int32", "T.q_multiply_shift(X[vi], Y[vi], Q[vi], S[vi])")})
    x = padded([-2 ** 31, -2 ** 31, 2 ** 31 - 1, -5, 5, -3, 3, 7, 0, -1, 2 ** 30], "int32", rng)
    y = padded([-2 ** 31, 2 ** 31 - 1, 2 ** 31 - 1, 1, 1, 1, 1, 3, 9, -1, 2 ** 30], "int32", rng)
    q = np.concatenate([[31, 31, 31, 1, 1, 1, 1, 2, 31, 1, 31],
                        rng.integers(1, 33, N - 11)]).astype(np.int32)
    # -5 * 2**-1 = -2.5 -> -2 and 5 / 2 -> 3 (halves up); then shifts left, and q - s <= 62
    s = np.concatenate([[-31, 0, 31, 0, 0, 0, 0, 0, 40, 0, 1],
                        rng.integers(-62, 40, N - 11)]).astype(np.int32)
    s = np.maximum(s, q - 62)
    expected = rounded_product(x, y, q, s)
    assert list(expected[3:7]) == [-2, 3, -1, 2]
    np.testing.assert_array_equal(tvm_lowering_in_numpy(x, y, q, s), expected)
    for name, (d,) in outputs_of(func, [x, y, q, s], ["int32"]).items():
        np.testing.assert_array_equal(d, expected, err_msg=name)


def test_q_multiply_shift_by_constants_folds_the_shifts_and_matches_tvm_s_shortcut(rng):
    # TVM lowers y = 1 << 30 (with q = 31) as x << (s - 1), or (x + (1 << -s)) >> (1 - s):
    # the general formula sched writes gives the same numbers
    func = parsed({"X": "int32", "Y": "int32"}, {
        "D0": ("int32", "T.q_multiply_shift(X[vi], Y[vi], 31, -3)"),
        "D1": ("int32", "T.q_multiply_shift(X[vi], Y[vi], 15, 2)"),
        "D2": ("int32", "T.q_multiply_shift(X[vi], 1073741824, 31, 4)"),
        "D3": ("int32", "T.q_multiply_shift(X[vi], 1 << 30, 31, -2)"),
    })
    text = func.script()
    assert "T.shift_right(T.Cast(\"int64\", X[vi]) * T.Cast(\"int64\", Y[vi]) + " \
           "T.int64(8589934592), T.int64(34))" in text       # rounding 2**33, shift 34
    x = padded([-2 ** 31, 2 ** 31 - 1, -5, 5, 0, -1, 12, -12], "int32", rng)
    y = padded([-2 ** 31, 2 ** 31 - 1, 3, 3, 1, 1, 1, 1], "int32", rng)
    expected = [rounded_product(x, y, 31, -3), rounded_product(x, y, 15, 2),
                np.left_shift(x, 3), (x.astype(np.int64) + 4 >> 3).astype(np.int32)]
    np.testing.assert_array_equal(expected[2], rounded_product(x, 2 ** 30, 31, 4))
    np.testing.assert_array_equal(expected[3], rounded_product(x, 2 ** 30, 31, -2))
    for name, outs in outputs_of(func, [x, y], ["int32"] * 4).items():
        for got, want in zip(outs, expected):
            np.testing.assert_array_equal(got, want, err_msg=name)


def test_q_multiply_shift_beyond_a_62_bit_shift_follows_sched_s_shift_rule(rng):
    # q - s > 62: TVM's lowering shifts by 63 or more (undefined in LLVM); sched's int64
    # arithmetic defines it (numpy's shifts): 0, or -1 for a negative product
    func = parsed({"X": "int32", "Y": "int32", "S": "int32"},
                  {"D": ("int32", "T.q_multiply_shift(X[vi], Y[vi], 31, S[vi])")})
    x, y = padded([3, -3, -2 ** 31], "int32", rng), padded([5, 5, -2 ** 31], "int32", rng)
    s = rng.integers(-60, -32, N, dtype=np.int32)
    expected = tvm_lowering_in_numpy(x, y, 31, s)
    for name, (d,) in outputs_of(func, [x, y, s], ["int32"]).items():
        np.testing.assert_array_equal(d, expected, err_msg=name)


def test_q_multiply_shift_refuses_other_dtypes_and_a_q_that_is_not_positive():
    with pytest.raises(ScriptError, match=r"T.q_multiply_shift takes int32 operands \(x, y, q, "
                                          r"s\), but x is int64: cast them first"):
        sched.parse(script({"X": "int64"},
                           {"D": ("int32", "T.q_multiply_shift(X[vi], 3, 31, 0)")}))
    with pytest.raises(ScriptError, match="q, the number of fractional bits, must be positive, "
                                          "got 0"):
        sched.parse(script({"X": "int32"},
                           {"D": ("int32", "T.q_multiply_shift(X[vi], 3, 0, 0)")}))


# -- vectorized loops, the printer, the simplifier, the polyhedral model, NVRTC ---------------

def test_vectorized_loops_fall_back_to_scalar_code_or_broadcast_an_invariant_call(rng):
    # no vector version of these calls: a loop computing them per lane stays scalar
    # (#pragma omp simd); one computing them once (an invariant operand) is vector code
    per_lane = parsed({"A": "float32", "N": "int32"}, {
        "B": ("int32", 'T.popcount(N[vi]) + T.clz(N[vi]) + T.reinterpret("int32", A[vi]) + '
                       "T.q_multiply_shift(N[vi], N[vi], 31, -1)"),
        "C": ("float32", "T.ldexp(A[vi], N[vi] % 300 - 150)")})
    invariant = parsed({"A": "float32", "N": "int32"}, {
        "C": ("float32", 'A[vi] * T.reinterpret("float32", T.popcount(N[0]) + 1065353216)')})
    a = rng.standard_normal(N).astype(np.float32)
    n = padded([0, -1, -2 ** 31, 2 ** 31 - 1], "int32", rng)
    with np.errstate(all="ignore"):
        expected_b = (np.bitwise_count(bits_of(n)).astype(np.int32) + leading_zeros(n)
                      + a.view(np.int32) + rounded_product(n, n, 31, -1))
        expected_c = np.ldexp(a, n % 300 - 150)
    for func, outs, expected in ((per_lane, ["int32", "float32"], [expected_b, expected_c]),
                                 (invariant, ["float32"], [a * np.float32(1.0)])):
        sch = sched.Schedule(func)
        sch.vectorize(sch.get_loops(sch.get_block("B"))[0])
        kernel = sched.build(sch.func, target="c")
        vector = "sched_f32x" in kernel.source
        assert vector == (func is invariant), kernel.source
        arrays = [np.zeros(N, dtype) for dtype in outs]
        kernel(a, n, *arrays)
        for got, want in zip(arrays, expected):
            np.testing.assert_array_equal(got, want)


def test_tvm_script_round_trips_through_the_printer_and_tvm_s_call_intrin():
    text = script({"A": "float32", "N": "int64"}, {
        "B": ("int32", 'T.reinterpret("int32", A[vi]) + T.clz(N[vi])'),
        "C": ("int64", "T.popcount(N[vi])"),
        "D": ("float32", "T.ldexp(A[vi], 2) + T.reinterpret(\"float32\", 1065353216)"),
    })
    func = sched.parse(text)
    printed = func.script()
    for spelling in ('T.reinterpret("int32", A[vi])', "T.clz(N[vi])", "T.popcount(N[vi])",
                     "T.ldexp(A[vi], 2)", 'T.reinterpret("float32", 1065353216)'):
        assert spelling in printed
    assert sched.parse(printed) == func
    intrin = text.replace("T.popcount(N[vi])", 'T.call_intrin("int64", "tir.popcount", N[vi])') \
        .replace("T.clz(N[vi])", 'T.call_pure_intrin("int32", "tir.clz", N[vi])') \
        .replace("T.ldexp(A[vi], 2)", 'T.call_intrin("float32", "tir.ldexp", A[vi], 2)')
    assert sched.parse(intrin) == func


def test_the_simplifier_keeps_the_calls_and_verify_checks_their_dtypes():
    # no folding of a call on constants (folding would have to be exact on every target)
    for call in (Call("popcount", (IntImm(7),), "int32"), Call("clz", (IntImm(0),), "int32"),
                 Call("reinterpret", (IntImm(1065353216),), "float32"),
                 Call("ldexp", (FloatImm(1.5, "float32"), IntImm(3)), "float32")):
        assert simplify(call) == call
    func = sched.parse(script({"A": "int32"}, {"B": ("int32", "T.popcount(A[vi])")}))
    verify(func)

    class BadCalls(IRMutator):     # IR no script can write: a float popcount, a narrow cast
        def visit_Call(self, node):
            return Call("reinterpret", (Call("popcount", node.args, "float32"),), "int16")

    with pytest.raises(VerifyError) as refused:
        verify(BadCalls().visit(func))
    assert "T.popcount takes one integer and gives its dtype, got (int32) -> float32" in \
        str(refused.value)
    assert "float32 (32 bits) cannot be reinterpreted as int16" in str(refused.value)


def test_the_polyhedral_model_reads_the_calls_as_opaque(rng):
    # popcount(i) is not affine in i: isl gets no expression, the access is over-approximated
    assert to_isl(Call("popcount", (Var("i"),), "int32")) is None
    assert to_isl(Call("clz", (Var("i"),), "int32")) is None
    func = sched.parse('''
@T.prim_func
def f(A: T.Buffer((33,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.block("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = A[T.clz(vi)] + A[T.popcount(vi)]
''')
    sch = sched.Schedule(func)
    io, ii = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 8])
    with pytest.warns(ConservativeAnalysisWarning) as warned:
        sch.reorder(ii, io)
    assert {str(w.message).split("(")[1] for w in warned} == {
        "T.clz", "T.popcount"}, [str(w.message) for w in warned]
    a = rng.standard_normal(33).astype(np.float32)
    expected = np.array([a[32 - i.bit_length()] + a[bin(i).count("1")] for i in range(64)],
                        np.float32)
    for run in (sched.build(sch.func, target="c"), lambda *x: sched.interpret(func, *x)):
        b = np.zeros(64, np.float32)
        run(a, b)
        np.testing.assert_array_equal(b, expected)


def test_the_cuda_source_compiles_with_nvrtc(tmp_path):
    # CUDA's own intrinsics (__popc, __clzll, __float_as_uint, __ushort_as_half...) and
    # cuda_fp16.h / cuda_bf16.h for 16-bit bit casts with no 16-bit buffer
    func = parsed({"A": "float32", "H": "int16", "L": "int64", "N": "int32"}, {
        "B": ("int32", 'T.reinterpret("int32", A[vi]) + T.popcount(N[vi]) + T.clz(H[vi]) + '
                       "T.clz(L[vi]) + T.Cast(\"int32\", T.popcount(L[vi]) + T.popcount(L[vi]))"),
        "C": ("float32", 'T.ldexp(A[vi], N[vi]) + T.Cast("float32", T.reinterpret("float16", '
                         'H[vi])) + T.Cast("float32", T.reinterpret("bfloat16", H[vi])) + '
                         'T.Cast("float32", T.reinterpret("float64", L[vi]))'),
        "D": ("int32", "T.q_multiply_shift(N[vi], N[vi], 31, N[vi])"),
    })
    source = sched.build(on_threads(func), target="cuda-emu").source
    for intrinsic in ("__float_as_uint(", "__popc(", "__popcll(", "__clzll(", "__clz(",
                      "__ushort_as_half(", "__ushort_as_bfloat16(", "__longlong_as_double(",
                      "ldexpf(", "#include <cuda_fp16.h>", "#include <cuda_bf16.h>"):
        assert intrinsic in source
    assert compile_cuda(source, "sm_90", cache_dir=tmp_path).cubin.startswith(b"\x7fELF")


def test_pythons_bitwise_operators_on_expressions_are_the_scripts():
    # `i & 3` on an integer expression was the logical `and` (a TypeError: "'and' needs two
    # bool operands"), so an index map `lambda v: (v >> 2, v & 3)` failed (audit helper-110)
    i, j = Var("i"), Var("j")
    assert (i & 3).script() == "T.bitwise_and(i, 3)" and (3 & i).script() == "T.bitwise_and(3, i)"
    assert (i | j).script() == "T.bitwise_or(i, j)" and (i ^ 1).script() == "T.bitwise_xor(i, 1)"
    assert (~i).script() == "T.bitwise_not(i)" and (~(i < j)).script() == "not i < j"
    assert ((i < 3) & (j > 1)).script() == "i < 3 and j > 1"
    assert ((i < 3) | (j > 1)).script() == "i < 3 or j > 1"
    A = te.placeholder((N,), "int32", name="A")
    B = te.compute((N,), lambda v: (A[v] & 12) | (A[v] ^ v) >> 1, name="B")
    a, b = np.arange(N, dtype=np.int32) * 7 - 100, np.zeros(N, np.int32)
    sched.build(te.create_prim_func([A, B]), target="c")(a, b)
    np.testing.assert_array_equal(b, (a & 12) | (a ^ np.arange(N)) >> 1)

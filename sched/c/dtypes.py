"""What the IR's dtypes, constants and intrinsics are in C, and the helper functions C lacks.

float16 is stored as `_Float16` and bfloat16 as `uint16_t`; both are computed in `float`: a load
converts to float, a store converts back (bfloat16 rounding to nearest even, as torch does).
"""

from __future__ import annotations

import math

import numpy as np

from sched.ir.dtype import is_float

STORAGE_TYPES = {
    "float16": "_Float16", "bfloat16": "uint16_t", "float32": "float", "float64": "double",
    "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    "bool": "bool",
}

# short names used in helper function names: sched_floordiv_i32, sched_min_f32...
_SHORT = {"float": "f32", "double": "f64", "int8_t": "i8", "int16_t": "i16", "int32_t": "i32",
          "int64_t": "i64", "uint8_t": "u8", "uint16_t": "u16", "uint32_t": "u32",
          "uint64_t": "u64", "bool": "bool"}


def storage_type(dtype: str) -> str:
    """The C type of a buffer element or parameter of `dtype`."""
    return STORAGE_TYPES[dtype]


def compute_type(dtype: str) -> str:
    """The C type expressions of `dtype` are computed in (float for the 16-bit floats)."""
    return "float" if dtype in ("float16", "bfloat16") else STORAGE_TYPES[dtype]


def short_name(dtype: str) -> str:
    return _SHORT[compute_type(dtype)]


def is_narrow_int(dtype: str) -> bool:
    """An integer type C promotes to int in arithmetic (results are cast back)."""
    return dtype in ("int8", "int16", "uint8", "uint16")


def float_literal(value: float, dtype: str) -> str:
    """`value` as an exact C constant of `compute_type(dtype)`: the shortest decimal that reads
    back as the same float (`0.1f`, `1e-05f`, `2.5`), `INFINITY`, `NAN`."""
    if dtype != "float64" and math.isfinite(value):
        with np.errstate(over="ignore"):          # a constant beyond the type is infinite
            value = {"float16": np.float16, "bfloat16": _round_bfloat16}.get(
                dtype, np.float32)(value)
    if math.isnan(value):
        return "NAN" if dtype != "float64" else "(double)NAN"
    if math.isinf(value):
        text = "INFINITY" if dtype != "float64" else "(double)INFINITY"
        return text if value > 0 else f"-{text}"
    if dtype == "float64":
        return repr(float(value))
    text = str(np.float32(value))
    if "." not in text and "e" not in text:
        text += ".0"
    return text + "f"


def _round_bfloat16(value: float) -> np.float32:
    """`value` rounded to bfloat16 (nearest even), as a float32."""
    bits = int(np.array(value, dtype=np.float32).view(np.uint32))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return np.array(bits, dtype=np.uint32).view(np.float32)[()]


def int_literal(value: int, dtype: str) -> str:
    """`value` as a C constant of `dtype` (`5`, `INT64_C(5)`, `5u`, `true`)."""
    if dtype == "bool":
        return "true" if value else "false"
    if dtype == "int32" and value == -(2 ** 31):
        return "INT32_MIN"
    if dtype == "int64":
        return "INT64_MIN" if value == -(2 ** 63) else f"INT64_C({value})"
    if dtype.startswith("uint"):
        return f"UINT64_C({value})" if dtype == "uint64" else f"{value}u"
    return str(value)


# math intrinsics: (C name for double; the float one adds "f")
_MATH = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "erf": "erf",
         "abs": "fabs", "pow": "pow", "sin": "sin", "cos": "cos", "floor": "floor",
         "ceil": "ceil", "round": "nearbyint",  # round: half to even, like numpy and TVM
         **{name: name for name in ("exp2", "log2", "log10", "log1p", "tan", "asin", "acos",
                                    "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
                                    "atan2", "fmod", "hypot", "copysign", "nextafter",
                                    "ldexp")}}   # ldexp(x, e): an int e


def math_call(op: str, args: list[str], dtype: str) -> str:
    """A C call of intrinsic `op` on the already printed `args` of float `dtype`."""
    assert is_float(dtype), f"C codegen: intrinsic {op} on {dtype}"
    suffix = "" if compute_type(dtype) == "double" else "f"
    one = "1.0" + suffix
    if op == "rsqrt":
        return f"({one} / sqrt{suffix}({args[0]}))"
    return f"{_MATH[op]}{suffix}({', '.join(args)})"


def division_type(dtype: str) -> str:
    """The short name of the type an integer division of `dtype` is computed in (C promotes
    8- and 16-bit operands to int): its helper's suffix."""
    wide = "64" if dtype.endswith("64") else "32"
    return ("u" if dtype.startswith("uint") else "i") + wide


def _division_source(name: str, op: str, t: str, short: str) -> str:
    """An integer `/` (truncating), `//` or `%` (flooring) as numpy computes it: by 0 the
    result is 0, and INT_MIN // -1 wraps to INT_MIN (C's operators trap on both, killing
    the process). A constant divisor folds the tests away once inlined."""
    lines = [f"static inline {t} {name}({t} a, {t} b) {{", "    if (b == 0) return 0;"]
    if short.startswith("i"):
        unsigned = "uint64_t" if short == "i64" else "uint32_t"
        negated = "0" if op == "floormod" else f"({t})(({unsigned})0 - ({unsigned})a)"
        lines.append(f"    if (b == -1) return {negated};")
        if op == "div":
            lines.append("    return a / b;")
        else:
            result = "q - 1 : q" if op == "floordiv" else "r + b : r"
            lines += [f"    {t} q = a / b, r = a % b;",
                      f"    return (r != 0 && ((r < 0) != (b < 0))) ? {result};"]
    else:
        lines.append(f"    return a {'%' if op == 'floormod' else '/'} b;")
    return "\n".join(lines) + "\n}"


def _float_division_source(name: str, op: str, t: str, f: str) -> str:
    """A float `//` or `%` as numpy computes it (its npy_divmod): from fmod, exact, with the
    remainder moved to the divisor's sign. `a - floor(a / b) * b` rounded a / b first and
    put 83 of 4096 float32 remainders outside [0, b) (audit, helper-32)."""
    zero, one, half = (f"0.0{f}", f"1.0{f}", f"0.5{f}")
    lines = [f"static inline {t} {name}({t} a, {t} b) {{", f"    {t} mod = fmod{f}(a, b);"]
    if op == "floormod":
        lines += ["    if (b == 0) return mod;",
                  "    if (mod != 0) return ((b < 0) != (mod < 0)) ? mod + b : mod;",
                  f"    return copysign{f}({zero}, b);"]
    else:
        lines += ["    if (b == 0) return a / b;",
                  f"    {t} div = (a - mod) / b;",
                  f"    if (mod != 0 && ((b < 0) != (mod < 0))) div -= {one};",
                  f"    if (div == 0) return copysign{f}({zero}, a / b);",
                  f"    {t} whole = floor{f}(div);",
                  f"    return div - whole > {half} ? whole + {one} : whole;"]
    return "\n".join(lines) + "\n}"


_UNSIGNED = {"int32_t": "uint32_t", "int64_t": "uint64_t"}
_DTYPE_OF_SHORT = {short: dtype for dtype, short in (
    ("float32", "f32"), ("float64", "f64"), ("int8", "i8"), ("int16", "i16"), ("int32", "i32"),
    ("int64", "i64"), ("uint8", "u8"), ("uint16", "u16"), ("uint32", "u32"),
    ("uint64", "u64"))}


def shift_type(dtype: str) -> str:
    """The short name of the type a shift of a `dtype` value is computed in by its helper
    (the narrower types as C promotes them: int32, or uint32 for the unsigned ones)."""
    if dtype in ("int8", "int16"):
        return "i32"
    if dtype in ("uint8", "uint16"):
        return "u32"
    return short_name(dtype)


def shift_source(name: str, op: str, ctype: str) -> str:
    """The C definition of shift helper `name` ("shl" or "shr") on `ctype`, numpy's shift
    for every count: C leaves a count outside [0, width) undefined (x86 takes it modulo the
    width); numpy gives 0, or for a right shift of a negative value -1."""
    width = 64 if "64" in ctype else 32
    unsigned = ctype if ctype.startswith("u") else "u" + ctype
    if op == "shl":
        inside, outside = f"({ctype})(({unsigned})a << b)", "0"
    else:
        inside, outside = "a >> b", "0" if ctype.startswith("u") else "(a < 0 ? -1 : 0)"
    return (f"static inline {ctype} {name}({ctype} a, int64_t b) {{\n"
            f"    return (uint64_t)b < {width} ? {inside} : {outside};\n}}")


def saturation_bounds(source: str, target: str) -> tuple[float, float]:
    """(low, high): the values of float type `source` (as computed: float16 and bfloat16 in
    float) that convert to integer type `target` by truncation are those strictly between
    them. A value at or below `low` converts to the type's minimum, at or above `high` to
    its maximum, NaN to 0: CUDA's cvt does so in hardware, and C, which leaves the
    conversion undefined there, gets the same results from `saturating_cast_source`."""
    real = np.float64 if source == "float64" else np.float32
    smallest, largest = (int(v) for v in (np.iinfo(target).min, np.iinfo(target).max))
    below = real(smallest - 1)
    if int(below) != smallest - 1:       # not representable: no float between it and min
        below = np.nextafter(real(smallest), real(-np.inf))
    return float(below), float(real(largest + 1))


def saturating_cast_source(name: str, source: str, target: str) -> str:
    """The C definition of helper `name`, the conversion of a `source` float to integer
    type `target` of `saturation_bounds`."""
    low, high = saturation_bounds(source, target)
    ctype, real = STORAGE_TYPES[target], compute_type(source)
    info = np.iinfo(target)
    smallest, largest = int_literal(int(info.min), target), int_literal(int(info.max), target)
    return (f"static inline {ctype} {name}({real} a) {{  /* NaN -> 0, beyond -> nearest end */\n"
            f"    if (a > {float_literal(low, source)} && a < {float_literal(high, source)})"
            f" return ({ctype})a;\n"
            f"    return a > 0 ? {largest} : a < 0 ? {smallest} : 0;\n}}")


def _checked_malloc_source(name: str) -> str:
    """`malloc` of `count` elements that stops the process with a message where it fails (a
    buffer of symbolic size past the memory, or a size past size_t) instead of the kernel
    writing through NULL (audit helper-125: a segfault). The kernels return nothing, so
    there is no error to return from inside their loops."""
    return (f"#include <stdio.h>\n"
            f"static void* {name}(int64_t count, size_t size, const char* what) {{\n"
            f"    void* p = count > 0 && (uint64_t)count <= SIZE_MAX / size\n"
            f"        ? malloc((size_t)count * size) : NULL;\n"
            f"    if (p == NULL && count != 0) {{\n"
            f"        fprintf(stderr, \"sched: cannot allocate %lld elements of %zu bytes for "
            f"'%s' (out of memory, or past the address space): the process stops\\n\", "
            f"(long long)count, size, what);\n"
            f"        abort();\n    }}\n    return p;\n}}")


def _checked_count_source(name: str) -> str:
    """The product of two element counts, stopping the process with a message where it
    passes int64 (see codegen.checked_count)."""
    return (f"#include <stdio.h>\n"
            f"static int64_t {name}(int64_t a, int64_t b, const char* what) {{\n"
            f"    int64_t product;\n"
            f"    if (__builtin_mul_overflow(a, b, &product)) {{\n"
            f"        fprintf(stderr, \"sched: cannot allocate %lld * %lld elements for "
            f"'%s' (past int64): the process stops\\n\", (long long)a, (long long)b, what);\n"
            f"        abort();\n    }}\n    return product;\n}}")


def helper_source(name: str) -> str:
    """The C definition of helper `name`: `sched_<op>_<short type>`."""
    _, op, short = name.split("_", 2)
    from sched.c import bit_intrinsics  # (which builds on this module)

    if op in bit_intrinsics.HELPER_OPS:      # clz, tobits, frombits
        return bit_intrinsics.helper_source(op, short)
    if op == "malloc":                       # sched_malloc_checked
        return _checked_malloc_source(name)
    if op == "mulcount":                     # sched_mulcount_checked
        return _checked_count_source(name)
    if op == "sigmoid":
        # with e = exp(-|x|), as the vector code: 1 / (1 + exp(-x)) overflowed to 0 below
        # x = -88.7 in float32 where the result is a denormal (audit helper-54)
        real, f = ("double", "") if short == "f64" else ("float", "f")
        return (f"static inline {real} {name}({real} x) {{\n"
                f"    {real} e = exp{f}(-fabs{f}(x));\n"
                f"    return x >= 0 ? 1.0{f} / (1.0{f} + e) : e / (1.0{f} + e);\n}}")
    if op == "saturate":      # sched_saturate_<float short>_<int short>
        source, target = (_DTYPE_OF_SHORT[part] for part in short.split("_"))
        return saturating_cast_source(name, source, target)
    ctype = {v: k for k, v in _SHORT.items()}[short] if short in _SHORT.values() else None
    if op in ("shl", "shr"):
        return shift_source(name, op, ctype)
    if op in ("div", "floordiv", "floormod") and short in ("i32", "i64", "u32", "u64"):
        return _division_source(name, op, ctype, short)
    if op in ("floordiv", "floormod"):
        return _float_division_source(name, op, ctype, "" if short == "f64" else "f")
    if op in ("min", "max"):
        # NaN wins, as in numpy and torch: with `a > b ? a : b` a NaN was dropped or kept by
        # the order of the operands, so a reduction's schedule decided the result. b is
        # tested (a reduction's new value, `acc = max(acc, x)`): the vector code's NaN test
        # stays off the accumulator's chain (vector_math.py _MIN_MAX)
        # Written so that gcc makes the choice one maxss/minss and the NaN test a branch
        # that is never taken (as one condition it became a branch on the comparison, taken
        # at random: a row softmax's combine of 64 partials per row took 25% more time)
        compare = "<" if op == "min" else ">"
        nan = "b != b ? b : " if short.startswith("f") else ""
        return (f"static inline {ctype} {name}({ctype} a, {ctype} b) {{\n"
                f"    {ctype} chosen = b {compare} a ? b : a;\n"
                f"    return {nan}chosen;\n}}")
    if op == "abs":      # of the minimum it is the minimum, as numpy's (-a would overflow)
        negated = f"({ctype})(0 - ({_UNSIGNED[ctype]})a)" if ctype in _UNSIGNED else "-a"
        return f"static inline {ctype} {name}({ctype} a) {{\n    return a < 0 ? {negated} : a;\n}}"
    if name == "sched_tof16_f64":
        # a volatile double gcc cannot trace back to an integer (expr_codegen's Cast)
        return ("static inline float sched_tof16_f64(double x) {\n"
                "    volatile double value = x;\n"
                "    return (float)(_Float16)value;\n}")
    if name == "sched_bf16_to_f32":
        return ("static inline float sched_bf16_to_f32(uint16_t v) {\n"
                "    union { uint32_t u; float f; } x = { .u = (uint32_t)v << 16 };\n"
                "    return x.f;\n}")
    if name == "sched_f32_to_bf16":
        return ("static inline uint16_t sched_f32_to_bf16(float f) {  /* nearest even */\n"
                "    union { float f; uint32_t u; } x = { .f = f };\n"
                "    if ((x.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x.u >> 16) | 0x40);"
                "  /* NaN */\n"
                "    return (uint16_t)((x.u + 0x7fffu + ((x.u >> 16) & 1u)) >> 16);\n}")
    raise AssertionError(f"C codegen: no helper {name}")

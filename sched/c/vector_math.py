"""The C text of the vector functions a vectorized loop calls: math on GCC vector types.

A vectorized loop (vectorize.py) computes `exp`, `log`, `tanh`, `erf`, `sigmoid`, `sqrt`,
`rsqrt`, `abs` of float32 lanes with the functions below, written once for any lane count with
GCC vector extensions, so gcc emits SIMD instructions of the vector's width (ymm with 8 lanes,
zmm with 16 on AVX-512) and no libm call per element. float64 has `exp`, `log`, `sqrt`,
`rsqrt` and `abs` here (the same in exact and fast_math mode); its other math keeps the loop
scalar (libm). The functions:

- exp: x = n ln2 + r with n = round(x log2(e)) and ln2 in two parts (Cody-Waite), e^r by a
  degree-6 polynomial on [-ln2/2, ln2/2], then times 2^n in two steps (exact, so results in the
  denormal range round once). exp(x > 89) = inf, exp(x < -104) = 0, NaN stays NaN.
- log: x = 2^e m with m in [sqrt(1/2), sqrt(2)) (denormals scaled by 2^23 first),
  log(m) = f - f^2/2 + f^3 P(f), f = m - 1 (exact), P of degree 7; log(0) = -inf,
  log(x < 0) = NaN, log(inf) = inf.
- exp and log of float64: the same reductions, e^r by its Taylor polynomial of degree 13,
  log(1 + f) = f - (f^2/2 - s (f^2/2 + R)) with s = f / (2 + f) and R the atanh series of s
  to s^20; limits 710 / -746 for exp.
- tanh: |x| < 0.625: x + x^3 P(x^2), P of degree 4; else sign(x) (1 - 2 / (exp(2|x|) + 1)).
- erf: |x| < 0.9: x + x P(x^2), P of degree 5; |x| < 3.93: sign(x) (1 - exp(Q(|x|))) with Q of
  degree 9 fitted to log(erfc); else sign(x).
- sigmoid: with e = exp(-|x|): 1 / (1 + e) for x >= 0, e / (1 + e) below (one division, no
  overflow, denormal results where they belong).
- sqrt: the x86 builtin of the vector's width (one vsqrtps/vsqrtpd), elsewhere the lanes one
  by one, which gcc's loop vectorizer makes one instruction where it can (the C target
  compiles with -fno-math-errno, which removes the libm fallback that only sets errno);
  rsqrt = 1 / sqrt.
- abs: the sign bit cleared.

Polynomial coefficients are minimax fits (Lawson's iteratively reweighted least squares on
Chebyshev nodes, in float64, of the relative error; rounded to float32).

Measured error against the exact result (float64, erf from Python's math.erf), in float32
ulps, over 2^24 inputs (half random bit patterns: every magnitude and sign; half uniform in
[-10, 10] and [-100, 100]) plus the edge cases (0, -0, denormals, +-inf, NaN, FLT_MAX, the
overflow and underflow thresholds of exp), by `python -m tests.c.test_vector_math` on an AMD
EPYC (Zen 3, AVX2); max error, exact / `fast_math=True`:

    exp      1.00 / 2.27 (fast: results below 2^-126 flush to 0)
    log      0.83 / 0.83
    tanh     1.31 / 1.85
    erf      1.14 / 1.43
    sigmoid  2.36 / 3.52 (fast: 0 below x = -87.3, where the result is under 2^-126)
    sqrt     correctly rounded (vsqrtps)
    rsqrt    1.49 / 1.49 (fast: 0.99 from the hardware estimate, which differs between
             CPUs, measured on a Zen 5 at 4, 8 and 16 lanes; where the ISA has no estimate
             for the vector's width, ARM or 16 lanes on an AVX2 host, the exact 1 / sqrt:
             1.28 measured on an AVX2 Zen 3)
    abs      exact

and for float64 (against numpy's 80-bit long double, in float64 ulps, 2^24 inputs): exp 1.00,
log 0.80, sqrt 0.5 (correctly rounded), rsqrt 1.49.

(`MAX_ULPS` holds them, rounded up; the tests check them.) `fast_math=True` changes only these
functions, chosen per function in the source rather than with -ffast-math, which would let gcc
assume there is no NaN or inf anywhere in the kernel: fast exp has a degree-5 polynomial and
one scaling step; tanh, erf and sigmoid use it; rsqrt uses the hardware estimate (12 bits, 14
on AVX-512) refined to second order in its residual (one plain Newton step gave 3.0 ulp from
a Zen 5's 12-bit estimates; audit, helper-81), with 0, inf and denormals handled; and in a
vectorized loop, x / s with s the same on every lane (softmax's division by the row sum) is
x * (1 / s): one division per loop instead of one per vector, <= 1.5 ulp while 1 / s is a
normal number (float32: |s| <= 2^126); above, 1 / s is denormal and loses bits (4.1 ulp
measured at |s| = 3.3e38, the float32 maximum; audit, helper-32); inf where 1 / s overflows
(float32: |s| < 2^-128). NaN and inf behave as in exact mode otherwise.
"""

from __future__ import annotations

# max error in float64 ulps of the float64 functions (the same with fast_math), and in float32
# ulps of the float32 ones, (exact, fast_math): the measured figures above, rounded up
MAX_ULPS_F64 = {"exp": 1.0, "log": 0.8, "sqrt": 0.5, "rsqrt": 1.5, "abs": 0}
MAX_ULPS = {"exp": (1.1, 2.3), "log": (0.9, 0.9), "tanh": (1.4, 1.9), "erf": (1.2, 1.5),
            "sigmoid": (2.4, 3.6), "sqrt": (0.5, 0.5), "rsqrt": (1.5, 1.5), "abs": (0, 0)}

FLOAT32_FUNCTIONS = ("exp", "log", "tanh", "erf", "sigmoid", "sqrt", "rsqrt", "abs")
FLOAT64_FUNCTIONS = ("exp", "log", "sqrt", "rsqrt", "abs")

_EXP = """\
/* exp(x) = 2^n e^r, n = round(x log2 e), r = x - n ln2 (see sched/c/vector_math.py) */
static inline VF NAME(VF x) {
    VF c = VMAX(VMIN(x, ZERO + 89.0f), ZERO - 104.0f);   /* NaN -> 89, fixed below */
    VF n = (c * 1.44269504f + 12582912.0f) - 12582912.0f;   /* round to nearest */
    VF r = c - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    VF q = ZERO + 1.38146023e-3f;
    q = q * r + 8.36871564e-3f;
    q = q * r + 4.16683890e-2f;
    q = q * r + 1.66665211e-1f;
    q = q * r + 4.99999940e-1f;
    VF p = 1.0f + (r + r * r * q);
    VI k = __builtin_convertvector(n, VI);
    VI k1 = k >> 1;
    VF y = p * (VF)((k1 + 127) << 23) * (VF)((k - k1 + 127) << 23);
    return sched_vselect_SUF(x != x, x + x, y);
}
"""

_EXP_FAST = """\
/* exp(x) = 2^n e^r, relaxed (fast_math): degree-5 polynomial, results below 2^-126 are 0 */
static inline VF NAME(VF x) {
    VF c = VMAX(VMIN(x, ZERO + 88.7228317f), ZERO - 87.3365479f);   /* NaN too */
    VF n = (c * 1.44269504f + 12582912.0f) - 12582912.0f;   /* round to nearest */
    VF r = c - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    VF q = ZERO + 8.31252150e-3f;
    q = q * r + 4.18901481e-2f;
    q = q * r + 1.66671142e-1f;
    q = q * r + 4.99992311e-1f;
    VF p = 1.0f + (r + r * r * q);
    VF y = (VF)((VI)p + __builtin_convertvector(n, VI) * 8388608);   /* p 2^n */
    y = sched_vselect_SUF(x < -87.3365479f, ZERO, y);
    /* above the range inf, NaN stays NaN: one compare that is true for both (gcc emits one
       unordered compare) instead of two selects; 8% of a row softmax on Zen 5 */
    return sched_vselect_SUF(~(x <= 88.7228317f), x * (float)INFINITY, y);
}
"""

_LOG = """\
/* log(x) = e ln2 + log(m), m in [sqrt(1/2), sqrt(2)) (see sched/c/vector_math.py) */
static inline VF NAME(VF x) {
    VI tiny = x < 1.17549435e-38f;                   /* denormals (and <= 0, fixed below) */
    VF s = sched_vselect_SUF(tiny, x * 8388608.0f, x);
    VI bits = (VI)s;
    VI e = ((bits >> 23) & 0xff) - 127 + (tiny & -23);
    VF m = (VF)((bits & 0x007fffff) | 0x3f800000);   /* [1, 2) */
    VI big = m > 1.41421356f;
    m = sched_vselect_SUF(big, m * 0.5f, m);
    e = e - big;                                      /* big is -1 where true */
    VF f = m - 1.0f;
    VF P = ZERO + -7.63449296e-2f;
    P = P * f + 1.27615750e-1f;
    P = P * f - 1.31601825e-1f;
    P = P * f + 1.42017588e-1f;
    P = P * f - 1.66233569e-1f;
    P = P * f + 2.00012267e-1f;
    P = P * f - 2.50008196e-1f;
    P = P * f + 3.33333313e-1f;
    VF ef = __builtin_convertvector(e, VF);
    VF f2 = f * f;
    VF y = f2 * f * P + ef * -2.12194440e-4f;
    y = y - 0.5f * f2;
    y = (f + y) + ef * 0.693359375f;
    y = sched_vselect_SUF(x == (float)INFINITY, x, y);
    y = sched_vselect_SUF(x == 0.0f, ZERO - (float)INFINITY, y);
    return sched_vselect_SUF((x < 0.0f) | (x != x), ZERO + (float)NAN, y);
}
"""

_EXP_F64 = """\
/* exp(x) = 2^n e^r in double: r as for float, e^r by its Taylor polynomial of degree 13 */
static inline VF NAME(VF x) {
    VF c = VMAX(VMIN(x, ZERO + 710.0), ZERO - 746.0);      /* NaN -> 710, fixed below */
    VF t = c * 1.4426950408889634 + 6755399441055744.0;        /* 1.5 2^52: n in low bits */
    VF n = t - 6755399441055744.0;
    VF r = c - n * 0.6931471803691238;
    r = r - n * 1.9082149292705877e-10;
    VF q = ZERO + 1.6059043836821613e-10;
    q = q * r + 2.08767569878681e-09;
    q = q * r + 2.505210838544172e-08;
    q = q * r + 2.755731922398589e-07;
    q = q * r + 2.7557319223985893e-06;
    q = q * r + 2.48015873015873e-05;
    q = q * r + 1.984126984126984e-04;
    q = q * r + 1.388888888888889e-03;
    q = q * r + 8.333333333333333e-03;
    q = q * r + 4.1666666666666664e-02;
    q = q * r + 1.6666666666666666e-01;
    q = q * r + 0.5;
    VF p = 1.0 + (r + r * r * q);
    VI k = (VI)t - (VI)(ZERO + 6755399441055744.0);
    VI k1 = k >> 1;
    VF y = p * (VF)((k1 + 1023) << 52) * (VF)((k - k1 + 1023) << 52);
    return sched_vselect_SUF(x != x, x + x, y);
}
"""

_LOG_F64 = """\
/* log(x) = e ln2 + log(1 + f) in double, log(1 + f) = f - (f^2/2 - s (f^2/2 + R(s^2))),
   s = f / (2 + f), R the atanh series to s^20 */
static inline VF NAME(VF x) {
    VI tiny = x < 2.2250738585072014e-308;            /* denormals (and <= 0, fixed below) */
    VF sx = sched_vselect_SUF(tiny, x * 4503599627370496.0, x);
    VI bits = (VI)sx;
    VI e = ((bits >> 52) & 0x7ff) - 1023 + (tiny & -52);
    VF m = (VF)((bits & INT64_C(0x000fffffffffffff)) | INT64_C(0x3ff0000000000000));
    VI big = m > 1.4142135623730951;
    m = sched_vselect_SUF(big, m * 0.5, m);
    e = e - big;
    VF f = m - 1.0;
    VF s = f / (2.0 + f);
    VF z = s * s;
    VF R = ZERO + 0.09523809523809523;
    R = R * z + 0.10526315789473684;
    R = R * z + 0.11764705882352941;
    R = R * z + 0.13333333333333333;
    R = R * z + 0.15384615384615385;
    R = R * z + 0.18181818181818182;
    R = R * z + 0.2222222222222222;
    R = R * z + 0.2857142857142857;
    R = R * z + 0.4;
    R = R * z + 0.6666666666666666;
    R = R * z;
    VF ef = __builtin_convertvector(e, VF);
    VF hfsq = 0.5 * f * f;
    VF y = ef * 0.6931471803691238 + (f - (hfsq - (s * (hfsq + R) + ef * 1.9082149292705877e-10)));
    y = sched_vselect_SUF(x == (double)INFINITY, x, y);
    y = sched_vselect_SUF(x == 0.0, ZERO - (double)INFINITY, y);
    return sched_vselect_SUF((x < 0.0) | (x != x), ZERO + (double)NAN, y);
}
"""

_TANH = """\
/* tanh: an odd polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above */
static inline VF NAME(VF x) {
    VF a = (VF)((VI)x & 0x7fffffff);
    VF x2 = x * x;
    VF P = ZERO + -5.70498733e-3f;
    P = P * x2 + 2.06390880e-2f;
    P = P * x2 - 5.37397154e-2f;
    P = P * x2 + 1.33314416e-1f;
    P = P * x2 - 3.33332807e-1f;
    VF small = x + x * x2 * P;
    small = (VF)(((VI)small & 0x7fffffff) | ((VI)x & (int32_t)0x80000000));  /* tanh(-0) = -0 */
    VF big = 1.0f - 2.0f / (EXP(a + a) + 1.0f);
    big = (VF)((VI)big | ((VI)x & (int32_t)0x80000000));   /* the sign of x */
    return sched_vselect_SUF(a < 0.625f, small, big);
}
"""

_ERF = """\
/* erf: x P(x^2) below 0.9, 1 - exp(Q(|x|)) with Q ~ log(erfc) below 3.93, then 1 */
static inline VF NAME(VF x) {
    VF a = (VF)((VI)x & 0x7fffffff);
    VF x2 = x * x;
    VF P = ZERO + -6.09039795e-4f;
    P = P * x2 + 5.01197157e-3f;
    P = P * x2 - 2.67789159e-2f;
    P = P * x2 + 1.12821408e-1f;
    P = P * x2 - 3.76125246e-1f;
    P = P * x2 + 1.28379167e-1f;                      /* 2/sqrt(pi) - 1 */
    VF small = x + x * P;
    VF t = sched_vselect_SUF(a > 3.93f, ZERO + 3.93f, a);
    VF Q = ZERO + 1.11078577e-6f;
    Q = Q * t - 1.78626633e-5f;
    Q = Q * t + 1.03408733e-4f;
    Q = Q * t - 5.95348683e-5f;
    Q = Q * t - 2.94059259e-3f;
    Q = Q * t + 2.31226254e-2f;
    Q = Q * t - 1.06167302e-1f;
    Q = Q * t - 6.34753585e-1f;
    Q = Q * t - 1.12897968f;
    Q = Q * t + 8.59406209e-5f;
    VF big = 1.0f - EXP(Q);
    big = sched_vselect_SUF(a >= 3.93f, ZERO + 1.0f, big);
    big = (VF)((VI)big | ((VI)x & (int32_t)0x80000000));   /* the sign of x */
    return sched_vselect_SUF((a < 0.9f) | (x != x), small, big);
}
"""

_SIGMOID = """\
/* sigmoid(x) = 1 / (1 + e) for x >= 0, e / (1 + e) below, e = exp(-|x|) */
static inline VF NAME(VF x) {
    VF e = EXP((VF)((VI)x | (int32_t)0x80000000));
    return sched_vselect_SUF(x < 0.0f, e, ZERO + 1.0f) / (1.0f + e);
}
"""

_SQRT = """\
static inline VF NAME(VF x) {   /* one vsqrtp*: the x86 builtin, else lanes gcc vectorizes */
#if defined(GUARD)
    return BUILTIN;
#else
    VF r;
    for (int l = 0; l < LANES; ++l) r[l] = SQRT(x[l]);
    return r;
#endif
}
"""

# the x86 square root of a vector of (short type, bytes) (correctly rounded): the lane loop
# needs gcc's SLP vectorizer for two or four lanes, which the C target turns off (build.py)
_SQRT_BUILTINS = {
    ("f32", 16): ("__SSE__", "__builtin_ia32_sqrtps(x)"),
    ("f64", 16): ("__SSE2__", "__builtin_ia32_sqrtpd(x)"),
    ("f32", 32): ("__AVX__", "__builtin_ia32_sqrtps256(x)"),
    ("f64", 32): ("__AVX__", "__builtin_ia32_sqrtpd256(x)"),
    ("f32", 64): ("__AVX512F__", "__builtin_ia32_sqrtps512_mask(x, x, (unsigned short)0xffff, 4)"),
    ("f64", 64): ("__AVX512F__", "__builtin_ia32_sqrtpd512_mask(x, x, (unsigned char)0xff, 4)"),
}

_RSQRT = """\
static inline VF NAME(VF x) {
    return ONE / SQRTV(x);
}
"""

# the hardware estimate for a vector of this many bytes: (guard, C expression, bits)
# the guard of a vector width with no x86 builtin (a float64 vector of 16 lanes, 128 bytes;
# a float32 vector of 2 lanes): a macro nothing defines, so the portable branch is compiled
# (`#if defined(0)` was a syntax error, and an accepted schedule did not build)
_NO_BUILTIN = "SCHED_NO_BUILTIN_FOR_THIS_WIDTH"

_RSQRT_ESTIMATES = {
    16: ("__SSE__", "__builtin_ia32_rsqrtps(x)"),
    32: ("__AVX__", "__builtin_ia32_rsqrtps256(x)"),
    64: ("__AVX512F__", "__builtin_ia32_rsqrt14ps512_mask(x, ZERO, (unsigned short)0xffff)"),
}

_RSQRT_FAST = """\
/* 1/sqrt(x), relaxed (fast_math): the hardware estimate and one Newton step */
static inline VF NAME(VF x) {
#if defined(GUARD)
    VI tiny = x < 1.17549435e-38f;                 /* the estimate takes denormals for 0 */
    x = sched_vselect_SUF(tiny, x * 16777216.0f, x);
    VF y = ESTIMATE;
    VF r = 1.0f - (x * y) * y;     /* x y^2 = 1 - r, exact (Sterbenz; an FMA where fused) */
    y = y + y * (r * (0.5f + 0.375f * r));     /* y (1 - r)^-1/2 to second order in r */
    y = sched_vselect_SUF(tiny, y * 4096.0f, y);
    VF inf = (VF)((VI)(ZERO + (float)INFINITY) | ((VI)x & (int32_t)0x80000000));
    y = sched_vselect_SUF(x == 0.0f, inf, y);        /* 1/sqrt(+-0) = +-inf */
    return sched_vselect_SUF(x == (float)INFINITY, ZERO, y);
#else
    return 1.0f / SQRTV(x);
#endif
}
"""

_ABS = """\
static inline VF NAME(VF x) {
    return (VF)((VI)x & MAGNITUDE);
}
"""

_SELECT = """\
static inline VF NAME(VI m, VF a, VF b) {   /* a where m is true (all ones), else b */
#if !defined(__x86_64__) || defined(GUARD)
    return (VF)(((VI)a & m) | ((VI)b & ~m));
#else
    VF chosen;                 /* wider than the ISA's registers: lane by lane (see below) */
    for (int lane = 0; lane < LANES; ++lane)
        chosen[lane] = m[lane] ? a[lane] : b[lane];
    return chosen;
#endif
}
"""
# the guard of a vector that fits the x86 ISA's registers: a select on one wider (64 bytes of
# float64 with AVX2, as SCHED_VECTOR_BYTES=64 gives on an AVX2 host) reinterpreted the lanes
# of `__builtin_convertvector` from float32, and gcc 12.2 died (internal compiler error in
# convert_mode_scalar, at -O1 too)
_REGISTER_GUARDS = {16: "__SSE2__", 32: "__AVX__", 64: "__AVX512F__"}
# min and max as the scalar code computes them ((b < a || b != b) ? b : a, (b > a || b != b) ?
# b : a: a NaN in either operand gives NaN, and a on a tie, -0.0 against 0.0 included), which
# x86's minps/maxps(b, a) do but for a NaN in b (they give a where either is a NaN): that one
# is put back, by a min/max masked to where b is ordered (AVX-512) or a blend (AVX, SSE4.1).
# The test of b stays off a reduction's chain (`acc = max(acc, x)`: b is x). gcc does not
# turn the generic blend into them (on AVX-512 it emits a compare, a masked xor and an xor: a
# row softmax took 2.5 ms with the blend and 1.5-2.0 ms with vmaxps, fast_math, 1 thread,
# Zen 4)
_MIN_MAX = """\
static inline VF NAME(VF a, VF b) {   /* (b COMPARE a || b != b) ? b : a */
#if defined(GUARD)
    return (VF)BUILTIN;
#else
    return sched_vselect_SUF((b COMPARE a) | (b != b), b, a);
#endif
}
"""
# (element, vector bytes) -> (macro, builtin with {op} for min or max) of x86's vector min/max
_X86_MIN_MAX = {
    ("f32", 16): ("__SSE4_1__", "__builtin_ia32_blendvps(__builtin_ia32_{op}ps(b, a), b, "
                                "__builtin_ia32_cmpunordps(b, b))"),
    ("f32", 32): ("__AVX__", "__builtin_ia32_blendvps256(__builtin_ia32_{op}ps256(b, a), b, "
                             "__builtin_ia32_cmpps256(b, b, 3))"),
    ("f32", 64): ("__AVX512F__",
                  "__builtin_ia32_{op}ps512_mask(b, a, b, __builtin_ia32_cmpps512_mask("
                  "b, b, 7, (unsigned short)0xffff, 4), 4)"),
    ("f64", 16): ("__SSE4_1__", "__builtin_ia32_blendvpd(__builtin_ia32_{op}pd(b, a), b, "
                                "__builtin_ia32_cmpunordpd(b, b))"),
    ("f64", 32): ("__AVX__", "__builtin_ia32_blendvpd256(__builtin_ia32_{op}pd256(b, a), b, "
                             "__builtin_ia32_cmppd256(b, b, 3))"),
    ("f64", 64): ("__AVX512F__",
                  "__builtin_ia32_{op}pd512_mask(b, a, b, __builtin_ia32_cmppd512_mask("
                  "b, b, 7, (unsigned char)0xff, 4), 4)"),
}


# the clamps inside exp: x86's minps/maxps as they are (`a COMPARE b ? a : b`: a NaN in a
# gives b, which the functions rely on and fix below), one instruction each
_CLAMP = """\
static inline VF NAME(VF a, VF b) {   /* a COMPARE b ? a : b */
#if defined(GUARD)
    return (VF)BUILTIN;
#else
    return sched_vselect_SUF(a COMPARE b, a, b);
#endif
}
"""
_X86_CLAMP = {
    ("f32", 16): ("__SSE__", "__builtin_ia32_{op}ps(a, b)"),
    ("f32", 32): ("__AVX__", "__builtin_ia32_{op}ps256(a, b)"),
    ("f32", 64): ("__AVX512F__",
                  "__builtin_ia32_{op}ps512_mask(a, b, a, (unsigned short)0xffff, 4)"),
    ("f64", 16): ("__SSE2__", "__builtin_ia32_{op}pd(a, b)"),
    ("f64", 32): ("__AVX__", "__builtin_ia32_{op}pd256(a, b)"),
    ("f64", 64): ("__AVX512F__", "__builtin_ia32_{op}pd512_mask(a, b, a, (unsigned char)0xff, 4)"),
}


def function_name(op: str, short: str, lanes: int, fast: bool) -> str:
    """The C name of vector function `op` on `lanes` lanes of `short` (f32, f64)."""
    relaxed = "fast_" if fast and short == "f32" and op in _FAST_OPS else ""
    return f"sched_v{op}_{relaxed}{short}x{lanes}"


_FAST_OPS = ("exp", "tanh", "erf", "sigmoid", "rsqrt")


def select_name(short: str, lanes: int) -> str:
    return f"sched_vselect_{short}x{lanes}"


def functions(op: str, short: str, lanes: int, fast: bool) -> list[tuple[str, str]]:
    """(name, C definition) of vector function `op` and of the functions it calls, callees
    first. `short` names the element type: "f32" or "f64"."""
    if op == "select":
        guard = _REGISTER_GUARDS.get(lanes * (4 if short == "f32" else 8), _NO_BUILTIN)
        return [(select_name(short, lanes), _fill(_SELECT.replace("GUARD", guard), short, lanes,
                                                  select_name(short, lanes)))]
    if op in ("min", "max", "clamp_min", "clamp_max"):
        return [*functions("select", short, lanes, fast),
                (function_name(op, short, lanes, fast), _min_max(op, short, lanes))]
    if op not in (FLOAT32_FUNCTIONS if short == "f32" else FLOAT64_FUNCTIONS):
        raise AssertionError(f"C codegen: no vector {op} on {short}")
    name = function_name(op, short, lanes, fast)
    needed = functions("select", short, lanes, fast)
    if op in ("tanh", "erf", "sigmoid"):
        needed += functions("exp", short, lanes, fast)
    if op == "rsqrt":
        needed += functions("sqrt", short, lanes, fast)
    if op == "exp":
        needed += functions("clamp_min", short, lanes, fast) + \
            functions("clamp_max", short, lanes, fast)
    text = _template(op, short, lanes, fast)
    text = text.replace("VMIN", function_name("clamp_min", short, lanes, fast))
    text = text.replace("VMAX", function_name("clamp_max", short, lanes, fast))
    text = text.replace("EXP", function_name("exp", short, lanes, fast))
    text = text.replace("SQRTV", function_name("sqrt", short, lanes, fast))
    return [*needed, (name, _fill(text, short, lanes, name))]


def _min_max(op: str, short: str, lanes: int) -> str:
    bytes_ = lanes * (4 if short == "f32" else 8)
    template, builtins = (_CLAMP, _X86_CLAMP) if op.startswith("clamp_") else \
        (_MIN_MAX, _X86_MIN_MAX)
    base = op.removeprefix("clamp_")
    guard, builtin = builtins.get((short, bytes_), (_NO_BUILTIN, ""))
    text = template.replace("GUARD", guard).replace("BUILTIN", builtin.format(op=base))
    text = text.replace("COMPARE", "<" if base == "min" else ">")
    return _fill(text, short, lanes, function_name(op, short, lanes, False))


def _template(op: str, short: str, lanes: int, fast: bool) -> str:
    if op == "rsqrt" and fast and short == "f32":
        vector_bytes = lanes * 4
        guard, estimate = _RSQRT_ESTIMATES.get(vector_bytes, (_NO_BUILTIN, "x"))
        return _RSQRT_FAST.replace("GUARD", guard).replace("ESTIMATE", estimate)
    if op == "sqrt":
        bytes_ = lanes * (4 if short == "f32" else 8)
        guard, builtin = _SQRT_BUILTINS.get((short, bytes_), (_NO_BUILTIN, ""))
        return _SQRT.replace("GUARD", guard).replace("BUILTIN", builtin)
    if short == "f64":
        return {"exp": _EXP_F64, "log": _LOG_F64, "rsqrt": _RSQRT, "abs": _ABS}[op]
    if op == "exp":
        return _EXP_FAST if fast else _EXP
    return {"log": _LOG, "tanh": _TANH, "erf": _ERF, "sigmoid": _SIGMOID,
            "rsqrt": _RSQRT, "abs": _ABS}[op]


def _fill(text: str, short: str, lanes: int, name: str) -> str:
    int_short = "i32" if short == "f32" else "i64"
    double = short == "f64"
    replacements = {
        "NAME": name, "SUF": f"{short}x{lanes}", "VF": f"sched_{short}x{lanes}",
        "VI": f"sched_{int_short}x{lanes}", "ZERO": f"(sched_{short}x{lanes}){{0}}",
        "LANES": str(lanes), "SQRT": "sqrt" if double else "sqrtf",
        "ONE": "1.0" if double else "1.0f",
        "MAGNITUDE": "INT64_C(0x7fffffffffffffff)" if double else "0x7fffffff",
    }
    for key in sorted(replacements, key=len, reverse=True):
        text = text.replace(key, replacements[key])
    return text

// __half and __nv_bfloat16: storage, conversions rounding to nearest even, arithmetic.
// Part of sched's CUDA emulation header: included by cuda_emu.h, not on its own.
#ifndef SCHED_EMU_FP16_H
#define SCHED_EMU_FP16_H

// -- 16-bit floats --
namespace sched_emu {
inline float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu,
             mantissa = h & 0x3ffu, bits;
    if (exponent == 0x1f) {
        bits = sign | 0x7f800000u | (mantissa << 13);            // inf, NaN
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign;
    } else {                                                      // subnormal: normalize
        int shift = 0;
        while (!(mantissa & 0x400u)) { mantissa <<= 1; ++shift; }
        bits = sign | ((uint32_t)(113 - shift) << 23) | ((mantissa & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

inline uint16_t float_to_half(float f) {   // round to nearest even
    uint32_t bits;
    memcpy(&bits, &f, 4);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return sign | 0x7e00u;                   // NaN
    if (magnitude >= 0x477ff000u) return sign | 0x7c00u;                  // overflow: inf
    if (magnitude < 0x38800000u) {                                        // subnormal or 0
        if (magnitude < 0x33000000u) return sign;                         // below half of 2^-24
        uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(magnitude >> 23);                         // 14..24
        uint32_t result = mantissa >> shift, rest = mantissa & ((1u << shift) - 1),
                 half_way = 1u << (shift - 1);
        if (rest > half_way || (rest == half_way && (result & 1u))) ++result;
        return sign | (uint16_t)result;
    }
    uint32_t result = ((magnitude >> 13) - (112u << 10)), rest = magnitude & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;
    return sign | (uint16_t)result;
}

inline float bfloat16_to_float(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

inline uint16_t float_to_bfloat16(float f) {   // round to nearest even; NaN stays quiet
    uint32_t bits;
    memcpy(&bits, &f, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40u);
    return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}
}  // namespace sched_emu

struct __half {
    uint16_t __x;
    __half() = default;
    __half(float f) : __x(::sched_emu::float_to_half(f)) {}
    __half(double f) : __x(::sched_emu::float_to_half((float)f)) {}
    __half(int i) : __x(::sched_emu::float_to_half((float)i)) {}
    operator float() const { return ::sched_emu::half_to_float(__x); }
};
struct __nv_bfloat16 {
    uint16_t __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) : __x(::sched_emu::float_to_bfloat16(f)) {}
    __nv_bfloat16(double f) : __x(::sched_emu::float_to_bfloat16((float)f)) {}
    __nv_bfloat16(int i) : __x(::sched_emu::float_to_bfloat16((float)i)) {}
    operator float() const { return ::sched_emu::bfloat16_to_float(__x); }
};
typedef __half half;
typedef __nv_bfloat16 nv_bfloat16;
struct __attribute__((aligned(4))) __half2 { __half x, y; };
struct __attribute__((aligned(4))) __nv_bfloat162 { __nv_bfloat16 x, y; };
typedef __half2 half2;
typedef __nv_bfloat162 nv_bfloat162;

inline float __half2float(__half h) { return (float)h; }
inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline __half __double2half(double d) {     // rounded once: through float rounded to odd
    float f = (float)d;
    if ((double)f != d && d == d) {
        uint32_t bits;
        memcpy(&bits, &f, 4);
        if (fabs((double)f) > fabs(d)) bits -= 1;       // toward zero, then the sticky bit
        bits |= 1u;
        memcpy(&f, &bits, 4);
    }
    return __half(f);
}
inline __half __int2half_rn(int i) { return __half((float)i); }
inline __half __ushort_as_half(unsigned short bits) { __half h; h.__x = bits; return h; }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline float __bfloat162float(__nv_bfloat16 b) { return (float)b; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) {
    __nv_bfloat16 b;
    b.__x = bits;
    return b;
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline __half2 __floats2half2_rn(float a, float b) { return {__half(a), __half(b)}; }
inline __half2 __float2half2_rn(float a) { return {__half(a), __half(a)}; }
inline float2 __half22float2(__half2 h) { return {(float)h.x, (float)h.y}; }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
    return {__nv_bfloat16(a), __nv_bfloat16(b)};
}
inline float2 __bfloat1622float2(__nv_bfloat162 b) { return {(float)b.x, (float)b.y}; }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }
// arithmetic: exact in double, one rounding to 16 bits (what the hardware's fp16 units give)
#define SCHED_EMU_HALF_MATH(T, p)                                                          \
    inline T __h##add##p(T a, T b) { return T((double)(float)a + (float)b); }             \
    inline T __h##sub##p(T a, T b) { return T((double)(float)a - (float)b); }             \
    inline T __h##mul##p(T a, T b) { return T((double)(float)a * (float)b); }             \
    inline T __h##div##p(T a, T b) { return T((float)a / (float)b); }                     \
    inline T __h##fma##p(T a, T b, T c) {                                                 \
        return T(fma((double)(float)a, (double)(float)b, (double)(float)c)); }            \
    inline T __h##max##p(T a, T b) { return (float)a > (float)b ? a : b; }                \
    inline T __h##min##p(T a, T b) { return (float)a < (float)b ? a : b; }                \
    inline T __h##neg##p(T a) { return T(-(float)a); }
SCHED_EMU_HALF_MATH(__half, )
#undef SCHED_EMU_HALF_MATH
inline __half hexp(__half a) { return __half(expf((float)a)); }
inline __half hsqrt(__half a) { return __half(sqrtf((float)a)); }

#endif  // SCHED_EMU_FP16_H

// CUDA's device math and atomics on the host (fast-math intrinsics computed exactly).
// Part of sched's CUDA emulation header: included by cuda_emu.h, not on its own.
#ifndef SCHED_EMU_MATH_H
#define SCHED_EMU_MATH_H

// -- atomics (on global or shared memory; seen by ThreadSanitizer as atomics) --
namespace sched_emu {
template <typename T, typename F>
T atomic_update(T* address, F update) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "sched cuda-emu: 4- or 8-byte atomics");
    using Bits = typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type;
    Bits* word = reinterpret_cast<Bits*>(address);
    Bits old = __atomic_load_n(word, __ATOMIC_RELAXED), next;
    T value;
    do {
        memcpy(&value, &old, sizeof(T));
        T updated = update(value);
        memcpy(&next, &updated, sizeof(T));
    } while (!__atomic_compare_exchange_n(word, &old, next, false, __ATOMIC_SEQ_CST,
                                          __ATOMIC_RELAXED));
    return value;
}
}  // namespace sched_emu

template <typename T> T atomicAdd(T* a, T v) {
    return ::sched_emu::atomic_update(a, [v](T x) { return (T)(x + v); });
}
template <typename T> T atomicSub(T* a, T v) {
    return ::sched_emu::atomic_update(a, [v](T x) { return (T)(x - v); });
}
template <typename T> T atomicMax(T* a, T v) {
    return ::sched_emu::atomic_update(a, [v](T x) { return x > v ? x : v; });
}
template <typename T> T atomicMin(T* a, T v) {
    return ::sched_emu::atomic_update(a, [v](T x) { return x < v ? x : v; });
}
template <typename T> T atomicExch(T* a, T v) {
    return ::sched_emu::atomic_update(a, [v](T) { return v; });
}
template <typename T> T atomicAnd(T* a, T v) {
    return ::sched_emu::atomic_update(a, [v](T x) { return (T)(x & v); });
}
template <typename T> T atomicOr(T* a, T v) {
    return ::sched_emu::atomic_update(a, [v](T x) { return (T)(x | v); });
}
template <typename T> T atomicCAS(T* a, T compare, T v) {
    return ::sched_emu::atomic_update(a, [compare, v](T x) { return x == compare ? v : x; });
}

// -- math: CUDA's device functions on the host (fast-math intrinsics computed exactly) --
#define __ldg(p) (*(p))
#define __expf(x) expf(x)
#define __exp10f(x) exp10f(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __powf(x, y) powf(x, y)
#define __fdividef(x, y) ((x) / (y))
#define __fmaf_rn(x, y, z) fmaf(x, y, z)
#define __fmul_rn(x, y) ((x) * (y))
#define __fadd_rn(x, y) ((x) + (y))
#define __frcp_rn(x) (1.0f / (x))
#define __fsqrt_rn(x) sqrtf(x)
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
inline float __uint_as_float(unsigned x) { float f; memcpy(&f, &x, 4); return f; }
inline unsigned __float_as_uint(float x) { unsigned i; memcpy(&i, &x, 4); return i; }
inline double __longlong_as_double(long long x) { double d; memcpy(&d, &x, 8); return d; }
inline long long __double_as_longlong(double x) { long long i; memcpy(&i, &x, 8); return i; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int k = 0; k < 32; ++k) r |= ((x >> k) & 1u) << (31 - k);
    return r;
}

#define SCHED_EMU_MINMAX(T)                                                   \
    inline T min(T a, T b) { return a < b ? a : b; }                          \
    inline T max(T a, T b) { return a > b ? a : b; }
SCHED_EMU_MINMAX(int)
SCHED_EMU_MINMAX(unsigned int)
SCHED_EMU_MINMAX(long)
SCHED_EMU_MINMAX(unsigned long)
SCHED_EMU_MINMAX(long long)
SCHED_EMU_MINMAX(unsigned long long)
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline double min(float a, double b) { return fmin(a, b); }
inline double max(float a, double b) { return fmax(a, b); }
inline double min(double a, float b) { return fmin(a, b); }
inline double max(double a, float b) { return fmax(a, b); }
#undef SCHED_EMU_MINMAX

#endif  // SCHED_EMU_MATH_H

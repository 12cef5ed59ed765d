// sched's CUDA emulation header: CUDA C compiled as C++ by g++, one host thread per CUDA
// thread of a block, blocks one after another (sched/cuda/emu/runtime.cc runs them).
//
// What it maps: threadIdx/blockIdx (thread-local), blockDim/gridDim, the qualifiers
// (__global__, __device__, __host__, __forceinline__, __launch_bounds__, __align__),
// __shared__ (static storage in the section "sched_emu_shared": one copy shared by the
// threads of the running block, filled with 0xff bytes before each block, so a read of shared
// memory no thread of the block wrote is NaN), __syncthreads() (a barrier of the block's host
// threads, watched for deadlocks), warp shuffles, votes and __syncwarp with PTX's reference
// semantics over the 32 lanes of a warp, atomics, __half/__nv_bfloat16, the vector types and
// the fast-math intrinsics (computed exactly). The file has no other dependency than libstdc++.
#ifndef SCHED_CUDA_EMU_H
#define SCHED_CUDA_EMU_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <type_traits>
#include <utility>

#define SCHED_CUDA_EMU 1

// -- qualifiers --------------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ __attribute__((section("sched_emu_shared"))) static
#define __constant__ static const

// -- vector types ----------------------------------------------------------------------------------
#define SCHED_EMU_VECTORS(T, name, align2, align4)                                          \
    struct __attribute__((aligned(align2))) name##2 { T x, y; };                           \
    struct name##3 { T x, y, z; };                                                          \
    struct __attribute__((aligned(align4))) name##4 { T x, y, z, w; };                      \
    inline name##2 make_##name##2(T x, T y) { return {x, y}; }                             \
    inline name##3 make_##name##3(T x, T y, T z) { return {x, y, z}; }                     \
    inline name##4 make_##name##4(T x, T y, T z, T w) { return {x, y, z, w}; }
SCHED_EMU_VECTORS(float, float, 8, 16)
SCHED_EMU_VECTORS(int, int, 8, 16)
SCHED_EMU_VECTORS(unsigned int, uint, 8, 16)
SCHED_EMU_VECTORS(double, double, 16, 16)
SCHED_EMU_VECTORS(long long, longlong, 16, 16)
SCHED_EMU_VECTORS(signed char, char, 2, 4)
SCHED_EMU_VECTORS(unsigned char, uchar, 2, 4)
SCHED_EMU_VECTORS(short, short, 4, 8)
#undef SCHED_EMU_VECTORS

// -- indices -------------------------------------------------------------------------------------
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1)
        : x(x_), y(y_), z(z_) {}
};

namespace sched_emu {
extern thread_local uint3 thread_index;      // threadIdx of this host thread
extern thread_local uint3 block_index;       // blockIdx of the block it runs
extern dim3 block_dim, grid_dim;
extern unsigned char* dynamic_shared;        // the `extern __shared__` array of the launch

// the runtime (runtime.cc)
void syncthreads(int line);
int syncthreads_reduce(int line, int predicate, int how);   // how: 0 count, 1 and, 2 or
const uint64_t* warp_collective(unsigned mask, uint64_t value, int line, const char* what,
                                unsigned* group);
unsigned lane_id();
unsigned active_lanes();
[[noreturn]] void kernel_error(int line, const char* message);
int run_grid(const char* kernel, const unsigned* grid, const unsigned* block,
             unsigned long long dynamic_shared_bytes, void (*body)(void*), void* context);
}  // namespace sched_emu

#define threadIdx (::sched_emu::thread_index)
#define blockIdx (::sched_emu::block_index)
#define blockDim (::sched_emu::block_dim)
#define gridDim (::sched_emu::grid_dim)
#define warpSize 32

// -- barriers, fences --------------------------------------------------------------------------
#define __syncthreads() ::sched_emu::syncthreads(__LINE__)
#define __syncthreads_count(p) ::sched_emu::syncthreads_reduce(__LINE__, (p), 0)
#define __syncthreads_and(p) ::sched_emu::syncthreads_reduce(__LINE__, (p), 1)
#define __syncthreads_or(p) ::sched_emu::syncthreads_reduce(__LINE__, (p), 2)
#define __threadfence() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define __threadfence_block() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define __syncwarp(...) ::sched_emu::syncwarp(__LINE__, ##__VA_ARGS__)

// -- warp shuffles and votes: PTX shfl.sync's reference semantics --------------------------------
namespace sched_emu {
enum ShuffleMode { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_BFLY };

// the lane `lane` reads from, as PTX's shfl.sync defines it (b: source lane, delta or lane
// mask; c: the clamp value and segment mask the CUDA intrinsics derive from `width`)
inline unsigned shuffle_source(unsigned lane, unsigned b, unsigned c, ShuffleMode mode) {
    unsigned clamp = c & 0x1f, segmask = (c >> 8) & 0x1f;
    unsigned max_lane = (lane & segmask) | (clamp & ~segmask);
    unsigned min_lane = lane & segmask;
    int j;
    bool valid;
    switch (mode) {
    case SHFL_UP: j = (int)lane - (int)b; valid = j >= (int)max_lane; break;
    case SHFL_DOWN: j = (int)(lane + b); valid = j <= (int)max_lane; break;
    case SHFL_BFLY: j = (int)(lane ^ b); valid = j <= (int)max_lane; break;
    default: j = (int)(min_lane | (b & ~segmask)); valid = j <= (int)max_lane; break;
    }
    return valid ? (unsigned)j : lane;
}

template <typename T>
T shuffle(int line, const char* what, unsigned mask, T var, unsigned b, int width,
          ShuffleMode mode) {
    static_assert(sizeof(T) <= 8, "sched cuda-emu: shuffles move at most 8 bytes");
    if (width < 1 || width > 32 || (width & (width - 1)))
        kernel_error(line, "shuffle width must be a power of 2 in [1, 32]");
    uint64_t bits = 0;
    memcpy(&bits, &var, sizeof(T));
    unsigned group;
    const uint64_t* values = warp_collective(mask, bits, line, what, &group);
    unsigned lane = lane_id();
    unsigned c = ((32u - (unsigned)width) << 8) | (mode == SHFL_UP ? 0u : 0x1fu);
    unsigned source = shuffle_source(lane, b & 0x1f, c, mode);
    if (!(group >> source & 1u)) {
        char message[160];
        snprintf(message, sizeof message, "%s: lane %u reads lane %u, which is not in the "
                 "mask 0x%08x of the lanes taking part (its value is undefined)", what, lane,
                 source, group);
        kernel_error(line, message);
    }
    T result;
    memcpy(&result, &values[source], sizeof(T));
    return result;
}

inline unsigned vote(int line, const char* what, unsigned mask, int predicate, int how) {
    unsigned group;
    const uint64_t* values = warp_collective(mask, predicate != 0, line, what, &group);
    unsigned ballot = 0;
    for (unsigned l = 0; l < 32; ++l)
        if ((group >> l & 1u) && values[l]) ballot |= 1u << l;
    if (how == 0) return ballot;
    if (how == 1) return ballot == group;      // all
    return ballot != 0;                        // any
}

inline void syncwarp(int line, unsigned mask = 0xffffffffu) {
    unsigned group;
    warp_collective(mask, 0, line, "__syncwarp", &group);
}
}  // namespace sched_emu

#define __shfl_sync(mask, var, src, ...) ::sched_emu::shuffle(__LINE__, "__shfl_sync", \
    (mask), (var), (unsigned)(src), ::sched_emu::width_or_32(__VA_ARGS__), ::sched_emu::SHFL_IDX)
#define __shfl_up_sync(mask, var, delta, ...) ::sched_emu::shuffle(__LINE__, "__shfl_up_sync", \
    (mask), (var), (unsigned)(delta), ::sched_emu::width_or_32(__VA_ARGS__), ::sched_emu::SHFL_UP)
#define __shfl_down_sync(mask, var, delta, ...) ::sched_emu::shuffle(__LINE__, \
    "__shfl_down_sync", (mask), (var), (unsigned)(delta), \
    ::sched_emu::width_or_32(__VA_ARGS__), ::sched_emu::SHFL_DOWN)
#define __shfl_xor_sync(mask, var, lanes, ...) ::sched_emu::shuffle(__LINE__, \
    "__shfl_xor_sync", (mask), (var), (unsigned)(lanes), \
    ::sched_emu::width_or_32(__VA_ARGS__), ::sched_emu::SHFL_BFLY)
#define __ballot_sync(mask, p) ::sched_emu::vote(__LINE__, "__ballot_sync", (mask), (p), 0)
#define __all_sync(mask, p) (int)::sched_emu::vote(__LINE__, "__all_sync", (mask), (p), 1)
#define __any_sync(mask, p) (int)::sched_emu::vote(__LINE__, "__any_sync", (mask), (p), 2)
#define __activemask() ::sched_emu::active_lanes()

namespace sched_emu {
constexpr int width_or_32() { return 32; }
constexpr int width_or_32(int width) { return width; }
}  // namespace sched_emu

// -- atomics (on global or shared memory; seen by ThreadSanitizer as atomics) ---------------------
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

// -- math: CUDA's device functions on the host (fast-math intrinsics computed exactly) ----------
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

// -- 16-bit floats ---------------------------------------------------------------------------------
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
inline __half __int2half_rn(int i) { return __half((float)i); }
inline __half __ushort_as_half(unsigned short bits) { __half h; h.__x = bits; return h; }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline float __bfloat162float(__nv_bfloat16 b) { return (float)b; }
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

// -- launching: a kernel's parameters from cuLaunchKernel's array of argument addresses ------------
namespace sched_emu {
template <typename... P>
struct Call {
    void (*kernel)(P...);
    void** params;

    template <typename T>
    static T argument(void* address) {
        T value;
        memcpy(static_cast<void*>(&value), address, sizeof(T));
        return value;
    }
    template <size_t... I>
    void run(std::index_sequence<I...>) { kernel(argument<P>(params[I])...); }
    static void body(void* self) {
        static_cast<Call*>(self)->run(std::index_sequence_for<P...>{});
    }
};

template <typename... P>
int launch(void (*kernel)(P...), const char* name, void** params, const unsigned* grid,
           const unsigned* block, unsigned long long dynamic_shared_bytes) {
    Call<P...> call{kernel, params};
    return run_grid(name, grid, block, dynamic_shared_bytes, &Call<P...>::body, &call);
}
}  // namespace sched_emu

#endif  // SCHED_CUDA_EMU_H

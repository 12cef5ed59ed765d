// CUDA's vector types (float4, int2, ...) and their make_ functions.
// Part of sched's CUDA emulation header: included by cuda_emu.h, not on its own.
#ifndef SCHED_EMU_TYPES_H
#define SCHED_EMU_TYPES_H

// -- vector types --
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

#endif  // SCHED_EMU_TYPES_H

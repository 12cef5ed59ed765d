// The inline PTX that tensor-core and asynchronous-copy kernels are written with, as
// functions with the instructions' reference semantics (sched/cuda/emu/ptx.py turns each
// recognized `asm volatile(...)` statement into a call of one of these):
// - mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 and
//   .f16.f16.f16.f16: the fragments laid out over the warp as the PTX ISA specifies them
//   (groupID = lane / 4, threadID_in_group = lane % 4), products summed in float in k order
//   (an fp16 accumulator rounded to half at the end), and m16n8k32 .s32.s8.s8.s32 (exact);
// - ldmatrix.sync.aligned.m8n8.{x1,x2,x4}[.trans].shared.b16: lanes 8j..8j+7 give the row
//   addresses of matrix j, each lane receives the two 16-bit elements of row lane / 4 (column
//   lane / 4 when transposed) at columns 2 (lane % 4), +1;
// - cp.async.{ca,cg}.shared.global (with src-size), commit_group, wait_group, wait_all: the
//   pipeline primitives of emu_pipeline.h (a copy lands at the wait that covers it);
// - cvta.to.shared (and __cvta_generic_to_shared): a shared memory address is an offset in
//   the block's shared memory.
// Part of sched's CUDA emulation header: included by cuda_emu.h.
#ifndef SCHED_EMU_PTX_H
#define SCHED_EMU_PTX_H

namespace sched_emu {
namespace ptx {
inline unsigned shared_address(const void* pointer) {
    return (unsigned)(static_cast<const unsigned char*>(pointer) - shared_base);
}
inline unsigned char* shared_pointer(unsigned address) { return shared_base + address; }

inline float half_bits(uint16_t bits, bool bfloat) {
    return bfloat ? bfloat16_to_float(bits) : half_to_float(bits);
}

// ldmatrix.sync.aligned.m8n8.x<N>[.trans].shared.b16 {out...}, [address]
template <int N>
void ldmatrix(int line, bool transposed, unsigned* const (&out)[N], unsigned address) {
    unsigned group;
    const uint64_t* rows = warp_collective(0xffffffffu, address, line, "ldmatrix", &group);
    unsigned lane = lane_id(), r = lane / 4, c = 2 * (lane % 4);
    for (int j = 0; j < N; ++j) {
        auto element = [&](unsigned row, unsigned column) {
            uint16_t value;
            memcpy(&value, shared_pointer((unsigned)rows[8 * j + row]) + 2 * column, 2);
            return (unsigned)value;
        };
        unsigned low = transposed ? element(c, r) : element(r, c);
        unsigned high = transposed ? element(c + 1, r) : element(r, c + 1);
        *out[j] = low | high << 16;
    }
}

inline float multiply_add(float x, float y, float sum) { return fmaf(x, y, sum); }
inline int multiply_add(int x, int y, int sum) { return x * y + sum; }

// The four sums of an m16n8k<2 * 4E> for this lane (rows groupID, +8; columns 2
// threadID_in_group, +1), from its accumulator elements `c` in that order, with E elements to
// a 32-bit register (`decode` reads one from its low bits): A is 16 x K row-major (a0..a3:
// rows 0-7 / 8-15 of the first half of k, then of the second), B K x 8 column-major (b0, b1:
// the two halves of k); products summed in k order.
template <unsigned E, typename Acc, typename Decode>
inline void mma_sums(int line, const unsigned (&a)[4], const unsigned (&b)[2],
                     const Acc (&c)[4], Acc (&result)[4], Decode decode) {
    constexpr unsigned half = 4 * E, bits = 32 / E;
    struct Fragments { unsigned a[4], b[2]; } mine;
    memcpy(mine.a, a, sizeof mine.a);
    memcpy(mine.b, b, sizeof mine.b);
    unsigned group;
    const uint64_t* lanes = warp_collective(0xffffffffu, (uint64_t)(uintptr_t)&mine, line,
                                            "mma.sync", &group);
    auto fragments = [&](unsigned l) { return (const Fragments*)(uintptr_t)lanes[l]; };
    auto a_element = [&](unsigned row, unsigned k) {
        unsigned l = (row % 8) * 4 + (k % half) / E, reg = (row >= 8) + 2 * (k >= half);
        return decode(fragments(l)->a[reg] >> (bits * (k % E)));
    };
    auto b_element = [&](unsigned k, unsigned n) {
        unsigned l = n * 4 + (k % half) / E, reg = k >= half;
        return decode(fragments(l)->b[reg] >> (bits * (k % E)));
    };
    unsigned lane = lane_id(), g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
        unsigned row = g + 8 * (i >= 2), column = 2 * t + (i & 1);
        Acc sum = c[i];
        for (unsigned k = 0; k < 2 * half; ++k)
            sum = multiply_add(a_element(row, k), b_element(k, column), sum);
        result[i] = sum;
    }
    warp_collective(0xffffffffu, 0, line, "mma.sync", &group);  // every lane has read `mine`
}

// The sums of an m16n8k16 on 16-bit (fp16 or bf16) operands, in float
inline void mma_m16n8k16_sums(int line, bool bfloat, const unsigned (&a)[4],
                              const unsigned (&b)[2], const float (&c)[4], float (&result)[4]) {
    mma_sums<2>(line, a, b, c, result,
                [bfloat](unsigned bits) { return half_bits((uint16_t)bits, bfloat); });
}

// mma.sync.aligned.m16n8k16.row.col.f32.<ab>.<ab>.f32 {d0-d3}, {a0-a3}, {b0-b1}, {c0-c3}
inline void mma_m16n8k16(int line, bool bfloat, float* const (&d)[4], const unsigned (&a)[4],
                         const unsigned (&b)[2], const float (&c)[4]) {
    float result[4];
    mma_m16n8k16_sums(line, bfloat, a, b, c, result);
    for (int i = 0; i < 4; ++i) *d[i] = result[i];
}

// mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {d0-d1}, {a0-a3}, {b0-b1}, {c0-c1}: the
// accumulator as two registers of two halves (row groupID, then +8; columns 2
// threadID_in_group, +1), summed in float and rounded to half once (PTX leaves the
// intermediate precision to the hardware)
inline void mma_m16n8k16_f16(int line, unsigned* const (&d)[2], const unsigned (&a)[4],
                             const unsigned (&b)[2], const unsigned (&c)[2]) {
    float accumulator[4], result[4];
    for (int i = 0; i < 4; ++i)
        accumulator[i] = half_to_float((uint16_t)(c[i / 2] >> (16 * (i % 2))));
    mma_m16n8k16_sums(line, false, a, b, accumulator, result);
    for (int r = 0; r < 2; ++r)
        *d[r] = (unsigned)float_to_half(result[2 * r])
            | (unsigned)float_to_half(result[2 * r + 1]) << 16;
}

// mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {d0-d3}, {a0-a3}, {b0-b1}, {c0-c3}: four
// int8 elements to a register (A: row groupID or +8, k 4 threadID_in_group + byte, +16;
// B: k alike, column groupID), summed exactly in int32
inline void mma_m16n8k32_s8(int line, int* const (&d)[4], const unsigned (&a)[4],
                            const unsigned (&b)[2], const int (&c)[4]) {
    int result[4];
    mma_sums<4>(line, a, b, c, result, [](unsigned bits) { return (int)(int8_t)bits; });
    for (int i = 0; i < 4; ++i) *d[i] = result[i];
}

inline void cp_async(int line, unsigned destination, const void* source, unsigned size,
                     unsigned source_size) {
    pipeline_memcpy_async(line, shared_pointer(destination), source, size,
                          source_size < size ? size - source_size : 0);
}
}  // namespace ptx
}  // namespace sched_emu

// CUDA's conversion of a pointer into shared memory to its shared-memory address
inline size_t __cvta_generic_to_shared(const void* pointer) {
    return sched_emu::ptx::shared_address(pointer);
}

#endif  // SCHED_EMU_PTX_H

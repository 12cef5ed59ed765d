// Warp shuffles, votes and __syncwarp, with PTX's reference semantics over the 32 lanes.
// Part of sched's CUDA emulation header: included by cuda_emu.h, not on its own.
#ifndef SCHED_EMU_WARP_H
#define SCHED_EMU_WARP_H

// -- warp shuffles and votes: PTX shfl.sync's reference semantics --
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

#endif  // SCHED_EMU_WARP_H

// sched's CUDA emulation header: CUDA C compiled as C++ by g++, one host thread per CUDA
// thread of a block, blocks one after another (sched/cuda/emu/runtime/ runs them).
//
// What it maps: threadIdx/blockIdx (thread-local), blockDim/gridDim, the qualifiers
// (__global__, __device__, __host__, __forceinline__, __launch_bounds__, __align__),
// __shared__ (with sched/cuda/emu/source.py: each block's own shared memory, filled with 0xff
// bytes before it starts, so a read of shared memory no thread of the block wrote is NaN),
// __syncthreads() (a barrier of the block's host threads, watched for deadlocks), warp
// shuffles, votes and __syncwarp with PTX's reference semantics over the 32 lanes of a warp,
// atomics, __half/__nv_bfloat16, the vector types and the fast-math intrinsics (computed
// exactly). mma.h (nvcuda::wmma, emu_wmma.h) and
// cuda_pipeline.h (asynchronous copies, emu_pipeline.h) give the tensor-core fragments and
// cp.async their reference semantics. No other dependency than libstdc++.
//
// Inline PTX (asm(...)) is emulated for the tensor-core and asynchronous-copy instructions
// only (mma.sync, ldmatrix, cp.async, cvta.to.shared: emu_ptx.h, read by
// sched/cuda/emu/ptx.py); other inline assembly is refused when the kernel is built.
#ifndef SCHED_CUDA_EMU_H
#define SCHED_CUDA_EMU_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <type_traits>
#include <utility>

#define SCHED_CUDA_EMU 1

// -- qualifiers --
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// sched/cuda/emu/source.py rewrites each `__shared__ T name[...];` it recognizes into a
// reference to the block's shared memory (`shared_variable` below); one it does not is a
// single static copy for every block, neither reset nor refilled between blocks
#define __shared__ static
#define __constant__ static

#include "emu_types.h"

// -- indices --
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1)
        : x(x_), y(y_), z(z_) {}
};

namespace sched_emu {
extern thread_local uint3 thread_index;      // threadIdx of this host thread
extern thread_local uint3 block_index;       // blockIdx of the block it runs
extern dim3 block_dim, grid_dim;
extern thread_local unsigned char* shared_base;    // the block's shared memory: the
                                                   // `extern __shared__` array, then the rest
extern thread_local unsigned long block_serial;    // the block's number in the launch, from 1

// the runtime (runtime.cc)
void syncthreads(int line);
int syncthreads_reduce(int line, int predicate, int how);   // how: 0 count, 1 and, 2 or
const uint64_t* warp_collective(unsigned mask, uint64_t value, int line, const char* what,
                                unsigned* group);
unsigned lane_id();
unsigned active_lanes();
[[noreturn]] void kernel_error(int line, const char* message);

// a __shared__ variable: its offset in every block's shared memory, given at its first use
struct SharedSlot {
    long offset;
};
long assign_shared(SharedSlot& slot, size_t size, size_t align, int line);

template <typename T>
T& shared_variable(SharedSlot& slot, size_t align, int line) {
    long offset = __atomic_load_n(&slot.offset, __ATOMIC_RELAXED);
    if (offset < 0)
        offset = assign_shared(slot, sizeof(T), align > alignof(T) ? align : alignof(T), line);
    return *reinterpret_cast<T*>(shared_base + offset);
}
int run_grid(const char* kernel, const unsigned* grid, const unsigned* block,
             unsigned long long dynamic_shared_bytes, void (*body)(void*), void* context);
}  // namespace sched_emu

#define threadIdx (::sched_emu::thread_index)
#define blockIdx (::sched_emu::block_index)
#define blockDim (::sched_emu::block_dim)
#define gridDim (::sched_emu::grid_dim)
#define warpSize 32

// -- barriers, fences --
#define __syncthreads() ::sched_emu::syncthreads(__LINE__)
#define __syncthreads_count(p) ::sched_emu::syncthreads_reduce(__LINE__, (p), 0)
#define __syncthreads_and(p) ::sched_emu::syncthreads_reduce(__LINE__, (p), 1)
#define __syncthreads_or(p) ::sched_emu::syncthreads_reduce(__LINE__, (p), 2)
#define __threadfence() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define __threadfence_block() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define __syncwarp(...) ::sched_emu::syncwarp(__LINE__, ##__VA_ARGS__)

#include "emu_fp16.h"
#include "emu_math.h"
#include "emu_warp.h"
#include "emu_pipeline.h"
#include "emu_ptx.h"

// -- launching: a kernel's parameters from cuLaunchKernel's array of argument addresses --
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
    static Call<P...> call;     // static: the kernel's threads may outlive this frame
    call = {kernel, params};
    return run_grid(name, grid, block, dynamic_shared_bytes, &Call<P...>::body, &call);
}
}  // namespace sched_emu

#endif  // SCHED_CUDA_EMU_H

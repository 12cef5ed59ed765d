// The launch in sched's CUDA emulation: every block of the grid, one after another, each as
// one host thread per CUDA thread, with its own shared memory filled with 0xff bytes (NaN as
// floats) before it starts; and the watchdog.
//
// Two ways to run the blocks, one order of execution:
// - pooled (the default): one host thread per CUDA thread for the whole launch, each running
//   its thread of every block in turn, started by its own semaphore (so that nothing but
//   the kernel's barriers orders the threads of a block), one shared memory for all blocks;
// - independent (under ThreadSanitizer): fresh threads and fresh shared memory for each
//   block, and the launcher learns that a block is done from relaxed atomics, which order
//   nothing for ThreadSanitizer: so it sees no order between blocks (the GPU runs them at
//   once), and reports races between blocks on global memory too. Memory the launcher frees
//   there is hidden from it (the AnnotateIgnore* calls): nothing of a block touches it after.
#include "runtime.h"

#include <pthread.h>
#include <semaphore.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <unistd.h>

#ifdef __SANITIZE_THREAD__
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

namespace sched_emu {
thread_local uint3 thread_index, block_index;
thread_local unsigned char* shared_base;
thread_local unsigned long block_serial;
dim3 block_dim, grid_dim;

namespace {
using Clock = std::chrono::steady_clock;

// the shared memory of a block: the dynamic part, then each __shared__ variable at the
// offset its first use gave it (the same in every block); at most this much
constexpr size_t STATIC_SHARED_CAPACITY = 256 * 1024;
size_t dynamic_bytes;
std::atomic<size_t> static_used{0};

size_t shared_capacity() { return dynamic_bytes + STATIC_SHARED_CAPACITY; }

size_t used_shared_bytes() {    // what a block may have written, at most
    return std::min(shared_capacity(), dynamic_bytes + static_used.load(std::memory_order_relaxed));
}

unsigned char* new_shared_memory() {
    auto* memory = static_cast<unsigned char*>(aligned_alloc(64, shared_capacity()));
    memset(memory, 0xff, shared_capacity());
    return memory;
}

void enter_block(Block& b, unsigned id) {
    current_block = &b;
    linear_id = id;
    thread_index = {id % block_dim.x, id / block_dim.x % block_dim.y,
                    id / (block_dim.x * block_dim.y)};
    block_index = b.index;
    shared_base = b.shared;
    block_serial = b.serial;
    char name[16];    // ThreadSanitizer's reports and gdb show it: "t<threadIdx> b<blockIdx>"
    snprintf(name, sizeof name, "t%u,%u,%u b%u,%u,%u", thread_index.x, thread_index.y,
             thread_index.z, block_index.x, block_index.y, block_index.z);
    pthread_setname_np(pthread_self(), name);
}

void run_thread_of_block(Block& b, unsigned id, void (*body)(void*), void* context) {
    enter_block(b, id);
    try {
        body(context);
    } catch (const Aborted&) {
    }
    thread_returned(b);
}

std::string watchdog_message(const Block& b) {
    char seconds[32];
    snprintf(seconds, sizeof seconds, "%g", timeout_seconds);
    return "watchdog: " + block_name(b) + " has run for " + seconds + " s (SCHED_EMU_TIMEOUT) "
           "without finishing: a barrier that not every thread reaches?" + where_threads_are(b);
}

// after a failure: the waiting threads unwind; a thread that never returns (an endless loop)
// leaves nothing to do but report and exit
void wait_for_unwinding(Block& b) {
    auto grace = Clock::now() + std::chrono::seconds(2);
    while (b.finished.load(std::memory_order_relaxed) < b.size) {
        if (Clock::now() > grace) {
            std::lock_guard<std::mutex> lock(b.mutex);
            fprintf(stderr, "sched-emu: %s\n", b.error.c_str());
            fflush(stderr);
            _exit(3);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
}

// wait for block `b` to finish without ordering anything after it (relaxed atomics); false
// when it failed (its message is then in b.error, read holding the mutex)
bool finish_block(Block& b) {
    auto limit = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(timeout_seconds));
    auto pause = std::chrono::microseconds(20);
    while (b.finished.load(std::memory_order_relaxed) < b.size &&
           !b.failed.load(std::memory_order_relaxed)) {
        if (Clock::now() > limit) {
            std::lock_guard<std::mutex> lock(b.mutex);
            fail(b, watchdog_message(b));
            break;
        }
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::microseconds(200));
    }
    if (!b.failed.load(std::memory_order_relaxed)) return true;
    wait_for_unwinding(b);
    return false;
}

#ifdef __SANITIZE_THREAD__
// fresh threads and shared memory per block (see the top of the file)
bool run_blocks(Block& first, void (*body)(void*), void* context) {
    // each block is left allocated: the launcher has no order with its threads in which it
    // could free it (and the process ends after the launch)
    unsigned long serial = 0;
    for (unsigned z = 0; z < grid_dim.z; ++z)
        for (unsigned y = 0; y < grid_dim.y; ++y)
            for (unsigned x = 0; x < grid_dim.x; ++x) {
                Block& b = *new Block;
                b.kernel = first.kernel;
                b.reset(first.size, {x, y, z});
                b.serial = ++serial;
                b.shared = new_shared_memory();
                for (unsigned t = 0; t < b.size; ++t)
                    std::thread(run_thread_of_block, std::ref(b), t, body, context).detach();
                bool ok = finish_block(b);
                if (!ok) {
                    std::lock_guard<std::mutex> lock(b.mutex);
                    fprintf(stderr, "sched-emu: %s\n", b.error.c_str());
                    return false;
                }
                AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
                AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
                free(b.shared);
                AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
                AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
            }
    return true;
}
#else
// one pool of threads and one shared memory for every block (see the top of the file)
bool run_blocks(Block& b, void (*body)(void*), void* context) {
    std::vector<sem_t> start(b.size);
    for (sem_t& s : start) sem_init(&s, 0, 0);
    bool finished = false;
    std::vector<std::thread> threads;
    threads.reserve(b.size);
    for (unsigned t = 0; t < b.size; ++t)
        threads.emplace_back([&, t] {
            for (;;) {
                while (sem_wait(&start[t]) != 0) {
                }
                if (finished) return;
                run_thread_of_block(b, t, body, context);
            }
        });
    b.shared = new_shared_memory();
    bool ok = true;
    unsigned long serial = 0;
    for (unsigned z = 0; z < grid_dim.z && ok; ++z)
        for (unsigned y = 0; y < grid_dim.y && ok; ++y)
            for (unsigned x = 0; x < grid_dim.x && ok; ++x) {
                {
                    std::lock_guard<std::mutex> lock(b.mutex);   // the last thread unlocked
                    if (serial > 0) memset(b.shared, 0xff, used_shared_bytes());
                    b.reset(b.size, {x, y, z});
                    b.serial = ++serial;
                }
                for (sem_t& s : start) sem_post(&s);
                ok = finish_block(b);
            }
    finished = true;
    for (sem_t& s : start) sem_post(&s);
    for (auto& thread : threads) thread.join();
    for (sem_t& s : start) sem_destroy(&s);
    free(b.shared);
    if (!ok) fprintf(stderr, "sched-emu: %s\n", b.error.c_str());
    return ok;
}
#endif
}  // namespace

// the offset of a __shared__ variable at its first use: the first thread there claims the
// slot (-1 -> -2) and places the variable; the others wait for the offset. Relaxed: the offset
// is a number, and ThreadSanitizer must see no order between threads through it
long assign_shared(SharedSlot& slot, size_t size, size_t align, int line) {
    long expected = -1;
    if (!__atomic_compare_exchange_n(&slot.offset, &expected, -2L, false, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED)) {
        long offset;
        while ((offset = __atomic_load_n(&slot.offset, __ATOMIC_RELAXED)) < 0) {
            if (current_block->failed.load(std::memory_order_relaxed)) throw Aborted();
            std::this_thread::yield();
        }
        return offset;
    }
    size_t start = static_used.fetch_add(size + align, std::memory_order_relaxed);
    size_t offset = (dynamic_bytes + start + align - 1) / align * align;
    if (offset + size > shared_capacity())
        kernel_error(line, "the kernel's __shared__ variables need more than 256 KB");
    __atomic_store_n(&slot.offset, (long)offset, __ATOMIC_RELAXED);
    return (long)offset;
}

int run_grid(const char* kernel, const unsigned* grid, const unsigned* block_extent,
             unsigned long long dynamic_shared_bytes, void (*body)(void*), void* context) {
    grid_dim = dim3(grid[0], grid[1], grid[2]);
    block_dim = dim3(block_extent[0], block_extent[1], block_extent[2]);
    dynamic_bytes = (dynamic_shared_bytes + 63) / 64 * 64;
    Block b;
    b.kernel = kernel;
    b.size = block_dim.x * block_dim.y * block_dim.z;
    return run_blocks(b, body, context) ? 0 : 3;
}
}  // namespace sched_emu

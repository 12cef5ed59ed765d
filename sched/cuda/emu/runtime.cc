// The runtime of sched's CUDA emulation (target "cuda-emu"): runs an emulated kernel's grid,
// one block after another, each block as one host thread per CUDA thread; the block's
// barriers and warp collectives; the watchdog; and main(), which runs one launch described
// by a file (sched/cuda/emu/kernel.py writes it).
//
// Every wait of a thread (at __syncthreads() or a warp collective) is under the block's one
// mutex, which also counts the threads waiting and the threads that have returned from the
// kernel. A group (the block at a barrier, the lanes of a collective) completes as soon as
// its last member arrives; so when every thread of a block waits or has returned, none can
// go on: a deadlock, reported at once with where each thread is. A block that runs longer
// than the watchdog's limit (SCHED_EMU_TIMEOUT seconds, argv[2]) is reported the same way.
// A failure prints "sched-emu: <message>" on stderr and exits with status 3.
#include "cuda_emu.h"

#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sched_emu {
thread_local uint3 thread_index, block_index;
dim3 block_dim, grid_dim;
unsigned char* dynamic_shared;

namespace {
// the section of every __shared__ variable; the anchor keeps it in the executable
__attribute__((section("sched_emu_shared"), used, aligned(16))) unsigned char anchor[16];
}  // namespace
}  // namespace sched_emu

extern "C" unsigned char __start_sched_emu_shared[];
extern "C" unsigned char __stop_sched_emu_shared[];
extern "C" int sched_emu_entry(void** params, const unsigned* grid, const unsigned* block,
                               unsigned long long dynamic_shared_bytes);

namespace sched_emu {
namespace {
using Clock = std::chrono::steady_clock;

struct Aborted {};    // thrown in a thread of a failed block: unwinds its kernel

enum State : int { RUNNING = 0, RETURNED = -1 };    // else waiting: the line number

struct Lane {                       // a thread's part in warp collectives
    bool arrived = false;
    unsigned mask = 0;
    int line = 0;
    uint64_t value = 0;
    unsigned long generation = 0;   // completed collectives
    unsigned group = 0;
    uint64_t seen[32] = {};         // the values of the lanes at the last one
};

struct Block {
    const char* kernel;
    unsigned size;
    uint3 index;
    std::mutex mutex;
    std::condition_variable barrier_done, warp_done, block_done;
    unsigned arrived = 0, waiting = 0, returned = 0;
    int barrier_line = 0, barrier_sum = 0, barrier_result = 0;
    unsigned long barrier_generation = 0;
    std::vector<int> state;               // per thread: RUNNING, RETURNED or a line
    std::vector<const char*> waits_for;   // per thread: what it waits at
    std::vector<Lane> lanes;
    bool failed = false;
    std::string error;
};

Block* block;                             // the block running now
thread_local unsigned linear_id;          // this thread's index in the block
double timeout_seconds = 60.0;

void fail(Block& b, const std::string& message) {
    if (b.failed) return;
    b.failed = true;
    b.error = message;
    b.barrier_done.notify_all();
    b.warp_done.notify_all();
    b.block_done.notify_all();
}

std::string block_name(const Block& b) {
    return "block (" + std::to_string(b.index.x) + ", " + std::to_string(b.index.y) + ", " +
           std::to_string(b.index.z) + ") of kernel '" + b.kernel + "'";
}

std::string thread_range(unsigned first, unsigned last) {
    return first == last ? "thread " + std::to_string(first)
                         : "threads " + std::to_string(first) + "-" + std::to_string(last);
}

// where each thread of the block is, as runs of threads (linear ids) in the same place
std::string where_threads_are(const Block& b) {
    std::string text;
    unsigned first = 0;
    for (unsigned t = 1; t <= b.size; ++t) {
        if (t < b.size && b.state[t] == b.state[first] &&
            (b.state[t] <= 0 || b.waits_for[t] == b.waits_for[first]))
            continue;
        text += "\n  " + thread_range(first, t - 1);
        int s = b.state[first];
        if (s == RETURNED)
            text += " returned from the kernel";
        else if (s == RUNNING)
            text += " still running (neither waiting nor returned: an endless loop?)";
        else
            text += " wait at " + std::string(b.waits_for[first]) + " on line " +
                    std::to_string(s);
        first = t;
    }
    return text;
}

void check_deadlock(Block& b) {
    if (b.waiting > 0 && b.waiting + b.returned == b.size)
        fail(b, "deadlock in " + block_name(b) + ": every thread waits or has returned, so "
                "no barrier can complete (a __syncthreads() or warp collective that not every "
                "thread reaches):" + where_threads_are(b));
}

// wait (holding `lock`) until `done` (see release); throws Aborted when the block fails
template <typename Done>
void wait(Block& b, std::unique_lock<std::mutex>& lock, std::condition_variable& signal,
          int line, const char* what, Done done) {
    b.state[linear_id] = line;
    b.waits_for[linear_id] = what;
    ++b.waiting;
    check_deadlock(b);
    while (!done() && !b.failed) signal.wait(lock);
    if (!done()) throw Aborted();
}

// thread `t` goes on: the group it waited for completed (by the thread that arrived last,
// before `t` wakes up, so that it no longer counts as waiting in check_deadlock)
void release(Block& b, unsigned t) {
    if (b.state[t] > 0) {
        b.state[t] = RUNNING;
        --b.waiting;
    }
}

std::unique_lock<std::mutex> enter(Block& b) {
    std::unique_lock<std::mutex> lock(b.mutex);
    if (b.failed) throw Aborted();
    return lock;
}

// the barrier; `how` >= 0 also reduces the threads' predicates (count, and, or)
int barrier(int line, int predicate, int how) {
    Block& b = *block;
    auto lock = enter(b);
    if (b.arrived > 0 && b.barrier_line != line) {
        fail(b, "divergent barriers in " + block_name(b) + ": thread " +
                std::to_string(linear_id) + " reached __syncthreads() on line " +
                std::to_string(line) + " while others wait at the one on line " +
                std::to_string(b.barrier_line) + " (every thread of a block must reach the "
                "same barrier):" + where_threads_are(b));
        throw Aborted();
    }
    if (b.arrived == 0) b.barrier_sum = how == 1 ? 1 : 0;
    b.barrier_line = line;
    if (how == 0) b.barrier_sum += predicate != 0;
    if (how == 1) b.barrier_sum &= predicate != 0;
    if (how == 2) b.barrier_sum |= predicate != 0;
    if (++b.arrived == b.size) {
        b.arrived = 0;
        for (unsigned t = 0; t < b.size; ++t) release(b, t);
        b.barrier_result = b.barrier_sum;
        ++b.barrier_generation;
        b.barrier_done.notify_all();
        return b.barrier_result;
    }
    unsigned long generation = b.barrier_generation;
    wait(b, lock, b.barrier_done, line, "__syncthreads()",
         [&] { return b.barrier_generation != generation; });
    return b.barrier_result;
}
}  // namespace

void syncthreads(int line) { barrier(line, 0, -1); }

int syncthreads_reduce(int line, int predicate, int how) { return barrier(line, predicate, how); }

unsigned lane_id() { return linear_id % 32; }

unsigned active_lanes() {
    unsigned base = linear_id - linear_id % 32, count = block->size - base;
    return count >= 32 ? 0xffffffffu : (1u << count) - 1;
}

const uint64_t* warp_collective(unsigned mask, uint64_t value, int line, const char* what,
                                unsigned* group_out) {
    Block& b = *block;
    auto lock = enter(b);
    unsigned lane = linear_id % 32, base = linear_id - lane;
    unsigned group = mask & active_lanes();
    char text[200];
    if (!(group >> lane & 1u)) {
        snprintf(text, sizeof text, "%s on line %d: lane %u of warp %u calls it with the mask "
                 "0x%08x, which leaves the lane out", what, line, lane, linear_id / 32, mask);
        fail(b, std::string(text) + " in " + block_name(b));
        throw Aborted();
    }
    Lane& me = b.lanes[linear_id];
    me.arrived = true;
    me.mask = mask;
    me.line = line;
    me.value = value;
    b.waits_for[linear_id] = what;
    bool complete = true;
    for (unsigned l = 0; l < 32; ++l) {
        if (!(group >> l & 1u)) continue;
        const Lane& other = b.lanes[base + l];
        if (!other.arrived) {
            complete = false;
        } else if (other.mask != mask || other.line != line) {
            snprintf(text, sizeof text, "lanes %u and %u of warp %u disagree: one calls %s on "
                     "line %d with mask 0x%08x, the other %s on line %d with mask 0x%08x",
                     lane, l, linear_id / 32, what, line, mask, b.waits_for[base + l],
                     other.line, other.mask);
            fail(b, std::string(text) + " in " + block_name(b));
            throw Aborted();
        }
    }
    if (complete) {
        for (unsigned l = 0; l < 32; ++l) {
            if (!(group >> l & 1u)) continue;
            Lane& other = b.lanes[base + l];
            for (unsigned k = 0; k < 32; ++k)
                other.seen[k] = (group >> k & 1u) ? b.lanes[base + k].value : 0;
            other.group = group;
            other.arrived = false;
            ++other.generation;
            release(b, base + l);
        }
        b.warp_done.notify_all();
    } else {
        unsigned long generation = me.generation;
        wait(b, lock, b.warp_done, line, what, [&] { return me.generation != generation; });
    }
    *group_out = me.group;
    return me.seen;
}

void kernel_error(int line, const char* message) {
    Block& b = *block;
    std::unique_lock<std::mutex> lock(b.mutex);
    fail(b, std::string(message) + " (line " + std::to_string(line) + ", thread " +
                std::to_string(linear_id) + " of " + block_name(b) + ")");
    throw Aborted();
}

namespace {
// the launch's threads: one per CUDA thread of a block, each running its thread of every
// block in turn, started by its own semaphore (so that, for ThreadSanitizer, starting a block
// orders nothing between its threads: only their barriers do), reporting to `block_done`
struct Pool {
    std::vector<sem_t> start;
    bool finished = false;
};
Pool pool;

void name_thread() {    // ThreadSanitizer's reports and gdb show it: "t<threadIdx> b<blockIdx>"
    char name[16];
    snprintf(name, sizeof name, "t%u,%u,%u b%u,%u,%u", thread_index.x, thread_index.y,
             thread_index.z, block_index.x, block_index.y, block_index.z);
    pthread_setname_np(pthread_self(), name);
}

void run_thread(Block* b, unsigned id, void (*body)(void*), void* context) {
    linear_id = id;
    thread_index = {id % block_dim.x, id / block_dim.x % block_dim.y,
                    id / (block_dim.x * block_dim.y)};
    for (;;) {
        while (sem_wait(&pool.start[id]) != 0) {
        }
        if (pool.finished) return;
        block_index = b->index;
        name_thread();
        try {
            body(context);
        } catch (const Aborted&) {
        }
        std::unique_lock<std::mutex> lock(b->mutex);
        b->state[id] = RETURNED;
        ++b->returned;
        check_deadlock(*b);
        if (b->returned == b->size) b->block_done.notify_all();
    }
}

// start block `index` on the pool's threads (holding `lock`)
void start_block(Block& b, uint3 index, size_t dynamic_bytes) {
    memset(__start_sched_emu_shared, 0xff, __stop_sched_emu_shared - __start_sched_emu_shared);
    memset(dynamic_shared, 0xff, dynamic_bytes);
    b.index = index;
    b.arrived = b.waiting = b.returned = 0;
    b.state.assign(b.size, RUNNING);
    b.waits_for.assign(b.size, "");
    for (Lane& lane : b.lanes) lane.arrived = false;
    ++block_serial;
    for (sem_t& start : pool.start) sem_post(&start);
}

// wait (holding `lock`) for the running block; false (with the message in b.error) when it
// failed; exits the process when a failed block's thread does not return
bool finish_block(Block& b, std::unique_lock<std::mutex>& lock) {
    auto limit = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(timeout_seconds));
    while (b.returned < b.size && !b.failed) {
        if (b.block_done.wait_until(lock, limit) == std::cv_status::timeout &&
            b.returned < b.size && !b.failed) {
            char seconds[32];
            snprintf(seconds, sizeof seconds, "%g", timeout_seconds);
            fail(b, "watchdog: " + block_name(b) + " has run for " + seconds +
                    " s (SCHED_EMU_TIMEOUT) without finishing: a barrier that not every "
                    "thread reaches?" + where_threads_are(b));
        }
    }
    if (!b.failed) return true;
    auto grace = Clock::now() + std::chrono::seconds(2);   // the waiting threads unwind
    while (b.returned < b.size)
        if (b.block_done.wait_until(lock, grace) == std::cv_status::timeout) {
            fprintf(stderr, "sched-emu: %s\n", b.error.c_str());   // one never returns
            fflush(stderr);
            _exit(3);
        }
    return false;
}
}  // namespace

unsigned long block_serial;

int run_grid(const char* kernel, const unsigned* grid, const unsigned* block_extent,
             unsigned long long dynamic_shared_bytes, void (*body)(void*), void* context) {
    grid_dim = dim3(grid[0], grid[1], grid[2]);
    block_dim = dim3(block_extent[0], block_extent[1], block_extent[2]);
    std::vector<unsigned char> dynamic(dynamic_shared_bytes + 16);
    dynamic_shared = reinterpret_cast<unsigned char*>(
        (reinterpret_cast<uintptr_t>(dynamic.data()) + 15) & ~uintptr_t(15));
    Block b;
    b.kernel = kernel;
    b.size = block_dim.x * block_dim.y * block_dim.z;
    b.lanes.resize(b.size);
    block = &b;
    pool.start.resize(b.size);
    for (sem_t& start : pool.start) sem_init(&start, 0, 0);
    std::vector<std::thread> threads;
    threads.reserve(b.size);
    for (unsigned t = 0; t < b.size; ++t) threads.emplace_back(run_thread, &b, t, body, context);
    bool ok = true;
    {
        std::unique_lock<std::mutex> lock(b.mutex);
        for (unsigned z = 0; z < grid_dim.z && ok; ++z)
            for (unsigned y = 0; y < grid_dim.y && ok; ++y)
                for (unsigned x = 0; x < grid_dim.x && ok; ++x) {
                    start_block(b, {x, y, z}, dynamic_shared_bytes);
                    ok = finish_block(b, lock);
                }
        pool.finished = true;
        for (sem_t& start : pool.start) sem_post(&start);
    }
    for (auto& thread : threads) thread.join();
    for (sem_t& start : pool.start) sem_destroy(&start);
    if (!ok) {
        fprintf(stderr, "sched-emu: %s\n", b.error.c_str());
        return 3;
    }
    return 0;
}
}  // namespace sched_emu

// One launch, described by the file argv[1] (64-bit little-endian words):
//   0: magic "SCHEDEMU", 1-3: grid, 4-6: block, 7: dynamic shared bytes,
//   8: parameter count P, 9: buffer count B,
//   then per parameter: buffer index (or -1 for a scalar), 8 bytes of value,
//   then per buffer: offset in the file, size in bytes.
// The buffers are mapped shared: what the kernel writes lands in the file.
int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s launch-file [timeout-seconds]\n", argv[0]);
        return 2;
    }
    if (argc > 2) sched_emu::timeout_seconds = atof(argv[2]);
    int fd = open(argv[1], O_RDWR);
    struct stat info;
    if (fd < 0 || fstat(fd, &info) != 0) {
        perror("sched-emu: the launch file");
        return 2;
    }
    void* mapped = mmap(nullptr, info.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mapped == MAP_FAILED) {
        perror("sched-emu: mmap");
        return 2;
    }
    auto* words = static_cast<uint64_t*>(mapped);
    auto* bytes = static_cast<unsigned char*>(mapped);
    if (memcmp(words, "SCHEDEMU", 8) != 0) {
        fprintf(stderr, "sched-emu: %s is not a launch file\n", argv[1]);
        return 2;
    }
    unsigned grid[3] = {(unsigned)words[1], (unsigned)words[2], (unsigned)words[3]};
    unsigned block[3] = {(unsigned)words[4], (unsigned)words[5], (unsigned)words[6]};
    uint64_t count = words[8], buffers = words[9];
    uint64_t* slots = words + 10;
    uint64_t* extents = slots + 2 * count;
    std::vector<void*> params(count + 1);
    for (uint64_t p = 0; p < count; ++p) {
        int64_t buffer = (int64_t)slots[2 * p];
        if (buffer >= 0 && (uint64_t)buffer < buffers) {
            void* data = bytes + extents[2 * buffer];
            memcpy(&slots[2 * p + 1], &data, sizeof data);
        }
        params[p] = &slots[2 * p + 1];
    }
    int status = sched_emu_entry(params.data(), grid, block, words[7]);
    msync(mapped, info.st_size, MS_SYNC);
    munmap(mapped, info.st_size);
    close(fd);
    return status;
}

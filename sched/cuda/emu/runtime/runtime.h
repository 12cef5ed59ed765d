// The emulator's runtime, inside: a block's state (sync.cc), the launch (launch.cc), main()
// (main.cc). Not for kernels: they see cuda_emu.h only.
#ifndef SCHED_EMU_RUNTIME_H
#define SCHED_EMU_RUNTIME_H

#include "cuda_emu.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

namespace sched_emu {
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

// one thread block: everything below `mutex` is read and written holding it, except the
// atomics, which the launcher reads without it (see launch.cc)
struct Block {
    const char* kernel = "";
    unsigned size = 0;
    uint3 index = {0, 0, 0};
    unsigned char* shared = nullptr;      // its shared memory (the dynamic part first)
    unsigned long serial = 0;             // blocks started before it in the launch, plus 1
    std::mutex mutex;
    std::condition_variable barrier_done, warp_done, block_done;
    unsigned arrived = 0, waiting = 0, returned = 0;
    int barrier_line = 0, barrier_sum = 0, barrier_result = 0;
    unsigned long barrier_generation = 0;
    std::vector<int> state;               // per thread: RUNNING, RETURNED or a line
    std::vector<const char*> waits_for;   // per thread: what it waits at
    std::vector<Lane> lanes;
    std::string error;
    std::atomic<bool> failed{false};
    std::atomic<unsigned> finished{0};    // threads done with the block

    void reset(unsigned threads, uint3 at);
};

extern thread_local Block* current_block;  // the block this thread runs
extern thread_local unsigned linear_id;    // this thread's index in it
extern double timeout_seconds;             // the watchdog's limit

// holding b.mutex: the block fails with `message` (the first failure wins); its waiting
// threads wake up and unwind
void fail(Block& b, const std::string& message);
std::string block_name(const Block& b);
std::string where_threads_are(const Block& b);   // each thread's state, grouped
void thread_returned(Block& b);                  // this thread is done with `b`

// the launch: run every block of the grid; 0, or 3 with the message on stderr
int run_grid(const char* kernel, const unsigned* grid, const unsigned* block,
             unsigned long long dynamic_shared_bytes, void (*body)(void*), void* context);
}  // namespace sched_emu

#endif  // SCHED_EMU_RUNTIME_H

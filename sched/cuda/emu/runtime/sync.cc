// A block's synchronization in sched's CUDA emulation: __syncthreads() and the warp
// collectives (shuffles, votes, __syncwarp, wmma) as groups of host threads, and the
// deadlock check.
//
// Every wait of a thread is under the block's one mutex, which also counts the threads
// waiting and the threads that have returned from the kernel. A group (the block at a
// barrier, the lanes of a collective) completes as soon as its last member arrives; so when
// every thread of a block waits or has returned, none can go on: a deadlock, reported at once
// with where each thread is.
#include "runtime.h"

#include <cstdio>

namespace sched_emu {

thread_local Block* current_block;
thread_local unsigned linear_id;
double timeout_seconds = 60.0;

void Block::reset(unsigned threads, uint3 at) {
    size = threads;
    index = at;
    arrived = waiting = returned = 0;
    state.assign(size, RUNNING);
    waits_for.assign(size, "");
    lanes.resize(size);
    for (Lane& lane : lanes) lane.arrived = false;
    finished.store(0, std::memory_order_relaxed);
}

void fail(Block& b, const std::string& message) {
    if (b.failed.load(std::memory_order_relaxed)) return;
    b.error = message;
    b.failed.store(true, std::memory_order_relaxed);
    b.barrier_done.notify_all();
    b.warp_done.notify_all();
    b.block_done.notify_all();
}

std::string block_name(const Block& b) {
    return "block (" + std::to_string(b.index.x) + ", " + std::to_string(b.index.y) + ", " +
           std::to_string(b.index.z) + ") of kernel '" + b.kernel + "'";
}

namespace {
std::string thread_range(unsigned first, unsigned last) {
    return first == last ? "thread " + std::to_string(first)
                         : "threads " + std::to_string(first) + "-" + std::to_string(last);
}

}  // namespace

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

namespace {
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
    while (!done() && !b.failed.load(std::memory_order_relaxed)) signal.wait(lock);
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
    if (b.failed.load(std::memory_order_relaxed)) throw Aborted();
    return lock;
}

// the barrier; `how` >= 0 also reduces the threads' predicates (count, and, or)
int barrier(int line, int predicate, int how) {
    Block& b = *current_block;
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
    unsigned base = linear_id - linear_id % 32, count = current_block->size - base;
    return count >= 32 ? 0xffffffffu : (1u << count) - 1;
}

const uint64_t* warp_collective(unsigned mask, uint64_t value, int line, const char* what,
                                unsigned* group_out) {
    Block& b = *current_block;
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
    Block& b = *current_block;
    std::unique_lock<std::mutex> lock(b.mutex);
    fail(b, std::string(message) + " (line " + std::to_string(line) + ", thread " +
                std::to_string(linear_id) + " of " + block_name(b) + ")");
    throw Aborted();
}


void thread_returned(Block& b) {
    std::unique_lock<std::mutex> lock(b.mutex);
    b.state[linear_id] = RETURNED;
    ++b.returned;
    check_deadlock(b);
    if (b.returned == b.size) b.block_done.notify_all();
    b.finished.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace sched_emu

// Asynchronous copies to shared memory (cuda_pipeline.h's primitives, cp.async on sm_80+) with
// their reference semantics: a copy lands at some point between its issue and the
// __pipeline_wait_prior that covers its group. The emulator makes that point the latest one,
// the wait: so a thread that reads the destination without waiting (or a schedule that waits
// for the wrong group) reads what was there before, NaN in fresh shared memory.
// Copies are per thread, as in CUDA: a wait covers the calling thread's groups only.
// Part of sched's CUDA emulation header: included by cuda_emu.h (cuda_pipeline.h includes it).
#ifndef SCHED_EMU_PIPELINE_H
#define SCHED_EMU_PIPELINE_H

namespace sched_emu {
constexpr int MAX_PENDING_COPIES = 256;

struct PendingCopy {
    void* destination;
    const void* source;
    unsigned size, zero_fill, group;
};

struct CopyQueue {
    PendingCopy copies[MAX_PENDING_COPIES];
    int count = 0;
    unsigned committed = 0;    // groups committed so far; uncommitted copies join the next
    unsigned long block = 0;   // the block they belong to (a host thread runs one per block)
};

inline thread_local CopyQueue thread_copies;

// this thread's queue, emptied when it runs the thread of a new block (as a new CUDA thread
// starts with none pending)
inline CopyQueue& copy_queue() {
    CopyQueue& queue = thread_copies;
    if (queue.block != block_serial) queue.count = 0, queue.committed = 0,
                                     queue.block = block_serial;
    return queue;
}

inline void pipeline_memcpy_async(int line, void* destination, const void* source, size_t size,
                                  size_t zero_fill) {
    if (size != 4 && size != 8 && size != 16)
        kernel_error(line, "__pipeline_memcpy_async copies 4, 8 or 16 bytes");
    if (zero_fill > size) kernel_error(line, "__pipeline_memcpy_async: src_zfill > size");
    if (((uintptr_t)destination | (uintptr_t)source) % size)
        kernel_error(line, "__pipeline_memcpy_async: source and destination must be aligned "
                     "to the size of the copy");
    CopyQueue& queue = copy_queue();
    if (queue.count == MAX_PENDING_COPIES)
        kernel_error(line, "more than 256 asynchronous copies pending in one thread: wait "
                     "for some (__pipeline_wait_prior)");
    queue.copies[queue.count++] = {destination, source, (unsigned)size, (unsigned)zero_fill,
                                   queue.committed};
}

inline void pipeline_commit() { ++copy_queue().committed; }

// perform the copies of every committed group but the `newest` most recent ones
inline void pipeline_wait_prior(size_t newest) {
    CopyQueue& queue = copy_queue();
    unsigned limit = queue.committed > newest ? queue.committed - (unsigned)newest : 0;
    int kept = 0;
    for (int k = 0; k < queue.count; ++k) {
        const PendingCopy& copy = queue.copies[k];
        if (copy.group < limit) {
            memcpy(copy.destination, copy.source, copy.size - copy.zero_fill);
            memset((char*)copy.destination + (copy.size - copy.zero_fill), 0, copy.zero_fill);
        } else {
            queue.copies[kept++] = copy;
        }
    }
    queue.count = kept;
}

}  // namespace sched_emu

#define __pipeline_memcpy_async(destination, source, size, ...) \
    ::sched_emu::pipeline_memcpy_async(__LINE__, (destination), (source), (size), \
                                       ::sched_emu::zero_fill_or_0(__VA_ARGS__))
#define __pipeline_commit() ::sched_emu::pipeline_commit()
#define __pipeline_wait_prior(n) ::sched_emu::pipeline_wait_prior(n)

namespace sched_emu {
constexpr size_t zero_fill_or_0() { return 0; }
constexpr size_t zero_fill_or_0(size_t zero_fill) { return zero_fill; }
}  // namespace sched_emu

#endif  // SCHED_EMU_PIPELINE_H

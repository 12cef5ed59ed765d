"""The GPU estimate of one loop nest (global -> shared -> registers).

Per warp instruction, the 32-byte sectors its 32 threads touch (coalescing of threadIdx.x);
with the blocks' and threads' loops fixed, each thread's own loops give its load instructions,
with the register-tile reuse of `levels.py`. "shared" and "local" buffers are the staging
levels: local is registers; shared costs shared-memory wavefronts (bank conflicts from the
threads' addresses). Occupancy from threads, shared memory and registers per block; waves of
blocks over the SMs; latency hidden by resident warps times independent accumulators. A
software-pipelined loop around the nest (`stages` > 1) holds that many copies of each shared
tile, and keeps that many tiles' loads in flight per warp (more latency hidden).
"""

from __future__ import annotations

import math

from sched.autoscheduler.cost.levels import (
    by_buffer,
    combine,
    element_bytes,
    independent_chains,
    lines,
    loads_issued,
    union_box,
)
from sched.autoscheduler.cost.machine import Machine
from sched.autoscheduler.cost.nests import Access, LoopNest, interval
from sched.ir.nodes import is_thread_private


def loops_of_others(nests: list[LoopNest], nest: LoopNest) -> frozenset:
    """Loop variables of `nest` that other nests are under too (where a stage was computed)."""
    others = set()
    for other in nests:
        if other is not nest:
            others |= {lp.var for lp in other.loops}
    return frozenset(lp.var for lp in nest.loops) & others


def kernel_of(nest: LoopNest):
    """What identifies the kernel a nest runs in: its outermost blockIdx loop's variable (a
    nest with none is a kernel of its own: its identity)."""
    return next((lp.var for lp in nest.loops if _is_block(lp)), id(nest))


def _is_thread(loop) -> bool:
    return loop.kind == "thread_binding" and (loop.thread_tag or "").startswith("threadIdx")


def _is_block(loop) -> bool:
    return loop.kind == "thread_binding" and (loop.thread_tag or "").startswith("blockIdx")


def estimate_gpu_nest(nest: LoopNest, m: Machine, shared_with_others: frozenset) -> dict:
    """Seconds and bytes of one block's nest (the kernel launch is counted by the caller);
    `shared_with_others`: its loop variables other blocks are under (its own loops outside
    them are a stage's tile, which is what a shared buffer holds)."""
    loops = nest.loops
    blocks = math.prod(lp.extent for lp in loops if _is_block(lp))
    extents: dict[str, int] = {}          # one thread index per tag, however often bound
    for lp in loops:
        if _is_thread(lp):
            extents[lp.thread_tag] = max(extents.get(lp.thread_tag, 1), lp.extent)
    threads = math.prod(extents.values())
    if threads > 1024:
        return _infeasible(nest, "more than 1024 threads per block")
    own = [p for p, lp in enumerate(loops) if not (_is_block(lp) or _is_thread(lp))]
    flops = float(nest.iterations * nest.operations)
    warps_per_block = math.ceil(threads / 32)
    warp_loops = _warp_loops(nest)

    # registers and shared memory per block
    local = by_buffer(nest, ("local",))
    local_elements = sum(math.prod(union_box(nest, acc, own)) for acc in local.values())
    regs = 24 + local_elements + 2 * len(nest.accesses)
    shared = by_buffer(nest, ("shared",))
    staged = [p for p, lp in enumerate(loops) if _is_thread(lp)
              or (lp.var not in shared_with_others and not _is_block(lp))]
    stages = max((lp.stages for lp in loops), default=1)
    shared_bytes = stages * sum(math.prod(union_box(nest, acc, staged)) * element_bytes(acc[0])
                                for acc in shared.values())
    per_sm = [m.max_blocks_per_sm, m.max_threads_per_sm // max(threads, 1),
              m.registers_per_sm // max(1, threads * min(regs, 255))]
    if shared_bytes:
        per_sm.append(m.shared_bytes_per_sm // shared_bytes)
    blocks_per_sm = min(per_sm)
    if blocks_per_sm == 0:
        return _infeasible(nest, "a block needs more than an SM holds")
    resident = min(blocks_per_sm, math.ceil(blocks / m.cores))
    waves = math.ceil(blocks / (m.cores * resident))
    busy = blocks / (waves * m.cores * resident)       # SM slots used, over all waves
    active_warps = min(64, resident * warps_per_block)
    ilp = min(8.0, independent_chains(nest)) if nest.operations else 1.0
    hiding = min(1.0, active_warps * ilp * stages / 32.0)
    compute = flops / (m.peak_flops * busy * hiding) if flops else 0.0

    # memory: per warp instruction, sectors of global memory; shared-memory wavefronts
    global_bytes = shared_traffic = shared_cycles = 0.0
    dram = 0.0
    for storage, accesses in by_buffer(nest).items():
        scope = accesses[0].buffer.scope
        if is_thread_private(scope):          # registers ("local", tensor-core fragments)
            continue
        per_thread = sum(loads_issued(nest, {storage: accesses}, own, m.registers * 4 * 0.75))
        vector = _thread_vector(nest, accesses, own)
        instructions = per_thread / vector * warps_per_block * blocks
        element = element_bytes(accesses[0])
        offsets = [warp_offsets(nest, a, warp_loops) for a in accesses]
        if scope == "global":
            global_bytes += instructions * _sectors(offsets, element, vector, m.line_bytes) \
                * m.line_bytes
            whole = union_box(nest, accesses, range(len(loops)))
            dram += lines(whole, accesses[0].shape, element, m.line_bytes) * m.line_bytes
        else:
            wavefronts = _wavefronts(offsets, element, vector)
            shared_traffic += instructions * 32 * element * vector
            shared_cycles += instructions * wavefronts
    dram = min(max(dram, 1.0), global_bytes) if global_bytes > m.l2_bytes else dram
    overhead = sum(nest.trips(p + 1) for p in own
                   if loops[p].kind not in ("unrolled", "vectorized"))
    overhead_s = overhead * 2 / 32 / (4 * m.cores * m.clock_hz)
    parts = [compute, global_bytes / (m.l2_bytes_per_s * max(busy, 1 / m.cores)),
             dram / m.dram_bytes_per_s,
             shared_cycles / (m.cores * busy * m.clock_hz)]
    seconds = combine(parts) + overhead_s
    return {"name": nest.name, "seconds": seconds, "flops": flops,
            "bytes": {"global": global_bytes, "dram": dram, "shared": shared_traffic},
            "blocks": blocks, "threads": threads, "blocks_per_sm": blocks_per_sm,
            "occupancy": active_warps / 64.0, "shared_bytes_per_block": shared_bytes,
            "registers_per_thread": regs}


def _infeasible(nest: LoopNest, why: str) -> dict:
    return {"name": nest.name, "seconds": 1.0, "flops": float(nest.iterations * nest.operations),
            "bytes": {}, "infeasible": why}


def _warp_loops(nest: LoopNest) -> list[int]:
    """Positions of the threadIdx loops that index the 32 threads of a warp, x first (for a
    tag bound twice, the inner loop: the one the block's indices use)."""
    found, threads = [], 1
    for tag in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
        inner = [p for p, lp in enumerate(nest.loops) if lp.thread_tag == tag]
        if inner and threads < 32:
            found.append(inner[-1])
            threads *= nest.loops[inner[-1]].extent
    return found


def warp_offsets(nest: LoopNest, access: Access, warp_loops: list[int]) -> list[int] | None:
    """Row-major element offsets the first 32 threads of a block access (other loops at 0)."""
    extents = [nest.loops[p].extent for p in warp_loops]
    offsets = []
    for thread in range(min(32, math.prod(extents) if extents else 1)):
        ranges, rest = {}, thread
        for p, extent in zip(warp_loops, extents):
            ranges[nest.loops[p].var] = (rest % extent, rest % extent)
            rest //= extent
        offset, scale = 0, 1
        for index, dim in reversed(tuple(zip(access.indices, access.shape))):
            value = interval(index, ranges)
            if value is None:
                return None
            offset += value[0] * scale
            scale *= dim
        offsets.append(offset)
    return offsets


def _vector_position(nest: LoopNest, own: list[int]) -> list[int]:
    if own and nest.loops[own[-1]].kind == "vectorized":
        return [own[-1]]
    return []


def _thread_vector(nest: LoopNest, accesses: list[Access], own: list[int]) -> int:
    """Elements one thread moves per instruction (a float4 when the innermost loop is
    vectorized over contiguous elements)."""
    vector = _vector_position(nest, own)
    if not vector:
        return 1
    if all(nest.stride(a, vector[0]) in (0, 1) for a in accesses):
        return min(nest.loops[vector[0]].extent, 16 // element_bytes(accesses[0]))
    return 1


def _sectors(offsets: list, element: int, vector: int, sector: int) -> int:
    """Distinct `sector`-byte segments a warp instruction touches, `vector` elements per
    thread (a sector per element of every thread when the offsets are unknown)."""
    if any(o is None for o in offsets):
        return 32 * vector
    touched = set()
    for per_access in offsets:
        for offset in per_access:
            start = offset * element
            touched.update(range(start // sector, (start + vector * element - 1) // sector + 1))
    return max(1, len(touched) // max(1, len(offsets)))


def _wavefronts(offsets: list, element: int, vector: int) -> float:
    """Shared-memory passes one warp instruction takes: the most distinct 4-byte words any of
    the 32 banks must serve (a word read by many threads is broadcast)."""
    worst = 1
    for per_access in offsets:
        if per_access is None:
            return 8.0
        banks: dict[int, set] = {}
        for offset in per_access:
            for lane in range(vector):
                word = (offset + lane) * element // 4
                banks.setdefault(word % 32, set()).add(word)
        worst = max(worst, max(len(words) for words in banks.values()))
    return float(worst) * max(1, vector * element // 16)

"""The analytical cost model: bytes moved between memory levels, FLOPs and parallelism, with no
device and no training.

    model = MemoryMovementModel(target="c")          # or "cuda"; machine=Machine(...)
    scores = model.predict(workload, [sch.func for sch in candidates])   # 1 / seconds
    parts = model.estimate(workload, sch.func)       # bytes per level, flops, seconds

Each block is a loop nest (`nests.py`). For a level of its nest (the loops from some position
inward), the footprint of a buffer is the box of elements its accesses touch there, in cache
lines; the level runs `trips(level)` times. For a cache of capacity C, the outermost level
whose footprints fit in C is where the cache holds the data, and the bytes brought into the
cache are those of one level further out (adjacent iterations there reuse what fits):
`trips(L - 1) * footprint(L - 1)` summed over buffers. Rows a power-of-two stride apart share
a cache's sets: when they need more lines there than it has ways, they count as not fitting.
A written buffer counts twice (read for ownership, written back).

CPU (memory -> LLC -> L2 -> L1 -> registers; the TLB as a cache of pages): registers hold the
footprint of the trailing unrolled/vectorized loops (the register tile) when it fits the
register file; the loads issued are what the tile does not keep. Time is the largest of:
arithmetic at the vector width the innermost loop reaches (a `vectorized` loop whose accesses
are contiguous, or a contiguous serial loop gcc vectorizes by itself at half the rate), the
latency of a reduction chain (independent accumulators are the loops inside the reduction
loop; an accumulator in memory adds store forwarding), the loads, each cache's fill at the
bandwidth of the level below, TLB misses; divided by the cores the parallel loops keep busy;
plus a tenth of the other parts and loop overhead.

GPU (global -> shared -> registers): per warp instruction, the 32-byte sectors the 32 threads
touch (coalescing of threadIdx.x); blocks' and threads' loops fixed, each thread's own loops
give its load instructions with the register-tile reuse above; "shared" and "local" buffers
are the staging levels (local is registers; shared costs shared-memory bandwidth, with bank
conflicts from threadIdx.x's stride); occupancy from threads, shared memory and registers per
block; waves of blocks over the SMs.

A nest the analysis cannot follow gets a conservative estimate (every access from memory,
scalar arithmetic), never an exception.
"""

from __future__ import annotations

import math

import numpy as np

from sched.autoscheduler.cost.machine import Machine
from sched.autoscheduler.cost.nests import Access, LoopNest, interval, loop_nests
from sched.ir.dtype import bits
from sched.ir.nodes import PrimFunc

_OVERHEAD_CYCLES = 0.5     # per iteration of a loop that is neither unrolled nor vectorized


class MemoryMovementModel:
    """Scores = 1 / estimated seconds (higher is faster). Ignores measurements."""

    name = "memory_movement"

    def __init__(self, target: str = "c", machine: Machine | None = None) -> None:
        self.target = target
        self.machine = machine or Machine.for_target(target)

    def predict(self, workload, funcs: list[PrimFunc]) -> np.ndarray:
        return np.array([1.0 / self.estimate(workload, f)["seconds"] for f in funcs])

    def update(self, workload, funcs, results) -> None:
        """The analytical model does not learn."""

    def estimate(self, workload, func: PrimFunc) -> dict:
        """The parts of the estimate: seconds, flops, bytes per level (summed over blocks),
        and one dict per block ("nests")."""
        try:
            nests = loop_nests(func)
        except Exception as error:     # an IR the walk does not know: one conservative part
            return _conservative_function(workload, func, self.machine, error)
        parts = [self.estimate_nest(nest, _loops_of_others(nests, nest)) for nest in nests]
        total: dict = {"seconds": 0.0, "flops": 0.0, "bytes": {}, "nests": parts}
        for part in parts:
            total["seconds"] += part["seconds"]
            total["flops"] += part["flops"]
            for level, value in part["bytes"].items():
                total["bytes"][level] = total["bytes"].get(level, 0.0) + value
        total["seconds"] = max(total["seconds"], 1e-9)
        return total

    def estimate_nest(self, nest: LoopNest, shared_loops: frozenset = frozenset()) -> dict:
        """One block's estimate; `shared_loops`: its loop variables other blocks are under."""
        try:
            if self.machine.is_gpu:
                return _gpu_nest(nest, self.machine, shared_loops)
            return _cpu_nest(nest, self.machine)
        except Exception as error:     # an analysis gap must not stop a search
            part = _conservative(nest, self.machine)
            part["note"] = f"{type(error).__name__}: {error}"
            return part


# -- helpers shared by both targets ------------------------------------------------------------


def element_bytes(access: Access) -> int:
    return max(1, bits(access.buffer.dtype) // 8)


def by_buffer(nest: LoopNest, scopes=None) -> dict[str, list[Access]]:
    """The nest's accesses grouped by storage (optionally only buffers in `scopes`)."""
    groups: dict[str, list[Access]] = {}
    for access in nest.accesses:
        if scopes is None or access.buffer.scope in scopes:
            groups.setdefault(access.buffer.storage_name, []).append(access)
    return groups


def union_box(nest: LoopNest, accesses: list[Access], varying) -> tuple[int, ...]:
    boxes = [nest.box(a, varying) for a in accesses]
    return tuple(max(sizes) for sizes in zip(*boxes))


def lines(box: tuple[int, ...], shape: tuple[int, ...], element: int, line: int,
          spans: tuple[int, ...] | None = None) -> int:
    """Cache lines (or sectors) a box of a row-major buffer covers: the trailing dimensions the
    box covers whole are one contiguous run; an innermost index that steps a line or more
    apart (`spans` wider than the box) takes a line per element."""
    if not box:
        return 1
    if spans is not None and box[-1] > 1 and spans[-1] > box[-1]:
        step = (spans[-1] - 1) // (box[-1] - 1)
        if step * element >= line:
            return math.prod(box)
    run, k = box[-1], len(box) - 1
    while k > 0 and box[k] == shape[k]:
        k -= 1
        run *= box[k]
    rest = math.prod(box[:k]) if k > 0 else 1
    return rest * max(1, math.ceil(run * element / line))


def union_spans(nest: LoopNest, accesses: list[Access], varying) -> tuple[int, ...]:
    return tuple(max(sizes) for sizes in zip(*(nest.spans(a, varying) for a in accesses)))


def footprint_bytes(nest: LoopNest, groups, varying, line: int,
                    sets: int = 0, ways: int = 0) -> dict[str, float]:
    """Bytes of each buffer's box in whole lines; a written buffer counts twice (read for
    ownership, then written back). With `sets` and `ways` (checking whether the box fits a
    cache), boxes whose rows map to few sets (rows a power-of-two stride apart) and together
    need more lines in those sets than it has ways count as the share of the cache they can
    use: they evict each other."""
    found, crowded, pressure = {}, {}, 0.0
    for storage, accesses in groups.items():
        access = accesses[0]
        element = element_bytes(access)
        box = union_box(nest, accesses, varying)
        spans = union_spans(nest, accesses, varying)
        count = lines(box, access.shape, element, line, spans)
        written = 2 if any(a.is_write for a in accesses) else 1
        found[storage] = written * count * line
        if sets and count > 1:
            reach = _sets_reached(box, spans, access.shape, element, line, sets)
            if reach < sets:
                crowded[storage] = reach
                pressure += count / reach
    if pressure > ways:
        for storage, reach in crowded.items():
            found[storage] *= sets / reach
    return found


def _sets_reached(box, spans, shape, element: int, line: int, sets: int) -> int:
    """How many sets of a cache the box's lines can fall in: rows (the dimension outside the
    contiguous run) a multiple of the cache's way size apart land in one set."""
    k = len(box) - 1
    while k > 0 and box[k] == shape[k]:
        k -= 1
    if k == 0:
        return sets                        # one contiguous run
    rows, span = box[k - 1], spans[k - 1]
    step = max(1, (span - 1) // (rows - 1)) if rows > 1 else 1
    stride = step * math.prod(shape[k:]) * element
    if rows <= 1 or stride % line:
        return sets
    row_lines = max(1, math.ceil(math.prod(box[k:]) * element / line))
    return min(sets, (sets // math.gcd(stride // line, sets)) * row_lines)


def fill_bytes(nest: LoopNest, groups, positions: list[int], capacity: float,
               line: int, ways: int = 0) -> float:
    """Bytes brought into a level of `capacity`: with the loops at `positions` (the nest's
    loops that run one after another here, outermost first), the outermost level whose
    footprint fits is L, and what comes in is the footprint of level L - 1 each time it runs."""
    sets = int(capacity // (ways * line)) if ways else 0
    levels = len(positions)
    fits = levels
    for level in range(levels, -1, -1):
        total = sum(footprint_bytes(nest, groups, positions[level:], line, sets, ways).values())
        if total > capacity:
            break
        fits = level
    if fits == 0:
        return float(sum(footprint_bytes(nest, groups, positions, line).values()))
    outer = fits - 1
    trips = math.prod(nest.loops[p].extent for p in positions[:outer])
    return float(trips * sum(footprint_bytes(nest, groups, positions[outer:], line).values()))


def register_tile(nest: LoopNest, positions: list[int]) -> int:
    """Index in `positions` where the trailing run of unrolled and vectorized loops starts."""
    start = len(positions)
    while start > 0 and nest.loops[positions[start - 1]].kind in ("unrolled", "vectorized"):
        start -= 1
    return start


def loads_issued(nest: LoopNest, groups, positions: list[int], register_bytes: float) -> float:
    """Elements loaded into registers: the register tile keeps what fits (the level of the
    tile or inside it), the loop just outside it reuses what does not move (an accumulator
    over a reduction loop stays in a register)."""
    start = register_tile(nest, positions)
    fits = len(positions)
    for level in range(len(positions), start - 1, -1):
        elements = sum(math.prod(union_box(nest, accesses, positions[level:]))
                       * element_bytes(accesses[0]) for accesses in groups.values())
        if elements > register_bytes:
            break
        fits = level
    outer = max(0, fits - 1)
    trips = math.prod(nest.loops[p].extent for p in positions[:outer])
    return float(trips * sum(math.prod(union_box(nest, accesses, positions[outer:]))
                             for accesses in groups.values()))


def independent_chains(nest: LoopNest) -> int:
    """Independent updates per step of the innermost reduction loop (1: one chain)."""
    if nest.reduce_depth is None:
        return 1 << 20
    return math.prod(loop.extent for loop in nest.loops[nest.reduce_depth + 1:])


def combine(parts: list[float]) -> float:
    """The bottleneck, plus a tenth of the rest (they overlap, not perfectly)."""
    top = max(parts)
    return top + 0.1 * (sum(parts) - top)


def _conservative(nest: LoopNest, machine: Machine) -> dict:
    moved = float(nest.iterations * sum(element_bytes(a) for a in nest.accesses))
    flops = float(nest.iterations * nest.operations)
    seconds = moved / machine.dram_bytes_per_s + flops / (machine.clock_hz * max(
        1, machine.cores if machine.is_gpu else 1))
    return {"name": nest.name, "seconds": max(seconds, 1e-9), "flops": flops,
            "bytes": {"dram": moved}, "conservative": True}


def _conservative_function(workload, func: PrimFunc, machine: Machine, error) -> dict:
    """Every buffer parameter moved from memory once per FLOP: far slower than any schedule
    the model could read."""
    flops = float(workload.flops()) if hasattr(workload, "flops") else 1.0
    moved = max(1.0, flops) * 4.0
    seconds = moved / machine.dram_bytes_per_s + flops / machine.clock_hz
    part = {"name": func.name, "seconds": seconds, "flops": flops, "bytes": {"dram": moved},
            "conservative": True, "note": f"{type(error).__name__}: {error}"}
    return {"seconds": seconds, "flops": flops, "bytes": dict(part["bytes"]), "nests": [part]}


# -- CPU ---------------------------------------------------------------------------------------


def _cpu_nest(nest: LoopNest, m: Machine) -> dict:
    n = len(nest.loops)
    positions = list(range(n))
    groups = by_buffer(nest)
    element = max((element_bytes(a) for a in nest.accesses), default=4)
    lanes_max = max(1, m.vector_bytes // element)
    parallel = math.prod(lp.extent for lp in nest.loops if lp.kind == "parallel")
    speedup = parallel / math.ceil(parallel / m.cores) if parallel > 1 else 1.0
    lanes, contiguous = _lanes(nest, lanes_max)

    flops = float(nest.iterations * nest.operations)
    compute = flops / (2.0 * m.fma_units * lanes)
    latency = 0.0
    if nest.reduce_depth is not None and nest.operations:
        chains = max(1.0, independent_chains(nest) / lanes)
        step = m.fma_latency + (0 if _accumulates_in_registers(nest) else m.store_forward)
        latency = nest.iterations / lanes * step / min(chains, step * m.fma_units)
    loaded = loads_issued(nest, groups, positions, m.registers * m.vector_bytes * 0.75)
    load_cycles = loaded / (lanes if contiguous else 1) / m.loads_per_cycle
    l1 = fill_bytes(nest, groups, positions, m.l1_bytes, m.line_bytes, m.ways)
    l2 = fill_bytes(nest, groups, positions, m.l2_bytes, m.line_bytes, m.ways)
    llc = fill_bytes(nest, groups, positions, m.llc_bytes * 0.75, m.line_bytes)
    pages = fill_bytes(nest, groups, positions, m.tlb_entries * m.page_bytes, m.page_bytes)
    tlb = pages / m.page_bytes * m.tlb_miss_cycles
    overhead = sum(nest.trips(p + 1) for p, lp in enumerate(nest.loops)
                   if lp.kind not in ("unrolled", "vectorized")) * _OVERHEAD_CYCLES
    core = [compute, latency, load_cycles, l1 / m.l2_bytes_per_cycle,
            l2 / m.llc_bytes_per_cycle, tlb]
    seconds = combine([max(core) / speedup / m.clock_hz * 1.0, llc / m.dram_bytes_per_s]) \
        + 0.1 * (sum(core) - max(core)) / speedup / m.clock_hz \
        + overhead / speedup / m.clock_hz
    return {"name": nest.name, "seconds": max(seconds, 1e-9), "flops": flops,
            "bytes": {"registers": loaded * element, "l1": l1, "l2": l2, "llc": llc},
            "lanes": lanes, "parallel": speedup,
            "cycles": {"compute": compute, "latency": latency, "loads": load_cycles,
                       "l1_fill": l1 / m.l2_bytes_per_cycle,
                       "l2_fill": l2 / m.llc_bytes_per_cycle, "tlb": tlb,
                       "overhead": overhead}}


def _accumulates_in_registers(nest: LoopNest) -> bool:
    """Whether a reduction's accumulators can stay in registers: a "local" buffer (cache_write)
    indexed by unrolled or vectorized loops only inside the reduction loop."""
    written = [a for a in nest.accesses if a.is_write]
    inside = nest.loops[nest.reduce_depth + 1:]
    return bool(written) and all(a.buffer.scope == "local" for a in written) \
        and all(lp.kind in ("unrolled", "vectorized") for lp in inside)


def _lanes(nest: LoopNest, lanes_max: int) -> tuple[float, bool]:
    """(vector lanes the arithmetic reaches, whether the innermost loop's accesses are
    contiguous)."""
    if not nest.loops:
        return 1.0, False
    position = len(nest.loops) - 1
    inner = nest.loops[position]
    strides = [nest.stride(a, position) for a in nest.accesses]
    contiguous = all(s in (0, 1) for s in strides)
    if inner.kind == "vectorized":
        width = min(inner.extent, lanes_max)
        return (float(width) if contiguous else 1.0), contiguous
    if (inner.kind == "serial" and contiguous and nest.reduce_depth != position
            and inner.extent >= lanes_max):
        return lanes_max / 2.0, contiguous      # gcc -O3 vectorizes it by itself
    return 1.0, False


# -- GPU ---------------------------------------------------------------------------------------


def _loops_of_others(nests: list[LoopNest], nest: LoopNest) -> frozenset:
    """Loop variables of `nest` that other nests are under too (where a stage was computed)."""
    others = set()
    for other in nests:
        if other is not nest:
            others |= {lp.var for lp in other.loops}
    return frozenset(lp.var for lp in nest.loops) & others


def _is_thread(loop) -> bool:
    return loop.kind == "thread_binding" and (loop.thread_tag or "").startswith("threadIdx")


def _is_block(loop) -> bool:
    return loop.kind == "thread_binding" and (loop.thread_tag or "").startswith("blockIdx")


def _gpu_nest(nest: LoopNest, m: Machine, shared_with_others: set) -> dict:
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
    shared_bytes = sum(math.prod(union_box(nest, acc, staged)) * element_bytes(acc[0])
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
    hiding = min(1.0, active_warps * ilp / 32.0)
    compute = flops / (m.peak_flops * busy * hiding) if flops else 0.0

    # memory: per warp instruction, sectors of global memory; shared-memory wavefronts
    global_bytes = shared_traffic = shared_cycles = 0.0
    dram = 0.0
    for storage, accesses in by_buffer(nest).items():
        scope = accesses[0].buffer.scope
        if scope == "local":
            continue
        per_thread = loads_issued(nest, {storage: accesses}, own, m.registers * 4 * 0.75)
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
    seconds = combine(parts) + overhead_s + m.launch_seconds
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

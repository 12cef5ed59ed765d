"""The CPU estimate of one loop nest (memory -> LLC -> L2 -> L1 -> registers; the TLB as a
cache of pages).

Time is the largest of: arithmetic at the vector width the innermost loop reaches (a
`vectorized` loop whose accesses are contiguous, in the vectors the C target emits for its
extent (sched/c/vectorize.py: 14 lanes are 8 and 6 scalar on AVX2, all scalar on AVX-512), or
a contiguous serial loop gcc vectorizes by itself at half the rate; a select's condition
(padding) costs its operations per vector where it depends on the vector loop, a mask and a
masked load, and one operation where it does not), the latency of a reduction chain
(independent accumulators are the loops inside the reduction loop; an accumulator in memory
adds store forwarding), the loads, each cache's fill at the bandwidth of the level below, TLB
misses; divided by the cores the parallel loops keep busy; plus a tenth of the other parts,
and loop overhead.
"""

from __future__ import annotations

import math

from sched.autoscheduler.cost.levels import (
    by_buffer,
    combine,
    element_bytes,
    fill_bytes,
    independent_chains,
    loads_issued,
    register_level,
)
from sched.autoscheduler.cost.machine import Machine
from sched.autoscheduler.cost.nests import LoopNest, uses
from sched.c.vectorize import vector_width
from sched.ir.nodes import is_thread_private

_OVERHEAD_CYCLES = 0.5     # per iteration of a loop that is neither unrolled nor vectorized
MASKED_LOAD = 2            # operations of a masked load and its select, per vector


def estimate_cpu_nest(nest: LoopNest, m: Machine) -> dict:
    n = len(nest.loops)
    positions = list(range(n))
    groups = by_buffer(nest)
    element = max((element_bytes(a) for a in nest.accesses), default=4)
    parallel = math.prod(lp.extent for lp in nest.loops if lp.kind == "parallel")
    speedup = parallel / math.ceil(parallel / m.cores) if parallel > 1 else 1.0
    lanes, contiguous, position = _lanes(nest, element, m.vector_bytes)
    register_bytes = m.registers * m.vector_bytes

    flops = float(nest.iterations * nest.operations)
    compute = nest.iterations * _vector_operations(nest, position, lanes) \
        / (2.0 * m.fma_units * lanes)
    latency = 0.0
    if nest.reduce_depth is not None and nest.operations:
        chains = max(1.0, independent_chains(nest) / lanes)
        in_registers = _accumulates_in_registers(nest, groups, register_bytes)
        step = m.fma_latency + (0 if in_registers else m.store_forward)
        latency = nest.iterations / lanes * step / min(chains, step * m.fma_units)
    loaded, stored = loads_issued(nest, groups, positions, register_bytes)
    width = lanes if contiguous else 1
    load_cycles = loaded / width / m.loads_per_cycle + stored / width / m.stores_per_cycle
    l1 = fill_bytes(nest, groups, positions, m.l1_bytes, m.line_bytes, m.ways)
    l2 = fill_bytes(nest, groups, positions, m.l2_bytes, m.line_bytes, m.ways)
    llc = fill_bytes(nest, groups, positions, m.llc_bytes * 0.75, m.line_bytes)
    pages = fill_bytes(nest, groups, positions, m.tlb_entries * m.page_bytes, m.page_bytes)
    tlb = pages / m.page_bytes * m.tlb_miss_cycles
    overhead = sum(nest.trips(p + 1) for p, lp in enumerate(nest.loops)
                   if lp.kind not in ("unrolled", "vectorized")) * _OVERHEAD_CYCLES
    if nest.has_init:            # `if (k == 0) C = 0` before every update (no decompose)
        overhead += nest.iterations / lanes
    core = [compute, latency, load_cycles, l1 / m.l2_bytes_per_cycle,
            l2 / m.llc_bytes_per_cycle, tlb]
    per_core = 1.0 / (speedup * m.clock_hz)         # cycles of one core -> seconds
    seconds = combine([max(core) * per_core, llc / m.dram_bytes_per_s]) \
        + 0.1 * (sum(core) - max(core)) * per_core + overhead * per_core
    return {"name": nest.name, "seconds": max(seconds, 1e-9), "flops": flops,
            "bytes": {"registers": loaded * element, "l1": l1, "l2": l2, "llc": llc},
            "lanes": lanes, "parallel": speedup,
            "cycles": {"compute": compute, "latency": latency, "loads": load_cycles,
                       "l1_fill": l1 / m.l2_bytes_per_cycle,
                       "l2_fill": l2 / m.llc_bytes_per_cycle, "tlb": tlb,
                       "overhead": overhead}}


def _accumulates_in_registers(nest: LoopNest, groups, register_bytes: float) -> bool:
    """Whether a reduction's accumulators can stay in registers: a "local" buffer (cache_write)
    indexed by unrolled or vectorized loops only inside the reduction loop, whose tile there
    fits the register file."""
    written = [a for a in nest.accesses if a.is_write]
    inside = list(range(nest.reduce_depth + 1, len(nest.loops)))
    return bool(written) and all(is_thread_private(a.buffer.scope) for a in written) \
        and all(nest.loops[p].kind in ("unrolled", "vectorized") for p in inside) \
        and register_level(nest, groups, inside, register_bytes) == 0


def _lanes(nest: LoopNest, element: int, vector_bytes: int) -> tuple[float, bool, int | None]:
    """(vector lanes the arithmetic reaches, whether the accesses are contiguous along the
    loop that gets them, that loop's position or None): the innermost loop that stays a loop
    after unrolling (unrolled loops and loops of one iteration are straight-line code),
    vectorized by the schedule (in the C target's vectors, `vector_width`: a remainder runs
    scalar), or by gcc when serial, contiguous and not carrying the reduction."""
    lanes_max = max(1, vector_bytes // element)
    loops = [p for p, lp in enumerate(nest.loops)
             if lp.kind != "unrolled" and lp.extent > 1]
    if not loops:
        return 1.0, False, None
    position = loops[-1]
    inner = nest.loops[position]
    contiguous = all(nest.stride(a, position) in (0, 1) for a in nest.accesses)
    if inner.kind == "vectorized":
        plan = vector_width(inner.extent, element, vector_bytes) if contiguous else None
        if plan is None:
            return 1.0, contiguous, position
        steps = plan.vector_extent // plan.lanes + inner.extent - plan.vector_extent
        return inner.extent / steps, contiguous, position
    if (inner.kind == "serial" and contiguous and nest.reduce_depth != position
            and inner.extent >= lanes_max):
        return lanes_max / 2.0, contiguous, position     # gcc -O3 vectorizes it by itself
    return 1.0, False, position


def _vector_operations(nest: LoopNest, position: int | None, lanes: float) -> float:
    """Operations per iteration as vector code runs them: a select's condition that does not
    depend on the vector loop is one scalar test per vector (gcc hoists and shares the rest
    across the unrolled tile: a conv2d vectorized along its output channels with the
    padding inlined ran in 1.0 ms where its 17 operations per vector would take 7), one that
    does is computed per vector, with a mask and a masked load (MASKED_LOAD more)."""
    operations = float(nest.operations)
    if lanes <= 1 or position is None:
        return operations
    var = nest.loops[position].var
    for condition, count in nest.guards:
        operations += MASKED_LOAD if uses(condition, var) else 1 - count
    return max(operations, 0.0)

"""The CPU estimate of one loop nest (memory -> LLC -> L2 -> L1 -> registers; the TLB as a
cache of pages).

Time is the largest of: arithmetic at the vector width the innermost loop reaches (a
`vectorized` loop whose accesses are contiguous, or a contiguous serial loop gcc vectorizes by
itself at half the rate), the latency of a reduction chain (independent accumulators are the
loops inside the reduction loop; an accumulator in memory adds store forwarding), the loads,
each cache's fill at the bandwidth of the level below, TLB misses; divided by the cores the
parallel loops keep busy; plus a tenth of the other parts, and loop overhead.
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
from sched.autoscheduler.cost.nests import LoopNest
from sched.ir.nodes import is_thread_private

_OVERHEAD_CYCLES = 0.5     # per iteration of a loop that is neither unrolled nor vectorized


def estimate_cpu_nest(nest: LoopNest, m: Machine) -> dict:
    n = len(nest.loops)
    positions = list(range(n))
    groups = by_buffer(nest)
    element = max((element_bytes(a) for a in nest.accesses), default=4)
    lanes_max = max(1, m.vector_bytes // element)
    parallel = math.prod(lp.extent for lp in nest.loops if lp.kind == "parallel")
    speedup = parallel / math.ceil(parallel / m.cores) if parallel > 1 else 1.0
    lanes, contiguous = _lanes(nest, lanes_max)
    register_bytes = m.registers * m.vector_bytes

    flops = float(nest.iterations * nest.operations)
    compute = flops / (2.0 * m.fma_units * lanes)
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


def _lanes(nest: LoopNest, lanes_max: int) -> tuple[float, bool]:
    """(vector lanes the arithmetic reaches, whether the accesses are contiguous along the
    loop that gets them): the innermost loop that stays a loop after unrolling (unrolled loops
    and loops of one iteration are straight-line code), vectorized by the schedule, or by gcc
    when serial, contiguous and not carrying the reduction."""
    loops = [p for p, lp in enumerate(nest.loops)
             if lp.kind != "unrolled" and lp.extent > 1]
    if not loops:
        return 1.0, False
    position = loops[-1]
    inner = nest.loops[position]
    contiguous = all(nest.stride(a, position) in (0, 1) for a in nest.accesses)
    if inner.kind == "vectorized":
        width = min(inner.extent, lanes_max)
        return (float(width) if contiguous else 1.0), contiguous
    if (inner.kind == "serial" and contiguous and nest.reduce_depth != position
            and inner.extent >= lanes_max):
        return lanes_max / 2.0, contiguous      # gcc -O3 vectorizes it by itself
    return 1.0, False

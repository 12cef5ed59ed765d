"""Footprints, cache lines and the bytes each level of a memory hierarchy brings in, for one
loop nest (`nests.py`); shared by the CPU and GPU estimates.

For a level of a nest (the loops from some position inward), the footprint of a buffer is the
box of elements its accesses touch there, in cache lines; the level runs `trips(level)` times.
For a cache of capacity C, the outermost level whose footprints fit in C is where the cache
holds the data, and the bytes brought into the cache are those of one level further out
(adjacent iterations there reuse what fits): `trips(L - 1) * footprint(L - 1)` summed over
buffers. Rows a power-of-two stride apart share a cache's sets: when they need more lines there
than it has ways, they count as not fitting. A written buffer counts twice (read for
ownership, written back). Registers hold the footprint of the trailing unrolled/vectorized
loops (the register tile) when it fits; the loads issued are what the tile does not keep.
"""

from __future__ import annotations

import math

from sched.autoscheduler.cost.nests import Access, LoopNest
from sched.ir.dtype import bits


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
    cache), a box whose rows map to few sets (rows a power-of-two stride apart) and needs more
    lines in those sets than they have ways counts as the share of the cache it can use: its
    lines evict each other."""
    found, counts, reaches = {}, {}, {}
    for storage, accesses in groups.items():
        access = accesses[0]
        element = element_bytes(access)
        box = union_box(nest, accesses, varying)
        spans = union_spans(nest, accesses, varying)
        counts[storage] = lines(box, access.shape, element, line, spans)
        written = 2 if any(a.is_write for a in accesses) else 1
        found[storage] = written * counts[storage] * line
        if sets and counts[storage] > 1:
            reaches[storage] = _sets_reached(box, spans, access.shape, element, line, sets)
    for storage, reach in reaches.items():
        if reach < sets and counts[storage] / reach > ways:   # its own lines per set
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


def register_level(nest: LoopNest, groups, positions: list[int], register_bytes: float) -> int:
    """Index in `positions` of the outermost level of the register tile that fits the
    register file (len(positions): not even one iteration's). What is written (the
    accumulators) must fit `register_bytes`; what is only read may overflow it by a quarter
    (an FMA takes one operand from memory, and the compiler reloads a few)."""
    fits = len(positions)
    for level in range(len(positions), register_tile(nest, positions) - 1, -1):
        written = read = 0
        for accesses in groups.values():
            size = math.prod(union_box(nest, accesses, positions[level:])) \
                * element_bytes(accesses[0])
            if any(a.is_write for a in accesses):
                written += size
            else:
                read += size
        if written > register_bytes or written + read > 1.25 * register_bytes:
            break
        fits = level
    return fits


def loads_issued(nest: LoopNest, groups, positions: list[int],
                 register_bytes: float) -> tuple[float, float]:
    """(elements loaded into registers, elements stored from them): the register tile keeps
    what fits (the level of the tile or inside it), the loop just outside it reuses what
    does not move (an accumulator over a reduction loop stays in a register); a written
    buffer is loaded and stored."""
    outer = max(0, register_level(nest, groups, positions, register_bytes) - 1)
    trips = math.prod(nest.loops[p].extent for p in positions[:outer])
    loads = stores = 0.0
    for accesses in groups.values():
        moved = trips * math.prod(union_box(nest, accesses, positions[outer:]))
        loads += moved
        stores += moved if any(a.is_write for a in accesses) else 0.0
    return loads, stores


def independent_chains(nest: LoopNest) -> int:
    """Independent updates per step of the innermost reduction loop (1: one chain)."""
    if nest.reduce_depth is None:
        return 1 << 20
    return math.prod(loop.extent for loop in nest.loops[nest.reduce_depth + 1:])


def combine(parts: list[float]) -> float:
    """The bottleneck, plus a tenth of the rest (they overlap, not perfectly)."""
    top = max(parts)
    return top + 0.1 * (sum(parts) - top)

"""Which loop of a GPU rule goes to which grid axis. CUDA launches at most 65535 thread blocks
along y and z (2^31 - 1 along x): the rules bind the innermost loop to blockIdx.x and the
others to .y and .z, except that where one of those may run past 65535 (a constant extent
beyond it, or a symbolic one: each symbol is taken as TYPICAL_SIZE), the loop with the most
iterations goes to x.

    before (a symbolic n, rows over 65535 failed at launch)   after
    for i in range(n):               # blockIdx.y             for i in range(n):   # blockIdx.x
        for j0 in range(2):          # blockIdx.x                 for j0 in range(2):  # blockIdx.y
            for j1 in range(128):    # threadIdx.x                    for j1 in range(128): ...

A symbolic loop that still lands on y or z (two of them may be large) is checked at launch,
which names the extent and the limit.
"""

from __future__ import annotations

from sched.autoscheduler.space.sampler import SketchRefused
from sched.lower.launch import MAX_GRID

TYPICAL_SIZE = 1 << 20      # the value of every symbol where extents are compared


def bind_grid(sch, loops: list) -> None:
    """Bind `loops` (outermost first, at most three) to blockIdx.x, .y, .z as the module says.
    Raises SketchRefused where a constant extent over 65535 would still land on y or z."""
    if len(loops) > len(MAX_GRID):
        raise SketchRefused(f"{len(loops)} loops for the {len(MAX_GRID)} grid axes")
    extents = [typical_extent(sch, loop) for loop in loops]
    sizes = [size for _, size in extents]
    order = list(reversed(range(len(loops))))          # x, y, z: the innermost on x
    if any(sizes[index] > MAX_GRID[1] for index in order[1:]):
        largest = max(order, key=lambda index: sizes[index])  # the innermost on ties
        order.remove(largest)
        order.insert(0, largest)
    for index, axis in zip(order[1:], "yz"):
        constant, size = extents[index]
        if constant and size > MAX_GRID[1]:
            raise SketchRefused(f"{size} thread blocks along blockIdx.{axis}, more than "
                                f"CUDA's {MAX_GRID[1]}")
    for index, axis in zip(order, "xyz"):
        sch.bind(loops[index], f"blockIdx.{axis}")


def typical_extent(sch, loop) -> tuple[bool, int]:
    """(whether it is a constant, its value with every symbol TYPICAL_SIZE) of `loop`'s
    extent; an extent that cannot be evaluated counts as TYPICAL_SIZE."""
    from sched.ir.functor import free_vars
    from sched.ir.nodes import IntImm
    from sched.lower.launch import evaluate_int
    from sched.schedule.state import find_loop

    extent = find_loop(sch.func, loop.name, "bind").extent
    if isinstance(extent, IntImm):
        return True, extent.value
    try:
        return False, evaluate_int(extent, {var: TYPICAL_SIZE for var in free_vars(extent)})
    except (TypeError, ValueError):
        return False, TYPICAL_SIZE

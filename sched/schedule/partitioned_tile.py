"""sample_partitioned_tile: a perfect tile of a loop (as sample_perfect_tile draws) whose
inner part, the factors from `partition_pos` on, has a product divisible by
`innerpart_factor`. TVM's MetaSchedule draws it for tensor-core tiling and feeds it to
`split` (`MultiLevelTilingTensorCore`): the inner loops then hold whole MMA tiles.

    v0, v1, v2, v3 = sch.sample_partitioned_tile(i, n=4, partition_pos=2,
                                                 innerpart_factor=16)
    i0, i1, i2, i3 = sch.split(i, factors=[v0, v1, v2, v3])     # 16 | v2 * v3

As TVM's (`src/tir/schedule/primitive/sampling.cc: SamplePartitionedTile`): with
`partition_pos=0, innerpart_factor=1` it is a perfect tile of any factors; n >= 2. Where TVM
differs, sched says so instead: a loop of symbolic extent, or one the factor does not divide,
is refused (TVM returns the factors [-1, 1, ...], which no split takes), and a decision that
is not such a tile is refused (TVM mends it into one), as sample_perfect_tile refuses its own.
"""

from __future__ import annotations

import math
import numbers

from sched.errors import ScheduleError
from sched.ir.nodes import IntImm
from sched.schedule.base import IntRV, LoopRV, ScheduleBase
from sched.schedule.sampling import divisors
from sched.schedule.state import find_loop

PRIMITIVE = "sample_partitioned_tile"


def _perfect(rng, extent: int, n: int) -> list[int]:
    """n factors of product `extent`, each a divisor of what the ones before leave."""
    factors = []
    for _ in range(n - 1):
        factors.append(rng.choice(divisors(extent)))
        extent //= factors[-1]
    return factors + [extent] if n else []


def sample_partitioned(rng, extent: int, n: int, partition_pos: int,
                       innerpart_factor: int) -> list[int]:
    """n factors of product `extent` whose product from `partition_pos` on is a multiple of
    `innerpart_factor` (which divides `extent`): the inner product drawn among those
    multiples that divide `extent`, then each part drawn as a perfect tile of its product."""
    inner_count = n - partition_pos
    if partition_pos == 0:
        inner = extent
    elif inner_count == 0:
        inner = 1
    else:
        inner = rng.choice([d for d in divisors(extent) if d % innerpart_factor == 0])
    return _perfect(rng, extent // inner, partition_pos) + _perfect(rng, inner, inner_count)


def check_partitioned(decision, extent: int, n: int, partition_pos: int,
                      innerpart_factor: int) -> list[int]:
    """`decision` if it is such a tile, else a ScheduleError saying why."""
    factors = list(decision) if isinstance(decision, list | tuple) else [decision]
    factors = [int(f) if isinstance(f, numbers.Integral) and not isinstance(f, bool) else f
               for f in factors]                           # numpy integers, as split takes
    if len(factors) != n or any(not isinstance(f, int) or isinstance(f, bool) or f < 1
                                for f in factors):
        raise ScheduleError(PRIMITIVE, f"decision {factors}: expected {n} positive integers")
    if math.prod(factors) != extent:
        raise ScheduleError(PRIMITIVE, f"decision {factors}: their product "
                            f"{math.prod(factors)} is not the loop extent {extent}")
    inner = math.prod(factors[partition_pos:])
    if inner % innerpart_factor:
        raise ScheduleError(PRIMITIVE, f"decision {factors}: the product {inner} of the "
                            f"factors from partition_pos={partition_pos} on is not a multiple "
                            f"of innerpart_factor={innerpart_factor}")
    return [int(f) for f in factors]


def _check_arguments(name: str, extent, n, partition_pos, innerpart_factor) -> int:
    """The loop's constant extent, or a ScheduleError naming the bad argument."""
    for position, (argument, value, low) in enumerate(
            (("n", n, 2), ("partition_pos", partition_pos, 0),
             ("innerpart_factor", innerpart_factor, 1)), start=2):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ScheduleError(PRIMITIVE, f"argument {position}, {argument!r} to "
                                f"{PRIMITIVE}: expected an integer >= {low}, got {value!r}")
    if partition_pos > n:
        raise ScheduleError(PRIMITIVE, f"argument 3, 'partition_pos' to {PRIMITIVE}: "
                            f"expected a position in [0, {n}] (the first factor of the inner "
                            f"part), got {partition_pos}")
    if not isinstance(extent, IntImm):
        raise ScheduleError(PRIMITIVE, f"loop {name!r} has the symbolic extent "
                            f"{extent.script()}; tiles are sampled for constant extents")
    if extent.value % innerpart_factor:
        raise ScheduleError(PRIMITIVE, f"innerpart_factor={innerpart_factor} does not divide "
                            f"the extent {extent.value} of loop {name!r}, so no tile of it has "
                            f"an inner part that is a multiple of it; give a divisor of "
                            f"{extent.value}")
    if partition_pos == n and innerpart_factor != 1:
        raise ScheduleError(PRIMITIVE, f"partition_pos={n} leaves no inner factor to be a "
                            f"multiple of innerpart_factor={innerpart_factor}; give a "
                            f"position below n={n}")
    return extent.value


class PartitionedTileSampling(ScheduleBase):
    """sample_partitioned_tile."""

    def sample_partitioned_tile(self, loop: LoopRV, n: int, partition_pos: int = 0,
                                innerpart_factor: int = 1,
                                decision: list[int] | None = None) -> list[IntRV]:
        """Draw `n` tile sizes whose product is the extent of `loop` (for `split`), the
        product of those from `partition_pos` on a multiple of `innerpart_factor`.

        Requires: the loop has a constant extent that `innerpart_factor` divides; n >= 2;
        0 <= partition_pos <= n. The choice (or `decision`, when given, as in a replay) is
        recorded in the trace; a decision that is not such a tile is refused.
        Returns: the n factors, outermost first, as values the trace refers to.
        Also known as: `sample_partitioned_tile` in TVM's MetaSchedule.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((64,), name="A")
        >>> B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]), seed=0)
        >>> (i,) = sch.get_loops(sch.get_block("B"))
        >>> factors = sch.sample_partitioned_tile(i, n=3, partition_pos=1,
        ...                                       innerpart_factor=16, decision=[2, 8, 4])
        >>> i0, i1, i2 = sch.split(i, factors=factors)
        >>> print(sch.trace)  # doctest: +NORMALIZE_WHITESPACE
        b0 = sch.get_block('B')
        l1, = sch.get_loops(b0)
        v2, v3, v4 = sch.sample_partitioned_tile(l1, n=3, partition_pos=1, innerpart_factor=16,
                                                 decision=[2, 8, 4])
        l5, l6, l7 = sch.split(l1, factors=[v2, v3, v4])
        >>> print(sch.func.script().splitlines()[5])
                for i_0, i_1, i_2 in T.grid(2, 8, 4):
        """
        name = self._loop(loop, PRIMITIVE)
        extent = _check_arguments(name, find_loop(self._func, name, PRIMITIVE).extent, n,
                                  partition_pos, innerpart_factor)
        if decision is None:
            decision = sample_partitioned(self.rng, extent, n, partition_pos, innerpart_factor)
        decision = check_partitioned(decision, extent, n, partition_pos, innerpart_factor)
        values = [IntRV(f, self._new_rv("v")) for f in decision]
        self._record(PRIMITIVE, self._func, (loop,),
                     (("n", n), ("partition_pos", partition_pos),
                      ("innerpart_factor", innerpart_factor)),
                     tuple(values), decision=decision)
        return values

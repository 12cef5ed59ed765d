"""Sampling instructions for search: random choices recorded with their decisions.

A sampled value is an `IntRV`, an int the trace refers to by name: `split(l, factors=[v1, v2])`
records `v1, v2`, not the numbers, so replaying the trace with another decision for the sampling
step gives another schedule. This is what the autoscheduler mutates.

    v1, v2 = sch.sample_perfect_tile(i, n=2, max_innermost_factor=16)
    io, ii = sch.split(i, factors=[v1, v2])
"""

from __future__ import annotations

import math

from sched.errors import ScheduleError
from sched.ir.nodes import IntImm
from sched.schedule.base import IntRV, LoopRV, ScheduleBase
from sched.schedule.state import find_loop


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def sample_tile(rng, extent: int, n: int, max_innermost_factor: int) -> list[int]:
    """n factors whose product is `extent`, the innermost at most `max_innermost_factor`,
    drawn one divisor at a time from the innermost out."""
    innermost = rng.choice([d for d in divisors(extent) if d <= max_innermost_factor])
    factors = [innermost]
    remaining = extent // innermost
    for _ in range(n - 2):
        factor = rng.choice(divisors(remaining))
        factors.append(factor)
        remaining //= factor
    factors.append(remaining)
    return list(reversed(factors))


def every_tile(extent: int, n: int, max_innermost_factor: int) -> list[list[int]]:
    """Every list `sample_tile` can draw: n factors of `extent` (outermost first), the
    innermost at most `max_innermost_factor`."""
    if n == 1:
        return [[extent]] if extent <= max_innermost_factor else []
    return [[d, *rest] for d in divisors(extent)
            for rest in every_tile(extent // d, n - 1, max_innermost_factor)]


def check_tile(decision, extent: int, n: int, max_innermost_factor: int) -> list[int]:
    """`decision` if it is a valid perfect tile, else a ScheduleError saying why."""
    factors = list(decision)
    if len(factors) != n or any(not isinstance(f, int) or f < 1 for f in factors):
        raise ScheduleError("sample_perfect_tile", f"decision {factors}: expected {n} positive "
                            f"integers")
    if math.prod(factors) != extent:
        raise ScheduleError("sample_perfect_tile", f"decision {factors}: their product "
                            f"{math.prod(factors)} is not the loop extent {extent}")
    if factors[-1] > max_innermost_factor:
        raise ScheduleError("sample_perfect_tile", f"decision {factors}: the innermost factor "
                            f"exceeds max_innermost_factor={max_innermost_factor}")
    return factors


class SamplingPrimitives(ScheduleBase):
    """sample_perfect_tile, sample_categorical."""

    def sample_perfect_tile(self, loop: LoopRV, n: int, max_innermost_factor: int = 16,
                            decision: list[int] | None = None) -> list[IntRV]:
        """Draw `n` tile sizes whose product is the extent of `loop` (for `split`).

        Requires: the loop has a constant extent; n >= 2. The choice (or `decision`, when
        given, as in a replay) is recorded in the trace.
        Returns: the n factors, outermost first, as values the trace can refer to.
        Also known as: `sample_perfect_tile` in TVM's MetaSchedule.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((64,), name="A")
        >>> B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]), seed=0)
        >>> (i,) = sch.get_loops(sch.get_block("B"))
        >>> factors = sch.sample_perfect_tile(i, n=2, max_innermost_factor=8, decision=[16, 4])
        >>> io, ii = sch.split(i, factors=factors)
        >>> print(sch.trace)
        b0 = sch.get_block('B')
        l1, = sch.get_loops(b0)
        v2, v3 = sch.sample_perfect_tile(l1, n=2, max_innermost_factor=8, decision=[16, 4])
        l4, l5 = sch.split(l1, factors=[v2, v3])
        """
        name = self._loop(loop, "sample_perfect_tile")
        extent = find_loop(self._func, name, "sample_perfect_tile").extent
        if not isinstance(extent, IntImm):
            raise ScheduleError("sample_perfect_tile", f"loop {name!r} has the symbolic extent "
                                f"{extent.script()}; tiles are sampled for constant extents")
        if not isinstance(n, int) or n < 2:
            raise ScheduleError("sample_perfect_tile", f"argument 'n': expected an integer >= "
                                f"2, got {n!r}")
        if decision is None:
            decision = sample_tile(self.rng, extent.value, n, max_innermost_factor)
        decision = check_tile(decision, extent.value, n, max_innermost_factor)
        values = [IntRV(f, self._new_rv("v")) for f in decision]
        self._record("sample_perfect_tile", self._func, (loop,),
                     (("n", n), ("max_innermost_factor", max_innermost_factor)),
                     tuple(values), decision=decision)
        return values

    def sample_categorical(self, candidates: list[int], probs: list[float],
                           decision: int | None = None) -> IntRV:
        """Draw one of `candidates` with probabilities `probs` (for unroll depths, vector
        widths...). `decision` is the index of the chosen candidate.

        Requires: integer candidates, one probability each. Returns: the chosen value, which
        the trace refers to by name.
        Also known as: `sample_categorical` in TVM's MetaSchedule.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((4,), name="A")
        >>> B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]), seed=0)
        >>> sch.sample_categorical([0, 16, 64], [0.2, 0.4, 0.4], decision=2)
        64
        """
        if not candidates or len(candidates) != len(probs) or \
                any(not isinstance(c, int) for c in candidates):
            raise ScheduleError("sample_categorical", f"expected integer candidates and one "
                                f"probability each, got {candidates!r} and {probs!r}")
        if decision is None:
            decision = self.rng.choices(range(len(candidates)), weights=probs)[0]
        if not isinstance(decision, int) or not 0 <= decision < len(candidates):
            raise ScheduleError("sample_categorical", f"decision {decision!r}: expected an "
                                f"index in 0..{len(candidates) - 1}")
        value = IntRV(candidates[decision], self._new_rv("v"))
        self._record("sample_categorical", self._func, (list(candidates), list(probs)),
                     outputs=(value,), decision=decision)
        return value

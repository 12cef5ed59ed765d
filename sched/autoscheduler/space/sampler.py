"""Decisions for a sketch: the genome the search evolves.

A sketch is Python that applies schedule steps; its random choices go through a `Sampler`,
which takes them from a genome (a tuple of decisions, in the order the sketch asks for them)
and draws the ones the genome lacks or cannot use (a mutated tile of another extent). The steps
are recorded in the schedule's trace as `sample_perfect_tile` / `sample_categorical` with their
decisions, so the trace replays the candidate exactly.

    sampler = Sampler(sch, genome=((16, 2, 2, 4), 1), rng=random.Random(0))
    factors = sampler.tile(loop, n=4, max_innermost_factor=16)   # decision 0
    lanes = sampler.choose([1, 2, 4], [1, 1, 1])                  # decision 1
    sampler.genome                                                # what was used
"""

from __future__ import annotations

import itertools
import math
import random

from sched.errors import ScheduleError
from sched.schedule.sampling import check_tile, every_tile, sample_tile


class SketchRefused(Exception):
    """A sketch cannot be applied with these decisions (too many threads, a step refused)."""


class Sampler:
    def __init__(self, sch, genome: tuple | None = None, rng: random.Random | None = None,
                 pipelines: bool = True):
        self.sch = sch
        self.pipelines = pipelines        # False: software pipelining is never drawn
        self.given = tuple(genome or ())
        self.rng = rng or random.Random()
        self.decisions: list = []
        self.kinds: list[str] = []            # "tile:<extent>:<n>:<max>" or "choice:<count>"

    @property
    def genome(self) -> tuple:
        return tuple(self.decisions)

    def _given(self):
        position = len(self.decisions)
        return self.given[position] if position < len(self.given) else None

    def tile(self, loop, n: int, max_innermost_factor: int = 64) -> list[int]:
        """n factors of the loop's extent (outermost first), recorded in the trace."""
        return self.tiles([loop], n, max_innermost_factor)[0]

    def tiles(self, loops: list, n: int, max_innermost_factor: int = 64,
              accept=None, tries: int = 256) -> list[list[int]]:
        """`tile` for each of `loops`, drawn together: the decisions the genome lacks are drawn
        again (up to `tries` times) until `accept(decisions)` holds, e.g. a thread count in
        range. Decisions the genome gives are kept even when `accept` fails: the caller
        refuses them, so a mutation is never silently replaced."""
        extents = [self.extent(loop) for loop in loops]
        start = len(self.decisions)
        given = []
        for offset, extent in enumerate(extents):
            position = start + offset
            decision = self.given[position] if position < len(self.given) else None
            try:
                decision = check_tile(decision, extent, n, max_innermost_factor) \
                    if decision is not None else None
            except (ScheduleError, TypeError):
                decision = None
            given.append(decision)
        for _ in range(tries):
            drawn = [decision or sample_tile(self.rng, extent, n, max_innermost_factor)
                     for decision, extent in zip(given, extents)]
            if accept is None or accept(drawn) or all(given):
                break
        else:
            drawn = self._accepted_tiles(given, extents, n, max_innermost_factor, accept) \
                or drawn
        values = []
        for loop, extent, decision in zip(loops, extents, drawn):
            values.append(self.sch.sample_perfect_tile(
                loop, n=n, max_innermost_factor=max_innermost_factor, decision=list(decision)))
            self.decisions.append(tuple(decision))
            self.kinds.append(f"tile:{extent}:{n}:{max_innermost_factor}")
        return values

    def _accepted_tiles(self, given, extents, n, max_innermost_factor, accept,
                        limit: int = 1 << 17) -> list | None:
        """Where random draws missed a rare `accept` (8 x 24 threads in 4 levels: 0.6% of
        draws have 32 or more threads), one of every combination it accepts, drawn
        uniformly; None where none is, or where there are more than `limit`."""
        options = [[decision] if decision else every_tile(extent, n, max_innermost_factor)
                   for decision, extent in zip(given, extents)]
        if math.prod(len(o) for o in options) > limit:
            return None
        accepted = [list(combo) for combo in itertools.product(*options) if accept(combo)]
        return self.rng.choice(accepted) if accepted else None

    def extent(self, loop) -> int:
        """The constant extent of `loop` (a symbolic one: SketchRefused)."""
        from sched.ir.nodes import IntImm
        from sched.schedule.state import find_loop

        extent = find_loop(self.sch.func, loop.name, "sample_perfect_tile").extent
        if not isinstance(extent, IntImm):
            raise SketchRefused(f"loop {loop.name} has a symbolic extent")
        return extent.value

    def choose(self, candidates: list[int], probs: list[float] | None = None) -> int:
        """One of `candidates` (its value), recorded in the trace."""
        probs = probs or [1.0] * len(candidates)
        decision = self._given()
        if not isinstance(decision, int) or not 0 <= decision < len(candidates):
            decision = self.rng.choices(range(len(candidates)), weights=probs)[0]
        value = self.sch.sample_categorical(list(candidates), list(probs), decision=decision)
        self.decisions.append(decision)
        self.kinds.append(f"choice:{len(candidates)}")
        return int(value)

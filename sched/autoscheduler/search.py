"""The evolutionary search over genomes (the decisions of a sketch).

Each round: children of the best candidates so far (mutation: re-sample one decision; crossover:
each decision from one of two parents of the same sketch), plus fresh random samples with
probability `epsilon`; each child is applied (every step checked: a refused child is dropped and
counted), deduplicated by the structural hash of the scheduled function against everything
seen (measured in this run or in the DB), scored by the cost model, and the best `count` of
them (plus a few random ones, so the model sees more than its favourites) are returned to be
measured.

    search = EvolutionarySearch(space, seed=0)
    batch = search.propose(count=16, model=model)       # list of Sample
    search.tell(samples, seconds)                       # measured medians (inf: error)
"""

from __future__ import annotations

import dataclasses
import math
import random

from sched.autoscheduler.space.sampler import SketchRefused
from sched.autoscheduler.space.sketch import Sample, SearchSpace, func_hash
from sched.errors import ScheduleError

POOL_PER_MEASURED = 2       # candidates replayed and ranked per candidate measured


@dataclasses.dataclass
class SearchStats:
    proposed: int = 0          # children applied
    refused: int = 0           # children a step refused (legality, too many threads)
    duplicates: int = 0        # children equal to a schedule already seen
    replay_seconds: float = 0.0


class EvolutionarySearch:
    def __init__(self, space: SearchSpace, seed: int | None = 0, population: int = 64,
                 epsilon: float = 0.2, mutation: float = 0.85, random_share: float = 0.2):
        self.space = space              # (no sketch: nothing is proposed)
        self.rng = random.Random(seed)
        self.population_size = population
        self.epsilon, self.mutation, self.random_share = epsilon, mutation, random_share
        self.seen: set[str] = set()
        self.tried: set[tuple] = set()      # (sketch, genome) applied: the same schedule
        # measured: (median seconds, sketch, genome, kinds)
        self.measured: list[tuple[float, int, tuple, tuple]] = []
        self.stats = SearchStats()

    def remember(self, hashes) -> None:
        """Hashes of schedules measured before (the DB): never proposed again."""
        self.seen.update(hashes)

    def forget(self, samples: list[Sample]) -> None:
        """Proposed samples that will not be measured: they may be proposed again."""
        for sample in samples:
            self.seen.discard(sample.hash)

    def tell(self, samples: list[Sample], seconds: list[float]) -> None:
        for sample, time in zip(samples, seconds):
            self.measured.append((time, sample.sketch, sample.genome, sample.kinds))

    def seed_genomes(self, genomes: list[tuple[float, int, tuple, tuple]]) -> None:
        """Measured genomes from the DB (resume): parents of the next rounds."""
        self.measured.extend(genomes)

    def propose(self, count: int, model=None, workload=None) -> list[Sample]:
        """Up to `count` new candidates, best predicted first."""
        import time

        if not self.space.sketches:
            return []
        start = time.perf_counter()
        pool: list[Sample] = []
        attempts = 0
        target = count * POOL_PER_MEASURED if model is not None else count
        while len(pool) < target and attempts < target * 4:
            attempts += 1
            sample = self._child()
            if sample is None:
                continue
            key = func_hash(sample.schedule.func)
            if key in self.seen:
                self.stats.duplicates += 1
                continue
            self.seen.add(key)
            sample.hash = key
            pool.append(sample)
        self.stats.replay_seconds += time.perf_counter() - start
        if model is None or len(pool) <= count:
            return pool[:count]
        scores = model.predict(workload, [s.schedule.func for s in pool])
        order = sorted(range(len(pool)), key=lambda i: -scores[i])
        explore = min(len(pool) - count, max(0, round(count * self.random_share)))
        chosen = order[:count - explore]
        rest = order[count - explore:]
        chosen += self.rng.sample(rest, explore)
        self.forget([pool[i] for i in rest if i not in chosen])    # may come back
        return [pool[i] for i in chosen]

    # -- children ---------------------------------------------------------------------------

    def _child(self) -> Sample | None:
        parents = self._parents()
        if not parents or self.rng.random() < self.epsilon:
            return self._apply(self.rng.randrange(len(self.space.sketches)), None)
        if len(parents) > 1 and self.rng.random() > self.mutation:
            first = self._pick(parents)
            same = [p for p in parents if p[1] == first[1] and p is not first]
            if same:
                return self._apply(first[1], _crossover(first[2], self._pick(same)[2],
                                                        self.rng))
        parent = self._pick(parents)
        return self._apply(parent[1], _mutate(parent[2], parent[3], self.rng))

    def _parents(self):
        good = sorted((m for m in self.measured if math.isfinite(m[0])), key=lambda m: m[0])
        return good[:self.population_size]

    def _pick(self, parents):
        """A parent, the faster ones likelier (weight 1/rank)."""
        weights = [1.0 / (rank + 1) for rank in range(len(parents))]
        return self.rng.choices(parents, weights=weights)[0]

    def _apply(self, sketch: int, genome: tuple | None) -> Sample | None:
        if genome is not None:
            if (sketch, genome) in self.tried:
                self.stats.duplicates += 1
                return None
            self.tried.add((sketch, genome))
        self.stats.proposed += 1
        try:
            return self.space.sample(sketch, genome, self.rng)
        except (ScheduleError, SketchRefused):
            self.stats.refused += 1
            return None


def _mutate(genome: tuple, kinds: tuple, rng: random.Random) -> tuple:
    """The genome with one decision re-drawn: a tile decision is dropped (the sampler draws
    another with the same product), a choice moves to another index."""
    if not genome:
        return genome
    position = rng.randrange(len(genome))
    decisions = list(genome)
    kind = kinds[position] if position < len(kinds) else ""
    if kind.startswith("choice:"):
        count = int(kind.split(":")[1])
        others = [i for i in range(count) if i != decisions[position]]
        decisions[position] = rng.choice(others) if others else decisions[position]
    else:
        decisions[position] = _retile(decisions[position], kind, rng)
    return tuple(decisions)


def _retile(factors, kind: str, rng: random.Random):
    """Move a prime factor of one tile level to another (the product stays the extent), or
    None to draw a fresh tile."""
    factors = list(factors)
    _, _, _, limit = (kind.split(":") + ["", "", "", "64"])[:4]
    limit = int(limit) if limit.isdigit() else 64
    for _ in range(8):
        source = rng.randrange(len(factors))
        if factors[source] == 1:
            continue
        prime = _smallest_prime(factors[source])
        dest = rng.choice([i for i in range(len(factors)) if i != source])
        moved = list(factors)
        moved[source] //= prime
        moved[dest] *= prime
        if moved[-1] <= limit:
            return tuple(moved)
    return None


def _smallest_prime(n: int) -> int:
    for p in range(2, int(n ** 0.5) + 1):
        if n % p == 0:
            return p
    return n


def _crossover(first: tuple, second: tuple, rng: random.Random) -> tuple:
    return tuple(a if rng.random() < 0.5 else b for a, b in zip(first, second))

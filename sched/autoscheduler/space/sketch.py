"""Sketches: which rule schedules which block, found once per workload; a sketch applied with a
genome (its decisions) is one candidate schedule.

Rules, per block the user left unscheduled (Ansor/MetaSchedule's, adapted):
- inline: an elementwise block that writes no parameter goes into its consumers; padding (an
  `if_then_else`) on the CPU in one variant, and stays a block in the other;
- multi-level tiling (tiling_cpu.py, tiling_gpu.py): a block with a reduction and data reuse
  (matmul, conv), with its elementwise consumers fused into the tile's write-back;
- compute location (placement.py, CPU): a producer that cannot be inlined goes under a loop of
  its consumer, at a sampled depth;
- row reductions on the GPU (rows_gpu.py): in one more sketch, each reduction without reuse
  (a row max or sum) is reduced across the threads of one thread block per row, under the row
  loop of the block that consumes it (softmax, layer norm in one kernel);
- the rest (loops_cpu.py, threads_gpu.py): parallel + vectorize on the CPU, blocks of threads on
  the GPU.
A rule that does not apply to a block is skipped. Where a rule has variants (a local
accumulator or not, a fused epilogue or not), each combination is a sketch; a sketch that no
random genome can apply is dropped when the space is built.

    space = SearchSpace(workload)
    sample = space.sample(sketch_index=0, genome=None, rng=random.Random(0))
    sample.schedule.func, sample.genome, sample.trace
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import random

from sched.autoscheduler.space.analysis import block_info, leaf_blocks
from sched.autoscheduler.space.loops_cpu import parallel_vectorize
from sched.autoscheduler.space.placement import compute_location, inline
from sched.autoscheduler.space.rfactor_cpu import partials_fit, place_partials, vector_rfactor
from sched.autoscheduler.space.rows_gpu import row_anchor, row_reduction, row_thread_choices
from sched.autoscheduler.space.sampler import Sampler, SketchRefused
from sched.autoscheduler.space.threads_gpu import THREAD_WEIGHTS, bind_threads
from sched.autoscheduler.space.tiling_cpu import tile_cpu, vector_axes, vector_lanes
from sched.autoscheduler.space.tiling_gpu import has_async_copies, tile_gpu
from sched.errors import ScheduleError
from sched.schedule.state import find_block

MAX_SKETCHES = 12
VALIDATION_TRIES = 6


@dataclasses.dataclass(frozen=True)
class Sketch:
    """Rule applications in order: ("inline", block), ("tile_cpu", block, local, epilogues,
    packed, compact, vector_axis), ("tile_gpu", block, epilogues, staged), ("place", block,
    consumer, rfactor), ("parallel", block, rfactor), ("threads", block), ("row_anchor",
    block), ("row_reduce", block, anchor or None)."""

    steps: tuple[tuple, ...]

    @property
    def name(self) -> str:
        parts = []
        for step in self.steps:
            kind, block, *options = step
            extra = ""
            if kind == "tile_cpu":
                extra = ("+local" if options[0] else "") + \
                    "".join(f"+{e}" for e in options[1]) + \
                    "".join(f"+pack({b})" for b in options[2]) + \
                    ("+SSRS" if options[3] else "") + \
                    (f"+lanes(axis {options[4]})" if options[4] is not None else "")
            elif kind == "tile_gpu":
                extra = "".join(f"+{e}" for e in options[0])
            elif kind in ("place", "parallel") and options and options[-1] is True:
                extra = "+rf"
            elif kind == "row_reduce" and options[0] is not None:
                extra = f"@{options[0]}"
            parts.append(f"{kind}({block}{extra})")
        return " ".join(parts) or "(nothing to schedule)"


@dataclasses.dataclass
class Sample:
    sketch: int
    genome: tuple
    kinds: tuple[str, ...]
    schedule: object
    hash: str = ""


class SearchSpace:
    """The sketches of a workload, and candidates drawn from them."""

    def __init__(self, workload, seed: int = 0):
        self.workload = workload
        # `validated`: the sample that showed each kept sketch applies (a first candidate;
        # on a conv2d for the GPU one sample is seconds of analysis)
        self.sketches, self.validated = _valid(workload, _sketches(workload),
                                               random.Random(seed))

    def sample(self, sketch: int, genome: tuple | None, rng: random.Random,
               pipelines: bool = True) -> Sample:
        """Apply sketch `sketch` with `genome` (missing decisions drawn from `rng`); raises
        SketchRefused (or ScheduleError) when a step is refused."""
        sch = self.workload.base_schedule()
        sampler = Sampler(sch, genome, rng, pipelines)
        _apply(self.sketches[sketch], sch, sampler, self.workload)
        return Sample(sketch, sampler.genome, tuple(sampler.kinds), sch)


def func_hash(func) -> str:
    """Structural hash of a scheduled function (its script): equal schedules, equal hash."""
    return hashlib.sha256(func.script().encode()).hexdigest()[:20]


# the rules that try a step and fall back to another when it is refused: they need the
# refusal of the concurrency rule at once; every other rule has it asked at its end
CHECKED_AT_ONCE = frozenset({"threads", "row_reduce"})


def _apply(sketch: Sketch, sch, sampler: Sampler, workload) -> None:
    # threads: the count the GPU rules drew; rows: anchor block -> its row loop
    state = {"threads": None, "rows": {}, "async": has_async_copies(workload)}
    for kind, block, *options in sketch.steps:
        with (contextlib.nullcontext() if kind in CHECKED_AT_ONCE
              else sch.concurrency_checked_at_end()):
            _apply_rule(sch, sampler, sketch, state, kind, block, options)


def _apply_rule(sch, sampler: Sampler, sketch: Sketch, state: dict, kind: str, block: str,
                options: list) -> None:
    """One rule of `sketch` on `block`; `state` carries the thread count drawn for the GPU
    rules, the row loops the row anchors made and whether the arch copies asynchronously."""
    if kind in ("threads", "row_anchor", "row_reduce") and state["threads"] is None:
        choices = row_thread_choices(sch, [s[1] for s in sketch.steps if s[0] == "row_reduce"])
        state["threads"] = sampler.choose(choices, THREAD_WEIGHTS[:len(choices)])
    threads = state["threads"]
    if kind == "inline":
        inline(sch, block)
    elif kind == "tile_cpu":
        tile_cpu(sch, sampler, block_info(sch.func, block), *options)
    elif kind == "tile_gpu":
        tile_gpu(sch, sampler, block_info(sch.func, block), *options,
                 asynchronous=state["async"])
    elif kind == "place":
        consumer, *rf = options
        partial = vector_rfactor(sch, sampler, block_info(sch.func, block)) \
            if rf and rf[0] else None
        loop = compute_location(sch, sampler, block, consumer, vector_loops=1)
        if loop is None:
            parallel_vectorize(sch, sampler, block_info(sch.func, block))
        if partial is not None:
            place_partials(sch, partial, block, loop)
    elif kind == "parallel":
        partial = vector_rfactor(sch, sampler, block_info(sch.func, block)) \
            if options and options[0] else None
        parallel_vectorize(sch, sampler, block_info(sch.func, block))
        if partial is not None:
            place_partials(sch, partial, block)
    elif kind == "threads":
        bind_threads(sch, block_info(sch.func, block), threads)
    elif kind == "row_anchor":
        state["rows"][block] = row_anchor(sch, block_info(sch.func, block), threads)
    elif kind == "row_reduce":
        row_reduction(sch, sampler, block_info(sch.func, block), state["rows"].get(options[0]),
                      threads)
    else:
        raise AssertionError(kind)


def _searched_blocks(workload, func) -> list[str]:
    original = set(leaf_blocks(workload.func))
    return [name for name in leaf_blocks(func)
            if name in original and name not in workload.user_blocks]


def _sketches(workload) -> list[Sketch]:
    """Every combination of the rules' variants, capped at MAX_SKETCHES (shared evenly by
    the inline variants)."""
    variants = _inline_variants(workload)
    share = max(1, MAX_SKETCHES // len(variants))
    return [sketch for sch, inlined in variants
            for sketch in _tiled_sketches(workload, sch, inlined, share)]


def _inline_variants(workload) -> list[tuple[object, list[tuple]]]:
    """(schedule with elementwise producers inlined, the inline steps), one per variant.

    On the CPU a producer with an `if_then_else` (padding) is inlined in one variant and
    kept as a block of its own in the other, as MetaSchedule's CPU rule keeps it: inlined, its
    condition runs in the consumer's innermost loop, and where that loop is vectorized along
    the padded axis each vector of the consumer takes a mask and a masked load (a conv2d
    3x3 tile vectorized along the output columns: 12.6 ms inlined, 1.3 ms with the padding
    computed first, on a Zen 5); vectorized along the output channels the condition is the
    same for every lane, and the inlined variant saves a pass over the input. On the GPU a
    producer that reads another stage is kept in another variant too (`_reads_a_stage`)."""
    gpu = workload.target == "cuda"
    variants = [(workload.base_schedule(), [])]
    for name in _searched_blocks(workload, variants[0][0].func):
        extended = []
        for sch, inlined in variants:
            info = block_info(sch.func, name)
            if not info.elementwise or info.writes_param:
                extended.append((sch, inlined))
                continue
            try:
                trial = sch.copy()
                inline(trial, name)
            except ScheduleError:
                extended.append((sch, inlined))
                continue
            extended.append((trial, [*inlined, ("inline", name)]))
            if (info.padding and not gpu) or (gpu and _reads_a_stage(sch, name)):
                extended.append((sch, inlined))
        variants = extended
    return variants


def _reads_a_stage(sch, name: str) -> bool:
    """Whether block `name` reads what another block writes (RMSNorm's scaling reads the row
    sums): inlined into a GPU tile, that read goes into the tile's shared-memory staging,
    which may then be refused, so the block stays a block of its own in another variant."""
    return bool(sch.get_producers(sch.get_block(name)))


def _tiled_sketches(workload, sch, inlined: list[tuple], cap: int) -> list[Sketch]:
    """The sketches of `sch` (its elementwise producers inlined as `inlined` says): every
    combination of the rules' variants, at most `cap`."""
    gpu = workload.target == "cuda"
    func = sch.func
    blocks = _searched_blocks(workload, func)
    consumers = {name: [c.name for c in sch.get_consumers(sch.get_block(name))]
                 for name in blocks}
    infos = {name: block_info(func, name) for name in blocks}
    tiled = [name for name in blocks if infos[name].is_reduction and infos[name].has_reuse
             and infos[name].simple_loops]
    # an epilogue reads the tile's result and nothing another block writes (softmax's
    # division after a matmul reads the row sums too: it cannot go into the tile's write-back)
    producers = {name: [p.name for p in sch.get_producers(sch.get_block(name))]
                 for name in blocks}
    epilogues = {name: tuple(c for c in consumers[name] if c in blocks and c not in tiled
                             and infos[c].elementwise and producers[c] == [name])
                 for name in tiled}
    choices: list[list[tuple]] = []
    for name in reversed(blocks):
        info = infos[name]
        if name in tiled:
            fused = epilogues[name]
            variants = [fused, ()] if fused else [()]
            if gpu:
                written = {r.buffer.name for r in
                           find_block(func, name).block.writes}
                staged = tuple(r.buffer.name for r in find_block(func, name).block.reads
                               if r.buffer.name not in written)
                choices.append([("tile_gpu", name, e, staged) for e in variants])
            else:
                packs = [info.packable, ()] if info.packable else [()]
                # lanes along another axis first (where offered, the last axis has no whole
                # vectors): ahead of the cap on the number of sketches
                choices.append([("tile_cpu", name, True, e, (), compact, axis)
                                for axis in vector_axes(func, info, vector_lanes())
                                for compact in (True, False) for e in variants] +
                               [("tile_cpu", name, local, e, pack, compact, None)
                                for local, compact in ((True, False), (True, True),
                                                       (False, False))
                                for e in variants for pack in packs])
        elif any(name in fused for fused in epilogues.values()):
            # fused into its producer's tile in the variants that say so, else on its own
            choices.append([("maybe_" + ("threads" if gpu else "parallel"), name)])
        elif gpu:
            choices.append([("threads", name)])
        elif not info.writes_param and len(consumers[name]) == 1 and \
                consumers[name][0] in blocks:
            choices.append([("place", name, consumers[name][0], rf)
                            for rf in _rfactor_variants(func, info)])
        else:
            choices.append([("parallel", name, rf) for rf in _rfactor_variants(func, info)])
    combos = itertools.islice(itertools.product(*choices), cap)
    sketches = [Sketch(tuple(inlined) + _resolve(combo)) for combo in combos]
    if gpu:
        rows = _row_sketch(func, blocks, infos, consumers, tiled, choices)
        if rows is not None:
            sketches = [Sketch(tuple(inlined) + rows), *sketches][:max(cap, 2)]
    return sketches


def _row_sketch(func, blocks, infos, consumers, tiled, choices) -> tuple | None:
    """The GPU sketch with the row reductions across threads (rows_gpu.py): each reduction
    without reuse under the row loop of its anchor (`_row_anchors`), every other block by its
    first rule. None where there is no row reduction."""
    reductions = [name for name in blocks if infos[name].is_reduction and name not in tiled]
    if not any(infos[name].spatial for name in reductions):
        return None
    anchors = _row_anchors(func, reductions, blocks, infos, consumers)
    steps = []
    for name, options in zip(reversed(blocks), choices):
        if name in anchors:
            steps.append(("row_reduce", name, anchors[name]))
        elif name in anchors.values():
            steps.append(("row_anchor", name))
        else:       # a tile keeps the anchors out of its fused epilogues
            steps.append(next((o for o in options if o[0] != "tile_gpu"
                               or not set(o[2]) & set(anchors.values())), options[-1]))
    return _resolve(tuple(steps))


def _row_anchors(func, reductions, blocks, infos, consumers) -> dict[str, str | None]:
    """Each row reduction's anchor (`_anchor`), or None where it keeps a kernel of its own:
    - it writes an output: under the anchor's rows its result would pass from thread to
      thread through global memory, which no barrier orders;
    - it has a separate init block (TVM's decomposed form): the init would run in another
      kernel than the shared result;
    - its rows are not the anchor's (a sum down a middle axis beside an anchor over all
      three): the anchor's row loop would leave spatial loops under it;
    - a block the anchor's rows do not hold reads it (a side output after the anchor): its
      result must outlive the rows' kernel."""
    anchors = {}
    for name in reductions:
        anchor = None if infos[name].writes_param or \
            find_block(func, name).block.init is None else \
            _anchor(name, blocks, infos, consumers)
        if anchor is not None and len(infos[name].spatial) != len(infos[anchor].spatial) - 1:
            anchor = None
        anchors[name] = anchor
    changed = True
    while changed:
        changed = False
        for name, anchor in anchors.items():
            if anchor is not None and any(c != anchor and anchors.get(c) != anchor
                                          for c in consumers[name]):
                anchors[name], changed = None, True
    return anchors


def _anchor(name: str, blocks, infos, consumers) -> str | None:
    """The last elementwise block with rows and columns (in program order) that consumes
    `name`, directly or through other blocks; None where there is none."""
    downstream, frontier = set(), [name]
    while frontier:
        for consumer in consumers.get(frontier.pop(), ()):
            if consumer in blocks and consumer not in downstream:
                downstream.add(consumer)
                frontier.append(consumer)
    rows = [b for b in blocks if b in downstream and infos[b].elementwise
            and len(infos[b].spatial) >= 2]
    return rows[-1] if rows else None


def _rfactor_variants(func, info) -> list[bool]:
    """A reduction without reuse (a row max or sum) may keep vector partials (rfactor_cpu.py),
    where whole vectors of them divide its reduction."""
    if not (info.is_reduction and info.reduce):
        return [False]
    return [True, False] if partials_fit(func, info) else [False]


def _resolve(combo: tuple) -> tuple:
    """Tiles first (each fuses its epilogues or not), then an epilogue its tile left alone
    gets the plain rule, then the rest in order."""
    fused = {e for step in combo if step[0] in ("tile_cpu", "tile_gpu")
             for e in (step[3] if step[0] == "tile_cpu" else step[2])}
    steps = [s for s in combo if s[0] in ("tile_cpu", "tile_gpu")]
    for step in combo:
        if step[0].startswith("maybe_"):
            if step[1] not in fused:
                steps.append((step[0].removeprefix("maybe_"), step[1]))
        elif step not in steps:
            steps.append(step)
    return tuple(steps)


def _valid(workload, sketches: list[Sketch], rng: random.Random
           ) -> tuple[list[Sketch], list[Sample]]:
    """The sketches some random genome applies to, and that sample of each."""
    kept, samples = [], []
    for sketch in sketches:
        for _ in range(VALIDATION_TRIES):
            sch = workload.base_schedule()
            sampler = Sampler(sch, None, rng)
            try:
                _apply(sketch, sch, sampler, workload)
            except (ScheduleError, SketchRefused):
                continue
            samples.append(Sample(len(kept), sampler.genome, tuple(sampler.kinds), sch))
            kept.append(sketch)
            break
    return kept, samples

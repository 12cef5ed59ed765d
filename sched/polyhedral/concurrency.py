"""The one rule for loops whose iterations run at the same time (CONCURRENT_RULE): parallel,
vectorized, bound to blockIdx or to threadIdx. Asked when a loop is marked (loop_kinds.py,
mapping.py) and again after every later step (`check_concurrent_loops`), so the answer does not
depend on the order of the steps.
"""

from __future__ import annotations

import functools

import islpy as isl

from sched.ir.functor import collect
from sched.ir.nodes import Buffer, For, IntImm, Node, PrimFunc
from sched.polyhedral.accesses import unseen_loads
from sched.polyhedral.concurrency_reasons import violation_reason
from sched.polyhedral.conflicts import iterations_touch, storages_touched_across
from sched.polyhedral.cross_thread import (
    REDUCE_TAG,
    CrossThreadReduction,
    cross_thread_reduction,
    stores_every_copy,
)
from sched.polyhedral.dependences import (
    Dependence,
    dependences_where,
    model_and_dependences,
    value_flows,
)
from sched.polyhedral.flow_crossing import statement_params
from sched.polyhedral.isl_expr import isl_name
from sched.polyhedral.kernel_stages import root_stages, stage_of
from sched.polyhedral.model import Loop, Statement, build_model
from sched.polyhedral.private_buffers import PrivateBuffers, allocations
from sched.polyhedral.runs import (
    repeated_instance,
    runs_are_idempotent,
    stores_one_value_in_any_order,
    written_tuples,
)
from sched.polyhedral.time_pairs import (
    carried_at,
    crossing_exists,
    crossing_pairs,
    crossing_times,
    in_program_order,
    in_program_order_by_key,
    one_copy_before_each_read,
    time_pairs,
)
from sched.polyhedral.violation import Violation, describe_instance_pair

# -- the one rule for loops whose iterations run at the same time -------------------------------

CONCURRENT_RULE = """\
The iterations of a loop that runs them at the same time (parallel, vectorized, bound to
blockIdx or threadIdx) may do so iff no dependence is carried by the loop (source and sink in
one iteration of every loop outside it, in different iterations of it), reductions included,
except dependences through
- a buffer private to an iteration: allocated by the function (not a parameter), every access
  under the loop, and no value flowing through it from one iteration of the loop to another or
  into or out of the loop (value-based flow, per run of each statement), so the lowering
  allocates it inside the loop (plan_buffer_allocation); and of a scope each iteration can
  have its own copy of: any for parallel and vectorized loops, "shared" or "local" for
  blockIdx (per thread block), "local" for threadIdx (per thread); the wmma fragment scopes
  and "warp" as "local" (in block IR each thread holds its own whole tile);
- for threadIdx loops, a "shared" buffer when the source runs before the sink in each thread's
  own program (thread loops left out): a barrier between them, which the lowering inserts,
  orders them. Nothing orders global memory between threads: a dependence through it counts.
A threadIdx loop and the other loops bound to the same axis (in one iteration of the loops
around both) run on the same threads, one phase after the other: a dependence between them
on different threads counts as one carried by the loop. Likewise loops bound to the same
blockIdx axis are one kernel's thread blocks: a dependence between them on different blocks
counts (nothing orders thread blocks).
A threadIdx.x loop that is the reduce loop of a cross-thread reduction (cross_thread.py: one
associative update block, the whole reduction of an element under the loop) may carry the
dependences of that block with itself through its output: the lowering combines the threads'
partial results (an allreduce). Its other dependences count as usual."""


def concurrent_kind(loop: For | None = None, kind: str | None = None,
                    thread_tag: str | None = None) -> str | None:
    """"parallel", "vectorized", "blockIdx" or "threadIdx" for a loop whose iterations run
    at the same time (a loop, or its kind and thread tag), else None."""
    if loop is not None:
        kind, thread_tag = loop.kind, loop.thread_tag
    if kind in ("parallel", "vectorized"):
        return kind
    if kind == "thread_binding":
        tag = thread_tag or ""
        if tag.startswith("blockIdx"):
            return "blockIdx"
        if tag.startswith("threadIdx"):
            return "threadIdx"
    return None


def names_a_block(loop) -> bool:
    """Whether `loop` (a model's loop) is bound to blockIdx or threadIdx (an iteration is a
    thread block or a thread of the launch), not to a vthread (a serial loop each thread
    block runs on its own)."""
    return loop.kind == "thread_binding" and not (loop.thread_tag or "").startswith("vthread")


class _Concurrency:
    """The one rule (CONCURRENT_RULE) for one loop of one function."""

    def __init__(self, func: PrimFunc, loop_name: str, kind: str | None,
                 loop: For | None = None, thread_tag: str | None = None) -> None:
        self.func, self.name, self._loop = func, loop_name, loop
        self.model = build_model(func)
        self.statements = [s for s in self.model.statements.values()
                           if any(lp.var.name == loop_name for lp in s.loops)]
        if kind is None and self.statements:
            kind = concurrent_kind(kind=self.target.kind, thread_tag=self.target.thread_tag)
        self.kind = kind or "parallel"
        self.thread_tag = thread_tag or (self.target.thread_tag if self.statements else None)
        self.buffers = PrivateBuffers(self)

    @functools.cached_property
    def deps(self) -> tuple[Dependence, ...]:
        """The dependences with an end under the loop: the rule looks only at those
        (`carried`: both ends for parallel and vectorized loops, one for sibling loops bound
        to the same axis), so only those are computed."""
        under = {id(s) for s in self.statements}
        return dependences_where(
            self.func, lambda source, sink: id(source) in under or id(sink) in under,
            self.model, self.may_count)

    def may_count(self, source: Statement, sink: Statement, storage_tuple: str) -> bool:
        """Whether a dependence between `source` and `sink` (either way) on the storage of
        isl tuple `storage_tuple` may count under the rule, as far as can be told before
        computing it: for two statements under the loop, whether runs under it touch one
        element of the storage across the loop, one writing (`touched_across`), and whether
        the storage is allocated outside the loop or with a scope the iterations share.
        Where it says no, none of the pair's dependences on the storage counts, whatever
        their order."""
        if not (self.under(source) and self.under(sink)):
            return True
        if self.buffers.allocated_inside(self.model.storage_of_tuple(storage_tuple)):
            return False
        return storage_tuple in self.touched_across

    @functools.cached_property
    def touched_across(self) -> frozenset[str]:
        """The storages (isl tuples) of which two runs under the loop, in the pairs of runs
        the rule compares (`carried_key`), touch one element, one writing
        (conflicts.storages_touched_across): in one iteration of the loops outside it (for
        threadIdx: of the blockIdx loops and those outside them, one thread block) and
        different iterations of it."""
        loops = self.statements[0].loops
        index = next(i for i, lp in enumerate(loops) if lp.var.name == self.name)
        same = tuple(range(index))
        if self.kind == "threadIdx":
            blocks = [i for i, lp in enumerate(loops[:index]) if lp.kind == "thread_binding"
                      and (lp.thread_tag or "").startswith("blockIdx")]
            same = tuple(range(max(blocks, default=-1) + 1))
        elif self.kind == "blockIdx":       # (the serial loops in the kernel: carried_key)
            same = tuple(i for i, lp in enumerate(loops[:index]) if names_a_block(lp))
        prefix = tuple(isl_name(lp.var) for lp in loops[:index + 1])
        return storages_touched_across(self.statements, prefix, same,
                                       statement_params(self.model))

    @functools.cached_property
    def carried_key(self) -> tuple:
        """The `time_pairs` key of two runs under the loop that the rule compares."""
        params = f"[{', '.join(self.model.params)}] ->"
        width, position = len(self.statements[0].time), self.target.position
        if self.kind == "threadIdx":
            # the threads run the serial loops of the kernel around this loop each on its
            # own, unsynchronised: only the thread block (and what encloses the kernel) is
            # one iteration for both ends
            return ("threads", width, self.same_block_positions(self.statements[0],
                                                                position), position, params)
        if self.kind == "blockIdx":
            # so do the thread blocks: a serial loop around this one in the kernel runs in
            # each block on its own, and nothing orders one block's iteration t + 1 after
            # another's t (audit helper-128: a stencil over time steps, its columns split
            # over blocks, read its neighbours' columns before they were written)
            return ("threads", width, self.same_grid_positions(self.statements[0], position),
                    position, params)
        return ("carried", width, position, params)

    @functools.cached_property
    def allocations(self) -> dict[str, tuple[Buffer, Node]]:
        return allocations(self.func)

    @property
    def loop(self) -> For:
        """The loop node (found by name only where needed: a walk of the function)."""
        if self._loop is None:
            self._loop = _loops(self.func)[self.name]
        return self._loop

    @property
    def target(self) -> Loop:
        return next(lp for lp in self.statements[0].loops if lp.var.name == self.name)

    @functools.cached_property
    def cross_thread(self) -> CrossThreadReduction | None:
        """The cross-thread reduction this loop is the reduce loop of, if it is one."""
        if self.kind != "threadIdx" or self.thread_tag != REDUCE_TAG or not self.statements:
            return None
        found = cross_thread_reduction(self.func, self.loop)
        return found if isinstance(found, CrossThreadReduction) else None

    def combined_across_threads(self, dep: Dependence) -> bool:
        """Whether `dep` is between two instances of this loop's cross-thread reduction
        through its output: the allreduce orders them (the rule's exception); or, for a loop
        bound to threadIdx.x, a flow from a cross-thread reduction into its thread-private
        output, which the allreduce stores in every thread's copy (`stores_every_copy`)."""
        if dep.kind == "flow" and self.thread_tag == REDUCE_TAG and \
                dep.source.block.name != dep.sink.block.name and \
                stores_every_copy(self.func, dep.source, dep.buffer,
                                  self.loop if self.under(dep.source) else None):
            return True
        if not (dep.source.block.name == dep.sink.block.name and self.under(dep.source)):
            return False
        reduction = self.cross_thread
        return reduction is not None and dep.source.block.name == reduction.block_name \
            and dep.buffer == reduction.storage

    def under(self, statement: Statement) -> bool:
        return any(s is statement for s in self.statements)

    def iterations_share_elements(self) -> bool:
        """conflicts.iterations_touch for this loop, buffers private to an iteration left out
        (asked first with none left out: their privacy costs a value-flow question each)."""
        position, params = self.target.position, statement_params(self.model)
        return iterations_touch(self.statements, position, params) and \
            iterations_touch(self.statements, position, params, self.buffers.tuples())

    def barrier_ordered(self, dep: Dependence, crossing: isl.Map, between: tuple) -> bool:
        """Whether a barrier orders the runs `crossing` (time -> time, in one iteration of the
        loops outside this threadIdx loop, so in one thread block; `time_pairs(between)` of
        `dep`'s runs) of `dep` through a shared buffer: each source run comes before its sink
        run in the threads' program (thread loops left out), so a barrier can stand between
        them."""
        if self.kind != "threadIdx" or dep.buffer not in self.allocations:
            return False
        buffer, _ = self.allocations[dep.buffer]
        if not buffer.scope.startswith("shared"):
            return False
        programs = tuple((len(s.time), self.thread_positions(s))
                         for s in (dep.source, dep.sink))
        params = f"[{', '.join(self.model.params)}] ->"
        # of a flow from a copy whose runs store one value, one copy before each read is
        # enough (time_pairs.one_copy_before_each_read)
        one_copy = dep.kind == "flow" and stores_one_value_in_any_order(self.model, dep.source)
        if dep.key is None:
            return in_program_order(crossing, programs, params) or (one_copy and (
                one_copy_before_each_read(crossing, dep.source.schedule, programs, params,
                                          between)))
        return in_program_order_by_key(dep.key, between, programs, params, one_copy)

    def thread_positions(self, statement: Statement) -> tuple[int, ...]:
        """The time positions of the statement's threadIdx loops, with this loop's when the
        statement is under it (a loop about to be bound)."""
        extra = {self.target.position} if self.under(statement) else set()
        return tuple(sorted(
            {lp.position for lp in statement.loops if lp.kind == "thread_binding"
             and (lp.thread_tag or "").startswith("threadIdx")}
            | (extra & {lp.position for lp in statement.loops})))

    def violation(self) -> Violation | None:
        unseen = self.unseen_read_violation()
        if unseen is not None:
            return unseen
        repeated = self.repeated_runs_violation()
        if repeated is not None:
            return repeated
        if self.kind in ("parallel", "vectorized") and self.statements and \
                not self.iterations_share_elements():
            return None             # no dependence can be carried (conflicts.py)
        for dep in self.deps:
            if self.in_every_block(dep):
                other = dep.sink if self.under(dep.source) else dep.source
                return Violation(
                    f"loop '{self.name}' is bound to {self.thread_tag}, and block "
                    f"{other.block.name} beside it in the same kernel, outside every loop "
                    f"bound to {self.thread_tag}, runs in each of its thread blocks: their "
                    f"{dep.kind} dependence through '{dep.buffer}' goes from one thread block "
                    f"to another, which nothing orders (shared memory is each block's own); "
                    f"compute block {other.block.name} under loop '{self.name}' "
                    f"(sch.compute_at) or bind a loop around both instead",
                    dep, describe_instance_pair(dep, dep.relation))
        for dep, pairs in self.carried():
            if self.under(dep.source) and self.under(dep.sink) and \
                    self.rewrites_only(dep.buffer):
                # name the real conflict: the iterations write the same elements
                dep, pairs = next(((d, p) for d, p in self.carried()
                                   if d.buffer == dep.buffer and d.kind == "output"),
                                  (dep, pairs))
            return Violation(violation_reason(self, dep), dep,
                             describe_instance_pair(dep, pairs))
        return None

    def unseen_read_violation(self) -> Violation | None:
        """A storage that statements under the loop write and that a loop bound, condition,
        let, predicate or binding under it loads: the model has no statement for such a read
        (`accesses.unseen_loads`), so no dependence shows whether another iteration wrote
        what it reads (`for j in range(L[0])` beside the block storing L[vi]: audit
        helper-55, every row ran row 0's count on c)."""
        written = self.model.writers_of_storages(self.statements)
        read = sorted(unseen_loads(self.loop.body) & written.keys())
        if read:
            return Violation(
                f"a loop bound, condition, let, predicate or binding under loop '{self.name}' "
                f"reads '{read[0]}', which blocks under the loop write: the analysis sees no "
                f"such read, so it cannot tell whether one iteration reads what another "
                f"writes; keep the loop serial")
        for sibling in self.sibling_axis_loops():
            under = [s for s in self.model.statements.values()
                     if any(lp.var.name == sibling.loop_var.name for lp in s.loops)]
            crossing = sorted(
                (unseen_loads(sibling.body) & written.keys())
                | (unseen_loads(self.loop.body) & self.model.writers_of_storages(under).keys()))
            if crossing:
                return Violation(
                    f"loops '{self.name}' and '{sibling.loop_var.name}', bound to "
                    f"{self.thread_tag} and {sibling.thread_tag}, run on the same "
                    f"{'threads' if self.kind == 'threadIdx' else 'thread blocks'} one after "
                    f"the other (one "
                    f"kernel), and a loop bound, condition, let, predicate or binding under one "
                    f"reads '{crossing[0]}', which blocks under the other write: the analysis "
                    f"sees no such read, so it cannot tell whether it reads what another "
                    f"{'thread' if self.kind == 'threadIdx' else 'thread block'} writes; "
                    f"write the read as a load in a block's body, or put the loops in "
                    f"separate kernels (no serial loop around both)")
        return None

    def sibling_axis_loops(self) -> list[For]:
        """For a loop bound to a thread (block) axis: the other loops bound to a thread
        (block) axis, this one or another, in its root stage (one kernel), neither inside it
        nor around it. A nest on blockIdx.y and one on blockIdx.x share every thread block
        of the kernel's grid (audit helper-108: an unseen read of what the other nest writes
        raced on cuda-emu)."""
        if self.kind not in ("threadIdx", "blockIdx"):
            return []
        for stage in root_stages(self.func):
            loops = collect(stage, For)
            if not any(lp is self.loop for lp in loops):
                continue
            inside = {id(lp) for lp in collect(self.loop.body, For)}
            return [lp for lp in loops if lp is not self.loop and id(lp) not in inside
                    and lp.kind == "thread_binding"
                    and (lp.thread_tag or "").startswith(self.kind)
                    and not any(x is self.loop for x in collect(lp.body, For))]
        return []

    def repeated_runs_violation(self) -> Violation | None:
        """A statement under the loop whose instances run more than once, in different
        iterations of it (a loop no iteration variable binds: `for t, i: B[vi] = B[vi] * 2`),
        and whose runs are not idempotent (RUNS_RULE): the dependences are those of first
        runs, so the rule would not see the runs of one instance racing. Overwrites of a
        buffer private to an iteration do not count: each iteration runs on its own copy,
        where the values the runs store are those of the function's order as long as what
        they read stays the same (a fragment blockized per loop, whose instances differing
        in a loop its region does not use store one element, each value the same). Nor do
        the runs of a statement that writes only such buffers: each iteration's runs are in
        the function's order on its own copy, which RUNS_RULE proved right in that order (a
        reduction recomputed from its init in overlapping tiles, in a shared or local
        buffer: audit helper-142)."""
        private = self.buffers.tuples()
        for statement in self.statements:
            if statement.runs_once or runs_are_idempotent(self.model, statement) or \
                    runs_are_idempotent(self.model, statement, overwritable=private) or \
                    written_tuples(statement) <= private:
                continue
            schedule = statement.schedule
            again = schedule.reverse().apply_range(schedule)       # time -> time, one instance
            if again.intersect(time_pairs(self.carried_key)).is_empty():
                continue
            return Violation(
                f"loop '{self.name}' runs instances of block {statement.block.name} more than "
                f"once, in different iterations of it (e.g. "
                f"{repeated_instance(statement)}), and each run changes what the next one "
                f"reads or writes: run at the same time, they would race. Keep the loop "
                f"serial, or bind an iteration variable of the block to it")
        return None

    def carried(self):
        """Each dependence that counts under the rule and is carried by the loop, with the
        pairs of instances it relates in different iterations (reductions first)."""
        if not self.statements:
            return
        for dep in sorted(self.deps, key=lambda d: not d.is_reduction):
            if self.under(dep.source) and self.under(dep.sink):
                between = self.carried_key
            else:
                between = self.across_sibling_loops(dep)
                if between is None or self.between_kernels(dep):
                    continue
            if self.combined_across_threads(dep):
                continue
            # whether runs cross first (cheap), then whether the buffer is private (may ask
            # isl for value flows), then the runs themselves
            if not crossing_exists(dep, between) or self.buffers.private(dep.buffer):
                continue
            crossing = crossing_times(dep, between)
            if crossing is None or self.barrier_ordered(dep, crossing, between):
                continue
            yield dep, crossing_pairs(dep, between)

    def in_every_block(self, dep: Dependence) -> bool:
        """For a loop bound to a blockIdx axis (of more than one block): whether `dep` joins a
        statement under it and one of the same root stage (one kernel) under no loop bound to
        that axis. The GPU runs that one in every thread block along the axis, so the
        dependence goes between blocks whatever the order of the function says (the C target,
        which runs it once, cannot show it: found by the fuzz hunt as NaN on cuda-emu). Not a
        dependence through memory each block has its own (shared, local), but for a read
        there by that one of what the loop's statements wrote; nor a flow from that one
        through global memory where its copies store the same values in any order (checked
        by the build, element by element)."""
        if self.kind != "blockIdx" or self.under(dep.source) == self.under(dep.sink):
            return False
        if isinstance(self.loop.extent, IntImm) and self.loop.extent.value == 1:
            return False
        other = dep.sink if self.under(dep.source) else dep.source
        if self.thread_position(other) is not None or \
                stage_of(dep.source, self.func) != stage_of(dep.sink, self.func):
            return False
        if dep.buffer in self.allocations and \
                self.allocations[dep.buffer][0].scope != "global":
            # each block's own memory: only a read there of what the loop's blocks wrote, each
            # in its own, crosses blocks (audit helpers 130, 136)
            return dep.kind == "flow" and other is dep.sink
        if dep.kind != "flow" or other is not dep.source:
            return True
        # a copy every block makes alike into global memory, read under the loop: the build
        # asks its elements (lower/thread_redundancy.py: the copies may not store different
        # values, nor store what the loop's blocks read)
        return not stores_one_value_in_any_order(self.model, dep.source)

    def between_kernels(self, dep: Dependence) -> bool:
        """Whether `dep` goes through global memory between two root stages: a kernel
        boundary orders it when it crosses threads (sched/lower/kernel_sequence.py)."""
        if dep.buffer in self.allocations and \
                self.allocations[dep.buffer][0].scope != "global":
            return False
        return stage_of(dep.source, self.func) != stage_of(dep.sink, self.func)

    def thread_position(self, statement: Statement) -> int | None:
        """The time position of the loop binding `statement` to this loop's thread axis (this
        loop for a statement under it), or None."""
        if self.under(statement):
            return self.target.position
        return next((lp.position for lp in statement.loops
                     if lp.kind == "thread_binding" and lp.thread_tag == self.thread_tag), None)

    def across_sibling_loops(self, dep: Dependence) -> tuple | None:
        """For a loop bound to a thread or block axis: the runs of `dep` between this loop
        and another loop bound to the same axis (one kernel: the two are phases of the same
        threads, or of the same thread blocks), in one iteration of the loops around both, on
        different threads or blocks (as a `time_pairs` key); None if `dep` is not between
        them."""
        if self.kind not in ("threadIdx", "blockIdx") or \
                not (self.under(dep.source) or self.under(dep.sink)):
            return None
        here, there = self.thread_position(dep.source), self.thread_position(dep.sink)
        if here is None or there is None:
            return None
        common = 0
        for a, b in zip(dep.source.loops, dep.sink.loops):
            if a != b or dep.source.time[:a.position + 1] != dep.sink.time[:a.position + 1]:
                break
            common = a.position + 1
        equal = self.same_grid_positions(dep.source, common) if self.kind == "blockIdx" else \
            self.same_block_positions(dep.source, common)
        return ("across", len(dep.source.time), equal, here, there,
                f"[{', '.join(self.model.params)}] ->")

    def same_block_positions(self, statement: Statement, before: int) -> tuple[int, ...]:
        """The time positions before `before` at which two runs on threads of one thread
        block agree: the constants, and the loops up to the innermost blockIdx loop (the
        block, and what encloses the kernel). The serial loops between that and the thread
        loops every thread runs on its own: their iterations are not in step across
        threads (only a barrier orders them, and only through shared memory)."""
        blocks = [lp.position for lp in statement.loops if lp.position < before
                  and lp.kind == "thread_binding" and (lp.thread_tag or "").startswith("blockIdx")]
        last_block = max(blocks, default=-1)
        loops = {lp.position for lp in statement.loops}
        return tuple(q for q in range(before) if q <= last_block or q not in loops)

    def same_grid_positions(self, statement: Statement, before: int) -> tuple[int, ...]:
        """The time positions before `before` at which two runs in thread blocks of one
        launch agree: the constants and the loops bound to a block axis (each names one
        block). A serial loop the kernel holds around them each block runs on its own, and
        so is a vthread loop (read as serial: audit helper-130)."""
        loops = {lp.position: lp for lp in statement.loops if lp.position < before}
        return tuple(q for q in range(before) if q not in loops or names_a_block(loops[q]))

    def rewrites_only(self, storage: str) -> bool:
        """Whether the function allocates `storage` and no value flows through it from one
        iteration of the loop to another: the iterations only reuse the same elements."""
        if storage not in self.allocations or self.kind == "threadIdx" and \
                self.allocations[storage][0].scope.startswith("shared"):
            return False
        flows = value_flows(self.model, storage)
        carried = carried_at(len(self.statements[0].time), self.target.position,
                              f"[{', '.join(self.model.params)}] ->")
        return flows.intersect(isl.UnionMap.from_map(carried)).is_empty()


def _loops(func: PrimFunc) -> dict[str, For]:
    """The loops of `func` by name (the first of a name)."""
    found: dict[str, For] = {}
    for loop in collect(func.body, For):
        found.setdefault(loop.loop_var.name, loop)
    return found


def concurrency_violation(func: PrimFunc, loop_name: str, kind: str | None = None,
                          thread_tag: str | None = None) -> Violation | None:
    """The one rule (CONCURRENT_RULE) for the loop named `loop_name`, as the kind of loop it
    is, or as `kind` ("parallel", "vectorized", "blockIdx", "threadIdx") bound to `thread_tag`
    when given: None when its iterations may run at the same time, else the dependence that
    forbids it."""
    rule = _Concurrency(func, loop_name, kind, thread_tag=thread_tag)
    if not rule.statements and loop_name not in _loops(func):
        raise ValueError(f"no loop named {loop_name!r}")
    return rule.violation()


def check_parallel(func: PrimFunc, block: str, loop: str) -> Violation | None:
    """Whether the iterations of the loop named `loop` around block `block` may run in
    parallel (the one rule, CONCURRENT_RULE, for a parallel loop)."""
    model, _ = model_and_dependences(func)
    owners = model.statements_of_block(block)
    if not owners:
        raise ValueError(f"no block named {block!r}")
    if not any(lp.var.name == loop for lp in owners[0].loops):
        raise ValueError(f"block {block!r} is not under a loop named {loop!r}")
    return concurrency_violation(func, loop, "parallel")



def check_concurrent_loops(func: PrimFunc) -> tuple[str, Violation] | None:
    """The first loop of `func` whose iterations run at the same time (parallel, vectorized,
    bound to blockIdx or threadIdx) but which the one rule (CONCURRENT_RULE) refuses, with the
    dependence; None if there is none.

    A step that moves blocks under such a loop, or moves the loop, must ask this again: the
    loop was checked when it was marked, for what was under it then. The answer does not
    depend on the order of the steps: marking a loop asks the same rule of the same function.
    """
    for loop in collect(func.body, For):
        kind = concurrent_kind(loop)
        if kind is None:
            continue
        violation = _Concurrency(func, loop.loop_var.name, kind, loop).violation()
        if violation is not None:
            return loop.loop_var.name, violation
    return None


"""Legality of a new execution order, and of running a loop's iterations at the same time.

Every schedule primitive and the autoscheduler ask these questions:

- `check_order(func, new_func)`: do the statement instances of `new_func` (the same blocks with
  the same iteration domains, in new loops) still run every dependence's source before its sink?
  The accumulator chain of one element of an associative reduction is exempt: reduce loops may
  be reordered (dependences.py). Instances that run more than once follow RUNS_RULE
  (`check_runs`). `check_schedule(func, schedule)` asks the order question of an isl schedule.
- `concurrency_violation(func, loop)`: may the iterations of a loop run at the same time
  (parallel, vectorized, bound to blockIdx or threadIdx)? One rule, CONCURRENT_RULE, asked when
  a loop is marked (loop_kinds.py, mapping.py) and again after every later step
  (`check_concurrent_loops`), so the answer does not depend on the order of the steps.
  `check_parallel(func, block, loop)` asks it for a parallel loop.

All return None when legal and a `Violation` otherwise, which names the dependence with a
concrete pair of instances: `C[v_i=3] reads A[2] written by C[v_i=2]`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import islpy as isl

from sched.ir.functor import collect
from sched.ir.nodes import Allocate, Block, Buffer, For, Node, PrimFunc
from sched.polyhedral import names
from sched.polyhedral.dependences import (
    Dependence,
    crosses_iterations,
    first_runs,
    last_runs,
    maps,
    model_and_dependences,
    value_flows,
)
from sched.polyhedral.model import Loop, Statement, build_model


@dataclass(frozen=True)
class Violation:
    """A dependence a schedule would break, with one concrete pair of instances."""

    reason: str
    dependence: Dependence | None = None
    example: str = ""

    def __str__(self) -> str:
        if self.dependence is None:
            return self.reason
        dep = self.dependence
        exact = "" if dep.exact else " (conservative: the model over-approximates an access)"
        return f"{dep.kind} dependence on '{dep.buffer}': {self.example}{exact}"


def _values(statement: Statement, point_set: isl.Set) -> str:
    point = point_set.sample_point()
    values = [point.get_coordinate_val(isl.dim_type.set, d).to_python()
              for d in range(point_set.dim(isl.dim_type.set))]
    names = [iv.var.name for iv in statement.block.iter_vars]
    inner = ", ".join(f"{n}={v}" for n, v in zip(names, values))
    return f"{statement.block.name}{' (init)' if statement.is_init else ''}[{inner}]"


def describe_instance_pair(dep: Dependence, pair: isl.Map) -> str:
    """`C[v_i=3] reads A[2] written by C[v_i=2]` for one pair in `pair` (a sub-relation)."""
    point = pair.wrap().lexmin().sample_point()    # the first pair: the easiest to read
    single = isl.Set.from_point(point).unwrap()
    params = [f"{single.get_dim_name(isl.dim_type.param, i)} = "
              f"{point.get_coordinate_val(isl.dim_type.param, i).to_python()}"
              for i in range(single.dim(isl.dim_type.param))]
    source_set, sink_set = single.domain(), single.range()
    source_access = dep.source.writes if dep.kind in ("flow", "output") else dep.source.reads
    sink_access = dep.sink.reads if dep.kind == "flow" else dep.sink.writes
    elements = source_access.intersect_domain(isl.UnionSet.from_set(source_set)).range() \
        .intersect(sink_access.intersect_domain(isl.UnionSet.from_set(sink_set)).range())
    element = ""
    if not elements.is_empty():
        element_point = elements.sample_point()
        element_set = isl.Set.from_point(element_point)
        coords = [element_point.get_coordinate_val(isl.dim_type.set, d).to_python()
                  for d in range(element_set.dim(isl.dim_type.set))]
        element = f"{dep.buffer}[{', '.join(str(c) for c in coords)}]"
    source, sink = _values(dep.source, source_set), _values(dep.sink, sink_set)
    verb = {"flow": f"reads {element} written by",
            "anti": f"overwrites {element} read before by",
            "output": f"writes {element} written before by"}[dep.kind]
    where = f" (with {', '.join(params)})" if params else ""
    return f"{sink} {verb} {source}{where}"


def check_schedule(func: PrimFunc, schedule: isl.UnionMap) -> Violation | None:
    """Whether `schedule` (instances of `func`'s statements -> time) keeps every dependence's
    source before its sink, reduction updates exempt."""
    _, deps = model_and_dependences(func)
    before = schedule.lex_lt_union_map(schedule)
    ordered = [d for d in deps if not d.is_reduction]
    if _union(ordered).is_subset(before):
        return None
    for dep in ordered:
        broken = isl.UnionMap.from_map(dep.relation).subtract(before)
        if not broken.is_empty():
            pair = isl.Map.from_union_map(broken)
            example = describe_instance_pair(dep, pair)
            return Violation(f"the new order runs {dep.sink.block.name} before "
                             f"{dep.source.block.name}", dep, example)
    return None


def _union(deps: list[Dependence]) -> isl.UnionMap:
    result = None
    for dep in deps:
        relation = isl.UnionMap.from_map(dep.relation)
        result = relation if result is None else result.union(relation)
    return result if result is not None else isl.UnionMap("{ }")


def check_order(func: PrimFunc, new_func: PrimFunc, *,
                allow_recompute: bool = False) -> Violation | None:
    """Whether `new_func`, a rescheduled `func`, keeps every dependence of `func`.

    Runs (see `check_runs`): a block instance may run more than once (a producer that
    compute_at recomputes, a binding like `vr = p % 4` over `p < 8`) only when its runs are
    idempotent; the dependences are then checked on first runs, which stand for the instance.
    Unless `allow_recompute` (compute_at may recompute a producer's overlapping elements), a
    block whose instances each ran once must still run each once.
    """
    old_model, _ = model_and_dependences(func)
    new_model = build_model(new_func)
    if not new_model.domain.is_equal(old_model.domain):
        missing = old_model.domain.subtract(new_model.domain)
        extra = new_model.domain.subtract(old_model.domain)
        return Violation(f"the new loops do not run the same block instances (missing: "
                         f"{missing}, added: {extra})")
    violation = check_runs(old_model, new_model, allow_recompute)
    if violation is not None:
        return violation
    schedule = new_model.schedule
    return check_schedule(func, first_runs(schedule))


# -- instances that run more than once -----------------------------------------------------------

RUNS_RULE = """\
An instance that runs more than once is modelled by its first run. That is exact when its runs
are idempotent: nothing it reads is written from its first run to its last (by itself or any
other block), and nothing it writes is written by another run in between; then every run
computes and stores the same values, and only the first matters to the others. A step may
- not make a block that ran each instance once run some more than once (unless compute_at
  asks for it), nor create runs that are not idempotent;
- not change the runs of a block whose runs are not idempotent in the original (a user's
  `vr = p % 4` over `p < 8` accumulating into its output): it stays where it is, with its
  loops, since a step could change how often each instance runs."""


def _time_writes(model) -> isl.UnionMap:
    """time -> element written at that time, for every run of every statement."""
    if "time_writes" not in model.derived:
        result = isl.UnionMap(f"[{', '.join(model.params)}] -> {{ }}")
        for statement in model.statements.values():
            result = result.union(isl.UnionMap.from_map(statement.schedule.reverse())
                                  .apply_range(statement.writes))
        model.derived["time_writes"] = result
    return model.derived["time_writes"]


def repeated_instance(statement: Statement) -> str | None:
    """An instance of `statement` that runs more than once, as text, or None if none does."""
    schedule = statement.schedule
    if schedule.is_single_valued():
        return None
    again = schedule.subtract(first_runs(schedule)).domain()
    point = again.sample_point()
    values = [point.get_coordinate_val(isl.dim_type.set, d).to_python()
              for d in range(len(statement.block.iter_vars))]
    inner = ", ".join(f"{iv.var.name}={v}" for iv, v in zip(statement.block.iter_vars, values))
    return f"{statement.block.name}{' (init)' if statement.is_init else ''}[{inner}]"


def runs_are_idempotent(model, statement: Statement) -> bool:
    """Whether the runs of each instance of `statement` are idempotent (RUNS_RULE); kept
    with the (cached) model, which the next step's check reads again."""
    schedule = statement.schedule
    if schedule.is_single_valued():
        return True
    key = ("runs_are_idempotent", statement.name)
    if key not in model.derived:
        model.derived[key] = _runs_are_idempotent(model, statement, schedule)
    return model.derived[key]


def _runs_are_idempotent(model, statement: Statement, schedule: isl.Map) -> bool:
    first, last = first_runs(schedule), last_runs(schedule)
    times = isl.Set.universe(schedule.get_space().range())
    at_or_after_first = first.apply_range(times.lex_le_set(times))
    before_last = last.apply_range(times.lex_gt_set(times))
    window = at_or_after_first.intersect(before_last)            # [first run, last run)
    writes = _time_writes(model)
    written = isl.UnionMap.from_map(window).apply_range(writes)
    if not written.intersect(statement.reads).is_empty():
        return False                 # a later run would read another value
    between = window.subtract(first).subtract(schedule)       # (first, last), not its own runs
    overwritten = isl.UnionMap.from_map(between).apply_range(writes)
    return overwritten.intersect(statement.writes).is_empty()


def _padded(schedule: isl.Map, width: int) -> isl.Map:
    """`schedule` with time vectors padded with 0 to `width` entries."""
    extra = width - schedule.dim(isl.dim_type.out)
    if extra <= 0:
        return schedule
    schedule = schedule.add_dims(isl.dim_type.out, extra)
    for d in range(width - extra, width):
        schedule = schedule.fix_val(isl.dim_type.out, d, 0)
    return schedule


def _width(old_model, new_model) -> int:
    return max(len(st.time) for model in (old_model, new_model)
               for st in model.statements.values())


def _same_runs(old: Statement, new: Statement, width: int) -> bool:
    """Whether `new` runs each instance at the same times as `old`."""
    return _padded(old.schedule, width).is_equal(_padded(new.schedule, width))


def _others_keep_their_place(old_model, new_model, name: str, width: int) -> bool:
    """Whether every instance of another statement that touches an element the statement
    `name` touches stays on the same side of each of its runs (whose times are unchanged)."""
    statement = old_model.statements[name]
    conflicts = None
    for x in old_model.statements.values():
        if x.name == name:
            continue
        pairs = x.writes.apply_range(statement.reads.union(statement.writes).reverse()).union(
            x.reads.apply_range(statement.writes.reverse()))
        conflicts = pairs if conflicts is None else conflicts.union(pairs)
    if conflicts is None or conflicts.is_empty():
        return True
    runs = isl.UnionMap.from_map(_padded(statement.schedule, width))
    times = isl.Set.universe(_padded(statement.schedule, width).get_space().range())
    later = isl.UnionMap.from_map(times.lex_lt_set(times))

    def sides(model) -> isl.UnionMap:
        others = None
        for x in model.statements.values():
            if x.name == name:
                continue
            first = first_runs(x.schedule)
            part = isl.UnionMap.from_map(_padded(first, width))
            others = part if others is None else others.union(part)
        before = others.apply_range(later)         # x -> the times after x's (first) run
        return conflicts.apply_range(runs).intersect(before)
    return sides(old_model).is_equal(sides(new_model))


def check_runs(old_model, new_model, allow_recompute: bool = False) -> Violation | None:
    """Whether the runs of every statement in `new_model` are allowed (RUNS_RULE), given its
    runs in `old_model`."""
    width = _width(old_model, new_model)
    for name, new in new_model.statements.items():
        old = old_model.statements.get(name)
        if old is None:
            continue
        old_again, new_again = repeated_instance(old), repeated_instance(new)
        if old_again is None and new_again is None:
            continue
        block = new.block.name
        if old_again is not None:
            if not runs_are_idempotent(old_model, old):
                if _same_runs(old, new, width):
                    if _others_keep_their_place(old_model, new_model, name, width):
                        continue
                    return Violation(
                        f"block {block!r} runs some instances more than once ({old_again} "
                        f"among them) and its runs are not idempotent: another block that "
                        f"touches what it touches must stay on the same side of each of its "
                        f"runs")
                return Violation(
                    f"block {block!r} runs some instances more than once ({old_again} among "
                    f"them) and its runs are not idempotent (a later run reads or overwrites "
                    f"what an earlier one or another block wrote in between): a step must not "
                    f"move it or change its loops, since that could change how often each "
                    f"instance runs")
        if new_again is not None:
            if old_again is None and not allow_recompute:
                return Violation(f"the new loops run some instances of block {block!r} more "
                                 f"than once ({new_again} among them)")
            if not runs_are_idempotent(new_model, new):
                return Violation(
                    f"the new loops run some instances of block {block!r} more than once "
                    f"({new_again} among them), and a later run would not compute what the "
                    f"first did (it reads or overwrites what is written in between)")
    return None


@functools.lru_cache(maxsize=256)
def _carried_at(width: int, position: int, params: str) -> isl.Map:
    """{ [t] -> [t'] : t and t' agree before `position` and differ at it }."""
    a = [names.local("a", i) for i in range(width)]
    b = [names.local("b", i) for i in range(width)]
    same = [f"{a[i]} = {b[i]}" for i in range(position)]
    differ = f"{a[position]} != {b[position]}"
    condition = " and ".join(same + [differ])
    return isl.Map(f"{params} {{ [{', '.join(a)}] -> [{', '.join(b)}] : {condition} }}")


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
  blockIdx (per thread block), "local" for threadIdx (per thread);
- for threadIdx loops, a "shared" buffer when the source runs before the sink in each thread's
  own program (thread loops left out): a barrier between them, which the lowering inserts,
  orders them. Nothing orders global memory between threads: a dependence through it counts.
A threadIdx loop and the other loops bound to the same axis (in one iteration of the loops
around both) run on the same threads, one phase after the other: a dependence between them
on different threads counts as one carried by the loop."""


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


_PRIVATE_SCOPES = {"blockIdx": ("shared", "local"), "threadIdx": ("local",)}


def _scope_can_be_private(scope: str, kind: str) -> bool:
    allowed = _PRIVATE_SCOPES.get(kind)
    return allowed is None or any(scope == s or scope.startswith(s + ".") for s in allowed)


def _allocations(func: PrimFunc) -> dict[str, tuple[Buffer, Node]]:
    """Storage name -> (buffer, the Block or Allocate that allocates it), for the buffers the
    function allocates (parameters and their views are not in it)."""
    found: dict[str, tuple[Buffer, Node]] = {}
    for node in collect(func.body, Block):
        for buffer in node.alloc_buffers:
            found.setdefault(buffer.storage_name, (buffer, node))
    for node in collect(func.body, Allocate):
        found.setdefault(node.buffer.storage_name, (node.buffer, node))
    params = {p.storage_name for p in func.params if isinstance(p, Buffer)}
    return {name: v for name, v in found.items() if name not in params}


def _contains(root, target) -> bool:
    return any(node is target for node in collect(root, type(target)))


class _Concurrency:
    """The one rule (CONCURRENT_RULE) for one loop of one function."""

    def __init__(self, func: PrimFunc, loop_name: str, kind: str | None,
                 loop: For | None = None, thread_tag: str | None = None) -> None:
        self.func, self.name, self._loop = func, loop_name, loop
        self.model, self.deps = model_and_dependences(func)
        self.statements = [s for s in self.model.statements.values()
                           if any(lp.var.name == loop_name for lp in s.loops)]
        if kind is None and self.statements:
            kind = concurrent_kind(kind=self.target.kind, thread_tag=self.target.thread_tag)
        self.kind = kind or "parallel"
        self.thread_tag = thread_tag or (self.target.thread_tag if self.statements else None)
        self._private: dict[str, bool] = {}

    @functools.cached_property
    def allocations(self) -> dict[str, tuple[Buffer, Node]]:
        return _allocations(self.func)

    @property
    def loop(self) -> For:
        """The loop node (found by name only where needed: a walk of the function)."""
        if self._loop is None:
            self._loop = _loops(self.func)[self.name]
        return self._loop

    @property
    def target(self) -> Loop:
        return next(lp for lp in self.statements[0].loops if lp.var.name == self.name)

    def under(self, statement: Statement) -> bool:
        return any(s is statement for s in self.statements)

    def private(self, storage: str) -> bool:
        """Whether each iteration of the loop may have its own copy of `storage`."""
        if storage not in self._private:
            self._private[storage] = self._is_private(storage)
        return self._private[storage]

    def _is_private(self, storage: str) -> bool:
        if storage not in self.allocations:
            return False
        buffer, owner = self.allocations[storage]
        if not _scope_can_be_private(buffer.scope, self.kind):
            return False
        if _contains(self.loop.body, owner):
            return True             # allocated inside the loop: a fresh copy per iteration
        if isinstance(owner, Allocate):
            return False            # plan_buffer_allocation moves only a block's buffers
        return self.confined(storage)

    def confined(self, storage: str) -> bool:
        """Every access to `storage` is under the loop, and no value flows through it from
        one iteration of the loop (or of a loop around it) to another."""
        element = self.model.buffer_tuple(storage)
        for statement in self.model.statements.values():
            touched = {m.get_tuple_name(isl.dim_type.out)
                       for m in maps(statement.reads.union(statement.writes))}
            if element in touched and not self.under(statement):
                return False
        flows = value_flows(self.model, storage)
        return not crosses_iterations(self.model, flows, self.target.position)

    def barrier_ordered(self, dep: Dependence, crossing: isl.Map) -> bool:
        """Whether a barrier orders the runs `crossing` (time -> time, in one iteration of the
        loops outside this threadIdx loop, so in one thread block) of `dep` through a shared
        buffer: each source run comes before its sink run in the threads' program (thread loops
        left out), so a barrier can stand between them."""
        if self.kind != "threadIdx" or dep.buffer not in self.allocations:
            return False
        buffer, _ = self.allocations[dep.buffer]
        if not buffer.scope.startswith("shared"):
            return False
        params = self.model.params

        def program(statement: Statement) -> isl.Map:
            extra = {self.target.position} if self.under(statement) else set()
            return _without_thread_loops(statement, params, extra)
        in_program = crossing.apply_domain(program(dep.source)).apply_range(program(dep.sink))
        return in_program.is_subset(in_program.domain().lex_lt_set(in_program.range()))

    def violation(self) -> Violation | None:
        for dep, pairs in self.carried():
            if self.rewrites_only(dep.buffer):
                # name the real conflict: the iterations write the same elements
                dep, pairs = next(((d, p) for d, p in self.carried()
                                   if d.buffer == dep.buffer and d.kind == "output"),
                                  (dep, pairs))
            return Violation(self.reason(dep), dep, describe_instance_pair(dep, pairs))
        return None

    def carried(self):
        """Each dependence that counts under the rule and is carried by the loop, with the
        pairs of instances it relates in different iterations (reductions first)."""
        if not self.statements:
            return
        carried = _carried_at(len(self.statements[0].time), self.target.position,
                              f"[{', '.join(self.model.params)}] ->")
        for dep in sorted(self.deps, key=lambda d: not d.is_reduction):
            if self.under(dep.source) and self.under(dep.sink):
                between = carried
            else:
                between = self.across_sibling_loops(dep)
                if between is None:
                    continue
            in_time = dep.relation.apply_domain(dep.source.schedule) \
                .apply_range(dep.sink.schedule)
            crossing = in_time.intersect(between)
            if crossing.is_empty() or self.private(dep.buffer) \
                    or self.barrier_ordered(dep, crossing):
                continue
            yield dep, dep.relation.intersect(
                crossing.apply_domain(dep.source.schedule.reverse())
                .apply_range(dep.sink.schedule.reverse()))

    def thread_position(self, statement: Statement) -> int | None:
        """The time position of the loop binding `statement` to this loop's thread axis (this
        loop for a statement under it), or None."""
        if self.under(statement):
            return self.target.position
        return next((lp.position for lp in statement.loops
                     if lp.kind == "thread_binding" and lp.thread_tag == self.thread_tag), None)

    def across_sibling_loops(self, dep: Dependence) -> isl.Map | None:
        """For a threadIdx loop: the runs of `dep` between this loop and another loop bound to
        the same axis (one kernel: the two are phases of the same threads), in one iteration
        of the loops around both, on different threads; None if `dep` is not between them."""
        if self.kind != "threadIdx" or not (self.under(dep.source) or self.under(dep.sink)):
            return None
        here, there = self.thread_position(dep.source), self.thread_position(dep.sink)
        if here is None or there is None:
            return None
        common = 0
        for a, b in zip(dep.source.loops, dep.sink.loops):
            if a != b or dep.source.time[:a.position + 1] != dep.sink.time[:a.position + 1]:
                break
            common = a.position + 1
        width = len(dep.source.time)
        a = [names.local("a", i) for i in range(width)]
        b = [names.local("b", i) for i in range(width)]
        same = [f"{a[i]} = {b[i]}" for i in range(common)]
        condition = " and ".join(same + [f"{a[here]} != {b[there]}"])
        return isl.Map(f"[{', '.join(self.model.params)}] -> {{ [{', '.join(a)}] -> "
                       f"[{', '.join(b)}] : {condition} }}")

    def rewrites_only(self, storage: str) -> bool:
        """Whether the function allocates `storage` and no value flows through it from one
        iteration of the loop to another: the iterations only reuse the same elements."""
        if storage not in self.allocations or self.kind == "threadIdx" and \
                self.allocations[storage][0].scope.startswith("shared"):
            return False
        flows = value_flows(self.model, storage)
        carried = _carried_at(len(self.statements[0].time), self.target.position,
                              f"[{', '.join(self.model.params)}] ->")
        return flows.intersect(isl.UnionMap.from_map(carried)).is_empty()

    def reason(self, dep: Dependence) -> str:
        name = self.name
        what = "a reduction" if dep.is_reduction else f"a {dep.kind} dependence"
        reason = f"loop '{name}' carries {what} of block {dep.sink.block.name}"
        if not (self.under(dep.source) and self.under(dep.sink)):
            other = dep.sink if self.under(dep.source) else dep.source
            sibling = next(lp.var.name for lp in other.loops if lp.position ==
                           self.thread_position(other))
            reason = (f"loops '{name}' and '{sibling}', both bound to {self.thread_tag}, run "
                      f"on the same threads one after the other, and {what} goes from one "
                      f"thread to another between them")
        if dep.is_reduction:
            return reason
        storage = dep.buffer
        if self.rewrites_only(storage):
            return (f"every iteration of loop '{name}' rewrites the same elements of "
                    f"'{storage}' (no value flows from one iteration to another, but there is "
                    f"one copy for all of them: {self._why_shared(storage)}); give each "
                    f"iteration its own copy: keep every access to '{storage}' under loop "
                    f"'{name}' (compute_at its producers there, or a cache_read/cache_write "
                    f"at the loop) so that it is allocated inside")
        if self.kind == "threadIdx" and storage not in self.allocations:
            reason += (f" through '{storage}' in {_scope_of(self.func, storage)} memory: "
                       f"nothing orders it between threads (a barrier orders only shared "
                       f"memory)")
        return reason

    def _why_shared(self, storage: str) -> str:
        buffer, _ = self.allocations[storage]
        if not _scope_can_be_private(buffer.scope, self.kind):
            return (f"its scope {buffer.scope!r} has one copy for every iteration of a "
                    f"{self.kind} loop")
        return ("it is also accessed outside the loop, or a value written before the loop "
                "is read in it")


def _scope_of(func: PrimFunc, storage: str) -> str:
    for p in func.params:
        if isinstance(p, Buffer) and p.storage_name == storage:
            return p.scope
    return "global"


def _without_thread_loops(statement: Statement, params: list[str],
                          extra: set[int] = frozenset()) -> isl.Map:
    """{ time -> time with the entries of the statement's threadIdx loops (and those at the
    positions `extra`: a loop about to be bound) set to 0 }: where a run of the statement is
    in one thread's program."""
    thread = {lp.position for lp in statement.loops
              if lp.kind == "thread_binding" and (lp.thread_tag or "").startswith("threadIdx")}
    thread |= set(extra) & {lp.position for lp in statement.loops}
    a = [names.local("a", i) for i in range(len(statement.time))]
    b = ["0" if i in thread else a[i] for i in range(len(statement.time))]
    return isl.Map(f"[{', '.join(params)}] -> {{ [{', '.join(a)}] -> [{', '.join(b)}] }}")


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


def mark_loop(script: str, loop: str) -> str:
    """The printed IR with the line of loop `loop` marked."""
    lines = script.splitlines()
    for index, line in enumerate(lines):
        match = re.match(r"\s*for (.+?) in ", line)
        if match and loop in [name.strip() for name in match.group(1).split(",")]:
            lines[index] = f"{line}  # <-- loop '{loop}'"
            break
    return "\n".join(lines)


def schedule_error(primitive: str, violation: Violation, func: PrimFunc,
                   loop: str | None = None, alternatives: tuple[str, ...] = (),
                   render: bool = True):
    """The ScheduleError for a step refused because of `violation`: the reason, the dependence
    with its counterexample, the IR with `loop` marked, and the alternatives."""
    from sched.errors import ScheduleError

    script = None
    if render:
        script = func.script()
        if loop is not None:
            script = mark_loop(script, loop)
    return ScheduleError(primitive, violation.reason,
                         dependence=str(violation) if violation.dependence else None,
                         ir=script, alternatives=alternatives, render=render)


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

"""Legality of a new execution order, and of running a loop's iterations in parallel.

Every schedule primitive and the autoscheduler ask these two questions:

- `check_order(func, new_func)`: do the statement instances of `new_func` (the same blocks with
  the same iteration domains, in new loops) still run every dependence's source before its sink?
  Dependences between updates of one associative reduction are exempt: reduce loops may be
  reordered. `check_schedule(func, schedule)` asks the same of an isl schedule directly.
- `check_parallel(func, block, loop)`: may the iterations of `loop` (the loop of that name
  around `block`) run at the same time (parallel, vectorized, bound to threads)? Only if no
  dependence, reductions included, is carried by the loop: source and sink in one iteration of
  every loop outside it but in different iterations of it.

Both return None when legal and a `Violation` otherwise, which names the dependence with a
concrete pair of instances: `C[v_i=3] reads A[2] written by C[v_i=2]`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import islpy as isl

from sched.ir.nodes import PrimFunc
from sched.polyhedral.dependences import Dependence, model_and_dependences
from sched.polyhedral.model import Statement, build_model


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

    Unless `allow_recompute` (compute_at may recompute a producer's overlapping elements, and
    checks the runs that matter itself) or `func` already recomputes, every block instance
    must run exactly once: a schedule that runs one twice is refused, since a dependence kept
    by one run may be broken by the other.
    """
    old_model, _ = model_and_dependences(func)
    new_model = build_model(new_func)
    if not new_model.domain.is_equal(old_model.domain):
        missing = old_model.domain.subtract(new_model.domain)
        extra = new_model.domain.subtract(old_model.domain)
        return Violation(f"the new loops do not run the same block instances (missing: "
                         f"{missing}, added: {extra})")
    recomputed_before = not old_model.schedule.is_single_valued()
    if not (allow_recompute or recomputed_before) and not new_model.schedule.is_single_valued():
        return Violation("the new loops run some block instances more than once")
    return check_schedule(func, new_model.schedule)


@functools.lru_cache(maxsize=256)
def _carried_at(width: int, position: int, params: str) -> isl.Map:
    """{ [t] -> [t'] : t and t' agree before `position` and differ at it }."""
    a = [f"a{i}" for i in range(width)]
    b = [f"b{i}" for i in range(width)]
    same = [f"{a[i]} = {b[i]}" for i in range(position)]
    differ = f"{a[position]} != {b[position]}"
    condition = " and ".join(same + [differ])
    return isl.Map(f"{params} {{ [{', '.join(a)}] -> [{', '.join(b)}] : {condition} }}")


def check_parallel(func: PrimFunc, block: str, loop: str,
                   private: frozenset[str] = frozenset()) -> Violation | None:
    """Whether the iterations of the loop named `loop` around block `block` are independent.
    Dependences through the buffers in `private` (storage each iteration has its own copy of:
    a GPU block's shared memory) do not count."""
    model, deps = model_and_dependences(func)
    owners = model.statements_of_block(block)
    if not owners:
        raise ValueError(f"no block named {block!r}")
    target = next((lp for lp in owners[0].loops if lp.var.name == loop), None)
    if target is None:
        raise ValueError(f"block {block!r} is not under a loop named {loop!r}")
    prefix = owners[0].time[:target.position + 1]

    def under(statement: Statement) -> bool:
        return statement.time[:target.position + 1] == prefix and target in statement.loops

    carried = _carried_at(len(owners[0].time), target.position, f"[{', '.join(model.params)}] ->")
    for dep in sorted(deps, key=lambda d: not d.is_reduction):   # name a reduction first
        if dep.buffer in private or not (under(dep.source) and under(dep.sink)):
            continue
        in_time = dep.relation.apply_domain(dep.source.schedule).apply_range(dep.sink.schedule)
        crossing = in_time.intersect(carried)
        if crossing.is_empty():
            continue
        pairs = dep.relation.intersect(
            crossing.apply_domain(dep.source.schedule.reverse())
            .apply_range(dep.sink.schedule.reverse()))
        example = describe_instance_pair(dep, pairs)
        what = "a reduction" if dep.is_reduction else f"a {dep.kind} dependence"
        return Violation(f"loop '{loop}' carries {what} of block {dep.sink.block.name}", dep,
                         example)
    return None


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
    bound to blockIdx) but which carries a dependence, with the dependence; None if none does.

    A step that moves blocks under such a loop, or moves the loop, must ask this again: the
    loop was checked when it was marked, for what was under it then. Loops bound to threadIdx
    are left out: threads of a block may communicate through shared memory, with barriers;
    and each thread block has its own shared and local buffers.
    """
    from sched.ir.functor import collect
    from sched.ir.nodes import Block, BlockRealize, For

    per_block = frozenset(b.name for block in collect(func.body, Block)
                          for b in block.alloc_buffers if b.scope in ("shared", "local"))
    for loop in collect(func.body, For):
        concurrent = loop.kind in ("parallel", "vectorized") or (
            loop.kind == "thread_binding" and (loop.thread_tag or "").startswith("blockIdx"))
        if not concurrent:
            continue
        blocks = collect(loop.body, BlockRealize)
        if not blocks:
            continue
        gpu_block = loop.kind == "thread_binding"
        violation = check_parallel(func, blocks[0].block.name, loop.loop_var.name,
                                   per_block if gpu_block else frozenset())
        if violation is not None:
            return loop.loop_var.name, violation
    return None

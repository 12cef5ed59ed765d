"""The words of a refusal by the one rule for concurrent loops (concurrency.py): what the
carried dependence is, between which loops, through which memory, and how to fix the
schedule (a scope to share, a block to compute at the loop, loops to bind alike).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sched.ir.nodes import Buffer, PrimFunc
from sched.ir.paths import feeds_reduction, unindexed_variables
from sched.polyhedral.dependences import Dependence
from sched.polyhedral.private_buffers import scope_can_be_private

if TYPE_CHECKING:
    from sched.polyhedral.concurrency import _Concurrency


def violation_reason(rule: _Concurrency, dep: Dependence) -> str:
    """Why `rule`'s loop may not run its iterations at the same time, `dep` being the
    dependence it carries: the sentence a refusal opens with, and how to fix the schedule."""
    name = rule.name
    article = "an" if dep.kind in ("anti", "output") else "a"
    what = "a reduction" if dep.is_reduction else f"{article} {dep.kind} dependence"
    reason = f"loop '{name}' carries {what} of block {dep.sink.block.name}"
    spatial = dep.is_reduction and not feeds_reduction(rule.func, name,
                                                       dep.sink.block.name)
    unindexed = spatial and unindexed_variables(rule.func, name, dep.sink.block.name)
    if unindexed:
        # (helper-162: the non-affine wording for `C[vi] += A[vi, vj, vk]`)
        reason = (f"iterations of loop '{name}' update the same elements of the "
                  f"reduction of block {dep.sink.block.name}: the loop binds its "
                  f"variable{'s' if len(unindexed) > 1 else ''} {', '.join(unindexed)}, "
                  f"which no index of what it writes holds")
    elif spatial:
        # (helper-86: a fused spatial loop over a symbolic dim, `vb = f // (10 * n)`)
        reason = (f"iterations of loop '{name}' may update one element of the reduction "
                  f"of block {dep.sink.block.name} as far as the analysis can tell: the "
                  f"loop binds none of its reduce variables, but a binding the analysis "
                  f"cannot follow exactly (not affine) keeps it from telling their "
                  f"elements apart")
    if not (rule.under(dep.source) and rule.under(dep.sink)):
        other = dep.sink if rule.under(dep.source) else dep.source
        sibling = next(lp.var.name for lp in other.loops if lp.position ==
                       rule.thread_position(other))
        unit = "thread" if rule.kind == "threadIdx" else "thread block"
        reason = (f"loops '{name}' and '{sibling}', both bound to {rule.thread_tag}, run "
                  f"on the same {unit}s one after the other (one kernel), and {what} goes "
                  f"from one {unit} to another between them")
    if dep.is_reduction:
        return reason
    storage = dep.buffer
    # (between sibling loops a value may flow from one loop's thread to the other's:
    # `rewrites_only` looks at iterations of this loop only)
    if rule.under(dep.source) and rule.under(dep.sink) and rule.rewrites_only(storage):
        return (f"every iteration of loop '{name}' rewrites the same elements of "
                f"'{storage}' (no value flows from one iteration to another, but there is "
                f"one copy for all of them: {_why_shared(rule, storage)}); give each "
                f"iteration its own copy: keep every access to '{storage}' under loop "
                f"'{name}' (compute_at its producers there, or a cache_read/cache_write "
                f"at the loop) so that it is allocated inside")
    if rule.kind == "threadIdx" and storage not in rule.allocations:
        reason += (f" through '{storage}' in {_scope_of(rule.func, storage)} memory: "
                   f"nothing orders it between threads (a barrier orders only shared "
                   f"memory)")
    elif rule.kind == "threadIdx" and \
            not rule.allocations[storage][0].scope.startswith("shared") and \
            not (rule.under(dep.source) and rule.under(dep.sink)):
        writer = dep.source if dep.kind != "anti" else dep.sink
        index = next((n for n, region in enumerate(writer.block.writes)
                      if region.buffer.storage_name == storage), 0)
        reason += (f" through '{storage}' in {rule.allocations[storage][0].scope} memory, "
                   f"which nothing orders between threads; in shared memory a barrier "
                   f"orders it: sch.set_scope(sch.get_block('{writer.block.name}'), "
                   f"{index}, 'shared')")
    elif rule.kind == "blockIdx" and not (rule.under(dep.source) and rule.under(dep.sink)):
        reason += (f" through '{storage}': nothing orders thread blocks in one kernel; map "
                   f"both loops so that each block uses what it produced itself, or "
                   f"compute the producer at the consumer's block loop (sch.compute_at)")
    return reason


def _why_shared(rule: _Concurrency, storage: str) -> str:
    buffer, _ = rule.allocations[storage]
    if not scope_can_be_private(buffer.scope, rule.kind):
        return (f"its scope {buffer.scope!r} has one copy for every iteration of a "
                f"{rule.kind} loop")
    around = rule.buffers.declared_around(storage)
    if around is not None:
        return (f"block {around!r} around the loop names it in its reads or writes, so it "
                f"is allocated outside the loop")
    return ("it is also accessed outside the loop, or a value written before the loop "
            "is read in it")


def _scope_of(func: PrimFunc, storage: str) -> str:
    for p in func.params:
        if isinstance(p, Buffer) and p.storage_name == storage:
            return p.scope
    return "global"

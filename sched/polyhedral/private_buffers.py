"""Buffers private to an iteration of a concurrent loop: the concurrency rule's exception
(concurrency.CONCURRENT_RULE). A buffer the function allocates may have one copy per
iteration where its scope allows it for the loop's kind and either it is allocated inside the
loop, or every access to it is under the loop and no value flows through it from one
iteration of the loop (or of a loop around it) to another (flow_crossing.py), so the lowering
allocates it inside (plan_buffer_allocation).
"""

from __future__ import annotations

import islpy as isl

from sched.ir.functor import collect
from sched.ir.nodes import TENSOR_CORE_SCOPES, Allocate, Block, Buffer, Node, PrimFunc
from sched.polyhedral.flow_crossing import flows_cross
from sched.polyhedral.isl_text import maps

_PRIVATE_SCOPES = {"blockIdx": ("shared", "local", *TENSOR_CORE_SCOPES),
                   "threadIdx": ("local", *TENSOR_CORE_SCOPES)}


def scope_can_be_private(scope: str, kind: str) -> bool:
    """Whether a buffer of `scope` can have a copy per iteration of a loop of `kind`."""
    allowed = _PRIVATE_SCOPES.get(kind)
    return allowed is None or any(scope == s or scope.startswith(s + ".") for s in allowed)


def allocations(func: PrimFunc) -> dict[str, tuple[Buffer, Node]]:
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


def contains(root, target) -> bool:
    return any(node is target for node in collect(root, type(target)))


class PrivateBuffers:
    """Which buffers are private to an iteration of the loop of one concurrency rule (a
    concurrency._Concurrency: its function, model, loop, kind and statements under it)."""

    def __init__(self, rule) -> None:
        self.rule = rule
        self._private: dict[str, bool] = {}

    def allocated_inside(self, storage: str) -> bool:
        """Whether `storage` is allocated inside the loop, with a scope each iteration can
        have its own copy of: a fresh copy per iteration, with no question to isl."""
        rule = self.rule
        if storage not in rule.allocations:
            return False
        buffer, owner = rule.allocations[storage]
        return scope_can_be_private(buffer.scope, rule.kind) and \
            contains(rule.loop.body, owner)

    def private(self, storage: str) -> bool:
        """Whether each iteration of the loop may have its own copy of `storage`."""
        if storage not in self._private:
            self._private[storage] = self._is_private(storage)
        return self._private[storage]

    def _is_private(self, storage: str) -> bool:
        rule = self.rule
        if storage not in rule.allocations:
            return False
        buffer, owner = rule.allocations[storage]
        if not scope_can_be_private(buffer.scope, rule.kind):
            return False
        if contains(rule.loop.body, owner):
            return True             # allocated inside the loop: a fresh copy per iteration
        if isinstance(owner, Allocate):
            return False            # plan_buffer_allocation moves only a block's buffers
        return self.confined(storage)

    def tuples(self) -> frozenset[str]:
        """The isl tuples of the storages the statements under the loop touch that are
        private to an iteration (`private`)."""
        rule = self.rule
        touched = {m.get_tuple_name(isl.dim_type.out) for s in rule.statements
                   for m in maps(s.reads.union(s.writes))}
        return frozenset(rule.model.buffer_tuple(storage) for storage in rule.allocations
                         if rule.model.buffer_tuple(storage) in touched
                         and self.private(storage))

    def declared_around(self, storage: str) -> str | None:
        """For a CPU loop (parallel, vectorized: plan_buffer_allocation makes the copy per
        iteration), the name of a block around the loop that names `storage` in its reads
        or writes (blockize's block of the loop or of one around it), which keeps one copy
        for all iterations; None where there is none, and for a GPU loop (CUDA declares
        shared and local storage per thread block and thread wherever the declaration is)."""
        rule = self.rule
        if rule.kind in _PRIVATE_SCOPES:
            return None
        loop = rule.loop
        return next((block.name for block in collect(rule.func.body, Block)
                     if any(region.buffer.storage_name == storage
                            for region in (*block.reads, *block.writes))
                     and contains(block.body, loop)), None)

    def confined(self, storage: str) -> bool:
        """Every access to `storage` is under the loop, and no value flows through it from
        one iteration of the loop (or of a loop around it) to another. For a CPU loop
        (parallel, vectorized), the copy per iteration is plan_buffer_allocation's, which
        counts a block's declared regions as accesses from around the block: a block around
        the loop (blockize's) that declares the storage keeps it outside, shared."""
        rule = self.rule
        if self.declared_around(storage) is not None:
            return False
        element = rule.model.buffer_tuple(storage)
        touching = []
        for statement in rule.model.statements.values():
            touched = {m.get_tuple_name(isl.dim_type.out)
                       for m in maps(statement.reads.union(statement.writes))}
            if element in touched:
                if not rule.under(statement):
                    return False
                touching.append(statement)
        # a flow between runs in different iterations of the loops up to a position is one
        # between different iterations of the loops up to any later position: where none
        # crosses the innermost concurrent loop around every access, none crosses this one
        # (the same answer for each concurrent loop around them, asked once)
        position = rule.target.position
        inner = _innermost_common_concurrent(touching)
        if inner > position and not flows_cross(rule.model, storage, inner):
            return True
        return not flows_cross(rule.model, storage, position)


def _innermost_common_concurrent(statements) -> int:
    """The time position of the innermost concurrent loop around all of `statements`, or -1
    where there is none."""
    from sched.polyhedral.concurrency import concurrent_kind  # (it imports this module)

    common = None
    for statement in statements:
        loops = {(lp.position, lp.var.name) for lp in statement.loops
                 if concurrent_kind(kind=lp.kind, thread_tag=lp.thread_tag) is not None}
        common = loops if common is None else common & loops
    return max((position for position, _ in common or ()), default=-1)

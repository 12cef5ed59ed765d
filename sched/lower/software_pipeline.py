"""Software pipelining: a loop annotated with `software_pipeline_stage` (and
`software_pipeline_order`, `software_pipeline_async_stages`; TVM's names) becomes a prologue,
a steady-state loop and an epilogue in which each statement of the body runs `stage`
iterations behind the statements of stage 0, in the annotated order; buffers that a later
stage reads are multi-buffered (polyhedral/software_pipeline.py says how many copies and
proves the new order keeps every dependence: `check_software_pipelines`, the first step of
`lower`).

    for k in range(4):                    # stages [0, 1], order [0, 1]
        S = T.decl_buffer((16,), scope="shared")
        S[tx] = A[k * 16 + tx]            # (copy, stage 0)
        C[...] += S[...]                  # (compute, stage 1)

becomes, with S in two copies, iteration k using copy k % 2:

    S = T.decl_buffer((2, 16), scope="shared")
    S[0, tx] = A[tx]                      # prologue: the copy of iteration 0
    for k in T.serial(1, 4):              # steady state: copy k while computing k - 1
        S[k % 2, tx] = A[k * 16 + tx]
        C[...] += S[(k - 1) % 2, ...]
    C[...] += S[1, ...]                   # epilogue: the compute of iteration 3

Body-iteration j runs statement c for iteration j - stage(c); the prologue and the epilogue are
the first and last `max stage` body-iterations, each statement guarded by whether its
iteration is one of the loop's (decided here for a constant extent; an `if` for a symbolic
one). Barriers between threads come from insert_barriers, which runs next.

Asynchronous stages (CUDA target): the statements of a stage in
`software_pipeline_async_stages` that only copy global memory into shared memory are wrapped
in `AsyncCopy` (their shared-memory copies from
global memory become `cp.async`, sched/cuda/async_copy.py), each followed by an `AsyncCommit`
in every body-iteration, whether or not it ran (an empty group keeps the count of groups the
same in the prologue, steady state and epilogue). Before a statement that touches what an
asynchronous statement wrote comes `AsyncWait(n)` and a barrier, `n` being the number of
groups committed since the one it needs (those may stay in flight). On the C target the same
statements are plain copies: nothing to wait for.
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.functor import IRMutator, collect, substitute
from sched.ir.nodes import (
    Allocate,
    AsyncCommit,
    AsyncCopy,
    AsyncWait,
    Barrier,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    IfThenElse,
    IntImm,
    PrimFunc,
    Stmt,
    binary,
    const,
    logical_and,
    seq,
)
from sched.ir.simplify import simplify
from sched.polyhedral.software_pipeline import (
    KEYS,
    PRIMITIVE,
    PipelinePlan,
    accessed,
    buffer_versions,
    pipeline_body,
    pipeline_violation,
    read_plan,
)
from sched.polyhedral.violation import schedule_error


def check_software_pipelines(func: PrimFunc) -> PrimFunc:
    """`func` unchanged, once the annotations of each pipelined loop are proven to keep its
    dependences (a ScheduleError names the two blocks otherwise)."""
    for loop in collect(func.body, For):
        plan = read_plan(loop)
        if plan is None:
            continue
        violation = pipeline_violation(func, loop.loop_var.name, plan)
        if violation is not None:
            raise schedule_error(PRIMITIVE, violation, func, loop=loop.loop_var.name)
    return func


def inject_software_pipelines(func: PrimFunc, target: str) -> PrimFunc:
    """`func` (loop IR, thread loops unified) with each annotated loop pipelined (see the
    module doc); asynchronous copies only for the "cuda" target."""
    if not any(read_plan(loop) for loop in collect(func.body, For)):
        return func
    params = {b.name for b in func.buffers}
    body = _Pipeliner(target == "cuda", params).visit(func.body)
    return dataclasses.replace(func, body=body)


class _Pipeliner(IRMutator):
    def __init__(self, use_async: bool, params: set[str]) -> None:
        self.use_async = use_async
        self.params = params

    def visit_For(self, loop: For):
        # outer loops first: an annotation counts the statements of the loop's body as
        # written, where a pipelined loop inside is one statement (its own prologue and
        # epilogue, made after, live in each copy of it); the stripped steady loop is not
        # pipelined again
        plan = read_plan(loop)
        if plan is None:
            return self.visit_children(loop)
        return self.visit(_pipeline(loop, plan, self.use_async, self.params))


def _pipeline(loop: For, plan: PipelinePlan, use_async: bool, params: set[str]) -> Stmt:
    allocations, children = pipeline_body(loop)
    if len(children) != len(plan.stages):
        raise ScheduleError(PRIMITIVE, f"loop {loop.loop_var.name!r}: its body has "
                            f"{len(children)} statements once lowered but the annotations "
                            f"give {len(plan.stages)}: annotate the loop after the last step "
                            f"that changes its body")
    versions = buffer_versions(children, plan, [b.name for b in allocations])
    versioned = {b.name: dataclasses.replace(b, shape=(IntImm(versions[b.name]), *b.shape))
                 for b in allocations if b.name in versions}
    others = [name for name in _local_names(children) if name not in params]
    missing = set(buffer_versions(children, plan, others)) - set(versioned)
    if missing:
        raise ScheduleError(PRIMITIVE, f"loop {loop.loop_var.name!r}: buffer(s) "
                            f"{sorted(missing)} would need several copies but are not "
                            f"allocated in the loop body")
    children = [_Versioner(loop, versioned, versions).visit(c) for c in children]
    steps = _Steps(loop, plan, children, use_async)
    stage_count = plan.max_stage
    lo, extent = loop.min, loop.extent
    body: list[Stmt] = []
    for e in range(stage_count):                                       # prologue
        body += steps.iteration(simplify(lo + e), guarded=True)
    steady_extent = simplify(_max(extent - stage_count, 0))
    if not (isinstance(steady_extent, IntImm) and steady_extent.value == 0):
        annotations = tuple((k, v) for k, v in loop.annotations if k not in KEYS)
        steady = seq(*steps.iteration(loop.loop_var, guarded=False))
        body.append(dataclasses.replace(loop, min=simplify(lo + stage_count),
                                        extent=steady_extent, body=steady,
                                        annotations=annotations))
    start = simplify(lo + _max(extent, stage_count))
    for e in range(stage_count):                                       # epilogue
        body += steps.iteration(simplify(start + e), guarded=True)
    if steps.async_children:
        body.append(AsyncWait(0))
    result = seq(*body)
    for buffer in reversed(allocations):
        result = Allocate(versioned.get(buffer.name, buffer), result)
    return result


def _max(a: Expr, b: int) -> Expr:
    return simplify(binary("max", a, const(b, a.dtype)))


def _local_names(children) -> list[str]:
    """Storage names of buffers allocated inside the children (never versioned: each lives
    within one statement) excluded: the names of every other non-parameter buffer they use
    are what may need copies."""
    inner = {a.buffer.name for c in children for a in collect(c, Allocate)}
    names = set()
    for child in children:
        reads, writes = accessed(child)
        names |= reads | writes
    return sorted(names - inner)


class _Versioner(IRMutator):
    """Accesses of multi-buffered buffers with the copy of the iteration in front:
    `S[i]` -> `S[(k - lo) % versions, i]`."""

    def __init__(self, loop: For, versioned: dict[str, Buffer], versions: dict[str, int]):
        self.versioned = versioned
        self.copy = {name: simplify((loop.loop_var - loop.min) % versions[name])
                     for name in versioned}

    def visit_BufferLoad(self, node: BufferLoad):
        node = self.visit_children(node)
        if node.buffer.name not in self.versioned:
            return node
        return BufferLoad(self.versioned[node.buffer.name],
                          (self.copy[node.buffer.name], *node.indices))

    def visit_BufferStore(self, node: BufferStore):
        node = self.visit_children(node)
        if node.buffer.name not in self.versioned:
            return node
        return BufferStore(self.versioned[node.buffer.name], node.value,
                           (self.copy[node.buffer.name], *node.indices))


def _is_copy_to_shared(stmt: Stmt) -> bool:
    """Whether every store in `stmt` copies global memory into shared memory, reading nothing
    else and with no barrier inside: what may land late, up to its wait. A statement of an
    asynchronous stage that does more stays synchronous (it is complete before the wait
    anyway; insert_barriers does not look inside an AsyncCopy)."""
    stores = collect(stmt, BufferStore)
    return bool(stores) and not collect(stmt, Barrier) and all(
        store.buffer.scope == "shared" and isinstance(store.value, BufferLoad)
        and store.value.buffer.scope == "global" for store in stores) and all(
        load.buffer.scope == "global" for load in collect(stmt, BufferLoad))


class _Steps:
    """The statements of one body-iteration, with their guards, copies and waits."""

    def __init__(self, loop: For, plan: PipelinePlan, children, use_async: bool) -> None:
        self.loop, self.plan, self.children = loop, plan, children
        self.order = sorted(range(len(children)), key=lambda c: plan.orders[c])
        self.async_children = [c for c in range(len(children))
                               if use_async and plan.stages[c] in plan.async_stages
                               and _is_copy_to_shared(children[c])]
        self.waits = self._waits()

    def iteration(self, j: Expr, guarded: bool) -> list[Stmt]:
        """Body-iteration `j`: each statement for iteration j - stage, in order."""
        loop, out = self.loop, []
        for c in self.order:
            iteration = simplify(j - self.plan.stages[c]) if self.plan.stages[c] else j
            stmt = substitute(self.children[c], {loop.loop_var: iteration})
            if guarded:
                runs = simplify(logical_and(iteration >= loop.min,
                                            iteration < loop.min + loop.extent))
                if isinstance(runs, IntImm):
                    stmt = stmt if runs.value else None
                else:
                    stmt = IfThenElse(runs, stmt)
            if c in self.waits and stmt is not None:
                out += [AsyncWait(self.waits[c]), Barrier()]
            if c in self.async_children:
                out += ([AsyncCopy(stmt)] if stmt is not None else []) + [AsyncCommit()]
            elif stmt is not None:
                out.append(stmt)
        return out

    def _waits(self) -> dict[int, int]:
        """Statement -> the groups it lets stay in flight, for each statement that touches a
        buffer an asynchronous statement (another one) writes, or writes a buffer it reads
        (a copy reads its source when it lands, at the wait: a statement zeroing the source
        after the copy's issue zeroed the copy; audit helper-188)."""
        access = [accessed(child) for child in self.children]
        waits: dict[int, int] = {}
        for r, (reads, writes) in enumerate(access):
            for w in self.async_children:
                if w == r or not (access[w][1] & (reads | writes) or access[w][0] & writes):
                    continue
                count = self._groups_between(w, r)
                waits[r] = min(waits.get(r, count), count)
        return waits

    def _groups_between(self, w: int, r: int) -> int:
        """Commit groups between the latest run of w before r's (same iteration, or the one
        before where w comes after r) and r, counted in body-iterations relative to r's
        iteration."""
        stages, orders = self.plan.stages, self.plan.orders
        start = stages[w]
        while (start, orders[w]) >= (stages[r], orders[r]):
            start -= 1
        count = 0
        for a in self.async_children:
            for b in range(start, stages[r] + 1):
                if (start, orders[w]) < (b, orders[a]) < (stages[r], orders[r]):
                    count += 1
        return count

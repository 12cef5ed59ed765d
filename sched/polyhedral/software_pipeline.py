"""Legality of a software pipeline: the loop annotations `software_pipeline_stage` and
`software_pipeline_order` (TVM's names and meaning) checked against the dependences.

A pipelined loop `for k in range(lo, lo + n)` whose body is the statements c_0 .. c_{m-1}
(stage s_c, order o_c) runs, in its body-iteration j, each c (in increasing o_c) for the
iteration k = j - s_c, when that is one of the loop's: a statement of stage s runs s
iterations behind the statements of stage 0. An instance of c at iteration k, at time
(..., k, c, ...) in the loop, runs at (..., k + s_c, o_c, ...) instead.

A buffer that one statement writes and a statement of a later stage reads gets
`versions` copies, iteration k using copy (k - lo) % versions (multi-buffering), so that the
writes for later iterations do not overwrite what a later stage has still to read
(`buffer_versions`). That is legal when the buffer is private to an iteration: every value
read in iteration k was written in iteration k, and nothing outside the loop touches it.

`pipeline_violation` proves the rest with isl: every dependence between two instances of the
loop's statements (on a multi-buffered buffer, only the pairs that touch the same copy) keeps
its source before its sink in the new times; reduction updates are exempt as elsewhere. The
lowering (lower/software_pipeline.py) reads the annotations with `read_plan` and calls the
same check, so a function annotated by hand, or changed by a step after the annotation, is
checked too.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from sched.errors import ScheduleError
from sched.ir.extern import ADDRESS_OF
from sched.ir.functor import IRVisitor, collect
from sched.ir.nodes import (
    Allocate,
    BlockRealize,
    BufferLoad,
    BufferStore,
    Call,
    For,
    PrimFunc,
    SeqStmt,
    Stmt,
)
from sched.polyhedral.accesses import unseen_loads
from sched.polyhedral.dependences import first_runs, model_and_dependences
from sched.polyhedral.flow_crossing import flows_cross
from sched.polyhedral.isl_text import read_map
from sched.polyhedral.time_pairs import without_thread_loops
from sched.polyhedral.violation import Violation, describe_instance_pair

STAGE = "software_pipeline_stage"
ORDER = "software_pipeline_order"
ASYNC_STAGES = "software_pipeline_async_stages"
KEYS = (STAGE, ORDER, ASYNC_STAGES)
PRIMITIVE = "software_pipeline"


@dataclass(frozen=True)
class PipelinePlan:
    """What the annotations of one loop ask for, checked for shape (not for dependences)."""

    stages: tuple[int, ...]
    orders: tuple[int, ...]
    async_stages: tuple[int, ...]
    order_given: bool = True    # False: the loop has no software_pipeline_order (the body's)

    @property
    def max_stage(self) -> int:
        return max(self.stages)

    def describe(self) -> str:
        order = f"order {list(self.orders)}" if self.order_given else \
            f"the body's order {list(self.orders)} (the loop has no {ORDER} yet)"
        return f"stages {list(self.stages)}, {order}"


def pipeline_body(loop: For) -> tuple[list, tuple[Stmt, ...]]:
    """(the allocations around the body's sequence, the sequence's statements) of a loop; a
    body that is not a sequence is one statement."""
    allocations, body = [], loop.body
    while isinstance(body, Allocate):
        allocations.append(body.buffer)
        body = body.body
    return allocations, (body.stmts if isinstance(body, SeqStmt) else (body,))


def read_plan(loop: For, primitive: str = PRIMITIVE, require_stage: bool = True
              ) -> PipelinePlan | None:
    """The plan of `loop`'s annotations (None when it has none, or only an order while
    `require_stage` is False); a ScheduleError when they do not fit its body."""
    values = dict(loop.annotations)
    if not any(key in values for key in KEYS):
        return None
    name = loop.loop_var.name
    _, children = pipeline_body(loop)
    count = len(children)
    if STAGE not in values:
        if not require_stage:
            return None
        present = ", ".join(k for k in KEYS if k in values)
        raise ScheduleError(primitive, f"loop {name!r} has {present} but no {STAGE}: "
                            f"annotate it too, one stage per statement of the body "
                            f"(sch.annotate(loop, {STAGE!r}, [0] * {count}))")
    _refuse_one_block_of_several_statements(name, children, primitive)
    if loop.kind not in ("serial", "unrolled"):
        raise ScheduleError(primitive, f"loop {name!r} is {loop.kind}: only a serial loop can "
                            f"be software-pipelined (its iterations run one after another)")
    stages = _int_list(values[STAGE], STAGE, name, primitive)
    orders = _int_list(values.get(ORDER, tuple(range(len(stages)))), ORDER, name, primitive)
    async_stages = _int_list(values.get(ASYNC_STAGES, ()), ASYNC_STAGES, name, primitive)
    for key, items in ((STAGE, stages), (ORDER, orders)):
        if len(items) != count:
            raise ScheduleError(primitive, f"{key} of loop {name!r} has {len(items)} "
                                f"entries, but the loop body has {count} statement"
                                f"{'s' if count != 1 else ''} ({_summary(children)}): give one "
                                f"entry per statement")
    if any(s < 0 for s in stages):
        raise ScheduleError(primitive, f"{STAGE} of loop {name!r} is {list(stages)}: stages "
                            f"are numbers >= 0")
    if sorted(orders) != list(range(count)):
        raise ScheduleError(primitive, f"{ORDER} of loop {name!r} is {list(orders)}: it must "
                            f"give each statement a distinct position 0..{count - 1}")
    unknown = [s for s in async_stages if s not in stages or s == max(stages)]
    if unknown:
        raise ScheduleError(primitive, f"{ASYNC_STAGES} of loop {name!r} names {unknown}: an "
                            f"asynchronous stage must be one of the stages {sorted(set(stages))} "
                            f"other than the last (a later stage consumes what it copies)")
    return PipelinePlan(stages, orders, async_stages, ORDER in values)


def _int_list(value, key: str, loop: str, primitive: str) -> tuple[int, ...]:
    if isinstance(value, list):
        value = tuple(value)
    if not isinstance(value, tuple) or not all(type(v) is int for v in value):
        raise ScheduleError(primitive, f"{key} of loop {loop!r} must be a list of ints, got "
                            f"{value!r}")
    return value


def _refuse_one_block_of_several_statements(name: str, children, primitive: str) -> None:
    """Refuse a loop whose body is one block that the lowering runs as several statements (its
    init and its update, or the statements of its body): the stages, one per statement of the
    body, would be counted on the block here and on its statements once lowered."""
    if len(children) != 1 or not isinstance(children[0], BlockRealize):
        return
    block = children[0].block
    body = len(block.body.stmts) if isinstance(block.body, SeqStmt) else 1
    if body + (block.init is not None) < 2:
        return
    parts = (["its init"] if block.init is not None else []) + \
        ([f"the {body} statements of its body"] if body > 1 else ["its update"])
    fix = (f"sch.decompose_reduction(sch.get_block({block.name!r}), loop) puts the init in a "
           f"block of its own" if block.init is not None else
           f"annotate a loop inside block {block.name!r}, whose body is the sequence")
    raise ScheduleError(primitive, f"loop {name!r} holds one block, {block.name!r}, which runs "
                        f"as several statements ({' and '.join(parts)}): a pipeline needs a "
                        f"body that is a sequence of statements, one stage each; {fix}")


def _summary(children) -> str:
    names = []
    for child in children:
        stores = collect(child, BufferStore)
        names.append(stores[0].buffer.name if stores else type(child).__name__)
    return "writing " + ", ".join(names)


def accessed(stmt: Stmt) -> tuple[set[str], set[str]]:
    """(storage names read, storage names written) in `stmt`: an element whose address an
    opaque call takes (`T.address_of(X[v])`, `X.data`) and what a block declares it writes
    count as written (an extern call zeroing an async copy's source got no wait: audit
    helper-190)."""
    reads = {load.buffer.storage_name for load in collect(stmt, BufferLoad)}
    writes = {store.buffer.storage_name for store in collect(stmt, BufferStore)}
    writes |= {arg.buffer.storage_name for call in collect(stmt, Call) if call.op == ADDRESS_OF
               for arg in call.args if isinstance(arg, BufferLoad)}
    writes |= {region.buffer.storage_name for realize in collect(stmt, BlockRealize)
               for region in realize.block.writes}
    return reads, writes


def buffer_versions(children, plan: PipelinePlan, candidates) -> dict[str, int]:
    """Copies each buffer of `candidates` needs (only those that need 2 or more): a write by
    statement w read by statement r of a later stage is overwritten by the writes for the next
    iterations that run before r (d = s_r - s_w of them, one more when w comes first in the
    order), so the buffer needs that many copies plus one."""
    access = [accessed(child) for child in children]
    versions: dict[str, int] = {}
    for name in candidates:
        need = 1
        for w, (_, writes) in enumerate(access):
            if name not in writes:
                continue
            for r, (reads, _) in enumerate(access):
                if r == w or name not in reads:
                    continue
                distance = plan.stages[r] - plan.stages[w]
                need = max(need, distance + (plan.orders[w] < plan.orders[r]))
        if need > 1:
            versions[name] = need
    return versions


def _find_loop(func: PrimFunc, name: str) -> For:
    for loop in collect(func.body, For):
        if loop.loop_var.name == name:
            return loop
    raise ScheduleError(PRIMITIVE, f"no loop named {name!r}")


def _unseen_access(loop: For, written: dict) -> str | None:
    """What under `loop` the model has no statement for and a reordered body could break: a
    store outside every block (`B[k] = S[k] + 1` beside the block writing S ran a stage
    early), a predicate, condition, loop bound or let that loads what a block under the loop
    writes (`T.where(S[k] > 0)` read S before its writer; audit helper-188)."""
    stores = _stores_outside_blocks(loop.body)
    if stores:
        return f"it holds the store {stores[0].buffer.name}[...] outside any block"
    read = sorted(unseen_loads(loop.body) & written.keys())
    if read:
        return (f"a predicate, condition, loop bound or let under it reads '{read[0]}', which "
                f"a block under the loop writes")
    return None


def _stores_outside_blocks(stmt: Stmt) -> list[BufferStore]:
    found: list[BufferStore] = []

    class Stores(IRVisitor):
        def visit_BlockRealize(self, node: BlockRealize) -> None:
            pass                # (a block's stores are its statement's)

        def visit_BufferStore(self, node: BufferStore) -> None:
            found.append(node)
    Stores().visit(stmt)
    return found


def pipeline_violation(func: PrimFunc, loop_name: str, plan: PipelinePlan | None = None
                       ) -> Violation | None:
    """Why pipelining loop `loop_name` of `func` (block IR) by `plan` (default: its
    annotations) would change a result, or None when it keeps every dependence (see the module
    doc)."""
    loop = _find_loop(func, loop_name)
    plan = plan or read_plan(loop)
    if plan is None:
        return None
    _, children = pipeline_body(loop)
    if len(children) < 2:
        return None
    params = {b.name for b in func.buffers}
    touched = set().union(*(set.union(*accessed(child)) for child in children))
    versions = buffer_versions(children, plan, sorted(touched - params))
    model, deps = model_and_dependences(func)
    statements = [s for s in model.statements.values()
                  if any(lp.var == loop.loop_var for lp in s.loops)]
    if not statements:
        return None
    unseen = _unseen_access(loop, model.writers_of_storages(statements))
    if unseen is not None:
        return Violation(f"{plan.describe()} of loop {loop_name!r} would reorder its "
                         f"statements, but {unseen}: the analysis sees no such access, so it "
                         f"cannot tell whether the new order keeps its value; write it in a "
                         f"block's body (T.block), or do not pipeline the loop")
    position = next(lp.position for lp in statements[0].loops if lp.var == loop.loop_var)
    for name in versions:
        outside = _accesses(func.body, name) - _accesses(loop, name)
        if outside or flows_cross(model, name, position):
            where = "is also used outside the loop" if outside else \
                "carries values from one iteration of the loop to another"
            return Violation(f"buffer '{name}' is read {versions[name] - 1} stage(s) after it "
                             f"is written, so it would be multi-buffered ({versions[name]} "
                             f"copies, one per iteration in flight), but it {where}: give "
                             f"that statement the same stage as the one that writes it, or "
                             f"cache the values in a buffer of their own")
    times = {s.name: _pipelined_schedule(s, position, plan) for s in statements}
    # each thread's program: the times with its threadIdx loops at 0 (a dependence between
    # threads keeps its order there, a barrier between them; in the function's order all of
    # one thread's iterations come first, and a reordered body broke no pair: audit
    # helper-68, a reader put before its writer in the stage order read unwritten memory)
    program_params = f"[{', '.join(model.params)}] ->"
    programs = {s.name: times[s.name].apply_range(without_thread_loops(
        len(s.time), tuple(lp.position for lp in s.loops if lp.kind == "thread_binding"
                           and (lp.thread_tag or "").startswith("threadIdx")), program_params))
        for s in statements}
    for dep in deps:
        if dep.is_reduction or dep.source.name not in times or dep.sink.name not in times:
            continue
        relation = dep.relation
        if dep.buffer in versions:
            relation = relation.intersect(_same_copy(dep, position, versions[dep.buffer]))
        before = times[dep.source.name].lex_lt_map(times[dep.sink.name]).intersect(
            programs[dep.source.name].lex_lt_map(programs[dep.sink.name]))
        broken = relation.subtract(before)
        if not broken.is_empty():
            example = describe_instance_pair(dep, broken)
            return Violation(f"{plan.describe()} of loop {loop_name!r} would run "
                             f"{dep.sink.block.name} before {dep.source.block.name}, which it "
                             f"depends on ({dep.kind} dependence on '{dep.buffer}'): give "
                             f"{dep.sink.block.name} a later stage than "
                             f"{dep.source.block.name}, or the same stage and a later order",
                             dep, example)
    return None


def _accesses(node, name: str) -> int:
    return sum(1 for load in collect(node, BufferLoad) if load.buffer.storage_name == name) + \
        sum(1 for store in collect(node, BufferStore) if store.buffer.storage_name == name)


def _pipelined_schedule(statement, position: int, plan: PipelinePlan) -> isl.Map:
    """The statement's instances at their times in the pipelined loop (first runs)."""
    child = int(statement.time[position + 1])
    width = len(statement.time)
    inputs = [f"t{p}" for p in range(width)]
    outputs = list(inputs)
    outputs[position] = f"t{position} + {plan.stages[child]}"
    outputs[position + 1] = str(plan.orders[child])
    shift = read_map(f"{{ [{', '.join(inputs)}] -> [{', '.join(outputs)}] }}")
    return first_runs(statement.schedule.apply_range(shift))


def _iteration(statement, position: int) -> isl.Map:
    """instance -> [the pipelined loop's value] of `statement`."""
    own = statement.schedule
    count = own.dim(isl.dim_type.out)
    return own.project_out(isl.dim_type.out, position + 1, count - position - 1) \
        .project_out(isl.dim_type.out, 0, position)


def _same_copy(dep, position: int, versions: int) -> isl.Map:
    """The pairs (source -> sink) of `dep`'s statements whose iterations use the same copy of
    a buffer multi-buffered `versions` times."""
    same = read_map(f"{{ [a] -> [b] : exists (e : b - a = {versions} e) }}")
    return _iteration(dep.source, position).apply_range(same) \
        .apply_range(_iteration(dep.sink, position).reverse())

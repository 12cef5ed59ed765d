"""Cross-thread reductions: which reduce loops may be bound to threadIdx.x.

A reduce loop bound to threadIdx.x carries its reduction from one thread to another, which the
one rule for concurrent loops (concurrency.py, CONCURRENT_RULE) refuses in general. One class is
safe, because the lowering (sched/lower/cross_thread_reduction.py) turns it into an allreduce
(each thread accumulates a partial result, then the block combines them, as TVM's
LowerCrossThreadReduction does):

- the loop holds exactly one block, an associative, commutative update `X[idx] = X[idx] op v`
  (`op` one of add, mul, min, max: `dependences.is_reduction_update`) whose value `v` reads no
  element of X's storage, with no buffer of its own and a dtype other than bool;
- the whole reduction of one element happens under the loop, or under it and serial loops
  directly around it (a perfect nest, TVM's `ko` of `ko, ki = split(k)` with `ki` bound): the
  loop, the loops inside it (serial, unrolled) and those outer loops appear only in the
  block's reduce bindings, and no other loop does. Each thread runs its iterations of the
  outer loops into its partial result (the lowering moves the thread loop outside them,
  which reassociates the reduction as the allreduce does);
- each instance of the block runs once (no recomputation: the threads' iterations are
  distinct iterations of the reduction);
- the block's init (if any) runs before every iteration of its element's reduction, as the
  allreduce runs it (a binding that reaches the reduce variables' first values late would
  otherwise make the init discard the iterations before it);
- thread 0 (which stores the result) runs an iteration of the block wherever another
  thread does;
- the loop is the only threadIdx.x loop around the block, and no loop of its kernel is bound
  to vthread; loops of its kernel bound to threadIdx.y or threadIdx.z are around it, with
  constant extents, and its extent is a multiple of 32 or a power of two below 32: the
  threads of each iteration of those loops reduce apart, and a warp holds one such group or
  whole groups at the lanes a shuffle keeps apart (threads are numbered x, then y, then z).

Only the dependences of the block with itself through X are exempt from the rule; every other
use of X (an init block, a consumer) is checked as usual.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from sched.ir.functor import collect, free_vars, substitute
from sched.ir.nodes import (
    BinaryOp,
    BlockRealize,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    IfThenElse,
    IntImm,
    LetStmt,
    PrimFunc,
    Range,
    Stmt,
    conjuncts,
    is_thread_private,
    logical_and,
)
from sched.ir.simplify import simplify
from sched.polyhedral.dependences import is_reduction_update, model_and_dependences
from sched.polyhedral.expr_equality import first_decides
from sched.polyhedral.isl_expr import to_isl_condition
from sched.polyhedral.kernel_stages import kernel_groups, root_stages
from sched.polyhedral.statements import Statement

REDUCE_TAG = "threadIdx.x"
WARP_SIZE = 32
_OTHER_THREAD_TAGS = ("threadIdx.y", "threadIdx.z")    # in the kernel: refused


@dataclass(frozen=True)
class CrossThreadReduction:
    """A reduction whose reduce loop `loop` runs on the threads of one block."""

    loop: For
    realize: BlockRealize
    op: str                  # "add", "mul", "min" or "max"
    update: BufferStore      # X[idx] = X[idx] op value (the block's body)
    value: Expr              # the operand that is not the accumulator
    outer: tuple[For, ...] = ()   # serial reduce loops directly around `loop`, outermost first
    guard: Expr | None = None     # where an element's result is stored (None: always)
    groups: tuple[For, ...] = ()  # the threadIdx.y / threadIdx.z loops around `loop`: each
    #                               of their iterations is a group of threads reducing apart

    @property
    def block_name(self) -> str:
        return self.realize.block.name

    @property
    def storage(self) -> str:
        return self.update.buffer.storage_name


def cross_thread_reduction(func: PrimFunc, loop: For) -> CrossThreadReduction | str:
    """The cross-thread reduction of `loop` bound to threadIdx.x (whatever its kind now), or
    the reason (a phrase) why binding it would not be one (see the module docstring)."""
    realizes = collect(loop.body, BlockRealize)
    if len(realizes) != 1:
        return f"loop '{loop.loop_var.name}' holds {len(realizes)} blocks, not one reduction"
    realize = realizes[0]
    between = _between(loop.body, realize)
    if between is not None:
        return (f"{between} stands between loop '{loop.loop_var.name}' and block "
                f"'{realize.block.name}' (the lowering combines the threads' partials and "
                f"stores the total outside it); write the condition as the block's T.where, "
                f"or the value in the block's bindings")
    block = realize.block
    if not is_reduction_update(block):
        return f"block '{block.name}' is not an associative update X[i] = X[i] op value"
    update: BufferStore = block.body
    own = BufferLoad(update.buffer, update.indices)
    combine: BinaryOp = update.value
    value = combine.b if combine.a == own else combine.a
    storage = update.buffer.storage_name
    if any(load.buffer.storage_name == storage for load in collect(value, BufferLoad)):
        return f"the update of block '{block.name}' reads '{update.buffer.name}' again"
    if block.alloc_buffers or update.buffer.dtype == "bool":
        return f"block '{block.name}' allocates buffers or reduces bools"
    inner = collect(loop.body, For)
    if any(lp.kind in ("thread_binding", "parallel") for lp in inner):
        return f"a loop inside loop '{loop.loop_var.name}' is bound or parallel"
    bindings = _bindings_in_loops(func, realize)
    outer = _outer_reduce_loops(func, loop, realize, bindings)
    under = {loop.loop_var} | {lp.loop_var for lp in (*inner, *outer)}
    every_loop = {lp.loop_var: lp for lp in collect(func.body, For)}
    for iv, bound in zip(block.iter_vars, bindings, strict=True):
        used = set(free_vars(bound))
        if iv.kind == "reduce" and (used & every_loop.keys()) - under:
            others = sorted(v.name for v in (used & every_loop.keys()) - under)
            direct = set(free_vars(realize.iter_values[block.iter_vars.index(iv)]))
            if not direct & ((used & every_loop.keys()) - under):      # through a block
                return (f"the reduce axis '{iv.var.name}' of block '{block.name}' also runs "
                        f"over loops outside the block around loop '{loop.loop_var.name}' "
                        f"({', '.join(others)}), which the thread loop cannot take in (a "
                        f"blockize made that block; binding before it does not help): "
                        f"blockize a loop that holds the whole reduction, or rfactor the "
                        f"loop and bind the factored one")
            return (f"the reduce axis '{iv.var.name}' of block '{block.name}' also runs over "
                    f"loops outside loop '{loop.loop_var.name}' ({', '.join(others)}) that are "
                    f"not serial loops holding only it; reorder them inside it "
                    f"(sch.reorder('{loop.loop_var.name}', '{others[0]}')) or make them "
                    f"the only content of each other around it")
        if iv.kind != "reduce" and used & under:
            return (f"the spatial axis '{iv.var.name}' of block '{block.name}' depends on a "
                    f"loop inside the reduce loop")
    if not any(iv.kind == "reduce" and loop.loop_var in free_vars(bound)
               for iv, bound in zip(block.iter_vars, bindings, strict=True)):
        return f"block '{block.name}' does not use loop '{loop.loop_var.name}'"
    guard = _result_guard(realize, (loop, *inner, *outer))
    if isinstance(guard, str):
        return guard
    groups, siblings = [], []
    for other in collect(func.body, For):
        if other.kind != "thread_binding" or other is loop:
            continue
        if other.thread_tag == "vthread":
            return (f"loop '{other.loop_var.name}' is bound to vthread: a cross-thread "
                    f"reduction runs on a block's threads alone")
        around = any(n is loop for n in collect(other.body, For))
        if other.thread_tag in _OTHER_THREAD_TAGS and _in_one_kernel(func, loop, other):
            if not around:
                siblings.append(other)
                continue
            problem = _group_problem(loop, other)
            if problem is not None:
                return problem
            groups.append(other)
        if other.thread_tag == REDUCE_TAG and around:
            return f"loop '{loop.loop_var.name}' is nested in loop '{other.loop_var.name}'"
    for other in siblings:
        # another nest's threadIdx.y loop (rows normalized after their totals) is the same
        # threads: the reduction's groups are the rows of its own loop (threads past its
        # extent skip it); without such a loop every threadIdx.y thread would reduce
        if not any(g.thread_tag == other.thread_tag for g in groups) and \
                not (isinstance(other.extent, IntImm) and other.extent.value == 1):
            return (f"loop '{other.loop_var.name}' bound to {other.thread_tag} is not around "
                    f"the reduce loop '{loop.loop_var.name}', and no loop bound to "
                    f"{other.thread_tag} is: every {other.thread_tag} thread would run the "
                    f"whole reduction; bind a loop around it to {other.thread_tag} too")
    if not isinstance(loop.min, IntImm):
        return f"loop '{loop.loop_var.name}' starts at a symbolic value"
    model, found = model_and_dependences(func)
    statements = model.statements_of_block(block.name)
    if not all(s.runs_once for s in statements):
        return f"an instance of block '{block.name}' runs more than once"
    update_statement = next(s for s in statements if not s.is_init)
    if _init_runs_late(found, update_statement):
        return (f"the init of block '{block.name}' runs after other iterations of its "
                f"reduction (its reduce variables reach their first values late in this loop "
                f"order) and discards them; a cross-thread reduction would keep them")
    if not _first_thread_works(update_statement, loop):
        return (f"the first thread of loop '{loop.loop_var.name}' runs no iteration of block "
                f"'{block.name}' where another thread does")
    return CrossThreadReduction(loop, realize, combine.op, update, value, tuple(outer), guard,
                                tuple(groups))


def _between(stmt: Stmt, realize: BlockRealize) -> str | None:
    """What other than loops lies between a reduce loop's body `stmt` and the block `realize`
    under it: an `if` applied only to each thread's accumulation (a row it left out was
    stored 0; audit helper-190), a let whose variable the total's store used out of its
    scope (a VerifyError). None where only loops do."""
    while stmt is not realize:
        if isinstance(stmt, For):
            stmt = stmt.body
        elif isinstance(stmt, IfThenElse):
            return f"the condition `if {stmt.condition.script()}`"
        elif isinstance(stmt, LetStmt):
            return f"the let `{stmt.var.name} = {stmt.value.script()}`"
        else:
            return f"a {type(stmt).__name__}"
    return None


def stores_every_copy(func: PrimFunc, statement: Statement, storage: str,
                      loop: For | None = None) -> bool:
    """Whether `statement` is under a cross-thread reduction's loop and writes `storage`, the
    reduction's output, which each thread holds a copy of (scope "local"): the allreduce
    stores the total in every thread's copy (lower/cross_thread_reduction.py), so a reader on
    any thread of the group along threadIdx.x reads what it stored. TVM's
    `cache_write(block, 0, "local")` of such a reduction, its copy-out in every thread, was
    refused (audit helper-177). `loop`: the loop around `statement` about to be bound to
    threadIdx.x (by default, the one bound)."""
    if loop is None:
        names = [lp.var.name for lp in statement.loops
                 if lp.kind == "thread_binding" and lp.thread_tag == REDUCE_TAG]
        if len(names) != 1:
            return False
        loop = next(lp for lp in collect(func.body, For) if lp.loop_var.name == names[0])
    found = cross_thread_reduction(func, loop)
    return isinstance(found, CrossThreadReduction) and found.storage == storage and \
        found.block_name == statement.block.name and is_thread_private(found.update.buffer.scope)


def _group_problem(loop: For, other: For) -> str | None:
    """Why loop `other`, bound to threadIdx.y or .z around the reduce loop `loop`, stops the
    threads of each of its iterations from reducing apart, or None. It must hold `loop` alone,
    with a constant extent (the threads of one of its iterations then hold one
    element's reduction), and threadIdx.x's extent a multiple of the warp or a power of two
    dividing it: a warp then holds the threads of one group, or whole groups at the lanes a
    shuffle of width 32 keeps apart."""
    tag, x = other.thread_tag, loop.extent
    node = other
    while node is not loop:
        if not isinstance(node.body, For):
            return (f"loop '{other.loop_var.name}' bound to {tag} holds more than the loops "
                    f"down to the reduce loop '{loop.loop_var.name}': a cross-thread "
                    f"reduction beside {tag} needs its group's loop to hold it alone (the C "
                    f"target's thread phases would combine before every thread published)")
        node = node.body
    if not (isinstance(other.extent, IntImm) and isinstance(x, IntImm)):
        return (f"a cross-thread reduction in a block of threads with {tag} needs constant "
                f"thread extents")
    if x.value % WARP_SIZE and WARP_SIZE % x.value:
        return (f"loop '{loop.loop_var.name}' bound to threadIdx.x runs {x.value} threads "
                f"beside {tag}: a warp would hold threads of two groups at lanes a shuffle "
                f"cannot keep apart; use a multiple of {WARP_SIZE} or a power of two below it")
    return None


def _result_guard(realize: BlockRealize, reduce_loops: tuple[For, ...]) -> Expr | None | str:
    """The condition under which the block stores an element's result: the conjuncts of its
    predicate that use none of `reduce_loops` (None: always), or the reason why that is not
    it. Where those hold, the other conjuncts must hold at the reduce loops' first values (so
    the block runs there); where they do not, it never runs, and nothing may be stored (an
    uneven split of a spatial loop leaves its last rows out of bounds)."""
    predicate = realize.predicate
    if isinstance(predicate, IntImm):
        return None
    variables = {lp.loop_var for lp in reduce_loops}
    firsts = {lp.loop_var: lp.min for lp in reduce_loops}
    kept: list[Expr] = []
    for part in conjuncts(predicate):
        if not variables & set(free_vars(part)):
            kept.append(part)
            continue
        at_first = simplify(substitute(part, firsts))
        if isinstance(at_first, IntImm) and at_first.value == 1:
            continue
        ranges = {lp.loop_var: Range(lp.min, lp.extent) for lp in reduce_loops}
        if first_decides(part, at_first, ranges) is True:
            kept.append(at_first)       # `0 < m`: the element is written where it holds
            continue
        # (audit helper-127: a thread loop outside a split of a symbolic extent)
        unread = "" if to_isl_condition(part) is not None else (
            " (it is not affine, so the analysis cannot show that it holds at the first "
            "values: over a symbolic extent, split the reduce loop with the thread loop "
            "inside, sch.split(k, [None, threads]), and bind the inner loop)")
        return (f"the predicate {part.script()} of block '{realize.block.name}' may hold for "
                f"some iterations of the reduce loops but not at their first values: the "
                f"first thread could not tell whether the element is written; split the "
                f"reduce loop so that its first iteration is in range{unread}")
    return logical_and(*kept) if kept else None


def _in_one_kernel(func: PrimFunc, loop: For, other: For) -> bool:
    """Whether loops `loop` and `other` run in one kernel of `func` (root stages that share
    a launch: polyhedral/kernel_stages.py `kernel_groups`)."""
    stages = root_stages(func)

    def stage(target: For) -> int | None:
        return next((n for n, s in enumerate(stages)
                     if any(lp is target for lp in collect(s, For))), None)

    mine, theirs = stage(loop), stage(other)
    if mine is None or theirs is None or mine == theirs:
        return True
    return any(mine in group and theirs in group for group in kernel_groups(func, stages))


def _bindings_in_loops(func: PrimFunc, realize: BlockRealize) -> tuple[Expr, ...]:
    """The realize's bindings written in loop variables: the iteration variables of the
    blocks around it replaced by their own bindings, outermost first. After a blockize, `S`'s
    `v_k1 = v_k1_1` is the variable of `S_o`, bound to the loop `k1` outside it: a reduction
    the thread loop does not hold whole (its init runs at `v_k1 == 0` only)."""
    around = [r for r in collect(func.body, BlockRealize) if r is not realize
              and any(n is realize for n in collect(r.block.body, BlockRealize))]
    mapping: dict = {}
    for enclosing in around:                       # outermost first (collect's order)
        mapping.update({iv.var: substitute(value, mapping) for iv, value in
                        zip(enclosing.block.iter_vars, enclosing.iter_values, strict=True)})
    return tuple(substitute(value, mapping) for value in realize.iter_values)


def _outer_reduce_loops(func: PrimFunc, loop: For, realize: BlockRealize,
                        bindings: tuple[Expr, ...]) -> list[For]:
    """The serial (or unrolled) loops directly around `loop`, each holding only the next one,
    whose variables the block's reduce bindings (`bindings`, in loop variables) use and its
    spatial ones do not, outermost first: each thread can run its iterations of them before
    the block combines the threads' partial results."""
    reduce_vars, spatial_vars = set(), set()
    for iv, bound in zip(realize.block.iter_vars, bindings, strict=True):
        (reduce_vars if iv.kind == "reduce" else spatial_vars).update(free_vars(bound))
    outer: list[For] = []
    child: Stmt = loop
    for parent in reversed(_loops_around(func.body, loop)):
        if parent.body is not child or parent.kind not in ("serial", "unrolled") or \
                parent.loop_var not in reduce_vars or parent.loop_var in spatial_vars or \
                any(key.startswith("software_pipeline") for key, _ in parent.annotations):
            break                     # (a pipelined loop stays outside the threads' loops)
        outer.insert(0, parent)
        child = parent
    return outer


def _loops_around(root: Stmt, target: For) -> list[For]:
    """The loops around loop `target` (by identity) in `root`, outermost first."""
    return [lp for lp in collect(root, For)
            if lp is not target and any(n is target for n in collect(lp.body, For))]


def _init_runs_late(found, update: Statement) -> bool:
    """Whether an iteration of the reduction runs before the init of its element (same
    spatial iteration values), which then overwrites it (a dependence from the update to the
    block's init): the allreduce would combine that iteration with the init instead."""
    spatial = [p for p, iv in enumerate(update.block.iter_vars) if iv.kind != "reduce"]
    for dep in found:
        if not (dep.source is update and dep.sink.is_init and dep.sink.block is update.block):
            continue
        same_element = dep.relation
        for position in spatial:
            same_element = same_element.equate(isl.dim_type.in_, position,
                                               isl.dim_type.out, position)
        if not same_element.is_empty():
            return True
    return False


def _first_thread_works(statement: Statement, loop: For) -> bool:
    """Whether, in every iteration of the loops outside `loop` where `statement` runs, it
    runs in the loop's first iteration (thread 0, which stores the result). Then a thread
    that reads the result in global or local memory (which the concurrency rule allows only
    within one thread) can only be thread 0."""
    position = next(lp.position for lp in statement.loops if lp.var == loop.loop_var)
    times = statement.schedule.range()
    width = times.dim(isl.dim_type.set)
    outer = times.project_out(isl.dim_type.set, position, width - position)
    first = times.fix_dim_si(position, loop.min.value)
    return outer.is_subset(first.project_out(isl.dim_type.set, position, width - position))

"""Dependences and legality by brute force: run every instance of a small concrete function,
record the elements each touches and when, and compare timestamps.

The ground truth the isl answers are tested against. It interprets block IR with integer
indices only (no symbolic dims, no conditions inside blocks) and names statements as the model
does: `S_<block>` for a body, `I_<block>` for an init.

It defines its own semantics and imports none from `sched.polyhedral` (an oracle that imports
what it checks agrees with every bug): the only accesses free to move past each other are the
*accumulator chain of one element*: in a block with reduce iteration variables whose body is
`X[idx] = X[idx] op value` (or `value op X[idx]`) with `op` associative, the store and that one
load of `X[idx]` (the same buffer, the same index expressions). Every other access, including
another read of `X` in `value` (`C[vi + 1] = C[vi + 1] + C[vi] * A[vk]` reads `C[vi]`), makes an
ordinary dependence.
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from dataclasses import dataclass

from sched.ir import (
    BinaryOp,
    BlockRealize,
    BufferLoad,
    BufferStore,
    Cast,
    Expr,
    For,
    IntImm,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    collect,
)

ASSOCIATIVE = ("add", "mul", "min", "max")

OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
       "floordiv": operator.floordiv, "floormod": operator.mod, "min": min, "max": max,
       "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
       "gt": operator.gt, "ge": operator.ge}


def evaluate(expr: Expr, env: dict[Var, int]) -> int:
    if isinstance(expr, IntImm):
        return expr.value
    if isinstance(expr, Var):
        return env[expr]
    if isinstance(expr, Cast):
        return evaluate(expr.value, env)
    if isinstance(expr, BinaryOp):
        if expr.op == "and":
            return evaluate(expr.a, env) and evaluate(expr.b, env)
        if expr.op == "or":
            return evaluate(expr.a, env) or evaluate(expr.b, env)
        return OPS[expr.op](evaluate(expr.a, env), evaluate(expr.b, env))
    raise NotImplementedError(f"brute force cannot evaluate {type(expr).__name__}")


@dataclass(frozen=True)
class Event:
    time: int
    statement: str
    instance: tuple[int, ...]
    loops: tuple[tuple[str, int], ...]          # (loop name, value), outermost first
    # (storage, element, is_write, is_accumulator): see the module docstring
    accesses: tuple[tuple[str, tuple[int, ...], bool, bool], ...]


def accumulator_loads(block) -> tuple[BufferStore, BufferLoad] | None:
    """The update store and its accumulator load when `block` is a reduction update
    `X[idx] = X[idx] op value` (op associative, a reduce iteration variable), else None."""
    if not any(iv.kind == "reduce" for iv in block.iter_vars):
        return None
    store = block.body
    if not isinstance(store, BufferStore) or not isinstance(store.value, BinaryOp) \
            or store.value.op not in ASSOCIATIVE:
        return None
    for operand in (store.value.a, store.value.b):
        if isinstance(operand, BufferLoad) and operand.buffer == store.buffer \
                and operand.indices == store.indices:
            return store, operand
    return None


def run(func: PrimFunc) -> list[Event]:
    """Every statement instance of `func` in execution order."""
    events: list[Event] = []

    def accesses_of(stmt: Stmt, env, accumulator=None) -> tuple:
        found = []
        for store in collect(stmt, BufferStore):
            loads = collect(store.value, BufferLoad)
            chain = accumulator is not None and accumulator[0] is store
            if chain:      # the accumulator load is one operand (identity, not equality)
                own = accumulator[1]
                loads = list(loads)
                del loads[next(k for k, ld in enumerate(loads) if ld is own)]
                found.append((own.buffer.storage_name,
                              tuple(evaluate(i, env) for i in own.indices), False, True))
            for load in loads:
                found.append((load.buffer.storage_name,
                              tuple(evaluate(i, env) for i in load.indices), False, False))
            found.append((store.buffer.storage_name,
                          tuple(evaluate(i, env) for i in store.indices), True, chain))
        return tuple(found)

    def walk(stmt: Stmt, env: dict, loops: tuple) -> None:
        if isinstance(stmt, SeqStmt):
            for child in stmt.stmts:
                walk(child, env, loops)
        elif isinstance(stmt, For):
            start = evaluate(stmt.min, env)
            for value in range(start, start + evaluate(stmt.extent, env)):
                walk(stmt.body, {**env, stmt.loop_var: value},
                     loops + ((stmt.loop_var.name, value),))
        elif isinstance(stmt, BlockRealize):
            block = stmt.block
            if not evaluate(stmt.predicate, env):
                return
            values = tuple(evaluate(v, env) for v in stmt.iter_values)
            inner = {**env, **{iv.var: v for iv, v in zip(block.iter_vars, values)}}
            if block.name == "root":
                walk(block.body, inner, loops)
                return
            at_start = all(v == evaluate(iv.dom.min, env)
                           for iv, v in zip(block.iter_vars, values) if iv.kind == "reduce")
            if block.init is not None and at_start:
                events.append(Event(len(events), f"I_{block.name}", values, loops,
                                    accesses_of(block.init, inner)))
            events.append(Event(len(events), f"S_{block.name}", values, loops,
                                accesses_of(block.body, inner, accumulator_loads(block))))
        else:
            raise NotImplementedError(type(stmt).__name__)

    walk(func.body, {}, ())
    return events


def _conflicts(events: list[Event]):
    """(dependence tuple, exempt) for every pair of conflicting accesses, in program order;
    `exempt` when both are accumulator accesses of one statement."""
    for first, second in itertools.combinations(events, 2):
        for buffer, element, first_writes, first_acc in first.accesses:
            for buffer2, element2, second_writes, second_acc in second.accesses:
                if buffer != buffer2 or element != element2:
                    continue
                if not (first_writes or second_writes):
                    continue
                kind = ("output" if first_writes and second_writes else
                        "flow" if first_writes else "anti")
                exempt = first.statement == second.statement and first_acc and second_acc
                yield (kind, buffer, first.statement, first.instance,
                       second.statement, second.instance), exempt


def dependences(events: list[Event]) -> set[tuple]:
    """(kind, buffer, source statement, source instance, sink statement, sink instance): every
    dependence, the accumulator chains included."""
    return {dep for dep, _ in _conflicts(events)}


def ordinary_dependences(events: list[Event]) -> set[tuple]:
    """The dependences a reordering must keep: those with at least one pair of accesses that is
    not an accumulator chain."""
    return {dep for dep, exempt in _conflicts(events) if not exempt}


def order_is_legal(func: PrimFunc, new_func: PrimFunc) -> bool:
    """Whether every ordinary dependence of `func` keeps its order in `new_func` (and both run
    the same instances, each once)."""
    old, new = run(func), run(new_func)
    new_time = {(e.statement, e.instance): e.time for e in new}
    if Counter((e.statement, e.instance) for e in old) != \
            Counter((e.statement, e.instance) for e in new):
        return False
    for dep in ordinary_dependences(old):
        _, _, source, source_instance, sink, sink_instance = dep
        if new_time[(source, source_instance)] >= new_time[(sink, sink_instance)]:
            return False
    return True


def loop_is_parallel(func: PrimFunc, loop: str) -> bool:
    """Whether no dependence (reductions included) joins two instances that share every loop
    outside `loop` but not `loop` itself."""
    events = run(func)
    by_key = {(e.statement, e.instance): e for e in events}
    for dep in dependences(events):
        first = by_key[(dep[2], dep[3])]
        second = by_key[(dep[4], dep[5])]
        names_first = [name for name, _ in first.loops]
        names_second = [name for name, _ in second.loops]
        if loop not in names_first or loop not in names_second:
            continue
        depth = names_first.index(loop)
        if names_first[:depth + 1] != names_second[:depth + 1]:
            continue
        if first.loops[:depth] == second.loops[:depth] and \
                first.loops[depth] != second.loops[depth]:
            return False
    return True

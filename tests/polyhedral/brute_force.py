"""Dependences and legality by brute force: run every instance of a small concrete function,
record the elements each touches and when, and compare timestamps.

The ground truth the isl answers are tested against. It interprets block IR with integer
indices only (no symbolic dims, no conditions inside blocks) and names statements as the model
does: `S_<block>` for a body, `I_<block>` for an init.
"""

from __future__ import annotations

import itertools
import operator
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
from sched.polyhedral.dependences import is_reduction_update

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
    accesses: tuple[tuple[str, tuple[int, ...], bool], ...]   # buffer, element, is_write
    is_reduction: bool


def run(func: PrimFunc) -> list[Event]:
    """Every statement instance of `func` in execution order."""
    events: list[Event] = []

    def accesses_of(stmt: Stmt, env) -> tuple:
        found = []
        for store in collect(stmt, BufferStore):
            for load in collect(store.value, BufferLoad):
                found.append((load.buffer.storage_name,
                              tuple(evaluate(i, env) for i in load.indices), False))
            found.append((store.buffer.storage_name,
                          tuple(evaluate(i, env) for i in store.indices), True))
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
                                    accesses_of(block.init, inner), False))
            events.append(Event(len(events), f"S_{block.name}", values, loops,
                                accesses_of(block.body, inner), is_reduction_update(block)))
        else:
            raise NotImplementedError(type(stmt).__name__)

    walk(func.body, {}, ())
    return events


def dependences(events: list[Event]) -> set[tuple]:
    """(kind, buffer, source statement, source instance, sink statement, sink instance)."""
    found = set()
    for first, second in itertools.combinations(events, 2):
        for buffer, element, first_writes in first.accesses:
            for buffer2, element2, second_writes in second.accesses:
                if buffer != buffer2 or element != element2:
                    continue
                if not (first_writes or second_writes):
                    continue
                kind = ("output" if first_writes and second_writes else
                        "flow" if first_writes else "anti")
                found.add((kind, buffer, first.statement, first.instance,
                           second.statement, second.instance))
    return found


def is_reduction_pair(events_by_key: dict, dep: tuple) -> bool:
    _, _, source, source_instance, sink, _ = dep
    return source == sink and events_by_key[(source, source_instance)].is_reduction


def order_is_legal(func: PrimFunc, new_func: PrimFunc) -> bool:
    """Whether every non-reduction dependence of `func` keeps its order in `new_func`."""
    old, new = run(func), run(new_func)
    old_keys = {(e.statement, e.instance): e for e in old}
    new_time = {(e.statement, e.instance): e.time for e in new}
    if set(old_keys) != set(new_time):
        return False
    for dep in dependences(old):
        if is_reduction_pair(old_keys, dep):
            continue
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

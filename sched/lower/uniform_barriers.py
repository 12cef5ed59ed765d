"""Barriers every thread reaches: guards on the work, never on a barrier.

A barrier (`__syncthreads()`) must be reached by every thread of a block, or the kernel's
behaviour is undefined. Thread-loop unification puts a guard around a shorter thread loop
(`if (tx < 64)` for a loop of 64 threads in a block of 128), and barrier insertion may then
put a barrier inside it. This pass pushes each thread-dependent condition down, past the
barriers, onto the barrier-free statements between them ("guard the work, not the barrier"):

    if (tx < 64) { a; sync; b; }   ->   if (tx < 64) { a; }  sync;  if (tx < 64) { b; }

Moving a guard is exact when its value cannot change between the pieces: the condition may
read variables (never reassigned) but no buffer. A serial loop holding a barrier takes the
guard inside when its bounds are the same for every thread (no thread variable, no load); a
let under a guard is computed by every thread, its value selected so that a thread outside
the guard reads nothing (`guard ? value : 0`). What cannot be made uniform is refused: a
barrier under a condition that reads memory, or in a loop whose bounds depend on the thread.

Runs after `insert_barriers`, for both targets (the C target's per-thread phases then see
uniform control flow around every barrier).
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.extern import ADDRESS_OF
from sched.ir.functor import collect, free_vars
from sched.ir.nodes import (
    IMPURE_CALLS,
    Allocate,
    Barrier,
    BufferLoad,
    BufferStore,
    Call,
    Expr,
    For,
    IfThenElse,
    LetStmt,
    Not,
    PrimFunc,
    Select,
    SeqStmt,
    Stmt,
    While,
    const,
    logical_and,
    seq,
)
from sched.lower.cross_thread_reduction import SHUFFLE_DOWN


def _has_barrier(stmt: Stmt) -> bool:
    return bool(collect(stmt, Barrier))


class _Uniform:
    def __init__(self, thread_vars: frozenset, written: frozenset = frozenset()) -> None:
        self.thread_vars = thread_vars
        self.written = written      # the storages the function stores to

    def with_var(self, var) -> _Uniform:
        return _Uniform(self.thread_vars | {var}, self.written)

    def thread_dependent(self, e: Expr) -> bool:
        return bool(set(free_vars(e)) & self.thread_vars) or self.varying_reads(e)

    def varying_reads(self, e: Expr) -> bool:
        """Whether `e` reads what may differ between threads: a varying load, or an opaque
        call (each thread calls it: `if T.call_extern("int32", "pick", i) > 0` around a
        reduction deadlocked cuda-emu; audit helper-193)."""
        return bool(self.varying_loads(e)) or any(call.op in IMPURE_CALLS
                                                  for call in collect(e, Call))

    def varying_loads(self, e: Expr) -> list[BufferLoad]:
        """The loads in `e` whose value may differ between threads: of a storage the function
        writes, or at an index that depends on the thread (a read-only input at the row's
        index, `if A[i, 0] > 0` around a reduction, is the same for every thread: it was
        refused; audit helper-190)."""
        return [load for load in collect(e, BufferLoad)
                if load.buffer.storage_name in self.written
                or set(free_vars(load)) & self.thread_vars]

    def visit(self, stmt: Stmt, guards: tuple[Expr, ...]) -> Stmt:
        if not _has_barrier(stmt):
            return IfThenElse(logical_and(*guards), stmt) if guards else stmt
        if isinstance(stmt, Barrier):
            return stmt
        if isinstance(stmt, SeqStmt):
            return seq(*[self.visit(s, guards) for s in stmt.stmts])
        if isinstance(stmt, IfThenElse):
            return self.branch(stmt, guards)
        if isinstance(stmt, For):
            return self.loop(stmt, guards)
        if isinstance(stmt, LetStmt):
            value = stmt.value
            if guards and collect(value, BufferLoad):
                value = Select(logical_and(*guards), value, const(0, value.dtype))
            # a variable of a thread-dependent value is thread-dependent where it is used (a
            # loop `for k in range(v)` with v = tx % 2 + 1 holding a barrier: helper-64)
            inner = self.with_var(stmt.var) if self.thread_dependent(value) else self
            return dataclasses.replace(stmt, value=value, body=inner.visit(stmt.body, guards))
        if isinstance(stmt, Allocate):
            return dataclasses.replace(stmt, body=self.visit(stmt.body, guards))
        if isinstance(stmt, While):
            raise ScheduleError("build", f"a barrier sits in the while loop `while "
                                f"{stmt.condition.script()}:`, whose trip count sched cannot "
                                f"prove the same for every thread of a block (every thread "
                                f"must reach every barrier, and the C target splits thread "
                                f"loops at barriers): write it as a for loop with uniform "
                                f"bounds")
        raise AssertionError(f"unexpected {type(stmt).__name__} holding a barrier")

    def branch(self, stmt: IfThenElse, guards: tuple[Expr, ...]) -> Stmt:
        condition = stmt.condition
        if not self.thread_dependent(condition):
            other = None if stmt.else_body is None else self.visit(stmt.else_body, guards)
            return dataclasses.replace(stmt, then_body=self.visit(stmt.then_body, guards),
                                       else_body=other)
        if self.varying_reads(condition):
            raise ScheduleError("build", f"a barrier (threads exchange values through shared "
                                f"or global memory there) sits under the condition "
                                f"{condition.script()}, which reads memory or calls a "
                                f"function and may differ between threads: every thread of a "
                                f"block must reach "
                                f"every barrier; compute the condition's data before the "
                                f"shared-memory stages or guard smaller statements")
        pieces = [self.visit(stmt.then_body, (*guards, condition))]
        if stmt.else_body is not None:
            pieces.append(self.visit(stmt.else_body, (*guards, Not(condition))))
        return seq(*pieces)

    def loop(self, loop: For, guards: tuple[Expr, ...]) -> Stmt:
        if loop.kind == "thread_binding":     # an index, not a loop: every thread is in it
            return dataclasses.replace(loop, body=self.visit(loop.body, guards))
        for bound in (loop.min, loop.extent):
            if self.thread_dependent(bound):
                raise ScheduleError("build", f"loop '{loop.loop_var.name}' holds a barrier "
                                    f"(threads exchange values through shared or global "
                                    f"memory in it) but its bounds "
                                    f"({loop.min.script()}, extent {loop.extent.script()}) "
                                    f"depend on the thread or on memory: every thread of a "
                                    f"block must reach every barrier; give the loop bounds "
                                    f"that are the same for all threads")
        return dataclasses.replace(loop, body=self.visit(loop.body, guards))


def _addressed(stmt: Stmt) -> frozenset[str]:
    """The storages whose address an opaque call takes (it may write them)."""
    return frozenset(arg.buffer.storage_name for call in collect(stmt, Call)
                     if call.op == ADDRESS_OF for arg in call.args
                     if isinstance(arg, BufferLoad))


def _holds_shuffle(node) -> bool:
    return any(call.op == SHUFFLE_DOWN for call in collect(node, Call))


def _refuse_divergent_shuffles(stmt: Stmt, uniform: _Uniform) -> None:
    """A warp shuffle (a cross-thread reduction's, CUDA) is made by all the lanes its mask
    names at once, which may be several threadIdx.y rows of one warp: like a barrier, it may
    not sit in a loop whose trip count differs between threads (`for r in range(ty + 1)`
    around a reduction over 8 threadIdx.x lanes: the rows of a warp left it at different
    times, a deadlock on cuda-emu, undefined on a GPU; audit helper-186), nor under a
    condition that reads memory."""
    if not _holds_shuffle(stmt):
        return
    if isinstance(stmt, For) and stmt.kind != "thread_binding" and any(
            uniform.thread_dependent(bound) for bound in (stmt.min, stmt.extent)):
        raise ScheduleError("build", f"loop '{stmt.loop_var.name}' holds a cross-thread "
                            f"reduction (warp shuffles, which the lanes of a warp make "
                            f"together) but its bounds ({stmt.min.script()}, extent "
                            f"{stmt.extent.script()}) depend on the thread or on memory: "
                            f"give the loop bounds that are the same for all threads, or "
                            f"reduce in a loop outside it")
    if isinstance(stmt, IfThenElse) and uniform.varying_reads(stmt.condition):
        raise ScheduleError("build", f"a cross-thread reduction (warp shuffles, which the "
                            f"lanes of a warp make together) sits under the condition "
                            f"{stmt.condition.script()}, which reads memory or calls a "
                            f"function and may differ between threads: compute the "
                            f"condition's data before the reduction or guard smaller "
                            f"statements")
    if isinstance(stmt, While):
        raise ScheduleError("build", f"a cross-thread reduction (warp shuffles, which the "
                            f"lanes of a warp make together) sits in the while loop `while "
                            f"{stmt.condition.script()}:`, whose trip count sched cannot "
                            f"prove the same for every thread: write it as a for loop with "
                            f"uniform bounds")
    if isinstance(stmt, LetStmt) and uniform.thread_dependent(stmt.value):
        uniform = uniform.with_var(stmt.var)
    for child in _child_statements(stmt):
        _refuse_divergent_shuffles(child, uniform)


def _child_statements(stmt: Stmt) -> tuple[Stmt, ...]:
    if isinstance(stmt, SeqStmt):
        return stmt.stmts
    if isinstance(stmt, IfThenElse):
        return (stmt.then_body,) + (() if stmt.else_body is None else (stmt.else_body,))
    if isinstance(stmt, (For, LetStmt, Allocate, While)):
        return (stmt.body,)
    return ()


def uniform_barriers(func: PrimFunc) -> PrimFunc:
    """`func` with no barrier under a thread-dependent condition (module docstring), and no
    warp shuffle in a loop of thread-dependent bounds. A function without barriers is
    returned unchanged."""
    thread_vars = frozenset(loop.loop_var for loop in collect(func.body, For)
                            if loop.kind == "thread_binding"
                            and loop.thread_tag.startswith("threadIdx"))
    written = frozenset(store.buffer.storage_name for store in collect(func.body, BufferStore))
    uniform = _Uniform(thread_vars, written | _addressed(func.body))
    _refuse_divergent_shuffles(func.body, uniform)
    if not collect(func.body, Barrier):
        return func
    body = uniform.visit(func.body, ())
    return dataclasses.replace(func, body=body)

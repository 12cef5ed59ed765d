"""Barrier insertion: `__syncthreads()` where threads communicate through shared memory.

Threads of a block see each other's shared-memory writes only after a barrier. This pass walks
the code under the thread loops in execution order, keeping the shared buffers read and written
since the last barrier; before a statement that reads a buffer written since then (read after
write) or writes one read since then (write after read), it puts a `Barrier`. A serial loop
is also checked against itself: when what the end of its body touches conflicts with what the
start of the next iteration touches (the k loop of a tiled matmul: the
compute reads the tile that the next iteration's fetch overwrites), a barrier closes the body.

Only buffers of scope "shared" are tracked ("local" is private to a thread; blocks never
synchronize). The analysis does not tell one thread's accesses from another's, so it may put a
barrier that a finer analysis would drop, never omit one that is needed. It runs after block
conversion and thread-loop unification, on flattened or unflattened buffers alike.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from sched.ir.functor import collect
from sched.ir.nodes import (
    Allocate,
    Barrier,
    BufferLoad,
    BufferStore,
    For,
    IfThenElse,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
    seq,
)


@dataclass
class _Accesses:
    reads: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)

    def conflicts(self, later: _Accesses) -> bool:
        """Read after write or write after read. Two writes need no barrier between them: the
        threads of a cooperative fetch write different elements (a program whose threads write
        one element with different values races with or without one)."""
        return bool(later.reads & self.writes or later.writes & self.reads)

    def add(self, other: _Accesses) -> None:
        self.reads |= other.reads
        self.writes |= other.writes


def _shared_accesses(stmt: Stmt, shared: set[str]) -> _Accesses:
    reads = {load.buffer.storage_name for load in collect(stmt, BufferLoad)}
    writes = {store.buffer.storage_name for store in collect(stmt, BufferStore)}
    return _Accesses(reads & shared, writes & shared)


@dataclass
class _Summary:
    """What a statement touches before its first barrier and after its last one."""

    stmt: Stmt
    first: _Accesses
    last: _Accesses
    has_barrier: bool


class _Inserter:
    def __init__(self, shared: set[str]) -> None:
        self.shared = shared

    def visit(self, stmt: Stmt) -> _Summary:
        if isinstance(stmt, SeqStmt):
            return self.sequence(list(stmt.stmts))
        if isinstance(stmt, For):
            return self.loop(stmt)
        if isinstance(stmt, IfThenElse | LetStmt | Allocate):
            return self.wrapper(stmt)
        accesses = _shared_accesses(stmt, self.shared)
        return _Summary(stmt, accesses, accesses, isinstance(stmt, Barrier))

    def sequence(self, stmts: list[Stmt]) -> _Summary:
        out: list[Stmt] = []
        first, pending = _Accesses(), _Accesses()
        has_barrier = False
        for stmt in stmts:
            summary = self.visit(stmt)
            if pending.conflicts(summary.first):
                out.append(Barrier())
                pending = _Accesses()
                has_barrier = True
            if not has_barrier:
                first.add(summary.first)
            out.append(summary.stmt)
            if summary.has_barrier:
                has_barrier = True
                pending = _Accesses(set(summary.last.reads), set(summary.last.writes))
            else:
                pending.add(summary.first)
        return _Summary(seq(*out), first, pending, has_barrier)

    def loop(self, loop: For) -> _Summary:
        body = self.visit(loop.body)
        stmt = body.stmt
        if loop.kind != "thread_binding" and body.last.conflicts(body.first):
            stmt = seq(stmt, Barrier())          # the next iteration would race with this one
            return _Summary(dataclasses.replace(loop, body=stmt), body.first, _Accesses(), True)
        return _Summary(dataclasses.replace(loop, body=stmt), body.first, body.last,
                        body.has_barrier)

    def wrapper(self, stmt: IfThenElse | LetStmt | Allocate) -> _Summary:
        if isinstance(stmt, IfThenElse):
            then = self.visit(stmt.then_body)
            other = self.visit(stmt.else_body) if stmt.else_body is not None else None
            first, last = then.first, then.last
            if other is not None:
                first = _Accesses(first.reads | other.first.reads,
                                  first.writes | other.first.writes)
                last = _Accesses(last.reads | other.last.reads, last.writes | other.last.writes)
            new = dataclasses.replace(stmt, then_body=then.stmt,
                                      else_body=other.stmt if other else None)
            barrier = then.has_barrier or bool(other and other.has_barrier)
            return _Summary(new, first, last, barrier)
        body = self.visit(stmt.body)
        return _Summary(dataclasses.replace(stmt, body=body.stmt), body.first, body.last,
                        body.has_barrier)


def insert_barriers(func: PrimFunc) -> PrimFunc:
    """`func` with a Barrier wherever threads would otherwise race on shared memory (see the
    module docstring). A function without shared buffers or without threadIdx loops (no
    threads to synchronize) is returned unchanged."""
    shared = {a.buffer.name for a in collect(func.body, Allocate) if a.buffer.scope == "shared"}
    threads = [loop for loop in collect(func.body, For)
               if loop.kind == "thread_binding" and loop.thread_tag.startswith("threadIdx")]
    if not shared or not threads:
        return func
    return dataclasses.replace(func, body=_Inserter(shared).visit(func.body).stmt)

"""Barrier insertion: `__syncthreads()` where threads communicate through shared or global
memory.

Threads of a block see each other's shared-memory writes only after a barrier. This pass walks
the code under the thread loops in execution order, keeping the shared buffers read and written
since the last barrier; before a statement that reads a buffer written since then (read after
write) or writes one read or written since then (write after read, write after write), it puts
a `Barrier`. A serial loop
is also checked against itself: when what the end of its body touches conflicts with what the
start of the next iteration touches (the k loop of a tiled matmul: the
compute reads the tile that the next iteration's fetch overwrites), a barrier closes the body.

Buffers of scope "shared" are tracked, and global ones (parameters, global allocations):
threads of a block also see each other's global writes in order only across a barrier, and a
stage computed inside the block (compute_at under its blockIdx loop, not bound to threads) runs
in every thread: its redundant stores must land before another thread reads or overwrites the
element (found by the fuzzer: a producer's late copy in one thread overwrote what another
thread's consumer had just stored). Global elements reached only through an opaque call's
address (the tensor-core store intrinsics: each warp stores its own tiles) are not tracked.
"local" is private to a thread; blocks never synchronize. Two accesses with the same index
built from a variable of every thread axis of the kernel (`X[tx]` written, then read, in a
block of threadIdx.x alone; `X[ty, tx]` with threadIdx.y too) touch one thread's own element
and need no barrier (`X[ty]` in a block of threadIdx.y and x is shared by the threads of a
row: stored under `if tx == 0` and read by the others, it needs the barrier), of one view of
the storage, and where different threads touch different elements whatever the values of the
serial loops' variables in the index (`S[tx * 4 + v]` for v < 4 is one thread's own; `S[tx +
k]` is not: iterations of k touch other threads' elements); otherwise any two accesses to a
buffer may be by different threads, so the pass may put a barrier that a finer analysis would
drop, never omit one that is needed. A loop that may run no iteration, or an `if` with a
barrier in one branch, orders nothing around it; the shared reads of a loop's bounds, of a
condition and of a let's value come before its body. It runs after block conversion and
thread-loop unification, on flattened or unflattened buffers alike.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

import islpy as isl

from sched.ir.extern import addressed_storages
from sched.ir.functor import collect, free_vars
from sched.ir.nodes import (
    Allocate,
    Barrier,
    BinaryOp,
    BufferLoad,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    IntImm,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
    seq,
    warp_intrinsic,
)
from sched.polyhedral.isl_expr import isl_name, to_isl
from sched.polyhedral.isl_text import read_map

# (buffer, indices, the thread variables pinned where it is made, as (variable, value) pairs,
# or None): an access under `if t == 0` (every thread variable pinned to a constant) is made by
# that thread alone, one under `if tx == 0` in a block of rows by the first thread of each row;
# and the shape of the buffer (the view of the storage) the indices index
Access = tuple[str, tuple, frozenset | None, tuple | None]


@dataclass(frozen=True)
class _Threads:
    """The thread variables of a kernel (`axis`: each variable's threadIdx tag) and the axes
    of more than one thread (`needed`): an index that uses a variable of each needed axis
    names one thread's own element."""

    axis: dict
    needed: frozenset
    # variable -> its loop's (min, extent): a loop bound to threadIdx may start past 0
    # (`T.thread_binding(8, 16, ...)`: audit helper-182 saw S[tx - 8] and S[15 - tx] taken
    # for one thread's own over 0 .. 7, and a barrier dropped)
    extent: dict = field(default_factory=dict)
    # variables bound by serial loops, with the constant range of their values (None where
    # it is not constant, and for lets): two accesses may see other values of them
    varying: dict = field(default_factory=dict)

    def __contains__(self, var) -> bool:
        return var in self.axis

    @property
    def variables(self) -> set:
        return set(self.axis)

    def own(self, index: tuple, pins: frozenset | None, other_pins: frozenset | None,
            other_index: tuple | None = None) -> bool:
        """Whether two accesses, of `index` and `other_index` (by default `index`), made where
        `pins` and `other_pins` pin thread variables, are by one thread: each index and the
        pins both accesses share fix every axis, and different threads give different
        elements for the same values of the other variables (isl). The variables of serial
        loops in the indices are not taken at the same values: two accesses of `S[tx + k]` in
        different iterations of k touch other threads' elements (S[tx + 1] at k = 1 is thread
        tx + 1's at k = 0), and sibling loops may bind variables of one name (helper-64: no
        barrier, a race); the elements of different threads must differ for every value of
        them in their loops' ranges (`S[tx * 4 + v]`, v < 4, stays one thread's own; a
        pipeline's `S[k % 2, tx]` written and `S[(k - 1) % 2, tx]` read stay thread tx's:
        audit helper-180); a let's, or a loop's of no constant range, may take any value."""
        other_index = index if other_index is None else other_index
        pinned = {self.axis[v] for v, _ in pins} if pins and pins == other_pins else set()
        for each in (index, other_index):
            used = {self.axis[v] for i in each for v in free_vars(i) if v in self.axis}
            if not (used and self.needed <= used | pinned):
                return False
        pinned_vars = {v for v, _ in pins} if pins and pins == other_pins else set()
        variables = {v for i in (*index, *other_index) for v in free_vars(i)}
        threads = tuple(sorted(variables & set(self.axis) - pinned_vars, key=lambda v: v.name))
        loops = tuple(sorted(variables & set(self.varying), key=lambda v: v.name))
        return _owned(index, other_index, threads,
                      tuple(self.extent.get(v) for v in threads), loops,
                      tuple(self.varying[v] for v in loops))

    def one_thread(self, pins: frozenset | None) -> bool:
        """Whether `pins` fix every axis: the code runs in one thread."""
        return bool(pins) and self.needed <= {self.axis[v] for v, _ in pins}


@functools.lru_cache(maxsize=4096)
def _owned(index: tuple, other_index: tuple, threads: tuple, extents: tuple, loops: tuple,
           ranges: tuple) -> bool:
    """Whether different values of the thread variables `threads` (each over its loop's
    `extents` entry, (min, extent)) never
    give one element as `index` and as `other_index`, whatever the values of the serial
    loops' variables `loops` (each in its range, inclusive, or any value where it is None)
    for each, and for every value of the other variables (`S[tx // 2]` and `S[ty + tx]` are
    shared by several threads), asked of isl; False where it cannot read."""
    if not threads or any(r is None or not all(isinstance(x, IntImm) for x in r)
                          for r in extents):
        return False
    parts, other_parts = [to_isl(i) for i in index], [to_isl(i) for i in other_index]
    if any(p is None for p in (*parts, *other_parts)):
        return False
    names = [isl_name(v) for v in threads]
    loop_names = [isl_name(v) for v in loops]
    others = sorted({isl_name(v) for i in (*index, *other_index) for v in free_vars(i)}
                    - set(names) - set(loop_names))
    bounds = " and ".join(
        [f"{lo.value} <= {n} < {lo.value + e.value}" for n, (lo, e) in zip(names, extents)] +
        [f"{r[0]} <= {n} <= {r[1]}" for n, r in zip(loop_names, ranges) if r is not None]
    ) or "true"
    space = f"[{', '.join(others)}] -> {{ [{', '.join(names + loop_names)}] -> "
    touched = read_map(f"{space}[{', '.join(parts)}] : {bounds} }}")
    other_touched = read_map(f"{space}[{', '.join(other_parts)}] : {bounds} }}")
    same_element = touched.apply_range(other_touched.reverse())
    same_thread = isl.Map.universe(same_element.get_space())
    for p in range(len(names)):
        same_thread = same_thread.equate(isl.dim_type.in_, p, isl.dim_type.out, p)
    return same_element.is_subset(same_thread)


@dataclass
class _Accesses:
    """Shared- and global-memory accesses: (buffer, indices, thread) read and written."""

    reads: set[Access] = field(default_factory=set)
    writes: set[Access] = field(default_factory=set)
    private: _Threads = None             # the thread variables, by axis

    def _clash(self, first: set[Access], second: set[Access]) -> bool:
        for buffer, index, thread, shape in first:
            for other_buffer, other_index, other_thread, other_shape in second:
                if buffer != other_buffer:
                    continue
                if thread == other_thread and self.private.one_thread(thread):
                    continue            # both made by one thread: in its own program order
                # indices of the same view built from the thread's own index, which no two
                # threads share: one thread's elements (views of one storage of other shapes
                # index other elements: helper-64)
                if shape == other_shape and len(index) == len(other_index) and \
                        self.private.own(index, thread, other_thread, other_index):
                    continue
                return True
        return False

    def conflicts(self, later: _Accesses) -> bool:
        """Read after write, write after read or write after write, by another thread. Two
        writes of one element by different threads need the barrier too: the schedule's
        order says which value stays (`S[t] = x` then `S[31 - t] = y` leaves y everywhere
        with a barrier between them; without one, thread 0's second write can come before
        thread 31's first, and x stays in S[31]); the concurrency rule accepts such a pair as
        ordered by a barrier, so the pass must put one there."""
        return (self._clash(self.writes, later.reads) or self._clash(self.reads, later.writes)
                or self._clash(self.writes, later.writes))

    def add(self, other: _Accesses) -> None:
        self.reads |= other.reads
        self.writes |= other.writes

    def empty(self) -> _Accesses:
        return _Accesses(private=self.private)


@dataclass(frozen=True)
class _Tracked:
    """The storages whose accesses the pass orders: shared ones, and global ones."""

    shared: frozenset
    global_: frozenset

    @property
    def all(self) -> frozenset:
        return self.shared | self.global_


def _tracked_accesses(stmt: Stmt, tracked: _Tracked, private: _Threads,
                     thread: frozenset | None = None) -> _Accesses:
    reads = {(load.buffer.storage_name, load.indices, thread, load.buffer.shape)
             for load in collect(stmt, BufferLoad) if load.buffer.storage_name in tracked.all}
    writes = {(store.buffer.storage_name, store.indices, thread, store.buffer.shape)
              for store in collect(stmt, BufferStore) if store.buffer.storage_name in tracked.all}
    # an address of a shared buffer passed to an opaque call: the callee may read and write
    # any element (an index no other access has, so it clashes with every access of it)
    anywhere = {(storage, (IntImm(-1),), thread, None) for storage in addressed_storages(stmt)
                if storage in tracked.shared}
    return _Accesses(reads | anywhere, writes | anywhere, private)



@dataclass
class _Summary:
    """What a statement touches before its first barrier and after its last one."""

    stmt: Stmt
    first: _Accesses
    last: _Accesses
    has_barrier: bool


class _Inserter:
    def __init__(self, tracked: _Tracked, private: _Threads) -> None:
        self.tracked = tracked
        self.private = private
        self.thread: frozenset | None = None     # the thread variables pinned where visited

    def visit(self, stmt: Stmt) -> _Summary:
        if isinstance(stmt, SeqStmt):
            return self.sequence(list(stmt.stmts))
        if isinstance(stmt, For) and warp_intrinsic(stmt) is not None:
            # a tensor-core intrinsic's loops, emitted as one call by the whole warp: no
            # barrier inside it (its stores to global memory are each warp's own tiles)
            accesses = _tracked_accesses(stmt, self.tracked, self.private, self.thread)
            return _Summary(stmt, accesses, accesses, False)
        if isinstance(stmt, For):
            return self.loop(stmt)
        if isinstance(stmt, IfThenElse | LetStmt | Allocate):
            return self.wrapper(stmt)
        accesses = _tracked_accesses(stmt, self.tracked, self.private, self.thread)
        return _Summary(stmt, accesses, accesses, isinstance(stmt, Barrier))

    def sequence(self, stmts: list[Stmt]) -> _Summary:
        out: list[Stmt] = []
        first, pending = _Accesses(private=self.private), _Accesses(private=self.private)
        has_barrier = False
        for stmt in stmts:
            summary = self.visit(stmt)
            if pending.conflicts(summary.first):
                out.append(Barrier())
                pending = pending.empty()
                has_barrier = True
            if not has_barrier:
                first.add(summary.first)
            out.append(summary.stmt)
            if summary.has_barrier:
                has_barrier = True
                pending = _Accesses(set(summary.last.reads), set(summary.last.writes),
                                    self.private)
            else:
                pending.add(summary.first)
        return _Summary(seq(*out), first, pending, has_barrier)

    def loop(self, loop: For) -> _Summary:
        body = self.visit(loop.body)
        # the bounds' shared reads come before the body (`for k in range(S[0])`: helper-64)
        bounds = _tracked_accesses(seq(Evaluate(loop.min), Evaluate(loop.extent)),
                                   self.tracked, self.private, self.thread)
        if bounds.reads:
            body = _Summary(body.stmt, _with_reads(body.first, bounds),
                            body.last if body.has_barrier else _with_reads(body.last, bounds),
                            body.has_barrier)
        stmt = body.stmt
        if loop.kind != "thread_binding" and body.last.conflicts(body.first):
            stmt = seq(stmt, Barrier())          # the next iteration would race with this one
            body = _Summary(stmt, body.first, body.first.empty(), True)
        new = dataclasses.replace(loop, body=stmt)
        if body.has_barrier and not (isinstance(loop.extent, IntImm) and loop.extent.value > 0):
            return _maybe_barrier(new, body)
        return _Summary(new, body.first, body.last, body.has_barrier)

    def wrapper(self, stmt: IfThenElse | LetStmt | Allocate) -> _Summary:
        """The summary of the body (both branches), with the shared reads of the condition or
        the bound value first: they come before anything in the body."""
        summary = self._wrapped(stmt)
        own = stmt.condition if isinstance(stmt, IfThenElse) else \
            stmt.value if isinstance(stmt, LetStmt) else None
        if own is None:
            return summary
        reads = _tracked_accesses(own, self.tracked, self.private, self.thread)
        first = _Accesses(reads.reads | summary.first.reads, set(summary.first.writes),
                          self.private)
        last = summary.last if summary.has_barrier else \
            _Accesses(reads.reads | summary.last.reads, set(summary.last.writes), self.private)
        return _Summary(summary.stmt, first, last, summary.has_barrier)

    def _pins(self, condition) -> frozenset | None:
        """The thread variables `condition` pins to constants (`t == 0`, `tx == 0 and
        ty == 1`), as (variable, value) pairs, or None when it pins none."""
        pinned = {}
        for term in _conjuncts(condition):
            if isinstance(term, BinaryOp) and term.op == "eq":
                var, value = (term.a, term.b) if isinstance(term.b, IntImm) else (term.b, term.a)
                if var in self.private and isinstance(value, IntImm):
                    pinned[var] = value.value
        return frozenset(pinned.items()) or None

    def _wrapped(self, stmt: IfThenElse | LetStmt | Allocate) -> _Summary:
        if isinstance(stmt, IfThenElse):
            enclosing = self.thread
            pins = (enclosing or frozenset()) | (self._pins(stmt.condition) or frozenset())
            self.thread = pins or None
            try:
                then = self.visit(stmt.then_body)
            finally:
                self.thread = enclosing
            other = self.visit(stmt.else_body) if stmt.else_body is not None else None
            first, last = then.first, then.last
            if other is not None:
                first = _Accesses(first.reads | other.first.reads,
                                  first.writes | other.first.writes, self.private)
                last = _Accesses(last.reads | other.last.reads, last.writes | other.last.writes,
                                 self.private)
            new = dataclasses.replace(stmt, then_body=then.stmt,
                                      else_body=other.stmt if other else None)
            if then.has_barrier and other is not None and other.has_barrier:
                return _Summary(new, first, last, True)
            if then.has_barrier or (other is not None and other.has_barrier):
                return _maybe_barrier(new, _Summary(new, first, last, True))
            return _Summary(new, first, last, False)
        body = self.visit(stmt.body)
        return _Summary(dataclasses.replace(stmt, body=body.stmt), body.first, body.last,
                        body.has_barrier)


def _with_reads(accesses: _Accesses, more: _Accesses) -> _Accesses:
    return _Accesses(accesses.reads | more.reads, set(accesses.writes), accesses.private)


def _maybe_barrier(stmt: Stmt, summary: _Summary) -> _Summary:
    """The summary of `stmt`, which runs the barriers of `summary` only sometimes (a loop
    that may run no iteration, a branch): as a statement with no barrier, all of its tracked
    accesses pending after it. Taken as a barrier, a loop `for k in range(T.min(n - 1, 4))`
    holding one let a shared write before it reach a read of another thread after it with
    no barrier between them when n = 1 (audit helper-63)."""
    every = _Accesses(summary.first.reads | summary.last.reads,
                      summary.first.writes | summary.last.writes, summary.first.private)
    return _Summary(stmt, every, every, False)


def _conjuncts(condition) -> list:
    if isinstance(condition, BinaryOp) and condition.op == "and":
        return _conjuncts(condition.a) + _conjuncts(condition.b)
    return [condition]


def insert_barriers(func: PrimFunc) -> PrimFunc:
    """`func` with a Barrier wherever threads would otherwise race on shared or global memory
    (see the module docstring). A function without threadIdx loops (no threads to
    synchronize) is returned unchanged."""
    allocated = collect(func.body, Allocate)
    tracked = _Tracked(
        frozenset(a.buffer.name for a in allocated if a.buffer.scope == "shared"),
        frozenset([b.storage_name for b in func.buffers]
                  + [a.buffer.name for a in allocated if a.buffer.scope == "global"]))
    threads = [loop for loop in collect(func.body, For)
               if loop.kind == "thread_binding" and loop.thread_tag.startswith("threadIdx")]
    if not threads:
        return func
    private = _Threads({loop.loop_var: loop.thread_tag for loop in threads},
                       frozenset(loop.thread_tag for loop in threads
                                 if not (isinstance(loop.extent, IntImm)
                                         and loop.extent.value == 1)),
                       {loop.loop_var: (loop.min, loop.extent) for loop in threads},
                       _varying(func))
    return dataclasses.replace(func, body=_Inserter(tracked, private).visit(func.body).stmt)


def _varying(func: PrimFunc) -> dict:
    """The variables of the serial loops of `func` with the range of their values (over
    every loop of the name: sibling loops may share one), None where a bound is not a
    constant; and the variables of its lets, None."""
    ranges: dict = {let.var: None for let in collect(func.body, LetStmt)}
    for loop in collect(func.body, For):
        if loop.kind == "thread_binding":
            continue
        var = loop.loop_var
        constant = isinstance(loop.min, IntImm) and isinstance(loop.extent, IntImm)
        if not constant or (var in ranges and ranges[var] is None):
            ranges[var] = None
            continue
        low, high = loop.min.value, loop.min.value + max(loop.extent.value, 1) - 1
        if var in ranges:
            low, high = min(low, ranges[var][0]), max(high, ranges[var][1])
        ranges[var] = (low, high)
    return ranges

"""Cross-thread reductions: a reduce loop bound to threadIdx.x becomes an allreduce.

`bind` accepts a reduce loop on threadIdx.x for the class polyhedral/cross_thread.py describes
(one associative update block under the loop, the whole reduction of an element under it). On
the GPU the loop's iterations run on the threads of one block at the same time, so the updates
cannot all go to the output element: each thread accumulates its own iterations into a local
partial result (starting from the identity of the operation: 0 for add, 1 for mul, the lowest
value of the dtype for max, the highest for min), then the block combines the partials:

- CUDA: a tree of `__shfl_down_sync` within each warp (lanes past the block's last thread
  contribute nothing: each step is guarded by the lane count of the warp), then lane 0 of each
  warp writes its result to a shared array, and warp 0 reduces that array the same way;
- C (where a GPU schedule runs as loops over threads split into phases at barriers): each
  thread writes its partial to a shared array of one element per thread, and thread 0 combines
  them in thread order.

Under loops bound to threadIdx.y or threadIdx.z (dlight's GEMV: rows on y), the threads of
each of their iterations reduce apart: the shared arrays hold one row of entries per group, a
warp holds one group (threadIdx.x a multiple of 32) or whole groups, which shuffles of the
group's width keep apart (a power of two below 32; threads are numbered x, then y, then z).

Serial reduce loops directly around the thread loop (TVM's `ko` of `ko, ki = split(k)`,
`CrossThreadReduction.outer`) move inside it: the reduction is lowered where the outermost of
them stands, each thread running its iterations of them into its partial result.

Thread 0 then runs the block's init (if it has one) and stores `X[idx] = X[idx] op total`
(after a barrier: every thread's earlier store to X, such as a decomposed init that runs in
every thread, lands first), so
the result is the element's init combined with every iteration, as before (reassociated, as
rfactor does). Consumers in other threads read it after a barrier (the concurrency rule has
checked that every other use of X is ordered, through shared memory). Where X is each
thread's own ("local": TVM's `cache_write(block, 0, "local")`, its copy-out in every thread),
thread 0 shares the total through a shared array of one entry per group and every thread
stores `X[idx] = init op total` into its copy (`polyhedral/cross_thread.stores_every_copy`
tells the checks so).

Runs on block IR after the buffers are planned and compacted, before `lower_reduction_init`
(it takes the block's init itself); it writes plain loop IR (stores, `Allocate`s) in place of
the block. It inserts no barrier: `insert_barriers` puts one between the writes of the shared
array and its reads, and between the reads and the next writes when the reduction is in a loop.
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.dtype import is_float, max_value, min_value
from sched.ir.functor import IRMutator, collect, free_vars, substitute
from sched.ir.nodes import (
    Allocate,
    Barrier,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    Expr,
    For,
    IfThenElse,
    IntImm,
    PrimFunc,
    Select,
    Stmt,
    Var,
    binary,
    const,
    is_thread_private,
    seq,
)
from sched.ir.simplify import simplify
from sched.polyhedral.cross_thread import (
    REDUCE_TAG,
    CrossThreadReduction,
    cross_thread_reduction,
)

WARP_SIZE = 32
SHUFFLE_DOWN = "shfl_down_sync"     # Call(SHUFFLE_DOWN, (value, offset, lanes, width)): codegen


def identity(op: str, dtype: str) -> Expr:
    """The identity of `op` ("add", "mul", "min", "max") in `dtype` (-0.0 for a float sum:
    x + -0.0 is x for every x, -0.0 included)."""
    if op == "add" and is_float(dtype):
        return const(-0.0, dtype)
    value = {"add": 0, "mul": 1}.get(op)
    if value is None:
        value = min_value(dtype) if op == "max" else max_value(dtype)
    return const(value, dtype)


class _Lowerer(IRMutator):
    def __init__(self, func: PrimFunc, target: str) -> None:
        self.func, self.target = func, target
        self.taken = {b.name for b in func.buffers} | {
            b.name for node in collect(func.body, Allocate) for b in (node.buffer,)} | {
            b.name for realize in collect(func.body, BlockRealize)
            for b in realize.block.alloc_buffers}
        # reductions whose threads also run serial loops around the thread loop: lowered
        # where the outermost of those loops stands (by the loop's identity)
        self.reductions: dict[int, CrossThreadReduction] = {}
        for loop in collect(func.body, For):
            if loop.kind == "thread_binding" and loop.thread_tag == REDUCE_TAG:
                found = cross_thread_reduction(func, loop)
                if isinstance(found, CrossThreadReduction) and found.outer:
                    self.reductions[id(found.outer[0])] = found

    def fresh(self, base: str) -> str:
        name, n = base, 1
        while name in self.taken:
            name, n = f"{base}_{n}", n + 1
        self.taken.add(name)
        return name

    def written_elsewhere(self, reduction: CrossThreadReduction) -> bool:
        """Whether a store outside the reduction's block writes its output's storage."""
        own = {id(store) for store in collect(reduction.realize, BufferStore)}
        return any(store.buffer.storage_name == reduction.storage and id(store) not in own
                   for store in collect(self.func.body, BufferStore))

    def visit_For(self, loop: For):
        found = self.reductions.get(id(loop))
        if found is not None:
            return self.allreduce(found)
        if loop.kind == "thread_binding" and loop.thread_tag == REDUCE_TAG:
            found = cross_thread_reduction(self.func, loop)
            if isinstance(found, CrossThreadReduction):
                return self.allreduce(found)
            _refuse_reduction_across_threads(self.func, loop, found)
        return self.visit_children(loop)

    def allreduce(self, reduction: CrossThreadReduction) -> Stmt:
        loop, realize = reduction.loop, reduction.realize
        dtype = reduction.update.buffer.dtype
        name = reduction.block_name
        partial = Buffer(self.fresh(f"{name}_partial"), (IntImm(1, "int32"),), dtype, "local")
        binding = {iv.var: v for iv, v in zip(realize.block.iter_vars, realize.iter_values,
                                              strict=True)}
        accumulate: Stmt = _store(partial, binary(reduction.op, partial[0],
                                                  substitute(reduction.value, binding)))
        if not (isinstance(realize.predicate, IntImm) and realize.predicate.value == 1):
            accumulate = IfThenElse(realize.predicate, accumulate)
        own_iterations = _replace(loop.body, realize, accumulate)
        for around in reversed(reduction.outer):    # the thread runs them: moved inside
            own_iterations = dataclasses.replace(around, body=own_iterations)
        thread = simplify(loop.loop_var - loop.min) if not _is_zero(loop.min) else loop.loop_var
        start = _store(partial, identity(reduction.op, dtype))
        combine = _Combine(self, reduction, partial, thread, loop.extent.value,
                           *_group(reduction.groups, thread.dtype))
        result = combine.on_gpu() if self.target == "cuda" else combine.on_cpu()
        body = Allocate(partial, seq(start, own_iterations, result.per_thread))
        new_loop = dataclasses.replace(loop, body=body)
        return result.wrap(new_loop)


@dataclasses.dataclass
class _Result:
    per_thread: Stmt                 # after the thread's own iterations
    shared: tuple[Buffer, ...]       # allocated around the thread loop

    def wrap(self, loop: Stmt) -> Stmt:
        for buffer in reversed(self.shared):
            loop = Allocate(buffer, loop)
        return loop


class _Combine:
    """The block-wide combine of the threads' partial results of one reduction."""

    def __init__(self, lowerer: _Lowerer, reduction: CrossThreadReduction, partial: Buffer,
                 thread: Expr, threads: int, group: Expr, groups: int) -> None:
        self.lowerer, self.reduction, self.partial = lowerer, reduction, partial
        self.thread, self.threads = thread, threads
        self.group, self.groups = group, groups    # this thread's group, and how many
        self.op, self.dtype = reduction.op, partial.dtype

    def slot(self, count: int, index: Expr) -> Expr:
        """Entry `index` of this thread's group in a shared array of `count` per group."""
        if self.groups == 1:
            return index
        return simplify(self.group * self.index(count) + index)

    def combined(self, a: Expr, b: Expr) -> Expr:
        return binary(self.op, a, b)

    def index(self, value: int) -> Expr:
        return const(value, self.thread.dtype)

    def write_result(self, total: Expr | None, scratch: Buffer | None = None) -> Stmt:
        """Thread 0's store of the element: init, then the total (or each scratch entry)."""
        realize = self.reduction.realize
        binding = {iv.var: v for iv, v in zip(realize.block.iter_vars, realize.iter_values,
                                              strict=True)}
        update = substitute(self.reduction.update, binding)
        element = BufferLoad(update.buffer, update.indices)
        init = substitute(realize.block.init, binding) if realize.block.init else None
        if total is not None and isinstance(init, BufferStore) and \
                init.buffer == update.buffer and init.indices == update.indices:
            # one store, so no barrier between the init and the update (X = init op total)
            store = BufferStore(update.buffer, self.combined(init.value, total), update.indices)
            return IfThenElse(self.stores(), store)
        steps = [init] if init is not None else []
        if total is not None:
            steps.append(BufferStore(update.buffer, self.combined(element, total),
                                     update.indices))
        else:
            j = _fresh_var(self.lowerer, "j", self.thread.dtype)
            steps.append(For(j, self.index(0), self.index(self.threads), "serial",
                             BufferStore(update.buffer, self.combined(
                                 element, scratch[self.slot(self.threads, j)]),
                                 update.indices)))
        return IfThenElse(self.stores(), seq(*steps))

    @property
    def every_thread(self) -> bool:
        """Whether every thread stores the element: its buffer is each thread's own
        ("local": TVM's cache_write(..., "local") of a cross-thread reduction, whose copy-out
        runs in every thread), so each copy needs the total."""
        return is_thread_private(self.reduction.update.buffer.scope)

    def first(self) -> Expr:
        return binary("eq", self.thread, self.index(0))

    def stores(self) -> Expr:
        """Whether this thread stores the element: thread 0 (each thread where the buffer
        is thread-private), where the block's predicate lets the element be written."""
        guard = self.reduction.guard       # over the loops outside the reduction's
        if self.every_thread:
            return const(True, "bool") if guard is None else guard
        return self.first() if guard is None else binary("and", self.first(), guard)

    def broadcast(self) -> tuple[Stmt, Buffer]:
        """Thread 0's total (in its partial) to every thread of its group, through a shared
        array of one entry per group."""
        total = Buffer(self.lowerer.fresh(f"{self.reduction.block_name}_total"),
                       (IntImm(self.groups, "int32"),), self.dtype, "shared")
        slot = self.slot(1, self.index(0))
        return seq(IfThenElse(self.first(), BufferStore(total, self.partial[0], (slot,))),
                   _store(self.partial, total[slot])), total

    def on_cpu(self) -> _Result:
        """Each thread's partial into a shared array; thread 0 combines them in order."""
        scratch = Buffer(self.lowerer.fresh(f"{self.reduction.block_name}_partials"),
                         (IntImm(self.threads * self.groups, "int32"),), self.dtype, "shared")
        publish = BufferStore(scratch, self.partial[0], (self.slot(self.threads, self.thread),))
        return _Result(seq(publish, self.write_result(None, scratch)), (scratch,))

    def on_gpu(self) -> _Result:
        """Shuffles within each warp, then across the warps through shared memory."""
        tmp = Buffer(self.lowerer.fresh(f"{self.reduction.block_name}_shuffled"),
                     (IntImm(1, "int32"),), self.dtype, "local")
        lane = binary("floormod", self.thread, self.index(WARP_SIZE))
        warp = binary("floordiv", self.thread, self.index(WARP_SIZE))
        if self.threads % WARP_SIZE == 0 or self.threads < WARP_SIZE:
            lanes: Expr = self.index(min(self.threads, WARP_SIZE))
        else:   # the last warp is partial
            lanes = binary("min", self.index(WARP_SIZE),
                           self.index(self.threads) - warp * self.index(WARP_SIZE))
        if self.groups > 1 and self.threads < WARP_SIZE:
            # a warp holds whole groups of `threads` lanes (a power of two): every lane of it
            # shuffles, in segments of a group's width; the last warp of a block whose thread
            # count 32 does not divide holds fewer lanes, and its mask only those
            total = self.threads * self.groups
            shuffling: Expr = self.index(min(WARP_SIZE, total))
            if total > WARP_SIZE and total % WARP_SIZE:
                linear = simplify(self.group * self.index(self.threads) + self.thread)
                first = binary("floordiv", linear, self.index(WARP_SIZE)) * \
                    self.index(WARP_SIZE)
                shuffling = binary("min", self.index(WARP_SIZE), self.index(total) - first)
            steps = [self.warp_reduce(tmp, lane, lanes, self.threads, shuffling,
                                      self.threads)]
        else:
            steps = [self.warp_reduce(tmp, lane, lanes, min(self.threads, WARP_SIZE))]
        shared: tuple[Buffer, ...] = ()
        if self.threads > WARP_SIZE:
            warps = -(-self.threads // WARP_SIZE)
            scratch = Buffer(self.lowerer.fresh(f"{self.reduction.block_name}_warp_partials"),
                             (IntImm(warps * self.groups, "int32"),), self.dtype, "shared")
            shared = (scratch,)
            steps.append(IfThenElse(binary("eq", lane, self.index(0)),
                                    BufferStore(scratch, self.partial[0],
                                                (self.slot(warps, warp),))))
            gather = _store(self.partial, Select(
                binary("lt", self.thread, self.index(warps)),
                scratch[self.slot(warps, self.thread)], identity(self.op, self.dtype)))
            steps.append(IfThenElse(binary("lt", self.thread, self.index(WARP_SIZE)), seq(
                gather, self.warp_reduce(tmp, lane, self.index(WARP_SIZE), warps))))
        elif self.lowerer.written_elsewhere(self.reduction):
            # (one warp, no barrier yet) another block's store to the element, in every thread
            # (an init outside the thread loop), must land before thread 0's
            steps.append(Barrier())
        if self.every_thread:
            broadcast, total = self.broadcast()
            steps.append(broadcast)
            shared = (*shared, total)
        steps.append(self.write_result(self.partial[0]))
        body = seq(*steps)
        if any(store.buffer == tmp for store in collect(body, BufferStore)):
            body = Allocate(tmp, body)      # a partial warp's shuffles go through it
        return _Result(body, shared)

    def warp_reduce(self, tmp: Buffer, lane: Expr, lanes: Expr, width: int,
                    shuffling: Expr | None = None, segment: int = WARP_SIZE) -> Stmt:
        """A shuffle-down tree over the first `width` lanes of each warp (of each `segment`
        lanes of it), into lane 0: at each offset every lane of the warp shuffles (the call
        needs them all: `shuffling` of them, by default `lanes`), and, in a partial warp, a
        lane adds what it received only from a lane that exists (`lanes` of them)."""
        steps = []
        offset = 1
        while offset * 2 < width:
            offset *= 2
        if width < 2:
            return seq()                    # one lane: its partial is the warp's
        full = isinstance(lanes, IntImm) and lanes.value == WARP_SIZE
        shuffling = lanes if shuffling is None else shuffling
        while offset >= 1:
            shuffled = Call(SHUFFLE_DOWN, (self.partial[0], self.index(offset), shuffling,
                                           self.index(segment)), self.dtype)
            if full:
                # a lane past the warp's end gets its own value back and counts it twice, but
                # lane 0 only ever reads lanes 0 + a sum of distinct offsets < 32
                steps.append(_store(self.partial, self.combined(self.partial[0], shuffled)))
                offset //= 2
                continue
            steps.append(_store(tmp, shuffled))
            steps.append(IfThenElse(
                binary("lt", lane + self.index(offset), lanes),
                _store(self.partial, self.combined(self.partial[0], tmp[0]))))
            offset //= 2
        return seq(*steps)


def _group(loops: tuple[For, ...], dtype: str) -> tuple[Expr, int]:
    """(the index of this thread's group among the iterations of the threadIdx.y and .z loops
    around a reduction, z outermost; their number)."""
    index: Expr = const(0, dtype)
    count = 1
    for loop in sorted(loops, key=lambda lp: lp.thread_tag, reverse=True):    # z, then y
        position = loop.loop_var if _is_zero(loop.min) else loop.loop_var - loop.min
        if position.dtype != dtype:
            position = Cast(dtype, position)
        index = simplify(index * const(loop.extent.value, dtype) + position)
        count *= loop.extent.value
    return index, count


def _fresh_var(lowerer: _Lowerer, base: str, dtype: str) -> Var:
    return Var(lowerer.fresh(f"{base}_combine"), dtype)


def _refuse_reduction_across_threads(func: PrimFunc, loop: For, reason: str) -> None:
    """Refuse a threadIdx.x loop that is a reduce loop of a block under it but not a
    cross-thread reduction (a function built without the schedule's checks): its threads would
    update one element at the same time. Unless the concurrency rule finds no dependence
    between its iterations (one thread per element of the reduction, such as a loop whose
    other iterations a predicate leaves out): then it is an ordinary thread loop."""
    from sched.polyhedral.concurrency import concurrency_violation

    for realize in collect(loop.body, BlockRealize):
        for iv, bound in zip(realize.block.iter_vars, realize.iter_values, strict=True):
            if iv.kind == "reduce" and loop.loop_var in free_vars(bound):
                if concurrency_violation(func, loop.loop_var.name) is None:
                    return
                raise ScheduleError(
                    "build", f"loop '{loop.loop_var.name}' is bound to threadIdx.x and is a "
                    f"reduce loop of block '{realize.block.name}', but not a cross-thread "
                    f"reduction ({reason}): its threads would update the same elements at the "
                    f"same time; rfactor the loop (sch.rfactor) and bind the factored block's "
                    f"loop instead")


def _store(scalar: Buffer, value: Expr) -> BufferStore:
    """`scalar[0] = value` for a one-element buffer."""
    return BufferStore(scalar, value, (IntImm(0, "int32"),))


def _is_zero(expr: Expr) -> bool:
    return isinstance(expr, IntImm) and expr.value == 0


def _replace(root: Stmt, old: BlockRealize, new: Stmt) -> Stmt:
    class _Swap(IRMutator):
        def visit_BlockRealize(self, node: BlockRealize):
            return new if node is old else self.visit_children(node)

    return _Swap().visit(root)


def lower_cross_thread_reductions(func: PrimFunc, target: str = "c") -> PrimFunc:
    """`func` with each cross-thread reduction (a reduce loop bound to threadIdx.x, see
    polyhedral/cross_thread.py) rewritten as a per-thread partial result and a block-wide
    combine for `target` ("cuda": warp shuffles then shared memory; "c": a shared array
    combined by thread 0), the result stored by thread 0 (see the module docstring).

    Takes block IR; the rest of it is unchanged. Later passes may rely on: the threads that
    reach a shuffle are all the threads of a warp (the shuffles are under no condition other
    than `threadIdx.x < 32` for the second stage, which whole warps pass or fail).
    """
    body = _Lowerer(func, target).visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)

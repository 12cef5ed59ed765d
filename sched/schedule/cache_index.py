"""cache_index: the index arithmetic a block recomputes at every instance, precomputed by new
blocks into buffers of its own, which the block then reads.

    for vi, vj in T.grid(80, 80):                 index_var_0[v0, v1] = v0 // 4 + v1 // 4
        B[vi, vj] = A[vi // 4 + vj // 4, vj // 2] index_var_1[v0] = v0 // 2
                                        ->        for vi, vj in T.grid(80, 80):
                                                      B[vi, vj] = A[index_var_0[vi, vj],
                                                                    index_var_1[vj]]

Which expressions (TVM's rule, from its common-subexpression tools): per store of the block
(init included), the maximal eligible subexpressions of its indices and value, counted; one
seen fewer than `cse_thresh` times gives its count to its own maximal eligible
subexpressions instead, recursively; those seen at least `cse_thresh` times that occur in a
store's value are cached, the most complex first (ties in the order they occur). So
`cse_thresh` 0 or 1 caches every maximal expression. Eligible: not a variable or constant,
and made only of the block's iteration variables (constant domains), the function's scalar
parameters, constants, arithmetic, casts, selects and math intrinsics.
Where sched differs: TVM merges expressions that its simplifier finds equivalent, sched only
equal ones; sched leaves out, besides loads and impure calls, integer division and modulo by
anything but a positive constant and the bit intrinsics (a shift by a negative amount):
the new blocks compute every point of the variables' domains, where those may be undefined.

Why the numbers stay: each new block stores, at every point of its variables' domains, the
expression of those variables, into a buffer nothing else writes, before the nest of the
block (in the same sequence of its scope); the block then reads, at an instance, the element
its own variables index, which holds exactly what it computed before. What the expressions
compute at points the block never runs is stored and never read, and cannot fault.
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.extern import is_opaque
from sched.ir.functor import IRMutator, collect, substitute
from sched.ir.intervals import block_ranges
from sched.ir.names import fresh
from sched.ir.nodes import (
    MATH_FUNCTIONS,
    TRUE,
    Assume,
    BinaryOp,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Call,
    Cast,
    Expr,
    FloatImm,
    For,
    IfThenElse,
    IntImm,
    IterVar,
    LetStmt,
    Not,
    PrimFunc,
    Range,
    Select,
    Var,
    While,
    const,
)
from sched.ir.regions import infer_block_regions
from sched.schedule.base import BlockRV, ScheduleBase
from sched.schedule.inline_integers import exact_value, fits_its_type, may_wrap
from sched.schedule.memory import _check_scope
from sched.schedule.scope import add_allocation, scope_of, splice, taken_names
from sched.schedule.state import find_block, replace

PRIMITIVE = "cache_index"


def cache_index(func: PrimFunc, block_name: str, storage_scope, cse_thresh=0
                ) -> tuple[PrimFunc, list[str]]:
    """`func` with block `block_name`'s index expressions precomputed (see
    Schedule.cache_index); the new blocks' names."""
    storage_scope = _check_scope(storage_scope, PRIMITIVE, 2)
    if not isinstance(cse_thresh, int) or isinstance(cse_thresh, bool) or cse_thresh < 0:
        raise ScheduleError(PRIMITIVE, f"argument 3, 'cse_thresh' to cache_index: expected a "
                            f"non-negative integer, got {cse_thresh!r}")
    realize = find_block(func, block_name, PRIMITIVE)
    block = realize.block
    if is_opaque(block) or collect(block.body, Block):
        raise ScheduleError(PRIMITIVE, f"block {block_name!r} makes an opaque call or holds "
                            f"blocks; cache_index rewrites the stores of a block whose body it "
                            f"sees whole")
    allowed = _allowed(func, block)
    stores = [*collect(block.init, BufferStore), *collect(block.body, BufferStore)] \
        if block.init is not None else collect(block.body, BufferStore)
    chosen: list[Expr] = []
    for store in stores:
        for expr in _cached(store, allowed, cse_thresh):
            if expr not in chosen:
                chosen.append(expr)
    # stored, an expression is data (int32 arithmetic wraps, as numpy's): one from an index
    # (exact index arithmetic) is stored as its exact value, which must fit its type; one
    # used both as data and in an index only where the two agree; a part of an index only
    # where the rest of the index, then arithmetic on a load, cannot wrap (audit helpers
    # 122, 124, 128)
    ranges = block_ranges(func, block)
    contexts, within = _contexts(stores, _index_arithmetic(block))
    chosen = [e for e in chosen if
              ((contexts[e] == {"index"} and fits_its_type(e, ranges))
               or contexts[e] == {"data"} or not may_wrap(e, ranges))
              and not any(may_wrap(index, ranges) for index in within.get(e, ()))]
    # a let's whole value cached makes its variable data where it was index arithmetic
    # (audit helper-139)
    let_values = {let.value for part in (block.init, block.body) if part is not None
                  for let in collect(part, LetStmt)}
    chosen = [e for e in chosen if e not in let_values]
    chosen.sort(key=lambda e: -_complexity(e))          # stable: ties keep their order
    if not chosen:
        return func, []
    taken = taken_names(func)
    doms = {iv.var: iv.dom for iv in block.iter_vars}
    buffers, stages, loads = [], [], []
    for k, expr in enumerate(chosen):
        variables = [v for v in _vars_in_order(expr) if v in doms]
        buffer = _index_buffer(fresh(f"index_var_{k}", taken), expr, variables, doms,
                               storage_scope)
        buffers.append(buffer)
        stored = exact_value(expr, expr.dtype, ranges) if contexts[expr] == {"index"} \
            else expr
        stages.append(_stage(fresh(f"index_{k}", taken), buffer, stored, variables, doms,
                             taken))
        loads.append(BufferLoad(buffer, tuple(variables)))
    new_block = _rewrite(block, chosen, loads)
    new_func = replace(func, realize, dataclasses.replace(realize, block=new_block))
    new_realize = find_block(new_func, block_name, PRIMITIVE)
    scope = scope_of(new_func, new_realize, PRIMITIVE)
    new_func = splice(new_func, scope.top, [*stages, scope.top])
    scope = scope_of(new_func, find_block(new_func, block_name, PRIMITIVE), PRIMITIVE)
    new_func = add_allocation(new_func, scope.realize, *buffers)
    return new_func, [stage_name(s) for s in stages]


def stage_name(stage) -> str:
    while isinstance(stage, For):
        stage = stage.body
    return stage.block.name


def _allowed(func: PrimFunc, block: Block) -> set:
    """The variables an eligible expression may use: the block's iteration variables with
    constant domains, and the function's scalar parameters."""
    own = {iv.var for iv in block.iter_vars
           if isinstance(iv.dom.min, IntImm) and isinstance(iv.dom.extent, IntImm)}
    return own | {p for p in func.params if isinstance(p, Var)} | set(func.symbolic_vars)


def _eligible(expr: Expr, allowed: set) -> bool:
    """Not an atom, and computable anywhere in the domains without a fault or undefined
    behaviour (see the module doc)."""
    if isinstance(expr, Var | IntImm | FloatImm):
        return False
    if expr.dtype in ("float16", "bfloat16") and not isinstance(expr, Cast):
        # computed in float32 and rounded only where stored or cast: a cache of its type
        # would round it where the function does not (audit, helper-43)
        return False
    return _pure(expr, allowed)


def _pure(expr: Expr, allowed: set) -> bool:
    if isinstance(expr, Var):
        return expr in allowed
    if isinstance(expr, IntImm | FloatImm):
        return True
    if isinstance(expr, Cast | Not):
        return _pure(expr.value if isinstance(expr, Cast) else expr.a, allowed)
    if isinstance(expr, BinaryOp):
        if expr.op in ("div", "floordiv", "floormod", "mod") and not expr.dtype.startswith(
                "float") and not (isinstance(expr.b, IntImm) and expr.b.value > 0):
            return False
        return _pure(expr.a, allowed) and _pure(expr.b, allowed)
    if isinstance(expr, Select):
        return all(_pure(e, allowed) for e in (expr.condition, expr.true_value,
                                               expr.false_value))
    if isinstance(expr, Call):
        return expr.op in MATH_FUNCTIONS and all(_pure(a, allowed) for a in expr.args
                                                 if isinstance(a, Expr))
    return False


def _index_arithmetic(block: Block) -> list[Expr]:
    """The conditions, loop bounds and let values of `block`'s body and init: index
    arithmetic (exact) that `_rewrite` rewrites too (an expression cached from a store and
    replaced in an `if` condition too computed it wrapped: audit helper-131)."""
    found: list[Expr] = []
    for part in (block.init, block.body):
        if part is None:
            continue
        found += [node.condition for kind in (IfThenElse, While, Assume)
                  for node in collect(part, kind)]
        found += [x for loop in collect(part, For) for x in (loop.min, loop.extent)]
        found += [let.value for let in collect(part, LetStmt)]
    return found


def _contexts(stores: list[BufferStore], conditions: list[Expr] = ()
              ) -> tuple[dict[Expr, set[str]], dict[Expr, set]]:
    """Each subexpression of `stores` and of the index arithmetic `conditions`, with where
    it is used: "index" (an index of the store or of a load, a condition, a bound: exact
    index arithmetic) or "data" (the stored value around the loads); and with the whole
    indices it is a part of (cached, it becomes a load, and the arithmetic around it in the
    index becomes arithmetic on data, which wraps)."""
    found: dict[Expr, set[str]] = {}
    within: dict[Expr, set] = {}

    def visit(expr: Expr, context: str, index: Expr | None) -> None:
        found.setdefault(expr, set()).add(context)
        if index is not None and expr is not index:
            within.setdefault(expr, set()).add(index)
        for child in _children(expr):
            if isinstance(expr, BufferLoad):
                visit(child, "index", child)
            else:
                visit(child, context, index)
    for store in stores:
        for index in store.indices:
            visit(index, "index", index)
        visit(store.value, "data", None)
    for condition in conditions:
        visit(condition, "index", condition)
    return found, within


def _children(expr: Expr) -> list[Expr]:
    if isinstance(expr, BinaryOp):
        return [expr.a, expr.b]
    if isinstance(expr, Cast):
        return [expr.value]
    if isinstance(expr, Not):
        return [expr.a]
    if isinstance(expr, Select):
        return [expr.condition, expr.true_value, expr.false_value]
    if isinstance(expr, Call | BufferLoad):
        return [a for a in (expr.args if isinstance(expr, Call) else expr.indices)
                if isinstance(a, Expr)]
    return []


def _done_by(expr: Expr, allowed: set, table: dict) -> None:
    """Count the maximal eligible subexpressions of `expr` into `table` (TVM's
    ComputationsDoneBy: an eligible expression counts, its parts do not)."""
    if _eligible(expr, allowed):
        table[expr] = table.get(expr, 0) + 1
        return
    for child in _children(expr):
        _done_by(child, allowed, table)


def _cached(store: BufferStore, allowed: set, threshold: int) -> list[Expr]:
    """The expressions of one store to cache (the module doc's rule), in post-order of its
    value."""
    table: dict = {}
    for index in store.indices:
        _done_by(index, allowed, table)
    _done_by(store.value, allowed, table)
    items = list(table.items())
    i = 0
    while i < len(items):                 # a rare expression hands its count to its parts
        expr, count = items[i]
        if count < threshold:
            parts: dict = {}
            for child in _children(expr):
                _done_by(child, allowed, parts)
            for part in parts:
                k = next((j for j, (e, _) in enumerate(items) if e == part), None)
                if k is None:
                    items.append((part, count))
                else:
                    items[k] = (part, items[k][1] + count)
        i += 1
    counts = dict(items)
    found: list[Expr] = []
    for node in _post_order(store.value):
        if counts.get(node, -1) >= threshold and node not in found:
            found.append(node)
    return found


def _post_order(expr: Expr) -> list[Expr]:
    out: list[Expr] = []
    for child in _children(expr):
        out += _post_order(child)
    out.append(expr)
    return out


def _complexity(expr: Expr) -> int:
    return 1 + sum(_complexity(c) for c in _children(expr))


def _vars_in_order(expr: Expr) -> list[Var]:
    seen: list[Var] = []
    for node in _post_order(expr):
        if isinstance(node, Var) and node not in seen:
            seen.append(node)
    return seen


def _index_buffer(name: str, expr: Expr, variables: list[Var], doms: dict, scope: str):
    shape = tuple(const(doms[v].min.value + doms[v].extent.value, v.dtype) for v in variables)
    return Buffer(name, shape, expr.dtype, scope)


def _stage(name: str, buffer, expr: Expr, variables: list[Var], doms: dict, taken: set[str]):
    """`for ax...: index_k[v...] = expr(v...)` over the variables' domains."""
    loops = [Var(fresh(f"ax{d}", taken), v.dtype) for d, v in enumerate(variables)]
    own = [Var(fresh(f"v{d}", taken), v.dtype) for d, v in enumerate(variables)]
    iter_vars = tuple(IterVar(w, Range(doms[v].min, doms[v].extent))
                      for w, v in zip(own, variables))
    body = BufferStore(buffer, substitute(expr, dict(zip(variables, own))), tuple(own))
    reads, writes = infer_block_regions(body, None, iter_vars)
    values = tuple(lp if doms[v].min.value == 0 else lp + doms[v].min
                   for lp, v in zip(loops, variables))
    stmt = BlockRealize(values, TRUE, Block(name, iter_vars, reads, writes, body))
    for lp, v in reversed(list(zip(loops, variables))):
        stmt = For(lp, const(0, lp.dtype), doms[v].extent, "serial", stmt)
    return stmt


def _rewrite(block: Block, chosen: list[Expr], loads: list[BufferLoad]) -> Block:
    """The block reading the caches: each chosen expression, outermost occurrences first,
    replaced by its load (TVM's order: the first expression's occurrences before the
    second's)."""
    body, init = block.body, block.init
    for expr, load in zip(chosen, loads):
        class Replace(IRMutator):
            def visit(self, node, expr=expr, load=load):
                if node == expr:
                    return load
                return super().visit(node)
        body = Replace().visit(body)
        init = Replace().visit(init) if init is not None else None
    # the regions of the buffers whose accesses changed are inferred again (a load as an
    # index covers the dimension); the others keep what the block declared
    reads, writes = infer_block_regions(body, init, block.iter_vars, block.alloc_buffers)
    touched = _touched(block.body, body) | _touched(block.init, init)
    old_reads = {r.buffer.name: r for r in block.reads}
    old_writes = {r.buffer.name: r for r in block.writes}
    reads = tuple(old_reads[r.buffer.name] if r.buffer.name in old_reads
                  and r.buffer.name not in touched else _without_loads(r) for r in reads)
    writes = tuple(old_writes[r.buffer.name] if r.buffer.name in old_writes
                   and r.buffer.name not in touched else r for r in writes)
    return dataclasses.replace(block, body=body, init=init, reads=reads, writes=writes)


def _without_loads(region: BufferRegion) -> BufferRegion:
    """`region` with every dimension whose bounds read a buffer (an index read from a cache)
    covering the whole dimension."""
    ranges = tuple(Range(const(0, d.dtype), d) if collect(r.min, BufferLoad) else r
                   for r, d in zip(region.region, region.buffer.shape))
    return BufferRegion(region.buffer, ranges)


def _touched(old, new) -> set[str]:
    """The buffers whose accesses differ between `old` and `new`."""
    if old is None:
        return set()

    def accesses(stmt):
        found = {}
        for node in collect(stmt, BufferLoad) + collect(stmt, BufferStore):
            found.setdefault(node.buffer.name, []).append(node.indices)
        return found
    a, b = accesses(old), accesses(new)
    return {name for name in a.keys() | b.keys() if a.get(name) != b.get(name)}


class CacheIndexPrimitives(ScheduleBase):
    """cache_index."""

    def cache_index(self, block: BlockRV | str, storage_scope: str,
                    cse_thresh: int = 0) -> list[BlockRV]:
        """Precompute the index expressions `block` evaluates at every instance into buffers
        of their own, each filled by a new block before the block's nest; the block reads
        them instead. Nothing to cache leaves the function as it is.

        Requires: the block's body is seen whole (no opaque call, no nested block). Which
        expressions: see the module's doc (TVM's rule): with `cse_thresh` 0 (or 1) every
        maximal eligible expression of a store's value, with a higher one those seen at
        least that often, or their parts.

        Arguments: `block` a block handle or name; `storage_scope` the caches' scope, one of
        "global", "shared", "local"; `cse_thresh` how often an expression must occur.
        Returns: the new blocks (`index_0`, `index_1`..., writing `index_var_0`...), the most
        complex expression first. Handles: `block` stays valid.
        Also known as: `cache_index` in TVM.

        >>> import sched
        >>> from sched.script import T
        >>> @T.prim_func
        ... def resize(A: T.Buffer((1, 3, 40, 40), "float32"),
        ...            B: T.Buffer((1, 3, 80, 80), "float32")):
        ...     for i0, i1, i2, i3 in T.grid(1, 3, 80, 80):
        ...         with T.block("A"):
        ...             n, c, vi, vj = T.axis.remap("SSSS", [i0, i1, i2, i3])
        ...             B[n, c, vi, vj] = A[n, c, vi // 4 + vj // 4, vj // 2]
        >>> sch = sched.Schedule(resize)
        >>> sch.cache_index("A", "global", 1)
        [BlockRV('index_0'), BlockRV('index_1')]
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def resize(A: T.Buffer((1, 3, 40, 40), "float32"), B: T.Buffer((1, 3, 80, 80), "float32")):
            with T.block("root"):
                index_var_0 = T.alloc_buffer((80, 80), "int32")
                index_var_1 = T.alloc_buffer((80,), "int32")
                for ax0, ax1 in T.grid(80, 80):
                    with T.block("index_0"):
                        v0, v1 = T.axis.remap("SS", [ax0, ax1])
                        T.reads()
                        T.writes(index_var_0[v0, v1])
                        index_var_0[v0, v1] = v0 // 4 + v1 // 4
                for ax0_1 in range(80):
                    with T.block("index_1"):
                        v0_1 = T.axis.remap("S", [ax0_1])
                        T.reads()
                        T.writes(index_var_1[v0_1])
                        index_var_1[v0_1] = v0_1 // 2
                for i0, i1, i2, i3 in T.grid(1, 3, 80, 80):
                    with T.block("A"):
                        n, c, vi, vj = T.axis.remap("SSSS", [i0, i1, i2, i3])
                        T.reads(A[n, c, 0:40, 0:40], index_var_0[vi, vj], index_var_1[vj])
                        T.writes(B[n, c, vi, vj])
                        B[n, c, vi, vj] = A[n, c, index_var_0[vi, vj], index_var_1[vj]]
        """
        name = self._block(block, PRIMITIVE)
        new_func, names = cache_index(self._func, name, storage_scope, cse_thresh)
        handles = [BlockRV(n, self._new_rv("b")) for n in names]
        self._record(PRIMITIVE, new_func, (block, storage_scope, cse_thresh),
                     outputs=tuple(handles))
        return handles

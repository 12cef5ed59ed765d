"""loop_partition: a loop's range cut into consecutive parts, each part a copy of the loop
nest, the copies run one after another.

    for i in range(10):                       for i0 in range(2):
        B[i] = A[i] * 2            ->             B_i0: B[i0] = A[i0] * 2
                                              for i1 in T.serial(2, 5):
                                                  B_i1: B[i1] = A[i1] * 2
                                              for i2 in T.serial(5, 10):
                                                  B_i2: B[i2] = A[i2] * 2

TVM's rules for the factors (`ConcreteScheduleNode::LoopPartition`): the loop has constant
bounds; each factor is a positive integer or None (at most one: the rest of the loop); the
given factors sum to less than the extent; without a None, one more part takes the rest. So
`[2, 3]` on 10 makes three parts, `[2, None]` two, and `[5, 5]` is refused.

Names, as TVM names them: part k runs a loop `<loop>k` over its own range (`i1 in
T.serial(2, 5)`, the block bound to it directly; `j_1_0` after a name ending in a digit, not
TVM's `j_10`), and every block under the loop becomes `<block>_<loop>k`. The loops inside
are copied too and, as every loop of a schedule has its own name, become `<loop>_<loop>k`
(`j_i1`; TVM keeps `j` in each copy). TVM also wraps the parts in blocks without iteration
variables (`B_i_common`, `B_i0_partition`...), which open a block scope per part; sched does
not, so a part's blocks stay in their scope and compute_at, cache_read... work across parts.
The old block and loop names are gone: handles to them are refused with the names of their
copies.

Why the numbers stay: part k runs the iterations of the loop in its range, in the order they
ran, and the parts run in the order of their ranges; every statement instance runs in the
same order as before, so no dependence can change (there is nothing to ask polyhedral/). What
could go wrong is the rewrite, so polyhedral/ checks it: the runs of each block's copies are
exactly the runs of the block, each once (isl compares them).

Reductions: a reduce loop may be partitioned (its updates keep their order). The domain of a
spatial iteration variable bound to the loop shrinks to the part's range, as in TVM; a reduce
variable keeps its domain, as its init runs at the domain's first value (TVM shrinks it too,
which would run the init again in each part). A copy in which the init never runs (isl finds
none of its instances at the first reduce values: the later parts of a reduce loop) is left
without it. Buffers allocated under the loop are copied with the nest, renamed per part.
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.functor import IRMutator, collect, substitute
from sched.ir.names import fresh
from sched.ir.nodes import (
    Block,
    BlockRealize,
    For,
    IntImm,
    IterVar,
    PrimFunc,
    Range,
    Stmt,
    Var,
    const,
)
from sched.polyhedral import build_model
from sched.polyhedral.isl_text import read_set
from sched.schedule.base import LoopRV, ScheduleBase
from sched.schedule.loops import _as_ints, _check_plain
from sched.schedule.scope import refusal, replace_buffer, splice, taken_names
from sched.schedule.state import find_loop

PRIMITIVE = "loop_partition"


def partition_ranges(factors, loop: For, render: bool, func: PrimFunc) -> list[tuple[int, int]]:
    """The [start, end) of each part of `loop` for `factors` (TVM's rules, see the module
    doc), or a ScheduleError saying how to fix the call."""
    name = loop.loop_var.name

    def refuse(reason: str) -> ScheduleError:
        return refusal(PRIMITIVE, reason, func, name, render)
    if not isinstance(loop.min, IntImm) or not isinstance(loop.extent, IntImm):
        symbolic = (f"extent {loop.extent.script()}" if not isinstance(loop.extent, IntImm)
                    else f"start {loop.min.script()}")
        raise refuse(f"loop {name!r} has the symbolic {symbolic}: the "
                     f"parts of a loop must have constant bounds (TVM's rule); partition a "
                     f"loop of constant extent (split this one, "
                     f"sch.split({name}, factors=[None, 16]), and partition the inner loop)")
    if not isinstance(factors, list | tuple) or not factors:
        raise refuse(f"argument 2, 'factors' to loop_partition: expected a non-empty list of "
                     f"positive integers (one may be None), got {factors!r}")
    for position, factor in enumerate(factors):
        if factor is not None and (not isinstance(factor, int) or isinstance(factor, bool)
                                   or factor <= 0):
            raise refuse(f"cannot partition loop {name!r} with the factor {factor!r} (at "
                         f"position {position}): every factor must be a positive integer (or "
                         f"one None)")
    if sum(f is None for f in factors) > 1:
        raise refuse(f"argument 2, 'factors' {list(factors)} to loop_partition: at most one "
                     f"factor may be None (it takes the rest of the loop)")
    extent, start = loop.extent.value, loop.min.value
    given = sum(int(f) for f in factors if f is not None)
    if given >= extent:
        fix = ("make one factor None to take the rest" if None not in factors else
               "make the others smaller")
        raise refuse(f"the factors {list(factors)} of loop {name!r} sum to {given}, not less "
                     f"than its extent {extent}: the last part is the rest of the loop, which "
                     f"would be empty (TVM's rule); drop the last factor, or {fix}")
    sizes = [extent - given if f is None else int(f) for f in factors]
    if None not in factors:
        sizes.append(extent - given)
    ranges, low = [], start
    for size in sizes:
        ranges.append((low, low + size))
        low += size
    return ranges


class _Copy(IRMutator):
    """One part's copy of a loop's body: the loop variable already replaced by the part's,
    every loop and block renamed `<name>_<part>`, every statement a new node (steps find
    statements by identity), a spatial iteration variable bound to the part's variable over
    the part's range."""

    def __init__(self, var: Var, low: int, high: int, taken: set[str]):
        self.var, self.low, self.high, self.taken = var, low, high, taken
        self.renamed: dict[str, str] = {}            # old block name -> its copy's name

    def visit(self, node):
        new = super().visit(node)
        if new is node and isinstance(node, Stmt | Block):
            new = dataclasses.replace(node)
        return new

    def visit_For(self, loop: For):
        var = Var(fresh(f"{loop.loop_var.name}_{self.var.name}", self.taken), loop.loop_var.dtype)
        loop = dataclasses.replace(loop, loop_var=var,
                                   body=substitute(loop.body, {loop.loop_var: var}))
        return self.visit_children(loop)

    def visit_BlockRealize(self, realize: BlockRealize):
        realize = self.visit_children(realize)
        block = realize.block
        iter_vars = tuple(self._narrowed(iv) if value == self.var else iv
                          for iv, value in zip(block.iter_vars, realize.iter_values))
        name = fresh(f"{block.name}_{self.var.name}", self.taken)
        self.renamed[block.name] = name
        return dataclasses.replace(realize, block=dataclasses.replace(
            block, name=name, iter_vars=iter_vars))

    def _narrowed(self, iv: IterVar) -> IterVar:
        """A spatial variable bound to the part's loop over the part's range (TVM's), when
        its domain holds that range; a reduce variable keeps its domain (its init runs at the
        first value)."""
        dom = iv.dom
        if iv.kind != "spatial" or not isinstance(dom.min, IntImm) or \
                not isinstance(dom.extent, IntImm) or \
                not dom.min.value <= self.low < self.high <= dom.min.value + dom.extent.value:
            return iv
        dtype = dom.min.dtype
        return dataclasses.replace(iv, dom=Range(const(self.low, dtype),
                                                 const(self.high - self.low, dtype)))


def _copy_allocations(part: Stmt, allocated, suffix: str, taken: set[str]) -> Stmt:
    """`part` with the buffers its blocks allocate renamed `<buffer>_<part loop>` (each part
    allocates its own)."""
    for buffer in allocated:
        renamed = dataclasses.replace(buffer, name=fresh(f"{buffer.name}_{suffix}", taken))
        part = replace_buffer(part, buffer, renamed)
    return part


def _runs(statement, name: str):
    """The statement's runs as an isl set: its instance dims, then its loops' values, outermost
    first (tuple `name`)."""
    loops = list(dict.fromkeys(statement.loop_names()))
    constraints = " and ".join(dict.fromkeys(statement.constraints)) or "true"
    return read_set(f"{statement.param_text} {{ {name}[{', '.join(statement.dim_names + loops)}]"
                    f" : {constraints} }}")


def _drop_dead_inits(func: PrimFunc, copies: dict[str, list[str]]) -> PrimFunc:
    """`func` without the init of each copied block in which it never runs (isl: no instance
    of the copy is at the first reduce values)."""
    model = build_model(func)
    dead = set()
    for names in copies.values():
        for name in names:
            for statement in model.statements_of_block(name):
                if statement.is_init and statement.exact and statement.domain.is_empty() \
                        and not collect(statement.block.init, BlockRealize):
                    dead.add(name)
    if not dead:
        return func

    class Drop(IRMutator):
        def visit_Block(self, block: Block):
            block = self.visit_children(block)
            return dataclasses.replace(block, init=None) if block.name in dead else block
    return Drop().visit(func)


def _check_runs(func: PrimFunc, new_func: PrimFunc, copies: dict[str, list[str]]) -> None:
    """isl: the runs of each block's copies (body and init) are the runs of the block, each
    once (a copy without init has no init runs)."""
    old, new = build_model(func), build_model(new_func)
    for block, names in copies.items():
        for statement in old.statements_of_block(block):
            want = _runs(statement, statement.name)
            parts = [_runs(s, statement.name) for name in names
                     for s in new.statements_of_block(name) if s.is_init == statement.is_init]
            union = None
            for k, part in enumerate(parts):
                part = part.align_params(want.get_space())
                if any(not part.intersect(other.align_params(want.get_space())).is_empty()
                       for other in parts[k + 1:]):
                    raise AssertionError(f"loop_partition: two copies of {block!r} run one "
                                         f"instance")
                union = part if union is None else union.union(part)
            if union is None or not union.align_params(want.get_space()).is_equal(want):
                raise AssertionError(f"loop_partition: the copies of {block!r} do not run its "
                                     f"instances")


def loop_partition(func: PrimFunc, loop_name: str, factors, render: bool = True
                   ) -> tuple[PrimFunc, list[str], dict[str, list[str]], list[str]]:
    """`func` with loop `loop_name` partitioned by `factors` (see Schedule.loop_partition);
    the part loops' names, each old block's copies (one per part) and the old loops inside."""
    loop = find_loop(func, loop_name, PRIMITIVE)
    _check_plain(loop, PRIMITIVE)
    ranges = partition_ranges(factors, loop, render, func)
    taken = taken_names(func)
    allocated = [b for block in collect(loop, Block) for b in block.alloc_buffers]
    parts, names = [], []
    copies: dict[str, list[str]] = {}
    for k, (low, high) in enumerate(ranges):
        # TVM's `i0`; after a name that ends in a digit, `j_1_0` (not `j_10`)
        base = f"{loop_name}_{k}" if loop_name[-1].isdigit() else f"{loop_name}{k}"
        var = Var(fresh(base, taken), loop.loop_var.dtype)
        copy = _Copy(var, low, high, taken)
        body = copy.visit(substitute(loop.body, {loop.loop_var: var}))
        body = _copy_allocations(body, allocated, var.name, taken)
        parts.append(For(var, const(low, var.dtype), const(high - low, var.dtype), "serial",
                         body))
        names.append(var.name)
        for old, new in copy.renamed.items():
            copies.setdefault(old, []).append(new)
    new_func = _drop_dead_inits(splice(func, loop, parts), copies)
    _check_runs(func, new_func, copies)
    inner = [lp.loop_var.name for lp in collect(loop.body, For)]
    return new_func, names, copies, inner


class LoopPartitionPrimitives(ScheduleBase):
    """loop_partition."""

    def loop_partition(self, loop: LoopRV, factors, preserve_unit_iters: bool = True
                       ) -> list[LoopRV]:
        """Cut a loop's range into consecutive parts, each running a copy of the loop's
        body, one after another.

        Requires: the loop has constant bounds, is serial and carries no annotation; the
        factors are positive integers and at most one None (the rest of the loop), and sum
        to less than the extent. Without a None, one more part runs the rest (TVM's rule:
        `[2, 3]` on 10 makes three parts). Always legal: the parts run the iterations in
        their old order.

        Arguments: `loop` a loop handle; `factors` the sizes of the parts, first to last
        (ints, sampled values, one None); `preserve_unit_iters` (TVM's) is accepted and
        changes nothing (bindings are kept as they are).
        Returns: handles to the parts' loops, first to last: `<loop>0`, `<loop>1`...
        Handles: `loop`, the loops inside it and its blocks are gone (each block is copied to
        `<block>_<loop>k` in part k; get those with sch.get_block).
        Also known as: `loop_partition` in TVM; Halide partitions loops itself, where it
        finds boundary conditions (`Func::partition` sets the policy).

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((10,), name="A")
        >>> B = te.compute((10,), lambda i: A[i] * 2.0, name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]))
        >>> (i,) = sch.get_loops(sch.get_block("B"))
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
            with T.block("root"):
                for i in range(10):
                    with T.block("B"):
                        v_i = T.axis.remap("S", [i])
                        T.reads(A[v_i])
                        T.writes(B[v_i])
                        B[v_i] = A[v_i] * T.float32(2.0)
        >>> sch.loop_partition(i, factors=[2, 3])
        [LoopRV('i0'), LoopRV('i1'), LoopRV('i2')]
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
            with T.block("root"):
                for i0 in range(2):
                    with T.block("B_i0"):
                        v_i = T.axis.remap("S", [i0])
                        T.reads(A[v_i])
                        T.writes(B[v_i])
                        B[v_i] = A[v_i] * T.float32(2.0)
                for i1 in T.serial(2, 5):
                    with T.block("B_i1"):
                        v_i = T.axis.remap("S", [i1])
                        T.reads(A[v_i])
                        T.writes(B[v_i])
                        B[v_i] = A[v_i] * T.float32(2.0)
                for i2 in T.serial(5, 10):
                    with T.block("B_i2"):
                        v_i = T.axis.remap("S", [i2])
                        T.reads(A[v_i])
                        T.writes(B[v_i])
                        B[v_i] = A[v_i] * T.float32(2.0)
        """
        name = self._loop(loop, PRIMITIVE)
        if not isinstance(preserve_unit_iters, bool):
            raise TypeError(f"argument 3, 'preserve_unit_iters' to loop_partition: expected a "
                            f"bool, got {preserve_unit_iters!r}")
        factors = _as_ints(factors)
        new_func, names, copies, inner = loop_partition(self._func, name, factors,
                                                        render=self.render_errors)
        handles = [LoopRV(n, self._new_rv("l")) for n in names]
        attrs: tuple = (("factors", list(factors)),)
        if not preserve_unit_iters:
            attrs += (("preserve_unit_iters", False),)
        self._record(PRIMITIVE, new_func, (loop,), attrs, tuple(handles))
        self._note_replaced("loop", name, f"loop_partition replaced it by {', '.join(names)}")
        for old in inner:
            self._note_replaced("loop", old, f"loop_partition copied it into each part of "
                                f"loop {name!r} ({', '.join(names)}): get the copies with "
                                f"sch.get_loops")
        for old, new in copies.items():
            self._note_replaced("block", old, f"loop_partition copied it into "
                                f"{', '.join(new)}: get one with sch.get_block({new[0]!r})")
        return handles

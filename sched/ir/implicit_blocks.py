"""Statements written outside any block (TVM's lowered form: `for i: B[i] = A[i + 1]`, a
store under `T.launch_thread`), each given a block of its own, for the checks that read
blocks only: the bounds of every access and the rule of concurrent loops (audit
helper-137: such a store out of bounds segfaulted, and such loops raced, unchecked).

    for i in T.parallel(64):                 for i in T.parallel(64):
        B[i + 1] = B[i] + A[i]       ->          with T.block("implicit_0"):
                                                     v_i = T.axis.spatial(64, i)
                                                     B[v_i + 1] = B[v_i] + A[v_i]

Each statement of a loop body that holds no loop and no block (a store, a call, an `if` or
a `let` around them) becomes one block, its iteration variables bound one to one to the
loops around it; the rest of the function is kept. The function made is only analysed,
never built or shown. Not under two loops of one thread axis (a lowered kernel's phases,
`for t: X[t] = ...; for t2 < 64 of the same axis: ...`): the loops as written do not give
the threads' order there, and such a statement stays unchecked, as before.
"""

from __future__ import annotations

import dataclasses

from sched.ir.functor import IRMutator, collect, substitute
from sched.ir.memo import identity_cache
from sched.ir.names import fresh
from sched.ir.nodes import (
    TRUE,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    IterVar,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Var,
)
from sched.ir.regions import infer_block_regions


@identity_cache(maxsize=64)
def with_implicit_blocks(func: PrimFunc) -> PrimFunc:
    """`func` with each statement outside blocks in a block of its own (the module doc), or
    `func` itself where every store is in a block."""
    if not _outside_blocks(func.body):
        return func
    wrapper = _Wrapper(func)
    return dataclasses.replace(func, body=wrapper.wrap_or_visit(func.body))


def _outside_blocks(stmt: Stmt, where: str = "outside") -> bool:
    """Whether `stmt` holds a store or a call the model does not see: outside every block,
    or under a loop of a block's body (`where`: "outside", "block" directly in a block's
    body, "loop" under a loop of one)."""
    if isinstance(stmt, BlockRealize):
        return any(_outside_blocks(part, "block") for part in (stmt.block.body,
                                                               stmt.block.init)
                   if part is not None)
    if isinstance(stmt, BufferStore | Evaluate):
        return where != "block"
    if isinstance(stmt, For) and where == "block":
        where = "loop"
    return any(_outside_blocks(child, where) for child in _statements(stmt))


def _statements(stmt: Stmt) -> list[Stmt]:
    found = []
    for name in ("body", "then_body", "else_body", "stmts"):
        value = getattr(stmt, name, None)
        if isinstance(value, Stmt):
            found.append(value)
        elif isinstance(value, tuple):
            found += [s for s in value if isinstance(s, Stmt)]
    return found


class _Wrapper(IRMutator):
    def __init__(self, func: PrimFunc) -> None:
        self.loops: list[For] = []
        self.block_vars: list[tuple[IterVar, ...]] = []     # of the blocks around, outermost first
        self.taken = {v.name for v in collect(func.body, Var)}
        self.blocks = {b.name for b in collect(func.body, Block)}
        self.outer = (*func.symbolic_vars, *[p for p in func.params if isinstance(p, Var)])

    def visit_BlockRealize(self, node: BlockRealize):
        """A block whose body holds loops around its statements (and no block): the
        statements under those loops in blocks of their own, the block around them (audit
        helper-137: a vectorized loop in a block's body raced unchecked)."""
        block = node.block
        if not _outside_blocks(node):
            return node
        outer, self.loops = self.loops, []          # (the block's variables stand for them)
        self.block_vars.append(block.iter_vars)
        try:
            body = self.within_block(block.body)
            init = None if block.init is None else self.within_block(block.init)
        finally:
            self.loops = outer
            self.block_vars.pop()
        return dataclasses.replace(node, block=dataclasses.replace(block, body=body,
                                                                   init=init))

    def within_block(self, stmt: Stmt) -> Stmt:
        """`stmt` of a block's body: what lies under a loop in blocks, the rest as it is."""
        if isinstance(stmt, For):
            return self.visit_For(stmt)
        if isinstance(stmt, SeqStmt):
            return SeqStmt(tuple(self.within_block(s) for s in stmt.stmts))
        return stmt if not collect(stmt, For) else self.visit(stmt)

    def visit_For(self, loop: For):
        self.loops.append(loop)
        try:
            body = self.wrap_or_visit(loop.body)
        finally:
            self.loops.pop()
        return loop if body is loop.body else dataclasses.replace(loop, body=body)

    def visit_BufferStore(self, store: BufferStore):
        return self.block(store)          # (beside a loop in an `if` or a `let`)

    def visit_Evaluate(self, node: Evaluate):
        return self.block(node)

    def wrap_or_visit(self, stmt: Stmt) -> Stmt:
        """`stmt` in a block where it holds no loop and no block, else its parts."""
        if not _outside_blocks(stmt):
            return stmt
        if not collect(stmt, For) and not collect(stmt, BlockRealize):
            return self.block(stmt)
        if isinstance(stmt, SeqStmt):
            return SeqStmt(tuple(self.wrap_or_visit(s) for s in stmt.stmts))
        return self.visit(stmt)

    def block(self, stmt: Stmt) -> BlockRealize:
        """`stmt` in a block whose iteration variables are those of the block around it
        (each bound to it) and the loops around it in that block."""
        mapping: dict[Var, Var] = {}
        iter_vars, values = [], []
        for around in self.block_vars[-1:]:       # (a block's body sees its own only)
            for iter_var in around:
                var = Var(fresh(f"v_{iter_var.var.name}", self.taken), iter_var.var.dtype)
                mapping[iter_var.var] = var
                iter_vars.append(IterVar(var, iter_var.dom, iter_var.kind))
                values.append(iter_var.var)
        tags = [loop.thread_tag for loop in self.loops if loop.kind == "thread_binding"
                and not loop.thread_tag.startswith("vthread")]
        if len(tags) != len(set(tags)):
            # a loop of a thread axis inside another: phases of the same threads, which the
            # lowering separates by barriers; the order of the loops as written is not the
            # threads' (left as it was: unchecked)
            return stmt
        for loop in self.loops:
            var = Var(fresh(f"v_{loop.loop_var.name}", self.taken), loop.loop_var.dtype)
            mapping[loop.loop_var] = var
            iter_vars.append(IterVar(var, Range(loop.min, loop.extent), "spatial"))
            values.append(loop.loop_var)
        body = substitute(stmt, mapping)
        reads, writes = infer_block_regions(body, None, tuple(iter_vars), (), self.outer)
        name = fresh("outside_blocks", self.blocks)
        return BlockRealize(tuple(values), TRUE,
                            Block(name, tuple(iter_vars), reads, writes, body))

"""Where a primitive that adds a block or a buffer puts it, and what the reduction and memory
primitives share.

A block lives in a scope: the innermost block around it (the root block for a top-level one).
The reduction and memory primitives add stages next to a block inside its scope and buffers to
the scope's allocations; this module finds the scope, splices statements into a body without
nesting sequences (so that `parse(print(f)) == f` still holds), and makes fresh names for
blocks, buffers and variables.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sched.errors import ScheduleError
from sched.ir.functor import IRMutator, collect, free_vars
from sched.ir.nodes import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    For,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    seq,
)
from sched.polyhedral.legality import mark_loop
from sched.schedule.state import path_to, replace


@dataclass(frozen=True)
class Scope:
    """The scope of a block: the realize of the innermost block around it, the statement of
    that block's body that holds it (`top`), and the loops between the scope and the block."""

    realize: BlockRealize
    top: Stmt
    loops: tuple[For, ...]


def scope_of(func: PrimFunc, realize: BlockRealize, primitive: str) -> Scope:
    path = path_to(func.body, realize)
    assert path is not None, "the block is not in the function"
    owners = [i for i, node in enumerate(path) if isinstance(node, BlockRealize)]
    if not owners:
        raise ScheduleError(primitive, f"block {realize.block.name!r} is not inside a root "
                            f"block; write the function with `with T.block(\"root\"):`")
    inner = [*path[owners[-1] + 2:], realize]       # below the scope's Block node
    top = inner[1] if isinstance(inner[0], SeqStmt) else inner[0]
    loops = tuple(node for node in inner if isinstance(node, For))
    return Scope(path[owners[-1]], top, loops)


def splice(func: PrimFunc, target: Stmt, stmts: list[Stmt]) -> PrimFunc:
    """`func` with the statement `target` (by identity) replaced by `stmts`, spliced into the
    sequence around it when there is one."""
    path = path_to(func.body, target)
    assert path, "splice: the statement is not in the function"
    parent = path[-1]
    if isinstance(parent, SeqStmt):
        items: list[Stmt] = []
        for stmt in parent.stmts:
            items.extend(stmts if stmt is target else [stmt])
        return replace(func, parent, SeqStmt(tuple(items)))
    return replace(func, target, seq(*stmts))


def add_allocation(func: PrimFunc, scope: BlockRealize, *buffers: Buffer) -> PrimFunc:
    """`func` with `buffers` allocated by the scope block (its body keeps its identity)."""
    block = dataclasses.replace(scope.block, alloc_buffers=scope.block.alloc_buffers + buffers)
    return replace(func, scope, dataclasses.replace(scope, block=block))


def replace_buffer(node, old: Buffer, new: Buffer):
    """`node` with every use of buffer `old` (loads, stores, regions, allocations) by `new`."""

    class Replace(IRMutator):
        def visit_Buffer(self, buffer: Buffer) -> Buffer:
            return new if buffer == old else buffer
    return Replace().visit(node)


def buffer_names(func: PrimFunc) -> set[str]:
    """The parameters, the allocated buffers and the views of `func`."""
    names = {b.name for b in func.buffers}
    names |= {b.name for block in collect(func.body, Block) for b in block.alloc_buffers}
    names |= {node.buffer.name for node in collect(func.body, Allocate)}
    return names


def taken_names(func: PrimFunc) -> set[str]:
    """The names of the variables, buffers, blocks and parameters of `func` (a new variable or
    buffer must differ from all, or the script would not parse back)."""
    params = {p.name for p in func.params}
    return {v.name for v in collect(func, Var)} | buffer_names(func) | block_names(func) | params


def block_names(func: PrimFunc) -> set[str]:
    """The names of the blocks of `func`, root included."""
    return {r.block.name for r in collect(func.body, BlockRealize)}


def blocks_accessing(stmt: Stmt, buffer: Buffer, access: str) -> list[Block]:
    """The blocks in `stmt` that declare `buffer`'s storage (through it or any view of the same
    storage) in their reads ("read") or writes ("write")."""
    regions = (lambda b: b.reads) if access == "read" else (lambda b: b.writes)
    return [block for block in collect(stmt, Block)
            if any(r.buffer.storage_name == buffer.storage_name for r in regions(block))]


def check_one_view(block: Block, buffer: Buffer, primitive: str) -> None:
    """Refuse a block that accesses `buffer`'s storage through another buffer too (a view,
    `T.Buffer(..., data=A.data)`), or that declares `buffer` itself (`T.decl_buffer` in its
    body): a cache of `buffer` would miss those accesses or could not name it outside."""
    from sched.ir.nodes import BufferLoad, BufferRegion, BufferStore

    others = {node.buffer.name for kind in (BufferLoad, BufferStore, BufferRegion)
              for node in collect(block, kind)
              if node.buffer.storage_name == buffer.storage_name and node.buffer != buffer}
    if others:
        raise ScheduleError(primitive, f"block {block.name!r} accesses the storage of "
                            f"{buffer.name!r} through {', '.join(sorted(others))} too (views "
                            f"of one storage); {primitive} caches one buffer: make the block "
                            f"access it through one of them")
    if any(a.buffer == buffer for a in collect(block.body, Allocate)):
        raise ScheduleError(primitive, f"{buffer.name!r} is declared inside block "
                            f"{block.name!r} (T.decl_buffer), where a cache stage outside it "
                            f"cannot name it; declare the view at the function's start "
                            f"({buffer.name} = T.Buffer(..., data=...)) to cache it")


def loop_roles(realize: BlockRealize, loops) -> dict[Var, set[str]]:
    """For each loop: the kinds of the iteration variables whose bindings use it."""
    roles: dict[Var, set[str]] = {lp.loop_var: set() for lp in loops}
    for iter_var, value in zip(realize.block.iter_vars, realize.iter_values):
        for var in free_vars(value):
            if var in roles:
                roles[var].add(iter_var.kind)
    return roles


def refusal(primitive: str, reason: str, func: PrimFunc, loop: str | None, render: bool,
                 alternatives: tuple[str, ...] = ()) -> ScheduleError:
    """A ScheduleError showing the IR (with loop `loop` marked) unless `render` is off."""
    script = None
    if render:
        script = func.script() if loop is None else mark_loop(func.script(), loop)
    return ScheduleError(primitive, reason, ir=script, alternatives=alternatives, render=render)

"""Finding and replacing parts of the function a schedule works on.

Loops are named by their variables and blocks by their names, both unique in the function (the
Schedule makes loop names unique when it starts), so a name is a stable handle: a primitive that
keeps a loop keeps its name, one that replaces it makes new names.
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.functor import IRMutator, child_field_names, collect, field_names
from sched.ir.names import fresh
from sched.ir.nodes import (
    BlockRealize,
    Expr,
    For,
    Node,
    PrimFunc,
    Stmt,
    Var,
    binary,
)
from sched.ir.paths import enclosing_loops, index, path_to  # noqa: F401 (used here and re-exported)


def block_names(func: PrimFunc) -> list[str]:
    return list(index(func.body).block_order)


def loop_names(func: PrimFunc) -> list[str]:
    return list(index(func.body).loop_order)


def _choices(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names) or "none"


def find_block(func: PrimFunc, name: str, primitive: str = "get_block") -> BlockRealize:
    found = index(func.body).blocks.get(name)
    if found is not None:
        return found
    raise ScheduleError(primitive, f"no block named {name!r}; the blocks are "
                        f"{_choices(block_names(func))}")


def find_loop(func: PrimFunc, name: str, primitive: str) -> For:
    found = index(func.body).loops.get(name)
    if found is not None:
        return found
    raise ScheduleError(primitive, f"no loop named {name!r}; the loops are "
                        f"{_choices(loop_names(func))}")


def blocks_under(stmt: Stmt) -> list[BlockRealize]:
    """The outermost block realizes inside `stmt` (not those nested in other blocks)."""
    found: list[BlockRealize] = []

    def walk(node) -> None:
        if isinstance(node, BlockRealize):
            found.append(node)
            return
        for name in child_field_names(type(node), statements_only=True):
            value = getattr(node, name)
            for child in value if isinstance(value, tuple) else (value,):
                if isinstance(child, Stmt):
                    walk(child)
    walk(stmt)
    return found


def replace_in(root, old: Node, new: Node):
    """`root` with the node `old` (by identity) replaced by `new`.

    A loop or a block (unique by name: one place in the tree) is found through the index of
    `root` and only the nodes above it are rebuilt; any other node is replaced wherever it
    occurs, by a walk of the statements."""
    if root is old:
        return new
    if isinstance(old, For | BlockRealize):
        path = path_to(root, old)
        if path is None:
            return root
        for parent in reversed(path):
            old, new = parent, _with_child(parent, old, new)
        return new

    class Replace(IRMutator):
        def visit(self, node):
            if node is old:
                return new
            return node if isinstance(node, Expr) else super().visit(node)
    return Replace().visit(root)


def _with_child(parent: Node, old: Node, new: Node) -> Node:
    """`parent` with its child `old` (by identity, a field or an item of a tuple field)
    replaced by `new`."""
    for name in field_names(type(parent)):
        value = getattr(parent, name)
        if value is old:
            return dataclasses.replace(parent, **{name: new})
        if isinstance(value, tuple) and any(item is old for item in value):
            items = tuple(new if item is old else item for item in value)
            return dataclasses.replace(parent, **{name: items})
    raise AssertionError("the index's parent does not hold the node")


def replace(func: PrimFunc, old: Node, new: Node) -> PrimFunc:
    """`func` with the node `old` (by identity) replaced by `new`, which must be in it."""
    result = replace_in(func, old, new)
    assert result is not func or old is new, "replace: node not found"
    return result


def other_views(func: PrimFunc, buffer) -> list[str]:
    """The names of the other buffers of `func` that use `buffer`'s storage (views declared
    with `data=`, or the buffer a view of which `buffer` is)."""
    from sched.ir.nodes import Buffer

    return sorted({b.name for b in collect(func, Buffer)
                   if b.storage_name == buffer.storage_name and b.name != buffer.name})


def refuse_other_views(func: PrimFunc, buffer, primitive: str, what: str) -> None:
    """Refuse a step that rewrites or removes `buffer` (`what` it would do) while other views
    reach the same storage: they would keep reading the old layout or a storage nobody
    writes any more."""
    views = other_views(func, buffer)
    if views:
        raise ScheduleError(primitive, f"{buffer.name!r} is also accessed through "
                            f"{', '.join(repr(v) for v in views)} (T.Buffer(..., data=...)), "
                            f"which {what} would not rewrite; schedule the function before "
                            f"declaring views of this buffer, or read and write it through "
                            f"one buffer")


def fresh_name(func: PrimFunc, base: str, taken: set[str] | None = None) -> str:
    """`base`, or `base_1`, `base_2`... whichever no variable or buffer of `func` uses."""
    used = set(taken or ()) | {v.name for v in collect(func, Var)}
    used |= {b.name for b in func.buffers}
    candidate = fresh(base, used)
    if taken is not None:
        taken.add(candidate)
    return candidate


def and_predicate(realize: BlockRealize, condition: Expr) -> BlockRealize:
    """`realize` with `condition` added to its predicate."""
    from sched.ir.nodes import TRUE

    predicate = condition if realize.predicate == TRUE else binary("and", realize.predicate,
                                                                   condition)
    return dataclasses.replace(realize, predicate=predicate)


def uniquify_loop_names(func: PrimFunc) -> PrimFunc:
    """`func` with loops renamed where two share a name (`i`, `i_1`...), so every loop has its
    own name."""
    from sched.ir.functor import substitute

    seen: set[str] = set()
    taken = {v.name for v in collect(func, Var)}

    class Rename(IRMutator):
        def visit_For(self, loop: For):
            if loop.loop_var.name in seen:
                name = fresh_name(func, loop.loop_var.name, taken)
                var = Var(name, loop.loop_var.dtype)
                body = substitute(loop.body, {loop.loop_var: var})
                loop = dataclasses.replace(loop, loop_var=var, body=body)
            seen.add(loop.loop_var.name)
            return self.visit_children(loop)
    return Rename().visit(func)

"""Where statements are in a function: the parent of each statement and block, and the
blocks and loops by name (`index`, built in one walk and remembered per node), the path down
to a node (`path_to`) and the loops around it (`enclosing_loops`). Pure IR queries, used by
the schedule, the polyhedral model and the lowering."""

from __future__ import annotations

from sched.ir.functor import child_field_names, free_vars
from sched.ir.memo import identity_cache
from sched.ir.nodes import Block, BlockRealize, For, Node, PrimFunc, Stmt


class _Index:
    """Blocks and loops of one function by name, and the parent of each statement and block:
    built in one walk, remembered per node (nodes are immutable). The index of a block
    realize inside is taken from the cache and merged: a step rebuilds the function around
    the blocks it did not touch, and their indexes are not built again."""

    def __init__(self, root: Node) -> None:
        self.parent: dict[int, Node] = {}
        self.blocks: dict[str, BlockRealize] = {}
        self.loops: dict[str, For] = {}
        self.block_order: list[str] = []
        self.loop_order: list[str] = []
        self._walk(root)

    def _walk(self, node: Node) -> None:
        if isinstance(node, BlockRealize):
            name = node.block.name
            self.blocks.setdefault(name, node)
            if name != "root":
                self.block_order.append(name)
        elif isinstance(node, For):
            self.loops.setdefault(node.loop_var.name, node)
            self.loop_order.append(node.loop_var.name)
        for name in child_field_names(type(node), statements_only=True):
            value = getattr(node, name)
            for child in value if isinstance(value, tuple) else (value,):
                if isinstance(child, Stmt | Block) and id(child) not in self.parent:
                    self.parent[id(child)] = node        # the first path, as a search finds
                    if isinstance(child, BlockRealize):
                        self._merge(index(child))
                    else:
                        self._walk(child)

    def _merge(self, inner: _Index) -> None:
        """Add the index of a block realize inside (its blocks and loops after those found
        so far; the first parent found of a node stays)."""
        for name, realize in inner.blocks.items():
            self.blocks.setdefault(name, realize)
        for name, loop in inner.loops.items():
            self.loops.setdefault(name, loop)
        self.block_order += inner.block_order
        self.loop_order += inner.loop_order
        for key, parent in inner.parent.items():
            self.parent.setdefault(key, parent)


index = identity_cache(maxsize=1 << 11)(_Index)   # the _Index of a function body or statement


def enclosing_loops(func: PrimFunc, target: Node) -> list[For]:
    """The loops around `target` (found by identity), outermost first."""
    path = path_to(func.body, target)
    if path is None:
        raise AssertionError("target is not in the function")
    return [node for node in path if isinstance(node, For)]


def path_to(root: Node, target: Node) -> list[Node] | None:
    """The nodes from `root` down to `target` (excluded), by identity, or None."""
    if root is target:
        return []
    parents = index(root).parent
    path: list[Node] = []
    node = target
    while True:
        parent = parents.get(id(node))
        if parent is None:
            return None
        path.append(parent)
        if parent is root:
            return path[::-1]
        node = parent


def feeds_reduction(func: PrimFunc, loop_name: str, block_name: str) -> bool:
    """Whether loop `loop_name` feeds a reduce iteration variable of block `block_name` or of
    a block around it, directly or through the bindings of the blocks between (a blockized
    block's `v_k_0` of loop k_0 feeds the inner block's `v_k = v_k_0 * 8 + k_1`)."""
    realize, path = _block_and_path(func, block_name)
    if path is None:
        return False
    fed = {loop_name}
    for node in [*path, realize]:
        if not isinstance(node, BlockRealize):
            continue
        for iv, value in zip(node.block.iter_vars, node.iter_values):
            if fed & {v.name for v in free_vars(value)}:
                if iv.kind == "reduce":
                    return True
                fed.add(iv.var.name)
    return False


def unindexed_variables(func: PrimFunc, loop_name: str, block_name: str) -> list[str]:
    """The iteration variables of block `block_name` that loop `loop_name` binds, where no
    variable it binds indexes what the block writes (none otherwise): each iteration of the
    loop then updates the same elements."""
    realize = index(func.body).blocks.get(block_name)
    if realize is None:
        return []
    bound = [iv.var for iv, value in zip(realize.block.iter_vars, realize.iter_values)
             if loop_name in {v.name for v in free_vars(value)}]
    written = {v for region in realize.block.writes for r in region.region
               for v in (*free_vars(r.min), *free_vars(r.extent))}
    return [] if not bound or written & set(bound) else [v.name for v in bound]


def rfactor_loop_of(func: PrimFunc, loop_name: str, block_name: str) -> bool:
    """Whether rfactor could factor block `block_name` at loop `loop_name`: the loop is
    around the block with no other block between them and feeds reduce iteration variables
    of it only (a fused spatial-and-reduce loop, or the loop of a blockized block's own
    variable, is not one)."""
    realize, path = _block_and_path(func, block_name)
    loops = [n for n in path or () if isinstance(n, For) and n.loop_var.name == loop_name]
    if not loops or any(isinstance(n, BlockRealize)
                        for n in path[path.index(loops[-1]) + 1:]):
        return False
    kinds = {iv.kind for iv, value in zip(realize.block.iter_vars, realize.iter_values)
             if loop_name in {v.name for v in free_vars(value)}}
    return kinds == {"reduce"}


def _block_and_path(func: PrimFunc, block_name: str):
    """(the realize of block `block_name`, the path down to it), or (None, None)."""
    realize = index(func.body).blocks.get(block_name)
    return realize, (path_to(func.body, realize) if realize is not None else None)

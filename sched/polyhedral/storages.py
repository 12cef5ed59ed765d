"""The storages of a PrimFunc as the polyhedral model sees them: the views (buffers) each is
accessed through (`views_of`), and the buffer that owns each (`owners_of`). model.py maps every
access to its storage's tuple through them (module doc there)."""

from __future__ import annotations

from sched.ir.extern import is_opaque
from sched.ir.functor import LEAF_CLASSES, child_field_names, collect
from sched.ir.memo import identity_cache
from sched.ir.nodes import (
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    Node,
    PrimFunc,
)


def views_of(func: PrimFunc) -> dict[str, tuple[Buffer, ...]]:
    """The buffers accessed in `func`, by storage name, in order of first access: loads, then
    stores, then the regions of opaque blocks (which are their accesses)."""
    found: dict[str, dict[Buffer, None]] = {}
    for part in _views_in(func.body):
        _merge_views(found, part)
    return {storage: tuple(views) for storage, views in found.items()}


_Views = dict[str, dict[Buffer, None]]


@identity_cache(maxsize=1 << 11)
def _views_in(node) -> tuple[_Views, _Views, _Views]:
    """The views `node` loads, stores and declares as an opaque block's regions, each by
    storage in pre-order (as `collect` walks). Remembered per node; a block realize or loop
    inside is taken from the cache: a step rebuilds the function around the blocks and
    loops it did not touch."""
    parts: tuple[_Views, _Views, _Views] = ({}, {}, {})
    _gather_views(node, parts)
    return parts


def _gather_views(node, parts: tuple[_Views, _Views, _Views]) -> None:
    loads, stores, opaque = parts
    if isinstance(node, BufferLoad):
        loads.setdefault(node.buffer.storage_name, {})[node.buffer] = None
    elif isinstance(node, BufferStore):
        stores.setdefault(node.buffer.storage_name, {})[node.buffer] = None
    elif isinstance(node, Block) and is_opaque(node):
        for region in (*node.reads, *node.writes):
            opaque.setdefault(region.buffer.storage_name, {})[region.buffer] = None
    for name in child_field_names(type(node)):
        _gather_child(getattr(node, name), parts)


def _gather_child(value, parts: tuple[_Views, _Views, _Views]) -> None:
    if isinstance(value, tuple):
        for item in value:
            _gather_child(item, parts)
    elif isinstance(value, BlockRealize | For | Block):
        for part, inner in zip(parts, _views_in(value)):
            _merge_views(part, inner)
    elif isinstance(value, Node) and type(value) not in LEAF_CLASSES:
        _gather_views(value, parts)


def _merge_views(into: _Views, views: _Views) -> None:
    for storage, buffers in views.items():
        into.setdefault(storage, {}).update(buffers)


def owners_of(func: PrimFunc) -> dict[str, Buffer]:
    """The buffer that owns each storage (a parameter or an allocation, not a view)."""
    buffers = list(func.buffers) + [b for block in collect(func.body, Block)
                                    for b in block.alloc_buffers]
    buffers += [a.buffer for a in collect(func.body, Allocate)]
    return {b.name: b for b in buffers if b.data is None}

"""cache_read with `consumer_blocks=[...]` (TVM's option): one cache read by several blocks.

The cache holds the box of the buffer that all the listed consumers read; one copy block fills
it right before the first loop nest, in the consumers' common scope, that holds one of them;
each listed consumer reads the cache instead of the buffer, the others keep reading the buffer.

What keeps it sound is what keeps the one-consumer cache_read sound (`memory.cache_read`):
between the copy and the last consumer nothing writes the buffer (the copy would miss it), no
consumer writes it, and the consumers are in one scope, so the copy runs before all of them.
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.names import fresh
from sched.ir.nodes import Buffer, PrimFunc, SeqStmt
from sched.schedule.memory import (
    _cache_buffer,
    _check_index,
    _check_scope,
    _copy_nest,
    _hull,
    _region,
)
from sched.schedule.scope import (
    add_allocation,
    block_names,
    blocks_accessing,
    check_one_view,
    replace_buffer,
    scope_of,
    splice,
)
from sched.schedule.state import find_block, replace

PRIMITIVE = "cache_read"


def cache_read_for(func: PrimFunc, block_name: str, index, storage_scope: str,
                   consumers: list[str]) -> tuple[PrimFunc, str]:
    """Read `block.reads[index]` through one cache in each block of `consumers` (see
    Schedule.cache_read)."""
    realize = find_block(func, block_name, PRIMITIVE)
    buffer = _check_index(index, realize.block.reads, realize.block, PRIMITIVE,
                          "read_buffer_index", "reads")
    storage_scope = _check_scope(storage_scope, PRIMITIVE, 3)
    if not consumers:
        raise ScheduleError(PRIMITIVE, "argument 'consumer_blocks': expected at least one block")
    scope = scope_of(func, realize, PRIMITIVE)
    children = _children(scope.realize)
    positions = [_check_consumer(func, name, buffer, scope.realize, children)
                 for name in consumers]
    first, last = min(positions), max(positions)
    writers = [b.name for child in children[first:last + 1]
               for b in blocks_accessing(child, buffer, "write")]
    if writers:
        raise ScheduleError(PRIMITIVE, f"block(s) {', '.join(dict.fromkeys(writers))} write "
                            f"{buffer.name!r} between the consumers {', '.join(consumers)}, "
                            f"after the cache would be filled; give consumer_blocks that no "
                            f"write of {buffer.name!r} separates")
    region = _region(func, consumers[0], buffer, "read")
    for name in consumers[1:]:
        region = _hull(region, _region(func, name, buffer, "read"))
    cache = _cache_buffer(func, buffer, storage_scope)
    copy_name = fresh(cache.name, block_names(func))
    copy = _copy_nest(func, copy_name, buffer, cache, region)
    new_func = add_allocation(func, scope.realize, cache)
    for name in dict.fromkeys(consumers):
        old = find_block(new_func, name, PRIMITIVE)
        new = dataclasses.replace(old, block=replace_buffer(old.block, buffer, cache))
        new_func = replace(new_func, old, new)
    scope_realize = find_block(new_func, scope.realize.block.name, PRIMITIVE)
    top = _children(scope_realize)[first]
    return splice(new_func, top, [copy, top]), copy_name


def _children(scope_realize) -> list:
    body = scope_realize.block.body
    return list(body.stmts) if isinstance(body, SeqStmt) else [body]


def _check_consumer(func: PrimFunc, name: str, buffer: Buffer, scope_realize,
                    children: list) -> int:
    """The position, among the statements of the scope, of the one holding consumer `name`."""
    if not isinstance(name, str):
        raise ScheduleError(PRIMITIVE, f"argument 'consumer_blocks': expected block handles, "
                            f"got {name!r}")
    consumer = find_block(func, name, PRIMITIVE)
    if not any(r.buffer.storage_name == buffer.storage_name for r in consumer.block.reads):
        raise ScheduleError(PRIMITIVE, f"consumer block {name!r} does not read {buffer.name!r}")
    if any(r.buffer.storage_name == buffer.storage_name for r in consumer.block.writes):
        raise ScheduleError(PRIMITIVE, f"consumer block {name!r} writes {buffer.name!r} as "
                            f"well as reading it; a read cache would not see its writes")
    check_one_view(consumer.block, buffer, PRIMITIVE)
    other = scope_of(func, consumer, PRIMITIVE)
    if other.realize is not scope_realize:
        raise ScheduleError(PRIMITIVE, f"consumer block {name!r} is in block "
                            f"{other.realize.block.name!r}, not in {scope_realize.block.name!r} "
                            f"with the others: one cache serves consumers of one scope")
    return next(i for i, child in enumerate(children) if child is other.top)

"""cache_read and cache_write with `consumer_blocks=[...]` (TVM's option).

cache_read: one cache read by several blocks. The cache holds the box of the buffer that all
the listed consumers read; one copy block fills it right before the first loop nest, in the
consumers' common scope, that holds one of them; each listed consumer reads the cache instead
of the buffer, the others keep reading the buffer. What keeps it sound is what keeps the
one-consumer cache_read sound (`memory.cache_read`): between the copy and the last consumer
nothing writes the buffer (the copy would miss it), no consumer writes it, and the consumers
are in one scope, so the copy runs before all of them.

cache_write: the listed consumers of the cached block read its cache directly instead of the
buffer the write-back fills. Sound where every element they read is one the block, or the
fill block that first copies the buffer's old values into the cache (where cache_write makes
one), surely wrote before the read (isl's flow analysis; a value the buffer held before that
is not in the cache): the block is the only writer of the buffer (cache_write's own rule), so
the cache holds what the buffer would.
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.functor import collect
from sched.ir.names import fresh
from sched.ir.nodes import BlockRealize, Buffer, PrimFunc, SeqStmt
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


def cache_write_for(func: PrimFunc, block_name: str, index, storage_scope: str,
                    consumers: list[str]) -> tuple[PrimFunc, str]:
    """Write `block.writes[index]` through a cache that the blocks `consumers` read directly
    (see Schedule.cache_write)."""
    from sched.schedule.cache_coverage import reads_what_it_did_not_write
    from sched.schedule.memory import cache_write

    primitive = "cache_write"
    realize = find_block(func, block_name, primitive)
    buffer = _check_index(index, realize.block.writes, realize.block, primitive,
                          "write_buffer_index", "writes")
    if not consumers:
        raise ScheduleError(primitive, "argument 'consumer_blocks': expected at least one "
                            "block")
    scope = scope_of(func, realize, primitive)
    inside = {r.block.name for r in collect(realize, BlockRealize)}
    for name in consumers:
        if not isinstance(name, str):
            raise ScheduleError(primitive, f"argument 'consumer_blocks': expected block "
                                f"handles, got {name!r}")
        if name in inside:
            raise ScheduleError(primitive, f"consumer block {name!r} is block {block_name!r} "
                                f"or inside it: give blocks that read what it writes")
        consumer = find_block(func, name, primitive)
        if not any(r.buffer.storage_name == buffer.storage_name for r in consumer.block.reads):
            raise ScheduleError(primitive, f"consumer block {name!r} does not read "
                                f"{buffer.name!r}")
        check_one_view(consumer.block, buffer, primitive)
        if scope_of(func, consumer, primitive).realize is not scope.realize:
            raise ScheduleError(primitive, f"consumer block {name!r} is not in block "
                                f"{scope.realize.block.name!r} with {block_name!r}: the cache "
                                f"lives there")
    new_func, copy_name = cache_write(func, block_name, index, storage_scope)
    (cache,) = [r.buffer for r in find_block(new_func, copy_name, primitive).block.reads]
    for name in dict.fromkeys(consumers):
        old = find_block(new_func, name, primitive)
        new = dataclasses.replace(old, block=replace_buffer(old.block, buffer, cache))
        new_func = replace(new_func, old, new)
    # cache_write's own checks passed: block_name is the only block writing the buffer, so
    # the cache holds what the buffer would wherever the block, or the fill that copies the
    # buffer's old values in first (where cache_write made one), wrote the element before
    fills = [name for name in block_names(new_func)
             if name not in block_names(func) and name != copy_name]
    if reads_what_it_did_not_write(new_func, list(consumers), [block_name, *fills], cache):
        raise ScheduleError(primitive, f"block(s) {', '.join(consumers)} may read elements of "
                            f"{buffer.name!r} that block {block_name!r} has not written before "
                            f"(values the buffer held before it, which are not in the cache): "
                            f"leave them reading {buffer.name!r}")
    return new_func, copy_name

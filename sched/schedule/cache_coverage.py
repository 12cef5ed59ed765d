"""What cache_write must know of the block it caches, from isl flow analysis: whether the block
reads values of the buffer it has not written itself (then the cache starts as a copy of the
buffer), and whether it surely writes every element the write-back copies (otherwise, too). A
store under a condition isl cannot represent is a may-write: it never counts as written.
"""

from __future__ import annotations

import functools

import islpy as isl

from sched.ir.functor import collect
from sched.ir.memo import BoundedCache, register
from sched.ir.nodes import Block, Buffer, PrimFunc
from sched.polyhedral import build_model
from sched.polyhedral.accesses import buffer_tuple
from sched.polyhedral.isl_expr import to_isl
from sched.polyhedral.isl_text import maps
from sched.polyhedral.pairs import order_key


def _on_buffer(relation: isl.UnionMap, buffer: Buffer) -> isl.UnionMap:
    """The part of an access relation on `buffer`'s storage."""
    tuple_name = buffer_tuple(buffer)
    kept = relation.subtract(relation)           # empty, in the same space
    pieces: list[isl.Map] = []
    relation.foreach_map(pieces.append)
    for piece in pieces:
        if piece.get_tuple_name(isl.dim_type.out) == tuple_name:
            kept = kept.union(isl.UnionMap.from_map(piece))
    return kept


def _exact_for(model, statements: list, buffer: Buffer) -> bool:
    """Whether the model holds `statements`' runs and their accesses of `buffer` exactly: no
    condition or binding of theirs over-approximated, their loops' bounds affine, each
    access of the buffer's storage affine under affine guards, through no view or offset.
    What the model widens elsewhere does not bear on them (a later block's `B[(i + 1) % n]`
    made cache_write refuse a consumer that reads `B[i]`: audit helper-178)."""
    if model.is_exact:
        return True
    storage = buffer.storage_name
    if storage in model.linearized:
        return False
    for statement in statements:
        if not statement.exact or any(to_isl(lp.min) is None or to_isl(lp.extent) is None
                                      for lp in statement.loops):
            return False
        for view in statement.accesses:
            if view.buffer.storage_name == storage and not (
                    view.buffer.name == storage and view.access.is_affine and
                    view.access.guards_exact):
                return False
    return True


def reads_unwritten(func: PrimFunc, block_name: str, buffer: Buffer, scope) -> bool:
    """Whether the block may read an element of `buffer` it has not itself written before, in
    the cache's scope (isl flow analysis: reads with no earlier write of the block as their
    source). Where the analysis over-approximates, or the cache lives in a block other than
    the root (its instances would each need their own analysis), any read counts."""
    model = build_model(func)
    reads = writes = isl.UnionMap(f"[{', '.join(model.params)}] -> {{ }}")
    statements = _statements(model, func, block_name)
    for statement in statements:
        reads = reads.union(_on_buffer(statement.reads, buffer))
        writes = writes.union(_on_buffer(statement.writes, buffer))
    if reads.is_empty():
        return False
    if not _exact_for(model, statements, buffer) or scope.realize.block.name != "root" or \
            not all(_writes_surely(s) for s in statements):
        return True
    if all(s.runs_once for s in statements):
        return _reads_before_every_write(statements, statements, buffer, reads)
    schedule = None         # of the block's statements: the only sources and sinks here
    for statement in statements:
        own = isl.UnionMap.from_map(statement.schedule)
        schedule = own if schedule is None else schedule.union(own)
    return _reads_without_source(str(reads), str(writes), str(schedule))


def reads_what_it_did_not_write(func: PrimFunc, readers: list[str], writers: list[str],
                                buffer: Buffer) -> bool:
    """Whether the blocks `readers` may read an element of `buffer` that none of the blocks
    `writers` (the only ones writing it) has surely written before the read (where the
    analysis over-approximates, any read counts). A write that may not happen (a store under
    a data-dependent condition) is no source, and hides nothing: the element's latest value
    is then whatever came before it."""
    model = build_model(func)
    writing = [s for name in writers for s in _statements(model, func, name)]
    reading = [s for name in readers for s in _statements(model, func, name)]
    reads = isl.UnionMap(f"[{', '.join(model.params)}] -> {{ }}")
    for statement in reading:
        reads = reads.union(_on_buffer(statement.reads, buffer))
    if reads.is_empty():
        return False
    if not _exact_for(model, writing + reading, buffer) or \
            not all(s.runs_once for s in writing + reading):
        return True
    sure = [s for s in writing if _writes_surely(s)]
    return _reads_before_every_write(sure, reading, buffer, reads)


def _reads_before_every_write(writers, readers, buffer: Buffer, reads: isl.UnionMap) -> bool:
    """`_reads_without_source` where each instance runs once: a read has a source iff some
    write of its element runs before it (every write is a must-source). Asked in time: each
    read and write as time -> element (through the statement's schedule, one to one here), a
    read time is written before where some write time of its element comes before it
    (lexicographic order on the time vectors, which has no divisions). In instances, the
    order between two statements came through their nests (instances to loops: divisions
    for fused loops) and the subtraction ran for minutes on TVM's 4096^3 mma schedule; in
    time it takes a fraction of a second. Remembered by the texts of the reads and writes
    and the pairs' order keys (what the order of each writer and reader is made of: a
    replayed trace asks again)."""
    writers = [(w, _on_buffer(w.writes, buffer)) for w in writers]
    writers = [(w, written) for w, written in writers if not written.is_empty()]
    key = (str(reads), tuple((str(written), tuple(order_key(w, r) for r in readers))
                             for w, written in writers))
    found = _READS_BEFORE_WRITES.recall(key)
    if found is None:
        written_at = None                                            # time -> element
        for writer, written in writers:
            at = isl.UnionMap.from_map(writer.schedule).reverse().apply_range(written)
            written_at = at if written_at is None else written_at.union(at)
        found = _READS_BEFORE_WRITES.remember(key, any(
            _read_unwritten(isl.UnionMap.from_map(reader.schedule).reverse().apply_range(
                isl.UnionMap.from_map(read)), written_at)
            for reader in readers for read in maps(_on_buffer(reader.reads, buffer))))
    return found


def _read_unwritten(read: isl.UnionMap, written: isl.UnionMap | None) -> bool:
    """Whether some run of the read `read` (time -> element) has no write of its element
    before it in `written` (time -> element, None: no write). Where the read takes one
    element per run, asked of the read times alone (the element is a function of the
    time); otherwise of (time, element) pairs."""
    if written is None:
        return True
    (space,) = {m.get_space().domain() for m in maps(read)}
    times = isl.Set.universe(space)
    after = isl.UnionMap.from_map(times.lex_gt_set(times))     # read time -> earlier times
    if read.is_single_valued():
        unwritten = read.domain().subtract(
            read.apply_range(written.reverse()).intersect(after).domain())
    else:
        same_element = read.range_map().apply_range(written.reverse())
        unwritten = read.wrap().subtract(
            same_element.intersect(read.domain_map().apply_range(after)).domain())
    return not unwritten.is_empty()


_READS_BEFORE_WRITES = BoundedCache(1024)      # _reads_before_every_write's answers, by key


@register
@functools.lru_cache(maxsize=1024)
def _reads_without_source(reads: str, writes: str, schedule: str) -> bool:
    """Whether some read (isl text) has no earlier write as its source (remembered by the
    texts: a replayed trace asks again)."""
    flow = isl.UnionAccessInfo.from_sink(isl.UnionMap(reads)) \
        .set_must_source(isl.UnionMap(writes)) \
        .set_schedule_map(isl.UnionMap(schedule)).compute_flow()
    return not flow.get_may_no_source().is_empty()


def _statements(model, func: PrimFunc, block_name: str) -> list:
    """The statements of block `block_name` and of the blocks nested in it (a blockized
    block's accesses are its inner blocks')."""
    from sched.schedule.state import find_block

    names = {b.name for b in collect(find_block(func, block_name, "cache_write").block, Block)}
    return [s for name in sorted(names) for s in model.statements_of_block(name)]


def _writes_surely(statement) -> bool:
    """Whether every write the model gives `statement` happens (a store under a condition isl
    cannot represent, a data-dependent `if`, only may happen: it must not count as written,
    nor hide an older value from a later read)."""
    return statement.exact and all(a.access.guards_exact for a in statement.accesses
                                   if a.is_write)


def writes_whole_copy(func: PrimFunc, block_name: str, copy_name: str) -> bool:
    """Whether block `block_name` provably writes every element of the cache that the
    write-back block `copy_name` reads (the model is exact: a store under a condition is
    modelled with its condition)."""
    model = build_model(func)
    if not model.is_exact:
        return False
    written = []
    for statement in _statements(model, func, block_name):
        if not _writes_surely(statement):
            return False
        written.append(statement.writes.range())
    (copy,) = model.statements_of_block(copy_name)
    # what the copy reads less each statement's writes, those written without existentials
    # first: an init that writes the whole cache empties it at once, where the test against
    # the union of all writes took minutes on TVM's 4096^3 mma schedule (the update's writes
    # keep the existentials of its fused nest)
    unwritten = copy.reads.range()
    for elements in sorted(written, key=_divisions):
        unwritten = unwritten.subtract(elements)
        if unwritten.is_empty():
            return True
    return False


def _divisions(elements: isl.UnionSet) -> int:
    """How many existentially quantified variables (and divisions) the pieces of `elements`
    hold: the cost of subtracting it."""
    pieces: list[isl.BasicSet] = []
    elements.foreach_set(lambda s: pieces.extend(s.get_basic_sets()))
    return sum(piece.dim(isl.dim_type.div) for piece in pieces)

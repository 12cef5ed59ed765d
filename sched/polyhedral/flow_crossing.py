"""Whether a value of a buffer flows from one iteration of a loop to another, decided without
computing the flows.

`dependences.value_flows` gives isl's value-based flow (the last write before each read,
per run). Placing an allocation (`plan_buffer_allocation`), a private buffer under a parallel
loop (`concurrency`) and a multi-buffered stage (`software_pipeline`) ask only whether one of
those flows leaves an iteration of the loops up to a time position, and isl's flow analysis
took 0.3 to 1.2 s for one conv2d accumulator tile under a fused loop (every element written
576 times; twice per autoscheduler candidate, in its builder and its runner). The same answer
comes from two relations that join reads and writes on the element first (milliseconds
there; tests/polyhedral/test_flow_crossing.py compares both answers):

    some flow crosses  iff  some read run r of an element e has
        (A) a write of e in an earlier iteration of the loops up to the position, and
        (B) no sure write of e before r in r's own iteration of those loops.

If (A) and (B) hold, the last sure write before r (if any) is in an earlier iteration, and is
a source; or there is none, and the write of (A) is one (a may-write kills nothing). If some
flow w -> r crosses, w is in an earlier iteration (it comes before r); a sure write in r's
iteration before r would come after w and kill it, so there is none. Writes are "sure" as for
`value_flows` (an exact model and no condition in the block); runs, not instances, as there.
"""

from __future__ import annotations

import functools

import islpy as isl

from sched.ir.extern import is_opaque
from sched.ir.functor import collect
from sched.ir.memo import register
from sched.ir.nodes import IfThenElse
from sched.polyhedral.isl_text import maps, read_map, within_operations
from sched.polyhedral.pairs import canonical_time_set, schedule_key, schedule_map


def storage_accesses(model, storage: str) -> tuple:
    """Per statement touching `storage`: its schedule's key, its reads and its writes of the
    storage (isl texts) and whether its writes are sure: what the flows of `storage` are made
    of (a key for remembered answers)."""
    tuple_name = model.buffer_tuple(storage)
    accesses = []
    for statement in model.statements.values():
        reads = [str(m) for m in maps(statement.reads)
                 if m.get_tuple_name(isl.dim_type.out) == tuple_name]
        writes = [str(m) for m in maps(statement.writes)
                  if m.get_tuple_name(isl.dim_type.out) == tuple_name]
        if not reads and not writes:
            continue
        body = statement.block.init if statement.is_init else statement.block.body
        # a store under an `if`, or under a loop or condition isl cannot represent (a loop
        # of `N[vt]` iterations may run none: audit helper-53), may not happen; an opaque
        # block's declared writes are may-writes (audit helper-55)
        sure = model.is_exact and not collect(body, IfThenElse) and \
            not is_opaque(statement.block) and all(
            view.access.guards_exact for view in statement.accesses
            if view.is_write and view.buffer.storage_name == storage)
        accesses.append((schedule_key(statement, statement.time), tuple(reads), tuple(writes),
                         sure))
    return tuple(accesses)


def statement_params(model) -> str:
    """The parameters' context of the model's statements (`[n] -> { : n >= 1 }`)."""
    return next(iter(model.statements.values())).domain_texts[1] if model.statements \
        else f"[{', '.join(model.params)}] -> {{ : }}"


def empty_union(params_text: str) -> isl.UnionMap:
    """An empty union map in the parameters of `params_text` (`[n] -> { : ... }`)."""
    return isl.UnionMap(f"{params_text.split('{')[0]}{{ }}")


def explicit(access: isl.Map) -> isl.Map:
    """`access` (time -> element), where it is single-valued, written with the element as
    explicit quasi-affine expressions of the time (isl's piecewise multi-affine form).
    Composed from a nest whose bindings divide (a fused fetch loop split again: `f // 81`,
    `f // 9 % 9`), isl keeps the instance's dims as existentially quantified variables, and
    the subset test of `_read_crosses` took 53 s on such a map (the cooperative fetch of a
    conv2d's input tile); 0.6 s to rewrite it, 0.15 s the test."""
    if not access.is_single_valued():
        return access
    return isl.Map.from_pw_multi_aff(access.as_pw_multi_aff())


def in_time(runs: isl.Map, texts, into: isl.UnionMap) -> isl.UnionMap:
    """`into` with each access in `texts` (isl text, instance -> element) seen from the times
    of `runs` (time -> instance): time -> element."""
    for text in texts:
        into = into.union(isl.UnionMap.from_map(runs.apply_range(read_map(text))))
    return into


def flows_cross(model, storage: str, position: int) -> bool:
    """Whether some value of `storage` flows from one value of the time vector's entries
    0..position to another (from one iteration of the loop at `position`, or of a loop around
    it, to another, or into or out of the loop): whether a flow of `value_flows(model,
    storage)` does, decided as the module's doc says. Kept with the model, and remembered by
    what it is made of."""
    key = ("flows_cross", storage, position)
    if key not in model.derived:
        model.derived[key] = _crossing(_shift_free(storage_accesses(model, storage)),
                                       statement_params(model), position)
    return model.derived[key]


def _shift_free(accesses: tuple) -> tuple:
    """`storage_accesses` with the statements' times in their canonical form together
    (pairs.canonical_time_set): the answer of `_crossing` depends only on the order of the
    runs, and a step that inserts a statement elsewhere then leaves the key as it was."""
    times = canonical_time_set(tuple(key[1] for key, *_ in accesses))
    return tuple(((key[0], time), *rest) for (key, *rest), time in zip(accesses, times))


# isl operations (about 0.3 s) the question may take on the accesses as composed before it is
# asked again on them rewritten (`explicit`): the rewriting costs more than the question on
# most accesses (TVM's mma schedule at 128x128x64: 11.5 s -> 16.9 s rewriting all)
PLAIN_OPERATIONS = 500_000


@register
@functools.lru_cache(maxsize=1 << 12)
def _crossing(accesses: tuple, params_text: str, position: int) -> bool:
    reads, writes, sure = [], [], []            # time -> element maps
    widths = set()
    for key, read_texts, write_texts, is_sure in accesses:
        runs = schedule_map(*key, params_text).reverse()                # time -> instance
        widths.add(runs.dim(isl.dim_type.in_))
        reads += [runs.apply_range(read_map(text)) for text in read_texts]
        written = [runs.apply_range(read_map(text)) for text in write_texts]
        writes += written
        if is_sure:
            sure += written
    if not reads or all(w.is_empty() for w in writes):
        return False
    (width,) = widths               # the model's time vectors have one length
    orders = _prefix_orders(width, position)

    def crosses(rewrite) -> bool:
        rewritten = {id(access): rewrite(access) for access in writes}
        written = _union(params_text, rewritten.values())
        surely = _union(params_text, (rewritten[id(access)] for access in sure))
        return any(_read_crosses(isl.UnionMap.from_map(rewrite(read)), written, surely, *orders)
                   for read in reads)

    found = within_operations(PLAIN_OPERATIONS, lambda: crosses(lambda access: access))
    return crosses(explicit) if found is None else found


def _union(params_text: str, accesses) -> isl.UnionMap:
    found = empty_union(params_text)
    for access in accesses:
        found = found.union(isl.UnionMap.from_map(access))
    return found


def _read_crosses(read: isl.UnionMap, writes: isl.UnionMap, sure: isl.UnionMap,
                  earlier: isl.UnionMap, before_in_same: isl.UnionMap) -> bool:
    """Whether some run of one read access (`read`, time -> element) reads a value written
    in an earlier iteration: (A) and not (B) of the module doc. Where the access reads one
    element per run, both are asked of the read times alone (the element is a function of
    the time): a layout's divisions in the elements made the subset test of (run, element)
    pairs take seconds, of times milliseconds."""
    if read.is_single_valued():
        def writers(written: isl.UnionMap, order: isl.UnionMap) -> isl.UnionMap:
            return read.apply_range(written.reverse()).intersect(order.reverse())
    else:
        to_element, to_time = read.range_map(), read.domain_map()

        def writers(written: isl.UnionMap, order: isl.UnionMap) -> isl.UnionMap:
            return to_element.apply_range(written.reverse()).intersect(
                to_time.apply_range(order.reverse()))
    written_earlier = writers(writes, earlier).domain()                          # (A)
    if written_earlier.is_empty():
        return False
    surely = writers(sure, before_in_same)
    if within_operations(WITNESS_OPERATIONS,
                         lambda: _each_has_witness(written_earlier, surely)):
        return False
    # coalesced first: the subset test of the pieces as computed took up to 10x longer
    return not written_earlier.coalesce().is_subset(surely.domain().coalesce())  # not (B)


# isl operations (about 0.15 s) spent looking for one sure writer per read before the subset
# test of (B) is asked as it is
WITNESS_OPERATIONS = 100_000


def _each_has_witness(reads: isl.UnionSet, writers: isl.UnionMap) -> bool:
    """Whether each run in `reads` is in the domain of `writers` (run -> the sure writes
    before it of what it reads), shown by one writer per run: isl's lexmin of `writers`,
    checked to be some of its pairs. The domain of `writers` projects the writes' times away,
    and where their element is a division of the time (a cooperative fetch's fused loop
    split by thread extents) the subset test against it took 10 s; the lexmin takes 0.05 s,
    writes the runs with explicit divisions, and against those the tests take milliseconds.
    False where the lexmin is not all pairs of `writers` (isl's lexmin can lose runs on
    quasi-affine maps, see dependences.first_runs: then the plain test decides)."""
    witness = writers.lexmin()
    return witness.is_subset(writers) and reads.is_subset(witness.domain())


@functools.lru_cache(maxsize=256)
def _prefix_orders(width: int, position: int) -> tuple[isl.UnionMap, isl.UnionMap]:
    """{ t -> t' : t's entries 0..position before t''s } and { t -> t' : t before t', equal
    entries 0..position }, on time vectors of `width` entries (built with isl's API)."""
    space = isl.Space.set_alloc(isl.DEFAULT_CONTEXT, 0, width).map_from_set()
    earlier = isl.Map.lex_lt_first(space, position + 1)
    same = isl.Map.universe(space)
    for p in range(position + 1):
        same = same.equate(isl.dim_type.in_, p, isl.dim_type.out, p)
    before_in_same = same.intersect(isl.Map.lex_lt(space.domain()))
    return isl.UnionMap.from_map(earlier), isl.UnionMap.from_map(before_in_same)

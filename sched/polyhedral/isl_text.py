"""isl objects from their text, each text parsed once.

The model is written as isl text (`[n] -> { S_C[vi, vj] -> [2, i, j, 1] : ... }`) and parsing
is most of the cost of building it (isl_build.py builds the texts sched writes through isl's
API, faster than isl's reader). A schedule step leaves most statements as they were, so
their texts come back unchanged from one step's model to the next: parsing each text once makes
rebuilding a model cost what the step changed. islpy objects are values (every operation
returns a new object), so one parsed object may be shared.
"""

from __future__ import annotations

import functools

import islpy as isl

from sched.ir.memo import register
from sched.polyhedral.isl_build import build


@register
@functools.lru_cache(maxsize=1 << 14)
def read_map(text: str) -> isl.Map:
    """The map `text` denotes: built through isl's API where it is a text of the form sched
    writes (isl_build.py), else read by isl. Remembered by its text (a check asked of a
    rebuilt function, or of the next sample of an autoscheduler, writes the same texts)."""
    found = build(text, want_map=True)
    return found if found is not None else isl.Map(text)


@register
@functools.lru_cache(maxsize=1 << 14)
def read_set(text: str) -> isl.Set:
    """The set `text` denotes (as read_map)."""
    found = build(text, want_map=False)
    return found if found is not None else isl.Set(text)


@register
@functools.lru_cache(maxsize=1 << 12)
def parse_union_map(text: str) -> isl.UnionMap:
    return isl.UnionMap(text)


@register
@functools.lru_cache(maxsize=1 << 12)
def parse_union_set(text: str) -> isl.UnionSet:
    return isl.UnionSet(text)


@register
@functools.lru_cache(maxsize=1 << 14)
def restricted_set(text: str, params_text: str) -> isl.Set:
    """The set `text` with its parameters restricted to the set `params_text` (`[n] -> { : n
    >= 1 }`)."""
    return read_set(text).intersect_params(read_set(params_text))


@register
@functools.lru_cache(maxsize=1 << 14)
def restricted_map(text: str, domain_text: str | None, params_text: str) -> isl.Map:
    """The map `text` restricted to the domain `restricted_set(domain_text, params_text)`, or
    with only its parameters restricted when `domain_text` is None."""
    if domain_text is None:
        return read_map(text).intersect_params(read_set(params_text))
    return read_map(text).intersect_domain(restricted_set(domain_text, params_text))


@register
@functools.lru_cache(maxsize=1 << 14)
def is_single_valued_map(text: str, params_text: str) -> bool:
    """Whether `restricted_map(text, None, params_text)` is single-valued."""
    return restricted_map(text, None, params_text).is_single_valued()


def within_operations(limit: int, compute):
    """`compute()`, or None when isl needs more than `limit` operations for it (isl counts
    them; an enclosing limit is restored after, with its count started again). Inside a
    smaller enclosing limit that one holds, and its caller is told (a legality check's
    budget inside the reorder suggestions' made theirs 20 million operations)."""
    context = isl.DEFAULT_CONTEXT
    enclosing = context.get_max_operations()
    own = not enclosing or limit <= enclosing
    context.set_max_operations(limit if own else enclosing)
    context.reset_operations()
    try:
        return compute()
    except isl.Error as error:
        if "maximal number of operations exceeded" not in str(error) or not own:
            raise
        return None
    finally:
        context.set_max_operations(enclosing)
        context.reset_operations()


def maps(union: isl.UnionMap) -> list[isl.Map]:
    """The maps of a union map, one per pair of spaces."""
    found: list[isl.Map] = []
    union.foreach_map(found.append)
    return found


def first_point(found: isl.Set) -> isl.Point:
    """The lexicographically first point of `found` (the easiest to read in a message), or
    any point where there is no first: an over-approximated set may be unbounded below."""
    try:
        return found.lexmin().sample_point()
    except isl.Error:
        return found.sample_point()

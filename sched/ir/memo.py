"""Remembering what is derived from an IR node, by the node's identity.

Nodes are immutable, so whatever a pure function derives from one (its blocks, its polyhedral
model, its dependences) stays true for as long as the node lives. `functools.lru_cache` would
key on the node's structural hash, which walks the whole tree on every lookup; these caches key
on `id(node)` and keep the node alive while it is cached, so an id is never reused for another
node under the cache's eyes. Two equal nodes built separately are two entries: the answer is the
same, only computed twice.

    @identity_cache(maxsize=64)
    def build_model(func: PrimFunc) -> PolyModel: ...

    build_model(func)             # computed
    build_model(func)             # remembered
    build_model.put(other, model) # a caller that knows the answer for `other` (a schedule step
                                  # that changed nothing the function depends on) records it
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple

_REGISTERED: list = []     # every cache of derived answers, for clear_all


def register(cache):
    """Add `cache` (anything with `cache_clear()`) to those `clear_all` clears; returns it, so
    it can decorate: `@register` above `@functools.lru_cache(...)`."""
    _REGISTERED.append(cache)
    return cache


def clear_all() -> None:
    """Forget every remembered answer (every identity cache, and every cache `register`ed):
    for benchmarks that report uncached figures and tests that count analyses."""
    for cache in _REGISTERED:
        cache.cache_clear()


class BoundedCache(OrderedDict):
    """Answers by key, the `size` most recently used (registered for `clear_all`). A key that
    holds an `id(...)` must keep that object alive in the value, so the id is not reused."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        register(self)

    def recall(self, key, default=None):
        """The answer remembered for `key` (now the most recent), or `default`."""
        if key not in self:
            return default
        self.move_to_end(key)
        return self[key]

    def remember(self, key, value):
        """Remember `value` for `key`, forgetting the oldest answer past `size`; returns it."""
        self[key] = value
        self.move_to_end(key)
        if len(self) > self.size:
            self.popitem(last=False)
        return value

    def cache_clear(self) -> None:
        self.clear()


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    maxsize: int
    currsize: int


class IdentityCache:
    """A function of one node, remembered for the `maxsize` most recently used nodes."""

    def __init__(self, function: Callable, maxsize: int) -> None:
        self.function = function
        self.maxsize = maxsize
        self._entries = BoundedCache(maxsize)         # id(node) -> (node, value)
        self._hits = self._misses = 0
        functools.update_wrapper(self, function)
        register(self)

    def __call__(self, node):
        entry = self._entries.recall(id(node))
        if entry is not None and entry[0] is node:
            self._hits += 1
            return entry[1]
        self._misses += 1
        value = self.function(node)
        self.put(node, value)
        return value

    def get(self, node, default=None):
        """The remembered value for `node`, or `default` (computes nothing)."""
        entry = self._entries.get(id(node))
        return entry[1] if entry is not None and entry[0] is node else default

    def put(self, node, value) -> None:
        """Remember `value` as the function's value for `node`."""
        self._entries.remember(id(node), (node, value))

    def cache_info(self) -> CacheInfo:
        return CacheInfo(self._hits, self._misses, self.maxsize, len(self._entries))

    def cache_clear(self) -> None:
        self._entries.clear()
        self._hits = self._misses = 0


def identity_cache(maxsize: int = 128) -> Callable[[Callable], IdentityCache]:
    """Decorator: remember a one-argument function of a node by the node's identity."""
    return lambda function: IdentityCache(function, maxsize)

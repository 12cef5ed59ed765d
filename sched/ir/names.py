"""Fresh names: variables and buffers are identified by name, so a new one must not reuse any."""

from __future__ import annotations


def fresh(base: str, taken: set[str]) -> str:
    """`base`, or `base_1`, `base_2`... whichever is not in `taken` (which it then joins)."""
    candidate, index = base, 0
    while candidate in taken:
        index += 1
        candidate = f"{base}_{index}"
    taken.add(candidate)
    return candidate

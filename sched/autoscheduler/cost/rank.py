"""Spearman's rank correlation, the figure the tuner reports for each cost model: how well
its scores order candidates against their measured speed (1: the same order, 0: none)."""

from __future__ import annotations

import numpy as np


def ranks(values) -> np.ndarray:
    """Ranks from 1, ties given the mean of the ranks they span (`[10, 20, 20]` ->
    `[1, 2.5, 2.5]`)."""
    values = np.asarray(values, dtype=float)
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    result = np.empty(len(values))
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        result[order[start:end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return result


def spearman(a, b) -> float:
    """Pearson's correlation of the ranks of `a` and `b` (ties averaged). NaN when either is
    constant or shorter than 2."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"spearman: 'a' and 'b' differ in length ({len(a)} and {len(b)})")
    if len(a) < 2:
        return float("nan")
    ra, rb = ranks(a) - (len(a) + 1) / 2.0, ranks(b) - (len(b) + 1) / 2.0
    denominator = np.sqrt((ra * ra).sum() * (rb * rb).sum())
    return float((ra * rb).sum() / denominator) if denominator else float("nan")

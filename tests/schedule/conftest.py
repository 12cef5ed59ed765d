"""Helpers shared by the schedule tests: build and run a function on the C target."""

from __future__ import annotations

import numpy as np

import sched


def run_c(func, *arrays):
    """Build `func` for C and call it on copies of `arrays`; returns the copies."""
    copies = [np.array(a, copy=True) for a in arrays]
    sched.build(func, target="c")(*copies)
    return copies

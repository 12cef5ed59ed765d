"""The interface of cost models: rank scheduled functions without running them.

A model scores candidates (higher is better: predicted speed); `update` feeds it measured
results (the analytical model ignores them, the learned one trains on them).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from sched.autoscheduler.measure.common import MeasureResult
from sched.autoscheduler.workload import Workload
from sched.ir.nodes import PrimFunc


class CostModel(Protocol):
    name: str

    def predict(self, workload: Workload, funcs: list[PrimFunc]) -> np.ndarray:
        """One score per scheduled function (block IR, as `sch.func`): higher is faster."""

    def update(self, workload: Workload, funcs: list[PrimFunc],
               results: list[MeasureResult]) -> None:
        """Learn from measured results (errors included: `result.ok` is False)."""

"""The learned cost model: gradient-boosted trees (xgboost) on `features.py`'s vectors,
trained online on measured candidates.

    model = LearnedModel(seed=0)                  # target "c" or "cuda" from the workload
    model.pretrain(workload, [(func, result), ...])   # records from a database
    model.update(workload, funcs, results)        # retrains on everything seen so far
    scores = model.predict(workload, funcs)       # higher is faster

Until it has trained (fewer than `min_records` successful measurements), `predict` returns the
memory-movement model's scores, so a search starts ranked by the analytical model. The target
is log2 of throughput: FLOPs per measured median second (`-log2 seconds` for a function with
no arithmetic); a failed measurement (build error, crash, timeout, wrong result) is given the
worst target seen, so the trees learn to avoid it. One feature is the analytical estimate,
so the trees refine it rather than start from nothing.
"""

from __future__ import annotations

import math

import numpy as np

from sched.autoscheduler.cost.features import feature_matrix
from sched.autoscheduler.cost.memory_movement import MemoryMovementModel


def _xgboost():
    try:
        import xgboost
    except ImportError:
        raise ImportError("LearnedModel needs xgboost: pip install xgboost (or use "
                          "MemoryMovementModel, which needs no training)") from None
    return xgboost


class LearnedModel:
    """Gradient-boosted trees on features of the scheduled block IR (see the module doc)."""

    name = "learned"

    def __init__(self, seed: int = 0, min_records: int = 8, rounds: int = 60,
                 machine=None) -> None:
        self.seed, self.min_records, self.rounds, self.machine = seed, min_records, rounds, machine
        self._analytical: dict[str, MemoryMovementModel] = {}
        self._features: list[np.ndarray] = []
        self._targets: list[float | None] = []
        self._booster = None

    def analytical(self, workload) -> MemoryMovementModel:
        target = getattr(workload, "target", "c")
        if target not in self._analytical:
            self._analytical[target] = MemoryMovementModel(target, self.machine)
        return self._analytical[target]

    @property
    def trained(self) -> bool:
        return self._booster is not None

    def predict(self, workload, funcs) -> np.ndarray:
        """Predicted log2 throughput, or the analytical scores before any training."""
        if not self.trained:
            return self.analytical(workload).predict(workload, funcs)
        xgb = _xgboost()
        matrix = feature_matrix(workload, funcs, self.analytical(workload))
        return self._booster.predict(xgb.DMatrix(matrix))

    def update(self, workload, funcs, results) -> None:
        """Add measured results (errors included) and retrain."""
        matrix = feature_matrix(workload, list(funcs), self.analytical(workload))
        flops = workload.flops() if hasattr(workload, "flops") else 0.0
        for row, result in zip(matrix, results):
            self._features.append(row)
            self._targets.append(_target(flops, result))
        self._train()

    def pretrain(self, workload, records) -> None:
        """Train on (func, MeasureResult) pairs, e.g. records loaded from a tuning database."""
        records = list(records)
        self.update(workload, [f for f, _ in records], [r for _, r in records])

    def _train(self) -> None:
        measured = [t for t in self._targets if t is not None]
        if len(measured) < self.min_records:
            return
        worst = min(measured) - 1.0
        targets = np.array([worst if t is None else t for t in self._targets])
        xgb = _xgboost()
        data = xgb.DMatrix(np.stack(self._features), label=targets)
        params = {"max_depth": 6, "eta": 0.2, "subsample": 0.9, "min_child_weight": 1,
                  "tree_method": "hist", "max_bin": 64,
                  "objective": "reg:squarederror", "seed": self.seed, "nthread": 1,
                  "verbosity": 0}
        self._booster = xgb.train(params, data, num_boost_round=self.rounds)


def _target(flops: float, result) -> float | None:
    if not result.ok or not math.isfinite(result.median) or result.median <= 0:
        return None
    if flops > 0:
        return math.log2(flops / result.median)
    return -math.log2(result.median)

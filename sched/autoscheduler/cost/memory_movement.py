"""The analytical cost model: bytes moved between memory levels, FLOPs and parallelism, with no
device and no training.

    model = MemoryMovementModel(target="c")          # or "cuda"; machine=Machine(...)
    scores = model.predict(workload, [sch.func for sch in candidates])   # 1 / seconds
    parts = model.estimate(workload, sch.func)       # bytes per level, flops, seconds

Each block is a loop nest (`nests.py`); `levels.py` turns its footprints into the bytes each
level of memory brings in; `cpu_estimate.py` and `gpu_estimate.py` turn bytes, FLOPs,
parallelism, vector lanes, coalescing and occupancy into seconds; the blocks' seconds add up.

A nest the analysis cannot follow gets a conservative estimate (every access from memory,
scalar arithmetic), never an exception.
"""

from __future__ import annotations

import numpy as np

from sched.autoscheduler.cost.cpu_estimate import estimate_cpu_nest
from sched.autoscheduler.cost.gpu_estimate import estimate_gpu_nest, kernel_of, loops_of_others
from sched.autoscheduler.cost.levels import element_bytes
from sched.autoscheduler.cost.machine import Machine
from sched.autoscheduler.cost.nests import LoopNest, loop_nests
from sched.ir.nodes import PrimFunc


class MemoryMovementModel:
    """Scores = 1 / estimated seconds (higher is faster). Ignores measurements."""

    name = "memory_movement"

    def __init__(self, target: str = "c", machine: Machine | None = None) -> None:
        self.target = target
        self.machine = machine or Machine.for_target(target)

    def predict(self, workload, funcs: list[PrimFunc]) -> np.ndarray:
        return np.array([1.0 / self.estimate(workload, f)["seconds"] for f in funcs])

    def update(self, workload, funcs, results) -> None:
        """The analytical model does not learn."""

    def estimate(self, workload, func: PrimFunc) -> dict:
        """The parts of the estimate: seconds, flops, bytes per level (summed over blocks),
        and one dict per block ("nests")."""
        try:
            nests = loop_nests(func)
        except Exception as error:     # an IR the walk does not know: one conservative part
            return _conservative_function(workload, func, self.machine, error)
        parts = [self.estimate_nest(nest, loops_of_others(nests, nest)) for nest in nests]
        total: dict = {"seconds": 0.0, "flops": 0.0, "bytes": {}, "nests": parts}
        for part in parts:
            total["seconds"] += part["seconds"]
            total["flops"] += part["flops"]
            for level, value in part["bytes"].items():
                total["bytes"][level] = total["bytes"].get(level, 0.0) + value
        if self.machine.is_gpu:
            total["seconds"] += self.machine.launch_seconds * len({kernel_of(n) for n in nests})
        total["seconds"] = max(total["seconds"], 1e-9)
        return total

    def estimate_nest(self, nest: LoopNest, shared_loops: frozenset = frozenset()) -> dict:
        """One block's estimate; `shared_loops`: its loop variables other blocks are under."""
        try:
            if self.machine.is_gpu:
                return estimate_gpu_nest(nest, self.machine, shared_loops)
            return estimate_cpu_nest(nest, self.machine)
        except Exception as error:     # an analysis gap must not stop a search
            part = _conservative(nest, self.machine)
            part["note"] = f"{type(error).__name__}: {error}"
            return part


def _conservative(nest: LoopNest, machine: Machine) -> dict:
    moved = float(nest.iterations * sum(element_bytes(a) for a in nest.accesses))
    flops = float(nest.iterations * nest.operations)
    seconds = moved / machine.dram_bytes_per_s + flops / (machine.clock_hz * max(
        1, machine.cores if machine.is_gpu else 1))
    return {"name": nest.name, "seconds": max(seconds, 1e-9), "flops": flops,
            "bytes": {"dram": moved}, "conservative": True}


def _conservative_function(workload, func: PrimFunc, machine: Machine, error) -> dict:
    """Four bytes from memory per FLOP, scalar arithmetic: slower than any schedule the model
    can read."""
    flops = float(workload.flops()) if hasattr(workload, "flops") else 1.0
    moved = max(1.0, flops) * 4.0
    seconds = moved / machine.dram_bytes_per_s + flops / machine.clock_hz
    part = {"name": func.name, "seconds": seconds, "flops": flops, "bytes": {"dram": moved},
            "conservative": True, "note": f"{type(error).__name__}: {error}"}
    return {"seconds": seconds, "flops": flops, "bytes": dict(part["bytes"]), "nests": [part]}

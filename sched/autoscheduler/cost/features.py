"""A fixed-length feature vector per scheduled function, for the learned cost model.

From the block IR (lowering takes 60-150 ms per matmul candidate, too slow to score
thousands), per block nest (`nests.py`), summed or maxed over the blocks:

- loop structure: log2 of the product of extents per loop kind (serial, parallel,
  vectorized, unrolled, blockIdx, threadIdx), the innermost loop's extent and kind, depth;
- arithmetic: log2 FLOPs, operations per iteration, arithmetic intensity (FLOPs per byte
  reaching the outermost cached level);
- the memory-movement model's own figures (log2 bytes per level, log2 of its estimated
  seconds and of each part), so that trees start from the analytical model;
- buffers: count and log2 bytes per scope (global, shared, local) touched; the innermost
  loop's stride per access (share of accesses with stride 0, 1, and larger), vector lanes;
- GPU: occupancy, blocks, threads per block, the most software-pipeline stages of a loop.

`FEATURE_NAMES` names each entry.
"""

from __future__ import annotations

import math

import numpy as np

from sched.autoscheduler.cost.levels import element_bytes
from sched.autoscheduler.cost.memory_movement import MemoryMovementModel
from sched.autoscheduler.cost.nests import LoopNest, loop_nests
from sched.ir.nodes import is_thread_private

_KINDS = ("serial", "parallel", "vectorized", "unrolled", "blockIdx", "threadIdx")
_LEVELS = ("registers", "l1", "l2", "llc", "global", "dram", "shared")
_SCOPES = ("global", "shared", "local")

FEATURE_NAMES: tuple[str, ...] = (
    *(f"log_extent_{k}" for k in _KINDS),
    "max_depth", "log_innermost_extent", "innermost_vectorized", "innermost_unrolled",
    "log_flops", "operations", "intensity",
    *(f"log_bytes_{level}" for level in _LEVELS),
    "log_estimate_seconds", "log_max_nest_seconds", "nests",
    *(f"log_footprint_{scope}" for scope in _SCOPES),
    *(f"accesses_{scope}" for scope in _SCOPES),
    "share_stride_0", "share_stride_1", "share_stride_large", "lanes",
    "occupancy", "log_blocks", "log_threads", "pipeline_stages",
)


def _log(x: float) -> float:
    return math.log2(1.0 + max(0.0, float(x)))


def _kind(loop) -> str:
    if loop.kind == "thread_binding":
        return "blockIdx" if (loop.thread_tag or "").startswith("blockIdx") else "threadIdx"
    return loop.kind


def features(workload, func, model: MemoryMovementModel) -> np.ndarray:
    """The feature vector of one scheduled function (see the module doc)."""
    nests = loop_nests(func)
    estimate = model.estimate(workload, func)
    values = dict.fromkeys(FEATURE_NAMES, 0.0)
    extents = dict.fromkeys(_KINDS, 0.0)
    strides = [0, 0, 0]
    for nest in nests:
        for loop in nest.loops:
            extents[_kind(loop)] += math.log2(loop.extent)
            values["pipeline_stages"] = max(values["pipeline_stages"], loop.stages)
        values["max_depth"] = max(values["max_depth"], len(nest.loops))
        _nest_features(nest, values, strides)
    for kind in _KINDS:
        values[f"log_extent_{kind}"] = extents[kind]
    flops = estimate["flops"]
    values["log_flops"] = _log(flops)
    for level, moved in estimate["bytes"].items():
        values[f"log_bytes_{level}"] = _log(moved)
    outer = estimate["bytes"].get("llc", estimate["bytes"].get("global", 0.0))
    values["intensity"] = flops / max(1.0, outer)
    values["log_estimate_seconds"] = math.log2(estimate["seconds"])
    values["log_max_nest_seconds"] = math.log2(max(p["seconds"] for p in estimate["nests"])) \
        if estimate["nests"] else 0.0
    values["nests"] = len(nests)
    total = max(1, sum(strides))
    values["share_stride_0"], values["share_stride_1"], values["share_stride_large"] = (
        s / total for s in strides)
    gpu = [p for p in estimate["nests"] if "occupancy" in p]
    if gpu:
        values["occupancy"] = min(p["occupancy"] for p in gpu)
        values["log_blocks"] = _log(max(p["blocks"] for p in gpu))
        values["log_threads"] = _log(max(p["threads"] for p in gpu))
    values["lanes"] = max((p.get("lanes", 1.0) for p in estimate["nests"]), default=1.0)
    return np.array([values[name] for name in FEATURE_NAMES], dtype=np.float64)


def _nest_features(nest: LoopNest, values: dict, strides: list[int]) -> None:
    if nest.loops:
        inner = nest.loops[-1]
        values["log_innermost_extent"] = max(values["log_innermost_extent"],
                                             math.log2(inner.extent))
        values["innermost_vectorized"] += inner.kind == "vectorized"
        values["innermost_unrolled"] += inner.kind == "unrolled"
    values["operations"] = max(values["operations"], nest.operations)
    footprints: dict[str, int] = {}
    for access in nest.accesses:
        # tensor-core fragments are per thread (or per warp) storage, as "local" is
        scope = "local" if is_thread_private(access.buffer.scope) else access.buffer.scope
        values[f"accesses_{scope}"] += 1
        size = math.prod(access.shape) * element_bytes(access)
        footprints[access.buffer.storage_name] = size
        if nest.loops:
            stride = nest.stride(access, len(nest.loops) - 1)
            strides[0 if stride == 0 else 1 if stride == 1 else 2] += 1
        values[f"log_footprint_{scope}"] = max(values[f"log_footprint_{scope}"], _log(size))


def feature_matrix(workload, funcs, model: MemoryMovementModel) -> np.ndarray:
    return np.stack([features(workload, f, model) for f in funcs]) if funcs else \
        np.zeros((0, len(FEATURE_NAMES)))

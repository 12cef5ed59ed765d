"""The workload a tuning run schedules: a function, the user's own steps, a target.

    workload = Workload.of(func_or_schedule, target="c")
    workload.key          # structural hash: the DB's name for this function, steps and target
    workload.arrays(0)    # values for every parameter, seeded
    workload.flops()      # arithmetic of one call, for GFLOP/s

A `Schedule` given to `tune` keeps its steps: they are `user_trace`, replayed first on every
candidate, and the blocks they touched (`user_blocks`) are not searched.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib

import numpy as np

from sched.autoscheduler.index_data import index_data_ranges
from sched.ir.functor import collect
from sched.ir.nodes import (
    BinaryOp,
    BlockRealize,
    Buffer,
    Call,
    For,
    IntImm,
    PrimFunc,
)
from sched.schedule.base import BlockRV, LoopRV
from sched.schedule.trace import Trace


@dataclasses.dataclass(frozen=True, eq=False)
class Workload:
    func: PrimFunc                       # the function as written (no step applied)
    target: str = "c"                    # "c" or "cuda"
    arch: str | None = None              # CUDA arch ("sm_90"), None for C
    user_trace: Trace = dataclasses.field(default_factory=Trace)

    @classmethod
    def of(cls, func, target: str = "c", arch: str | None = None) -> Workload:
        """A workload from a PrimFunc or a Schedule (its steps are kept)."""
        from sched.schedule import Schedule

        if isinstance(func, Schedule):
            return cls(func.original_func, target, arch, Trace(list(func.trace.instructions)))
        if not isinstance(func, PrimFunc):
            raise TypeError(f"tune: expected a PrimFunc or a Schedule, got "
                            f"{type(func).__name__}")
        return cls(func, target, arch)

    @property
    def name(self) -> str:
        return self.func.name

    @functools.cached_property
    def script(self) -> str:
        return self.func.script()

    @functools.cached_property
    def key(self) -> str:
        """The structural hash of the function and the user's steps (the target is stored
        beside it in the DB): equal for equal scripts, whatever the Python objects."""
        text = self.script + "\n" + self.user_trace.to_json()
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    @functools.cached_property
    def user_blocks(self) -> frozenset[str]:
        """Names of the blocks the user's steps scheduled or made (not searched)."""
        from sched.schedule import Schedule

        touched: set[str] = set()
        self.user_trace.replay(Schedule(self.func, render_errors=False, verify_steps=False),
                               on_call=functools.partial(_blocks_touched, touched))
        return frozenset(touched)

    def base_schedule(self, seed: int | None = None, render_errors: bool = False):
        """A Schedule of `func` with the user's steps replayed."""
        from sched.schedule import Schedule

        sch = Schedule(self.func, render_errors=render_errors, verify_steps=False, seed=seed)
        return self.user_trace.replay(sch)

    @functools.cached_property
    def buffers(self) -> tuple[Buffer, ...]:
        params = tuple(p for p in self.func.params if isinstance(p, Buffer))
        for buffer in params:
            if not all(isinstance(d, IntImm) for d in buffer.shape):
                raise ValueError(f"tune: parameter {buffer.name!r} has the symbolic shape "
                                 f"{[d.script() for d in buffer.shape]}; tuning needs constant "
                                 f"shapes (specialize the function first)")
        return params

    @functools.cached_property
    def outputs(self) -> tuple[int, ...]:
        """Positions (among the buffer parameters) of the buffers the function writes."""
        written = {region.buffer.storage_name for realize in collect(self.func.body,
                                                                      BlockRealize)
                   for region in realize.block.writes}
        return tuple(i for i, b in enumerate(self.buffers) if b.storage_name in written)

    def arrays(self, seed: int = 0) -> list[np.ndarray]:
        """One array per buffer parameter, drawn from `seed`, outputs too: a candidate that
        loses a reduction's init, or reads an output before writing it, sees other values
        than the unscheduled function wrote over. Integers take both signs and, for the 8-
        and 16-bit types, their whole range (an int8 read as uint8 shows), except those read
        as indices or loop bounds (index_data.py), which stay small and in bounds."""
        rng = np.random.default_rng(seed)
        indices = index_data_ranges(self.func)
        arrays = []
        for buffer in self.buffers:
            shape = tuple(d.value for d in buffer.shape)
            dtype = np.dtype(buffer.dtype) if buffer.dtype != "bfloat16" else np.dtype(np.float32)
            if dtype.kind in "iu":
                low, high = indices.get(buffer.name) or _integer_range(dtype)
                arrays.append(rng.integers(low, high, shape, endpoint=True).astype(dtype))
            elif dtype.kind == "b":
                arrays.append(rng.integers(0, 2, shape).astype(dtype))
            else:
                arrays.append(rng.uniform(-1, 1, shape).astype(dtype))
        return arrays

    def flops(self) -> float:
        """Arithmetic operations of one call: per block, the operations of its body times
        its iterations (at least one operation per iteration)."""
        return float(sum(_iterations(r) * max(1, _operations(r.block.body))
                         for r in collect(self.func.body, BlockRealize)
                         if r.block.iter_vars))


def _integer_range(dtype: np.dtype) -> tuple[int, int]:
    """The values drawn for integer data: the whole range of the 8- and 16-bit types, and
    -32768..32767 (unsigned 0..65535) for the wider ones, whose sums and products of such
    values then wrap as they would on real data only in a minority of elements."""
    if dtype.itemsize <= 2:
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    return (0, 65535) if dtype.kind == "u" else (-32768, 32767)


def _iterations(realize: BlockRealize) -> int:
    count = 1
    for iv in realize.block.iter_vars:
        extent = iv.dom.extent
        count *= extent.value if isinstance(extent, IntImm) else 1
    return count


def _operations(body) -> int:
    return len(collect(body, BinaryOp)) + len(collect(body, Call))


def _blocks_touched(touched: set[str], instruction, handles, before: PrimFunc, sch) -> None:
    """Add to `touched` the blocks a user's step scheduled: the blocks it took, those under
    the loops it took (`parallel(i)` schedules the blocks under i) and those it made (a cache
    stage). Finding handles (`get_block`, `get_loops`, `get_consumers`...) and sampling
    schedule nothing: a block only looked at is searched, and one reached through
    `get_child_blocks` and scheduled is not (audit helper-70)."""
    if instruction.kind.startswith(("get_", "sample_")):
        return
    for handle in handles:
        if isinstance(handle, BlockRV):
            touched.add(handle.name)
        elif isinstance(handle, LoopRV):
            for func in (before, sch.func):
                loop = next((lp for lp in collect(func.body, For)
                             if lp.loop_var.name == handle.name), None)
                if loop is not None:
                    touched.update(r.block.name for r in collect(loop, BlockRealize))
    old = {r.block.name for r in collect(before.body, BlockRealize)}
    touched.update(r.block.name for r in collect(sch.func.body, BlockRealize)
                   if r.block.name not in old)

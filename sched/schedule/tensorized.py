"""Tensorized loop nests stay the intrinsic's: a step after `tensorize` that changes one is
refused at that step.

`tensorize` replaces a block's loops with the implementation of a tensor intrinsic whose outer
loop carries `{"warp_intrinsic": "<call>"}` (sched/lower/wmma_fragments.py); the CUDA code
generator emits one call for that nest and reads its shape, its buffers and its indices to do
so. A later step that changes the nest (a unit loop added inside it, a split of one of its
loops, another buffer in its accesses) made a schedule that every step accepted and that the
CUDA build then refused ("cannot emit mma_fill: loop 'u' does not run 0..15"; found by the
tensor-core fuzzer). The C target runs such a nest as loops, so only the CUDA build noticed.

    >>> from sched.hand_schedules import gpu_matmul_mma
    >>> sch = gpu_matmul_mma(32, 32, 32, fragments=(1, 1), warps=(1, 1), k_tiles=1)
    >>> sch.add_unit_loop(sch.get_block("C_init_o_C_warp"))   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sched.errors.ScheduleError: add_unit_loop: it changes the loops of the tensor intrinsic ...
"""

from __future__ import annotations

from sched.errors import ScheduleError
from sched.ir.functor import collect
from sched.ir.nodes import For, PrimFunc, warp_intrinsic


def _intrinsic_nests(func: PrimFunc) -> dict[str, For]:
    return {loop.loop_var.name: loop for loop in collect(func.body, For)
            if warp_intrinsic(loop) is not None}


def check_intrinsic_nests_kept(func: PrimFunc, new_func: PrimFunc, primitive: str) -> None:
    """Refuse step `primitive` (which made `new_func` from `func`) where it changed or removed
    a tensorized nest of `func` (compared as IR: a nest rebuilt unchanged passes)."""
    before = _intrinsic_nests(func)
    if not before:
        return
    after = _intrinsic_nests(new_func)
    for name, loop in before.items():
        new = after.get(name)
        if new is loop or new == loop:
            continue
        raise ScheduleError(primitive, f"it changes the loops of the tensor intrinsic "
                            f"{warp_intrinsic(loop)} (loop {name!r}), which tensorize put "
                            f"there: the CUDA target emits one call for that nest as it is. "
                            f"Make this step before tensorize (tensorize last), or schedule "
                            f"the loops outside the intrinsic")

"""unannotate: take an annotation off a loop or a block (`annotate`, in loop_kinds.py, puts
it on).

Annotations change no order and no storage, so removing one keeps every dependence; what a
remaining software-pipeline annotation asks is checked again (schedule/software_pipeline.py),
as when it was set. MetaSchedule traces use it in their post-processing part
(`sch.unannotate(block_or_loop=b47, ann_key="meta_schedule.cooperative_fetch")`).
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.nodes import PrimFunc
from sched.polyhedral.software_pipeline import ASYNC_STAGES, KEYS, STAGE
from sched.schedule.base import BlockRV, LoopRV, ScheduleBase
from sched.schedule.software_pipeline import check_pipeline_annotation
from sched.schedule.state import find_block, find_loop, replace


def unannotate(func: PrimFunc, target: str, is_block: bool, key: str,
               render: bool = True) -> PrimFunc:
    """`func` without the annotation `key` of the loop or block `target` (the same function
    when it has none, as in TVM)."""
    if not isinstance(key, str) or not key:
        raise ScheduleError("unannotate", f"argument 2, 'ann_key' to unannotate: expected a "
                            f"non-empty string, got {key!r}")
    node = find_block(func, target, "unannotate").block if is_block \
        else find_loop(func, target, "unannotate")
    if key not in dict(node.annotations):
        return func
    annotations = tuple((k, v) for k, v in node.annotations if k != key)
    if is_block:
        realize = find_block(func, target, "unannotate")
        new = dataclasses.replace(realize, block=dataclasses.replace(realize.block,
                                                                    annotations=annotations))
        return replace(func, realize, new)
    remaining = [k for k, _ in annotations if k in KEYS]
    if key == STAGE and ASYNC_STAGES in remaining:      # (audit helper-127: build refused it)
        raise ScheduleError("unannotate", f"loop {target!r} keeps {ASYNC_STAGES!r}, which "
                            f"says which of the {STAGE!r} stages copy asynchronously: "
                            f"unannotate {ASYNC_STAGES!r} first")
    new_func = replace(func, node, dataclasses.replace(node, annotations=annotations))
    if key in KEYS and remaining:
        # (the stages, where they remain: asked with the async stages first, the check
        # returned at once and the build refused the pipeline, audit helper-157)
        check_pipeline_annotation(new_func, target, STAGE if STAGE in remaining else
                                  remaining[0], render)
    return new_func


class AnnotationPrimitives(ScheduleBase):
    """unannotate."""

    def unannotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str) -> None:
        """Remove the annotation `ann_key` from a block or a loop.

        Requires: a string key. A key the target does not carry leaves the function as it is
        (as in TVM). What software-pipeline annotations remain on the loop must still fit its
        body (checked as by `annotate`).

        Arguments: `block_or_loop` a block or loop handle; `ann_key` the annotation's key.
        Returns: nothing. Handles stay valid.
        Also known as: `unannotate` in TVM.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((4, 8), name="A")
        >>> B = te.compute((4, 8), lambda i, j: A[i, j] + 1.0, name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]))
        >>> i, j = sch.get_loops(sch.get_block("B"))
        >>> sch.annotate(i, "pragma_auto_unroll_max_step", 16)
        >>> print(sch.func.script().splitlines()[5])
                for i in T.serial(4, annotations={"pragma_auto_unroll_max_step": 16}):
        >>> sch.unannotate(i, "pragma_auto_unroll_max_step")
        >>> print(sch.func.script().splitlines()[5])
                for i, j in T.grid(4, 8):
        """
        is_block = isinstance(block_or_loop, BlockRV)
        name = self._block(block_or_loop, "unannotate", "block_or_loop") if is_block \
            else self._loop(block_or_loop, "unannotate", "block_or_loop")
        new_func = unannotate(self._func, name, is_block, ann_key, self.render_errors)
        self._record("unannotate", new_func, (block_or_loop, ann_key))

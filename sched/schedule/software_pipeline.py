r"""Software-pipeline annotations on a loop, checked when they are set.

`sch.annotate(loop, "software_pipeline_stage", [0, 0, 1])` and
`sch.annotate(loop, "software_pipeline_order", [0, 1, 2])` (TVM's names; optionally
`"software_pipeline_async_stages", [0]`) ask the lowering to run each statement of the loop
body that many iterations behind, in that order, multi-buffering what a later stage reads
(lower/software_pipeline.py). The shape of the annotations is checked as soon as one is set;
the dependences (polyhedral/software_pipeline.py) once both the stages and the order are there,
and again when the loop is lowered (a later step may change the body).

>>> from sched.hand_schedules.gpu import gpu_matmul
>>> sch = gpu_matmul(64, 64, 64, block_tile=(32, 32))
>>> k_outer = sch.get_loops(sch.get_block("C_update"))[4]
>>> sch.annotate(k_outer, "software_pipeline_stage", [0, 0, 1])   # copy A, copy B, compute
>>> sch.annotate(k_outer, "software_pipeline_order", [0, 1, 2])
>>> import re
>>> print(re.findall(r'"(software_pipeline_\w+)": (\[[\d, ]*\])', sch.func.script()))
[('software_pipeline_stage', '[0, 0, 1]'), ('software_pipeline_order', '[0, 1, 2]')]
>>> sch.annotate(k_outer, "software_pipeline_stage", [1, 1, 0])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
sched.errors.ScheduleError: annotate: stages [1, 1, 0], order [0, 1, 2] of loop 'k_0' would ...
"""

from __future__ import annotations

from sched.ir.nodes import PrimFunc
from sched.polyhedral.software_pipeline import KEYS, ORDER, STAGE, pipeline_violation, read_plan
from sched.polyhedral.violation import schedule_error
from sched.schedule.state import find_loop


def check_pipeline_annotation(func: PrimFunc, loop_name: str, key: str, render: bool) -> None:
    """Refuse (ScheduleError from `annotate`) pipeline annotations of loop `loop_name` in
    `func` (the function with the new annotation) that do not fit its body or would reorder
    dependent statements. Other keys are not looked at."""
    if key not in KEYS:
        return
    loop = find_loop(func, loop_name, "annotate")
    plan = read_plan(loop, "annotate", require_stage=False)
    values = dict(loop.annotations)
    if plan is None or STAGE not in values or ORDER not in values:
        return
    violation = pipeline_violation(func, loop_name, plan)
    if violation is not None:
        raise schedule_error("annotate", violation, func, loop=loop_name, render=render)

r"""Software-pipeline annotations on a loop, checked when they are set.

`sch.annotate(loop, "software_pipeline_stage", [0, 0, 1])` and
`sch.annotate(loop, "software_pipeline_order", [0, 1, 2])` (TVM's names; optionally
`"software_pipeline_async_stages", [0]`) ask the lowering to run each statement of the loop
body that many iterations behind, in that order, multi-buffering what a later stage reads
(lower/software_pipeline.py). The shape of the annotations is checked as soon as one is set;
the dependences (polyhedral/software_pipeline.py) once both the stages and the order are there,
and again after every later step that changes the loop (`check_pipelines_kept`: a split, a
compute_at or an inlining in its body changes its statements), and when the loop is lowered.

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

from sched.errors import ScheduleError
from sched.ir.functor import collect
from sched.ir.nodes import For, PrimFunc
from sched.ir.paths import enclosing_loops
from sched.polyhedral.software_pipeline import (
    ASYNC_STAGES,
    KEYS,
    ORDER,
    STAGE,
    pipeline_violation,
    read_plan,
)
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
    if plan is None or STAGE not in values or ORDER not in values or key == ASYNC_STAGES:
        return      # (which stages copy asynchronously changes no order: read_plan checks it)
    violation = pipeline_violation(func, loop_name, plan)
    if violation is not None:
        raise schedule_error("annotate", violation, func, loop=loop_name, render=render)


def check_pipelines_kept(func: PrimFunc, new_func: PrimFunc, primitive: str) -> None:
    """Refuse step `primitive` (which made `new_func` from `func`) where it changed the body of
    a software-pipelined loop so that its annotations no longer fit it (another number of
    statements) or its stages would reorder what now depends. A loop whose subtree the step
    left as it was (the same node) keeps its verdict: the pipeline reorders only the
    statements inside it, unless a loop around it changed (a bind of a loop around it makes
    its statements per-thread programs: audit helper-190, the build refused what the step
    accepted)."""
    before = {id(node) for node in collect(func.body, For)}
    for loop in collect(new_func.body, For):
        if not any(key in KEYS for key, _ in loop.annotations) or (
                id(loop) in before and all(id(outer) in before
                                           for outer in enclosing_loops(new_func, loop))):
            continue
        name = loop.loop_var.name
        undo = (f"unannotate it first (sch.unannotate(loop, ...) of {ASYNC_STAGES!r} where "
                f"it has them, then of {STAGE!r} and {ORDER!r}) and annotate it again after "
                f"this step")
        try:
            plan = read_plan(loop, primitive, require_stage=False)
        except ScheduleError as error:
            raise ScheduleError(primitive, f"loop {name!r} is software-pipelined and this step "
                                f"changes its body: {error.reason}; or {undo}") from None
        if plan is None or STAGE not in dict(loop.annotations):
            continue
        violation = pipeline_violation(new_func, name, plan)
        if violation is not None:
            raise schedule_error(primitive, violation, new_func, loop=name)

"""Polyhedral analysis with isl: the model of a PrimFunc, its dependences, the legality of a new
order or of a parallel loop, and the bounds of the regions blocks touch.

    deps = sched.polyhedral.dependences(func)
    violation = sched.polyhedral.check_order(func, rescheduled)      # None when legal
    violation = sched.polyhedral.check_parallel(func, "C", "k")     # block C's loop k
    region = sched.polyhedral.buffer_region(func, "C", "A", loop="k")
    found = sched.polyhedral.check_in_bounds(func)                  # None when in bounds

isl names come from `names.py` only; `PolyModel.statement_of_tuple`, `storage_of_tuple` and
`buffer_tuple` translate between them and the IR.
"""

from sched.ir.memo import clear_all as clear_caches  # forget every remembered analysis
from sched.polyhedral.bounds import buffer_region
from sched.polyhedral.dependences import Dependence, dependences, model_and_dependences
from sched.polyhedral.in_bounds import (
    BoundsReport,
    OutOfBounds,
    OutOfBoundsError,
    bounds_report,
    check_in_bounds,
)
from sched.polyhedral.legality import Violation, check_order, check_parallel, check_schedule
from sched.polyhedral.model import PolyModel, build_model

__all__ = ["BoundsReport", "Dependence", "OutOfBounds", "OutOfBoundsError", "PolyModel",
           "Violation", "bounds_report", "buffer_region", "build_model", "check_in_bounds",
           "check_order", "check_parallel", "check_schedule", "dependences",
           "clear_caches", "model_and_dependences"]


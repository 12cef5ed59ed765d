"""Polyhedral analysis with isl: the model of a PrimFunc, its dependences, the legality of a new
order or of a parallel loop, and the bounds of the regions blocks touch.

    deps = sched.polyhedral.dependences(func)
    violation = sched.polyhedral.check_order(func, rescheduled)      # None when legal
    violation = sched.polyhedral.check_parallel(func, "C", "k")     # block C's loop k
    region = sched.polyhedral.buffer_region(func, "C", "A", loop="k")
"""

from sched.polyhedral.bounds import buffer_region
from sched.polyhedral.dependences import Dependence, dependences, model_and_dependences
from sched.polyhedral.legality import Violation, check_order, check_parallel, check_schedule
from sched.polyhedral.model import PolyModel, build_model

__all__ = ["Dependence", "PolyModel", "Violation", "buffer_region", "build_model",
           "check_order", "check_parallel", "check_schedule", "dependences",
           "model_and_dependences"]

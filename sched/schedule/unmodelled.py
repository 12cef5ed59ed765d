"""Steps on a function the polyhedral model cannot represent (a while loop around blocks:
`polyhedral/statements.py`) are refused, each naming itself: the analysis raises
UnmodelledError wherever a step asks it, and `refuse_unmodelled` turns that into the step's
ScheduleError. A step that asks nothing (a split, which keeps the order) is not refused.
So is a step whose analysis fails in isl on a function with a block domain that moves with
the loops (`_moving_domain`), and one that needs a bound no IR expression writes (NotAffine:
past int64); any other isl error is raised as it is (a bug to report).
"""

from __future__ import annotations

import functools
import inspect
import types

import islpy as isl

from sched.errors import ScheduleError, UnmodelledError
from sched.ir.functor import collect, free_vars
from sched.ir.nodes import BlockRealize, For
from sched.polyhedral.isl_expr import NotAffine


def refuse_unmodelled(cls: type) -> type:
    """`cls` with each public method raising `ScheduleError(<method>, ...)` where the analysis
    it asked raised UnmodelledError."""
    for name in dir(cls):
        method = inspect.getattr_static(cls, name)
        if not name.startswith("_") and isinstance(method, types.FunctionType):
            setattr(cls, name, _refusing(name, method))
    return cls


def _refusing(name: str, method):
    @functools.wraps(method)
    def step(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except UnmodelledError as error:
            raise ScheduleError(name, str(error),
                                render=getattr(self, "render_errors", True)) from None
        except NotAffine:
            # a bound isl found that no IR expression writes (one past int64, of index
            # arithmetic the kernels wrap: audit helper-169's raw NotAffine)
            raise ScheduleError(name, f"{name} cannot write a bound of the accesses it "
                                f"works on as an expression (index arithmetic past int64 "
                                f"or not affine): keep index arithmetic within int64, or "
                                f"schedule without this step",
                                render=getattr(self, "render_errors", True)) from None
        except isl.Error:
            moving = _moving_domain(self._func)
            if moving is None:
                raise
            raise ScheduleError(name, f"{moving}, which moves with the loops around it: "
                                f"{name} cannot analyse such a domain yet; write the block "
                                f"over a fixed range under T.where, or schedule without this "
                                f"step",
                                render=getattr(self, "render_errors", True)) from None
    return step


def _moving_domain(func) -> str | None:
    """The first block domain of `func` that uses a loop variable (`for k in range(i, n)`,
    remapped: vk in [i, n)), described, or None. Such a domain is kept as written (a
    reduction's init runs at its first point: intervals.loop_invariant_domain), and not every
    analysis follows it."""
    loop_vars = {loop.loop_var for loop in collect(func.body, For)}
    for realize in collect(func.body, BlockRealize):
        for iter_var in realize.block.iter_vars:
            dom = iter_var.dom
            if (set(free_vars(dom.min)) | set(free_vars(dom.extent))) & loop_vars:
                return (f"the domain of {iter_var.var.name!r} in block "
                        f"{realize.block.name!r} starts at {dom.min.script()}")
    return None

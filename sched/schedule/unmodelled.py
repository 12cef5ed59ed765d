"""Steps on a function the polyhedral model cannot represent (a while loop around blocks:
`polyhedral/statements.py`) are refused, each naming itself: the analysis raises
UnmodelledError wherever a step asks it, and `refuse_unmodelled` turns that into the step's
ScheduleError. A step that asks nothing (a split, which keeps the order) is not refused.
"""

from __future__ import annotations

import functools
import inspect
import types

from sched.errors import ScheduleError, UnmodelledError


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
    return step

"""Every error class a user catches is importable from `sched` itself."""

from __future__ import annotations

import inspect

import sched
import sched.errors


def test_every_error_of_sched_errors_is_importable_from_sched():
    classes = [c for _, c in inspect.getmembers(sched.errors, inspect.isclass)
               if issubclass(c, Exception | Warning) and c.__module__ == "sched.errors"]
    assert classes
    for cls in classes:
        assert getattr(sched, cls.__name__) is cls and cls.__name__ in sched.__all__


def test_errors_defined_elsewhere_are_importable_too():
    from sched.interpreter.runtime import InterpretError
    from sched.polyhedral.in_bounds import OutOfBoundsError

    assert sched.OutOfBoundsError is OutOfBoundsError
    assert sched.InterpretError is InterpretError


def test_an_out_of_bounds_function_raises_sched_out_of_bounds_error():
    import pytest

    from sched.script import T

    @T.prim_func
    def reads_past(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi + 1]

    with pytest.raises(sched.OutOfBoundsError, match="A"):
        sched.build(reads_past, target="c")

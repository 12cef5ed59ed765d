"""A `@T.prim_func` reads the names it does not define from Python, as TVM's parser does:
module constants, a factory's arguments (closure or locals of the defining scope), a dtype
held in a variable (audit helper-50: "unknown name 'M'" before)."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched.errors import ScriptError
from sched.script import T
from tests.conftest import assert_close

ROWS, COLS = 6, 8


def test_module_constants_in_shapes_and_loops():
    @T.prim_func
    def add_one(A: T.Buffer((ROWS, COLS), "float32")):
        for i, j in T.grid(ROWS, COLS):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                A[vi, vj] = A[vi, vj] + T.float32(1.0)

    assert 'A: T.Buffer((6, 8), "float32")' in add_one.script()
    a = np.random.default_rng(0).standard_normal((ROWS, COLS)).astype("float32")
    out = a.copy()
    sched.build(add_one, target="c")(out)
    assert_close(out, a + 1)


def _scaled(m: int, n: int, dtype: str, scale: float):
    @T.prim_func
    def scaled(A: T.Buffer((m, n), dtype), B: T.Buffer((m, n), dtype)):
        for i, j in T.grid(m, n):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * scale
    return scaled


@pytest.mark.parametrize("m, n, dtype, scale", [(4, 6, "float32", 2.0), (3, 5, "float64", 0.5)])
def test_a_factory_of_functions(m, n, dtype, scale):
    func = _scaled(m, n, dtype, scale)
    assert f'A: T.Buffer(({m}, {n}), "{dtype}")' in func.script()
    a = np.random.default_rng(1).standard_normal((m, n)).astype(dtype)
    b = np.zeros_like(a)
    sched.build(func, target="c")(a, b)
    assert_close(b, a * scale)


def test_a_script_name_shadows_python_and_other_objects_are_refused():
    i = 99      # noqa: F841 (the loop variable of the script is meant, not this)
    helper = object()    # noqa: F841

    @T.prim_func
    def copy(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                B[vi] = A[vi]

    assert "for i in range(4):" in copy.script()
    with pytest.raises(ScriptError, match="'helper' is a Python object of the scope around the "
                                          "function; a script reads numbers and IR"):
        @T.prim_func
        def wrong(A: T.Buffer((4,), "float32")):
            for i in range(4):
                with T.block("B"):
                    vi = T.axis.spatial(4, i)
                    A[vi] = A[vi] * helper

"""bind refuses at the step what the build would refuse (fuzz finding F5): a symbolic thread
count. A blockIdx axis may be symbolic (the grid is sized at each call)."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError


def _scale():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    return te.create_prim_func([A, te.compute((n,), lambda i: A[i] * 2.0, name="B")])


def test_bind_refuses_a_symbolic_extent_on_a_thread_axis():
    sch = sched.Schedule(_scale())
    (i,) = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match="bind: loop 'i' has the symbolic extent n; thread "
                       "counts must be constants: split it"):
        sch.bind(i, "threadIdx.x")


def test_bind_accepts_a_symbolic_extent_on_a_block_axis_and_the_split_runs():
    sch = sched.Schedule(_scale())
    (i,) = sch.get_loops(sch.get_block("B"))
    bx, tx = sch.split(i, [None, 32])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    a = np.arange(70, dtype="float32")
    b = np.zeros(70, "float32")
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_array_equal(b, a * 2)


def _grid():
    A = te.placeholder((4, 6), name="A")
    return te.create_prim_func([A, te.compute((4, 6), lambda i, j: A[i, j] + 1.0, name="B")])


@pytest.mark.parametrize("inner_first", [True, False])
def test_bind_refuses_nested_loops_of_one_block_axis(inner_first):
    """Fuzz finding: binding j, then i (around it) to blockIdx.y was accepted and refused only
    at build. Both orders are refused at the step, naming both loops."""
    sch = sched.Schedule(_grid())
    i, j = sch.get_loops(sch.get_block("B"))
    first, second = (j, i) if inner_first else (i, j)
    sch.bind(first, "blockIdx.y")
    with pytest.raises(ScheduleError, match="are nested: nested loops of one block axis would "
                       "share one block index.*fuse the two loops"):
        sch.bind(second, "blockIdx.y")
    sch.bind(second, "blockIdx.x")       # another axis is fine
    a = np.arange(24, dtype="float32").reshape(4, 6)
    b = np.zeros((4, 6), "float32")
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_array_equal(b, a + 1)

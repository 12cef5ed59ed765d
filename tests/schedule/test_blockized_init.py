"""decompose_reduction of a blockized reduction, as TVM's blockize + decompose_reduction of the
outer block make it: `<outer>_init` holding copies of the inner spatial loops and
`<inner>_init`, before the loop; the outer block becomes `<outer>_update` and the inner one
loses its init. Checked against the init's instances and dependences (an init that would run
at another time is refused)."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.schedule.trace import Trace


def matmul(n=32):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def blockized(func):
    sch = sched.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 16])
    jo, ji = sch.split(j, [None, 16])
    ko, ki = sch.split(k, [None, 8])
    sch.reorder(io, jo, ko, ii, ji, ki)
    return sch, sch.blockize(ii), (io, jo, ko)


def check(func, n=32):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    c = np.full((n, n), np.nan, np.float32)
    sched.build(func, target="c")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_decompose_reduction_of_the_outer_block_makes_tvms_init_blocks():
    sch, outer, (io, jo, ko) = blockized(matmul())
    init = sch.decompose_reduction(outer, ko)
    assert init.name == "C_o_init"
    script = sch.func.script()
    assert 'with T.block("C_o_init"):' in script and 'with T.block("C_init"):' in script
    assert 'with T.block("C_o_update"):' in script and "T.init()" not in script
    # the fill of a 16x16 tile: TVM tensorizes get_loops(C_init)[-2] with a fill intrinsic
    loops = sch.get_loops(sch.get_block("C_init"))
    assert [lp.name for lp in loops] == ["i_1_init", "j_1_init"]    # up to C_o_init, as TVM
    check(sch.func)
    replayed = Trace.from_json(sch.trace.to_json()).apply(sch.original_func)
    assert replayed.func.script() == script


def test_decompose_reduction_of_the_outer_block_at_an_outer_loop():
    sch, outer, (io, jo, ko) = blockized(matmul())
    sch.decompose_reduction(outer, io)
    assert "for i_0_init, j_0_init in T.grid(2, 2):" in sch.func.script()
    check(sch.func)


REVERSED = '''
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i, k_0, k_1 in T.grid(8, 2, 4):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            vk = T.axis.reduce(8, k_0 * 4 + 3 - k_1)
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
'''


# vk = 0 is the last iteration of k_1 for k_0 = 0: the init runs after three updates of its
# element (resetting them); the blockized init would run before them
def test_an_init_that_runs_after_updates_is_refused():
    sch = sched.Schedule(sched.parse(REVERSED))
    i, k0, k1 = sch.get_loops(sch.get_block("B"))
    outer = sch.blockize(k1)
    with pytest.raises(ScheduleError, match="decompose_reduction"):
        sch.decompose_reduction(outer, k0)


def test_an_outer_block_without_a_nested_init_is_refused():
    sch, outer, (io, jo, ko) = blockized(matmul())
    sch.decompose_reduction(outer, ko)
    with pytest.raises(ScheduleError, match="block 'C_o_update' has no init"):
        sch.decompose_reduction(sch.get_block("C_o_update"), ko)

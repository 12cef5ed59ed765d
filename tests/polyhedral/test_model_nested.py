"""Nested blocks (a block inside a block, as blockize makes; issue 9, item 11): the inner
statement's constraints are in loop variables, the outer block's variables substituted by their
bindings, so every step works on them and is judged by the dependences."""

from __future__ import annotations

import islpy as isl
import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.polyhedral import build_model, check_parallel
from sched.script import T


@T.prim_func
def blockized_matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"),
                     C: T.Buffer((16, 16), "float32")):
    for io, jo in T.grid(4, 4):
        with T.block("outer"):
            vio, vjo = T.axis.remap("SS", [io, jo])
            for ii, jj, k in T.grid(4, 4, 16):
                with T.block("C"):
                    vi = T.axis.spatial(16, vio * 4 + ii)
                    vj = T.axis.spatial(16, vjo * 4 + jj)
                    vk = T.axis.reduce(16, k)
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func
def blockized_scan(A: T.Buffer((16,), "float32")):
    for io in range(4):
        with T.block("outer"):
            vio = T.axis.spatial(4, io)
            for ii in range(4):
                with T.block("S"):
                    vi = T.axis.spatial(16, vio * 4 + ii)
                    T.where(vio * 4 + ii >= 1)
                    A[vi] = A[vi - 1] + A[vi]


def test_the_inner_statement_is_bound_through_the_outer_bindings():
    model = build_model(blockized_matmul)
    (body,) = [s for s in model.statements_of_block("C") if not s.is_init]
    every = isl.Set("{ S_C[vi, vj, vk] : 0 <= vi < 16 and 0 <= vj < 16 and 0 <= vk < 16 }")
    assert body.domain.is_equal(every)
    assert not model.notes


def test_steps_on_the_outer_loops_of_a_blockized_matmul(rng):
    sch = sched.Schedule(blockized_matmul)
    io, jo = sch.get_loops(sch.get_block("outer"))
    _, _, k = sch.get_loops(sch.get_block("C"))     # the loops inside "outer", as in TVM
    sch.reorder(jo, io)
    sch.parallel(jo)
    with pytest.raises(ScheduleError, match="carries a reduction"):
        sch.parallel(k)
    a = rng.standard_normal((16, 16)).astype(np.float32)
    b = rng.standard_normal((16, 16)).astype(np.float32)
    c = np.zeros((16, 16), np.float32)
    sched.build(sch.func, target="c")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_an_outer_loop_carrying_a_dependence_of_the_inner_block_is_not_parallel():
    assert check_parallel(blockized_scan, "S", "io") is not None
    sch = sched.Schedule(blockized_scan)
    (io,) = sch.get_loops(sch.get_block("outer"))
    with pytest.raises(ScheduleError, match="carries a flow dependence"):
        sch.parallel(io)

"""plan_buffer_allocation: buffers move to the lowest loop or block around their accesses,
unless a value flows through them from one iteration of that loop to another."""

from __future__ import annotations

import numpy as np

import sched
from sched.ir import Allocate, Block, For, collect
from sched.lower.plan_buffer_allocation import plan_buffer_allocation
from sched.script import T
from tests.conftest import assert_close
from tests.lower.block_ir import matmul


@T.prim_func
def tile_through_local(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    with T.block("root"):
        A_local = T.alloc_buffer((8, 8), "float32", scope="local")
        for io in range(2):
            for ii, j in T.grid(4, 8):
                with T.block("A_local"):
                    vi = T.axis.spatial(8, io * 4 + ii)
                    vj = T.axis.spatial(8, j)
                    A_local[vi, vj] = A[vi, vj]
            for ii2, j2 in T.grid(4, 8):
                with T.block("B"):
                    vi = T.axis.spatial(8, io * 4 + ii2)
                    vj = T.axis.spatial(8, j2)
                    B[vi, vj] = A_local[vi, vj] * T.float32(2)


@T.prim_func
def previous_iteration(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    with T.block("root"):
        P = T.alloc_buffer((8,), "float32")
        for i in range(8):
            with T.block("P"):
                vi = T.axis.spatial(8, i)
                P[vi] = A[vi] + T.float32(1)
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = P[T.max(vi - 1, 0)]


@T.prim_func
def recomputed_per_column(A: T.Buffer((8,), "float32"), B: T.Buffer((8, 3), "float32")):
    with T.block("root"):
        A_local = T.alloc_buffer((8,), "float32", scope="local")
        for io, j in T.grid(2, 3):
            for ax in range(4):
                with T.block("A_local"):
                    v = T.axis.spatial(8, io * 4 + ax)
                    A_local[v] = A[v]
            for ii in range(4):
                with T.block("B"):
                    vi = T.axis.spatial(8, io * 4 + ii)
                    vj = T.axis.spatial(3, j)
                    B[vi, vj] = A_local[vi] * T.float32(2)


def allocation_loop(func, name: str) -> str | None:
    """The loop whose body allocates `name`, or None (allocated by a block)."""
    for loop in collect(func.body, For):
        body = loop.body
        while isinstance(body, Allocate):
            if body.buffer.name == name:
                return loop.loop_var.name
            body = body.body
    return None


def test_buffer_used_in_one_iteration_moves_into_the_loop():
    planned = plan_buffer_allocation(tile_through_local)
    assert allocation_loop(planned, "A_local") == "io"
    (root,) = [b for b in collect(planned.body, Block) if b.name == "root"]
    assert root.alloc_buffers == ()


def test_buffer_read_in_a_later_iteration_stays_at_the_root():
    # B at i reads P[i - 1], written at i - 1: a buffer per iteration would lose it
    planned = plan_buffer_allocation(previous_iteration)
    assert planned == previous_iteration


def test_recomputed_buffer_moves_inside_the_loop_that_recomputes_it():
    # A_local is refilled for each j: the last write before each read is in the same j
    planned = plan_buffer_allocation(recomputed_per_column)
    assert allocation_loop(planned, "A_local") == "j"


def test_function_without_intermediate_buffers_is_returned_as_is():
    func = matmul()
    assert plan_buffer_allocation(func) is func


def test_planned_functions_compute_the_same(rng):
    a = rng.standard_normal(8).astype(np.float32)
    b = np.zeros((8, 3), np.float32)
    sched.build(recomputed_per_column)(a, b)
    assert_close(b, np.repeat(a[:, None] * 2, 3, axis=1))
    b = np.zeros(8, np.float32)
    sched.build(previous_iteration)(a, b)
    assert_close(b, np.concatenate([[a[0] + 1], a[:-1] + 1]))

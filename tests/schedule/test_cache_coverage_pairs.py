"""cache_write's question "does the block read an element before writing it?" is answered pair
by pair (writer before reader) where every instance runs once, and by isl's flow analysis
otherwise: both answers agree."""

from __future__ import annotations

import islpy as isl
import pytest

import sched
from sched import compute as te
from sched.polyhedral import build_model
from sched.schedule.cache_coverage import (
    _on_buffer,
    _reads_before_every_write,
    _reads_without_source,
)
from sched.script import T


def _matmul():
    a = te.placeholder((8, 4), name="A")
    b = te.placeholder((4, 8), name="B")
    k = te.reduce_axis((0, 4), name="k")
    c = te.compute((8, 8), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


@T.prim_func
def accumulate_into_output(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = C[vi] + A[vi]


@T.prim_func
def write_then_read_back(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = A[vi]
            C[vi] = C[vi] * T.float32(2.0)


@T.prim_func
def reads_the_mirror_element(A: T.Buffer((8, 4), "float32"), C: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 4):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk] * C[7 - vi]


def _unscheduled(sch):
    pass


def _tiled_with_remainder(sch):
    """i split by 3 (a guarded remainder), k split and moved out, the init decomposed."""
    i, j, k = sch.get_loops(sch.get_block("C"))
    i_outer, i_inner = sch.split(i, factors=[None, 3])
    k_outer, k_inner = sch.split(k, factors=[2, 2])
    sch.reorder(k_outer, i_inner, j, k_inner)
    sch.decompose_reduction(sch.get_block("C"), k_outer)


def _rows_split(sch):
    """i split 2 x 4: rows 0-3 still read their mirror row before its init."""
    i, k = sch.get_loops(sch.get_block("C"))
    sch.split(i, factors=[2, 4])


@pytest.mark.parametrize("func, steps, block, buffer, expected", [
    (_matmul(), _unscheduled, "C", "C", False),        # the init writes before each update
    (_matmul(), _tiled_with_remainder, "C_update", "C", False),
    (accumulate_into_output, _unscheduled, "C", "C", True),   # reads C's old value
    # one statement instance: its read is not after its own write (the model orders
    # statement instances, not the stores inside one), so the read counts as unwritten
    (write_then_read_back, _unscheduled, "C", "C", True),
    # C[7 - i] is read before row 7 - i is initialised, for i < 4
    (reads_the_mirror_element, _unscheduled, "C", "C", True),
    (reads_the_mirror_element, _rows_split, "C", "C", True),
], ids=["matmul", "matmul_tiled", "accumulate", "write_then_read", "mirror", "mirror_split"])
def test_pairwise_answer_equals_flow_analysis(func, steps, block, buffer, expected):
    sch = sched.Schedule(func)
    steps(sch)
    model = build_model(sch.func)
    names = [block, "C_init"] if block == "C_update" else [block]
    statements = [s for name in names for s in model.statements_of_block(name)]
    (target,) = [b for b in sch.func.buffers if b.name == buffer]
    reads = writes = isl.UnionMap("{ }")
    schedule = None
    for statement in statements:
        reads = reads.union(_on_buffer(statement.reads, target))
        writes = writes.union(_on_buffer(statement.writes, target))
        own = isl.UnionMap.from_map(statement.schedule)
        schedule = own if schedule is None else schedule.union(own)
    assert all(s.runs_once for s in statements)
    flow = _reads_without_source(str(reads), str(writes), str(schedule))
    assert flow == expected
    assert _reads_before_every_write(statements, statements, target, reads) == expected

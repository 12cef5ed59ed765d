"""Views of one storage meet in the model (issue 9, item 6): when a storage is accessed through
views of different shapes (`A_flat = T.Buffer((16,), data=A.data)`), every access is
linearized to its row-major offset in the storage, so a write through `A` and a read through
`A_flat` are a dependence; each view keeps its own dimensions for regions and bounds."""

from __future__ import annotations

import islpy as isl
import pytest

import sched
from sched.errors import ScheduleError
from sched.polyhedral import buffer_region, build_model, check_parallel, dependences
from sched.script import T


@T.prim_func
def write_then_read_flat(A: T.Buffer((4, 4), "float32"), B: T.Buffer((16,), "float32")):
    A_flat = T.Buffer((16,), "float32", data=A.data)
    for i, j in T.grid(4, 4):
        with T.block("W"):
            vi, vj = T.axis.remap("SS", [i, j])
            A[vi, vj] = T.float32(1)
    for k in range(16):
        with T.block("R"):
            vk = T.axis.spatial(16, k)
            B[vk] = A_flat[vk]


@T.prim_func
def scan_through_a_view(A: T.Buffer((4, 4), "float32")):
    A_flat = T.Buffer((16,), "float32", data=A.data)
    for i in range(1, 16):
        with T.block("S"):
            vi = T.axis.spatial((1, 16), i)
            A[vi // 4, vi % 4] = A_flat[vi - 1] + T.float32(1)


def test_a_write_through_a_and_a_read_through_its_flat_view_are_a_dependence():
    (dep,) = [d for d in dependences(write_then_read_flat) if d.buffer == "A"]
    assert (dep.kind, dep.source.block.name, dep.sink.block.name) == ("flow", "W", "R")
    # exactly the same element: vk = 4 vi + vj
    assert dep.relation.is_single_valued() and dep.relation.is_injective()


def test_a_loop_carrying_a_dependence_through_two_views_is_not_parallel():
    assert check_parallel(scan_through_a_view, "S", "i") is not None
    sch = sched.Schedule(scan_through_a_view)
    (i,) = sch.get_loops(sch.get_block("S"))
    with pytest.raises(ScheduleError, match="carries a flow dependence"):
        sch.parallel(i)


def test_each_view_keeps_its_own_dimensions():
    model = build_model(write_then_read_flat)
    assert "A" in model.linearized
    (write,) = [a for s in model.statements_of_block("W") for a in s.accesses]
    assert write.buffer.name == "A" and write.relation.dim(isl.dim_type.out) == 2
    region = buffer_region(write_then_read_flat, "R", "A_flat")
    assert [(r.min.script(), r.extent.script()) for r in region] == [("0", "16")]
    region = buffer_region(write_then_read_flat, "W", "A")
    assert [(r.min.script(), r.extent.script()) for r in region] == [("0", "4"), ("0", "4")]

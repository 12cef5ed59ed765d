"""Memory primitives: cache_read, cache_write, set_scope, storage_align: the IR after each,
trace round-trips, numbers on the C target (with compute_at, the small arrays the lowering
makes of the caches), and every refusal."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.schedule import Trace
from sched.script import T
from tests.conftest import assert_close
from tests.schedule.conftest import run_c


def double(rows=4, cols=8):
    A = te.placeholder((rows, cols), name="A")
    return te.create_prim_func([A, te.compute((rows, cols), lambda i, j: A[i, j] * 2.0,
                                              name="B")])


def two_stage(rows=4, cols=8):
    """B = A * 2 (an intermediate buffer), C = B + 1."""
    A = te.placeholder((rows, cols), name="A")
    B = te.compute((rows, cols), lambda i, j: A[i, j] * 2.0, name="B")
    return te.create_prim_func([A, te.compute((rows, cols), lambda i, j: B[i, j] + 1.0,
                                              name="C")])


def matmul(m=37, n=23, k=19):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    return te.create_prim_func([A, B, te.ops.matmul(A, B)])


def matmul_inputs(rng, m=37, n=23, k=19):
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    return a, b, np.full((m, n), np.nan, np.float32)


def assert_equal_ir(func, expected):
    assert func == dataclasses.replace(expected, name=func.name), func.script()


def assert_replays(sch, func):
    assert sch.trace.apply(func).func == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func


@T.prim_func
def double_through_shared(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    with T.block("root"):
        A_shared = T.alloc_buffer((4, 8), "float32", scope="shared")
        for ax0, ax1 in T.grid(4, 8):
            with T.block("A_shared"):
                v0, v1 = T.axis.remap("SS", [ax0, ax1])
                T.reads(A[v0, v1])
                T.writes(A_shared[v0, v1])
                A_shared[v0, v1] = A[v0, v1]
        for i, j in T.grid(4, 8):
            with T.block("B"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                T.reads(A_shared[v_i, v_j])
                T.writes(B[v_i, v_j])
                B[v_i, v_j] = A_shared[v_i, v_j] * T.float32(2.0)


@T.prim_func
def double_through_local(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    with T.block("root"):
        B_local = T.alloc_buffer((4, 8), "float32", scope="local")
        for i, j in T.grid(4, 8):
            with T.block("B"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                T.reads(A[v_i, v_j])
                T.writes(B_local[v_i, v_j])
                B_local[v_i, v_j] = A[v_i, v_j] * T.float32(2.0)
        for ax0, ax1 in T.grid(4, 8):
            with T.block("B_local"):
                v0, v1 = T.axis.remap("SS", [ax0, ax1])
                T.reads(B_local[v0, v1])
                T.writes(B[v0, v1])
                B[v0, v1] = B_local[v0, v1]


def test_cache_read_copies_before_the_consumer():
    sch = sched.Schedule(double())
    copy = sch.cache_read(sch.get_block("B"), 0, "shared")
    assert copy.name == "A_shared"
    assert_equal_ir(sch.func, double_through_shared)
    assert_replays(sch, double())


def test_cache_write_copies_back_after_the_producer():
    sch = sched.Schedule(double())
    copy = sch.cache_write(sch.get_block("B"), 0, "local")
    assert copy.name == "B_local"
    assert_equal_ir(sch.func, double_through_local)
    assert_replays(sch, double())


def test_cache_read_covers_only_the_box_the_consumer_reads():
    A = te.placeholder((10,), name="A")
    sch = sched.Schedule(te.create_prim_func([A, te.compute((4,), lambda i: A[i + 3],
                                                            name="B")]))
    sch.cache_read(sch.get_block("B"), 0, "global")
    text = sch.func.script()
    assert "for ax0 in range(4):" in text and "v0 = T.axis.spatial(10, ax0 + 3)" in text


def test_caches_of_a_matmul_at_the_root_match_numpy(rng):
    sch = sched.Schedule(matmul())
    block = sch.get_block("C")
    sch.cache_read(block, 0, "shared")
    sch.cache_read(block, 1, "local")
    sch.cache_write(block, 0, "local")
    a, b, c = matmul_inputs(rng)
    assert_close(run_c(sch.func, a, b, c)[2], a @ b)
    assert_replays(sch, matmul())


def tiled_matmul_with_caches(align: bool = False):
    """A 37x23x19 matmul in 8x8 tiles, k by 4: C accumulated in a local tile written back
    under j_0, the A tile of each k_0 step copied to shared memory."""
    sch = sched.Schedule(matmul())
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    _, jo, ii, ji = sch.tile(i, j, 8, 8)
    ko, _ = sch.split(k, factors=[None, 4])
    sch.reorder(ko, ii, ji)
    sch.reverse_compute_at(sch.cache_write(block, 0, "local"), jo)
    copy = sch.cache_read(block, 0, "shared")
    sch.compute_at(copy, ko)
    if align:
        sch.storage_align(copy, 0, axis=0, factor=8, offset=1)
    return sch


def test_tiled_matmul_with_caches_matches_numpy_with_small_local_arrays(rng):
    sch = tiled_matmul_with_caches()
    kernel = sched.build(sch.func, target="c")
    # compacted: one 8x8 accumulator per (i_0, j_0), one 8x4 A tile per k_0 step
    assert "float C_local[64];  // scope local" in kernel.source
    assert "float A_shared[32];  // scope shared" in kernel.source
    a, b, c = matmul_inputs(rng)
    kernel(a, b, c)
    assert_close(c, a @ b)
    assert_replays(sch, matmul())


def test_storage_align_pads_the_compacted_tile(rng):
    sch = tiled_matmul_with_caches(align=True)
    assert 'T.block_attr({"buffer_dim_align": "[[0, 0, 8, 1]]"})' in sch.func.script()
    kernel = sched.build(sch.func, target="c")
    # rows of 4 padded to 9: the stride of axis 0 is 9 = 8 * 1 + 1
    assert "float A_shared[72];  // scope shared" in kernel.source
    a, b, c = matmul_inputs(rng)
    kernel(a, b, c)
    assert_close(c, a @ b)
    assert_replays(sch, matmul())


def test_set_scope_changes_the_allocation_and_every_use(rng):
    sch = sched.Schedule(two_stage())
    sch.set_scope(sch.get_block("B"), 0, "shared")
    text = sch.func.script()
    assert 'B = T.alloc_buffer((4, 8), "float32", scope="shared")' in text
    assert sched.parse(text) == sch.func
    a = rng.standard_normal((4, 8), np.float32)
    assert_close(run_c(sch.func, a, np.zeros_like(a))[1], a * 2 + 1)
    assert_replays(sch, two_stage())


def test_storage_align_replaces_an_earlier_request_for_the_same_axis():
    sch = sched.Schedule(two_stage())
    sch.storage_align(sch.get_block("B"), 0, axis=-2, factor=16, offset=1)
    sch.storage_align(sch.get_block("B"), 0, axis=0, factor=32, offset=4)
    assert '"[[0, 0, 32, 4]]"' in sch.func.script()
    assert_replays(sch, two_stage())


# --------------------------------------------------------------------------------------------
# refusals


# the index names one of the block's reads; the message lists them
def test_cache_read_refuses_an_index_out_of_range():
    sch = sched.Schedule(matmul())
    with pytest.raises(ScheduleError, match=r"argument 2, 'read_buffer_index' to cache_read: "
                       r"expected an index in \[0, 3\) into the reads of block 'C' \(0: A, "
                       r"1: B, 2: C\), got 3"):
        sch.cache_read(sch.get_block("C"), 3, "shared")


def test_cache_write_refuses_an_unknown_scope():
    sch = sched.Schedule(double())
    with pytest.raises(ScheduleError, match="argument 3, 'storage_scope' to cache_write: "
                       "unknown storage scope 'register': expected one of 'global', "
                       "'shared', 'local'"):
        sch.cache_write(sch.get_block("B"), 0, "register")


# C is read and written by the update: a read cache would miss the update's own writes
def test_cache_read_refuses_a_buffer_the_block_also_writes():
    sch = sched.Schedule(matmul())
    with pytest.raises(ScheduleError, match="block 'C' writes 'C' as well as reading it"):
        sch.cache_read(sch.get_block("C"), 2, "local")


# C reads B inside B's loop nest: it would read B before the cache is written back
def test_cache_write_refuses_a_buffer_read_in_the_producers_loop_nest():
    sch = sched.Schedule(two_stage())
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i)
    with pytest.raises(ScheduleError, match="block\\(s\\) C read 'B' in the loop nest of "
                       "block 'B', before the cache would be written back"):
        sch.cache_write(sch.get_block("B"), 0, "local")


# after decompose_reduction, C_init writes C too: the update alone would accumulate onto an
# uninitialized cache
def test_cache_write_refuses_a_buffer_with_another_writer():
    sch = sched.Schedule(matmul())
    _, _, k = sch.get_loops(sch.get_block("C"))
    sch.decompose_reduction(sch.get_block("C"), k)
    with pytest.raises(ScheduleError, match="block\\(s\\) C_init write 'C' too; cache_write "
                       "needs the only block that writes it"):
        sch.cache_write(sch.get_block("C_update"), 0, "local")


@T.prim_func
def lower_triangle(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
    for i in range(4):
        for j in range(i + 1):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj]


# the write-back covers the box [0:4, 0:4]; B's upper triangle is never written to the cache,
# so the cache starts as a copy of B and the write-back returns those elements unchanged
def test_cache_write_of_a_block_that_does_not_fill_its_box_fills_the_cache_first():
    sch = sched.Schedule(lower_triangle)
    sch.cache_write(sch.get_block("B"), 0, "local")
    assert 'with T.block("B_local_fill")' in sch.func.script()
    a = np.random.rand(4, 4).astype("float32")
    b = np.full((4, 4), 5, "float32")
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_array_equal(b, np.where(np.tri(4, dtype=bool), a, 5))


# a parameter's memory belongs to the caller
def test_set_scope_refuses_a_parameter():
    sch = sched.Schedule(double())
    with pytest.raises(ScheduleError, match="'B' is a parameter of the function"):
        sch.set_scope(sch.get_block("B"), 0, "shared")


def test_storage_align_refuses_a_parameter():
    sch = sched.Schedule(double())
    with pytest.raises(ScheduleError, match="storage_align: 'B' is a parameter"):
        sch.storage_align(sch.get_block("B"), 0, axis=0, factor=8, offset=1)


# the innermost axis has stride 1 whatever the padding
def test_storage_align_refuses_the_innermost_axis():
    sch = sched.Schedule(two_stage())
    with pytest.raises(ScheduleError, match=r"argument 3, 'axis' to storage_align: expected an "
                       r"axis other than the innermost \(its stride is 1\): one of 0 \(or -2 "
                       r"from the end\) for the 2-dimensional 'B', got -1"):
        sch.storage_align(sch.get_block("B"), 0, axis=-1, factor=8, offset=1)


def test_storage_align_of_a_buffer_of_one_dimension_says_it_has_no_axis_to_align():
    # audit, helper-90: the message listed the valid axes as two empty lists
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((8,), lambda i: B[i] + 1.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    with pytest.raises(ScheduleError, match="'B' has 1 dimension.* a buffer of one dimension "
                                            "has none"):
        sch.storage_align(sch.get_block("B"), 0, 0, 4, 1)


def test_a_new_layout_of_an_aligned_buffer_is_refused():
    """The request names an axis of the old layout, which the lowering dropped silently after
    a transform_layout to fewer axes (audit helper-50): refused, saying which order works."""
    sch = sched.Schedule(two_stage())
    sch.storage_align(sch.get_block("B"), 0, axis=0, factor=8, offset=1)
    with pytest.raises(ScheduleError, match="transform the layout first, then storage_align"):
        sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (j, i))


@pytest.mark.parametrize("factor, offset, argument", [(0, 0, "factor"), (8, 8, "offset")])
def test_storage_align_refuses_a_bad_factor_or_offset(factor, offset, argument):
    sch = sched.Schedule(two_stage())
    with pytest.raises(ScheduleError, match=f"'{argument}' to storage_align"):
        sch.storage_align(sch.get_block("B"), 0, axis=0, factor=factor, offset=offset)
    assert "buffer_dim_align" not in sch.func.script()


def test_buffer_dim_align_by_annotate_is_checked_as_storage_align_is():
    # audit, helper-93: the annotation bypassed storage_align's checks: a factor of 0 failed
    # at build with a raw ValueError, garbage was a raw JSONDecodeError, a parameter's
    # request was ignored
    import json

    for value, message in (("garbage", "takes \\[\\[buffer_index, axis, factor, offset\\]"),
                           (json.dumps([[0, 0, 0, 5]]), "'factor' to storage_align: expected "
                                                        "a positive int"),
                           ([[3, 0, 8, 1]], "'buffer_index' to storage_align")):
        sch = sched.Schedule(two_stage())
        with pytest.raises(ScheduleError, match=message):
            sch.annotate(sch.get_block("B"), "buffer_dim_align", value)
    by_annotation, by_primitive = sched.Schedule(two_stage()), sched.Schedule(two_stage())
    by_annotation.annotate(by_annotation.get_block("B"), "buffer_dim_align", [[0, 0, 8, 1]])
    by_primitive.storage_align(by_primitive.get_block("B"), 0, 0, 8, 1)
    assert by_annotation.func == by_primitive.func

"""compact_buffers: allocated buffers shrink to the box one execution of their allocation
touches, with indices rebased in the accessing blocks' own iteration variables."""

from __future__ import annotations

import re

import numpy as np

import sched
from sched import compute as te
from sched.ir import Allocate, Block, collect
from sched.lower.compact_buffers import compact_buffers
from sched.lower.plan_buffer_allocation import plan_buffer_allocation
from sched.script import T
from tests.conftest import assert_close
from tests.lower.test_plan_buffer_allocation import tile_through_local


def allocated(func, name: str):
    buffers = [a.buffer for a in collect(func.body, Allocate)]
    buffers += [b for block in collect(func.body, Block) for b in block.alloc_buffers]
    (buffer,) = [b for b in buffers if b.name == name]
    return buffer


def test_tile_buffer_shrinks_to_one_tile_with_rebased_indices():
    compacted = compact_buffers(plan_buffer_allocation(tile_through_local))
    assert [d.value for d in allocated(compacted, "A_local").shape] == [4, 8]
    text = compacted.script()
    assert "A_local[vi % 4, vj] = A[vi, vj]" in text
    assert "T.reads(A_local[vi % 4, vj])" in text
    sched.ir.verify.verify(compacted)


def test_lowered_tile_is_a_small_local_array(rng):
    kernel = sched.build(tile_through_local)
    assert "float A_local[32];  // scope local" in kernel.source
    assert "A_local[ii * 8 + j]" in kernel.source
    a, b = rng.standard_normal((8, 8), np.float32), np.zeros((8, 8), np.float32)
    kernel(a, b)
    assert_close(b, a * 2)


@T.prim_func
def middle_of_a_buffer(A: T.Buffer((16,), "float32"), B: T.Buffer((4,), "float32")):
    with T.block("root"):
        M = T.alloc_buffer((16,), "float32")
        for i in range(4):
            with T.block("M"):
                vi = T.axis.spatial(4, i)
                M[vi + 6] = A[vi + 6]
        for i2 in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i2)
                B[vi] = M[vi + 6] * T.float32(3)


def test_buffer_touched_in_a_range_shrinks_with_a_constant_offset(rng):
    compacted = compact_buffers(middle_of_a_buffer)
    assert [d.value for d in allocated(compacted, "M").shape] == [4]
    assert "M[vi] = A[vi + 6]" in compacted.script()
    a, b = rng.standard_normal(16).astype(np.float32), np.zeros(4, np.float32)
    sched.build(middle_of_a_buffer)(a, b)
    assert_close(b, a[6:10] * 3)


@T.prim_func
def squared_index(A: T.Buffer((16,), "float32"), B: T.Buffer((4,), "float32")):
    with T.block("root"):
        S = T.alloc_buffer((16,), "float32")
        for i in range(4):
            with T.block("S"):
                vi = T.axis.spatial(4, i)
                S[vi * vi] = A[vi]
        for i2 in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i2)
                B[vi] = S[vi * vi]


def test_non_affine_access_keeps_the_whole_dimension():
    assert compact_buffers(squared_index) is squared_index


def test_symbolic_extent_tiles_compact_to_a_constant_size(rng):
    from sched import compute as te

    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[i] + 1.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    (i,) = sch.get_loops(sch.get_block("C"))
    io, _ = sch.split(i, factors=[None, 4])
    sch.compute_at(sch.get_block("B"), io)
    kernel = sched.build(sch.func)
    assert "float B[4];" in kernel.source
    for size in (9, 16):
        a = rng.standard_normal(size).astype(np.float32)
        c = np.zeros_like(a)
        kernel(a, c)
        assert_close(c, a * 2 + 1)


def _conv2d(channels: int, filters: int, size: int):
    data = te.placeholder((1, channels, size, size), name="D")
    weight = te.placeholder((filters, channels, 3, 3), name="W")
    out = te.ops.conv2d_nchw(data, weight, stride=1, padding=1)
    return te.create_prim_func([data, weight, out], name="conv2d")


def test_tile_under_a_fused_loop_is_indexed_without_selects(rng):
    """A register tile of a conv2d accumulated under a fused parallel loop (as the
    autoscheduler's CPU sketch makes it): isl wrote the tile's offset as a select over many
    pieces (2,000 characters of C per access, in the innermost loop: 30-150x slower kernels);
    the offset is now `i - i % extent`, proven equal by isl, and the tile is indexed by the
    inner loops alone."""
    sch = sched.Schedule(_conv2d(4, 8, 28))
    sch.compute_inline(sch.get_block("conv2d_pad"))
    block = sch.get_block("conv2d")
    n, k, p, q, rc, ry, rx = sch.get_loops(block)
    n0, n1, n2 = sch.split(n, [1, 1, 1])
    k0, k1, k2 = sch.split(k, [2, 2, 2])
    p0, p1, p2 = sch.split(p, [7, 2, 2])
    q0, q1, q2 = sch.split(q, [2, 1, 14])
    sch.reorder(n0, k0, p0, q0, n1, k1, p1, q1, rc, ry, rx, n2, k2, p2, q2)
    local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(local, q1)
    sch.decompose_reduction(block, rc)
    sch.parallel(sch.fuse(n0, k0, p0, q0))
    kernel = sched.build(sch.func, target="c")
    indices = re.findall(r"conv2d_local\[([^\]]*)\]", kernel.source)
    assert indices and not [i for i in indices if "?" in i or "%" in i]
    assert "conv2d_local[k_2 * 28 + p_2 * 14 + q_2]" in kernel.source
    data = rng.standard_normal((1, 4, 28, 28)).astype(np.float32)
    weight = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    got = np.zeros((1, 8, 28, 28), np.float32)
    kernel(data, weight, got)
    expected = np.zeros_like(got)
    sched.build(_conv2d(4, 8, 28), target="c")(data, weight, expected)
    assert_close(got, expected)


def _overlapping_tiles(size):
    """A 3-point vertical blur of a 3-point horizontal blur, the first computed in each
    32-row tile of the second: tiles overlap by 2 rows, recomputed in both."""
    A = te.placeholder((size + 2, 16), name="A")
    B = te.compute((size + 2, 14), lambda i, j: A[i, j] + A[i, j + 1] + A[i, j + 2], name="B")
    C = te.compute((size, 14), lambda i, j: B[i, j] + B[i + 1, j] + B[i + 2, j], name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    io, _ = sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 32])
    sch.compute_at(sch.get_block("B"), io)
    return sch


def test_a_producer_recomputed_in_overlapping_tiles_compacts_to_one_tile(rng):
    """Rows on a tile's edge run in two tiles: no offset in B's own iteration variables
    gives the tile's first row, so B kept all its rows, allocated in every tile (a 16 MB
    malloc per tile at 2048x2048). The offset is the tile loop's (as TVM rebases): B gets an
    iteration variable bound to it, and 34 rows."""
    sch = _overlapping_tiles(96)
    func = plan_buffer_allocation(sch.func)
    compacted = compact_buffers(func)
    assert [d.value for d in allocated(compacted, "B").shape] == [34, 14]
    assert "v_i_1_0 = T.axis.spatial(3, i_1_0)" in compacted.script()
    sched.ir.verify.verify(compacted)
    kernel = sched.build(sch.func, target="c")
    assert "float B[476];" in kernel.source
    a = rng.standard_normal((98, 16)).astype(np.float32)
    c = np.zeros((96, 14), np.float32)
    kernel(a, c)
    b = a[:, :-2] + a[:, 1:-1] + a[:, 2:]
    assert_close(c, b[:-2] + b[1:-1] + b[2:])


def test_two_recomputed_stages_of_a_chain_compact_in_one_tile(rng):
    """B and C both recomputed in D's tiles: C reads B and writes C, so the second buffer
    compacted meets a block already given a variable bound to the tile loop (reused; the
    build raised a TypeError there: audit helper-74)."""
    n = 20
    A = te.placeholder((n + 4,), name="A")
    B = te.compute((n + 4,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n + 2,), lambda i: B[i] + B[i + 2], name="C")
    D = te.compute((n,), lambda i: C[i] + C[i + 2], name="D")
    sch = sched.Schedule(te.create_prim_func([A, D]))
    io, _ = sch.split(sch.get_loops(sch.get_block("D"))[0], [None, 5])
    sch.compute_at(sch.get_block("C"), io)
    sch.compute_at(sch.get_block("B"), io)
    kernel = sched.build(sch.func, target="c")
    assert "float B[9];" in kernel.source and "float C[7];" in kernel.source
    a = rng.standard_normal(n + 4).astype(np.float32)
    d = np.zeros(n, np.float32)
    kernel(a, d)
    b = a * 2
    c = b[:-2] + b[2:]
    assert_close(d, c[:-2] + c[2:])


def test_a_shared_tile_fetched_through_a_fused_loop_split_by_3_is_a_tile(rng):
    # the fetch's rows are (f * 8 + t) // 3: isl's is_bounded said the rows' spread over one
    # tile was unbounded (it answers for the rational relaxation), so A_shared kept the
    # symbolic shape (m, 13) and the GPU build was refused (audit helper-112)
    m = te.var("m")
    A = te.placeholder((m, 13), name="A")
    k = te.reduce_axis((0, 13), name="k")
    S = te.compute((m,), lambda i: te.sum(A[i, k], axis=k), name="S")
    sch = sched.Schedule(te.create_prim_func([A, S]))
    block = sch.get_block("S")
    i, k = sch.get_loops(block)
    bi, ti = sch.split(i, [None, 8])
    ko, _ = sch.split(k, [None, 3])
    sch.bind(bi, "blockIdx.x")
    sch.bind(ti, "threadIdx.x")
    shared = sch.cache_read(block, 0, "shared")
    sch.compute_at(shared, ko)
    _, t = sch.split(sch.fuse(*sch.get_loops(shared)[-2:]), [None, 8])
    sch.bind(t, "threadIdx.x")
    kernel = sched.build(sch.func, target="cuda-emu")
    assert re.search(r"__shared__ .*A_shared\[24\]", kernel.source)
    a = rng.standard_normal((37, 13)).astype(np.float32)
    s = np.zeros(37, np.float32)
    kernel(a, s)
    assert_close(s, a.sum(axis=1))

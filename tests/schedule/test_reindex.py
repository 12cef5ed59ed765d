"""reindex (sched/schedule/reindex.py): a copy of a buffer laid out by the iteration variables
of the block that accesses it; numbers unchanged, unsound cases refused."""

import re

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.script import T


def matmul_transposed_b(n=16):
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def check(func, n=16):
    rng = np.random.default_rng(0)
    a, b = (rng.random((n, n), dtype=np.float32) for _ in range(2))
    c = np.zeros((n, n), np.float32)
    sched.build(func, target="c")(a, b, c)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-4, atol=1e-4)


def test_reindex_the_reads_and_the_write_of_a_matmul():
    func = matmul_transposed_b()
    sch = sched.Schedule(func)
    block = sch.get_block("C")
    sch.reindex(block, ("read", 0))            # A (the accumulator C is read 2)
    sch.reindex(block, "B")
    copy_back = sch.reindex(block, ("write", 0))
    script = sch.func.script()
    # B[j, k] is read as B_reindex[i', k'] laid out by (vj, vk); C goes back after the nest
    assert re.search(r"B_reindex\[(\w+), (\w+)\] = B\[\1, \2\]", script)
    assert re.search(r"C\[(\w+), (\w+)\] = C_reindex\[\1, \2\]", script)
    assert "C_reindex[v_i, v_j] = C_reindex[v_i, v_j] + A_reindex[v_i, v_k] * " \
           "B_reindex[v_j, v_k]" in script
    assert copy_back.name == "C_reindex"
    assert sched.parse(script) == sch.func
    assert sch.trace.apply(func).func == sch.func
    check(sch.func)


def test_a_reindexed_read_follows_the_iteration_order():
    @T.prim_func
    def transpose_add(A: T.Buffer((4, 8), "float32"), B: T.Buffer((8, 4), "float32")):
        for i, j in T.grid(8, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vj, vi] + T.float32(1)

    sch = sched.Schedule(transpose_add)
    sch.reindex(sch.get_block("B"), ("read", 0))
    assert "B[vi, vj] = A_reindex[vi, vj] + T.float32(1.0)" in sch.func.script()
    a = np.random.default_rng(1).random((4, 8), dtype=np.float32)
    b = np.zeros((8, 4), np.float32)
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_allclose(b, a.T + 1, rtol=1e-6)


def test_a_guard_that_only_skips_points_outside_the_domain_is_fine():
    sch = sched.Schedule(matmul_transposed_b())
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(i, [None, 5])                   # 4 * 5 > 16: the guard skips no instance
    sch.reindex(sch.get_block("C"), "A")
    check(sch.func)


def test_a_block_running_part_of_its_domain_is_refused():
    @T.prim_func
    def first_half(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] + T.float32(1)

    sch = sched.Schedule(first_half)
    # a copy over the domain would write B[4:8], which the block never writes
    with pytest.raises(ScheduleError, match=r"reindex: block 'B' runs part of its domain"):
        sch.reindex(sch.get_block("B"), ("write", 0))


def test_a_write_reading_old_values_and_a_non_injective_write_are_refused():
    @T.prim_func
    def accumulate(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = B[vi] + A[vi]

    sch = sched.Schedule(accumulate)
    # B's old values are read: a fresh copy would start from garbage
    with pytest.raises(ScheduleError, match=r"reads the values of 'B' that were there before"):
        sch.reindex(sch.get_block("B"), ("write", 0))

    @T.prim_func
    def halves(A: T.Buffer((8,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi // 2] = A[vi]

    sch = sched.Schedule(halves)
    # two instances write B[0]: copied back in another order, the other value could win
    with pytest.raises(ScheduleError, match=r"two instances of the block write one element"):
        sch.reindex(sch.get_block("B"), ("write", 0))


def test_reindex_of_a_write_over_a_symbolic_extent():
    # the injectivity check of a written buffer's indices named the symbolic extent n in its
    # isl text without declaring it a parameter: isl's syntax error crashed the step (found
    # by the fuzzer, through reindex_cache_read of a reduction's accumulator)
    @T.prim_func
    def row_sum(var_A: T.handle, var_B: T.handle):
        n = T.int32()
        A = T.match_buffer(var_A, (n, 4), "float32")
        B = T.match_buffer(var_B, (n,), "float32")
        for i, k in T.grid(n, 4):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, 3 - vk]

    sch = sched.Schedule(row_sum)
    sch.reindex(sch.get_block("B"), ("write", 0))
    assert sched.parse(sch.func.script()) == sch.func
    a = np.arange(24, dtype=np.float32).reshape(6, 4)
    b = np.zeros(6, np.float32)
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_array_equal(b, a.sum(axis=1))
    sch = sched.Schedule(row_sum)
    # a symbolic shape is relaid now: this map, which drops vk, is refused for what it is
    with pytest.raises(ScheduleError, match="sends two elements of 'A_global' to one place"):
        sch.reindex_cache_read(sch.get_block("B"), 0, "global", lambda vi, vk: (vi,))


def test_reindex_of_a_write_whose_variables_are_named_like_output_dims():
    # the injectivity check named its output dims o0, o1...: iteration variables named o0
    # and o1 became those dims in the isl text, the relation was the identity on a few
    # points, and a write of two instances to one element was accepted; copied back in the
    # variables' order (o0 outer) instead of the loops' (o1 outer), the last write changed
    @T.prim_func
    def checkerboard(A: T.Buffer((4, 4), "float32"), B: T.Buffer((2, 1), "float32")):
        for i, j in T.grid(4, 4):
            with T.block("B"):
                o0, o1 = T.axis.remap("SS", [j, i])
                B[(o0 + o1) % 2, 0] = A[o0, o1]

    sch = sched.Schedule(checkerboard)
    with pytest.raises(ScheduleError, match="two instances of the block write one element"):
        sch.reindex(sch.get_block("B"), ("write", 0))


def test_reindex_of_a_nested_block_bound_to_its_outer_block_is_refused():
    # vx = vo: in one instance of block "rows", block "B" writes one row, but the copy back,
    # placed in "rows", copied the whole 7x5 box of (vx, vj) from a fresh buffer each time:
    # NaN everywhere but the last row (found by the fuzzer, through reindex_cache_write)
    @T.prim_func
    def nested_rows(Y: T.Buffer((7, 5), "float32"), X: T.Buffer((7, 5), "float32")):
        for i in range(7):
            with T.block("rows"):
                vo = T.axis.remap("S", [i])
                T.reads(Y[vo, 0:5])
                T.writes(X[vo, 0:5])
                for j in range(5):
                    with T.block("B"):
                        vx = T.axis.spatial(7, vo)
                        vj = T.axis.spatial(5, j)
                        X[vx, vj] = Y[vx, vj] * T.float32(2)

    for step in (lambda s: s.reindex(s.get_block("B"), ("write", 0)),
                 lambda s: s.reindex_cache_write(s.get_block("B"), 0, "shared",
                                                 lambda vx, vj: (6 - vx, vj)),
                 lambda s: s.reindex(s.get_block("B"), ("read", 0))):
        sch = sched.Schedule(nested_rows)
        with pytest.raises(ScheduleError, match="block 'B' depends on 'vo', from outside the "
                           "block 'rows' that holds it"):
            step(sch)
        assert sch.func == nested_rows


def test_indices_read_through_a_buffer_written_in_the_nest_are_refused():
    """B[i] = sum_k A[G[i], k] with G's local copy computed in B's loop: the copy of A,
    outside the nest, read the index copy before it was written (a segfault; audit
    helper-79). Before the index copy is placed there, the reindex is fine."""
    n, m, width = 8, 6, 3
    A = te.placeholder((m, width), "int32", name="A")
    G = te.placeholder((n,), "int32", name="G")
    k = te.reduce_axis((0, width), name="k")
    B = te.compute((n,), lambda i: te.sum(A[G[i], k], axis=k), name="B")
    func = te.create_prim_func([A, G, B])
    sch = sched.Schedule(func)
    b = sch.get_block("B")
    copy = sch.cache_read(b, "G", "local")
    sch.compute_at(copy, sch.get_loops(b)[1])
    with pytest.raises(ScheduleError, match="the indices of 'A' in block 'B' read 'G_local', "
                                            "which block 'G_local' writes in the same loop"):
        sch.reindex(b, "A")
    sch = sched.Schedule(func)
    sch.reindex(sch.get_block("B"), "A")
    rng = np.random.default_rng(0)
    a = rng.integers(-100, 100, (m, width)).astype("int32")
    g = rng.integers(0, m, n).astype("int32")
    out = np.zeros(n, "int32")
    sched.build(sch.func, target="c")(a, g, out)
    np.testing.assert_array_equal(out, a[g].sum(axis=1))


@pytest.mark.parametrize("step", ["reindex", "reindex_cache_write"])
def test_the_copy_of_a_reduction_runs_where_its_reduce_range_is_not_empty(step):
    # at n = 1 the reduce range is empty: C keeps what the caller passed (T.init semantics);
    # a copy back over every row copied uninitialized memory into C (audit helper-111)
    n = te.var("n")
    A = te.placeholder((4, n), "float32", name="A")
    k = te.reduce_axis((0, n - 1), name="k")
    C = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="C")
    func = te.create_prim_func([A, C])
    sch = sched.Schedule(func)
    if step == "reindex":
        sch.reindex(sch.get_block("C"), ("write", 0))
    else:
        sch.reindex_cache_write(sch.get_block("C"), 0, "local", lambda vi, vk: (vi,))
    assert "T.where(n >= 2)" in sch.func.script()
    for size in (1, 2, 5):
        a = np.arange(4 * size, dtype=np.float32).reshape(4, size)
        c = np.full(4, 42.0, np.float32)
        sched.build(sch.func, target="c")(a, c)
        np.testing.assert_array_equal(c, a[:, :size - 1].sum(axis=1) if size > 1 else 42.0)


def test_a_block_that_runs_no_instance_for_some_rows_is_refused():
    @T.prim_func
    def triangle(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8,), "float32")):
        for i, k in T.grid(8, 8):
            with T.block("C"):
                vi, vk = T.axis.remap("SR", [i, k])
                T.where(k < i)
                with T.init():
                    C[vi] = T.float32(0)
                C[vi] = C[vi] + A[vi, vk]

    sch = sched.Schedule(triangle)
    with pytest.raises(ScheduleError, match="runs part of its domain"):
        sch.reindex(sch.get_block("C"), ("write", 0))


def test_a_copy_over_a_range_that_may_be_negative_allocates_nothing_there():
    # the copy of A over the reduce range m - n was allocated with m - n elements a row, a
    # negative size at m < n, where the function runs nothing (audit helper-117)
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), "float32", name="A")
    k = te.reduce_axis((0, m - n), name="k")
    C = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    sch.reindex(sch.get_block("C"), ("read", 0))
    assert "T.max(m - n, 0)" in sch.func.script()
    for rows, columns in ((5, 3), (3, 7)):
        a = np.arange(rows * columns, dtype=np.float32).reshape(rows, columns)
        for run in (sched.build(sch.func, target="c"),
                    lambda *args: sched.interpret(sch.func, *args)):
            c = np.full(rows, 42.0, np.float32)
            run(a, c)
            np.testing.assert_array_equal(c, a[:, :max(columns - rows, 0)].sum(axis=1)
                                          if columns > rows else 42.0)


def _scalar_sum():
    from sched import compute as te

    A = te.placeholder((8,), "float32", name="A")
    k = te.reduce_axis((0, 8), name="k")
    S = te.compute((), lambda: te.sum(A[k], axis=k), name="S")
    return te.create_prim_func([A, te.compute((8,), lambda i: A[i] - S[()], name="C")])


def test_0d_buffers_are_reindexed_and_relaid():
    # a raw isl syntax error and a raw IndexError (audit helper-144)
    import numpy as np

    a = np.random.default_rng(0).random(8, dtype=np.float32)
    for step in (lambda s: s.reindex(s.get_block("S"), ("write", 0)),
                 lambda s: s.reindex_cache_write(s.get_block("S"), 0, "global", lambda k: ()),
                 lambda s: s.transform_layout(s.get_block("S"), "S", lambda: (0,))):
        sch = sched.Schedule(_scalar_sum())
        step(sch)
        c = np.zeros(8, np.float32)
        sched.build(sch.mod, target="c")(a, c)
        np.testing.assert_allclose(c, a - a.sum(), rtol=1e-5, atol=1e-6)
    sch = sched.Schedule(_scalar_sum())
    with pytest.raises(sched.ScheduleError, match=r"the block accesses one element of it, so "
                                                  r"the cache has one: map to no index "
                                                  r"\(lambda k: \(\)\)"):
        sch.reindex_cache_write(sch.get_block("S"), 0, "global", lambda k: (k,))

"""TVM's spellings of schedule arguments, and the steps that would lose something refused."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError


def scale_then_shift():
    A = te.placeholder((32, 16), "float32", name="A")
    B = te.compute((32, 16), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((32, 16), lambda i, j: B[i, j] + 1, name="C")
    return te.create_prim_func([A, C])


def test_buffers_given_by_name_as_in_tvm():
    func = scale_then_shift()
    by_name = sched.Schedule(func)
    by_name.cache_read(by_name.get_block("B"), "A", "shared")
    by_name.set_scope(by_name.get_block("B"), "B", "shared")
    by_name.cache_write(by_name.get_block("C"), "C", "local")
    by_index = sched.Schedule(func)
    by_index.cache_read(by_index.get_block("B"), 0, "shared")
    by_index.set_scope(by_index.get_block("B"), 0, "shared")
    by_index.cache_write(by_index.get_block("C"), 0, "local")
    assert by_name.func == by_index.func
    assert "sch.cache_read(b0, 'A', 'shared')" in str(by_name.trace)
    assert by_name.trace.apply(func).func == by_name.func
    a = np.random.default_rng(0).random((32, 16), dtype=np.float32)
    c = np.zeros((32, 16), np.float32)
    sched.build(by_name.func, target="c")(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def test_unknown_buffer_name_lists_the_blocks_buffers():
    sch = sched.Schedule(scale_then_shift())
    with pytest.raises(ScheduleError, match=r"argument 2, 'read_buffer_index' to cache_read: "
                                            r"block 'C' has no buffer 'A' in its reads "
                                            r"\(0: B\)"):
        sch.cache_read(sch.get_block("C"), "A", "shared")


def test_split_of_an_annotated_loop_is_refused():
    sch = sched.Schedule(scale_then_shift())
    i, j = sch.get_loops(sch.get_block("B"))
    sch.annotate(i, "pragma_auto_unroll_max_step", 16)
    # the annotation would be silently lost: which new loop should carry it?
    with pytest.raises(ScheduleError, match=r"split: loop 'i' carries the annotations "
                                            r"'pragma_auto_unroll_max_step', which split would "
                                            r"drop"):
        sch.split(i, [None, 4])
    with pytest.raises(ScheduleError, match=r"fuse: loop 'i' carries the annotations"):
        sch.fuse(i, j)


def test_fuse_of_a_parallel_loop_is_refused():
    sch = sched.Schedule(scale_then_shift())
    i, j = sch.get_loops(sch.get_block("B"))
    sch.parallel(i)
    # fuse makes a serial loop: the parallel kind would be dropped
    with pytest.raises(ScheduleError, match=r"fuse: loop 'i' is parallel; fuse makes serial "
                                            r"loops and would drop that"):
        sch.fuse(i, j)


def test_unroll_of_a_thread_bound_loop_is_refused_with_the_reason():
    sch = sched.Schedule(scale_then_shift())
    i, j = sch.get_loops(sch.get_block("B"))
    sch.bind(j, "threadIdx.x")
    with pytest.raises(ScheduleError, match=r"unroll: loop 'j' is already thread_binding "
                                            r"\(threadIdx.x\): its iterations run on "
                                            r"different threads"):
        sch.unroll(j)


def test_split_of_a_loop_starting_above_zero_keeps_its_start():
    from sched.script import T

    @T.prim_func
    def shifted(A: T.Buffer((20,), "float32"), B: T.Buffer((20,), "float32")):
        for i in T.serial(4, 20):
            with T.block("B"):
                vi = T.axis.spatial(20, i)
                B[vi] = A[vi] + T.float32(1)

    sch = sched.Schedule(shifted)
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, 5])
    assert "vi = T.axis.spatial(20, i_0 * 5 + i_1 + 4)" in sch.func.script()
    a = np.arange(20, dtype=np.float32)
    b = np.zeros(20, np.float32)
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_allclose(b[4:], a[4:] + 1)
    assert not b[:4].any()


def test_split_with_disable_predication():
    func = scale_then_shift()
    sch = sched.Schedule(func)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, 8], disable_predication=True)      # 8 divides 32: no guard needed
    assert "disable_predication=True" in str(sch.trace)
    assert sch.trace.apply(func).func == sch.func
    # 5 does not divide 16: without the guard j would run past the end
    with pytest.raises(ScheduleError, match=r"split: disable_predication=True: the factors "
                                            r"\[None, 5\] do not divide the extent of loop 'j'"):
        sch.split(j, [None, 5], disable_predication=True)


def test_get_loops_stops_at_the_enclosing_block():
    from sched.script import T

    @T.prim_func
    def nested(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
        for o in range(4):
            with T.block("outer"):
                vo = T.axis.spatial(4, o)
                for i in range(4):
                    with T.block("inner"):
                        vi = T.axis.spatial(16, vo * 4 + i)
                        B[vi] = A[vi] * T.float32(2)

    sch = sched.Schedule(nested)
    assert [lp.name for lp in sch.get_loops(sch.get_block("outer"))] == ["o"]
    assert [lp.name for lp in sch.get_loops(sch.get_block("inner"))] == ["i"]


def two_consumers():
    A = te.placeholder((16, 8), "float32", name="A")
    B = te.compute((16, 8), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((16, 8), lambda i, j: B[i, j] + 1, name="C")
    E = te.compute((16, 8), lambda i, j: B[i, j] - 1, name="E")
    return te.create_prim_func([A, C, E])


def body_blocks(sch, loop):
    from sched.ir.functor import collect
    from sched.ir.nodes import BlockRealize, SeqStmt
    from sched.schedule.state import find_loop

    body = find_loop(sch.func, loop.name, "test").body
    children = body.stmts if isinstance(body, SeqStmt) else (body,)
    return [[r.block.name for r in collect(child, BlockRealize)][0] for child in children]


def check_numbers(func):
    a = np.random.default_rng(5).random((16, 8), dtype=np.float32)
    c, e = np.zeros((16, 8), np.float32), np.zeros((16, 8), np.float32)
    sched.build(func, target="c")(a, c, e)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(e, a * 2 - 1, rtol=1e-6)


@pytest.mark.parametrize("index, order", [(None, ["B", "E", "C"]), (-2, ["B", "E", "C"]),
                                          (1, ["B", "E", "C"]), (-1, ["B", "C", "E"]),
                                          (2, ["B", "C", "E"])])
def test_reverse_compute_at_index_picks_the_position_in_the_loop_body(index, order):
    func = two_consumers()
    sch = sched.Schedule(func)
    (i, _) = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(sch.get_block("C"), i)
    # E may go anywhere after its producer B: position 1 or 2 of [B, C]
    sch.reverse_compute_at(sch.get_block("E"), i, index=index)
    assert body_blocks(sch, i) == order
    assert sch.trace.apply(func).func == sch.func
    check_numbers(sch.func)


def test_reverse_compute_at_index_before_the_producer_is_refused():
    sch = sched.Schedule(two_consumers())
    (i, _) = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(sch.get_block("C"), i)
    with pytest.raises(ScheduleError, match=r"argument 'index' to reverse_compute_at: expected "
                                            r"-1 .*a position in \[1, 2\] of the 2 statements "
                                            r"in the body of loop 'i'"):
        sch.reverse_compute_at(sch.get_block("E"), i, index=0)


def test_compute_at_index_between_the_producers_and_the_consumers():
    func = two_consumers()
    sch = sched.Schedule(func)
    (i, _) = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i, index=-2)
    assert body_blocks(sch, i) == ["B", "C"]
    check_numbers(sch.func)
    # B's consumer C is at 0 of C's loop body: B can only go at 0
    sch2 = sched.Schedule(func)
    (i2, _) = sch2.get_loops(sch2.get_block("C"))
    with pytest.raises(ScheduleError, match=r"argument 'index' to compute_at: expected -1 .*a "
                                            r"position in \[0, 0\] of the 1 statements"):
        sch2.compute_at(sch2.get_block("B"), i2, index=1)


def test_cache_read_shared_by_consumer_blocks():
    func = two_consumers()             # C and E both read B
    sch = sched.Schedule(func)
    c, e = sch.get_block("C"), sch.get_block("E")
    copy = sch.cache_read(c, "B", "local", consumer_blocks=[c, e])
    script = sch.func.script()
    assert script.count("T.reads(B_local[v_i, v_j])") == 2     # both consumers read the cache
    assert script.count("T.reads(B[") == 1                      # the copy alone reads B
    assert [b.name for b in sch.get_producers(e)] == [copy.name]
    assert "consumer_blocks=[b0, b1]" in str(sch.trace)
    assert sch.trace.apply(func).func == sch.func
    check_numbers(sch.func)


def test_cache_read_for_consumers_separated_by_a_write_is_refused():
    from sched.script import T

    @T.prim_func
    def rewrite_between(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32"),
                        D: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = A[vi] + T.float32(1)
        for i in range(8):
            with T.block("W"):
                vi = T.axis.spatial(8, i)
                A[vi] = T.float32(0)
        for i in range(8):
            with T.block("D"):
                vi = T.axis.spatial(8, i)
                D[vi] = A[vi] * T.float32(2)

    sch = sched.Schedule(rewrite_between)
    c, d = sch.get_block("C"), sch.get_block("D")
    # D must see W's zeros: a cache filled before C would hold the old values
    with pytest.raises(ScheduleError, match=r"cache_read: block\(s\) W write 'A' between the "
                                            r"consumers C, D"):
        sch.cache_read(c, "A", "shared", consumer_blocks=[c, d])


def test_cache_write_read_directly_by_consumer_blocks():
    # TVM's option (apache/tvm#13510): the listed consumers read the cache, not the buffer
    # the write-back fills; the write-back then moves under the block's row loop
    func = two_consumers()
    sch = sched.Schedule(func)
    b, c = sch.get_block("B"), sch.get_block("C")
    write_back = sch.cache_write(b, 0, "local", consumer_blocks=[c])
    script = sch.func.script()
    assert "T.reads(B_local[v_i, v_j])" in script and script.count("T.reads(B[") == 1
    assert "consumer_blocks=[b1]" in str(sch.trace)
    assert sch.trace.apply(func).func == sch.func
    check_numbers(sch.func)
    (b_rows, _) = sch.get_loops(b)
    sch.reverse_compute_at(write_back, b_rows)
    check_numbers(sch.func)
    (e_rows, _) = sch.get_loops(sch.get_block("E"))
    with pytest.raises(ScheduleError, match="compute_at"):
        sch.compute_at(b, e_rows)        # after C, which reads B_local: refused


def test_cache_write_for_a_consumer_reading_what_the_block_did_not_write_is_refused():
    from sched.script import T

    @T.prim_func
    def half_written(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"),
                     C: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("early"):
                vi = T.axis.spatial(8, i)
                D[vi] = B[vi] * T.float32(3)
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                B[vi] = A[vi] + T.float32(1)
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = B[vi] * T.float32(2)

    for consumer in ("C", "early"):
        # C reads B[4:8], which B never writes; "early" reads B before B writes it: both
        # read the values B held before, which a cache of B's writes does not hold
        sch = sched.Schedule(half_written)
        before = sch.func
        with pytest.raises(ScheduleError, match=rf"cache_write: block\(s\) {consumer} may "
                           r"read elements of 'B' that block 'B' has not written before"):
            sch.cache_write(sch.get_block("B"), 0, "global",
                            consumer_blocks=[sch.get_block(consumer)])
        assert sch.func is before


def test_cache_write_for_a_consumer_is_judged_apart_from_other_blocks_widened_reads():
    """A later block reading `B[(i + 1) % n]` (widened under a symbolic n) made cache_write
    refuse consumer C, which reads B[i] after B wrote it (audit helper-178); a consumer that
    reads B before B writes it is still refused beside the widened read."""
    n = te.var("n")
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[i] + 1.0, name="C")
    E = te.compute((n,), lambda i: B[(i + 1) % n] - 1.0, name="E")
    sch = sched.Schedule(te.create_prim_func([A, B, C, E]))
    sch.cache_write(sch.get_block("B"), 0, "local", consumer_blocks=[sch.get_block("C")])
    assert "B_local[v_i]" in sch.func.script()
    a = np.random.default_rng(0).standard_normal(7).astype(np.float32)
    b, c, e = (np.zeros(7, np.float32) for _ in range(3))
    sched.build(sch.func, target="c")(a, b, c, e)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(e, np.roll(a * 2, -1) - 1, rtol=1e-6)

    from sched.script import T

    @T.prim_func
    def read_early(a: T.handle, b: T.handle, d: T.handle, e: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        D = T.match_buffer(d, (n,), "float32")
        E = T.match_buffer(e, (n,), "float32")
        for i in range(n):
            with T.block("early"):
                vi = T.axis.spatial(n, i)
                D[vi] = B[vi] * T.float32(3)
        for i in range(n):
            with T.block("B"):
                vi = T.axis.spatial(n, i)
                B[vi] = A[vi] + T.float32(1)
        for i in range(n):
            with T.block("E"):
                vi = T.axis.spatial(n, i)
                E[vi] = B[(vi + 1) % n]

    sch = sched.Schedule(read_early)
    with pytest.raises(ScheduleError, match=r"cache_write: block\(s\) early may read elements "
                                            r"of 'B' that block 'B' has not written before"):
        sch.cache_write(sch.get_block("B"), 0, "global",
                        consumer_blocks=[sch.get_block("early")])


def _conditional_store():
    from sched.script import T

    @T.prim_func
    def conditional_store(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"),
                          C: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                if A[vi] > T.float32(0):
                    B[vi] = A[vi] * T.float32(2)
        for i in range(16):
            with T.block("C"):
                vi = T.axis.spatial(16, i)
                C[vi] = B[vi] + T.float32(1)
    return conditional_store


def _scan():
    from sched.script import T

    @T.prim_func
    def scan(A: T.Buffer((16,), "float32"), B: T.Buffer((17,), "float32"),
             C: T.Buffer((16,), "float32")):
        for i in range(16):
            with T.block("B"):
                vi = T.axis.spatial(16, i)
                B[vi + 1] = B[vi] + A[vi]
        for i in range(16):
            with T.block("C"):
                vi = T.axis.spatial(16, i)
                C[vi] = B[vi] * T.float32(3)
    return scan


def test_cache_write_consumers_read_the_old_values_the_fill_copied_in():
    # audit, helper-90: a store under a data-dependent condition, or a scan reading its own
    # output, makes cache_write copy the buffer's old values into the cache first; the listed
    # consumers, reading elements the block did not write, read those: refused before
    rng = np.random.default_rng(7)
    for make, expect in ((_conditional_store, lambda a, b: np.where(a > 0, 2 * a, b) + 1),
                         (_scan, lambda a, b: 3 * np.concatenate(
                             [b[:1], b[0] + np.cumsum(a, dtype=np.float32)])[:16])):
        func = make()
        sch = sched.Schedule(func)
        sch.cache_write(sch.get_block("B"), 0, "local", consumer_blocks=[sch.get_block("C")])
        script = sch.func.script()
        assert "B_local_fill" in script and "T.reads(B_local[" in script
        assert sch.trace.apply(func).func == sch.func
        a = rng.uniform(-1, 1, 16).astype(np.float32)
        b = rng.uniform(-1, 1, 17 if make is _scan else 16).astype(np.float32)
        c = np.full(16, np.nan, np.float32)
        expected = expect(a, b.copy())
        sched.build(sch.func, target="c")(a, b, c)
        np.testing.assert_allclose(c, expected, rtol=1e-5, err_msg=make.__name__)


def test_tvm_schedule_keywords_are_accepted():
    func = scale_then_shift()
    sch = sched.Schedule(func, debug_mask="all", error_render_level="fast", enable_check=True)
    assert not sch.render_errors
    assert sched.Schedule(func, error_render_level="detail").render_errors
    with pytest.raises(ValueError, match="error_render_level must be"):
        sched.Schedule(func, error_render_level="verbose")


def test_split_factors_as_tvm_users_write_them():
    from sched.script import T

    func = scale_then_shift()
    plain = sched.Schedule(func)
    plain.split(plain.get_loops(plain.get_block("B"))[1], [None, 4])
    for factor in (T.int64(4), T.int32(4), np.int64(4)):
        sch = sched.Schedule(func)
        sch.split(sch.get_loops(sch.get_block("B"))[1], [None, factor])
        assert sch.func == plain.func
        assert str(sch.trace) == str(plain.trace)       # recorded as the int


def test_a_relax_style_int64_loop_and_an_int32_loop_share_a_thread_axis():
    # found by an audit: compute_at makes int32 loops beside a Relax function's int64 ones;
    # binding both splits by 32 to threadIdx.x was refused ("two extents: 32 vs
    # T.int64(32)") and so was the build
    func = sched.parse('''
@T.prim_func
def f(A: T.Buffer((T.int64(8), T.int64(64)), "float32"),
      O: T.Buffer((T.int64(8), T.int64(64)), "float32")):
    ss = T.alloc_buffer((T.int64(8),))
    for i, k in T.grid(T.int64(8), T.int64(64)):
        with T.block("ss"):
            v_i, v_k = T.axis.remap("SR", [i, k])
            with T.init():
                ss[v_i] = T.float32(0)
            ss[v_i] = ss[v_i] + A[v_i, v_k]
    for i, j in T.grid(T.int64(8), T.int64(64)):
        with T.block("O"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            O[v_i, v_j] = A[v_i, v_j] - ss[v_i]
''')
    sch = sched.Schedule(func)
    i, j = sch.get_loops(sch.get_block("O"))
    sch.compute_at(sch.get_block("ss"), i)
    sch.set_scope(sch.get_block("ss"), 0, "shared")
    sch.bind(i, "blockIdx.x")
    sch.bind(sch.split(j, [None, 32])[1], "threadIdx.x")
    sch.bind(sch.split(sch.get_loops(sch.get_block("ss"))[-1], [None, 32])[1], "threadIdx.x")
    a = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    for target in ("c", "cuda-emu"):
        out = np.zeros((8, 64), np.float32)
        sched.build(sch.func, target=target)(a, out)
        np.testing.assert_allclose(out, a - a.sum(1, keepdims=True), rtol=1e-5, atol=1e-5,
                                   err_msg=target)


def test_tvm_seed_remove_rv_and_func_working_on():
    func = scale_then_shift()
    runs = []
    for _ in range(2):
        sch = sched.Schedule(func)
        sch.seed(7)
        loop = sch.get_loops(sch.get_block("B"))[0]
        runs.append([int(f) for f in sch.sample_perfect_tile(loop, n=2)])
        sch.remove_rv(loop)
        assert sch.func_working_on == "main"
    assert runs[0] == runs[1]

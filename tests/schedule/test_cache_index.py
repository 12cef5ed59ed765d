"""cache_index (sched/schedule/cache_index.py): a block's index arithmetic precomputed into
buffers by new blocks before its nest (TVM's choice of expressions and cse_thresh); numbers on
the C target and cuda-emu, printed IR, round trips, refusals."""

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.schedule.trace import Trace
from sched.script import T


@T.prim_func
def resize(A: T.Buffer((1, 3, 40, 40), "float32"), B: T.Buffer((1, 3, 80, 80), "float32")):
    # TVM's docstring example
    for i0, i1, i2, i3 in T.grid(1, 3, 80, 80):
        with T.block("A"):
            n, c, vi, vj = T.axis.remap("SSSS", [i0, i1, i2, i3])
            B[n, c, vi, vj] = A[n, c, vi // 4 + vj // 4, vj // 2]


@T.prim_func
def repeated(A: T.Buffer((64,), "float32"), B: T.Buffer((16, 8), "float32")):
    # i * 4 + j // 2 twice, (j // 2) three times in all, i * 4 + 1 once
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi * 4 + vj // 2] * A[vi * 4 + vj // 2] + A[vi * 3 + 1] + \
                T.Cast("float32", vj // 2)


def check_replays(func, sch):
    assert sched.parse(sch.func.script()) == sch.func
    assert sch.trace.apply(func).func == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func


def resize_reference(a):
    vi, vj = np.meshgrid(np.arange(80), np.arange(80), indexing="ij")
    return a[:, :, vi // 4 + vj // 4, vj // 2]


def test_tvm_example_caches_both_index_expressions():
    sch = sched.Schedule(resize)
    blocks = sch.cache_index(sch.get_block("A"), "global", 1)
    assert [b.name for b in blocks] == ["index_0", "index_1"]
    script = sch.func.script()
    assert 'index_var_0 = T.alloc_buffer((80, 80), "int32")' in script
    assert "index_var_0[v0, v1] = v0 // 4 + v1 // 4" in script
    assert "index_var_1[v0_1] = v0_1 // 2" in script
    assert "B[n, c, vi, vj] = A[n, c, index_var_0[vi, vj], index_var_1[vj]]" in script
    assert str(sch.trace).splitlines()[-1] == "b1, b2 = sch.cache_index(b0, 'global', 1)"
    check_replays(resize, sch)
    a = np.random.default_rng(0).random((1, 3, 40, 40), dtype=np.float32)
    b = np.zeros((1, 3, 80, 80), np.float32)
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_array_equal(b, resize_reference(a))


@pytest.mark.parametrize("threshold, cached", [
    # every maximal expression, the most complex first (a float cast of an index too)
    (0, ["v0 * 4 + v1 // 2", "v0_1 * 3 + 1", 'T.Cast("float32", v0_2 // 2)']),
    # vi * 3 + 1 and the cast, seen once, hand their count to their parts, still too rare
    (2, ["v0 * 4 + v1 // 2"]),
    # vi * 4 + vj // 2 (twice) hands 2 to vj // 2, which the cast's 1 brings to 3
    (3, ["v0 // 2"]),
    (4, []),
])
def test_cse_thresh_picks_what_occurs_often_enough(threshold, cached):
    sch = sched.Schedule(repeated)
    blocks = sch.cache_index("B", "global", threshold)
    assert len(blocks) == len(cached)
    script = sch.func.script()
    for k, stored in enumerate(cached):
        assert f"] = {stored}\n" in script.split(f'T.block("index_{k}")')[1]
    if not cached:
        assert sch.func is repeated
    check_replays(repeated, sch)
    a = np.random.default_rng(1).random(64, dtype=np.float32)
    b = np.zeros((16, 8), np.float32)
    sched.build(sch.func, target="c")(a, b)
    i, j = np.meshgrid(np.arange(16), np.arange(8), indexing="ij")
    np.testing.assert_allclose(b, a[i * 4 + j // 2] ** 2 + a[i * 3 + 1] + (j // 2), rtol=1e-6)


# the block's indices are loads now: later steps judge it on a conservative analysis, and say so
@pytest.mark.filterwarnings("ignore::sched.errors.ConservativeAnalysisWarning")
def test_gpu_bound_block_reads_its_index_caches_on_cuda_emu():
    sch = sched.Schedule(resize)
    blocks = sch.cache_index("A", "global")
    for block in blocks:
        loops = sch.get_loops(block)
        sch.bind(loops[0], "blockIdx.x")
        if len(loops) > 1:
            sch.bind(loops[1], "threadIdx.x")
    _, c, i, j = sch.get_loops(sch.get_block("A"))
    sch.bind(sch.fuse(c, i), "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    check_replays(resize, sch)
    a = np.random.default_rng(2).random((1, 3, 40, 40), dtype=np.float32)
    b = np.zeros((1, 3, 80, 80), np.float32)
    sched.build(sch.func, target="cuda-emu")(a, b)
    np.testing.assert_array_equal(b, resize_reference(a))


def test_a_division_by_a_variable_is_not_cached():
    # 64 // (vi + 1) would be computed where the block never computes it: not eligible
    @T.prim_func
    def by_variable(A: T.Buffer((65,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[64 // (vi + 1) + vi * 0]
    sch = sched.Schedule(by_variable)
    blocks = sch.cache_index("B", "global")
    assert [b.name for b in blocks] == ["index_0", "index_1"]
    assert "index_var_0[v0] = v0 + 1" in sch.func.script()
    assert "A[64 // index_var_0[vi] + index_var_1[vi]]" in sch.func.script()


def test_a_reduction_caches_from_its_init_and_update():
    @T.prim_func
    def matvec(A: T.Buffer((8, 32), "float32"), x: T.Buffer((32,), "float32"),
               y: T.Buffer((8,), "float32")):
        for i, k in T.grid(8, 16):
            with T.block("y"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    y[vi] = T.float32(0.0)
                y[vi] = y[vi] + A[vi, vk * 2 + 1] * x[vk * 2 + 1]
    sch = sched.Schedule(matvec)
    assert [b.name for b in sch.cache_index("y", "global")] == ["index_0"]
    assert "index_var_0[v0] = v0 * 2 + 1" in sch.func.script()
    check_replays(matvec, sch)
    a = np.random.default_rng(3).random((8, 32), dtype=np.float32)
    x = np.random.default_rng(4).random(32, dtype=np.float32)
    y = np.zeros(8, np.float32)
    sched.build(sch.func, target="c")(a, x, y)
    np.testing.assert_allclose(y, a[:, 1::2] @ x[1::2], rtol=1e-5)


def test_a_negative_threshold_is_refused():
    with pytest.raises(ScheduleError, match="argument 3, 'cse_thresh' to cache_index: "
                       "expected a non-negative integer, got -1"):
        sched.Schedule(resize).cache_index("A", "global", -1)


def test_an_unknown_scope_is_refused():
    with pytest.raises(ScheduleError, match="unknown storage scope 'texture'"):
        sched.Schedule(resize).cache_index("A", "texture")


def test_an_opaque_block_is_refused():
    # its call may read anything: the body is not seen whole
    @T.prim_func
    def opaque(A: T.Buffer((16,), "float32")):
        for i in range(8):
            with T.block("E"):
                vi = T.axis.spatial(8, i)
                T.reads(A[vi * 2])
                T.writes(A[vi * 2])
                T.evaluate(T.call_extern("int32", "f", T.address_of(A[vi * 2])))
    with pytest.raises(ScheduleError, match="block 'E' makes an opaque call"):
        sched.Schedule(opaque).cache_index("E", "global")


@T.prim_func
def half_value(A: T.Buffer((64,), "float16"), B: T.Buffer((64,), "float16")):
    for i in range(64):
        with T.block("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = A[vi] * (T.Cast("float16", vi) * T.float16(0.1) + T.float16(1000.0)) \
                - T.float16(1000.0) * A[vi]


@pytest.mark.parametrize("cse_thresh", [0, 2])
def test_float16_arithmetic_is_not_cached_where_a_store_would_round_it(cse_thresh):
    """16-bit floats compute in float32 and round where stored or cast: a cache of the
    subexpression's type would have rounded it (audit helper-43: 0.0999, 0.1999... became 0,
    0...); its conversion Cast('float16', vi) rounds anyway and may be cached."""
    sch = sched.Schedule(half_value)
    sch.cache_index("B", "global", cse_thresh)
    assert "+ T.float16(1000.0)" in sch.get(sch.get_block("B")).body.script()
    a = np.ones(64, np.float16)
    want, got = np.full(64, np.nan, np.float16), np.full(64, np.nan, np.float16)
    sched.build(half_value, target="c")(a, want)
    sched.build(sch.func, target="c")(a, got)
    np.testing.assert_array_equal(got, want)


@T.prim_func
def _index_past_int32_on_the_way(A: T.Buffer((8,), "int32"), C: T.Buffer((4,), "int32")):
    for i in range(4):
        with T.block("C"):
            vi = T.axis.spatial(4, i)
            C[vi] = A[vi * 1073741824 // 1073741824 + 2]


def test_a_cached_index_keeps_the_exact_value_of_its_arithmetic():
    # vi * 2**30 // 2**30 + 2 is vi + 2 as index arithmetic; stored into the int32 index
    # buffer it wrapped (C read A[0], A[1] at vi = 2, 3: audit helper-122), so it is stored
    # computed in int64
    sch = sched.Schedule(_index_past_int32_on_the_way)
    sch.cache_index(sch.get_block("C"), "global")
    assert ('index_var_0[v0] = T.Cast("int32", T.Cast("int64", v0) * T.int64(1073741824) '
            '// T.int64(1073741824) + T.int64(2))') in sch.mod.script()
    a = np.arange(8, dtype=np.int32) * 10
    c = np.zeros(4, np.int32)
    sched.build(sch.func, target="c")(a, c)
    np.testing.assert_array_equal(c, a[2:6])


def test_an_index_whose_value_leaves_int32_is_not_cached():
    # vi * 2**30 + vj * 2 is past int32 at vi = 2 (an int64 buffer's index, computed
    # exactly): an int32 index buffer could not hold it, so it is not cached
    f = sched.parse('''
@T.prim_func
def f(a: T.handle, C: T.Buffer((4, 4), "float32")):
    n = T.int64()
    A = T.match_buffer(a, (n,), "float32")
    for i, j in T.grid(4, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi * 1073741824 + vj * 2]
''')
    sch = sched.Schedule(f)
    sch.cache_index(sch.get_block("C"), "global")
    assert "index_var" not in sch.mod.script()


@T.prim_func
def _stored_value_past_int32(B: T.Buffer((4,), "int32")):
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            B[vi] = vi * 1073741824 // 1073741824


@T.prim_func
def _one_expression_as_data_and_index(A: T.Buffer((8,), "int32"), B: T.Buffer((4,), "int32")):
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            B[vi] = vi * 1073741824 // 1073741824 + A[vi * 1073741824 // 1073741824 + 4]


def test_a_cached_stored_value_keeps_wrapping_and_an_index_its_exact_value():
    # a value's int32 arithmetic wraps (0, 1, -2, -1): cached exactly it gave 0, 1, 2, 3
    # (audit helper-124); beside an index of the same arithmetic (A[vi + 4], exact), the
    # value keeps wrapping and the index its exact value
    sch = sched.Schedule(_stored_value_past_int32)
    sch.cache_index(sch.get_block("B"), "global")
    b = np.zeros(4, np.int32)
    sched.build(sch.func, target="c")(b)
    np.testing.assert_array_equal(b, [0, 1, -2, -1])
    sch = sched.Schedule(_one_expression_as_data_and_index)
    sch.cache_index(sch.get_block("B"), "global")
    a, b = np.arange(8, dtype=np.int32) * 10, np.zeros(4, np.int32)
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_array_equal(b, [0, 1, -2, -1] + a[4:])


@T.prim_func
def _part_of_an_index_past_int32(A: T.Buffer((16,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            B[vi] = A[vi * 1048576 * 4096 // 1073741824] + A[vi * 1048576 // 1048576]


def test_a_part_of_an_index_is_cached_only_where_the_rest_cannot_wrap():
    # with cse_thresh=2, vi * 1048576 (twice) was cached: the rest of the first index, then
    # arithmetic on a load, wrapped (A[vi] for A[4 * vi]: audit helper-128)
    sch = sched.Schedule(_part_of_an_index_past_int32)
    sch.cache_index(sch.get_block("B"), "global", 2)
    a, b = np.arange(16, dtype=np.float32) * 10, np.zeros(4, np.float32)
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_array_equal(b, a[np.arange(4) * 4] + a[np.arange(4)])

"""transform_block_layout (sched/schedule/block_layout.py): new iteration variables as a
function of the old ones, new loops over them, the order checked like any reorder."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.ir import BlockRealize, collect
from sched.schedule.trace import Trace
from sched.script import T


@T.prim_func
def reversed_store(A: T.Buffer((16,), "float32"), E: T.Buffer((16,), "float32")):
    D = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("D"):
            vi = T.axis.spatial(16, i)
            D[15 - vi] = A[vi] + T.float32(1)
    for i in range(16):
        with T.block("E"):
            vi = T.axis.spatial(16, i)
            E[vi] = D[vi] * T.float32(3)


def test_a_producer_storing_at_an_affine_index_then_computed_at():
    sch = sched.Schedule(reversed_store)
    (i,) = sch.get_loops(sch.get_block("E"))
    io, ii = sch.split(i, [None, 4])
    # D stores at 15 - vi; after the transform it stores at its variable
    sch.transform_block_layout(sch.get_block("D"), lambda vi: (15 - vi,))
    assert "D[v0] = A[15 - v0] + T.float32(1.0)" in sch.func.script()
    sch.compute_at(sch.get_block("D"), io)
    assert sched.parse(sch.func.script()) == sch.func
    assert sch.trace.apply(reversed_store).func == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(reversed_store).func == sch.func
    a = np.random.default_rng(0).random(16, dtype=np.float32)
    e = np.zeros(16, np.float32)
    sched.build(sch.func, target="c")(a, e)
    np.testing.assert_allclose(e, (a[::-1] + 1) * 3, rtol=1e-6)


@T.prim_func
def add_one(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    for i, j in T.grid(4, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)


def test_an_interchange_of_an_elementwise_block():
    sch = sched.Schedule(add_one)
    sch.transform_block_layout(sch.get_block("B"), lambda i, j: (j, i))
    script = sch.func.script()
    assert "for ax0, ax1 in T.grid(8, 4):" in script
    assert "B[v1, v0] = A[v1, v0] + T.float32(1.0)" in script
    a = np.random.default_rng(1).random((4, 8), dtype=np.float32)
    b = np.zeros((4, 8), np.float32)
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_allclose(b, a + 1, rtol=1e-6)


@T.prim_func
def running_sum(A: T.Buffer((8,), "float32")):
    for i in range(7):
        with T.block("S"):
            vi = T.axis.spatial((1, 8), i + 1)
            A[vi] = A[vi - 1] + A[vi]


def test_reversing_a_block_that_carries_a_dependence_is_refused():
    sch = sched.Schedule(running_sum)
    # each instance reads what the one before wrote: reversed, it would read old values
    with pytest.raises(ScheduleError, match=r"(?s)transform_block_layout: the new order runs S "
                                            r"before S.*flow dependence on .A.: S\[vi=2\] "
                                            r"reads A\[1\] written by S\[vi=1\]"):
        sch.transform_block_layout(sch.get_block("S"), lambda vi: (8 - vi,))
    assert sch.func == running_sum


def test_maps_that_are_not_injective_or_not_onto_a_box_are_refused():
    sch = sched.Schedule(add_one)
    with pytest.raises(ScheduleError, match=r"sends two instances of block 'B' to one"):
        sch.transform_block_layout(sch.get_block("B"), lambda i, j: (i + j,))
    with pytest.raises(ScheduleError, match=r"is .*not a box"):
        sch.transform_block_layout(sch.get_block("B"), lambda i, j: (i, i + j))


@T.prim_func
def updated_twice(X: T.Buffer((7,), "float32"), Y: T.Buffer((7,), "float32")):
    for t in range(14):
        with T.block("B"):
            vx = T.axis.spatial(7, t % 7)
            Y[vx] = Y[vx] * T.float32(2) + X[vx]


def test_a_block_whose_loops_run_an_instance_twice_is_refused():
    # t and t + 7 bind one instance: new loops over the instances would run each once
    sch = sched.Schedule(updated_twice)
    with pytest.raises(ScheduleError, match=r"the loops of block 'B' run some of its "
                                            r"instances more than once"):
        sch.transform_block_layout(sch.get_block("B"), lambda vx: (vx + 2,))
    assert sch.func == updated_twice
    x, y = np.arange(7, dtype=np.float32), np.ones(7, np.float32)
    sched.build(sch.func, target="c")(x, y)
    np.testing.assert_array_equal(y, (1 * 2 + x) * 2 + x)


def test_a_block_holding_a_nested_block_and_loops():
    # the rewrite of the block's indices and regions read every affine index through isl
    # over the new variables alone: the loops and nested block variables inside the block
    # were undeclared names in the isl text, and the step crashed (found by the fuzzer)
    @T.prim_func
    def nested(A: T.Buffer((6, 2), "float32"), B: T.Buffer((6, 2), "float32")):
        for t in range(6):
            with T.block("outer"):
                vo = T.axis.spatial(6, t)
                T.reads(A[vo, 0:2])
                T.writes(B[vo, 0:2])
                for y in range(2):
                    with T.block("inner"):
                        vx = T.axis.spatial(6, vo)
                        vy = T.axis.spatial(2, y)
                        T.reads(A[vx, vy])
                        T.writes(B[vx, vy])
                        B[vx, vy] = A[vx, 1 - vy] * T.float32(2)

    sch = sched.Schedule(nested)
    sch.transform_block_layout(sch.get_block("outer"), lambda vo: (5 - vo,))
    assert sched.parse(sch.func.script()) == sch.func
    a = np.arange(12, dtype=np.float32).reshape(6, 2)
    b = np.zeros((6, 2), np.float32)
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_array_equal(b, a[:, ::-1] * 2)


def test_the_identity_map_changes_nothing_even_of_a_reduction_over_a_symbolic_extent():
    """TVM's normalize_prim_func applies transform_block_layout to every block, the identity
    where a block is normal already (audit helper-42, dlight: refused for a reduction and for
    a symbolic extent)."""
    n = te.var("n")
    A = te.placeholder((n, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    func = te.create_prim_func([A, te.compute((n,), lambda i: te.sum(A[i, k], axis=k),
                                              name="S")])
    sch = sched.Schedule(func)
    sch.transform_block_layout(sch.get_block("S"), lambda i, k: (i, k))
    assert sch.func == func and "transform_block_layout" in str(sch.trace)
    sch.transform_block_layout(sch.get_block("S"), lambda i, k: (k, i))   # over symbolic n
    assert "for ax0, ax1 in T.grid(8, n):" in sch.func.script()
    a = np.random.default_rng(0).random((5, 8), dtype=np.float32)
    s = np.zeros(5, np.float32)
    sched.build(sch.func, target="c")(a, s)
    np.testing.assert_allclose(s, a.sum(axis=1), rtol=1e-5)


@T.prim_func
def batched_matmul(A: T.Buffer((1, 6, 5), "float32"), B: T.Buffer((5, 7), "float32"),
                   C: T.Buffer((1, 6, 7), "float32")):
    for b, i, j, k in T.grid(1, 6, 7, 5):
        with T.block("C"):
            vb, vi, vj, vk = T.axis.remap("SSSR", [b, i, j, k])
            with T.init():
                C[vb, vi, vj] = T.float32(0)
            C[vb, vi, vj] = C[vb, vi, vj] + A[vb, vi, vk] * B[vk, vj]


@pytest.mark.parametrize("index_map, grid", [
    (lambda b, i, j, k: (i, j, k), "T.grid(6, 7, 5)"),      # normalize_prim_func's unit drop
    (lambda b, i, j, k: (i, k, j), "T.grid(6, 5, 7)"),      # the reduce variable moved out
])
def test_a_reduction_drops_its_unit_variables_or_reorders_them(index_map, grid):
    """TVM's normalize_prim_func drops a Relax function's unit batch variable of a reduction
    (audit helper-42: refused, 'changes spatial blocks'); the variables keep their kinds and
    the init stays at each element's first reduce point."""
    sch = sched.Schedule(batched_matmul)
    sch.transform_block_layout(sch.get_block("C"), index_map)
    script = sch.func.script()
    assert f"for ax0, ax1, ax2 in {grid}:" in script and "with T.init():" in script
    assert sched.parse(script) == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(batched_matmul).func == sch.func
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1, 6, 5), dtype=np.float32)
    b = rng.standard_normal((5, 7), dtype=np.float32)
    c = np.full((1, 6, 7), np.nan, np.float32)
    sched.build(sch.func, target="c")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_a_reduction_is_not_fused_or_skewed():
    sch = sched.Schedule(batched_matmul)
    with pytest.raises(ScheduleError, match="of the others only reorders their variables or "
                                            "drops those of one iteration"):
        sch.transform_block_layout(sch.get_block("C"), lambda b, i, j, k: (i * 7 + j, k))


def _doubled(n):
    A = te.placeholder((n, 6), "float32", name="A")
    B = te.compute((n, 6), lambda i, j: A[i, j] * 2, name="B")
    return te.create_prim_func([A, B])


@pytest.mark.parametrize("name", ["swap", "flatten", "reverse"])
def test_maps_of_a_block_over_a_symbolic_extent_run_loops_over_the_symbolic_image(name):
    # refused before as "no constant bounds" (audit helper-111); TVM maps symbolic ranges
    n = te.var("n")
    index_map = {"swap": lambda i, j: (j, i), "flatten": lambda i, j: (i * 6 + j,),
                 "reverse": lambda i, j: (n - 1 - i, 5 - j)}[name]
    func = _doubled(n)
    sch = sched.Schedule(func)
    sch.transform_block_layout(sch.get_block("B"), index_map)
    loops = {"swap": "for ax0, ax1 in T.grid(6, n):", "flatten": "for ax0 in range(n * 6):",
             "reverse": "for ax0, ax1 in T.grid(n, 6):"}[name]
    assert loops in sch.func.script()
    assert sched.parse(sch.func.script()) == sch.func
    assert sch.trace.apply(func).func == sch.func
    kernel = sched.build(sch.func, target="c")
    for size in (1, 5, 8):
        a = np.random.default_rng(size).random((size, 6), dtype=np.float32)
        b = np.zeros((size, 6), np.float32)
        kernel(a, b)
        np.testing.assert_allclose(b, a * 2, rtol=1e-6)


def test_a_symbolic_image_that_is_no_box_for_some_sizes_is_refused():
    # (i // 2, i % 2) over an odd n leaves the point (n // 2, 1) out of the image
    sch = sched.Schedule(_doubled(te.var("n")))
    with pytest.raises(ScheduleError, match="not a box"):
        sch.transform_block_layout(sch.get_block("B"), lambda i, j: (i // 2, i % 2, j))


def test_shifts_and_masks_make_index_maps_and_a_map_that_fails_names_the_primitive():
    @T.prim_func
    def copy(A: T.Buffer((16,), "int32"), C: T.Buffer((16,), "int32")):
        for i in range(16):
            with T.block("C"):
                vi = T.axis.spatial(16, i)
                C[vi] = A[vi]

    for index_map in (lambda v: (v >> 2, v & 3),
                      lambda v: (T.shift_right(v, 2), T.bitwise_and(v, 3))):
        sch = sched.Schedule(copy)
        sch.transform_block_layout(sch.get_block("C"), index_map)
        assert "for ax0, ax1 in T.grid(4, 4):" in sch.func.script()
        a, c = np.arange(16, dtype=np.int32), np.zeros(16, np.int32)
        sched.build(sch.func, target="c")(a, c)
        np.testing.assert_array_equal(c, a)
    sch = sched.Schedule(copy)
    with pytest.raises(ScheduleError, match=r"^transform_block_layout: argument 'index_map': "
                       r"calling it with the 1 iteration variables of the block failed"):
        sch.transform_block_layout(sch.get_block("C"), lambda v: (T.exp(v),))


def test_each_new_variable_keeps_the_dtype_of_its_expression():
    # every new variable took the first old variable's dtype: an int64 one became int32
    # (audit helper-117)
    @T.prim_func
    def mixed(A: T.Buffer((4, 6), "float32"), B: T.Buffer((4, 6), "float32")):
        for i in range(4):
            for j in range(T.int64(6)):
                with T.block("B"):
                    vi = T.axis.spatial(4, i)
                    vj = T.axis.spatial(T.int64(6), j)
                    B[vi, vj] = A[vi, vj] * T.float32(2)

    sch = sched.Schedule(mixed)
    sch.transform_block_layout(sch.get_block("B"), lambda i, j: (j, i))
    (realize,) = [r for r in collect(sch.func.body, BlockRealize) if r.block.name == "B"]
    assert [iv.var.dtype for iv in realize.block.iter_vars] == ["int64", "int32"]
    assert sched.parse(sch.func.script()) == sch.func
    a = np.random.default_rng(0).random((4, 6), dtype=np.float32)
    b = np.zeros((4, 6), np.float32)
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_allclose(b, a * 2, rtol=1e-6)


def test_a_new_variable_past_int32_is_refused():
    # a raw TypeError: the constant 9663676422 is outside int32 (audit helper-129)
    from sched import compute as te

    A = te.placeholder((8, 4), name="A")
    sch = sched.Schedule(te.create_prim_func([A, te.compute((8, 4), lambda i, j: A[i, j] * 2.0,
                                                            name="C")]))
    with pytest.raises(sched.ScheduleError, match=r"the new iteration variable 0 takes the "
                                                  r"value \d+, past int32"):
        sch.transform_block_layout(sch.get_block("C"), lambda i, j: (i * 2**30 + j,))


def test_a_loop_marked_parallel_is_named_in_the_refusal():
    # the message said the block was not bound by its loops alone (audit helper-133)
    A = te.placeholder((4, 4), name="A")
    sch = sched.Schedule(te.create_prim_func([A, te.compute((4, 4), lambda i, j: A[i, j] * 2.0,
                                                            name="B")]))
    sch.parallel(sch.get_loops(sch.get_block("B"))[0])
    with pytest.raises(ScheduleError, match=r"loop 'i' around block 'B' is parallel: "
                                            r"transform_block_layout rebuilds serial loops only"):
        sch.transform_block_layout(sch.get_block("B"), lambda i, j: (j, i))

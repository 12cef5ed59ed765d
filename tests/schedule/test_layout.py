"""transform_layout (sched/schedule/layout.py): the accesses go through the index map, the
buffer takes the shape of the map's image, and the numbers do not change."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.schedule.trace import Trace
from sched.script import T


def scale_then_shift(rows=10, cols=8):
    A = te.placeholder((rows, cols), "float32", name="A")
    B = te.compute((rows, cols), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((rows, cols), lambda i, j: B[i, j] + 1, name="C")
    return te.create_prim_func([A, C])


def check_numbers(func, rows=10, cols=8):
    a = np.random.default_rng(0).random((rows, cols), dtype=np.float32)
    c = np.zeros((rows, cols), np.float32)
    sched.build(func, target="c")(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)
    c2 = np.zeros((rows, cols), np.float32)
    sched.interpret(func, a, c2)
    np.testing.assert_allclose(c2, c, rtol=1e-6)


def test_a_permutation_transposes_the_buffer():
    func = scale_then_shift()
    sch = sched.Schedule(func)
    sch.transform_layout(sch.get_block("C"), "B", T.index_map(lambda i, j: (j, i)))
    script = sch.func.script()
    assert 'B = T.alloc_buffer((8, 10), "float32")' in script
    assert "B[v_j, v_i] = A[v_i, v_j] * T.float32(2.0)" in script
    assert "T.reads(B[v_j, v_i])" in script
    assert sched.parse(script) == sch.func
    assert sch.trace.apply(func).func == sch.func
    check_numbers(sch.func)


def test_a_padding_map_with_pad_value_fills_the_rest_first():
    func = scale_then_shift()
    sch = sched.Schedule(func)
    # 10 rows in blocks of 4: the third block has 2 rows of padding
    sch.transform_layout(sch.get_block("B"), ("write", 0), lambda i, j: (i // 4, j, i % 4),
                         pad_value=0.0)
    script = sch.func.script()
    assert 'B = T.alloc_buffer((3, 8, 4), "float32")' in script
    assert 'with T.block("B_pad"):' in script
    assert "B[v_i // 4, v_j, v_i % 4] = A[v_i, v_j] * T.float32(2.0)" in script
    assert "lambda i, j: (i // 4, j, i % 4), pad_value=0.0" in str(sch.trace)
    assert sch.trace.apply(func).func == sch.func
    # the map survives the trace's JSON (the tuning database stores traces so)
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func
    check_numbers(sch.func)


def test_pad_value_as_a_function_of_the_new_indices():
    """TVM's callable pad_value (audit helper-50: a raw TypeError before): a function of the
    new indices, kept in the trace as a lambda; a string is refused saying what is taken."""
    func = scale_then_shift()
    sch = sched.Schedule(func)
    sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (i // 4, j, i % 4),
                         pad_value=lambda a, b, c: te.cast(c, "float32") * 0.5)
    script = sch.func.script()
    assert 'with T.block("B_pad"):' in script
    assert "B[v0, v1, v2] = T.Cast(\"float32\", v2) * T.float32(0.5)" in script
    assert "pad_value=lambda a, b, c: (T.Cast(\"float32\", c) * T.float32(0.5),)" in \
        str(sch.trace)
    assert sch.trace.apply(func).func == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func
    check_numbers(sch.func)
    for wrong, message in (("0", "expected a number, an expression, or a function"),
                           (lambda a, b, c: (0.0, 1.0), "gives 2 values; give one")):
        other = sched.Schedule(func)
        with pytest.raises(ScheduleError, match=message):
            other.transform_layout(other.get_block("B"), "B",
                                   lambda i, j: (i // 4, j, i % 4), pad_value=wrong)


def test_pad_value_written_with_t_as_in_tvm_and_its_printed_trace_replays():
    # audit, helper-93: `lambda a, b, c: a * T.float32(4.0)` hung (a placeholder iterated
    # without end), `T.float32(0.0)` was a raw TypeError, and the printed trace's
    # `T.Cast("float32", c) * T.float32(0.5)` did not replay
    from sched.script import T

    func = scale_then_shift()
    for pad_value, shown in ((lambda a, b, c: T.float32(0.0), "T.float32(0.0)"),
                             (lambda a, b, c: T.Cast("float32", c) * T.float32(4.0),
                              'T.Cast("float32", v2) * T.float32(4.0)')):
        sch = sched.Schedule(func)
        sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (i // 4, j, i % 4),
                             pad_value=pad_value)
        assert f"B[v0, v1, v2] = {shown}" in sch.func.script()
        replay = sched.Schedule(func)
        exec(str(sch.trace), {"sch": replay, "T": T})
        assert replay.func == sch.func
        check_numbers(sch.func)
    # a constant as T writes it prints as a number (helper-94: FloatImm(value=...), which did
    # not replay), in the JSON too; one beyond the buffer's dtype is refused
    sch = sched.Schedule(func)
    sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (i // 4, j, i % 4),
                         pad_value=T.float32(-5))
    assert "pad_value=-5.0" in str(sch.trace)
    replay = sched.Schedule(func)
    exec(str(sch.trace), {"sch": replay, "T": T})
    assert replay.func == sch.func == Trace.from_json(sch.trace.to_json()).apply(func).func
    with pytest.raises(TypeError, match="the constant 300 is outside int8"):
        T.int8(300)
    A = te.placeholder((10,), "int8", name="A")
    B = te.compute((10,), lambda i: A[i] + te.const(1, "int8"), name="B")
    narrow = sched.Schedule(te.create_prim_func(
        [A, te.compute((10,), lambda i: B[i] * te.const(2, "int8"), name="C")]))
    with pytest.raises(ScheduleError, match=r"pad_value=300: the constant 300 is outside int8"):
        narrow.transform_layout(narrow.get_block("B"), "B", lambda i: (i // 4, i % 4),
                                pad_value=300)
    sch = sched.Schedule(func)
    with pytest.raises(ScheduleError, match=r"argument 'pad_value': calling it .* any other "
                                            r"T.<name> stands for nothing"):
        sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (i // 4, j, i % 4),
                             pad_value=lambda a, b, c: T.exp(c))


def test_a_padding_map_without_pad_value_leaves_the_padding_unwritten():
    sch = sched.Schedule(scale_then_shift())
    sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (i // 4, j, i % 4))
    assert "B_pad" not in sch.func.script()
    check_numbers(sch.func)


def test_later_steps_work_on_the_new_layout():
    sch = sched.Schedule(scale_then_shift(16, 8))
    sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (j, i))
    i, j = sch.get_loops(sch.get_block("C"))
    sch.reorder(j, i)
    sch.cache_read(sch.get_block("C"), "B", "local")
    sch.parallel(sch.get_loops(sch.get_block("C"))[0])
    check_numbers(sch.func, 16, 8)


def test_a_map_that_is_not_injective_is_refused():
    sch = sched.Schedule(scale_then_shift())
    # rows 2k and 2k + 1 would share a place
    with pytest.raises(ScheduleError, match=r"transform_layout: the index map lambda i, j: "
                                            r"\(i // 2, j\) sends two elements of 'B' to one "
                                            r"place: it must be injective on the shape "
                                            r"\(10, 8\)"):
        sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (i // 2, j))


def test_a_parameter_and_a_non_affine_map_are_refused():
    sch = sched.Schedule(scale_then_shift())
    # the caller passes A in its layout
    with pytest.raises(ScheduleError, match=r"'A' is a parameter of the function"):
        sch.transform_layout(sch.get_block("B"), "A", lambda i, j: (j, i))
    with pytest.raises(ScheduleError, match=r"has the non-affine index i \* j"):
        sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (i * j, i))
    with pytest.raises(ScheduleError, match=r"gives index o0 the value -9: indices start at 0"):
        sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (-i, j))
    with pytest.raises(ScheduleError, match=r"block 'B' accesses no buffer 'Z'"):
        sch.transform_layout(sch.get_block("B"), "Z", lambda i, j: (j, i))


INDIRECT = """
@T.prim_func
def f(A: T.Buffer((8,), "float32"), I: T.Buffer((8,), "int32"), B: T.Buffer((8,), "float32")):
    with T.block("root"):
        S = T.alloc_buffer((8,), "int32")
        for i in range(8):
            with T.block("S"):
                vi = T.axis.remap("S", [i])
                S[vi] = I[vi] % 8
        for i in range(8):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                T.reads(A[S[vi]], S[vi])
                T.writes(B[vi])
                B[vi] = A[S[vi]]
"""


def test_a_region_indexed_through_the_relaid_buffer_follows_it():
    """`A[S[vi]]` in B's reads names S by its index: relaying S rewrites it there too
    (found by the fuzzer: the old S stayed in the region and the script did not parse back)."""
    func = sched.parse(INDIRECT)
    sch = sched.Schedule(func)
    sch.transform_layout(sch.get_block("S"), ("write", 0), lambda i: (i // 4, i % 4))
    script = sch.func.script()
    assert "T.reads(A[S[vi // 4, vi % 4]], S[vi // 4, vi % 4])" in script
    assert sched.parse(script).script() == script
    rng = np.random.default_rng(0)
    a, index = rng.standard_normal(8).astype(np.float32), rng.integers(0, 8, 8).astype(np.int32)
    b = np.zeros(8, np.float32)
    sched.build(sch.func, target="c")(a, index, b)
    np.testing.assert_array_equal(b, a[index % 8])


def symbolic_chain():
    n = te.var("n")
    A = te.placeholder((n, 8), name="A")
    B = te.compute((n, 8), lambda i, j: A[i, j] * 2.0, name="B")
    return te.create_prim_func([A, te.compute((n, 8), lambda i, j: B[i, j] + 1.0, name="C")])


@pytest.mark.parametrize("index_map, shape", [
    (lambda i, j: (j, i), "(8, n)"),
    (lambda i, j: (i // 4, j, i % 4), "((n + 3) // 4, 8, T.min(4, n))"),
])
def test_a_buffer_of_a_symbolic_shape_takes_its_image_in_the_symbolic_dims(index_map, shape,
                                                                          rng):
    """dlight's Matmul rule relays a reindexed buffer of a dynamic dim (audit helper-42:
    refused, 'computed for constant shapes')."""
    func = symbolic_chain()
    sch = sched.Schedule(func)
    sch.transform_layout(sch.get_block("B"), "B", index_map)
    assert f"B = T.alloc_buffer({shape}" in sch.func.script()
    assert sched.parse(sch.func.script()) == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func
    kernel = sched.build(sch.func, target="c")
    for n in (1, 5, 8):
        a = rng.standard_normal((n, 8)).astype(np.float32)
        c = np.full((n, 8), np.nan, np.float32)
        kernel(a, c)
        np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


@pytest.mark.parametrize("step", ["transform_layout", "reindex_cache_write"])
def test_an_index_map_may_name_its_indices_like_the_symbolic_dims(step, rng):
    """`lambda n, j: (j, n)` over a shape (n, 8): the map's n is its first index, not the
    dim (the fuzzer: isl read both as one name and crashed)."""
    func = symbolic_chain()
    sch = sched.Schedule(func)
    if step == "transform_layout":
        sch.transform_layout(sch.get_block("B"), "B", lambda n, j: (j, n))
        assert "B = T.alloc_buffer((8, n)" in sch.func.script()
    else:
        sch.reindex_cache_write(sch.get_block("C"), 0, "global", lambda n, j: (j, n))
        assert "C_global = T.alloc_buffer((8, n)" in sch.func.script()
    kernel = sched.build(sch.func, target="c")
    for n in (1, 6):
        a = rng.standard_normal((n, 8)).astype(np.float32)
        c = np.full((n, 8), np.nan, np.float32)
        kernel(a, c)
        np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def _scaled_then_shifted():
    A = te.placeholder((8, 4), name="A")
    B = te.compute((8, 4), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((8, 4), lambda i, j: B[i, j] + 1.0, name="C")
    return te.create_prim_func([A, C])


def test_an_image_past_int32_and_a_pad_value_past_float32_are_refused():
    # a raw TypeError, and a pad value printed as T.float32(1e+40), which the parser refuses
    # (audit helper-129)
    sch = sched.Schedule(_scaled_then_shifted())
    with pytest.raises(ScheduleError, match=r"gives index .* the value 3758096384, past "
                                            r"int32: declare the buffer's dimensions as "
                                            r"T.int64"):
        sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (i * 2**29, j))
    with pytest.raises(ScheduleError, match=r"pad_value=.*beyond the range of float32"):
        sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (i // 3, j, i % 3),
                             pad_value=10**40)


def test_the_errors_of_a_buffer_argument_name_the_step():
    # reindex's bad buffer index was reported as transform_layout's (audit helper-129)
    sch = sched.Schedule(_scaled_then_shifted())
    with pytest.raises(ScheduleError, match=r"^reindex: argument 'buffer': block 'B' has 1 "
                                            r"read regions, got index 7"):
        sch.reindex(sch.get_block("B"), ("read", 7))


def test_padding_a_shared_cache_outside_the_kernel_is_refused_at_the_step():
    # the pad nest went to the root, outside the thread loops: accepted, then refused by the
    # build naming the cooperative fetch (audit helper-144)
    from sched import hand_schedules

    sch = hand_schedules.gpu_matmul(64, 48, 32)
    with pytest.raises(sched.ScheduleError, match="pad_value for 'A_shared' in 'shared' memory "
                                                  "of a GPU function"):
        sch.transform_layout(sch.get_block("A_shared"), "A_shared",
                             lambda i, k: (k // 3, i, k % 3), pad_value=0.0)

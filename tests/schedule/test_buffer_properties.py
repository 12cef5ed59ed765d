"""set_axis_separator, unsafe_set_dtype (sched/schedule/buffer_properties.py) and
reorder_block_iter_var (sched/schedule/block_iters.py): what changes no order, checked to keep
the numbers."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError
from sched.schedule.buffer_properties import holds_every_value
from sched.schedule.trace import Trace


def square_then_double(dtype="float16"):
    A = te.placeholder((16,), dtype, name="A")
    B = te.compute((16,), lambda i: A[i] * A[i], name="B")
    C = te.compute((16,), lambda i: B[i] + B[i], name="C")
    return te.create_prim_func([A, C])


def test_a_widened_intermediate_keeps_every_number():
    func = square_then_double()
    sch = sched.Schedule(func)
    sch.unsafe_set_dtype(sch.get_block("B"), 0, "float32")
    script = sch.func.script()
    assert 'B = T.alloc_buffer((16,), "float32")' in script
    assert 'C[v_i] = T.Cast("float16", B[v_i]) + T.Cast("float16", B[v_i])' in script
    assert sched.parse(script) == sch.func
    assert sch.trace.apply(func).func == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func
    a = (np.random.default_rng(0).random(16) * 300).astype(np.float16)   # squares round
    want, got = np.zeros(16, np.float16), np.zeros(16, np.float16)
    sched.build(func, target="c")(a, want)
    sched.build(sch.func, target="c")(a, got)
    np.testing.assert_array_equal(got, want)          # bit for bit: nothing rounds otherwise


def test_an_integer_intermediate_widens():
    func = square_then_double("int8")
    sch = sched.Schedule(func)
    sch.unsafe_set_dtype(sch.get_block("B"), "B", "int32")
    a = np.arange(-8, 8, dtype=np.int8) * 5               # squares wrap in int8
    want, got = np.zeros(16, np.int8), np.zeros(16, np.int8)
    sched.build(func, target="c")(a, want)
    sched.build(sch.func, target="c")(a, got)
    np.testing.assert_array_equal(got, want)


def test_a_narrowing_dtype_is_refused():
    sch = sched.Schedule(square_then_double("float32"))
    # float16 cannot hold every float32: TVM would round B, changing C
    with pytest.raises(ScheduleError, match=r"unsafe_set_dtype: 'B' holds float32 values, "
                                            r"which float16 cannot all hold"):
        sch.unsafe_set_dtype(sch.get_block("B"), 0, "float16")


def test_a_parameter_keeps_its_dtype():
    sch = sched.Schedule(square_then_double())
    # C is the caller's array: its dtype is not the schedule's to change
    with pytest.raises(ScheduleError, match=r"'C' is a parameter of the function"):
        sch.unsafe_set_dtype(sch.get_block("C"), 0, "float32")


def test_which_casts_hold_every_value():
    assert holds_every_value("float16", "float32")
    assert holds_every_value("bfloat16", "float32")
    assert not holds_every_value("float16", "bfloat16")     # bfloat16 has fewer mantissa bits
    assert not holds_every_value("bfloat16", "float16")     # float16 a smaller exponent
    assert holds_every_value("uint8", "int16")
    assert not holds_every_value("int8", "uint16")          # negatives
    assert not holds_every_value("int32", "float32")


def test_set_axis_separator_accepts_only_the_flat_layout():
    func = square_then_double()
    sch = sched.Schedule(func)
    sch.set_axis_separator(sch.get_block("B"), ("write", 0), [])
    sch.set_axis_separator(block=sch.get_block("B"), buffer="A", axis_separators=None)
    assert sch.func == sched.Schedule(func).func
    assert sch.trace.apply(func).func == sch.func
    # a separator asks for a 2-d physical buffer (texture memory), which sched never makes
    with pytest.raises(ScheduleError, match=r"set_axis_separator: axis_separators=\[1\] for "
                                            r"'B': sched lays out every buffer as one flat"):
        sch.set_axis_separator(sch.get_block("B"), ("write", 0), [1])
    with pytest.raises(ScheduleError, match=r"block 'B' has no buffer 'Z'"):
        sch.set_axis_separator(sch.get_block("B"), "Z", [])


def test_reorder_block_iter_var_permutes_the_variables():
    A = te.placeholder((8, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    B = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="B")
    func = te.create_prim_func([A, B])
    sch = sched.Schedule(func)
    sch.reorder_block_iter_var(sch.get_block("B"), [1, 0])
    assert 'v_k, v_i = T.axis.remap("RS", [k, i])' in sch.func.script()
    assert sch.trace.apply(func).func == sch.func
    assert Trace.from_json(sch.trace.to_json()).apply(func).func == sch.func
    i, kk = sch.get_loops(sch.get_block("B"))
    sch.parallel(i)                                        # still a spatial loop
    a = np.random.default_rng(0).random((8, 6), dtype=np.float32)
    b = np.zeros(8, np.float32)
    sched.build(sch.func, target="c")(a, b)
    np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5)
    with pytest.raises(ScheduleError, match=r"expected a permutation of \[0, 1\]"):
        sch.reorder_block_iter_var(sch.get_block("B"), [0, 0])

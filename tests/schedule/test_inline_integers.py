"""compute_inline and reverse_compute_inline of int32 values that move between data (stored
values: arithmetic wraps) and index arithmetic (exact): schedule/inline_integers.py. Audit
helper-122 found each of these changing the numbers or raising a VerifyError."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import sched
from sched import compute as te


def _wrapped(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


def _run(func, *arrays, target="c"):
    """The outputs of `func` on copies of `arrays` (the last is the output), built for
    `target` and interpreted: both must agree."""
    built = [a.copy() for a in arrays]
    sched.build(func, target=target)(*built)
    interpreted = [a.copy() for a in arrays]
    sched.interpret(func, *interpreted)
    np.testing.assert_array_equal(built[-1], interpreted[-1])
    return built[-1]


_PRODUCER_CONSUMER = '''
@T.prim_func
def f(A: T.Buffer(({a},), "int32"), C: T.Buffer(({c},), "int32")):
    B = T.alloc_buffer(({b},), "{dtype}")
    for i in range({producer}):
        with T.block("B"):
            vi = T.axis.spatial({producer}, i)
            B[vi] = {value}
    for i in range({consumer}):
        with T.block("C"):
            vi = T.axis.spatial({consumer}, i)
            {lets}C[vi] = {read}
'''


def _producer_consumer(value: str, read: str, *, a=8, b=4, c=4, producer=None, consumer=None,
                       dtype="int32", lets: tuple[str, ...] = ()):
    """B (`b` elements of `dtype`) = `value` over `producer` (B's size unless given), and
    C (`c` elements) = `read` over `consumer` (C's size unless given), after the let
    statements `lets` (`"x: T.int32 = vi + 1"`); A of `a` elements."""
    return sched.parse(_PRODUCER_CONSUMER.format(
        a=a, b=b, c=c, dtype=dtype, value=value, read=read, producer=producer or b,
        consumer=consumer or c, lets="".join(f"{let}\n            " for let in lets)))


_STORED_PAST_INT32 = _producer_consumer("vi * 1073741824", "A[B[vi] // 1073741824 + 2]")


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_a_stored_value_that_wraps_keeps_wrapping_in_the_index_it_is_inlined_into(target):
    # B stores 0, 2**30, -2**31, -2**30: C reads A[2], A[3], A[0], A[1]; inlined bare, the
    # index was A[vi + 2] (exact index arithmetic)
    a = np.arange(8, dtype=np.int32) * 10
    expected = np.array([a[_wrapped(v * 2**30) // 2**30 + 2] for v in range(4)], np.int32)
    sch = sched.Schedule(_STORED_PAST_INT32)
    sch.compute_inline(sch.get_block("B"))
    assert 'T.Cast("int32", T.Cast("int64", vi * 1073741824))' in sch.mod.script()
    np.testing.assert_array_equal(_run(sch.func, a, np.zeros(4, np.int32), target=target),
                                  expected)


def test_a_stored_value_that_stays_in_int32_is_inlined_as_written():
    f = _producer_consumer("vi * 4 + 1", "A[B[vi]]", a=16)
    sch = sched.Schedule(f)
    sch.compute_inline(sch.get_block("B"))
    assert "C[vi] = A[vi * 4 + 1]" in sch.mod.script()
    a = np.arange(16, dtype=np.int32)
    np.testing.assert_array_equal(_run(sch.func, a, np.zeros(4, np.int32)), a[1::4])


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_an_index_past_int32_on_the_way_keeps_its_exact_value_in_the_inlined_data(target):
    # C reads B[vi * 2**30 // 2**30 + 2] = B[vi + 2] (index arithmetic is exact), and B's
    # value computes with its variable: substituted bare into `A[vi] + vi`, the product
    # wrapped (C[2] = A[2] + 0 instead of A[4] + 4)
    f = _producer_consumer("A[vi] + vi", "B[vi * 1073741824 // 1073741824 + 2]", b=8)
    a = np.arange(8, dtype=np.int32) * 10
    sch = sched.Schedule(f)
    sch.compute_inline(sch.get_block("B"))
    np.testing.assert_array_equal(_run(sch.func, a, np.zeros(4, np.int32), target=target),
                                  a[2:6] + np.arange(2, 6))


@pytest.mark.filterwarnings("ignore::sched.errors.ScriptWarning")
@pytest.mark.parametrize("producer, consumer, index", [
    ("8", "8", 'T.Cast("int64", vi)'),            # an int64 index of an int32 variable
    ("8", "T.int64(8)", "vi"),                    # int64 consumer, int32 producer
    ("T.int64(8)", "8", "vi"),                    # int32 consumer, int64 producer
])
@pytest.mark.parametrize("inline", ["compute_inline", "reverse_compute_inline"])
def test_inlining_between_int32_and_int64_variables(producer, consumer, index, inline):
    # each raised a VerifyError ("a int64 value is stored to 'C' of dtype int32"): the
    # variable substituted is converted to the dtype of the one it replaces (the script's
    # `+ vi` of an int64 vi is converted on store, as TVM does: a ScriptWarning)
    f = _producer_consumer("A[vi] * 2 + vi", f"B[{index}] + vi", b=8, c=8, producer=producer,
                           consumer=consumer)
    sch = sched.Schedule(f)
    getattr(sch, inline)(sch.get_block("B" if inline == "compute_inline" else "C"))
    a = np.arange(8, dtype=np.int32) * 10
    np.testing.assert_array_equal(_run(sch.func, a, np.zeros(8, np.int32)),
                                  a * 2 + 2 * np.arange(8))


def test_a_stored_value_that_wraps_before_a_division_keeps_wrapping_where_it_may():
    # vi * 2**30 // 2**30 stores 0, 1, -2, -1; the wrapping cast around the whole took the
    # exact value modulo 2**32 (0, 1, 2, 3: C read A[2], A[3] for A[6], A[7]; audit
    # helper-124): it goes around the product, the operation that may leave int32
    f = _producer_consumer("vi * 1073741824 // 1073741824", "A[B[vi] % 8]")
    sch = sched.Schedule(f)
    sch.compute_inline(sch.get_block("B"))
    assert 'A[T.Cast("int32", T.Cast("int64", vi * 1073741824)) // 1073741824 % 8]' in \
        sch.mod.script()
    a = np.arange(8, dtype=np.int32) * 10
    with pytest.warns(sched.ConservativeAnalysisWarning, match="cannot read as affine"):
        np.testing.assert_array_equal(_run(sch.func, a, np.zeros(4, np.int32)),
                                      a[[0, 1, 6, 7]])


@pytest.mark.filterwarnings("ignore::sched.ConservativeAnalysisWarning")
@pytest.mark.parametrize("extent, value, read, expected", [
    # a shift by a constant is index arithmetic (a product): stored it wraps (audit
    # helper-126: inlined bare, C read A[4] where B held -2**31)
    (4, "T.shift_left(vi, 30)", "A[B[vi] // 1073741824 + 2]", [20, 30, 0, 10]),
    # an index of shifts is exact (vi): inlined into `vi * 3` as data it wrapped
    (8, "vi * 3", "B[T.shift_right(T.shift_left(vi, 30), 30)]", [0, 3, 6, 9]),
])
def test_shifts_move_between_data_and_indices_as_products_do(extent, value, read, expected):
    f = _producer_consumer(value, read, b=8, producer=extent)
    sch = sched.Schedule(f)
    sch.compute_inline(sch.get_block("B"))
    a = np.arange(8, dtype=np.int32) * 10
    np.testing.assert_array_equal(_run(sch.func, a, np.zeros(4, np.int32)), expected)


def test_int64_arithmetic_that_may_pass_int64_is_not_inlined():
    # stored it wraps, inlined into an index it is exact, and no wider type wraps it
    # (audit helper-126: C read A[6], A[7] for A[2], A[3])
    f = _producer_consumer('T.Cast("int64", vi) * T.int64(4611686018427387904)',
                           'A[T.Cast("int32", B[vi] // T.int64(4611686018427387904)) + 4]',
                           dtype="int64")
    sch = sched.Schedule(f)
    with pytest.raises(sched.ScheduleError, match=r"is int64 arithmetic that may pass int64"):
        sch.compute_inline(sch.get_block("B"))


def test_a_narrowing_cast_of_the_program_wraps_in_every_context_and_inlines():
    # the wrap is the program's own cast, computed the same in an index: inlined as written
    f = _producer_consumer(
        'T.Cast("int32", T.Cast("int64", vi) * T.int64(1073741824)) // 1073741824',
        "A[B[vi] % 8]")
    sch = sched.Schedule(f)
    sch.compute_inline(sch.get_block("B"))
    a = np.arange(8, dtype=np.int32) * 10
    np.testing.assert_array_equal(_run(sch.func, a, np.zeros(4, np.int32)), a[[0, 1, 6, 7]])


@pytest.mark.parametrize("value, expected", [
    (lambda i: te.const(2.0, "float32"), np.full(8, 2.0)),                # a constant fill
    (lambda i: i.astype("float32") * 0.5, np.arange(8) * 0.5),            # a float of i
    (lambda i: te.if_then_else(i > 3, 1.0, 0.0), np.arange(8) > 3),       # a mask
], ids=["constant", "float_of_index", "mask"])
def test_float_values_of_the_indices_inline(value, expected):
    # refused as "int64 arithmetic that may pass int64" by the first form of the rule, which
    # took a float constant for a value that may wrap (audit helper-128)
    A = te.placeholder((8,), "float32", name="A")
    B = te.compute((8,), value, name="B")
    sch = sched.Schedule(te.create_prim_func([A, te.compute((8,), lambda i: A[i] + B[i],
                                                            name="C")]))
    sch.compute_inline(sch.get_block("B"))
    a, c = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    sched.build(sch.func, target="c")(a, c)
    np.testing.assert_array_equal(c, a + expected)


# An index computes each largest part that reads no data exactly, and the arithmetic on
# data wrapping; a stored value wraps everywhere (audit helper-131: each case below changed
# its numbers under the step).

def _inlined_both_ways(func, a, expected, affine=True):
    """`func` (B inlined into C) checked as written, after compute_inline of B and after
    reverse_compute_inline of C (where C reads B at an `affine` index: it refuses others),
    against `expected`."""
    np.testing.assert_array_equal(_run(func, a, np.zeros(len(expected), np.int32)), expected)
    steps = (("compute_inline", "B"),) + ((("reverse_compute_inline", "C"),) if affine
                                          else ())
    for step, block in steps:
        sch = sched.Schedule(func)
        getattr(sch, step)(sch.get_block(block))
        np.testing.assert_array_equal(_run(sch.func, a, np.zeros(len(expected), np.int32)),
                                      expected, err_msg=step)


def test_arithmetic_around_an_inlined_load_in_an_index_keeps_wrapping():
    # B[vi] * 2**30 wrapped (data); inlined, vi * 2**30 would be exact index arithmetic
    f = _producer_consumer("vi", "A[B[vi] * 1073741824 // 1073741824 % 8]", b=8, c=8)
    a = np.arange(8, dtype=np.int32) * 10
    expected = a[[_wrapped(v * 2**30) // 2**30 % 8 for v in range(8)]]
    _inlined_both_ways(f, a, expected)


def test_the_pure_part_of_a_stored_value_that_reads_data_keeps_wrapping_in_an_index():
    f = _producer_consumer("T.max(vi * 1073741824 // 1073741824, A[vi])", "A[B[vi] % 8]",
                           b=8, c=8)
    a = -5 - np.arange(8, dtype=np.int32)
    stored = [max(_wrapped(v * 2**30) // 2**30, a[v]) for v in range(8)]
    _inlined_both_ways(f, a, a[[s % 8 for s in stored]])


@pytest.mark.parametrize("index", [
    "(A[vi] + vi * 1073741824 // 1073741824) % 8",          # a gather beside exact arithmetic
    "T.Select(vi + 2147483647 > 0, vi, 7 - vi)",           # an exact condition
    "T.bitwise_and(vi * 1073741824 // 1073741824, 7)",     # a bitwise operation
    # an operation of another type over exact int32 arithmetic (audit helper-143)
    'T.Cast("int32", T.Cast("int8", vi * 1073741824 // 1073741824) % T.int8(7))',
    'T.Cast("int32", T.if_then_else(vi * 1073741824 // 1073741824 < 4, T.int8(1), '
    'T.int8(2)))',
])
def test_an_exact_index_moved_into_data_keeps_its_exact_value(index):
    f = _producer_consumer("A[vi] + vi * 1000", f"B[{index}]", b=8, c=8)
    a = np.array([3, 1, 4, 1, 5, 9, 2, 6], np.int32)
    exact = {"(A[vi] +": lambda v: (a[v] + v) % 8, "T.Select": lambda v: v,
             "T.bitwise_and": lambda v: v & 7, 'T.Cast("int32", T.Cast': lambda v: v % 7,
             'T.Cast("int32", T.if_': lambda v: 1 if v < 4 else 2}
    j = [next(f for start, f in exact.items() if index.startswith(start))(v) for v in range(8)]
    _inlined_both_ways(f, a, np.array([a[k] + k * 1000 for k in j], np.int32), affine=False)


def test_int32_arithmetic_under_the_cast_of_an_int64_index_stays_exact():
    f = sched.parse('''
@T.prim_func
def f(A: T.Buffer((8,), "int32"), C: T.Buffer((8,), "int32")):
    B = T.alloc_buffer((8,), "int32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] + vi * 100
    for i in range(T.int64(8)):
        with T.block("C"):
            vi = T.axis.spatial(T.int64(8), i)
            C[vi] = B[T.floormod((2147483647 + 1) % 6 + vi, 8)]
''')
    a = np.arange(8, dtype=np.int32)
    j = (2**31 % 6 + np.arange(8)) % 8                      # 2**31 % 6 = 2, exactly
    sch = sched.Schedule(f)
    sch.compute_inline(sch.get_block("B"))
    np.testing.assert_array_equal(_run(sch.func, a, np.zeros(8, np.int32)),
                                  (a + np.arange(8) * 100)[j])


def test_int64_arithmetic_used_as_data_only_is_inlined():
    f = sched.parse('''
@T.prim_func
def f(C: T.Buffer((8,), "int64")):
    B = T.alloc_buffer((8,), "int64")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = T.Cast("int64", vi) * T.int64(9223372036854775807)
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = B[vi] + T.int64(1)
''')
    sch = sched.Schedule(f)
    sch.compute_inline(sch.get_block("B"))       # (refused: stored or inlined, it wraps)
    c = np.zeros(8, np.int64)
    sched.build(sch.func, target="c")(c)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(c, np.arange(8, dtype=np.int64) * (2**63 - 1) + 1)


def test_cache_index_leaves_the_condition_of_an_if_exact():
    f = sched.parse('''
@T.prim_func
def f(A: T.Buffer((4,), "int32"), B: T.Buffer((4,), "int32")):
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            if vi * 1073741824 < 0:
                B[vi] = vi * 1073741824
            else:
                B[vi] = A[vi]
''')
    a = np.arange(4, dtype=np.int32) + 100
    sch = sched.Schedule(f)
    sch.cache_index(sch.get_block("B"), "global", 0)
    # vi * 2**30 < 0 never holds in the condition (exact); cached, it held at vi = 2, 3
    np.testing.assert_array_equal(_run(sch.func, a, np.zeros(4, np.int32)), a)


def test_a_sum_of_symbolic_indices_is_inlined_as_written():
    # the exact value of `vi + 1` indexes P: wrapped or exact it is one value, so no cast;
    # with one (int64) the read of A was no longer proven in bounds (audit helper-135)
    from sched.errors import ConservativeAnalysisWarning

    f = sched.parse('''
@T.prim_func
def f(A: T.Buffer((n,), "float32"), C: T.Buffer((n,), "float32")):
    n = T.int32()
    P = T.alloc_buffer((n + 2,), "float32")
    for i in range(n + 2):
        with T.block("P"):
            vi = T.axis.spatial(n + 2, i)
            P[vi] = T.if_then_else(1 <= vi and vi < n + 1, A[vi - 1], T.float32(0))
    for i in range(n):
        with T.block("C"):
            vi = T.axis.spatial(n, i)
            C[vi] = P[vi] + P[vi + 1] + P[vi + 2]
''')
    sch = sched.Schedule(f)
    sch.compute_inline(sch.get_block("P"))
    assert "T.Cast" not in sch.func.script()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConservativeAnalysisWarning)
        kernel = sched.build(sch.func, target="c")
    a = np.arange(1, 7, dtype=np.float32)
    c = np.zeros(6, np.float32)
    kernel(a, c)
    padded = np.r_[0, a, 0]
    np.testing.assert_array_equal(c, padded[:-2] + padded[1:-1] + padded[2:])


def test_a_gather_with_a_scalar_stride_is_inlined():
    # `vj * s` may pass int32, but B uses its variable only in an index (refused: helper-135)
    f = sched.parse('''
@T.prim_func
def f(A: T.Buffer((40,), "float32"), I: T.Buffer((7,), "int32"),
      C: T.Buffer((7, 6), "float32"), s: T.int32):
    B = T.alloc_buffer((40,), "float32")
    for i in range(40):
        with T.block("B"):
            vi = T.axis.spatial(40, i)
            B[vi] = A[vi] * T.float32(2)
    for i, j in T.grid(7, 6):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vj * s + I[vi]]
''')
    sch = sched.Schedule(f)
    sch.compute_inline(sch.get_block("B"))
    rng = np.random.default_rng(0)
    a, idx = rng.random(40).astype(np.float32), rng.integers(0, 5, 7).astype(np.int32)
    c = np.zeros((7, 6), np.float32)
    sched.build(sch.func, target="c")(a, idx, c, 5)
    np.testing.assert_array_equal(c, (a * 2)[np.arange(6)[None, :] * 5 + idx[:, None]])


@pytest.mark.parametrize("lets, index, exact", [
    # a widening cast takes the wrapped value of its operand: A[-2 + 2] at vi = 2
    ((), 'T.Cast("int32", T.Cast("int64", vi * 1073741824) // T.int64(1073741824)) + 2',
     lambda v: _wrapped(v * 2**30) // 2**30 + 2),
    # a comparison cast to an integer compares exactly
    ((), 'T.Cast("int32", vi * 1073741824 > 0) + 2', lambda v: int(v > 0) + 2),
    # a let of index arithmetic holds the exact value, through a let of it too
    (("x: T.int32 = vi * 1073741824",), "x // 1073741824", lambda v: v),
    (("x: T.int32 = vi * 1073741824", "y: T.int32 = x // 1073741824"), "y % 4",
     lambda v: v % 4),
])
def test_casts_and_lets_of_an_index_keep_their_meaning_in_data(lets, index, exact):
    # each was inlined into B's data (vi * 1000) computed otherwise (audit helpers 131, 135)
    f = _producer_consumer("A[vi] + vi * 1000", f"B[{index}]", b=8, lets=lets)
    a = np.arange(8, dtype=np.int32) * 10
    expected = np.array([a[exact(v)] + exact(v) * 1000 for v in range(4)], np.int32)
    np.testing.assert_array_equal(_run(f, a, np.zeros(4, np.int32)), expected)
    sch = sched.Schedule(f)
    sch.compute_inline(sch.get_block("B"))
    np.testing.assert_array_equal(_run(sch.func, a, np.zeros(4, np.int32)), expected)


def test_a_let_of_data_in_an_index_refuses_the_inline_where_the_value_computes_with_it():
    # x * 2**30 wraps in the index (x holds data); moved into B's value it would not
    f = _producer_consumer("A[vi] + vi * 1000", "B[x * 1073741824 // 1073741824 % 8]", b=8,
                           lets=("x: T.int32 = A[vi]",))
    sch = sched.Schedule(f)
    with pytest.raises(sched.ScheduleError, match="the let variable x, which holds data"):
        sch.compute_inline(sch.get_block("B"))


@pytest.mark.parametrize("consumer", [
    # a let that held data would hold index arithmetic (exact) after the inline
    "x: T.int32 = B[vi]\n            C[vi] = A[x * 1073741824 // 1073741824 % 8]",
    # a binding likewise
    None,
])
def test_a_variable_that_held_data_may_not_become_index_arithmetic(consumer):
    # x * 2**30 // 2**30 wrapped (x data); inlined, x = vi and it would not (helper-139)
    binding = consumer is None
    body = ("vi = T.axis.opaque(8, B[i])\n            C[vi] = A[vi * 1073741824 // "
            "1073741824 % 8]") if binding else ("vi = T.axis.spatial(8, i)\n            "
                                                 + consumer)
    f = sched.parse(f'''
@T.prim_func
def f(A: T.Buffer((8,), "int32"), C: T.Buffer((8,), "int32")):
    B = T.alloc_buffer((8,), "int32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = vi
    for i in range(8):
        with T.block("C"):
            {body}
''')
    sch = sched.Schedule(f)
    with pytest.raises(sched.ScheduleError, match="held data .* may differ"):
        sch.compute_inline(sch.get_block("B"))


def test_a_let_of_a_gather_in_an_index_is_inlined():
    # `x = I[vi]; C[vi] = B[x]`: one value either way (refused by the first fix; helper-139)
    f = sched.parse('''
@T.prim_func
def f(A: T.Buffer((8,), "int32"), G: T.Buffer((8,), "int32"), C: T.Buffer((8,), "int32")):
    B = T.alloc_buffer((8,), "int32")
    for i in range(8):
        with T.block("B"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] + vi * 3
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            x: T.int32 = G[vi]
            C[vi] = B[x]
''')
    sch = sched.Schedule(f)
    sch.compute_inline(sch.get_block("B"))
    a, g = np.arange(8, dtype=np.int32) * 10, np.array([3, 1, 4, 1, 5, 0, 2, 6], np.int32)
    c = np.zeros(8, np.int32)
    sched.build(sch.func, target="c")(a, g, c)
    np.testing.assert_array_equal(c, a[g] + g * 3)


# B[vj] = A[vj * 2**30 // 2**30]: exact in an index (A[vj]), wrapping once it computes on a
# gathered value
_EXACT_IN_AN_INDEX = '''
@T.prim_func
def f(A: T.Buffer((8,), "int32"), G: T.Buffer((8,), "int32"), C: T.Buffer((8,), "int32")):
    B = T.alloc_buffer((8,), "int32")
    for j in range(8):
        with T.block("B"):
            vj = T.axis.spatial(8, j)
            B[vj] = A[vj * 1073741824 // 1073741824]
'''


@pytest.mark.parametrize("consumer", [
    "vi = T.axis.spatial(8, i)\n            C[vi] = B[G[vi]]",
    # a let bound to the gather, an opaque binding to it (audit helper-143)
    "vi = T.axis.spatial(8, i)\n            x: T.int32 = G[vi]\n            C[vi] = B[x]",
    "vi = T.axis.opaque(8, G[i])\n            C[i] = B[vi]",
])
def test_a_gather_into_a_producer_computing_exactly_in_an_index_is_refused(consumer):
    # B[vj] = A[vj * 2**30 // 2**30] (exact: A[vj]); read at B[G[vi]], the index would
    # become arithmetic on data and wrap (A[-2] read: helper-139)
    f = sched.parse(_EXACT_IN_AN_INDEX + f'''    for i in range(8):
        with T.block("C"):
            {consumer}
''')
    sch = sched.Schedule(f)
    with pytest.raises(sched.ScheduleError, match="computes with vj in an index where it holds "
                                                  "index arithmetic"):
        sch.compute_inline(sch.get_block("B"))


@pytest.mark.parametrize("body, oracle", [
    ("x: T.int32 = vi + 1\n            C[vi] = A[(x * 1073741824 // 1073741824 + 7) % 8] + "
     "(vi + 1)", lambda v: (v + 8) % 8 * 10 + v + 1),
    ("C[vi] = vi + 1\n            while C[vi] < (vi + 1) * 1073741824 // 1073741824 + 4:\n"
     "                C[vi] = C[vi] + 1", lambda v: v + 5),
])
def test_cache_index_keeps_lets_and_while_conditions_exact(body, oracle):
    # the let's whole value and a while condition were replaced by the cached (wrapping)
    # value (helper-139)
    f = sched.parse(f'''
@T.prim_func
def f(A: T.Buffer((8,), "int32"), C: T.Buffer((8,), "int32")):
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            {body}
''')
    a = np.arange(8, dtype=np.int32) * 10
    expected = np.array([oracle(v) for v in range(8)], np.int32)
    np.testing.assert_array_equal(_run(f, a, np.zeros(8, np.int32)), expected)
    sch = sched.Schedule(f)
    sch.cache_index(sch.get_block("C"), "global")
    np.testing.assert_array_equal(_run(sch.func, a, np.zeros(8, np.int32)), expected)


def test_a_paged_table_gathered_by_rows_is_inlined():
    # Pages[vp // 16, vp % 16, vd] read at kv[I[vi], vd]: a division of the row, no sum or
    # product that could wrap, computes alike on data (refused by helper-139's rule: 140)
    f = sched.parse('''
@T.prim_func
def f(P: T.Buffer((4, 16, 8), "float32"), I: T.Buffer((5,), "int32"),
      O: T.Buffer((5, 8), "float32")):
    kv = T.alloc_buffer((64, 8), "float32")
    for p, d in T.grid(64, 8):
        with T.block("kv"):
            vp, vd = T.axis.remap("SS", [p, d])
            kv[vp, vd] = P[vp // 16, vp % 16, vd]
    for i, d in T.grid(5, 8):
        with T.block("O"):
            vi, vd = T.axis.remap("SS", [i, d])
            O[vi, vd] = kv[I[vi], vd]
''')
    sch = sched.Schedule(f)
    sch.compute_inline(sch.get_block("kv"))
    rng = np.random.default_rng(4)
    pages, rows = rng.random((4, 16, 8), dtype=np.float32), np.array([3, 63, 0, 17, 40], np.int32)
    out = np.zeros((5, 8), np.float32)
    sched.build(sch.func, target="c")(pages, rows, out)
    np.testing.assert_array_equal(out, pages.reshape(64, 8)[rows])


def test_an_unsigned_value_inlined_into_an_index_wraps_as_stored():
    # uint32 arithmetic wraps in every context: inlined both ways (refused as a change from
    # wrapping to exact: interval arithmetic took 0 - 1 as -1, audit helper-143)
    f = _producer_consumer('T.Cast("uint32", vi) - T.uint32(1)',
                           'A[T.Cast("int32", B[vi] // T.uint32(1073741824))]',
                           b=8, c=8, dtype="uint32")
    a = np.arange(8, dtype=np.int32) * 10
    stored = np.arange(8, dtype=np.uint32) - np.uint32(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sched.ConservativeAnalysisWarning)
        _inlined_both_ways(f, a, a[(stored // np.uint32(2**30)).astype(np.int32)])


@pytest.mark.parametrize("consumer", [
    # a let around the block, an outer block's binding (audit helper-147)
    '''    for i in range(8):
        x: T.int32 = G[i]
        with T.block("C"):
            vi = T.axis.opaque(8, x)
            vc = T.axis.spatial(8, i)
            C[vc] = B[vi]''',
    '''    for i in range(8):
        with T.block("outer"):
            vo = T.axis.opaque(8, G[i])
            T.reads(G[i], B[0:8])
            T.writes(C[i])
            with T.block("C"):
                vi = T.axis.spatial(8, vo)
                C[i] = B[vi]''',
])
def test_a_gather_bound_outside_the_reading_block_refuses_the_inline_too(consumer):
    f = sched.parse(_EXACT_IN_AN_INDEX + consumer + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sched.ConservativeAnalysisWarning)
        sch = sched.Schedule(f)
        with pytest.raises(sched.ScheduleError, match="computes with vj in an index where it "
                                                      "holds index arithmetic"):
            sch.compute_inline(sch.get_block("B"))


def test_inlining_through_a_mask_of_63_bits_keeps_the_mask():
    # T.bitwise_and(x, 2**63 - 1) became x % 2**63, a constant no int64 holds: A[-1] was read
    # (audit helper-171)
    func = sched.parse('''
@T.prim_func
def f(A: T.Buffer((8,), "float32"), C: T.Buffer((4,), "float32")):
    B = T.alloc_buffer((T.int64(8),), "float32")
    for i in T.serial(T.int64(8)):
        with T.block("B"):
            vi = T.axis.spatial(T.int64(8), i)
            B[vi] = A[vi] + T.Cast("float32", vi)
    for j in T.serial(T.int64(4)):
        with T.block("C"):
            vj = T.axis.spatial(T.int64(4), j)
            C[vj] = B[T.bitwise_and(vj * T.int64(2**62), T.int64(9223372036854775807))
                      // T.int64(2**62)]
''')
    sch = sched.Schedule(func)
    sch.compute_inline(sch.get_block("B"))
    a = np.arange(8, dtype=np.float32) * 10
    positions = [(j * 2**62 % 2**63) // 2**62 for j in range(4)]
    c = np.zeros(4, np.float32)
    sched.build(sch.mod, target="c")(a, c)
    np.testing.assert_array_equal(c, [a[p] + p for p in positions])

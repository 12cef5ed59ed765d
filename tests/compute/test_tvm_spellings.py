"""te definitions as TVM users write them (audit helper-48's list): `A(i, j)`, `tag=`,
`varargs_names=`, a list of values (several outputs of one op), `**`, and TVM's promotion of
operands of different dtypes (BinaryOpMatchTypes). Numbers against numpy on the C target."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import DSLError
from sched.ir.builders import promoted
from sched.script import T
from tests.conftest import assert_close


def run(outputs, *arrays):
    func = te.create_prim_func(outputs)
    copies = [np.array(a, copy=True) for a in arrays]
    sched.build(func, target="c")(*copies)
    return copies


@pytest.mark.parametrize("a, b, expected", [
    ("float16", "float32", "float32"), ("float32", "float64", "float64"),
    ("int32", "float16", "float16"), ("bool", "float32", "float32"),
    ("int8", "int32", "int32"), ("uint8", "uint32", "uint32"), ("bool", "uint8", "uint8"),
    # a signed and an unsigned integer: the wider one's type, the unsigned one's where they
    # are as wide (TVM's rule; sched made a signed one, audit helper-115)
    ("uint8", "int8", "uint8"), ("int8", "uint16", "uint16"), ("uint32", "int32", "uint32"),
    ("int64", "uint32", "int64"), ("bool", "int32", "int32"),
    ("float16", "bfloat16", None),
])
def test_promoted_dtypes_follow_tvm(a, b, expected):
    assert promoted(a, b) == expected and promoted(b, a) == expected


def test_a_signed_and_an_unsigned_integer_compute_in_tvms_type():
    # uint32 // int32 is uint32 in TVM (and C): sched computed it as int32 (helper-115)
    U = te.placeholder((4,), "uint32", name="U")
    D = te.placeholder((4,), "int32", name="D")
    U8 = te.placeholder((4,), "uint8", name="U8")
    I8 = te.placeholder((4,), "int8", name="I8")
    Q = te.compute((4,), lambda i: U[i] // D[i], name="Q")
    S = te.compute((4,), lambda i: te.cast(U8[i] + I8[i], "int32"), name="S")
    assert Q.dtype == "uint32"
    u = np.array([10, 4000000000, 7, 99], np.uint32)
    d = np.array([-1, 2, -3, 3], np.int32)
    u8, i8 = np.array([200, 1, 250, 100], np.uint8), np.array([10, 3, 2, 28], np.int8)
    q, s = run([U, D, U8, I8, Q, S], u, d, u8, i8, np.zeros(4, np.uint32),
               np.zeros(4, np.int32))[4:]
    np.testing.assert_array_equal(q, u // d.astype(np.uint32))
    np.testing.assert_array_equal(s, (u8 + i8.astype(np.uint8)).astype(np.int32))


def test_integers_and_bools_beside_floats_are_promoted():
    A = te.placeholder((6, 6), name="A")
    B = te.compute((6, 6), lambda i, j: A[i, j] * i + A[i, j] * (i == j) + j * 0.5
                   + ((i == j) + 2), name="B")
    assert B.dtype == "float32"
    a = np.random.default_rng(0).standard_normal((6, 6)).astype("float32")
    i, j = np.indices((6, 6))
    _, b = run([A, B], a, np.zeros((6, 6), "float32"))
    assert_close(b, a * i + a * (i == j) + j * 0.5 + ((i == j) + 2))


def test_float16_beside_float32_computes_in_float32():
    A = te.placeholder((8,), "float16", name="A")
    B = te.placeholder((8,), "float32", name="B")
    C = te.compute((8,), lambda i: A[i] + B[i], name="C")
    assert C.dtype == "float32"
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(8).astype("float16"), rng.standard_normal(8).astype("float32")
    *_, c = run([A, B, C], a, b, np.zeros(8, "float32"))
    assert_close(c, a.astype("float32") + b)


def test_a_bool_beside_an_int_counts():
    A = te.placeholder((5,), "int32", name="A")
    B = te.compute((5,), lambda i: A[i] + (i == 2) + 2, name="B")
    assert B.dtype == "int32"
    a = np.arange(5, dtype="int32") * 10
    _, b = run([A, B], a, np.zeros(5, "int32"))
    np.testing.assert_array_equal(b, a + (np.arange(5) == 2) + 2)


def test_call_spelling_tag_and_varargs_names():
    A = te.placeholder((3, 4), name="A")
    B = te.compute((3, 4), lambda *idx: A(*idx) * 3.0, name="B", tag="elemwise",
                   varargs_names=["row", "col"])
    assert B.op.tag == "elemwise"
    assert "for row, col in T.grid(3, 4):" in te.create_prim_func([A, B]).script()
    a = np.random.default_rng(2).standard_normal((3, 4)).astype("float32")
    _, b = run([A, B], a, np.zeros((3, 4), "float32"))
    assert_close(b, a * 3)


def test_a_list_of_values_is_several_outputs_of_one_block():
    A = te.placeholder((4, 8), name="A")
    B, C = te.compute((4, 8), lambda i, j: [A[i, j] * 2.0, A[i, j] + A[i, 7 - j]], name="B")
    D = te.compute((4, 8), lambda i, j: B[i, j] - C[i, j], name="D")
    func = te.create_prim_func([A, C, D])
    assert func.script().count('with T.block("B"):') == 1
    sch = sched.Schedule(func)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("D"))[0])
    a = np.random.default_rng(3).standard_normal((4, 8)).astype("float32")
    c, d = np.zeros((4, 8), "float32"), np.zeros((4, 8), "float32")
    sched.build(sch.func, target="c")(a, c, d)
    assert_close(c, a + a[:, ::-1])
    assert_close(d, 2 * a - (a + a[:, ::-1]))
    (one,) = [te.compute((4, 8), lambda i, j: [A[i, j] + 1.0], name="E")]
    assert isinstance(one, te.Tensor) and one.name == "E"


def test_a_list_of_reductions_is_refused_with_advice():
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    with pytest.raises(DSLError, match="te.comm_reducer"):
        te.compute((4,), lambda i: [te.sum(A[i, k], axis=k), te.max(A[i, k], axis=k)])


def test_power_operator():
    A = te.placeholder((6,), name="A")
    B = te.compute((6,), lambda i: A[i] ** 2 + 2.0 ** A[i] + te.power(A[i], i), name="B")
    a = np.random.default_rng(4).uniform(0.5, 1.5, 6).astype("float32")
    _, b = run([A, B], a, np.zeros(6, "float32"))
    assert_close(b, a ** 2 + 2.0 ** a + a ** np.arange(6), rtol=1e-5)
    with pytest.raises(TypeError, match="cast the base first"):
        te.compute((6,), lambda i: i ** 2)


def test_a_float_index_is_refused_where_it_is_written():
    A = te.placeholder((8,), name="A")
    with pytest.raises(DSLError, match="an index must be an integer"):
        te.compute((8,), lambda i: A[i * 0.5])


@T.prim_func
def _literals_beside_bools_and_mixed_branches(C: T.Buffer((8,), "int32"),
                                              D: T.Buffer((8,), "int32"),
                                              E: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            C[vi] = (vi > 3) * 5
            D[vi] = (vi > 3) + 2
            E[vi] = T.if_then_else(vi > 3, 2.5, vi)


def test_tvmscript_literals_and_branches_are_matched_as_in_te():
    """An int literal beside a bool is an int32 (it became T.bool(True): (vi > 3) * 5 stored
    0/1), and T.if_then_else's branches are promoted (float32 beside int32 was a VerifyError
    at build); audit helper-51."""
    c, d, e = np.zeros(8, "int32"), np.zeros(8, "int32"), np.zeros(8, "float32")
    sched.build(_literals_beside_bools_and_mixed_branches, target="c")(c, d, e)
    i = np.arange(8)
    np.testing.assert_array_equal(c, (i > 3) * 5)
    np.testing.assert_array_equal(d, (i > 3) + 2)
    np.testing.assert_array_equal(e, np.where(i > 3, 2.5, i).astype("float32"))
    A = te.placeholder((8,), "int32", name="A")
    F = te.compute((8,), lambda j: te.if_then_else(j > 3, 2.5, A[j]), name="F")
    assert F.dtype == "float32"

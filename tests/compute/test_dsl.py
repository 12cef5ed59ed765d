"""The compute DSL: the blocks it makes, and the errors it gives for definitions that do not
describe a computation."""

from __future__ import annotations

import re

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import DSLError
from sched.ir import BlockRealize, For, IterVar, Range, Var, collect, const
from sched.ir.verify import verify


def blocks(func):
    return {r.block.name: r.block for r in collect(func.body, BlockRealize)}


def test_matmul_block_has_spatial_and_reduce_axes_and_an_init():
    A = te.placeholder((8, 6), name="A")
    B = te.placeholder((6, 4), name="B")
    func = te.create_prim_func([A, B, te.ops.matmul(A, B)])
    verify(func)
    block = blocks(func)["C"]
    assert [iv.kind for iv in block.iter_vars] == ["spatial", "spatial", "reduce"]
    assert block.iter_vars[2] == IterVar(Var("v_k"), Range(const(0, "int32"), const(6, "int32")),
                                         "reduce")
    assert block.init is not None
    assert {r.buffer.name for r in block.reads} == {"A", "B", "C"}
    assert [r.buffer.name for r in block.writes] == ["C"]
    loops = collect(func.body, For)
    assert [loop.loop_var.name for loop in loops] == ["i", "j", "k"]


def test_intermediate_computes_become_root_allocations():
    X = te.placeholder((4, 5), name="X")
    func = te.create_prim_func([X, te.ops.softmax(X)])
    assert [b.name for b in func.body.block.alloc_buffers] == [
        "softmax_max", "softmax_exp", "softmax_sum"]
    assert list(blocks(func)) == ["root", "softmax_max", "softmax_exp", "softmax_sum", "softmax"]


def test_symbolic_dim_is_a_function_symbol():
    n = te.var("n")
    A = te.placeholder((n, 3), name="A")
    func = te.create_prim_func([A, te.compute((n, 3), lambda i, j: A[i, j] + 1.0, name="B")])
    assert func.symbolic_vars == (Var("n"),)
    verify(func)


def test_stencil_read_region_covers_the_neighbours():
    A = te.placeholder((10,), name="A")
    B = te.compute((8,), lambda i: A[i] + A[i + 1] + A[i + 2], name="B")
    block = blocks(te.create_prim_func([A, B]))["B"]
    (region,) = block.reads
    assert region.region == (Range(Var("v_i"), const(3, "int32")),)


def test_lambda_arity_must_match_the_shape():
    A = te.placeholder((4, 4), name="A")
    with pytest.raises(DSLError, match=r"takes 1 arguments \(i\) but the shape has 2 dim"):
        te.compute((4, 4), lambda i: A[i, i], name="B")


def test_reduce_axis_outside_a_reducer_is_refused():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    with pytest.raises(DSLError, match="reduce axis 'k' is used outside a reducer"):
        te.compute((4,), lambda i: A[i, k] * 2.0, name="B")


def test_a_reduce_axis_name_is_free_again_in_other_computes():
    # the registry of reduce axes knew them by name: a symbolic dim "m" was then taken for
    # a reduce axis "m" made anywhere before (another program of the process)
    te.reduce_axis((0, 9), name="m")
    m = te.var("m")
    A = te.placeholder((m,), name="A")
    B = te.compute((m,), lambda i: A[i] * 2.0, name="B")
    a, b = np.arange(5, dtype=np.float32), np.zeros(5, np.float32)
    sched.build(te.create_prim_func([A, B]), target="c")(a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_an_axis_named_like_a_symbolic_dim_is_renamed():
    # conv2d's axes are (n, k, p, q): over a batch of te.var("n") the loop variable was the
    # dim itself in the function (an isl syntax error at the first step)
    import torch

    batch = te.var("n")
    D = te.placeholder((batch, 3, 6, 6), name="D")
    W = te.placeholder((4, 3, 3, 3), name="W")
    func = te.create_prim_func([D, W, te.ops.conv2d_nchw(D, W, stride=1, padding=1)])
    script = func.script()
    assert re.search(r"for n_1\w*, k, p, q, rc, ry, rx in T.grid\(n, 4, 6, 6, 3, 3, 3\)", script)
    rng = np.random.default_rng(0)
    d = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    out = np.zeros((2, 4, 6, 6), np.float32)
    sched.build(func, target="c")(d, w, out)
    expected = torch.nn.functional.conv2d(torch.from_numpy(d), torch.from_numpy(w), padding=1)
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-4, atol=1e-4)


def test_a_reduce_axis_named_like_a_symbolic_dim_is_refused():
    n = te.var("n")
    A = te.placeholder((4, n), name="A")
    k = te.reduce_axis((0, n), name="n")
    with pytest.raises(DSLError, match="reduce axis 'n' has the name of a symbolic dim"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")


def test_an_axis_named_like_a_reduce_axis_is_renamed():
    # audit, helper-94: `lambda x: te.sum(C[k, x], axis=k)` with k named "x" read C[x, x]
    C = te.placeholder((5, 40), name="C")
    k = te.reduce_axis((0, 5), name="x")
    func = te.create_prim_func([C, te.compute((40,), lambda x: te.sum(C[k, x], axis=k),
                                              name="D")])
    c = np.random.default_rng(0).random((5, 40), dtype=np.float32)
    d = np.full(40, np.nan, np.float32)
    sched.build(func, target="c")(c, d)
    np.testing.assert_allclose(d, c.sum(axis=0), rtol=1e-5)


def test_an_axis_named_like_a_scalar_of_the_body_is_renamed():
    # audit, helper-97: m = te.var("i") read by `lambda i: A[i + m]` made A[v_i + v_i]
    A = te.placeholder((8,), name="A")
    m = te.var("i")
    func = te.create_prim_func([A, m, te.compute((4,), lambda i: A[i + m], name="D")])
    a = np.random.default_rng(0).random(8, dtype=np.float32)
    d = np.full(4, np.nan, np.float32)
    sched.build(func, target="c")(a, 3, d)
    np.testing.assert_array_equal(d, a[3:7])


def test_a_reduce_axis_named_like_a_scalar_of_the_body_or_listed_twice_is_refused():
    A = te.placeholder((4, 8), name="A")
    m, k = te.var("k"), te.reduce_axis((0, 4), name="k")
    with pytest.raises(DSLError, match="reads a variable named like its reduce axis 'k'"):
        te.compute((4,), lambda i: te.sum(A[i, k + m], axis=k), name="D")
    with pytest.raises(DSLError, match="a reduce axis is listed twice"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=[k, k]), name="E")


def test_two_reduce_axes_of_one_name_are_refused():
    A = te.placeholder((4, 5, 6), name="A")
    k1, k2 = te.reduce_axis((0, 5), name="k"), te.reduce_axis((0, 6), name="k")
    with pytest.raises(DSLError, match="two reduce axes are named 'k'"):
        te.compute((4,), lambda i: te.sum(A[i, k1, k2], axis=[k1, k2]), name="D")


def test_a_reduction_init_may_read_a_tensor_at_the_output_index():
    # the init kept the lambda's variable i instead of the block's (an isl syntax error on
    # the C target, a VerifyError on CUDA; audit, stop 28)
    X, B = te.placeholder((5, 48), name="X"), te.placeholder((5,), name="B")
    k = te.reduce_axis((0, 48), name="k")
    S = te.compute((5,), lambda i: te.sum(X[i, k], axis=k, init=B[i]), name="S")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 48)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    for target in ("c", "cuda-emu"):
        s = np.zeros(5, np.float32)
        sched.build(te.create_prim_func([X, B, S]), target=target)(x, b, s)
        np.testing.assert_allclose(s, x.astype(np.float64).sum(axis=1) + b, rtol=1e-5,
                                   atol=1e-5)
    with pytest.raises(DSLError, match="reduce axis 'k' is used outside a reducer"):
        te.compute((5,), lambda i: te.sum(X[i, k], axis=k, init=X[i, k]), name="T")


def test_reduction_inside_an_expression_is_refused():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    with pytest.raises(DSLError, match="must be the whole body of a compute"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k) * 2.0, name="B")


def test_placeholder_missing_from_arguments_is_named():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] * 2.0, name="B")
    with pytest.raises(DSLError, match="placeholder 'A' is used by 'B' but is not among"):
        te.create_prim_func([B])


def test_two_tensors_with_one_name_are_refused():
    A = te.placeholder((4,), name="X")
    B = te.compute((4,), lambda i: A[i] * 2.0, name="X")
    with pytest.raises(DSLError, match="two tensors are named 'X'"):
        te.create_prim_func([A, B])


def test_a_dim_named_like_a_tensor_is_renamed():
    # the script printed `A = T.int32()` and then `A = T.match_buffer(...)`, and did not
    # parse back (audit helper-146)
    n = te.var("A")
    A = te.placeholder((n, 3), name="A")
    B = te.compute((n, 3), lambda i, j: A[i, j] * 2.0, name="B")
    f = te.create_prim_func([A, B])
    assert [v.name for v in f.symbolic_vars] == ["A_1"]
    assert sched.parse(f.script()) == f


def test_float16_beside_bfloat16_needs_a_cast():
    A = te.placeholder((4,), "float16", name="A")
    B = te.placeholder((4,), "bfloat16", name="B")
    with pytest.raises(TypeError, match="cast one operand first"):
        te.compute((4,), lambda i: A[i] + B[i], name="C")


def test_math_on_integers_asks_for_a_cast():
    A = te.placeholder((4,), "int32", name="A")
    with pytest.raises(DSLError, match="te.exp needs a floating-point operand"):
        te.compute((4,), lambda i: te.exp(A[i]), name="B")


def test_wrong_number_of_indices_is_refused():
    A = te.placeholder((4, 4), name="A")
    with pytest.raises(DSLError, match="has 2 dimensions but is indexed with 1"):
        te.compute((4,), lambda i: A[i], name="B")


@pytest.mark.parametrize("combiner, init", [("sum", 2.5), ("max", -100.0), ("min", 100.0)])
def test_a_term_left_out_by_where_adds_the_neutral_value_not_the_init(combiner, init):
    # te.sum(..., init=2.5, where=...): the init once, the left-out terms nothing
    A = te.placeholder((3, 12), name="A")
    k = te.reduce_axis((0, 12), name="k")
    B = te.compute((3,), lambda i: getattr(te, combiner)(
        A[i, k], axis=k, init=init, where=te.not_equal(k % 3, 1)), name="B")
    func = te.create_prim_func([A, B])
    a = np.random.default_rng(0).standard_normal((3, 12)).astype("float32")
    kept = a[:, [c for c in range(12) if c % 3 != 1]]
    expected = {"sum": kept.sum(axis=1) + init,
                "max": np.maximum(kept.max(axis=1), init),
                "min": np.minimum(kept.min(axis=1), init)}[combiner]
    for run in (lambda *x: sched.interpret(func, *x),
                lambda *x: sched.build(func, target="c")(*x)):
        out = np.zeros(3, "float32")
        run(a, out)
        np.testing.assert_allclose(out, expected, rtol=1e-5)


def test_const_makes_a_constant_of_a_dtype_as_tvm_te_const():
    assert te.const(0.5, "float16").script() == "T.float16(0.5)"
    assert te.const(3).dtype == "int32" and te.const(2.5).dtype == "float32"
    assert te.const(True).dtype == "bool" and te.const(7, "int64").script() == "T.int64(7)"
    A = te.placeholder((4,), "float16", name="A")
    B = te.compute((4,), lambda i: A[i] * te.const(2.0, "float16"), name="B")
    a, b = np.arange(4, dtype=np.float16), np.zeros(4, np.float16)
    sched.build(te.create_prim_func([A, B]), target="c")(a, b)
    np.testing.assert_array_equal(b, a * np.float16(2))


def test_an_int64_symbolic_dim_makes_int64_axes_as_tvm():
    """Over te.var("n", "int64") the loops and iteration variables are int64 (they were
    int32 over an int64 extent: printed `T.serial(0, n)`, which parsed back as int64)."""
    n = te.var("n", "int64")
    A = te.placeholder((n, 16), name="A")
    k = te.reduce_axis((0, n), name="k")
    func = te.create_prim_func([A, te.compute((16,), lambda j: te.sum(A[k, j], axis=k),
                                              name="S")])
    script = func.script()
    assert "for j, k in T.grid(16, n):" in script and "T.serial" not in script
    assert sched.parse(script) == func
    a, s = np.arange(48, dtype=np.float32).reshape(3, 16), np.zeros(16, np.float32)
    sched.build(func, target="c")(a, s)
    np.testing.assert_array_equal(s, a.sum(0))


def test_equality_with_a_number_builds_a_comparison_as_in_tvm(rng):
    # `i % 2 == 0` gave the Python bool False (structural equality), which if_then_else took
    # as the constant condition: every element got the else branch (audit helper-45)
    A = te.placeholder((9,), name="A")
    B = te.compute((9,), lambda i: te.if_then_else(i % 2 == 0, A[i], A[i] * 3.0), name="B")
    C = te.compute((9,), lambda i: te.if_then_else(i != 4, B[i], -1.0), name="C")
    func = te.create_prim_func([A, C])
    assert "T.if_then_else(v_i % 2 == 0, A[v_i], A[v_i] * T.float32(3.0))" in func.script()
    assert "T.if_then_else(v_i != 4, B[v_i], T.float32(-1.0))" in func.script()
    a = rng.standard_normal(9).astype("float32")
    expected = np.where(np.arange(9) % 2 == 0, a, a * 3)
    expected[4] = -1
    for target in ("c", "cuda-emu"):
        c = np.full(9, np.nan, "float32")
        sched.build(func, target=target)(a, c)
        np.testing.assert_allclose(c, expected, rtol=1e-6)


def test_equality_of_two_expressions_builds_a_comparison_as_in_tvm(rng):
    # `i == j` between two expressions (a mask, a cast, a product, te.all, TOPI's argmax
    # tie-break) was Python's structural equality: the constant False (audit helper-48)
    A = te.placeholder((5, 5), name="A")
    defined = {
        "all": lambda i, j: te.if_then_else(te.all(i >= 0, i == j), A[i, j], 0.0),
        "cast": lambda i, j: A[i, j] * te.cast(i == j, "float32"),
        "not": lambda i, j: te.if_then_else(~(i != j), A[i, j], 0.0),
        "loads": lambda i, j: te.if_then_else(A[i, j] == A[j, i], A[i, j], 0.0),
    }
    a = rng.integers(0, 3, (5, 5)).astype("float32")
    a[np.diag_indices(5)] = 7
    for name, body in defined.items():
        out = te.compute((5, 5), body, name="B")
        b = np.full((5, 5), np.nan, "float32")
        sched.build(te.create_prim_func([A, out]), target="c")(a, b)
        expected = np.where(a == a.T, a, 0) if name == "loads" else np.diag(np.diag(a))
        np.testing.assert_array_equal(b, expected, err_msg=name)


def test_equality_of_expressions_of_different_dtypes_is_refused_as_a_condition():
    A = te.placeholder((4,), name="A")
    with pytest.raises(DSLError, match=r"if_then_else: the condition is the Python bool False: "
                                       r"a constant, or `==` / `!=` between expressions of "
                                       r"different dtypes .*te.equal\(a, b\)"):
        te.compute((4,), lambda i: te.if_then_else(i == te.const(2, "int64"), A[i], 0.0))


def test_comparison_nodes_are_true_when_structurally_equal():
    # internal code compares nodes (`if a == b:`, dict keys): the comparison's truth value is
    # structural equality, as TVM's EqualOp
    assert Var("n") == Var("n")
    assert not (Var("n") == Var("m"))
    assert const(1, "int32") != Var("n")
    assert const(1, "int32") == 1 and not (Var("n") == 1)
    assert (Var("n") + 1 == Var("n") + 1) and {Var("n"): 1}[Var("n")] == 1
    assert not (Var("n") == Var("n", "int64"))                   # different dtypes: a bool
    assert isinstance(Var("i") == Var("j"), sched.ir.nodes.BinaryOp)
    with pytest.raises(TypeError, match="an IR expression has no truth value"):
        bool(Var("n") < 1)


def test_max_and_min_of_three_expressions_take_all_three():
    i = te.var("i")
    assert te.max(i, 2, 3).script() == "T.max(T.max(i, 2), 3)"
    A = te.placeholder((5,), "int32", name="A")
    big = te.compute((5,), lambda i: te.max(A[i], 2, 3), name="B")
    small = te.compute((5,), lambda i: te.min(A[i], 2, 1), name="C")
    a = np.arange(5, dtype="int32")
    for out, expected in ((big, np.maximum(a, 3)), (small, np.minimum(a, 1))):
        b = np.zeros(5, "int32")
        sched.build(te.create_prim_func([A, out]), target="c")(a, b)
        np.testing.assert_array_equal(b, expected)


def test_python_ints_past_int32_are_int64_and_constants_must_fit():
    B = te.compute((4,), lambda i: i * 3000000000, name="B")
    func = te.create_prim_func([B])
    assert 'B: T.Buffer((4,), "int64")' in func.script()
    b = np.zeros(4, "int64")
    sched.build(func, target="c")(b)
    np.testing.assert_array_equal(b, np.arange(4) * 3000000000)
    assert te.const(2 ** 31).dtype == "int64"
    with pytest.raises(TypeError, match=r"the constant 300 is outside int8 \(-128 .. 127\)"):
        te.const(300, "int8")


def test_max_pool_of_int8_pads_with_the_lowest_int8():
    data = te.placeholder((1, 1, 3, 3), "int8", name="X")
    pooled = te.ops.max_pool2d(data, 3, 1, 1)
    x = np.full((1, 1, 3, 3), -5, "int8")
    y = np.zeros((1, 1, 3, 3), "int8")
    sched.build(te.create_prim_func([data, pooled]), target="c")(x, y)
    np.testing.assert_array_equal(y, x)


def test_a_te_var_used_in_a_body_but_in_no_shape_nor_argument_is_refused_at_creation(rng):
    # audit, helper-102: accepted, the script did not parse back and the build failed with
    # "variable 'm' is used outside its scope"
    m = te.var("m")
    A = te.placeholder((4, 6), name="A")
    B = te.compute((4, 6), lambda i, j: A[i, j] + te.cast(m, "float32"), name="B")
    with pytest.raises(DSLError, match="te.var 'm' is used by the computes but is neither"):
        te.create_prim_func([A, B])
    func = te.create_prim_func([A, B, m])           # a scalar parameter
    a = rng.standard_normal((4, 6)).astype(np.float32)
    b = np.zeros((4, 6), np.float32)
    sched.build(func, target="c")(a, b, 3)
    np.testing.assert_allclose(b, a + 3)



@pytest.mark.parametrize("reducer, identity", [(te.max, -3.4028235e38), (te.min, 3.4028235e38)])
def test_a_max_or_min_over_an_empty_where_is_tvms_finite_identity(reducer, identity, rng):
    # audit, helper-105: the empty row was -inf; TVM's te.max starts from min_value("float32")
    A = te.placeholder((7, 13), name="A")
    k = te.reduce_axis((0, 13), "k")
    B = te.compute((7,), lambda i: reducer(A[i, k], axis=k, where=k < i), name="B")
    a = rng.standard_normal((7, 13)).astype(np.float32)
    a[3, :] = -np.inf if reducer is te.max else np.inf       # a row of infinities stays finite
    b = np.zeros(7, np.float32)
    sched.build(te.create_prim_func([A, B]), target="c")(a, b)
    pick = np.max if reducer is te.max else np.min
    expected = [identity] + [max(pick(a[i, :i]), -3.4028235e38) if reducer is te.max else
                             min(pick(a[i, :i]), 3.4028235e38) for i in range(1, 7)]
    np.testing.assert_array_equal(b, np.array(expected, np.float32))


@pytest.mark.parametrize("name", ["A.b", "lambda", "1x", "my tensor"])
def test_a_tensor_name_that_is_no_identifier_is_refused(name):
    # the script named the buffer so and did not parse back (audit helper-115)
    A = te.placeholder((4,), name=name)
    B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
    with pytest.raises(DSLError, match=f"tensor name '{re.escape(name)}' is not a Python "
                       f"identifier"):
        te.create_prim_func([A, B])

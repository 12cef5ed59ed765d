"""The operator library's checks of its operands (te.ops refuses what numpy, torch and TVM's
topi refuse, with a DSLError naming the shapes), create_prim_func's refusal of a parameter
listed twice, and the ranks and symbolic sizes the operators accept, against numpy.

Dims are compared only where both are constants: symbolic dims are taken to agree, so
programs over te.var dims stay accepted."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sched
from sched import compute as te
from sched.errors import DSLError
from sched.ir.verify import verify
from tests.conftest import assert_close


def run(func, *arrays):
    """Build `func` for C, verify it, call it on `arrays` (the last one is the output)."""
    verify(func)
    sched.build(func, target="c")(*arrays)
    return arrays[-1]


def softmax_reference(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layer_norm_reference(x, gamma, beta, epsilon=1e-5):
    x = x.astype(np.float64)
    mean, var = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon) * gamma + beta


# create_prim_func


def test_a_tensor_listed_twice_is_refused():
    # two parameters named B: gcc refused the kernel ("redefinition of parameter 'B'") and
    # the function's own script could not be parsed back
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
    with pytest.raises(DSLError, match=r"tensor 'B' is listed twice among the arguments "
                                       r"\(positions 1 and 2\); list each tensor once"):
        te.create_prim_func([A, B, B])


def test_a_te_var_listed_twice_is_refused():
    # two scalar parameters named n, as two tensors of one name
    n = te.var("n")
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] * te.cast(n, "float32"), name="B")
    with pytest.raises(DSLError, match="te.var 'n' is listed twice.*list each te.var once"):
        te.create_prim_func([A, n, B, n])


# operand shapes that disagree


def test_matmul_refuses_inner_dims_that_differ():
    # (4, 7) @ (8, 5) ignored B's last row
    A = te.placeholder((4, 7), name="A")
    B = te.placeholder((8, 5), name="B")
    with pytest.raises(DSLError, match=r"matmul: the inner dims differ: 'A' \(4, 7\) has 7 at "
                                       r"dim 1 and 'B' \(8, 5\) has 8 at dim 0"):
        te.ops.matmul(A, B)


def test_matmul_bias_relu_refuses_a_bias_of_another_length():
    A = te.placeholder((4, 7), name="A")
    B = te.placeholder((7, 5), name="B")
    with pytest.raises(DSLError, match=r"matmul_bias_relu: the lengths of bias and 'B' differ: "
                                       r"'bias' \(6,\) has 6"):
        te.ops.matmul_bias_relu(A, B, te.placeholder((6,), name="bias"))


def test_batch_matmul_refuses_batches_that_differ():
    # no broadcasting: B[b] was read for b up to A's batch
    A = te.placeholder((2, 3, 4), name="A")
    B = te.placeholder((3, 4, 5), name="B")
    with pytest.raises(DSLError, match=r"batch_matmul: the batch dims differ: 'A' \(2, 3, 4\) "
                                       r"has 2 at dim 0 and 'B' \(3, 4, 5\) has 3 at dim 0"):
        te.ops.batch_matmul(A, B)


def test_batch_matmul_refuses_inner_dims_that_differ():
    A = te.placeholder((2, 3, 4), name="A")
    B = te.placeholder((2, 6, 5), name="B")
    with pytest.raises(DSLError, match="batch_matmul: the inner dims differ"):
        te.ops.batch_matmul(A, B)


def test_conv2d_refuses_channels_that_differ():
    # the weight's fourth input channel was ignored
    data = te.placeholder((1, 3, 6, 6), name="D")
    weight = te.placeholder((2, 4, 3, 3), name="W")
    with pytest.raises(DSLError, match=r"conv2d_nchw: the input channels differ: 'D' "
                                       r"\(1, 3, 6, 6\) has 3 at dim 1 and 'W' \(2, 4, 3, 3\) "
                                       r"has 4 at dim 1"):
        te.ops.conv2d_nchw(data, weight)


def test_bias_add_refuses_a_bias_of_another_length():
    X = te.placeholder((3, 4), name="X")
    with pytest.raises(DSLError, match=r"bias_add: the lengths of bias and 'X' differ"):
        te.ops.bias_add(X, te.placeholder((3,), name="b"))


@pytest.mark.parametrize("op", [te.ops.add, te.ops.multiply])
def test_elementwise_ops_refuse_shapes_that_differ(op):
    X = te.placeholder((3, 4), name="X")
    with pytest.raises(DSLError, match=r"the shapes differ: 'X' \(3, 4\) has 3 at dim 0"):
        op(X, te.placeholder((4, 3), name="Y"))
    with pytest.raises(DSLError, match=r"is 2-D and 'Y' \(4,\) is 1-D"):
        op(X, te.placeholder((4,), name="Y"))


@pytest.mark.parametrize("which", ["gamma", "beta"])
def test_layer_norm_refuses_a_gamma_or_beta_of_another_length(which):
    X = te.placeholder((3, 4), name="X")
    vectors = {"gamma": te.placeholder((4,), name="g"), "beta": te.placeholder((4,), name="b")}
    vectors[which] = te.placeholder((5,), name=which[0])
    with pytest.raises(DSLError, match=f"layer_norm: the lengths of {which} and 'X' differ"):
        te.ops.layer_norm(X, vectors["gamma"], vectors["beta"])


def test_layer_norm_refuses_a_gamma_that_is_not_1d():
    X = te.placeholder((3, 4), name="X")
    with pytest.raises(DSLError, match=r"layer_norm: gamma 'g' \(1, 4\) must be 1-D"):
        te.ops.layer_norm(X, te.placeholder((1, 4), name="g"), te.placeholder((4,), name="b"))


# ranks and window arguments


@pytest.mark.parametrize("op", ["softmax", "layer_norm"])
def test_a_0d_tensor_is_refused(op):
    # there is no last axis to normalize over
    X = te.placeholder((), name="X")
    vectors = (te.placeholder((1,), name="g"), te.placeholder((1,), name="b"))
    args = (X, *vectors) if op == "layer_norm" else (X,)
    with pytest.raises(DSLError, match=f"{op}: 'X' \\(\\) is 0-D; {op} works over the last "
                                       f"axis of a tensor of 1 or more dims"):
        getattr(te.ops, op)(*args)


@pytest.mark.parametrize("argument, value, message", [
    ("stride", 0, "stride must be an integer >= 1, got 0"),
    ("padding", -1, "padding must be an integer >= 0, got -1"),
    ("stride", 1.5, "stride must be an integer >= 1, got 1.5"),
])
def test_conv2d_refuses_bad_stride_and_padding(argument, value, message):
    data = te.placeholder((1, 3, 6, 6), name="D")
    weight = te.placeholder((2, 3, 3, 3), name="W")
    with pytest.raises(DSLError, match=f"conv2d_nchw: {message}"):
        te.ops.conv2d_nchw(data, weight, **{argument: value})


@pytest.mark.parametrize("pool", ["max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize("arguments, message", [
    # a stride of 0 divided by zero in the output shape; a kernel of 0 left the output
    # unwritten; a padding of -1 read outside the data
    ({"kernel": 2, "stride": 0}, "stride must be an integer >= 1, got 0"),
    ({"kernel": 2, "padding": -1}, "padding must be an integer >= 0, got -1"),
    ({"kernel": 0}, "kernel must be an integer >= 1, got 0"),
    ({"kernel": 2.0}, "kernel must be an integer >= 1, got 2.0"),
])
def test_pools_refuse_bad_window_arguments(pool, arguments, message):
    data = te.placeholder((1, 1, 6, 6), name="D")
    with pytest.raises(DSLError, match=f"{pool}: {message}"):
        getattr(te.ops, pool)(data, **arguments)


def test_a_window_larger_than_the_padded_input_is_refused():
    # the output would be empty (a negative extent)
    data = te.placeholder((1, 1, 6, 6), name="D")
    with pytest.raises(DSLError, match=r"max_pool2d: a 9x9 window does not fit in 'D' "
                                       r"\(1, 1, 6, 6\) padded by 1"):
        te.ops.max_pool2d(data, 9, padding=1)
    with pytest.raises(DSLError, match="conv2d_nchw: a 7x3 window does not fit"):
        te.ops.conv2d_nchw(data, te.placeholder((1, 1, 7, 3), name="W"))


# what stays accepted, and what is now supported


def test_symbolic_matmul_is_accepted_and_computes(rng):
    # over te.var("k") the library's reduce axis "k" was refused as named like a symbolic dim
    n, k, m = te.var("n"), te.var("k"), te.var("m")
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    func = te.create_prim_func([A, B, te.ops.matmul(A, B)])
    a = rng.standard_normal((5, 9), np.float32)
    b = rng.standard_normal((9, 6), np.float32)
    assert_close(run(func, a, b, np.zeros((5, 6), np.float32)), a @ b)


def test_dims_not_provably_different_are_accepted():
    # two te.vars, or a te.var and a constant, may agree at the call: not refused
    p, q = te.var("p"), te.var("q")
    te.ops.matmul(te.placeholder((4, p), name="A"), te.placeholder((q, 5), name="B"))
    te.ops.matmul(te.placeholder((4, p), name="A"), te.placeholder((7, 5), name="B"))
    te.ops.conv2d_nchw(te.placeholder((1, p, 6, 6), name="D"),
                       te.placeholder((2, 3, 3, 3), name="W"))


def test_conv2d_with_a_symbolic_kernel_size_matches_torch(rng):
    # int(R.value) raised AttributeError on a te.var kernel size
    r = te.var("r")
    data = te.placeholder((2, 3, 9, 8), name="data")
    weight = te.placeholder((4, 3, r, r), name="weight")
    out = te.ops.conv2d_nchw(data, weight, stride=2, padding=1)
    func = te.create_prim_func([data, weight, out])
    x = rng.standard_normal((2, 3, 9, 8), np.float32)
    w = rng.standard_normal((4, 3, 3, 3), np.float32)
    expected = torch.nn.functional.conv2d(torch.from_numpy(x).double(),
                                          torch.from_numpy(w).double(),
                                          stride=2, padding=1).numpy()
    assert_close(run(func, x, w, np.zeros(expected.shape, np.float32)), expected)


@pytest.mark.parametrize("shape", [(11,), (3, 4, 13), (2, 3, 2, 7)])
def test_softmax_over_the_last_axis_matches_numpy(rng, shape):
    # only 2-D was accepted (a 3-D tensor raised ValueError unpacking the shape)
    X = te.placeholder(shape, name="X")
    func = te.create_prim_func([X, te.ops.softmax(X)])
    x = rng.standard_normal(shape, np.float32) * 4
    assert_close(run(func, x, np.zeros_like(x)), softmax_reference(x))


@pytest.mark.parametrize("shape", [(45,), (3, 5, 17), (2, 2, 3, 9)])
def test_layer_norm_over_the_last_axis_matches_numpy(rng, shape):
    # only 2-D was accepted (a 1-D tensor raised ValueError unpacking the shape)
    X = te.placeholder(shape, name="X")
    gamma = te.placeholder(shape[-1:], name="gamma")
    beta = te.placeholder(shape[-1:], name="beta")
    func = te.create_prim_func([X, gamma, beta, te.ops.layer_norm(X, gamma, beta)])
    x = rng.standard_normal(shape, np.float32) + 3
    g = rng.standard_normal(shape[-1], np.float32)
    b = rng.standard_normal(shape[-1], np.float32)
    expected = layer_norm_reference(x, g, b)
    assert_close(run(func, x, g, b, np.zeros_like(x)), expected, rtol=1e-3, atol=1e-4)


def test_softmax_over_a_symbolic_batch_matches_numpy(rng):
    n = te.var("n")
    X = te.placeholder((n, 3, 10), name="X")
    func = te.create_prim_func([X, te.ops.softmax(X)])
    x = rng.standard_normal((4, 3, 10), np.float32)
    assert_close(run(func, x, np.zeros_like(x)), softmax_reference(x))

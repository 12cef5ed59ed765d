"""Common operators written with the DSL, in the style of TVM's topi: each takes tensors and
returns the output tensor, so they compose (`relu(bias_add(matmul(A, B), b))`) and
`te.create_prim_func([inputs..., output])` makes a function of them.

    A = te.placeholder((128, 64), name="A")
    B = te.placeholder((64, 32), name="B")
    C = te.ops.matmul(A, B)
    func = te.create_prim_func([A, B, C])
"""

from __future__ import annotations

import numbers

from sched.compute.intrinsics import cast, exp, if_then_else, rsqrt
from sched.compute.reduction import max as reduce_max
from sched.compute.reduction import sum as reduce_sum
from sched.compute.tensor import ReduceAxis, Tensor, compute, reduce_axis
from sched.errors import DSLError
from sched.ir.dtype import is_float, min_value
from sched.ir.functor import free_vars
from sched.ir.names import fresh
from sched.ir.nodes import IntImm, const, convert, logical_and
from sched.ir.simplify import simplify


def _check_float(op: str, *tensors: Tensor) -> None:
    for tensor in tensors:
        if not is_float(tensor.dtype):
            raise DSLError(f"{op}: '{tensor.name}' has dtype {tensor.dtype}; {op} needs a "
                           f"floating-point input")


def _accumulate(x, out_dtype: str):
    return cast(x, out_dtype)


def _reduce_axis(extent, name: str, *tensors: Tensor) -> ReduceAxis:
    """A reduce axis over [0, extent) named `name`, or `name_1`... where a symbolic dim of the
    tensors is so named (compute refuses a reduce axis named like a symbolic dim, and a
    matmul over te.var("k") dims was refused for the library's choice of name)."""
    taken = {v.name for tensor in tensors for dim in tensor.shape for v in free_vars(dim)}
    return reduce_axis((0, extent), name=fresh(name, taken))


def _described(tensor: Tensor) -> str:
    """`'A' (4, 7)`: a tensor's name and shape, for messages."""
    dims = ", ".join(str(d) for d in tensor.shape)
    return f"'{tensor.name}' ({dims}{',' if tensor.ndim == 1 else ''})"


def _check_same_dim(op: str, what: str, X: Tensor, x_axis: int, Y: Tensor, y_axis: int) -> None:
    """Refuse dims that differ as numpy, torch and TVM's topi do. Only two constants can be
    told apart: symbolic dims (te.var) are taken to agree, as a call binds them."""
    a, b = X.shape[x_axis], Y.shape[y_axis]
    if isinstance(a, IntImm) and isinstance(b, IntImm) and a.value != b.value:
        raise DSLError(f"{op}: {what} differ: {_described(X)} has {a} at dim {x_axis} and "
                       f"{_described(Y)} has {b} at dim {y_axis}; they must be equal")


def _check_same_shape(op: str, X: Tensor, Y: Tensor) -> None:
    if X.ndim != Y.ndim:
        raise DSLError(f"{op}: {_described(X)} is {X.ndim}-D and {_described(Y)} is "
                       f"{Y.ndim}-D; {op} needs tensors of the same shape")
    for axis in range(X.ndim):
        _check_same_dim(op, "the shapes", X, axis, Y, axis)


def _check_vector(op: str, what: str, vector: Tensor, X: Tensor, axis: int) -> None:
    """`vector` is 1-D, one element per index of X's dim `axis`."""
    if vector.ndim != 1:
        raise DSLError(f"{op}: {what} {_described(vector)} must be 1-D (one element per index "
                       f"of dim {axis} of '{X.name}'), got {vector.ndim}-D")
    _check_same_dim(op, f"the lengths of {what} and '{X.name}'", vector, 0, X, axis)


def _check_window(op: str, **arguments) -> None:
    """A window's kernel, stride (integers >= 1) and padding (an integer >= 0)."""
    for argument, value in arguments.items():
        low = 0 if argument == "padding" else 1
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
            raise DSLError(f"{op}: {argument} must be an integer >= {low}, got {value!r}")


def _window_output(op: str, data: Tensor, kernel_h, kernel_w, stride: int, padding: int):
    """The output's (P, Q); refused where it is constant and empty (the window is larger
    than the padded input)."""
    _, _, H, W = data.shape
    P, Q = (simplify(_out_size(size, kernel, stride, padding))
            for size, kernel in ((H, kernel_h), (W, kernel_w)))
    if any(isinstance(d, IntImm) and d.value < 1 for d in (P, Q)):
        raise DSLError(f"{op}: a {kernel_h}x{kernel_w} window does not fit in "
                       f"{_described(data)} padded by {padding}: the output would be {P}x{Q}; "
                       f"use a smaller kernel or more padding")
    return P, Q


def _rows(op: str, X: Tensor) -> tuple[tuple, tuple[str, ...]]:
    """The shape of X less its last axis, and the names of those axes' loops (i for a 2-D
    X, so that hand schedules name them; i0, i1, ... otherwise)."""
    if X.ndim < 1:
        raise DSLError(f"{op}: {_described(X)} is 0-D; {op} works over the last axis of a "
                       f"tensor of 1 or more dims")
    names = ("i",) if X.ndim == 2 else tuple(f"i{d}" for d in range(X.ndim - 1))
    return X.shape[:-1], names


def matmul(A: Tensor, B: Tensor, out_dtype: str | None = None, name: str = "C") -> Tensor:
    """C[i, j] = sum_k A[i, k] * B[k, j], accumulated in `out_dtype` (default A's dtype).

    Accepts A (n, k) and B (k, m), 2-D; inner dims that are different constants are
    refused (symbolic ones are taken to agree)."""
    if A.ndim != 2 or B.ndim != 2:
        raise DSLError(f"matmul: expected 2-D tensors, got {A.ndim}-D and {B.ndim}-D")
    _check_same_dim("matmul", "the inner dims", A, 1, B, 0)
    out_dtype = out_dtype or A.dtype
    k = _reduce_axis(A.shape[1], "k", A, B)
    return compute(
        (A.shape[0], B.shape[1]),
        lambda i, j: reduce_sum(_accumulate(A[i, k], out_dtype) * _accumulate(B[k, j], out_dtype),
                                axis=k),
        name=name)


def batch_matmul(A: Tensor, B: Tensor, out_dtype: str | None = None, name: str = "C") -> Tensor:
    """C[b, i, j] = sum_k A[b, i, k] * B[b, k, j].

    Accepts A (batch, n, k) and B (batch, k, m), 3-D, with equal batch and inner dims (no
    broadcasting of a batch of 1); symbolic dims are taken to agree."""
    if A.ndim != 3 or B.ndim != 3:
        raise DSLError(f"batch_matmul: expected 3-D tensors, got {A.ndim}-D and {B.ndim}-D")
    _check_same_dim("batch_matmul", "the batch dims", A, 0, B, 0)
    _check_same_dim("batch_matmul", "the inner dims", A, 2, B, 1)
    out_dtype = out_dtype or A.dtype
    k = _reduce_axis(A.shape[2], "k", A, B)
    return compute(
        (A.shape[0], A.shape[1], B.shape[2]),
        lambda b, i, j: reduce_sum(
            _accumulate(A[b, i, k], out_dtype) * _accumulate(B[b, k, j], out_dtype), axis=k),
        name=name)


def bias_add(X: Tensor, bias: Tensor, name: str = "bias_add") -> Tensor:
    """Y[i, j] = X[i, j] + bias[j]: X 2-D, bias 1-D of X's dim 1."""
    if X.ndim != 2:
        raise DSLError(f"bias_add: expected a 2-D X, got {_described(X)}")
    _check_vector("bias_add", "bias", bias, X, 1)
    return compute(X.shape, lambda i, j: X[i, j] + bias[j], name=name)


def relu(X: Tensor, name: str = "relu") -> Tensor:
    """max(X, 0), elementwise."""
    zero = const(0, X.dtype)
    return compute(X.shape, lambda *idx: reduce_max(X[idx], zero), name=name)


def matmul_bias_relu(A: Tensor, B: Tensor, bias: Tensor, name: str = "D") -> Tensor:
    """relu(A @ B + bias): a matmul followed by an elementwise epilogue; the operands as
    matmul's, bias 1-D of B's dim 1."""
    C = matmul(A, B, name="C")
    _check_vector("matmul_bias_relu", "bias", bias, B, 1)
    zero = const(0, C.dtype)
    return compute(C.shape, lambda i, j: reduce_max(C[i, j] + bias[j], zero), name=name)


def add(X: Tensor, Y: Tensor, name: str = "add") -> Tensor:
    """X + Y, elementwise (same shapes, no broadcasting)."""
    _check_same_shape("add", X, Y)
    return compute(X.shape, lambda *idx: X[idx] + Y[idx], name=name)


def multiply(X: Tensor, Y: Tensor, name: str = "multiply") -> Tensor:
    """X * Y, elementwise (same shapes, no broadcasting)."""
    _check_same_shape("multiply", X, Y)
    return compute(X.shape, lambda *idx: X[idx] * Y[idx], name=name)


def transpose(X: Tensor, axes: tuple[int, ...] | None = None, name: str = "transpose") -> Tensor:
    """X with its dimensions permuted by `axes` (reversed by default), as numpy.transpose."""
    axes = tuple(reversed(range(X.ndim))) if axes is None else tuple(axes)
    if sorted(axes) != list(range(X.ndim)):
        raise DSLError(f"transpose: axes {axes} is not a permutation of 0..{X.ndim - 1}")
    shape = tuple(X.shape[a] for a in axes)

    def element(*idx):
        source = [None] * X.ndim
        for out_dim, in_dim in enumerate(axes):
            source[in_dim] = idx[out_dim]
        return X[tuple(source)]
    return compute(shape, element, name=name)


def _pad(data: Tensor, padding: int, value, name: str) -> Tensor:
    """NCHW data with `padding` rows/columns of `value` on each side of H and W."""
    if padding == 0:
        return data
    N, C, H, W = data.shape
    fill = const(value, data.dtype)

    def element(n, c, y, x):
        inside = logical_and(y >= padding, y < H + padding, x >= padding, x < W + padding)
        return if_then_else(inside, data[n, c, y - padding, x - padding], fill)
    return compute((N, C, H + 2 * padding, W + 2 * padding), element, name=name)


def _out_size(size, kernel: int, stride: int, padding: int):
    return (convert(size) + 2 * padding - kernel) // stride + 1


def conv2d_nchw(data: Tensor, weight: Tensor, stride: int = 1, padding: int = 0,
                out_dtype: str | None = None, name: str = "conv2d") -> Tensor:
    """2-D convolution: data (N, C, H, W), weight (K, C, R, S) -> (N, K, P, Q).

    Accepts 4-D data and weight with the same C (refused where both are different
    constants), any dims symbolic (the kernel size R, S too), an integer stride >= 1 and
    padding >= 0, and a window that fits in the padded input where that is known."""
    if data.ndim != 4 or weight.ndim != 4:
        raise DSLError("conv2d_nchw: data and weight must be 4-D (NCHW and KCRS)")
    _check_window("conv2d_nchw", stride=stride, padding=padding)
    _check_same_dim("conv2d_nchw", "the input channels", data, 1, weight, 1)
    out_dtype = out_dtype or data.dtype
    N, C, _, _ = data.shape
    K, _, R, S = weight.shape
    P, Q = _window_output("conv2d_nchw", data, R, S, stride, padding)
    padded = _pad(data, padding, 0, name=f"{name}_pad")
    rc = _reduce_axis(C, "rc", data, weight)
    ry = _reduce_axis(R, "ry", data, weight)
    rx = _reduce_axis(S, "rx", data, weight)
    return compute(
        (N, K, P, Q),
        lambda n, k, p, q: reduce_sum(
            _accumulate(padded[n, rc, p * stride + ry, q * stride + rx], out_dtype)
            * _accumulate(weight[k, rc, ry, rx], out_dtype),
            axis=[rc, ry, rx]),
        name=name)


def softmax(X: Tensor, name: str = "softmax") -> Tensor:
    """Softmax over the last axis of a floating-point tensor of 1 or more dims:
    exp(x - max) / sum(exp(x - max)) of each row (numpy's axis=-1)."""
    _check_float("softmax", X)
    rows, outer = _rows("softmax", X)
    names = (*outer, "j")
    k = _reduce_axis(X.shape[-1], "k", X)
    row_max = compute(rows, lambda *r: reduce_max(X[(*r, k)], axis=k), name=f"{name}_max",
                      varargs_names=outer)
    exps = compute(X.shape, lambda *idx: exp(X[idx] - row_max[idx[:-1]]), name=f"{name}_exp",
                   varargs_names=names)
    k2 = _reduce_axis(X.shape[-1], "k", X)
    row_sum = compute(rows, lambda *r: reduce_sum(exps[(*r, k2)], axis=k2),
                      name=f"{name}_sum", varargs_names=outer)
    return compute(X.shape, lambda *idx: exps[idx] / row_sum[idx[:-1]], name=name,
                   varargs_names=names)


def layer_norm(X: Tensor, gamma: Tensor, beta: Tensor, epsilon: float = 1e-5,
               name: str = "layer_norm") -> Tensor:
    """Layer normalization over the last axis of a floating-point tensor of 1 or more dims
    (each row), scaled by gamma and shifted by beta: 1-D, of the last axis' length.

    The row's mean and variance come from two independent sums (one pass over the row each,
    which a schedule may fuse) of the row shifted by its first element: the variance as
    E[d^2] - E[d]^2 of d = x - x[0]. Unshifted, E[x^2] - E[x]^2 cancels catastrophically
    where the mean is large against the spread (float32 rows of mean 1000 and deviation 0.05
    gave variances of 0 and 0.125 for 0.0025, and NaN rows; audit, helper-32); shifted by
    an element of the row, the sums stay of the spread's size."""
    _check_float("layer_norm", X, gamma, beta)
    rows, outer = _rows("layer_norm", X)
    _check_vector("layer_norm", "gamma", gamma, X, X.ndim - 1)
    _check_vector("layer_norm", "beta", beta, X, X.ndim - 1)
    cols = X.shape[-1]
    count = cast(cols, X.dtype)

    def deviation(r, k):                   # x - x[0] along the row
        return X[(*r, k)] - X[(*r, 0)]
    k = _reduce_axis(cols, "k", X)
    shifted_sum = compute(rows, lambda *r: reduce_sum(deviation(r, k), axis=k),
                          name=f"{name}_sum", varargs_names=outer)
    k2 = _reduce_axis(cols, "k", X)
    square = compute(rows, lambda *r: reduce_sum(deviation(r, k2) * deviation(r, k2), axis=k2),
                     name=f"{name}_sqsum", varargs_names=outer)

    def normalize(*idx):
        r, j = idx[:-1], idx[-1]
        shift = shifted_sum[r] / count
        variance = square[r] / count - shift * shift
        mu = X[(*r, 0)] + shift
        return (X[idx] - mu) * rsqrt(variance + const(epsilon, X.dtype)) * gamma[j] + beta[j]
    return compute(X.shape, normalize, name=name, varargs_names=(*outer, "j"))


def _pool2d(data: Tensor, kernel: int, stride: int, padding: int, kind: str,
            name: str) -> Tensor:
    if data.ndim != 4:
        raise DSLError(f"{kind}_pool2d: data must be 4-D NCHW, got {data.ndim}-D")
    _check_window(f"{kind}_pool2d", kernel=kernel, stride=stride, padding=padding)
    N, C, _, _ = data.shape
    P, Q = _window_output(f"{kind}_pool2d", data, kernel, kernel, stride, padding)
    if kind == "max":
        pad_value = min_value(data.dtype)          # the lowest of the dtype (int8: -128)
    else:
        pad_value = 0
    padded = _pad(data, padding, pad_value, name=f"{name}_pad")
    ry = _reduce_axis(kernel, "ry", data)
    rx = _reduce_axis(kernel, "rx", data)

    def window(n, c, p, q):
        return padded[n, c, p * stride + ry, q * stride + rx]
    if kind == "max":
        return compute((N, C, P, Q),
                       lambda n, c, p, q: reduce_max(window(n, c, p, q), axis=[ry, rx]),
                       name=name)
    total = compute((N, C, P, Q),
                    lambda n, c, p, q: reduce_sum(window(n, c, p, q), axis=[ry, rx]),
                    name=f"{name}_sum")
    area = const(kernel * kernel, data.dtype)
    return compute((N, C, P, Q), lambda n, c, p, q: total[n, c, p, q] / area, name=name)


def max_pool2d(data: Tensor, kernel: int, stride: int = 1, padding: int = 0,
               name: str = "max_pool2d") -> Tensor:
    """Maximum over kernel x kernel windows of 4-D NCHW data (padding counts as the dtype's
    lowest value); an integer kernel and stride >= 1, padding >= 0, and a window that fits
    in the padded input where that is known."""
    return _pool2d(data, kernel, stride, padding, "max", name)


def avg_pool2d(data: Tensor, kernel: int, stride: int = 1, padding: int = 0,
               name: str = "avg_pool2d") -> Tensor:
    """Mean over kernel x kernel windows of 4-D floating-point NCHW data (padding counts as
    0, divisor k*k); the arguments as max_pool2d's."""
    _check_float("avg_pool2d", data)
    return _pool2d(data, kernel, stride, padding, "avg", name)

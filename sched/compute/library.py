"""Common operators written with the DSL, in the style of TVM's topi: each takes tensors and
returns the output tensor, so they compose (`relu(bias_add(matmul(A, B), b))`) and
`te.create_prim_func([inputs..., output])` makes a function of them.

    A = te.placeholder((128, 64), name="A")
    B = te.placeholder((64, 32), name="B")
    C = te.ops.matmul(A, B)
    func = te.create_prim_func([A, B, C])
"""

from __future__ import annotations

from sched.compute.intrinsics import cast, exp, if_then_else, rsqrt
from sched.compute.reduction import max as reduce_max
from sched.compute.reduction import sum as reduce_sum
from sched.compute.tensor import Tensor, compute, reduce_axis
from sched.errors import DSLError
from sched.ir.dtype import is_float, min_value
from sched.ir.nodes import const, convert, logical_and


def _check_float(op: str, *tensors: Tensor) -> None:
    for tensor in tensors:
        if not is_float(tensor.dtype):
            raise DSLError(f"{op}: '{tensor.name}' has dtype {tensor.dtype}; {op} needs a "
                           f"floating-point input")


def _accumulate(x, out_dtype: str):
    return cast(x, out_dtype)


def matmul(A: Tensor, B: Tensor, out_dtype: str | None = None, name: str = "C") -> Tensor:
    """C[i, j] = sum_k A[i, k] * B[k, j], accumulated in `out_dtype` (default A's dtype)."""
    if A.ndim != 2 or B.ndim != 2:
        raise DSLError(f"matmul: expected 2-D tensors, got {A.ndim}-D and {B.ndim}-D")
    out_dtype = out_dtype or A.dtype
    k = reduce_axis((0, A.shape[1]), name="k")
    return compute(
        (A.shape[0], B.shape[1]),
        lambda i, j: reduce_sum(_accumulate(A[i, k], out_dtype) * _accumulate(B[k, j], out_dtype),
                                axis=k),
        name=name)


def batch_matmul(A: Tensor, B: Tensor, out_dtype: str | None = None, name: str = "C") -> Tensor:
    """C[b, i, j] = sum_k A[b, i, k] * B[b, k, j]."""
    if A.ndim != 3 or B.ndim != 3:
        raise DSLError(f"batch_matmul: expected 3-D tensors, got {A.ndim}-D and {B.ndim}-D")
    out_dtype = out_dtype or A.dtype
    k = reduce_axis((0, A.shape[2]), name="k")
    return compute(
        (A.shape[0], A.shape[1], B.shape[2]),
        lambda b, i, j: reduce_sum(
            _accumulate(A[b, i, k], out_dtype) * _accumulate(B[b, k, j], out_dtype), axis=k),
        name=name)


def bias_add(X: Tensor, bias: Tensor, name: str = "bias_add") -> Tensor:
    """Y[i, j] = X[i, j] + bias[j]."""
    return compute(X.shape, lambda i, j: X[i, j] + bias[j], name=name)


def relu(X: Tensor, name: str = "relu") -> Tensor:
    """max(X, 0), elementwise."""
    zero = const(0, X.dtype)
    return compute(X.shape, lambda *idx: reduce_max(X[idx], zero), name=name)


def matmul_bias_relu(A: Tensor, B: Tensor, bias: Tensor, name: str = "D") -> Tensor:
    """relu(A @ B + bias): a matmul followed by an elementwise epilogue."""
    C = matmul(A, B, name="C")
    zero = const(0, C.dtype)
    return compute(C.shape, lambda i, j: reduce_max(C[i, j] + bias[j], zero), name=name)


def add(X: Tensor, Y: Tensor, name: str = "add") -> Tensor:
    """X + Y, elementwise (same shapes)."""
    return compute(X.shape, lambda *idx: X[idx] + Y[idx], name=name)


def multiply(X: Tensor, Y: Tensor, name: str = "multiply") -> Tensor:
    """X * Y, elementwise (same shapes)."""
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
    """2-D convolution: data (N, C, H, W), weight (K, C, R, S) -> (N, K, P, Q)."""
    if data.ndim != 4 or weight.ndim != 4:
        raise DSLError("conv2d_nchw: data and weight must be 4-D (NCHW and KCRS)")
    if stride < 1 or padding < 0:
        raise DSLError(f"conv2d_nchw: stride must be >= 1 and padding >= 0, got stride={stride},"
                       f" padding={padding}")
    out_dtype = out_dtype or data.dtype
    N, C, H, W = data.shape
    K, _, R, S = weight.shape
    kernel_h, kernel_w = int(R.value), int(S.value)
    padded = _pad(data, padding, 0, name=f"{name}_pad")
    rc = reduce_axis((0, C), name="rc")
    ry = reduce_axis((0, kernel_h), name="ry")
    rx = reduce_axis((0, kernel_w), name="rx")
    P = _out_size(H, kernel_h, stride, padding)
    Q = _out_size(W, kernel_w, stride, padding)
    return compute(
        (N, K, P, Q),
        lambda n, k, p, q: reduce_sum(
            _accumulate(padded[n, rc, p * stride + ry, q * stride + rx], out_dtype)
            * _accumulate(weight[k, rc, ry, rx], out_dtype),
            axis=[rc, ry, rx]),
        name=name)


def softmax(X: Tensor, name: str = "softmax") -> Tensor:
    """Softmax of each row of a 2-D tensor: exp(x - max) / sum(exp(x - max))."""
    _check_float("softmax", X)
    rows, cols = X.shape
    k = reduce_axis((0, cols), name="k")
    row_max = compute((rows,), lambda i: reduce_max(X[i, k], axis=k), name=f"{name}_max")
    exps = compute((rows, cols), lambda i, j: exp(X[i, j] - row_max[i]), name=f"{name}_exp")
    k2 = reduce_axis((0, cols), name="k")
    row_sum = compute((rows,), lambda i: reduce_sum(exps[i, k2], axis=k2), name=f"{name}_sum")
    return compute((rows, cols), lambda i, j: exps[i, j] / row_sum[i], name=name)


def layer_norm(X: Tensor, gamma: Tensor, beta: Tensor, epsilon: float = 1e-5,
               name: str = "layer_norm") -> Tensor:
    """Layer normalization of each row of a 2-D tensor, scaled by gamma and shifted by beta.

    The row's mean and variance come from two independent sums (one pass over the row each,
    which a schedule may fuse) of the row shifted by its first element: the variance as
    E[d^2] - E[d]^2 of d = x - x[0]. Unshifted, E[x^2] - E[x]^2 cancels catastrophically
    where the mean is large against the spread (float32 rows of mean 1000 and deviation 0.05
    gave variances of 0 and 0.125 for 0.0025, and NaN rows; audit, helper-32); shifted by
    an element of the row, the sums stay of the spread's size."""
    _check_float("layer_norm", X, gamma, beta)
    rows, cols = X.shape
    count = cast(cols, X.dtype)
    k = reduce_axis((0, cols), name="k")
    shifted_sum = compute((rows,), lambda i: reduce_sum(X[i, k] - X[i, 0], axis=k),
                          name=f"{name}_sum")
    k2 = reduce_axis((0, cols), name="k")
    square = compute((rows,), lambda i: reduce_sum((X[i, k2] - X[i, 0]) * (X[i, k2] - X[i, 0]),
                                                   axis=k2), name=f"{name}_sqsum")

    def normalize(i, j):
        shift = shifted_sum[i] / count
        variance = square[i] / count - shift * shift
        mu = X[i, 0] + shift
        return (X[i, j] - mu) * rsqrt(variance + const(epsilon, X.dtype)) * gamma[j] + beta[j]
    return compute((rows, cols), normalize, name=name)


def _pool2d(data: Tensor, kernel: int, stride: int, padding: int, kind: str,
            name: str) -> Tensor:
    if data.ndim != 4:
        raise DSLError(f"{kind}_pool2d: data must be 4-D NCHW, got {data.ndim}-D")
    N, C, H, W = data.shape
    if kind == "max":
        pad_value = min_value(data.dtype)          # the lowest of the dtype (int8: -128)
    else:
        pad_value = 0
    padded = _pad(data, padding, pad_value, name=f"{name}_pad")
    ry = reduce_axis((0, kernel), name="ry")
    rx = reduce_axis((0, kernel), name="rx")
    P = _out_size(H, kernel, stride, padding)
    Q = _out_size(W, kernel, stride, padding)

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
    """Maximum over kernel x kernel windows of NCHW data (padding counts as -inf)."""
    return _pool2d(data, kernel, stride, padding, "max", name)


def avg_pool2d(data: Tensor, kernel: int, stride: int = 1, padding: int = 0,
               name: str = "avg_pool2d") -> Tensor:
    """Mean over kernel x kernel windows of NCHW data (padding counts as 0, divisor k*k)."""
    _check_float("avg_pool2d", data)
    return _pool2d(data, kernel, stride, padding, "avg", name)

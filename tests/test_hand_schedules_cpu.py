"""The CPU hand schedules (`sched.hand_schedules.cpu_*`) on the C target: results against numpy
at small and odd sizes, and the structure the schedules promise (rows or panels in parallel,
the innermost loops vectorized with the host's width)."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import hand_schedules as hs
from sched.c.isa import host_isa

LANES = host_isa().lanes("float32")


def _relative_error(got: np.ndarray, expected: np.ndarray) -> float:
    return float(np.max(np.abs(got - expected)) / max(np.max(np.abs(expected)), 1e-30))


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _layer_norm(x, gamma, beta, epsilon=1e-5):
    x = x.astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + epsilon) * gamma + beta


def _conv2d(data, weight, stride, padding):
    data = np.pad(data.astype(np.float64), ((0, 0), (0, 0), (padding,) * 2, (padding,) * 2))
    n, c, h, w = data.shape
    k, _, r, s = weight.shape
    p, q = (h - r) // stride + 1, (w - s) // stride + 1
    out = np.zeros((n, k, p, q))
    for y in range(r):
        for x in range(s):
            window = data[:, :, y:y + stride * p:stride, x:x + stride * q:stride]
            out += np.einsum("nchw,kc->nkhw", window, weight[:, :, y, x].astype(np.float64))
    return out


@pytest.mark.parametrize("shape", [(64, 64, 32), (37, 45, 29), (8, 2 * LANES, 5), (1, 1, 1),
                                   (3, 1, 5), (2, 33, 1)])
def test_cpu_matmul_matches_numpy(shape):
    M, N, K = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    out = np.full((M, N), np.nan, np.float32)
    sched.build(hs.cpu_matmul(M, N, K).func, target="c")(a, b, out)
    assert _relative_error(out, a.astype(np.float64) @ b) < 1e-5


def test_cpu_matmul_structure():
    sch = hs.cpu_matmul(64, 64, 32)
    text = str(sch.func)
    assert "T.parallel(" in text and "T.vectorized(" in text and "T.unroll(" in text
    assert 'scope="local"' in text             # the register tile
    source = sched.build(sch.func, target="c").source
    assert "#pragma omp parallel for" in source
    assert f"vectorized: {LANES} lanes" in source or LANES == 1


@pytest.mark.parametrize("shape", [(1, 8, 12, 12, 8, 3, 1, 1), (1, 3, 9, 11, 5, 3, 1, 1),
                                   (2, 4, 10, 10, 6, 3, 2, 1), (1, 4, 8, 8, 4, 1, 1, 0)])
def test_cpu_conv2d_matches_numpy(shape):
    N, C, H, W, K, R, stride, padding = shape
    rng = np.random.default_rng(1)
    data = rng.standard_normal((N, C, H, W)).astype(np.float32)
    weight = rng.standard_normal((K, C, R, R)).astype(np.float32)
    expected = _conv2d(data, weight, stride, padding)
    out = np.full(expected.shape, np.nan, np.float32)
    sch = hs.cpu_conv2d(N, C, H, W, K, R, stride=stride, padding=padding)
    sched.build(sch.func, target="c")(data, weight, out)
    assert _relative_error(out, expected) < 1e-5


def test_cpu_conv2d_structure():
    sch = hs.cpu_conv2d(1, 8, 16, 16, 8)
    text = str(sch.func)
    assert "T.parallel(" in text and "T.vectorized(" in text
    assert 'scope="local"' in text                     # the register tile
    assert "weight_global" in text                      # the packed weights
    trace = str(sch.trace)
    assert "cache_read" in trace and "cache_write" in trace
    # the lanes are output channels: weights packed with the channel tile innermost, the
    # accumulators laid out (row, column, channel)
    assert trace.count("transform_layout") == 2
    tile = min(8, LANES)
    assert f"weight_global[v_k // {tile}, v_rc, v_ry, v_rx, v_k % {tile}]" in text
    assert "conv2d_local[v_n, v_p, v_q, v_k] = conv2d_local[v_n, v_p, v_q, v_k] + " in text


@pytest.mark.parametrize("shape", [(16, 64), (5, 37), (3, LANES), (2, 1), (1, 3)])
@pytest.mark.parametrize("store_exp", [False, True])
def test_cpu_softmax_matches_numpy(shape, store_exp):
    rows, cols = shape
    x = (np.random.default_rng(2).standard_normal(shape) * 4).astype(np.float32)
    out = np.full(shape, np.nan, np.float32)
    sched.build(hs.cpu_softmax(rows, cols, store_exp=store_exp).func, target="c")(x, out)
    np.testing.assert_allclose(out, _softmax(x.astype(np.float64)), rtol=1e-5, atol=1e-7)


def test_cpu_softmax_structure():
    sch = hs.cpu_softmax(16, 64)
    text = str(sch.func)
    assert "T.parallel(" in text
    assert text.count("T.vectorized(") >= 3      # the two reductions' partials, the output
    assert "softmax_max_rf" in text and "softmax_sum_rf" in text


@pytest.mark.parametrize("shape", [(16, 64), (5, 37), (3, LANES), (2, 1)])
def test_cpu_layer_norm_matches_numpy(shape):
    rows, cols = shape
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(shape) + 0.5).astype(np.float32)
    gamma = rng.standard_normal(cols).astype(np.float32)
    beta = rng.standard_normal(cols).astype(np.float32)
    out = np.full(shape, np.nan, np.float32)
    sched.build(hs.cpu_layer_norm(rows, cols).func, target="c")(x, gamma, beta, out)
    np.testing.assert_allclose(out, _layer_norm(x, gamma, beta), rtol=1e-4, atol=1e-4)


def test_cpu_layer_norm_structure():
    sch = hs.cpu_layer_norm(16, 64)
    text = str(sch.func)
    assert "T.parallel(" in text
    assert text.count("T.vectorized(") >= 3
    assert "layer_norm_sum_rf" in text and "layer_norm_sqsum_rf" in text


def test_row_schedules_take_a_symbolic_row_length():
    # their rfactored lanes under the row loop were T.min(n, 16), which vectorize refused
    # (audit helper-148)
    from sched import compute as te

    x = (np.random.default_rng(4).standard_normal((3, 37)) + 0.5).astype(np.float32)
    out = np.full(x.shape, np.nan, np.float32)
    sched.build(hs.cpu_softmax(3, te.var("n")).func, target="c")(x, out)
    np.testing.assert_allclose(out, _softmax(x.astype(np.float64)), rtol=1e-5, atol=1e-7)
    gamma, beta = np.ones(37, np.float32), np.zeros(37, np.float32)
    sched.build(hs.cpu_layer_norm(3, te.var("n")).func, target="c")(x, gamma, beta, out)
    np.testing.assert_allclose(out, _layer_norm(x, gamma, beta), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(32, 48, 16), (4, 16, 3)])
def test_cpu_matmul_tensorized_matches_numpy(shape):
    M, N, K = shape
    rng = np.random.default_rng(0)
    a, b = rng.random((M, K), dtype=np.float32), rng.random((K, N), dtype=np.float32)
    out = np.zeros((M, N), np.float32)
    sch = hs.cpu_matmul_tensorized(M, N, K)
    assert "outer_product_4x16_f32" in str(sch.trace)
    sched.build(sch.func, target="c")(a, b, out)
    assert _relative_error(out, a @ b) < 1e-5


def test_cpu_matmul_tensorized_refuses_partial_tiles():
    with pytest.raises(ValueError, match="M must be a multiple of 4 and N of 16"):
        hs.cpu_matmul_tensorized(30, 32, 8)


@pytest.mark.parametrize("schedule, cols, partials, hint", [
    (hs.cpu_softmax, 33, 8, "leave partials out"),
    (hs.cpu_layer_norm, 100, 12, "pass a divisor of 100, e.g. partials=4")])
def test_partial_results_that_do_not_divide_the_row_are_refused(schedule, cols, partials, hint):
    # audit (helper-32): the reduction's split left partials short a column, and
    # decompose_reduction refused on a block the caller never named
    with pytest.raises(ValueError, match=f"partials={partials} does not divide cols={cols}: "
                                         f".*; {hint}"):
        schedule(3, cols, partials=partials)

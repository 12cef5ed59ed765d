"""The GPU-marked numbers tests of tests/cuda and tests/autoscheduler, run on the emulator
(target "cuda-emu"): the same CUDA C, on the CPU, at sizes that keep the suite quick (each
emulated block starts one host thread per CUDA thread)."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import hand_schedules
from sched.cuda.emu.kernel import EmulatedKernel
from sched.errors import KernelArgumentError
from sched.ir import Buffer, BufferStore, For, IntImm, PrimFunc, Var
from sched.lower.launch import LaunchConfig
from tests.cuda.emu.kernels import DYNAMIC_SHARED, HALF_ROUND_TRIP, emulate
from tests.cuda.kernels import HALF_AXPY, TILED_MATMUL, VECTOR_ADD
from tests.cuda.test_runtime import vector_add_func


def vector_add(block=256) -> EmulatedKernel:
    func = vector_add_func()
    n = func.symbolic_vars[0]
    launch = LaunchConfig(grid=((n + block - 1) // block, 1, 1), block=(block, 1, 1))
    return EmulatedKernel(func, VECTOR_ADD, "vector_add", launch)


@pytest.mark.parametrize("size", [1, 1000, 1537])
def test_vector_add_on_numpy_arrays(size, rng):
    a, b = (rng.standard_normal(size).astype(np.float32) for _ in range(2))
    c = np.zeros_like(a)
    vector_add()(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_vector_add_on_cpu_torch_tensors():
    import torch

    a, b = torch.randn(300), torch.randn(300)
    c = torch.empty_like(a)
    vector_add()(a, b, c)
    torch.testing.assert_close(c, a + b)


def test_empty_grid_launches_nothing():
    # (an empty array is refused by the argument checks: symbolic dims are at least 1; a
    # grid sized by a scalar parameter may still be empty)
    m, i = Var("m"), Var("i")
    A, B, C = (Buffer(name, (IntImm(8),)) for name in "ABC")
    func = PrimFunc("vector_add", (A, B, C, m),
                    For(i, IntImm(0), IntImm(8), "serial", BufferStore(C, A[i], (i,))))
    kernel = EmulatedKernel(func, VECTOR_ADD.replace("int n", "int m").replace("i < n", "i < 8"),
                            "vector_add", LaunchConfig(grid=(m, 1, 1), block=(8, 1, 1)))
    a, b, c = np.ones(8, np.float32), np.ones(8, np.float32), np.zeros(8, np.float32)
    kernel(a, b, c, 0)
    assert not c.any()
    kernel(a, b, c, 1)
    np.testing.assert_array_equal(c, a + b)


def test_cuda_tensors_are_refused():
    # the emulator takes CPU memory, as the C target does
    kernel = vector_add()
    with pytest.raises(KernelArgumentError, match=r"argument 1 'A': expected a numpy array"):
        kernel([1.0], np.zeros(1, np.float32), np.zeros(1, np.float32))


def test_tiled_matmul_with_shared_memory(rng):
    n, i = Var("n"), Var("i")
    A, B, C = (Buffer(name, (n, n)) for name in "ABC")
    func = PrimFunc("matmul", (A, B, C),
                    For(i, IntImm(0), n, "serial", BufferStore(C, A[i, i] * B[i, i], (i, i))))
    launch = LaunchConfig(grid=(n // 32, n // 32, 1), block=(32, 32, 1))
    a, b = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    c = np.zeros_like(a)
    EmulatedKernel(func, TILED_MATMUL, "matmul", launch)(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_half_kernel_with_a_float_scalar(rng):
    n, i = Var("n"), Var("i")
    X, Y = Buffer("X", (n,), "float16"), Buffer("Y", (n,), "float16")
    func = PrimFunc("half_axpy", (X, Y, Var("alpha", "float32")),
                    For(i, IntImm(0), n, "serial", BufferStore(Y, Y[i], (i,))))
    kernel = EmulatedKernel(func, HALF_AXPY, "half_axpy",
                            LaunchConfig(grid=((n + 127) // 128, 1, 1), block=(128, 1, 1)))
    x = rng.standard_normal(500).astype(np.float16)
    y = rng.standard_normal(500).astype(np.float16)
    expected = (x.astype(np.float64) * np.float16(0.5) + y).astype(np.float16)
    kernel(x, y, 0.5)
    np.testing.assert_array_equal(y, expected)     # one rounding of the exact result


def test_16_bit_conversions_round_like_numpy():
    # every float16 and bfloat16 rounding case: ties, subnormals, overflow, inf, NaN
    bits = np.arange(0, 2 ** 32, 65537 * 3, dtype=np.uint64).astype(np.uint32)
    edges = np.array([0x33000000, 0x33000001, 0x387fe000, 0x38800000, 0x477fefff, 0x477ff000,
                      0x3f801000, 0x3f803000, 0x3f808000, 0x3f818000, 0x7f800000, 0x7fc00001],
                     np.uint32)
    x = np.concatenate([bits, edges, edges | 0x80000000]).view(np.float32)
    x = x[: len(x) // 128 * 128]
    h = np.zeros(len(x), np.float16)
    b = np.zeros(len(x), np.uint16)
    emulate(HALF_ROUND_TRIP, "round_trip", [x.shape, h.shape, b.shape], block=(128, 1, 1),
            grid=(len(x) // 128, 1, 1), dtypes=["float32", "float16", "bfloat16"])(x, h, b)
    with np.errstate(over="ignore"):
        expected_half = x.astype(np.float16)
    np.testing.assert_array_equal(h.view(np.uint16)[~np.isnan(x)],
                                  expected_half.view(np.uint16)[~np.isnan(x)])
    assert np.isnan(h[np.isnan(x)]).all()
    from sched.c.dtypes import _round_bfloat16

    finite = ~np.isnan(x)
    expected_bf16 = np.array([_round_bfloat16(v) for v in x[finite]], np.float32)
    np.testing.assert_array_equal((b[finite].astype(np.uint32) << 16).view(np.float32),
                                  expected_bf16)


def test_more_than_48_kb_of_dynamic_shared_memory(rng):
    n, i = Var("n"), Var("i")
    A, B = Buffer("A", (n,)), Buffer("B", (n,))
    func = PrimFunc("reverse", (A, B), For(i, IntImm(0), n, "serial",
                                          BufferStore(B, A[i], (i,))))
    launch = LaunchConfig(grid=((n + 255) // 256, 1, 1), block=(256, 1, 1),
                          dynamic_shared_bytes=64 * 1024)
    a = rng.standard_normal(512).astype(np.float32)
    b = np.empty_like(a)
    EmulatedKernel(func, DYNAMIC_SHARED, "reverse", launch)(a, b)
    np.testing.assert_array_equal(b, a + a.reshape(-1, 2)[:, ::-1].reshape(-1))


def test_guarded_phases_of_generated_code_reach_every_barrier(rng):
    from tests.cuda.test_lowering_soundness import _half_block_reference, half_block

    a = rng.standard_normal(512).astype(np.float32)
    b = np.zeros(256, np.float32)
    kernel = sched.build(half_block, target="cuda-emu")
    assert kernel.source.count("__syncthreads();") == 2
    kernel(a, b)
    np.testing.assert_allclose(b, _half_block_reference(a), rtol=1e-6)


def test_16bit_float_scalars_arrive_as_their_values():
    from tests.test_scalars_16bit import add_scalars

    kernel = sched.build(add_scalars, target="cuda-emu")
    assert "__bfloat162float(g)" in kernel.source and "__half2float(h)" in kernel.source
    a = np.ones(4, np.float32)
    kernel(a, 0.5, 0.25)
    np.testing.assert_array_equal(a, np.full(4, 1.75, np.float32))


def test_a_wrong_candidate_computes_wrong_numbers():
    # tests/autoscheduler/test_measure.py's GPU test: the measurer tells a candidate whose
    # init is 1 from the right one; here the numbers of both, as the CUDA C computes them
    schedule = hand_schedules.gpu_matmul(64, 64, 32, block_tile=(32, 32), thread_tile=(2, 2))
    good = schedule.func.script()
    wrong = good.replace("T.float32(0.0)", "T.float32(1.0)")
    assert wrong != good
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((64, 32)).astype(np.float32), \
        rng.standard_normal((32, 64)).astype(np.float32)
    results = []
    for script in (good, wrong):
        c = np.zeros((64, 64), np.float32)
        sched.build(sched.parse(script), target="cuda-emu")(a, b, c)
        results.append(c)
    np.testing.assert_allclose(results[0], a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(results[1], results[0] + 1, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["matmul", "mbr"])
def test_gpu_sketch_samples_match_numpy_on_emulated_cuda(name):
    # tests/autoscheduler/test_space.py runs them on the C target; here their CUDA C, under
    # ThreadSanitizer where g++ has it
    import random

    from sched.autoscheduler.space.sketch import SearchSpace
    from sched.autoscheduler.workload import Workload
    from tests.autoscheduler.test_space import CASES, _numpy
    from tests.cuda.emu.test_checks import has_tsan

    workload = Workload(CASES[name](), "cuda")
    space = SearchSpace(workload)
    rng = random.Random(1)
    arrays = workload.arrays(1)
    expected = _numpy(name, arrays)
    built = 0
    for attempt in range(10):
        try:
            sample = space.sample(attempt % len(space.sketches), None, rng)
        except Exception:            # a refused genome or sketch is dropped, never built
            continue
        got = [a.copy() for a in arrays]
        sched.build(sample.schedule.func, target="cuda-emu",
                    sanitize="thread" if has_tsan() else None)(*got)
        np.testing.assert_allclose(got[-1], expected, rtol=1e-4, atol=1e-4)
        built += 1
        if built == 2:
            break
    assert built == 2

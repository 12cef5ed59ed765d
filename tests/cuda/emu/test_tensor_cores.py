"""The emulation header's tensor-core fragments (nvcuda::wmma) and asynchronous copies
(cuda_pipeline.h) against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from sched.errors import EmulationError
from tests.cuda.emu.kernels import PIPELINED_COPY, WMMA_MATMUL, emulate


def test_wmma_matmul_half_in_float_out(rng):
    a = rng.standard_normal((32, 32)).astype(np.float16)
    b = rng.standard_normal((32, 32)).astype(np.float16)
    c = np.zeros((32, 32), np.float32)
    emulate(WMMA_MATMUL, "wmma_matmul", [(32, 32), (32, 32), (32, 32)], block=(128, 1, 1),
            dtypes=["float16", "float16", "float32"])(a, np.ascontiguousarray(b.T), c)
    expected = 2 * (a.astype(np.float64) @ b.astype(np.float64))
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-4)


def test_wmma_with_a_lane_missing_is_reported():
    source = WMMA_MATMUL.replace("    wmma::fill_fragment(c, 0.0f);",
                                 "    if (threadIdx.x % 32 == 31) return;\n"
                                 "    wmma::fill_fragment(c, 0.0f);")
    with pytest.raises(EmulationError, match=r"(?s)deadlock.*wait at wmma::fill_fragment on "
                                             r"line 11"):
        emulate(source, "wmma_matmul", [(32, 32), (32, 32), (32, 32)], block=(128, 1, 1),
                dtypes=["float16", "float16", "float32"])(
            np.zeros((32, 32), np.float16), np.zeros((32, 32), np.float16),
            np.zeros((32, 32), np.float32))


@pytest.mark.parametrize("wait, right", [(0, True), (1, False)])
def test_asynchronous_copies_land_at_the_wait(wait, right):
    a = np.arange(512, dtype=np.float32)
    b = np.zeros(512, np.float32)
    emulate(PIPELINED_COPY.replace("WAIT", str(wait)), "pipelined", [(512,), (512,)],
            block=(32, 1, 1))(a, b)
    if right:
        np.testing.assert_array_equal(b, 2 * a)
    else:       # the first step reads a tile whose copy has not landed: NaN
        assert np.isnan(b[:128]).all()


def test_inline_ptx_cp_async_ldmatrix_and_mma_sync(rng, tmp_path):
    from tests.cuda.emu.kernels import PTX_MMA

    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    d = np.zeros((16, 8), np.float32)
    emulate(PTX_MMA, "ptx_mma", [(16, 16), (8, 16), (16, 8)], block=(32, 1, 1),
            dtypes=["float16", "float16", "float32"])(a, np.ascontiguousarray(b.T), d)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    expected[:, 1::2][8:] += 1.0             # c3 = 1: rows 8..15, odd columns
    np.testing.assert_allclose(d, expected, rtol=1e-5, atol=1e-4)


def test_the_inline_ptx_kernel_is_valid_cuda(tmp_path):
    # the same source compiles for the GPU (so the emulator reads real PTX forms)
    import shutil
    import subprocess

    from tests.cuda.emu.kernels import PTX_MMA

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on the PATH")
    path = tmp_path / "ptx_mma.cu"
    path.write_text(PTX_MMA)
    result = subprocess.run(["nvcc", "-cubin", "-arch=sm_80", str(path), "-o",
                             str(tmp_path / "ptx_mma.cubin")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_unknown_inline_ptx_is_refused_with_what_is_known():
    from sched.errors import BuildError

    source = ('extern "C" __global__ void k(const float* a, float* b) {\n'
              '    asm volatile("bar.sync 0;");\n}\n')
    with pytest.raises(BuildError, match=r"cuda-emu: line 2: inline PTX 'bar.sync 0;' is not "
                                         r"emulated; the emulator knows mma.sync"):
        emulate(source, "k", [(4,), (4,)], block=(4, 1, 1))

"""16-bit float scalar parameters (float16, bfloat16): a value on the C target (not its bits
read as a number), and a CUDA kernel that declares them with their headers and converts them."""

from __future__ import annotations

import numpy as np

import sched
from sched.script import T


@T.prim_func
def add_scalars(a: T.handle, g: T.bfloat16, h: T.float16):
    A = T.match_buffer(a, (4,), "float32")
    for i in T.thread_binding(4, thread="threadIdx.x"):
        with T.block("S"):
            vi = T.axis.spatial(4, i)
            A[vi] = A[vi] + T.Cast("float32", g) + T.Cast("float32", h)


def test_16bit_float_scalars_arrive_as_their_values_on_the_c_target():
    kernel = sched.build(add_scalars, target="c")
    a = np.ones(4, np.float32)
    kernel(a, 0.5, 0.25)
    np.testing.assert_array_equal(a, np.full(4, 1.75, np.float32))


def test_16bit_float_scalars_compile_for_cuda(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHED_CACHE_DIR", str(tmp_path))
    kernel = sched.build(add_scalars, target="cuda", arch="sm_90")
    assert "#include <cuda_bf16.h>" in kernel.source and "#include <cuda_fp16.h>" in kernel.source
    assert "__bfloat162float(g)" in kernel.source and "__half2float(h)" in kernel.source
    assert kernel.cubin.startswith(b"\x7fELF")

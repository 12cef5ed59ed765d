"""sched.cuda.emu.source: `__shared__` declarations as references to each block's shared
memory, every line of the kernel where it was."""

from __future__ import annotations

import numpy as np
import pytest

from sched.cuda.emu.source import emulated_source
from sched.errors import EmulationError
from tests.cuda.emu.kernels import emulate

# shared variables at namespace scope (a dynamic array and a scalar), then a kernel that
# counts its block's threads in the scalar and hangs at line 16 when the block has 64 threads
FILE_SCOPE = r"""
extern __shared__ float dynamic_tile[];
__shared__ int arrivals;  // one per block
extern "C" __global__ void count(const float* __restrict__ a, float* __restrict__ b) {
    /* __shared__ float not_a_declaration[4]; */
    const char* text = "__shared__ float neither[4];";
    if (threadIdx.x == 0) arrivals = 0;
    __syncthreads();
    atomicAdd(&arrivals, 1);
    dynamic_tile[threadIdx.x] = a[blockIdx.x * blockDim.x + threadIdx.x];
    __syncthreads();
    b[blockIdx.x * blockDim.x + threadIdx.x] =
        dynamic_tile[blockDim.x - 1 - threadIdx.x] + arrivals + (text[0] == '_');
    if (blockDim.x == 64) {
        if (threadIdx.x < 32) {
            __syncthreads();
        }
    }
}
"""


def test_declarations_keep_every_line_where_it_was():
    rewritten = emulated_source(FILE_SCOPE)
    original = FILE_SCOPE.splitlines()
    assert "not_a_declaration[4]; */" in rewritten and '"__shared__ float neither[4];"' in rewritten
    assert "static ::sched_emu::SharedSlot sched_emu_slot_arrivals = {-1};" in rewritten
    assert "#define dynamic_tile (reinterpret_cast<float*>(::sched_emu::shared_base))" in rewritten
    # after each namespace-scope declaration a #line directive restores the numbering
    assert rewritten.splitlines()[-1] == original[-1]
    assert "#line 3" in rewritten and "#line 4  // one per block" in rewritten


def test_function_scope_declarations_become_references():
    source = ("__global__ void k() {\n"
              "    __shared__ __align__(16) float A_shared[512];\n"
              "    __shared__ unsigned char bytes[2][64];\n"
              "    extern __shared__ __align__(16) unsigned char sched_shared[];\n}\n")
    rewritten = emulated_source(source).splitlines()
    assert len(rewritten) == 5
    assert rewritten[1] == ("    static ::sched_emu::SharedSlot sched_emu_slot_A_shared = {-1}; "
                            "auto& A_shared = ::sched_emu::shared_variable<float[512]>("
                            "sched_emu_slot_A_shared, 16, 2);")
    assert "shared_variable<unsigned char[2][64]>(sched_emu_slot_bytes, 1, 3)" in rewritten[2]
    assert rewritten[3] == ("    unsigned char* const sched_shared = reinterpret_cast<unsigned "
                            "char*>(::sched_emu::shared_base);")


def test_namespace_scope_shared_memory_is_per_block():
    a = np.arange(96, dtype=np.float32)
    b = np.zeros(96, np.float32)
    kernel = emulate(FILE_SCOPE, "count", [(96,), (96,)], block=(32, 1, 1), grid=(3, 1, 1),
                     dynamic_shared_bytes=32 * 4)
    kernel(a, b)
    expected = a.reshape(3, 32)[:, ::-1].reshape(-1) + 32 + 1
    np.testing.assert_array_equal(b, expected)


def test_lines_after_namespace_scope_declarations_are_the_source_lines():
    a, b = np.zeros(64, np.float32), np.zeros(64, np.float32)
    kernel = emulate(FILE_SCOPE, "count", [(64,), (64,)], block=(64, 1, 1),
                     dynamic_shared_bytes=64 * 4)
    with pytest.raises(EmulationError, match=r"(?s)threads 0-31 wait at __syncthreads\(\) on "
                                             r"line 16.*   16 \|             __syncthreads"):
        kernel(a, b)

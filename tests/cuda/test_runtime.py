"""CudaKernel: compiled at construction, checked arguments, launched on torch's stream.

Construction (compilation, resources, launch checks) runs everywhere; calls need a GPU and are
marked `gpu` (skipped with a reason without one), except the one that checks the no-GPU error.
"""

from __future__ import annotations

import ctypes
import types

import pytest

from sched.arguments import BoundArguments
from sched.cuda import runtime
from sched.cuda.device import current_arch, gpu_available
from sched.cuda.runtime import CudaKernel
from sched.errors import BuildError, KernelArgumentError, NoGPUError
from sched.ir import Buffer, BufferStore, For, IntImm, PrimFunc, Var
from sched.lower.launch import LaunchConfig
from tests.cuda.kernels import HALF_AXPY, TILED_MATMUL, VECTOR_ADD


def vector_add_func() -> PrimFunc:
    """C[i] = A[i] + B[i] over (n,) buffers: the kernel takes (a, b, c, n)."""
    n, i = Var("n"), Var("i")
    A, B, C = (Buffer(name, (n,)) for name in "ABC")
    body = For(i, IntImm(0), n, "serial", BufferStore(C, A[i] + B[i], (i,)))
    return PrimFunc("vector_add", (A, B, C), body)


def vector_add(arch=None, block=256, **kwargs) -> CudaKernel:
    func = vector_add_func()
    n = func.symbolic_vars[0]
    launch = LaunchConfig(grid=((n + block - 1) // block, 1, 1), block=(block, 1, 1),
                          **kwargs)
    return CudaKernel(func, VECTOR_ADD, "vector_add", launch, arch=arch)


def matmul(arch=None) -> CudaKernel:
    """C = A @ B over (n, n) matrices, n a multiple of 32."""
    n, i = Var("n"), Var("i")
    A, B, C = (Buffer(name, (n, n)) for name in "ABC")
    body = For(i, IntImm(0), n, "serial", BufferStore(C, A[i, i] * B[i, i], (i, i)))
    func = PrimFunc("matmul", (A, B, C), body)
    launch = LaunchConfig(grid=(n // 32, n // 32, 1), block=(32, 32, 1))
    return CudaKernel(func, TILED_MATMUL, "matmul", launch, arch=arch)


def test_construction_compiles_and_reports_resources(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHED_CACHE_DIR", str(tmp_path))
    kernel = vector_add(arch="sm_90")
    assert kernel.cubin.startswith(b"\x7fELF") and kernel.source == VECTOR_ADD
    assert kernel.resources.registers > 0 and kernel.resources.threads_per_block == 256
    assert kernel.resources.occupancy is not None
    assert "vector_add(A, B, C): vector_add for sm_90" in repr(kernel)
    assert vector_add(arch="sm_90").compiled.from_cache


def test_arch_defaults_to_the_device_or_sm_90(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHED_CACHE_DIR", str(tmp_path))
    expected = current_arch() if gpu_available() else "sm_90"
    assert vector_add().arch == expected


def test_kernel_name_not_in_the_cubin_says_to_use_extern_c(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHED_CACHE_DIR", str(tmp_path))
    launch = LaunchConfig(grid=(1, 1, 1), block=(32, 1, 1))
    with pytest.raises(BuildError, match=r"no entry function 'add' \(it names vector_add\).*"
                                         r"extern \"C\""):
        CudaKernel(vector_add_func(), VECTOR_ADD, "add", launch, arch="sm_90")


def test_too_much_shared_memory_is_refused_at_build(tmp_path, monkeypatch):
    # sm_86 gives a block at most 99 KB of shared memory
    monkeypatch.setenv("SCHED_CACHE_DIR", str(tmp_path))
    with pytest.raises(BuildError, match=r"cannot launch .* on sm_86:\n  102400 bytes of shared "
                                         r"memory per block"):
        vector_add(arch="sm_86", dynamic_shared_bytes=100 * 1024)


def test_grid_over_an_unknown_variable_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHED_CACHE_DIR", str(tmp_path))
    launch = LaunchConfig(grid=(Var("m"), 1, 1), block=(32, 1, 1))
    with pytest.raises(BuildError, match="grid extent m uses m, which is neither a symbolic dim"):
        CudaKernel(vector_add_func(), VECTOR_ADD, "vector_add", launch, arch="sm_90")


@pytest.mark.skipif(gpu_available(), reason="checks the error on machines without a GPU")
def test_call_without_a_gpu_raises_no_gpu_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHED_CACHE_DIR", str(tmp_path))
    kernel = vector_add(arch="sm_90")
    with pytest.raises(NoGPUError, match=r"calling CUDA kernel 'vector_add': no CUDA GPU/driver "
                                         r"on this machine: kernel calls need one; building "
                                         r"and compiling still work"):
        kernel(None, None, None)


PACKING = r"""
#include <cuda_fp16.h>
extern "C" __global__ void pack(float* __restrict__ a, float alpha, __half h, int k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i] = alpha * __half2float(h) + k;
}
"""


class FakeDriver:
    """Stands for cuda.bindings.driver at a launch: decodes the kernel parameters it is given."""

    def __init__(self, types):
        self.types, self.launches = types, []

    def CUstream(self, handle):
        return ("stream", handle)

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        from cuda.bindings import driver

        pointers = (ctypes.c_void_p * len(self.types)).from_address(params)
        values = [t.from_address(p).value for t, p in zip(self.types, pointers)]
        self.launches.append(((gx, gy, gz), (bx, by, bz), shared, stream, values))
        return (driver.CUresult.CUDA_SUCCESS,)


def test_call_packs_parameters_like_the_c_target(tmp_path, monkeypatch):
    # buffers, then scalar parameters in their dtypes (float16 as its bits), then dims as int32

    monkeypatch.setenv("SCHED_CACHE_DIR", str(tmp_path))
    n, i = Var("n"), Var("i")
    A = Buffer("A", (n,))
    alpha, h, k = Var("alpha", "float32"), Var("h", "float16"), Var("k", "int32")
    func = PrimFunc("pack", (A, alpha, h, k), For(i, IntImm(0), n, "serial",
                                                  BufferStore(A, A[i], (i,))))
    launch = LaunchConfig(grid=((n + 255) // 256, 1, 1), block=(256, 1, 1))
    kernel = CudaKernel(func, PACKING, "pack", launch, arch="sm_90")
    fake = FakeDriver([ctypes.c_void_p, ctypes.c_float, ctypes.c_uint16, ctypes.c_int32,
                       ctypes.c_int32])
    _without_a_gpu(monkeypatch, kernel, fake)
    for size in (1000, 0):
        monkeypatch.setattr(kernel._binder, "bind",
                            lambda args, size=size: BoundArguments((0xABC0,), args, (size,)))
        kernel(2.5, 1.5, 7)
    # n = 0: an empty grid, nothing launched
    assert fake.launches == [((4, 1, 1), (256, 1, 1), 0, ("stream", 1234),
                              [0xABC0, 2.5, 0x3E00, 7, 1000])]


def _without_a_gpu(monkeypatch, kernel, fake):
    """`kernel` launches through `fake` on device 0, stream 1234."""
    from sched.cuda import device

    module = types.SimpleNamespace(_driver=fake, make_current=lambda: None)
    monkeypatch.setattr(runtime, "require_gpu", lambda what: None)
    monkeypatch.setattr(kernel, "_load", lambda ordinal: (module, "function"))
    monkeypatch.setattr(runtime, "current_device_fast", lambda: 0)
    monkeypatch.setattr(kernel._torch_calls, "context", lambda: 0)
    monkeypatch.setattr(device, "_torch_raw_stream", lambda: lambda ordinal: 1234)
    monkeypatch.setattr(device, "_STREAMS", {})


def test_a_call_with_a_known_layout_checks_only_its_pointers(tmp_path, monkeypatch):
    """The second call of a layout skips the binder (TorchCalls), launches with its own
    pointers and the dims bound at the first."""
    import torch

    monkeypatch.setenv("SCHED_CACHE_DIR", str(tmp_path))
    kernel = vector_add(arch="sm_90")
    fake = FakeDriver([ctypes.c_void_p] * 3 + [ctypes.c_int32])
    _without_a_gpu(monkeypatch, kernel, fake)
    binds = []

    def bind(args):         # the binder on tensors it would refuse (they are on the CPU)
        binds.append(args)
        return BoundArguments(tuple(t.data_ptr() for t in args), (), (args[0].shape[0],))

    monkeypatch.setattr(kernel._binder, "bind", bind)
    first = [torch.zeros(1000) for _ in range(3)]
    second = [torch.zeros(1000) for _ in range(3)]
    kernel(*first)
    kernel(*second)
    assert len(binds) == 1
    assert [launch[4] for launch in fake.launches] == [
        [t.data_ptr() for t in first] + [1000], [t.data_ptr() for t in second] + [1000]]
    kernel(*[torch.zeros(999) for _ in range(3)])            # another layout: checked
    assert len(binds) == 2 and fake.launches[-1][0] == (4, 1, 1)


# -- on a GPU ----------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("size", [1, 1000, 4096, 100_003])
def test_vector_add_on_torch_tensors(size):
    import torch

    kernel = vector_add()
    a, b = torch.randn(size, device="cuda"), torch.randn(size, device="cuda")
    c = torch.empty_like(a)
    kernel(a, b, c)
    torch.testing.assert_close(c, a + b)


@pytest.mark.gpu
def test_launch_is_on_the_current_stream():
    import torch

    kernel = vector_add()
    a, b = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    c = torch.zeros_like(a)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        kernel(a, b, c)
        d = c * 2                 # ordered after the kernel on the same stream
    stream.synchronize()
    torch.testing.assert_close(d, (a + b) * 2)


@pytest.mark.gpu
def test_empty_problem_is_refused_as_on_the_c_target():
    # accesses are proven in bounds for symbolic sizes of at least 1 (a loop of constant
    # extent may read element 0 of an n-element buffer): a size of 0 is refused with advice,
    # on every target, rather than launched
    import torch

    empty = torch.empty(0, device="cuda")
    with pytest.raises(KernelArgumentError, match="is 0: a kernel with symbolic dims runs on "
                                                  "sizes of at least 1"):
        vector_add()(empty, empty, empty)


@pytest.mark.gpu
def test_tiled_matmul_with_shared_memory():
    import torch

    a, b = torch.randn(256, 256, device="cuda"), torch.randn(256, 256, device="cuda")
    c = torch.empty_like(a)
    matmul()(a, b, c)
    expected = (a.double() @ b.double()).float()
    torch.testing.assert_close(c, expected, rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_half_kernel_with_a_float_scalar():
    import torch

    n, i = Var("n"), Var("i")
    X, Y = Buffer("X", (n,), "float16"), Buffer("Y", (n,), "float16")
    alpha = Var("alpha", "float32")
    func = PrimFunc("half_axpy", (X, Y, alpha),
                    For(i, IntImm(0), n, "serial", BufferStore(Y, Y[i], (i,))))
    kernel = CudaKernel(func, HALF_AXPY, "half_axpy",
                        LaunchConfig(grid=((n + 127) // 128, 1, 1), block=(128, 1, 1)))
    x = torch.randn(5000, device="cuda", dtype=torch.float16)
    y = torch.randn(5000, device="cuda", dtype=torch.float16)
    expected = x.float() * 0.5 + y.float()
    kernel(x, y, 0.5)
    torch.testing.assert_close(y.float(), expected, rtol=1e-2, atol=1e-2)


DYNAMIC_SHARED = r"""
extern "C" __global__ void reverse(const float* __restrict__ a, float* __restrict__ b, int n) {
  extern __shared__ float tile[];          // 64 KB: needs the opt-in attribute
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[16383 - threadIdx.x] = i < n ? a[i] : 0.0f;
  __syncthreads();
  if (i < n) b[i] = tile[16383 - threadIdx.x] + tile[16383 - (threadIdx.x ^ 1)];
}
"""


@pytest.mark.gpu
def test_more_than_48_kb_of_dynamic_shared_memory():
    import torch

    n, i = Var("n"), Var("i")
    A, B = Buffer("A", (n,)), Buffer("B", (n,))
    func = PrimFunc("reverse", (A, B), For(i, IntImm(0), n, "serial",
                                          BufferStore(B, A[i], (i,))))
    launch = LaunchConfig(grid=((n + 255) // 256, 1, 1), block=(256, 1, 1),
                          dynamic_shared_bytes=64 * 1024)
    kernel = CudaKernel(func, DYNAMIC_SHARED, "reverse", launch)
    a = torch.randn(1024, device="cuda")
    b = torch.empty_like(a)
    kernel(a, b)
    torch.testing.assert_close(b, a + a.view(-1, 2).flip(1).reshape(-1))


@pytest.mark.gpu
def test_cpu_tensors_and_numpy_arrays_are_refused():
    import numpy as np
    import torch

    kernel = vector_add()
    a = torch.randn(8, device="cuda")
    with pytest.raises(KernelArgumentError, match=r"argument 2 'B': expected a tensor on cuda, "
                                                  r"got one on cpu: move it with .cuda\(\)"):
        kernel(a, torch.randn(8), a)
    with pytest.raises(KernelArgumentError, match=r"argument 1 'A': .* got a numpy array .*: "
                                                  r"move it to the GPU"):
        kernel(np.zeros(8, np.float32), a, a)


@pytest.mark.gpu
def test_cubin_for_another_arch_family_is_refused_at_the_call():
    import torch

    arch = "sm_80" if not current_arch().startswith("sm_8") else "sm_90"
    kernel = vector_add(arch=arch)
    a = torch.randn(8, device="cuda")
    with pytest.raises(BuildError, match=f"was compiled for {arch}, but CUDA device"):
        kernel(a, torch.randn_like(a), torch.empty_like(a))

"""`kernel.export(dir)` for CUDA: the files, the launcher compiled by gcc against the CUDA
headers (no GPU needed), and, with a GPU, a C program that runs the exported kernel."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import sched
from sched import compute as te
from sched import hand_schedules
from tests.c.c_programs import Pointer, c_program, program_arrays, run_c_program

GCC = ["gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror"]


def cuda_include_dir() -> Path | None:
    """A directory holding cuda.h: the nvidia PyPI wheels', else the CUDA toolkit's."""
    candidates = [Path(p) / "nvidia" / sub / "include" for p in sys.path
                  for sub in ("cu13", "cuda_runtime", "cu12")]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            candidates.append(Path(home) / "include")
    return next((c for c in candidates if (c / "cuda.h").is_file()), None)


INCLUDE = cuda_include_dir()
needs_cuda_h = pytest.mark.skipif(INCLUDE is None, reason="no cuda.h found (neither the "
                                  "nvidia-cuda-runtime wheel nor a CUDA toolkit)")


def symbolic_scale():
    n = te.var("n")
    A = te.placeholder((n, 32), "float32", name="A")
    B = te.compute((n, 32), lambda i, j: A[i, j] * 3 + 1, name="B")
    func = te.create_prim_func([A, B], name="scale")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")              # the default schedule's note
        return sched.build(func, target="cuda", arch="sm_90")


def test_export_writes_the_cubin_header_launcher_and_cmake(tmp_path):
    kernel = sched.build(hand_schedules.gpu_matmul(128, 96, 64).func, target="cuda",
                         arch="sm_90")
    exported = kernel.export(tmp_path)
    assert [p.name for p in exported.files] == ["matmul.h", "matmul.c", "matmul.cu",
                                                "matmul.sched.cmake", "CMakeLists.txt"]
    header = exported.header.read_text()
    assert "int matmul(CUdeviceptr A, CUdeviceptr B, CUdeviceptr C, CUstream stream);" in header
    assert "int matmul_init(void);" in header and "matmul_error_message(void)" in header
    source = (tmp_path / "matmul.c").read_text()
    match = re.search(r"matmul_cubin\[(\d+)\][^{]*\{([^}]*)\}", source)
    embedded = bytes(int(b, 16) for b in match[2].replace("\n", " ").split(", ") if b.strip())
    assert int(match[1]) == len(kernel.cubin) and embedded == kernel.cubin
    assert "cuLaunchKernel(" in source and "nvrtc" not in source.lower()
    assert (tmp_path / "matmul.cu").read_text() == kernel.source
    assert "CUDA::cuda_driver" in (tmp_path / "matmul.sched.cmake").read_text()


def test_symbolic_dims_are_int64_arguments_and_size_the_grid(tmp_path):
    exported = symbolic_scale().export(tmp_path, name="scale3")
    assert "int scale3(CUdeviceptr A, CUdeviceptr B, int64_t n, CUstream stream);" in \
        exported.header.read_text()
    source = (tmp_path / "scale3.c").read_text()
    grid = re.findall(r"sched_grid_[xyz] = (.*);", source)
    assert len(grid) == 3 and any("(int64_t)n" in extent for extent in grid)


@needs_cuda_h
@pytest.mark.parametrize("make", ["matmul", "scale"])
def test_the_launcher_compiles_with_gcc_against_the_cuda_headers(tmp_path, make):
    kernel = symbolic_scale() if make == "scale" else sched.build(
        hand_schedules.gpu_matmul(128, 96, 64).func, target="cuda", arch="sm_90")
    exported = kernel.export(tmp_path)
    done = subprocess.run([*GCC, f"-I{INCLUDE}", "-c", f"{exported.name}.c", "-o", "k.o"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    symbols = subprocess.run(["nm", "k.o"], cwd=tmp_path, capture_output=True, text=True).stdout
    undefined = {line.split()[-1] for line in symbols.splitlines() if " U " in line}
    assert {"cuLaunchKernel", "cuModuleLoadData", "cuModuleGetFunction"} <= undefined
    assert not any("nvrtc" in s.lower() or s.startswith("cuda") for s in undefined), undefined


def test_large_dynamic_shared_memory_is_opted_into(tmp_path):
    kernel = sched.build(hand_schedules.gpu_matmul(128, 96, 64).func, target="cuda",
                         arch="sm_90")
    launch = kernel.launch.__class__(kernel.launch.grid, kernel.launch.block, 64 * 1024)
    kernel.launch = launch                     # as a kernel needing 64 KB would be launched
    source = (kernel.export(tmp_path).directory / "matmul.c").read_text()
    assert "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536" in source
    assert ", 65536, stream, sched_params, NULL)" in source


def run_on_gpu(exported, args, more=()):
    arrays = program_arrays(args, more)
    source = c_program(exported.name, args, more, cuda=True)
    return run_c_program(exported.directory, source, arrays,
                         ["gcc", "-std=c11", "-O2", "main.c", f"{exported.name}.c",
                          *([f"-I{INCLUDE}"] if INCLUDE else []), "-o", "main", _libcuda(),
                          "-lpthread"])


def _libcuda() -> str:
    """The linker flag of the driver library (a driver install may lack libcuda.so)."""
    import ctypes.util

    found = ctypes.util.find_library("cuda")
    return f"-l:{found}" if found else "-lcuda"


@pytest.mark.gpu
def test_a_c_program_runs_the_exported_kernel_on_the_gpu(tmp_path, rng):
    from sched.cuda.device import current_arch

    kernel = sched.build(hand_schedules.gpu_matmul(128, 96, 64).func, target="cuda",
                         arch=current_arch())
    exported = kernel.export(tmp_path)
    a = rng.standard_normal((128, 64)).astype(np.float32)
    b = rng.standard_normal((64, 96)).astype(np.float32)
    done = run_on_gpu(exported, [a, b, np.zeros((128, 96), np.float32)])
    assert (done.status, done.message) == (0, "")
    np.testing.assert_allclose(done.arrays[2], a @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_the_exported_symbolic_kernel_on_the_gpu_and_its_checks(tmp_path, rng):
    exported = symbolic_scale().export(tmp_path)
    for n in (1, 45):
        a = rng.standard_normal((n, 32)).astype(np.float32)
        done = run_on_gpu(exported, [a, np.zeros((n, 32), np.float32), n])
        assert done.status == 0, done.message
        np.testing.assert_allclose(done.arrays[1], a * 3 + 1, rtol=1e-5)
    a = np.ones((4, 32), np.float32)
    done = run_on_gpu(exported, [a, np.zeros((4, 32), np.float32), 0])
    assert (done.status, done.message) == (3, "scale: dim n = 0: sizes must be at least 1")
    done = run_on_gpu(exported, [a, Pointer(0), 4])
    assert done.status == 5 and "overlap" in done.message


@needs_cuda_h
def test_scalars_of_each_kind_compile_into_the_launcher(tmp_path):
    from sched.script import T

    @T.prim_func
    def axpy(x: T.handle, y: T.handle, alpha: T.float32, beta: T.float16, n: T.int32):
        X = T.match_buffer(x, (n,), "float32")
        Y = T.match_buffer(y, (n,), "float32")
        for i in range(n):
            with T.block("Y"):
                vi = T.axis.spatial(n, i)
                Y[vi] = X[vi] * alpha + T.Cast("float32", beta)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kernel = sched.build(axpy, target="cuda", arch="sm_80")
    exported = kernel.export(tmp_path)
    assert ("int axpy(CUdeviceptr X, CUdeviceptr Y, float alpha, uint16_t beta, int32_t n, "
            "CUstream stream);") in exported.header.read_text()
    source = (tmp_path / "axpy.c").read_text()
    assert "void *sched_params[] = {&X, &Y, &alpha, &beta, &n};" in source
    done = subprocess.run([*GCC, f"-I{INCLUDE}", "-c", "axpy.c", "-o", "k.o"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

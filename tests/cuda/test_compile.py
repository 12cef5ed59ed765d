"""compile_cuda: hand-written kernels to cubins with NVRTC and nvcc, the cache, compile errors."""

from __future__ import annotations

import shutil

import pytest

from sched.cuda import compile as cuda_compile
from sched.cuda.compile import compile_cuda
from sched.cuda.resources import Resources
from sched.errors import BuildError
from tests.cuda.kernels import HALF_AXPY, TILED_MATMUL, VECTOR_ADD

ELF_MAGIC = b"\x7fELF"
KERNELS = {"vector_add": VECTOR_ADD, "matmul": TILED_MATMUL, "half_axpy": HALF_AXPY}
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on the PATH")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_nvrtc_compiles_a_cubin_with_resources(tmp_path, name, arch):
    module = compile_cuda(KERNELS[name], arch, cache_dir=tmp_path)
    assert module.cubin.startswith(ELF_MAGIC)
    assert f"Compiling entry function '{name}' for '{arch}'" in module.log
    resources = Resources.from_log(module.log, name, arch)
    assert resources.registers > 0
    assert (resources.spill_stores, resources.spill_loads, resources.local_bytes) == (0, 0, 0)


def test_tiled_matmul_uses_its_shared_tiles_and_a_barrier(tmp_path):
    module = compile_cuda(TILED_MATMUL, "sm_90", cache_dir=tmp_path)
    resources = Resources.from_log(module.log, "matmul", "sm_90")
    assert resources.static_shared_bytes == 2 * 32 * 32 * 4
    assert resources.barriers == 1


def test_second_compile_is_a_cache_hit_that_compiles_nothing(tmp_path, monkeypatch):
    first = compile_cuda(VECTOR_ADD, "sm_90", cache_dir=tmp_path)
    compilations = cuda_compile.stats["compilations"]

    def no_compiling(*args):
        raise AssertionError("a cache hit must not compile")

    monkeypatch.setattr(cuda_compile, "_compile_nvrtc", no_compiling)
    second = compile_cuda(VECTOR_ADD, "sm_90", cache_dir=tmp_path)
    assert (first.from_cache, second.from_cache) == (False, True)
    assert cuda_compile.stats["compilations"] == compilations
    assert (second.cubin, second.log, second.command) == (first.cubin, first.log, first.command)
    assert second.path == tmp_path / "cuda" / first.key / "kernel.cubin"
    assert (second.path.parent / "kernel.cu").read_text() == VECTOR_ADD


def test_a_cache_entry_without_its_log_is_compiled_again(tmp_path):
    first = compile_cuda(VECTOR_ADD, "sm_90", cache_dir=tmp_path)
    (first.path.parent / "kernel.log").unlink()
    second = compile_cuda(VECTOR_ADD, "sm_90", cache_dir=tmp_path)
    assert not second.from_cache and second.cubin == first.cubin
    assert (first.path.parent / "kernel.log").read_text() == second.log
    assert "Compiling entry function 'vector_add'" in second.log


def test_a_kernel_whose_cached_log_lacks_it_is_compiled_again(tmp_path, monkeypatch):
    import sched
    from tests.lower.test_kernel_sequence import softmax_three_stages

    monkeypatch.setenv("SCHED_CACHE_DIR", str(tmp_path))
    kernel = sched.build(softmax_three_stages(), target="cuda", arch="sm_80")
    log_path = kernel.compiled.path.parent / "kernel.log"
    log_path.write_text("")                     # an entry whose log names no kernel
    again = sched.build(softmax_three_stages(), target="cuda", arch="sm_80")
    assert not again.compiled.from_cache and again.cubin == kernel.cubin
    assert again.kernel_resources == kernel.kernel_resources
    assert log_path.read_text() == again.compiled.log


def test_a_log_that_names_no_kernel_is_shown_in_the_error(tmp_path):
    from sched.cuda.runtime import CudaKernel
    from sched.lower.launch import LaunchConfig
    from tests.lower.test_kernel_sequence import softmax_three_stages

    func = softmax_three_stages().func
    with pytest.raises(BuildError, match=r"(?s)names no entry function 'add'.*the log, \d+ "
                                         r"characters, begins:\n.*_Z10vector_add"):
        CudaKernel(func, VECTOR_ADD.replace('extern "C" ', ""), "add",
                   LaunchConfig((1, 1, 1), (32, 1, 1)), "sm_80", cache_dir=tmp_path)


def test_cache_key_changes_with_arch_flags_and_compiler():
    keys = {cuda_compile.cache_key(VECTOR_ADD, "sm_90", "nvrtc", ()),
            cuda_compile.cache_key(VECTOR_ADD, "sm_80", "nvrtc", ()),
            cuda_compile.cache_key(VECTOR_ADD, "sm_90", "nvrtc", ("-lineinfo",)),
            cuda_compile.cache_key(VECTOR_ADD + "\n", "sm_90", "nvrtc", ())}
    assert len(keys) == 4


def test_cache_dir_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHED_CACHE_DIR", str(tmp_path))
    module = compile_cuda(VECTOR_ADD, "sm_80")
    assert module.path.is_relative_to(tmp_path / "cuda")


def test_flags_reach_nvrtc(tmp_path):
    module = compile_cuda(VECTOR_ADD, "sm_90", flags=("--maxrregcount=32",), cache_dir=tmp_path)
    assert "--maxrregcount=32" in module.command


def test_compile_error_shows_the_offending_line_and_the_command(tmp_path):
    # 'bb' is not declared: NVRTC names line 6 of kernel.cu
    source = VECTOR_ADD.replace("a[i] + b[i]", "a[i] + bb[i]")
    with pytest.raises(BuildError) as caught:
        compile_cuda(source, "sm_90", cache_dir=tmp_path)
    message = str(caught.value)
    assert 'kernel.cu(6): error: identifier "bb" is undefined' in message
    assert ">    6 |     c[i] = a[i] + bb[i];" in message
    assert "command: nvrtc -arch=sm_90 -std=c++17 --ptxas-options=-v" in message
    assert not list((tmp_path / "cuda").glob("*/kernel.cubin"))


def test_unknown_arch_and_compiler_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"arch 'compute_90': expected 'sm_'"):
        compile_cuda(VECTOR_ADD, "compute_90", cache_dir=tmp_path)
    with pytest.raises(ValueError, match=r"unknown compiler 'clang'"):
        compile_cuda(VECTOR_ADD, "sm_90", "clang", cache_dir=tmp_path)


@needs_nvcc
def test_nvcc_compiles_the_same_kernel(tmp_path):
    module = compile_cuda(TILED_MATMUL, "sm_80", "nvcc", cache_dir=tmp_path)
    assert module.cubin.startswith(ELF_MAGIC)
    assert module.command.startswith("nvcc -cubin -arch=sm_80 -std=c++17 -Xptxas -v ")
    resources = Resources.from_log(module.log, "matmul", "sm_80")
    assert (resources.registers > 0, resources.static_shared_bytes) == (True, 8192)
    assert compile_cuda(TILED_MATMUL, "sm_80", "nvcc", cache_dir=tmp_path).from_cache
    assert not [p for p in module.path.parent.iterdir() if p.name.endswith(".tmp")]


@needs_nvcc
def test_nvcc_error_names_the_line(tmp_path):
    source = TILED_MATMUL.replace("acc += ", "acc += undeclared + ")
    with pytest.raises(BuildError, match=r"nvcc failed \(exit status \d+\)") as caught:
        compile_cuda(source, "sm_90", "nvcc", cache_dir=tmp_path)
    assert '>   16 |       acc += undeclared + ' in str(caught.value)


def test_build_fast_math_reaches_nvrtc(tmp_path, monkeypatch):
    import sched
    from sched import hand_schedules

    monkeypatch.setenv("SCHED_CACHE_DIR", str(tmp_path))
    schedule = hand_schedules.gpu_softmax(4, 256)
    relaxed = sched.build(schedule, target="cuda", arch="sm_90", fast_math=True)
    exact = sched.build(schedule, target="cuda", arch="sm_90")
    assert "--use_fast_math" in relaxed.compiled.command
    assert "--use_fast_math" not in exact.compiled.command
    assert relaxed.cubin.startswith(ELF_MAGIC) and relaxed.cubin != exact.cubin


def test_toolkit_crt_headers_are_added_when_the_cudart_wheel_lacks_them(tmp_path, monkeypatch):
    """A torch install brings the cudart headers without crt/ (seen on the lent H200: NVRTC
    could not open "crt/mma.h" from <mma.h>): the toolkit's include directory that has crt/
    is added after them, and a directory without crt/mma.h is not."""
    import types

    import cuda.pathfinder

    wheel = tmp_path / "wheel" / "include"
    wheel.mkdir(parents=True)
    toolkit = tmp_path / "toolkit"
    (toolkit / "include" / "crt").mkdir(parents=True)
    (toolkit / "include" / "crt" / "mma.h").write_text("")
    monkeypatch.setattr(cuda.pathfinder, "locate_nvidia_header_directory",
                        lambda name: types.SimpleNamespace(abs_path=str(wheel)))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-toolkit-here"))
    monkeypatch.setenv("CUDA_PATH", str(toolkit))
    cuda_compile._header_directories.cache_clear()
    try:
        options = cuda_compile.nvrtc_options("sm_90", ())
    finally:
        cuda_compile._header_directories.cache_clear()
    includes = [option for option in options if option.startswith("-I")]
    assert includes == [f"-I{wheel}", f"-I{toolkit / 'include'}"]


def test_a_missing_header_error_says_which_wheels_bring_the_headers():
    message = cuda_compile.failure_message(
        "NVRTC failed", "int x;\n",
        '/x/include/mma.h(55): catastrophic error: cannot open source file "crt/mma.h"', "nvrtc")
    assert "nvidia-cuda-crt" in message and "compiler='nvcc'" in message


@pytest.mark.parametrize(("version", "expected"), [("12.8", False), ("12.9", True),
                                                   ("13.0", True)])
def test_nvrtc_s_own_cache_is_off_where_it_exists(monkeypatch, version, expected):
    # a compile NVRTC serves from its own cache prints no ptxas lines, so no resources
    monkeypatch.setattr(cuda_compile, "_nvrtc_archs", lambda: ([80, 90], version))
    assert ("--no-cache" in cuda_compile.nvrtc_options("sm_90", ())) == expected


def test_the_arithmetic_helpers_and_math_intrinsics_compile_with_nvrtc(tmp_path):
    # NVRTC has no standard headers: the helpers that define C's undefined cases (saturating
    # float -> int casts, shifts by any count, wrapping + - *) and TVM's math intrinsics use
    # only what the kernel's prelude declares
    import sched
    from sched import compute as te

    A = te.placeholder((64,), "float32", name="A")
    N = te.placeholder((64,), "int32", name="N")

    def cast_to(dtype):
        return te.compute((64,), lambda i: te.cast(A[i], dtype), name=f"C_{dtype}")

    outs = [cast_to(d) for d in ("int8", "uint16", "int32", "uint32", "int64", "uint64")]
    outs.append(te.compute((64,), lambda i: (N[i] << N[i]) + (N[i] >> N[i]) + N[i] * N[i],
                           name="S"))
    outs.append(te.compute((64,), lambda i: te.log2(A[i]) + te.atan2(A[i], A[i]) +
                           te.fmod(A[i], A[i]) + te.hypot(A[i], A[i]), name="M"))
    sch = sched.Schedule(te.create_prim_func([A, N, *outs]))
    for out in outs:
        bx, tx = sch.split(sch.get_loops(sch.get_block(out.name))[0], [None, 32])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    source = sched.build(sch.func, target="cuda-emu").source
    assert "sched_saturate_f32_u64" in source and "sched_shl_i32" in source
    assert compile_cuda(source, "sm_90", cache_dir=tmp_path).cubin.startswith(ELF_MAGIC)

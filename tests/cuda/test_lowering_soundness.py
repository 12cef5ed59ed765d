"""Issue 9, the CUDA lowering itself (generated source, compiled to a cubin; no GPU needed):
barriers every thread reaches (item 10), nested loops of one block axis (item 23)."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.cuda.codegen import generate_cuda
from sched.errors import ScheduleError
from sched.lower import lower
from sched.lower.gpu_threads import launch_config
from sched.script import T

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")


@T.prim_func
def half_block(A: T.Buffer((512,), "float32"), B: T.Buffer((256,), "float32")):
    for b in T.thread_binding(4, thread="blockIdx.x"):
        X = T.decl_buffer((128,), "float32", scope="shared")
        Y = T.decl_buffer((64,), "float32", scope="shared")
        for t in T.thread_binding(128, thread="threadIdx.x"):
            X[t] = A[b * 128 + t]
            for t2 in T.thread_binding(64, thread="threadIdx.x"):
                Y[t2] = X[t2] + X[t2 + 64]
                B[b * 64 + t2] = Y[63 - t2]


def _half_block_reference(a):
    x = a.reshape(4, 128)
    y = x[:, :64] + x[:, 64:]
    return y[:, ::-1].reshape(-1)


def cuda_source(func) -> str:
    lowered = lower(func, target="cuda")
    return generate_cuda(lowered, launch_config(lowered))[0]


def barriers_outside_thread_branches(source: str) -> bool:
    """Whether every `__syncthreads()` of `source` is outside any `if` whose condition uses a
    thread index variable (read off the `const ... = threadIdx...` lines)."""
    thread_vars = set(re.findall(r"const \w+ (\w+) = \(\w+\)threadIdx\.[xyz]", source))
    open_ifs: list[bool] = []          # per open brace: is it a thread-dependent if?
    for line in source.splitlines():
        text = line.strip()
        if text.startswith("__syncthreads()") and any(open_ifs):
            return False
        if text.endswith("{"):
            condition = re.match(r"(?:\} else )?if \((.*)\) \{$", text)
            dependent = bool(condition) and any(
                re.search(rf"\b{re.escape(v)}\b", condition.group(1)) for v in thread_vars)
            if text.startswith("}"):
                open_ifs.pop()
            open_ifs.append(dependent)
        elif text.startswith("}"):
            open_ifs.pop()
    return True


def test_a_barrier_never_sits_in_a_branch_some_threads_skip():
    source = cuda_source(half_block)
    assert source.count("__syncthreads();") == 2
    assert barriers_outside_thread_branches(source), source
    assert source.count("if (t < 64) {") == 2     # the work is guarded, the barrier is not


def test_the_check_sees_a_barrier_in_a_thread_branch():
    bad = "const int32_t t = (int32_t)threadIdx.x;\nif (t < 64) {\n__syncthreads();\n}\n"
    assert not barriers_outside_thread_branches(bad)


def test_c_target_computes_the_guarded_phases(rng):
    a = rng.standard_normal(512).astype(np.float32)
    b = np.zeros(256, np.float32)
    sched.build(half_block, target="c")(a, b)
    np.testing.assert_allclose(b, _half_block_reference(a), rtol=1e-6)


@needs_nvcc
def test_guarded_kernel_compiles_to_a_cubin(tmp_path):
    path = tmp_path / "kernel.cu"
    path.write_text(cuda_source(half_block))
    result = subprocess.run(["nvcc", "-cubin", "-arch=sm_80", str(path), "-o",
                             str(tmp_path / "kernel.cubin")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@T.prim_func
def barrier_in_thread_dependent_loop(A: T.Buffer((64,), "float32"),
                                     B: T.Buffer((64,), "float32")):
    for b in T.thread_binding(1, thread="blockIdx.x"):  # noqa: B007
        X = T.decl_buffer((64,), "float32", scope="shared")
        for t in T.thread_binding(64, thread="threadIdx.x"):
            for k in range(t):
                X[t] = A[k]
                B[t] = X[63 - t]


def test_barrier_in_a_loop_with_thread_dependent_bounds_is_refused():
    with pytest.raises(ScheduleError, match="every thread of a block must reach every barrier"):
        cuda_source(barrier_in_thread_dependent_loop)


def _two_block_loops():
    A = te.placeholder((4, 4), name="A")
    B = te.compute((4, 4), lambda i, j: A[i, j] + 1.0, name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    i, j = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "blockIdx.x")
    sch.reorder(j, i)
    return sch.func


@pytest.mark.parametrize("target", ["c", "cuda"])
def test_nested_loops_of_one_block_axis_are_refused_at_build(target):
    """Issue 9 item 23: the C code computed only the diagonal (one index for both loops)."""
    with pytest.raises(ScheduleError, match="fuse the two loops and bind the fused loop"):
        lower(_two_block_loops(), target=target)


def test_nested_thread_loop_using_the_outer_index_is_refused():
    @T.prim_func
    def diagonal(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
        for b in T.thread_binding(1, thread="blockIdx.x"):  # noqa: B007
            for i in T.thread_binding(8, thread="threadIdx.x"):
                for j in T.thread_binding(8, thread="threadIdx.x"):
                    B[i, j] = A[i, j]

    with pytest.raises(ScheduleError, match="one thread index cannot stand for both loops"):
        lower(diagonal, target="c")

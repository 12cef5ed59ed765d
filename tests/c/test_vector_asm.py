"""The assembly gcc makes of a vectorized kernel (`gcc -S` of `kernel.source`): registers of
the vector's width, no libm call for the math of a vectorized loop, masked loads for padding.
64-byte vectors are compiled for AVX-512 (`-mavx512f`) when the host lacks it: the text is
checked, not run."""

from __future__ import annotations

import re
import subprocess

import pytest

import sched
from sched import compute as te
from sched.c.build import COMPILER, FLAGS
from sched.c.isa import host_isa

REGISTERS = {16: "xmm", 32: "ymm", 64: "zmm"}
LIBM = r"call\s+\S*\b(expf|logf|tanhf|erff|sqrtf|exp|log|tanh|erf|sqrt)\b"


def assembly(source: str, vector_bytes: int, tmp_path) -> str:
    path = tmp_path / "kernel.c"
    path.write_text(source)
    flags = [f for f in FLAGS if f not in ("-shared", "-fPIC")]
    if vector_bytes == 64 and host_isa().name != "avx512":
        flags.append("-mavx512f")
    subprocess.run([COMPILER, *flags, "-S", str(path), "-o", str(tmp_path / "kernel.s")],
                   check=True, capture_output=True)
    return (tmp_path / "kernel.s").read_text()


@pytest.mark.parametrize("fast_math", [False, True], ids=["exact", "fast_math"])
@pytest.mark.parametrize("vector_bytes", [16, 32, 64])
def test_math_in_a_vectorized_loop_is_simd_without_libm_calls(vector_bytes, fast_math,
                                                               monkeypatch, tmp_path):
    if not host_isa().name.startswith(("avx", "sse")):
        pytest.skip("x86 assembly checks")
    monkeypatch.setenv("SCHED_VECTOR_BYTES", str(vector_bytes))
    A = te.placeholder((16, 128), name="A")
    B = te.compute((16, 128), lambda i, j: te.exp(A[i, j]) + te.log(A[i, j]) + te.tanh(A[i, j])
                   + te.erf(A[i, j]) + te.sigmoid(A[i, j]) + te.sqrt(A[i, j])
                   + te.rsqrt(A[i, j]), name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    sch.vectorize(sch.get_loops(sch.get_block("B"))[-1])
    kernel = sched.build(sch.func, target="c", fast_math=fast_math)
    text = assembly(kernel.source, vector_bytes, tmp_path)
    assert not re.search(LIBM, text), re.findall(LIBM, text)
    register = REGISTERS[vector_bytes]
    assert re.search(rf"vsqrtps\s+%{register}", text)
    assert len(re.findall(rf"vfmadd\w+\s+[^\n]*%{register}", text)) >= 10


@pytest.mark.parametrize("vector_bytes", [16, 32, 64])
def test_padding_loads_are_masked_instructions(vector_bytes, monkeypatch, tmp_path):
    if not host_isa().name.startswith("avx"):
        pytest.skip("x86 AVX assembly checks")
    monkeypatch.setenv("SCHED_VECTOR_BYTES", str(vector_bytes))
    X = te.placeholder((6, 30), name="X")
    P = te.compute((8, 32), lambda i, j: te.if_then_else(
        te.all(i >= 1, i < 7, j >= 1, j < 31), X[i - 1, j - 1], 0.0), name="P")
    sch = sched.Schedule(te.create_prim_func([X, P]))
    sch.vectorize(sch.get_loops(sch.get_block("P"))[-1])
    text = assembly(sched.build(sch.func, target="c").source, vector_bytes, tmp_path)
    register = REGISTERS[vector_bytes]
    masked_move = rf"vmov\w+\s+[^\n]*%{register}\d+\{{%k\d\}}"       # AVX-512 (VL)
    if vector_bytes == 64:
        assert re.search(masked_move, text)
    else:
        assert re.search(rf"vmaskmovps\s+[^\n]*%{register}|{masked_move}", text)


@pytest.mark.parametrize("vector_bytes", [16, 32, 64])
def test_float64_math_in_a_vectorized_loop_is_simd(vector_bytes, monkeypatch, tmp_path):
    if not host_isa().name.startswith(("avx", "sse")):
        pytest.skip("x86 assembly checks")
    monkeypatch.setenv("SCHED_VECTOR_BYTES", str(vector_bytes))
    A = te.placeholder((16, 64), "float64", name="A")
    B = te.compute((16, 64), lambda i, j: te.exp(A[i, j]) + te.log(A[i, j]) + te.sqrt(A[i, j]),
                   name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    sch.vectorize(sch.get_loops(sch.get_block("B"))[-1])
    text = assembly(sched.build(sch.func, target="c").source, vector_bytes, tmp_path)
    assert not re.search(LIBM, text), re.findall(LIBM, text)
    assert re.search(rf"vsqrtpd\s+%{REGISTERS[vector_bytes]}", text)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("vector_bytes", [16, 32, 64])
def test_float_min_and_max_are_one_instruction(vector_bytes, dtype, monkeypatch, tmp_path):
    """x86's minps/maxps compute a < b ? a : b exactly as the scalar code (NaN and -0.0
    included: test_vector_ops checks the values); the generic blend cost a row softmax 1.7x."""
    if not host_isa().name.startswith(("avx", "sse")):
        pytest.skip("x86 assembly checks")
    monkeypatch.setenv("SCHED_VECTOR_BYTES", str(vector_bytes))
    A = te.placeholder((16, 128), name="A", dtype=dtype)
    B = te.compute((16, 128), lambda i, j: te.max(te.min(A[i, j], A[0, j]), A[i, 0]), name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    sch.vectorize(sch.get_loops(sch.get_block("B"))[-1])
    text = assembly(sched.build(sch.func, target="c").source, vector_bytes, tmp_path)
    suffix, register = ("ps" if dtype == "float32" else "pd"), REGISTERS[vector_bytes]
    assert re.search(rf"vmax{suffix}\s+[^\n]*%{register}", text)
    assert re.search(rf"vmin{suffix}\s+[^\n]*%{register}", text)

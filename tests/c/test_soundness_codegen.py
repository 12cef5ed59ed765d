"""Issue 9, C/CUDA emitters: precedence of every printed expression (random expression trees
compiled and compared with Python's floor semantics), one naming layer that makes identifiers
valid and unique, views flattened onto their storage, 64-bit flattened indices."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sched
from sched import compute as te
from sched.c.build import compile_library
from sched.c.codegen import generate_c
from sched.c.kernel import CKernel
from sched.c.names import RESERVED, CNames, sanitize
from sched.cuda.codegen import generate_cuda
from sched.ir import Buffer, BufferStore, For, IntImm, PrimFunc, Var
from sched.ir.nodes import BinaryOp, Cast, Not, Select, seq
from sched.lower import lower
from sched.lower.gpu_threads import launch_config
from sched.script import T

INT32 = (-(2 ** 31), 2 ** 31 - 1)


# -- precedence: random expressions, emitted C against Python ---------------------------------

X, Y = Var("x"), Var("y")          # scalar parameters: any sign
LOOP_I = Var("i")                   # a loop variable from 0: non-negative (plain / and %)


def _evaluate(e, env) -> int:
    """`e` in Python, with the IR's semantics (floor // and %); raises OverflowError when a
    value leaves int32."""
    if isinstance(e, IntImm):
        value = e.value
    elif isinstance(e, Var):
        value = env[e]
    elif isinstance(e, Not):
        value = int(not _evaluate(e.a, env))
    elif isinstance(e, Select):
        value = _evaluate(e.true_value if _evaluate(e.condition, env) else e.false_value, env)
    elif isinstance(e, Cast):
        value = _evaluate(e.value, env)
    else:
        a, b = _evaluate(e.a, env), _evaluate(e.b, env)
        value = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
                 "floordiv": lambda: a // b, "floormod": lambda: a % b,
                 "min": lambda: min(a, b), "max": lambda: max(a, b),
                 "lt": lambda: int(a < b), "le": lambda: int(a <= b), "gt": lambda: int(a > b),
                 "ge": lambda: int(a >= b), "eq": lambda: int(a == b),
                 "ne": lambda: int(a != b), "and": lambda: int(bool(a) and bool(b)),
                 "or": lambda: int(bool(a) or bool(b))}[e.op]()
    if not INT32[0] <= value <= INT32[1]:
        raise OverflowError
    return value


@st.composite
def int_exprs(draw, depth: int = 3):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from([X, Y, LOOP_I, IntImm(draw(st.integers(-9, 9)))]))
    kind = draw(st.sampled_from(["arith", "arith", "div", "select", "minmax"]))
    a = draw(int_exprs(depth - 1))
    if kind == "arith":
        return BinaryOp(draw(st.sampled_from(["add", "sub", "mul"])), a,
                        draw(int_exprs(depth - 1)))
    if kind == "div":
        op = draw(st.sampled_from(["floordiv", "floormod"]))
        divisor = draw(st.one_of(
            st.sampled_from([IntImm(2), IntImm(3), IntImm(-3), IntImm(7)]),
            int_exprs(depth - 1).map(lambda d: BinaryOp("max", d, IntImm(1)))))
        return BinaryOp(op, a, divisor)
    if kind == "minmax":
        return BinaryOp(draw(st.sampled_from(["min", "max"])), a, draw(int_exprs(depth - 1)))
    return Select(draw(bool_exprs(depth - 1)), a, draw(int_exprs(depth - 1)))


@st.composite
def bool_exprs(draw, depth: int = 2):
    kind = draw(st.sampled_from(["compare", "compare", "logic", "not"]))
    if kind == "compare" or depth == 0:
        return BinaryOp(draw(st.sampled_from(["lt", "le", "gt", "ge", "eq", "ne"])),
                        draw(int_exprs(max(depth - 1, 0))), draw(int_exprs(max(depth - 1, 0))))
    if kind == "not":
        return Not(draw(bool_exprs(depth - 1)))
    return BinaryOp(draw(st.sampled_from(["and", "or"])), draw(bool_exprs(depth - 1)),
                    draw(bool_exprs(depth - 1)))


POINTS = [(x, y) for x in (-7, -1, 0, 5) for y in (-4, 3)]
LOOP = 3


def _kernel_of(exprs):
    """A C kernel computing `exprs[k]` at (x, y, i) into out[i * K + k], compiled from the
    emitter's text (not lowered: the printer sees the trees as they are)."""
    out = Buffer("out", (IntImm(LOOP * len(exprs)),), "int32")
    stores = [BufferStore(out, e if e.dtype == "int32" else Cast("int32", e),
                          (LOOP_I * len(exprs) + k,)) for k, e in enumerate(exprs)]
    func = PrimFunc("exprs", (out, X, Y), For(LOOP_I, IntImm(0), IntImm(LOOP), "serial",
                                              seq(*stores)))
    source = generate_c(func)
    return CKernel(func, func, source, compile_library(source))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(int_exprs(), bool_exprs()), min_size=6, max_size=6))
def test_emitted_c_evaluates_random_expressions_like_python(exprs):
    kept = []
    for e in exprs:
        try:
            for x, y in POINTS:
                for i in range(LOOP):
                    _evaluate(e, {X: x, Y: y, LOOP_I: i})
            kept.append(e)
        except (OverflowError, ZeroDivisionError):
            kept.append(IntImm(0))
    kernel = _kernel_of(kept)
    for x, y in POINTS:
        out = np.zeros(LOOP * len(kept), np.int32)
        kernel(out, x, y)
        expected = [_evaluate(e, {X: x, Y: y, LOOP_I: i}) for i in range(LOOP) for e in kept]
        assert out.tolist() == expected, (x, y, kernel.source)


def test_select_in_a_loop_bound_is_parenthesized():
    """Issue 9 item 21: `ax0 < M >= 4 ? 4 : M` compared a bool with 4."""
    M = Var("M")
    out = Buffer("out", (IntImm(8),), "int32")
    ax0 = Var("ax0")
    bound = Select(BinaryOp("ge", M, IntImm(4)), IntImm(4), M)
    func = PrimFunc("bounded", (out, M), For(ax0, IntImm(0), bound, "serial",
                                             BufferStore(out, ax0 + 1, (ax0,))))
    kernel = sched.build(func, target="c")
    assert "ax0 < (M >= 4 ? 4 : M)" in kernel.source
    for m, expected in ((2, [1, 2, 0, 0]), (6, [1, 2, 3, 4])):
        out_array = np.zeros(8, np.int32)
        kernel(out_array, m)
        assert out_array[:4].tolist() == expected


# -- names -------------------------------------------------------------------------------------


@T.prim_func
def clashing_names(exp: T.Buffer((4,), "float32"), exp_: T.Buffer((4,), "float32"),
                   out: T.Buffer((4,), "float32")):
    for int32_t in range(4):
        with T.block("NAN"):
            INFINITY = T.axis.spatial(4, int32_t)
            out[INFINITY] = T.exp(exp[INFINITY]) + exp_[INFINITY]


def test_clashing_and_reserved_names_get_unique_identifiers():
    """Issue 9 item 24: buffers `exp` and `exp_`, a loop `int32_t`, a function `fmaxf`."""
    func = dataclasses.replace(clashing_names, name="fmaxf")
    kernel = sched.build(func, target="c")
    source = kernel.source
    assert "void fmaxf_(" in source
    # `exp_` is a good identifier and keeps it; `exp` (libm's) becomes unique
    assert "expf(exp__1[int32_t_]) + exp_[int32_t_]" in source
    assert "int32_t int32_t =" not in source
    a, b = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    out = np.zeros(4, np.float32)
    kernel(a, b, out)
    np.testing.assert_allclose(out, np.exp(a) + b, rtol=1e-6)


def test_names_are_valid_unique_and_not_reserved():
    names = ["C.1", "C-1", "C_1", "é", "ü", "1x", "_x", "NAN", "INFINITY", "threadIdx",
             "sched_tmp", "float4", "min", "exp", "exp_", "class", "int32_t"]
    A = [Buffer(n, (IntImm(2),)) for n in names]
    body = seq(*[BufferStore(b, b[0], (IntImm(1),)) for b in A])
    table = CNames(PrimFunc("kernel", tuple(A), body))
    identifiers = [table[n] for n in names]
    assert len(set(identifiers)) == len(names)
    for identifier in identifiers:
        assert identifier.isascii() and identifier.isidentifier()
        assert identifier not in RESERVED and not identifier.startswith("_")
    assert table["sched_tmp"] == "sched_tmp_"    # helpers (sched_<op>_<type>) never end in _
    assert table["C_1"] == "C_1"              # a good identifier keeps its name
    assert sanitize("NAN") == "NAN_"


def test_a_buffer_and_a_variable_of_one_name_get_two_identifiers(tmp_path):
    # helper-88: a dim named like a buffer printed both as `A`: the C did not compile
    from sched import compute as te

    n = te.var("A")
    A = te.placeholder((n,), name="A")
    func = te.create_prim_func([A, te.compute((n,), lambda i: A[i] * 2, name="B")])
    kernel = sched.build(func, target="c")
    assert "const float* restrict A, float* restrict B, int32_t A_1)" in kernel.source
    a = np.random.default_rng(0).random(5, dtype=np.float32)
    b = np.full(5, np.nan, np.float32)
    kernel(a, b)
    np.testing.assert_array_equal(b, 2 * a)
    sch = sched.Schedule(func)
    blocks, threads = sch.split(sch.get_loops(sch.get_block("B"))[0], factors=[None, 32])
    sch.bind(blocks, "blockIdx.x")
    sch.bind(threads, "threadIdx.x")
    lowered = lower(sch.func, target="cuda")
    source, _, _ = generate_cuda(lowered, launch_config(lowered))
    assert "float* __restrict__ A, float* __restrict__ B, int32_t A_1)" in source


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
def test_cuda_kernel_with_reserved_names_compiles(tmp_path):
    @T.prim_func
    def kernel(min: T.Buffer((64,), "float32"), float4: T.Buffer((64,), "float32")):
        for threadIdx in T.thread_binding(64, thread="threadIdx.x"):
            with T.block("class"):
                new = T.axis.spatial(64, threadIdx)
                float4[new] = min[new] * T.float32(2)

    lowered = lower(kernel, target="cuda")
    source, name, _ = generate_cuda(lowered, launch_config(lowered))
    assert "float* __restrict__ float4_" in source and "threadIdx_ = (int32_t)threadIdx.x" \
        in source
    path = tmp_path / "kernel.cu"
    path.write_text(source)
    result = subprocess.run(["nvcc", "-cubin", "-arch=sm_80", str(path), "-o",
                             str(tmp_path / "kernel.cubin")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr + source


# -- views (item 25) ---------------------------------------------------------------------------


@T.prim_func
def through_a_view(A: T.Buffer((4, 4), "float32"), B: T.Buffer((16,), "float32")):
    A_flat = T.Buffer((16,), "float32", data=A.data)
    A_t = T.Buffer((2, 8), "float32", data=A.data)
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = A_flat[vi] * T.float32(2) + A_t[vi // 8, vi % 8]


def test_views_flatten_onto_their_storage():
    kernel = sched.build(through_a_view, target="c")
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    b = np.zeros(16, np.float32)
    kernel(a, b)
    np.testing.assert_array_equal(b, a.reshape(-1) * 3)


# -- 64-bit indices (item 9) -------------------------------------------------------------------


def _scale_2d(rows, cols, dtype="float32"):
    A = te.placeholder((rows, cols), dtype, name="A")
    B = te.compute((rows, cols), lambda i, j: A[i, j] * 2, name="B")
    return te.create_prim_func([A, B])


def test_symbolic_rows_of_65536_index_in_int64(rng):
    n = te.var("n")
    kernel = sched.build(_scale_2d(n, 65536), target="c")
    assert "B[(int64_t)i * 65536 + (int64_t)j]" in kernel.source
    a = rng.standard_normal((3, 65536)).astype(np.float32)
    b = np.zeros_like(a)
    kernel(a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_constant_buffer_over_two_gigaelements_indexes_in_int64():
    source = generate_c(lower(_scale_2d(40000, 65536, "int8")))
    assert "(int64_t)i * 65536 + (int64_t)j" in source
    assert "i * 65536 + j]" not in source.replace("(int64_t)i * 65536 + (int64_t)j]", "")


def test_small_constant_buffers_keep_int32_indices():
    source = generate_c(lower(_scale_2d(16, 64)))
    assert "B[i * 64 + j]" in source and "int64" not in source


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
def test_cuda_symbolic_rows_index_in_int64_and_compile(tmp_path):
    n = te.var("n")
    sch = sched.Schedule(_scale_2d(n, 65536))
    i, j = sch.get_loops(sch.get_block("B"))
    jo, ji = sch.split(j, [None, 256])
    sch.bind(i, "blockIdx.y")
    sch.bind(jo, "blockIdx.x")
    sch.bind(ji, "threadIdx.x")
    lowered = lower(sch.func, target="cuda")
    source, _, _ = generate_cuda(lowered, launch_config(lowered))
    assert "(int64_t)" in source
    path = tmp_path / "kernel.cu"
    path.write_text(source)
    result = subprocess.run(["nvcc", "-cubin", "-arch=sm_80", str(path), "-o",
                             str(tmp_path / "kernel.cubin")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr + source


@T.prim_func
def add_int64(A: T.Buffer((T.int64(16), T.int64(8)), "float32"),
              B: T.Buffer((T.int64(16), T.int64(8)), "float32")):
    for i, j in T.grid(T.int64(16), T.int64(8)):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] + T.float32(1)


def _int64_schedule(gpu: bool):
    sch = sched.Schedule(add_int64)
    i, j = sch.get_loops(sch.get_block("B"))
    outer, inner = sch.split(sch.fuse(i, j), [None, 32])
    if gpu:
        sch.bind(outer, "blockIdx.x")
        sch.bind(inner, "threadIdx.x")
    return sch.func


@pytest.mark.parametrize("gpu", [False, True], ids=["cpu", "gpu_schedule"])
def test_int64_extents_build_and_run_on_the_c_target(gpu):
    kernel = sched.build(_int64_schedule(gpu), target="c")
    a = np.arange(128, dtype=np.float32).reshape(16, 8)
    b = np.zeros_like(a)
    kernel(a, b)
    np.testing.assert_array_equal(b, a + 1)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
def test_int64_extents_build_for_cuda(tmp_path):
    lowered = lower(_int64_schedule(True), target="cuda")
    source, _, _ = generate_cuda(lowered, launch_config(lowered))
    assert "const int64_t i_j_fused_1 = (int64_t)threadIdx.x;" in source
    path = tmp_path / "kernel.cu"
    path.write_text(source)
    result = subprocess.run(["nvcc", "-cubin", "-arch=sm_80", str(path), "-o",
                             str(tmp_path / "kernel.cubin")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr + source


# -- fuse, split, fuse over symbolic extents (item 20: RecursionError in simplify_indices) ------


def test_fuse_split_fuse_over_symbolic_extents_builds(rng):
    dims = (te.var("n"), te.var("m"), te.var("p"))
    A = te.placeholder(dims, name="A")
    B = te.compute(dims, lambda *i: A[i] * 2.0, name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    i, j, k = sch.get_loops(sch.get_block("B"))
    outer, inner = sch.split(sch.fuse(i, j), [None, 4])
    sch.fuse(sch.fuse(outer, inner), k)
    kernel = sched.build(sch.func, target="c")
    a = rng.standard_normal((3, 5, 7)).astype(np.float32)
    b = np.zeros_like(a)
    kernel(a, b)
    np.testing.assert_array_equal(b, a * 2)


# -- a reduction reading the element the previous iteration wrote (item 22) -------------------


@pytest.mark.parametrize("n, k", [(8, 4), (64, 16), (300, 7)])
@pytest.mark.parametrize("with_init", [False, True])
def test_reduction_reading_the_previous_element_matches_numpy(n, k, with_init):
    """Reported miscompiled by gcc 12 -O3 (loop distribution); not reproduced here: the
    kernels build with -fno-tree-loop-distribution, and this keeps the numbers checked."""
    init = ("            with T.init():\n                C[vi + 1] = T.float32(0.5)\n"
            if with_init else "")
    text = f'''
@T.prim_func
def scan(A: T.Buffer(({k},), "float32"), C: T.Buffer(({n + 1},), "float32")):
    for i, k in T.grid({n}, {k}):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
{init}            C[vi + 1] = C[vi + 1] + C[vi] * A[vk]
'''
    from sched.ir.parser import parse

    kernel = sched.build(parse(text), target="c")
    a = (np.arange(k, dtype=np.float32) % 5 - 2) * np.float32(0.05)
    c = np.linspace(0.5, 1.5, n + 1).astype(np.float32)
    expected = c.astype(np.float64)
    for i in range(n):
        if with_init:
            expected[i + 1] = 0.5
        for r in range(k):
            expected[i + 1] = expected[i + 1] + expected[i] * a[r]
    kernel(a, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-5)

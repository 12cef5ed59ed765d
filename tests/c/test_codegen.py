"""generate_c: the C text of lowered functions (signature, pragmas, helpers, constants)."""

from __future__ import annotations

import math

import numpy as np

import sched
from sched import compute as te
from sched.c.codegen import c_function_name, generate_c
from sched.c.dtypes import float_literal, int_literal
from sched.ir import Buffer, BufferStore, FloatImm, For, IntImm, PrimFunc, Var
from sched.lower import lower
from tests.lower.block_ir import add_2d, scale_split, two_stage


def source_of(func: PrimFunc) -> str:
    return generate_c(lower(func))


def test_signature_lists_buffers_then_scalars_then_symbolic_dims():
    n = Var("n")
    A, B = Buffer("A", (n, IntImm(4))), Buffer("B", (n, IntImm(4)))
    alpha = Var("alpha", "float32")
    i, j = Var("i"), Var("j")
    body = For(i, IntImm(0), n, "serial", For(j, IntImm(0), IntImm(4), "serial",
                                              BufferStore(B, A[i, j] * alpha, (i, j))))
    source = generate_c(lower(PrimFunc("scale", (A, B, alpha), body)))
    assert ("void scale(const float* restrict A, float* restrict B, float alpha, int32_t n)"
            in source)
    # a symbolic dim bounds no size: the flattened index is int64
    assert "B[(int64_t)i * 4 + (int64_t)j] = A[(int64_t)i * 4 + (int64_t)j] * alpha;" in source


def test_includes_and_reserved_names():
    source = source_of(dataclass_renamed(add_2d(), "main"))
    for header in ("<stdint.h>", "<math.h>", "<stdbool.h>"):
        assert f"#include {header}" in source
    assert "void main_(" in source
    assert c_function_name(dataclass_renamed(add_2d(), "main")) == "main_"


def dataclass_renamed(func: PrimFunc, name: str) -> PrimFunc:
    import dataclasses

    return dataclasses.replace(func, name=name)


def test_loop_kinds_become_pragmas(monkeypatch):
    monkeypatch.setenv("SCHED_VECTOR_BYTES", "32")      # the spelling of an AVX2 host
    assert "#pragma omp parallel for" in source_of(add_2d(outer_kind="parallel"))
    assert "j += 8) {  // vectorized: 8 lanes" in source_of(add_2d(inner_kind="vectorized"))
    assert "j += 4) {  // vectorized: 4 lanes" in source_of(add_2d(cols=4,
                                                                 inner_kind="vectorized"))
    assert "#pragma omp simd" in source_of(add_2d(cols=3, inner_kind="vectorized"))
    assert "#pragma GCC unroll 8" in source_of(add_2d(cols=8, inner_kind="unrolled"))
    threaded = source_of(add_2d(inner_kind="thread_binding"))
    assert "// threadIdx.x: a serial loop on the CPU" in threaded
    assert "#pragma" not in threaded


def test_guard_of_a_split_is_an_if():
    # with constant extents the lowering partitions the loop instead (partition_loops.py)
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    sch = sched.Schedule(te.create_prim_func([A, te.compute((n,), lambda i: A[i] * 2.0,
                                                            name="B")]))
    sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 32])
    assert "if (i_0 * 32 + i_1 < n) {" in source_of(sch.func)
    assert "if (" not in source_of(scale_split(100, 32))


def test_small_constant_allocation_is_on_the_stack_symbolic_on_the_heap():
    assert "float T[10];" in source_of(two_stage())
    heap = source_of(two_stage(Var("n")))
    assert 'float* T = (float*)sched_malloc_checked((int64_t)n, sizeof(float), "T");' in heap
    assert "free(T);" in heap


def test_floor_division_of_possibly_negative_operands_uses_the_helper():
    A = Buffer("A", (IntImm(8),), "int32")
    x = Var("x")
    i = Var("i")
    body = For(i, IntImm(0), IntImm(8), "serial",
               BufferStore(A, (A[i] - x) // 3 + i // 2 + (A[i] % 4), (i,)))
    source = generate_c(lower(PrimFunc("f", (A, x), body)))
    # A[i] - x may be negative (and may wrap: written unsigned, sched/c/int_ranges.py)
    assert "sched_floordiv_i32((int32_t)((uint32_t)A[i] - (uint32_t)x), 3)" in source
    assert "i / 2" in source                                 # i >= 0: plain division
    assert "sched_floormod_i32(A[i], 4)" in source
    assert "static inline int32_t sched_floordiv_i32(int32_t a, int32_t b)" in source
    assert "sched_floordiv_i64" not in source                # only the helpers used


def test_sixteen_bit_floats_are_stored_narrow_and_computed_in_float():
    half = source_of(add_2d(dtype="float16"))
    assert "const _Float16* restrict A" in half
    assert "C[i * 8 + j] = (_Float16)((float)A[i * 8 + j] + (float)B[i * 8 + j]);" in half
    brain = source_of(add_2d(dtype="bfloat16"))
    assert "const uint16_t* restrict A" in brain
    assert "sched_f32_to_bf16(sched_bf16_to_f32(A[i * 8 + j])" in brain
    assert "static inline uint16_t sched_f32_to_bf16(float f)" in brain


def test_float_constants_are_exact():
    assert float_literal(0.1, "float32") == "0.1f"
    assert float_literal(1e-5, "float32") == "1e-05f"
    assert float_literal(2.0, "float32") == "2.0f"
    assert float_literal(0.1, "float64") == "0.1"
    assert float_literal(math.inf, "float32") == "INFINITY"
    assert float_literal(-math.inf, "float32") == "-INFINITY"
    assert float_literal(math.nan, "float32") == "NAN"
    assert float_literal(0.1, "float16") == "0.099975586f"   # the float16 nearest 0.1
    assert float(FloatImm(3.0).value) == 3.0


def test_integer_constants():
    assert int_literal(-(2 ** 31), "int32") == "INT32_MIN"
    assert int_literal(5, "int64") == "INT64_C(5)"
    assert int_literal(1, "bool") == "true"


def test_an_unrolled_loop_longer_than_gcc_takes_is_unrolled_in_part():
    # `#pragma GCC unroll 70000` is refused by gcc (n < 65535), and gcc ran over 10 minutes
    # unrolling by 65534 (audit helper-119), almost 3 unrolling a loop of 2**20 by 4096
    # (helper-165): a loop past MAX_UNROLL is unrolled by PARTIAL_UNROLL
    from sched.c.vector_codegen import MAX_UNROLL, PARTIAL_UNROLL, unroll_pragma

    assert unroll_pragma(8) == "#pragma GCC unroll 8"
    assert unroll_pragma(MAX_UNROLL) == f"#pragma GCC unroll {MAX_UNROLL}" and MAX_UNROLL < 65535
    assert unroll_pragma(70000) == f"#pragma GCC unroll {PARTIAL_UNROLL}"
    A = te.placeholder((70000,), name="A")
    C = te.compute((70000,), lambda i: A[i] * 2.0, name="C")
    sch = sched.Schedule(te.create_prim_func([A, C]))
    sch.unroll(sch.get_loops(sch.get_block("C"))[0])
    assert f"#pragma GCC unroll {PARTIAL_UNROLL}\n" in generate_c(lower(sch.func))
    a, c = np.arange(70000, dtype=np.float32), np.zeros(70000, np.float32)
    sched.build(sch.func, target="c")(a, c)
    np.testing.assert_array_equal(c, a * 2)


_TOO_LARGE_AN_INTERMEDIATE = '''
import numpy as np
import sched
from sched import compute as te

n, m = te.var("n"), te.var("m")
A = te.placeholder((n,), name="A")
B = te.placeholder((m,), name="B")
T = te.compute((n, m), lambda i, j: A[i] * B[j], name="T")
k = te.reduce_axis((0, m), name="k")
C = te.compute((n,), lambda i: te.sum(T[i, k], axis=k), name="C")
kernel = sched.build(te.create_prim_func([A, B, C]), target="c")
size = 1 << 20                        # T: 2**40 floats (4 TiB), A and B 4 MiB each
kernel(np.ones(size, np.float32), np.ones(size, np.float32), np.zeros(size, np.float32))
'''


def test_an_intermediate_buffer_that_cannot_be_allocated_stops_with_a_message():
    # malloc returned NULL and the kernel wrote through it: a segfault (audit helper-125)
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _TOO_LARGE_AN_INTERMEDIATE],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONFAULTHANDLER": ""})
    assert done.returncode != 0
    assert "sched: cannot allocate 1099511627776 elements of 4 bytes for 'T' (out of memory" \
        in done.stderr


_A_COUNT_PAST_INT64 = '''
import numpy as np
import sched

f = sched.parse("""
@T.prim_func
def f(A: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32"), m: T.int64):
    B = T.alloc_buffer((m, m), "float32")
    for i in range(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            B[0, vi] = A[vi]
            B[m - 1, m - 1 - vi] = A[vi]
    for i in range(4):
        with T.block("C"):
            vi = T.axis.spatial(4, i)
            C[vi] = B[0, vi] + B[m - 1, m - 1 - vi]
""")
kernel = sched.build(f, target="c")
kernel(np.ones(4, np.float32), np.zeros(4, np.float32), 2**32)
'''


def test_an_element_count_past_int64_stops_with_a_message():
    # (m, m) at m = 2**32 counted 2**64 elements, wrapped to 0: a NULL buffer written through
    # (audit helper-159)
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _A_COUNT_PAST_INT64], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONFAULTHANDLER": ""})
    assert done.returncode != 0
    assert "sched: cannot allocate 4294967296 * 4294967296 elements for 'B' (past int64)" \
        in done.stderr


def test_a_one_dimensional_allocation_is_sized_in_int64_where_it_may_pass_int32():
    # transform_layout(B, i -> i * 2**30) gives B the shape (n * 2**30 - 2**30 + 1,); sized in
    # int32 it wrapped to one element at n = 5, and the stores ran past it (audit helper-129)
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    sch = sched.Schedule(te.create_prim_func([A, te.compute((n,), lambda i: B[i] * 2.0,
                                                            name="C")]))
    sch.transform_layout(sch.get_block("B"), "B", lambda i: (i * 2**30,))
    source = generate_c(lower(sch.func))
    assert 'sched_malloc_checked((int64_t)n * 1073741824 - 1073741823, sizeof(float), "B")' \
        in source

"""`kernel.export(dir)` on the C target: a .c and a .h that a C program builds with gcc alone
and calls; its numbers against numpy, and each argument check's status and message."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import sched
from sched import compute as te
from sched import hand_schedules
from sched.script import T
from tests.c.c_programs import Pointer, c_program, program_arrays, run_c_program

# -Werror: the interface compiles without warnings (the kernel may leave a dim unused)
GCC = ["gcc", "-std=c11", "-O2", "-march=native", "-fopenmp", "-Wall", "-Wextra", "-Werror",
       "-Wno-unused-parameter"]


def matmul_func():
    n = te.var("n")
    A = te.placeholder((n, 24), "float32", name="A")
    B = te.placeholder((24, 16), "float32", name="B")
    return te.create_prim_func([A, B, te.ops.matmul(A, B)], name="matmul")


def run(exported, args, tmp_path, more=()):
    arrays = program_arrays(args, more)
    source = c_program(exported.name, args, more)
    return run_c_program(exported.directory, source, arrays,
                         [*GCC, "main.c", f"{exported.name}.c", "-o", "main", "-lm"])


def test_exported_matmul_runs_from_c_and_matches_numpy(tmp_path, rng):
    exported = sched.build(matmul_func(), target="c").export(tmp_path / "out")
    assert [p.name for p in exported.files] == ["matmul.h", "matmul.c", "matmul.sched.cmake",
                                                "CMakeLists.txt"]
    header = exported.header.read_text()
    assert "int matmul(const float * A, const float * B, float * C, int64_t n);" in header
    assert "const char *matmul_error_message(void);" in header
    for n in (1, 37):
        a = rng.standard_normal((n, 24)).astype(np.float32)
        b = rng.standard_normal((24, 16)).astype(np.float32)
        c = np.zeros((n, 16), np.float32)
        done = run(exported, [a, b, c, n], tmp_path)
        assert (done.status, done.message) == (0, "")
        np.testing.assert_allclose(done.arrays[2], a @ b, rtol=1e-4, atol=1e-4)


def test_exported_hand_schedule_with_openmp_and_vectors_matches_numpy(tmp_path, rng):
    sch = hand_schedules.cpu_matmul(64, 48, 32)
    exported = sched.build(sch.func, target="c").export(tmp_path, name="tiled")
    assert "#pragma omp parallel for" in (tmp_path / "tiled.c").read_text()
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((32, 48)).astype(np.float32)
    c = np.zeros((64, 48), np.float32)
    done = run(exported, [a, b, c], tmp_path)
    assert done.status == 0
    np.testing.assert_allclose(done.arrays[2], a @ b, rtol=1e-4, atol=1e-4)


@T.prim_func
def shift_scale(a: T.handle, b: T.handle, alpha: T.float32):
    n = T.int32()
    m = T.int32()
    A = T.match_buffer(a, (m,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.block("S"):
            vi = T.axis.spatial(n, i)
            B[vi] = A[vi + 1] * alpha


def test_scalars_and_two_dims_in_parameter_order(tmp_path, rng):
    exported = sched.build(shift_scale, target="c").export(tmp_path)
    assert "int shift_scale(const float * A, float * B, float alpha, int64_t m, int64_t n);" \
        in exported.header.read_text() or \
        "int shift_scale(const float * A, float * B, float alpha, int64_t n, int64_t m);" \
        in exported.header.read_text()
    a = rng.standard_normal(9).astype(np.float32)
    b = np.zeros(8, np.float32)
    dims = _dims_in_header_order(exported, m=9, n=8)
    done = run(exported, [a, b, 0.5, *dims], tmp_path)
    assert done.status == 0
    np.testing.assert_allclose(done.arrays[1], a[1:] * np.float32(0.5), rtol=1e-6)


def _dims_in_header_order(exported, **values):
    header = exported.header.read_text()
    order = sorted(values, key=lambda name: header.index(f"int64_t {name}"))
    return [values[name] for name in order]


@pytest.mark.parametrize("case, status, message", [
    ("n_zero", 3, "shift_scale: dim n = 0: sizes must be at least 1"),
    ("out_of_bounds", 6, "shift_scale: with m = 8, n = 8 some access of the kernel would be "
                         "out of bounds"),
    ("null", 1, "shift_scale: buffer A is NULL"),
    ("misaligned", 2, "shift_scale: buffer B is not 4-byte aligned"),
    ("overlap", 5, "shift_scale: buffers A and B overlap, and the kernel writes B"),
])
def test_argument_checks_return_a_status_and_a_message(tmp_path, rng, case, status, message):
    # each call is refused before the kernel runs: B keeps its zeros
    exported = sched.build(shift_scale, target="c").export(tmp_path)
    a, b = np.ones(9, np.float32), np.zeros(8, np.float32)
    m, n = {"n_zero": (9, 0), "out_of_bounds": (8, 8)}.get(case, (9, 8))
    first, second, more = {"null": (Pointer(None), b, ()),
                           "misaligned": (a, Pointer(1, 4 + 2), (b,)),
                           "overlap": (a, Pointer(0), (b,))}.get(case, (a, b, ()))
    done = run(exported, [first, second, 2.0, *_dims_in_header_order(exported, m=m, n=n)],
               tmp_path, more)
    assert (done.status, done.message) == (status, message)
    np.testing.assert_array_equal(done.arrays[-1], np.zeros(8, np.float32))


def test_check_bounds_off_exports_no_bounds_check(tmp_path):
    exported = sched.build(shift_scale, target="c", check_bounds="off").export(tmp_path)
    assert "out_of_bounds" not in (tmp_path / "shift_scale.c").read_text()
    assert exported.name == "shift_scale"


@pytest.mark.parametrize("name", ["2fast", "int", "sched_x", "a-b", ""])
def test_a_name_that_is_no_c_identifier_is_refused(tmp_path, name):
    kernel = sched.build(matmul_func(), target="c")
    with pytest.raises(ValueError, match=f"export: name {name!r} is not a C identifier"):
        kernel.export(tmp_path, name=name)


def test_a_file_in_the_way_is_refused(tmp_path):
    (tmp_path / "taken").write_text("")
    with pytest.raises(ValueError, match="exists and is not a directory"):
        sched.build(matmul_func(), target="c").export(tmp_path / "taken")


@pytest.mark.skipif(shutil.which("cmake") is None, reason="no cmake on the PATH")
def test_the_cmake_file_builds_the_library(tmp_path):
    exported = sched.build(matmul_func(), target="c").export(tmp_path / "src")
    for command in (["cmake", "-S", "src", "-B", "build"], ["cmake", "--build", "build"]):
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "build" / f"lib{exported.name}.a").is_file()


@pytest.mark.skipif(shutil.which("cmake") is None, reason="no cmake on the PATH")
def test_two_exports_in_one_directory_both_build(tmp_path):
    # helper-88: the second export's CMakeLists.txt replaced the first's, which then built no
    # more; each export now has its NAME.sched.cmake, which the shared CMakeLists.txt includes
    kernel = sched.build(matmul_func(), target="c")
    kernel.export(tmp_path / "src", name="first")
    kernel.export(tmp_path / "src", name="second")
    for command in (["cmake", "-S", "src", "-B", "build"], ["cmake", "--build", "build"]):
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    for name in ("first", "second"):
        assert (tmp_path / "build" / f"lib{name}.a").is_file()


@T.prim_func
def scaled_copy(x: T.handle, y: T.handle, alpha: T.float32, n: T.int32):
    X = T.match_buffer(x, (n,), "float32")
    Y = T.match_buffer(y, (n,), "float32")
    for i in range(n):
        with T.block("Y"):
            vi = T.axis.spatial(n, i)
            Y[vi] = X[vi] * alpha


def test_a_scalar_in_a_shape_is_checked_non_negative(tmp_path, rng):
    exported = sched.build(scaled_copy, target="c").export(tmp_path)
    assert "int scaled_copy(const float * X, float * Y, float alpha, int32_t n);" in \
        exported.header.read_text()
    x = rng.standard_normal(6).astype(np.float32)
    done = run(exported, [x, np.zeros(6, np.float32), 2.0, 6], tmp_path)
    assert done.status == 0
    np.testing.assert_allclose(done.arrays[1], x * 2)
    done = run(exported, [x, np.zeros(6, np.float32), 2.0, -1], tmp_path)
    assert (done.status, done.message) == (
        4, "scaled_copy: X's dimension 0 (n) is -1 with these scalars")


@T.prim_func
def unsigned_copy(x: T.handle, y: T.handle, n: T.uint32):
    X = T.match_buffer(x, (n,), "float32")
    Y = T.match_buffer(y, (n,), "float32")
    for i in range(n):
        with T.block("Y"):
            vi = T.axis.spatial(n, i)
            Y[vi] = X[vi] + T.float32(1)


def test_an_unsigned_scalar_in_a_shape_is_exported(tmp_path, rng):
    # helper-88: "'n' in a shape or the grid is neither a symbolic dim nor an integer scalar
    # parameter" for a uint32 n
    exported = sched.build(unsigned_copy, target="c").export(tmp_path)
    assert "int unsigned_copy(const float * X, float * Y, uint32_t n);" in \
        exported.header.read_text()
    x = rng.standard_normal(5).astype(np.float32)
    done = run(exported, [x, np.zeros(5, np.float32), 5], tmp_path)
    assert done.status == 0
    np.testing.assert_allclose(done.arrays[1], x + 1)


def test_two_exports_link_into_one_program(tmp_path, rng):
    first = sched.build(matmul_func(), target="c").export(tmp_path)
    second = sched.build(scaled_copy, target="c").export(tmp_path)
    (tmp_path / "main.c").write_text(f"""
#include <stdio.h>
#include "{first.name}.h"
#include "{second.name}.h"
int main(void) {{
    static float a[2 * 24], b[24 * 16], c[2 * 16], y[2 * 16];
    for (int k = 0; k < 2 * 24; ++k) a[k] = 1.0f;
    for (int k = 0; k < 24 * 16; ++k) b[k] = 0.5f;
    int s1 = {first.name}(a, b, c, 2);
    int s2 = {second.name}(c, y, 3.0f, 2 * 16);
    printf("%d %d %g\\n", s1, s2, y[5]);
    return s1 || s2 || y[5] != 36.0f;
}}
""")
    built = subprocess.run([*GCC, "main.c", "matmul.c", "scaled_copy.c", "-o", "main", "-lm"],
                           cwd=tmp_path, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    done = subprocess.run(["./main"], cwd=tmp_path, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "0 0 36\n")


def test_a_prebuilt_shared_library_runs_through_ctypes(tmp_path, rng):
    import ctypes

    exported = sched.build(matmul_func(), target="c").export(tmp_path, shared_library=True)
    assert exported.files[-1] == tmp_path / "libmatmul.so"
    library = ctypes.CDLL(str(exported.files[-1]))
    library.matmul.restype = ctypes.c_int
    library.matmul.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64]
    a = rng.standard_normal((5, 24)).astype(np.float32)
    b = rng.standard_normal((24, 16)).astype(np.float32)
    c = np.zeros((5, 16), np.float32)
    assert library.matmul(a.ctypes.data, b.ctypes.data, c.ctypes.data, 5) == 0
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    library.matmul_error_message.restype = ctypes.c_char_p
    assert library.matmul(a.ctypes.data, b.ctypes.data, c.ctypes.data, 0) == 3
    assert library.matmul_error_message() == b"matmul: dim n = 0: sizes must be at least 1"


@T.prim_func
def divided_shape(a: T.handle, nn: T.int64, s: T.int64):
    A = T.match_buffer(a, (nn // s,), "float32")
    for i in range(nn // s):
        with T.block("S"):
            vi = T.axis.spatial(nn // s, i)
            A[vi] = T.float32(1)


def test_a_shape_divided_by_a_scalar_is_checked_for_zero_and_overflow(tmp_path):
    """`nn // s` with s = 0, or nn = INT64_MIN and s = -1 (which traps as / 0 does: the
    exported check itself died with SIGFPE; audit helper-73), is a bad shape, in the export
    and at a call from Python (an AssertionError there)."""
    import ctypes

    from sched.errors import KernelArgumentError

    kernel = sched.build(divided_shape, target="c")
    library = ctypes.CDLL(str(kernel.export(tmp_path, shared_library=True).files[-1]))
    library.divided_shape.restype = ctypes.c_int
    library.divided_shape.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    a = np.zeros(4, np.float32)
    assert library.divided_shape(a.ctypes.data, 8, 2) == 0
    np.testing.assert_array_equal(a, 1)
    for nn, s, problem in ((8, 0, "divides by zero"), (-2 ** 63, -1, "is 9223372036854775808, "
                                                                     "beyond int64")):
        assert library.divided_shape(a.ctypes.data, nn, s) == 4
        with pytest.raises(KernelArgumentError, match=f"nn // s {problem}"):
            kernel(a, nn, s)


def test_a_buffer_too_large_to_count_in_bytes_is_a_bad_shape(tmp_path):
    # audit (helper-88): the byte sizes the pointer and overlap checks use were multiplied in
    # int64 unchecked (undefined in C; UBSan reported it at n = 2**62). An int64 dim is at
    # most 2**40 (arguments.largest_dim); an n x n buffer's bytes still overflow
    import ctypes

    n = te.var("n", "int64")
    A = te.placeholder((n, n), "float32", name="A")
    func = te.create_prim_func([A, te.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")],
                               name="doubled")
    library = ctypes.CDLL(str(sched.build(func, target="c").export(
        tmp_path, shared_library=True).files[-1]))
    library.doubled.restype = ctypes.c_int
    library.doubled.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    library.doubled_error_message.restype = ctypes.c_char_p
    a, b = np.ones(16, np.float32), np.zeros(16, np.float32)
    assert library.doubled(a.ctypes.data, b.ctypes.data, 4) == 0
    np.testing.assert_array_equal(b, 2)
    assert library.doubled(a.ctypes.data, b.ctypes.data, 2 ** 35) == 4
    assert library.doubled_error_message() == \
        b"doubled: buffer A of these sizes holds more bytes than int64 counts"
    assert library.doubled(a.ctypes.data, b.ctypes.data, 2 ** 62) == 3
    assert library.doubled_error_message().startswith(
        b"doubled: dim n = 4611686018427387904 is past 2**40")


def _plus_one(func_name: str, buffer_name: str = "A", dim_name: str = "n"):
    n = te.var(dim_name)
    A = te.placeholder((n,), "float32", name=buffer_name)
    return te.create_prim_func([A, te.compute((n,), lambda i: A[i] + 1.0, name="B")],
                               name=func_name)


def test_exports_of_any_names_compile_and_link_into_one_program(tmp_path):
    # audit (helper-88): the kernel function NAME_kernel was global (exports 'foo' and
    # 'foo_kernel' clashed at link time); 'sched_x' called a kernel the naming had renamed;
    # stdio/stdarg names (fopen, va_list) and the status names (SCHED_OK) were let through;
    # a parameter named NAME_kernel or NAME_fail shadowed the export's helper
    cases = [("foo",), ("foo_kernel",), ("sched_x",), ("fopen",), ("va_list",), ("SCHED_OK",),
             ("mm", "mm_kernel"), ("mm2", "A", "mm2_fail")]
    exports = [sched.build(_plus_one(*case), target="c").export(tmp_path / case[0])
               for case in cases]
    calls = "\n".join(f"    status |= {e.name}(a, b, 4); total += b[3];" for e in exports)
    includes = "\n".join(f'#include "{e.name}.h"' for e in exports)
    (tmp_path / "main.c").write_text(f"""
#include <stdio.h>
{includes}
int main(void) {{
    float a[4] = {{0, 1, 2, 3}}, b[4];
    int status = 0;
    float total = 0;
{calls}
    printf("%d %g\\n", status, total);
    return status;
}}
""")
    sources = [str(e.directory / f"{e.name}.c") for e in exports]
    includes = [f"-I{e.directory}" for e in exports]
    built = subprocess.run([*GCC, *includes, "main.c", *sources, "-o", "main", "-lm"],
                           cwd=tmp_path, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    done = subprocess.run(["./main"], cwd=tmp_path, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, f"0 {4 * len(cases)}\n")


def test_names_sanitized_into_the_helper_prefix_twice_are_told_apart():
    # two IR names both sanitized to `sched_a_` (the reserved prefix gets a '_'): the search
    # for a free name looped forever (each candidate, sanitized again, got another '_')
    import dataclasses

    from sched.ir import IRMutator

    class Rename(IRMutator):          # (te refuses a name that is no identifier: IR can hold it)
        def visit_Buffer(self, node):
            return dataclasses.replace(node, name="sched.a") if node.name == "A" else node

    n = te.var("n")
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="sched_a")
    func = te.create_prim_func([A, B], name="two_names")
    func = dataclasses.replace(func, params=tuple(Rename().visit(p) for p in func.params),
                               body=Rename().visit(func.body))
    assert "sched.a" in {p.name for p in func.params}
    kernel = sched.build(func, target="c")
    a, b = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    kernel(a, b)
    np.testing.assert_array_equal(b, a + 1)


@T.prim_func
def scaled_by_extern(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.block("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = T.call_extern("float32", "my_scale", A[vi])


def test_an_export_keeps_the_extern_c_code_its_kernel_calls(tmp_path):
    # the exported .c called my_scale undeclared (gcc: an implicit int function) and returned
    # garbage with SCHED_OK, and its shared library missed the symbol (audit helper-192)
    import ctypes

    kernel = sched.build(scaled_by_extern, target="c",
                         extern_c="float my_scale(float x) { return x * 3.0f + 0.5f; }\n")
    exported = kernel.export(tmp_path, shared_library=True)
    assert "float my_scale(float x)" in (tmp_path / "scaled_by_extern.c").read_text()
    library = ctypes.CDLL(str(exported.files[-1]))
    library.scaled_by_extern.restype = ctypes.c_int
    library.scaled_by_extern.argtypes = [ctypes.c_void_p] * 2
    a, b = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    assert library.scaled_by_extern(a.ctypes.data, b.ctypes.data) == 0
    np.testing.assert_array_equal(b, a * 3 + 0.5)

"""Kernel call arguments: one test per mistake, matching the message that names the argument."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sched
from sched.arguments import ArgumentBinder
from sched.errors import KernelArgumentError
from sched.ir import Buffer, BufferStore, For, IntImm, PrimFunc, Var


def scale_func() -> PrimFunc:
    """B[i, j] = A[i, j] * k over A (n, 4), B (n * 2 // 2, 4) and a scalar k."""
    n = Var("n")
    A = Buffer("A", (n, IntImm(4)))
    B = Buffer("B", (n * 2 // 2, IntImm(4)))
    k = Var("k", "float32")
    i, j = Var("i"), Var("j")
    body = For(i, IntImm(0), n, "serial", For(j, IntImm(0), IntImm(4), "serial",
                                              BufferStore(B, A[i, j] * k, (i, j))))
    return PrimFunc("scale", (A, B, k), body)


def bind(*args, device="cpu"):
    return ArgumentBinder(scale_func(), device).bind(args)


def arrays(rows=3):
    return np.zeros((rows, 4), np.float32), np.zeros((rows, 4), np.float32)


def test_good_arguments_bind_pointers_scalars_and_dims():
    a, b = arrays(5)
    bound = bind(a, b, 2)
    assert bound.pointers == (a.ctypes.data, b.ctypes.data)
    assert bound.scalars == (2.0,)
    assert bound.dims == (5,)


def test_wrong_number_of_arguments_lists_the_parameters():
    with pytest.raises(KernelArgumentError, match=r"takes 3 arguments \(A, B, k\), got 2"):
        bind(*arrays())


def test_wrong_shape_shows_the_expected_one():
    # B's first dim is n * 2 // 2, checked after n is bound from A
    a, _ = arrays(3)
    with pytest.raises(KernelArgumentError,
                       match=r"argument 2 'B': expected shape \(3, 4\) \(n = 3\), got \(2, 4\)"):
        bind(a, np.zeros((2, 4), np.float32), 1.0)


def test_wrong_constant_dim():
    with pytest.raises(KernelArgumentError,
                       match=r"argument 1 'A': expected shape \(3, 4\) \(n = 3\), got \(3, 5\)"):
        bind(np.zeros((3, 5), np.float32), arrays()[1], 1.0)


def test_wrong_ndim():
    with pytest.raises(KernelArgumentError, match=r"argument 1 'A': expected 2 dimensions"):
        bind(np.zeros(12, np.float32), arrays()[1], 1.0)


def test_wrong_dtype():
    with pytest.raises(KernelArgumentError,
                       match=r"argument 2 'B': expected dtype float32, got float64"):
        bind(arrays()[0], np.zeros((3, 4)), 1.0)


def test_wrong_torch_dtype():
    with pytest.raises(KernelArgumentError,
                       match=r"argument 1 'A': expected dtype torch.float32, got torch.float16"):
        bind(torch.zeros(3, 4, dtype=torch.float16), arrays()[1], 1.0)


def test_non_contiguous_numpy_array():
    a = np.zeros((4, 3), np.float32).T
    with pytest.raises(KernelArgumentError, match=r"argument 1 'A': expected a C-contiguous"):
        bind(a, arrays()[1], 1.0)


def test_non_contiguous_torch_tensor():
    a = torch.zeros(4, 3).t()
    with pytest.raises(KernelArgumentError, match=r"argument 1 'A': expected a contiguous tensor"):
        bind(a, arrays()[1], 1.0)


def _doubling_kernel():
    from sched import compute as te

    A = te.placeholder((5,), "float32", name="A")
    return sched.build(te.create_prim_func([A, te.compute((5,), lambda i: A[i] * 2.0,
                                                          name="B")]), target="c")


def test_a_tensor_whose_storage_was_freed_is_said_to_be_one():
    # (it was called a tensor of torch's tracing: helper-146)
    x = torch.ones(5)
    x.untyped_storage().resize_(0)
    with pytest.raises(KernelArgumentError, match=r"argument 1 'A': its storage holds 0 bytes, "
                                                  r"fewer than the 20 its shape needs"):
        _doubling_kernel()(x, torch.zeros(5))


def test_an_empty_tensor_is_refused_by_its_size():
    # (it was called a tensor of torch's tracing: helper-149)
    from sched import compute as te

    m = te.var("m")
    A = te.placeholder((4, m), "float32", name="A")
    kernel = sched.build(te.create_prim_func([A, te.compute((4, m), lambda i, j: A[i, j] * 2.0,
                                                            name="B")]), target="c")
    with pytest.raises(KernelArgumentError, match=r"argument 1 'A': dimension 1 \(symbolic dim "
                                                  r"'m'\) is 0"):
        kernel(torch.zeros(4, 0), torch.zeros(4, 0))


@pytest.mark.parametrize("trace", ["functionalize", "vmap", "fake"])
def test_tensors_of_torchs_tracing_are_refused(trace):
    # audit, helper-125: a functionalized or fake tensor has data pointer 0 (the kernel read
    # it: a segfault); a batched one raised a raw NotImplementedError
    kernel = _doubling_kernel()

    def double(x):
        out = torch.zeros(5)
        kernel(x, out)
        return out
    match = r"argument 1 'A': expected a tensor with memory, got a \w+ with none"
    with pytest.raises(KernelArgumentError, match=match):
        if trace == "functionalize":
            torch.func.functionalize(double)(torch.ones(5))
        elif trace == "vmap":
            torch.func.vmap(double)(torch.ones(3, 5))
        else:
            from torch._subclasses.fake_tensor import FakeTensorMode

            with FakeTensorMode():
                kernel(torch.ones(5), torch.zeros(5))
    x, out = torch.ones(5), torch.zeros(5)
    kernel(x, out)                              # real tensors, after: the fast path too
    kernel(x, out)
    assert out.tolist() == [2.0] * 5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensor_for_the_c_target():
    with pytest.raises(KernelArgumentError, match=r"argument 1 'A': expected a tensor on cpu"):
        bind(torch.zeros(3, 4, device="cuda"), arrays()[1], 1.0)


def test_numpy_array_for_a_cuda_kernel():
    with pytest.raises(KernelArgumentError,
                       match=r"argument 1 'A': expected a torch tensor on cuda, got a numpy"):
        bind(*arrays(), 1.0, device="cuda")


def test_not_an_array():
    with pytest.raises(KernelArgumentError,
                       match=r"argument 1 'A': expected a numpy array or torch tensor, got list"):
        bind([[0.0] * 4] * 3, arrays()[1], 1.0)


def test_scalar_of_the_wrong_type():
    with pytest.raises(KernelArgumentError, match=r"argument 3 'k': expected a Python float"):
        bind(*arrays(), "2")


def test_integer_scalar_must_be_an_int_in_range():
    n = Var("n")
    A = Buffer("A", (IntImm(4),), "int32")
    func = PrimFunc("fill", (A, n), For(Var("i"), IntImm(0), IntImm(4), "serial",
                                        BufferStore(A, n, (Var("i"),))))
    binder = ArgumentBinder(func, "cpu")
    a = np.zeros(4, np.int32)
    assert binder.bind((a, 7)).scalars == (7,)
    with pytest.raises(KernelArgumentError, match=r"argument 2 'n': expected a Python int"):
        binder.bind((a, 7.0))
    with pytest.raises(KernelArgumentError, match=r"argument 2 'n': expected a Python int"):
        binder.bind((a, True))
    with pytest.raises(KernelArgumentError, match=r"argument 2 'n': 2147483648 is out of range"):
        binder.bind((a, 2 ** 31))


def test_read_only_output():
    a, b = arrays()
    b.flags.writeable = False
    with pytest.raises(KernelArgumentError, match=r"argument 2 'B': the kernel writes this"):
        bind(a, b, 1.0)


def test_bfloat16_takes_numpy_uint16_only():
    A = Buffer("A", (IntImm(4),), "bfloat16")
    func = PrimFunc("f", (A,), For(Var("i"), IntImm(0), IntImm(4), "serial",
                                   BufferStore(A, A[Var("i")], (Var("i"),))))
    binder = ArgumentBinder(func, "cpu")
    binder.bind((np.zeros(4, np.uint16),))
    binder.bind((torch.zeros(4, dtype=torch.bfloat16),))
    with pytest.raises(KernelArgumentError, match=r"bfloat16 arrays are numpy uint16"):
        binder.bind((np.zeros(4, np.float32),))


def test_symbolic_dim_that_no_shape_binds():
    n = Var("n")
    A = Buffer("A", (n * 2,))
    func = PrimFunc("f", (A,), For(Var("i"), IntImm(0), n * 2, "serial",
                                   BufferStore(A, A[Var("i")], (Var("i"),))))
    with pytest.raises(KernelArgumentError, match=r"symbolic dim 'n' is never a dimension"):
        ArgumentBinder(func, "cpu").bind((np.zeros(4, np.float32),))


def test_a_symbolic_dim_only_inside_a_shape_expression_is_refused_at_build():
    """`(16 * n,)` its only use: the build was accepted and every call failed, without the
    fix (audit helper-180); passed as a parameter, n runs."""
    import sched
    from sched import compute as te
    from sched.errors import BuildError

    n = te.var("n")
    A = te.placeholder((16 * n,), "float32", name="A")
    C = te.compute((16 * n,), lambda i: A[i] * 2.0, name="C")
    with pytest.raises(BuildError, match=r"symbolic dim 'n' is never a dimension of its own .* "
                                         r"pass it as a parameter \(te.create_prim_func"):
        sched.build(te.create_prim_func([A, C]), target="c")
    a, c = np.arange(32, dtype=np.float32), np.zeros(32, np.float32)
    sched.build(te.create_prim_func([A, C, n]), target="c")(a, c, 2)
    np.testing.assert_array_equal(c, a * 2)


def test_a_symbolic_dim_beyond_its_dtype_is_refused():
    """The kernel takes n as an int16: 40000 rows ran as n = -25536 and wrote nothing on the
    Python path (the C entry refused; audit helper-73)."""
    import sched
    from sched import compute as te

    n = te.var("n", "int16")
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    kernel = sched.build(te.create_prim_func([A, B]), target="c")
    a, b = np.ones(40000, np.float32), np.zeros(40000, np.float32)
    with pytest.raises(KernelArgumentError, match=r"symbolic dim 'n'\) is 40000, beyond int16"):
        kernel(a, b)
    with pytest.raises(KernelArgumentError, match=r"beyond int16"):
        kernel(torch.from_numpy(a), torch.from_numpy(b))
    kernel(a[:300], b[:300])
    np.testing.assert_array_equal(b[:300], 2)


def test_an_int64_dim_past_2_to_the_40_is_refused(tmp_path):
    """The compiler reads int64 arithmetic exactly for values up to 2**40; an (n, 0) array
    with n = 2**50 ran `C[n * 8192 // 2**60]`, which the kernel wraps, and stored to C[-8]
    (audit helper-171). Such a dim is refused: on numpy's and torch's paths and by the
    export; 2**40 itself runs."""
    import ctypes

    import sched
    from sched.script import T

    @T.prim_func
    def f(a: T.handle, C: T.Buffer((16,), "float32")):
        n = T.int64()
        A = T.match_buffer(a, (n, T.int64(0)), "float32")  # noqa: F841
        for i in range(1):
            with T.block("C"):
                vi = T.axis.spatial(1, i)
                C[T.Select(vi < 1, n * T.int64(8192), T.int64(0)) // T.int64(2**60)] = 1.0

    kernel = sched.build(f, target="c")
    guard = np.zeros(40, np.float32)
    with pytest.raises(KernelArgumentError, match=r"is 1125899906842624, past 2\*\*40"):
        kernel(np.empty((2**50, 0), np.float32), guard[16:32])
    with pytest.raises(KernelArgumentError, match=r"past 2\*\*40"):
        kernel(torch.empty((2**50, 0)), torch.from_numpy(guard[16:32]))
    assert not guard.any()
    kernel(np.empty((2**40, 0), np.float32), guard[16:32])
    np.testing.assert_array_equal(np.nonzero(guard)[0], [16])       # C[0]
    exported = kernel.export(tmp_path, shared_library=True)
    library = ctypes.CDLL(str(exported.files[-1]))
    library.f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    library.f_error_message.restype = ctypes.c_char_p
    c = np.zeros(16, np.float32)
    assert library.f(c.ctypes.data, c.ctypes.data, 2**50) == 3
    assert b"n = 1125899906842624 is past 2**40" in library.f_error_message()
    assert not c.any()


def test_a_float_scalar_beyond_its_dtype_is_refused():
    """A finite value the kernel would get as an infinity (10**400, 1e39 for a float32,
    70000.0 for a float16, a long double 1e400) is refused, on the binder's and the entry
    point's paths (they ran with inf; audit helpers 73, 76, 78); a value that rounds to the
    largest finite, an infinity or a NaN given as such runs."""
    import sched
    from sched.script import T

    with pytest.raises(KernelArgumentError, match=r"argument 3 'k': 1000* is beyond float32"):
        bind(*arrays(), 10 ** 400)

    @T.prim_func
    def fill(A: T.Buffer((4,), "float16"), v: T.float16):
        for i in range(4):
            with T.block("A"):
                vi = T.axis.spatial(4, i)
                A[vi] = v

    kernel = sched.build(fill, target="c")
    a = np.zeros(4, np.float16)
    for value in (70000.0, 65520.0, 100000):
        with pytest.raises(KernelArgumentError, match=r"is beyond float16 \(at most 65504"):
            kernel(a, value)
    kernel(a, float("inf"))
    assert np.isinf(a).all()
    for value in (65504.0, 65519.0):      # 65519 rounds down to the largest finite
        kernel(a, value)
        np.testing.assert_array_equal(a, 65504)
    with pytest.raises(KernelArgumentError, match=r"is beyond float16"):
        kernel(a, np.longdouble("1e400"))       # finite, but an infinity in any float


SCALE_ROW_C = """
void scale_row(const float* a, float* b, int n) {
    for (int k = 0; k < n; ++k) b[k] = 2.0f * a[k] + 1.0f;
}
"""


def test_an_output_written_by_an_extern_call_is_an_output():
    """B is written only by `T.call_extern` (its block declares `T.writes(B[...])`): it was
    taken for an input, so a read-only array was written and an overlapping one accepted
    (audit helper-73)."""
    import sched
    from sched.script import T

    @T.prim_func
    def rows(A: T.Buffer((4, 16), "float32"), B: T.Buffer((4, 16), "float32")):
        for i in range(4):
            with T.block("E"):
                vi = T.axis.spatial(4, i)
                T.reads(A[vi, 0:16])
                T.writes(B[vi, 0:16])
                T.evaluate(T.call_extern("int32", "scale_row", T.address_of(A[vi, 0]),
                                         T.address_of(B[vi, 0]), 16))

    kernel = sched.build(rows, target="c", extern_c=SCALE_ROW_C)
    a = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    b = np.zeros((4, 16), np.float32)
    b.flags.writeable = False
    with pytest.raises(KernelArgumentError, match=r"argument 2 'B': the kernel writes this"):
        kernel(a, b)
    both = np.zeros(80, np.float32)
    with pytest.raises(KernelArgumentError, match="overlap"):
        kernel(both[:64].reshape(4, 16), both[16:].reshape(4, 16))
    out = np.zeros((4, 16), np.float32)
    kernel(a, out)
    np.testing.assert_allclose(out, 2 * a + 1, rtol=1e-6)
    # A, whose address the call gets too, is declared read (T.reads): an input (review
    # helper-77: counting every address as a write refused read-only and grad inputs)
    a.flags.writeable = False
    kernel(a, out)
    weight = torch.from_numpy(a.copy()).requires_grad_()
    kernel(weight, torch.zeros(4, 16))
    assert weight._version == 0


def test_torch_outputs_are_written_as_autograd_expects():
    """A kernel's write is an in-place write to autograd: a tensor that requires grad is
    refused while grad mode is on, and every written tensor's version counter moves (on the
    checked and on the cached call), so a tensor saved for backward and overwritten fails
    backward() instead of giving wrong gradients (audit helper-73)."""
    import sched
    from sched import compute as te

    n = te.var("n")
    A = te.placeholder((n, 8), "float32", name="A")
    B = te.compute((n, 8), lambda i, j: A[i, j] + 1.0, name="B")
    kernel = sched.build(te.create_prim_func([A, B]), target="c")
    a, b = torch.rand(4, 8), torch.zeros(4, 8)
    for calls in (1, 2, 3):             # the first call is checked, the others cached
        kernel(a, b)
        assert (b._version, a._version) == (calls, 0)
    x = torch.rand(4, 8, requires_grad=True)
    y = x * 2
    z = (y * y).sum()                   # saves y
    with pytest.raises(KernelArgumentError, match="the kernel writes this tensor, which "
                                                  "requires grad"):
        kernel(a, y)
    with torch.no_grad():
        kernel(a, y)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


def test_the_emulated_gpu_counts_its_writes_too():
    """cuda-emu copies the outputs back into the tensors: their version counters move as on
    the C target (audit helper-76)."""
    import sched
    from sched import compute as te

    A = te.placeholder((4, 8), "float32", name="A")
    B = te.compute((4, 8), lambda i, j: A[i, j] + 1.0, name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    i, j = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    kernel = sched.build(sch.func, target="cuda-emu")
    a, b = torch.rand(4, 8), torch.zeros(4, 8)
    kernel(a, b)
    kernel(a, b)
    assert (b._version, a._version) == (2, 0)
    torch.testing.assert_close(b, a + 1)


def test_a_shape_computed_in_a_narrow_dtype_must_not_wrap(tmp_path):
    """B's shape `n * 2` of an int8 n is computed in int8 by the kernel: at n = 100 it is
    200, which wraps to -56, and the kernel wrote nothing; the C entry, the Python path and
    the export refuse it (audit helpers 76, 77). int32 shape arithmetic is computed in int64
    where it could wrap, so `n * 2` past 2**31 is a size (it was refused on the Python
    path)."""
    import ctypes

    import sched
    from sched import compute as te
    from sched.arguments import _evaluate

    n = te.var("n", "int8")
    A = te.placeholder((n,), "float32", name="A")
    B = te.compute((n * 2,), lambda i: A[i // 2] * 2.0, name="B")
    kernel = sched.build(te.create_prim_func([A, B], name="doubled"), target="c")
    for size, fits in ((50, True), (100, False)):
        a, b = np.ones(size, np.float32), np.zeros(2 * size, np.float32)
        for args in ((a, b), (torch.from_numpy(a), torch.from_numpy(b))):
            if fits:
                kernel(*args)
                assert (np.asarray(args[1]) == 2).all()
            else:
                with pytest.raises(KernelArgumentError, match=r"is 200, beyond int8"):
                    kernel(*args)
    library = ctypes.CDLL(str(kernel.export(tmp_path, shared_library=True).files[-1]))
    library.doubled.restype = ctypes.c_int
    b = np.zeros(200, np.float32)
    assert library.doubled(np.ones(100, np.float32).ctypes.data, b.ctypes.data,
                           ctypes.c_int64(100)) == 4
    m = te.var("m")
    assert _evaluate(m * 2, {m: 2 ** 30 + 5}) == 2 ** 31 + 10


def test_shape_arithmetic_that_overflows_is_refused_by_the_entry_point_too():
    """The C entry point checked 8- and 16-bit shape arithmetic of signed types only (a uint8
    `n * 2` of 400 ran as 144), and computed int64 products with C's undefined overflow (at
    n = 2**62, `n * 4` wrapped to 0 and the kernel wrote past an empty array; audit
    helper-78). Both are refused with a status, and the call then by the binder."""
    import sched
    from sched.c.entry import Status
    from sched.script import T

    @T.prim_func
    def doubled(a: T.handle, n: T.uint8):
        A = T.match_buffer(a, (n * T.uint8(2),), "float32")
        for i in range(n * T.uint8(2)):
            with T.block("A"):
                vi = T.axis.spatial(n * T.uint8(2), i)
                A[vi] = T.float32(1)

    @T.prim_func
    def quadrupled(a: T.handle, n: T.int64):
        A = T.match_buffer(a, (n * T.int64(4),), "float32")
        for i in range(4):
            with T.block("A"):
                vi = T.axis.spatial(4, i)
                A[vi] = T.float32(1)

    kernel = sched.build(doubled, target="c")
    a = np.zeros(400, np.float32)
    assert kernel.entry_status(a, 200) == Status.SHAPE
    with pytest.raises(KernelArgumentError, match=r"is 400, beyond uint8"):
        kernel(a, 200)
    kernel(a[:200], 100)
    assert (a[:200] == 1).all()
    guarded = np.zeros(8, np.float32)
    kernel = sched.build(quadrupled, target="c")
    assert kernel.entry_status(guarded[:0], 2 ** 62) == Status.SHAPE
    with pytest.raises(KernelArgumentError, match=r"beyond int64"):
        kernel(guarded[:0], 2 ** 62)
    assert (guarded == 0).all()

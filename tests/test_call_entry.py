"""The C entry point of CPU kernels (issue 14, item 4): calls on numpy arrays are checked in C,
every check still fires after warm-up, and a refused call is checked again in Python, which
raises the same error `ArgumentBinder.bind` does (or accepts what C does not know)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sched
from sched import compute as te
from sched.arguments import ArgumentBinder
from sched.c.entry import Status
from sched.errors import KernelArgumentError
from sched.script import T
from tests.lower.block_ir import add_2d


@pytest.fixture(scope="module")
def add():
    kernel = sched.build(add_2d(rows=16, cols=16), target="c")
    assert kernel.entry is not None, kernel.entry_unused
    return kernel


def arrays(rng, shape=(16, 16), dtype=np.float32):
    a, b = rng.standard_normal((2, *shape)).astype(dtype)
    return a, b, np.zeros(shape, dtype)


def binder_error(kernel, args) -> str:
    """The message the checks in Python give for `args`."""
    with pytest.raises(KernelArgumentError) as caught:
        ArgumentBinder(kernel.func, "cpu").bind(args)
    return str(caught.value)


def test_good_calls_run_in_c_and_compute_the_sum(add, rng):
    for _ in range(3):
        a, b, c = arrays(rng)
        before = add.slow_calls
        add(a, b, c)
        assert add.slow_calls == before
        np.testing.assert_array_equal(c, a + b)


def _misaligned(shape=(16, 16)):
    raw = np.zeros(np.prod(shape) * 4 + 4, np.uint8)
    return raw[1:1 + np.prod(shape) * 4].view(np.float32).reshape(shape)


def _read_only(shape=(16, 16)):
    array = np.zeros(shape, np.float32)
    array.flags.writeable = False
    return array


MISTAKES = {
    "wrong dtype": lambda a, b, c: (a, b.astype(np.float64), c),
    "wrong shape": lambda a, b, c: (a, b[:15], c),
    "wrong ndim": lambda a, b, c: (a, b.reshape(256), c),
    "non-contiguous": lambda a, b, c: (a, np.asfortranarray(b), c),
    "strided view": lambda a, b, c: (a, np.zeros((16, 32), np.float32)[:, ::2], c),
    "misaligned view": lambda a, b, c: (a, _misaligned(), c),
    "read-only output": lambda a, b, c: (a, b, _read_only()),
    "output overlaps an input": lambda a, b, c: (a, b, a),
    "too few arguments": lambda a, b, c: (a, b),
    "too many arguments": lambda a, b, c: (a, b, c, c),
    "a list": lambda a, b, c: (a, b.tolist(), c),
    "a scalar": lambda a, b, c: (a, 1.0, c),
    "big-endian": lambda a, b, c: (a, b.astype(">f4"), c),
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_every_check_fires_after_warm_up(add, rng, mistake):
    a, b, c = arrays(rng)
    add(a, b, c)                                   # warm: the same kernel, good arguments
    args = MISTAKES[mistake](a, b, c.copy())
    output = args[2] if len(args) > 2 and isinstance(args[2], np.ndarray) else None
    before = None if output is None else output.copy()
    assert add.entry_status(*args) not in (Status.RAN, None)
    with pytest.raises(KernelArgumentError) as caught:
        add(*args)
    assert str(caught.value) == binder_error(add, args)
    if output is not None and output is not a:
        np.testing.assert_array_equal(output, before)     # the kernel did not run


def test_a_misaligned_view_names_the_alignment(add, rng):
    a, _, c = arrays(rng)
    with pytest.raises(KernelArgumentError, match=r"argument 2 'B': its data \(address 0x[0-9a-f]+"
                                                   r"\) is not aligned to its 4-byte elements"):
        add(a, _misaligned(), c)


def test_torch_tensors_and_subclasses_take_the_checks_in_python(add, rng):
    a, b, c = arrays(rng)
    ta, tb, tc = (torch.from_numpy(x.copy()) for x in (a, b, c))
    assert add.entry_status(ta, tb, tc) == Status.ARRAY
    add(ta, tb, tc)
    np.testing.assert_array_equal(tc.numpy(), a + b)
    with pytest.raises(KernelArgumentError, match=r"argument 2 'B': expected dtype "
                                                   r"torch.float32, got torch.float64"):
        add(ta, tb.double(), tc)
    matrix = np.asmatrix(c.copy())                   # an ndarray subclass: accepted in Python
    add(a, b, matrix)
    np.testing.assert_array_equal(np.asarray(matrix), a + b)


def test_arrays_from_torch_and_mixed_arguments_run(add, rng):
    a, b, c = arrays(rng)
    add(torch.from_numpy(a).numpy(), b, c)
    np.testing.assert_array_equal(c, a + b)


# -- symbolic dims, shapes built from them, scalars ---------------------------------------------

@T.prim_func
def symbolic_shift(a: T.handle, b: T.handle):
    n = T.int32()
    m = T.int32()
    A = T.match_buffer(a, (m,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i in range(n):
        with T.block("S"):
            vi = T.axis.spatial(n, i)
            B[vi] = A[vi + 1]


def test_the_entry_condition_on_symbolic_dims_is_checked_in_c(rng):
    kernel = sched.build(symbolic_shift, target="c")
    assert kernel.entry is not None, kernel.entry_unused
    for n in (1, 5, 8):
        for m in (n - 1, n, n + 1, n + 3):
            if m == 0:
                continue        # refused before any bounds check (test below)
            a = rng.standard_normal(m).astype(np.float32)
            b = np.zeros(n, np.float32)
            bad = m <= n
            assert kernel.entry_status(a, b) == (Status.BOUNDS if bad else Status.RAN)
            if bad:
                with pytest.raises(KernelArgumentError, match=rf"with m = {m}, n = {n}, "
                                                               r"block 'S' reads A\[vi \+ 1\]"):
                    kernel(a, b)
            else:
                np.testing.assert_array_equal(b, a[1:n + 1])


@T.prim_func
def first_element(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (1,), "float32")
    with T.block("S"):
        B[0] = A[0]


@pytest.mark.parametrize("func, shapes", [(symbolic_shift, ((0,), (1,))),
                                          (symbolic_shift, ((3,), (0,))),
                                          (first_element, ((0,), (1,)))])
def test_a_zero_symbolic_dim_is_refused_on_both_paths(func, shapes):
    """The bounds are proven for sizes of at least 1; with n = 0, `A[0]` (proven in bounds
    for every n >= 1) would read outside an empty array."""
    kernel = sched.build(func, target="c")
    arrays = [np.ones(shape, np.float32) for shape in shapes]
    if kernel.entry is not None:
        assert kernel.entry_status(*arrays) == Status.SHAPE
    with pytest.raises(KernelArgumentError, match=r"is 0: a kernel with symbolic dims runs on "
                                                  r"sizes of at least 1"):
        kernel(*arrays)


def test_check_bounds_off_turns_the_entry_condition_off_in_c_too(rng):
    kernel = sched.build(symbolic_shift, target="c", check_bounds="off")
    a = rng.standard_normal(9).astype(np.float32)
    b = np.zeros(8, np.float32)
    assert kernel.entry_status(a[:8], b) == Status.RAN    # reads a[8]: memory that exists
    np.testing.assert_array_equal(b, a[1:])


@T.prim_func
def halves(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, ((n * 2 + 1) // 2, T.min(n, 3), n % 2 + 1), "float32")
    for i, j, k in T.grid(n, T.min(n, 3), n % 2 + 1):
        with T.block("S"):
            vi, vj, vk = T.axis.remap("SSS", [i, j, k])
            B[vi, vj, vk] = A[vi] + T.float32(1)


def test_shapes_computed_from_dims_are_checked_in_c(rng):
    kernel = sched.build(halves, target="c")
    assert kernel.entry is not None, kernel.entry_unused
    for n in (1, 2, 5):
        a = rng.standard_normal(n).astype(np.float32)
        shape = (n, min(n, 3), n % 2 + 1)
        b = np.zeros(shape, np.float32)
        assert kernel.entry_status(a, b) == Status.RAN
        np.testing.assert_array_equal(b, np.broadcast_to(a[:, None, None] + 1, shape))
        for d in range(3):
            wrong = np.zeros(tuple(x + (k == d) for k, x in enumerate(shape)), np.float32)
            assert kernel.entry_status(a, wrong) == Status.SHAPE
            with pytest.raises(KernelArgumentError) as caught:
                kernel(a, wrong)
            assert str(caught.value) == binder_error(kernel, (a, wrong))
    with pytest.raises(KernelArgumentError, match=r"argument 2 'B': expected shape \(2, 2, 1\) "
                                                   r"\(n = 2\), got \(3, 2, 1\)"):
        kernel(np.zeros(2, np.float32), np.zeros((3, 2, 1), np.float32))


@T.prim_func
def scale(a: T.handle, n: T.int32, k: T.float32, flip: T.bool):
    A = T.match_buffer(a, (4, n), "float32")
    for i, j in T.grid(4, n):
        with T.block("S"):
            vi, vj = T.axis.remap("SS", [i, j])
            A[vi, vj] = T.if_then_else(flip, A[vi, vj] * k * T.float32(-1), A[vi, vj] * k)


def test_scalars_are_checked_in_python_and_passed_to_the_entry_point(rng):
    kernel = sched.build(scale, target="c")
    assert kernel.entry is not None, kernel.entry_unused
    a = rng.standard_normal((4, 5)).astype(np.float32)
    for args, factor in [((5, 2.0, False), 2.0), ((5, 3, True), -3.0),
                         ((np.int32(5), np.float32(0.5), np.bool_(False)), 0.5)]:
        got = a.copy()
        before = kernel.slow_calls
        kernel(got, *args)
        np.testing.assert_allclose(got, a * factor)
        plain = all(type(v) in (int, float, bool) for v in args)
        assert kernel.slow_calls == before + (0 if plain else 1)
    with pytest.raises(KernelArgumentError, match=r"argument 2 'n': 2147483648 is out of range"):
        kernel(a, 2 ** 31, 1.0, False)
    with pytest.raises(KernelArgumentError, match=r"argument 1 'A': expected shape \(4, 6\)"):
        kernel(a, 6, 1.0, False)
    with pytest.raises(KernelArgumentError, match=r"argument 4 'flip': expected a Python bool"):
        kernel(a, 5, 1.0, 1)
    with pytest.raises(KernelArgumentError, match=r"argument 3 'k': expected a Python float"):
        kernel(a, 5, True, False)


@pytest.mark.parametrize("dtype", ["float64", "int8", "int64", "uint16", "bool", "float16"])
def test_every_dtype_runs_through_the_entry_point(rng, dtype):
    n = te.var("n")
    A = te.placeholder((n, 3), name="A", dtype=dtype)
    B = te.compute((n, 3), lambda i, j: A[i, j], name="B")
    kernel = sched.build(te.create_prim_func([A, B]), target="c")
    assert kernel.entry is not None, kernel.entry_unused
    a = (rng.standard_normal((7, 3)) * 10).astype(dtype)
    b = np.zeros_like(a)
    assert kernel.entry_status(a, b) == Status.RAN
    np.testing.assert_array_equal(b, a)
    other = np.zeros((7, 3), np.float32 if dtype != "float32" else np.float64)
    assert kernel.entry_status(a, other) == Status.ARRAY


def test_without_the_entry_point_calls_are_checked_in_python(rng, monkeypatch):
    import sched.c.object_layout as layout

    monkeypatch.setattr(layout, "_verified", {"ok": False})
    kernel = sched.build(add_2d(rows=4, cols=4), target="c")
    assert kernel.entry is None and "layout" in kernel.entry_unused
    a, b, c = arrays(rng, (4, 4))
    kernel(a, b, c)
    np.testing.assert_array_equal(c, a + b)
    assert kernel.slow_calls == 1
    with pytest.raises(KernelArgumentError, match="read-only"):
        kernel(a, b, _read_only((4, 4)))


@pytest.mark.parametrize("name", ["probe_layout", "type", "items", "sched_entry_array", "min"])
def test_kernel_names_do_not_clash_with_the_entry_points_names(rng, name):
    import dataclasses

    kernel = sched.build(dataclasses.replace(add_2d(rows=4, cols=4), name=name), target="c")
    assert kernel.entry is not None, kernel.entry_unused
    a, b, c = arrays(rng, (4, 4))
    assert kernel.entry_status(a, b, c) == Status.RAN
    np.testing.assert_array_equal(c, a + b)


def test_the_layout_probe_reads_objects_as_python_does(add):
    from sched.c.object_layout import _check

    assert _check(add._library.sched_probe_layout)


def _random_argument(rng, base: np.ndarray, shape: tuple[int, ...]):
    """An array for a (shape) float32 parameter, right or wrong in one random way, sometimes
    a view of `base` (so that arguments may overlap)."""
    choice = rng.integers(9)
    size = int(np.prod(shape))
    if choice == 0:
        return np.zeros(shape, np.float64)
    if choice == 1:
        wrong = list(shape)
        wrong[rng.integers(len(shape))] += int(rng.choice([-1, 1]))
        return np.zeros(wrong, np.float32)
    if choice == 2:
        return np.zeros(shape[::-1], np.float32).T
    if choice == 3:
        return _misaligned(shape)
    if choice == 4:
        return _read_only(shape)
    if choice in (5, 6):                    # a view of the shared base at some offset
        start = int(rng.integers(0, base.size - size + 1))
        return base[start:start + size].reshape(shape)
    return np.zeros(shape, np.float32)


def _shift_arguments(rng, base):
    n, m = int(rng.integers(1, 12)), int(rng.integers(1, 14))
    return _random_argument(rng, base, (m,)), _random_argument(rng, base, (n,))


def _add_arguments(rng, base):
    return tuple(_random_argument(rng, base, (4, 4)) for _ in range(3))


def _halves_arguments(rng, base):
    n = int(rng.integers(1, 6))
    return (_random_argument(rng, base, (n,)),
            _random_argument(rng, base, (n, min(n, 3), n % 2 + 1)))


@pytest.mark.parametrize("func, make", [(symbolic_shift, _shift_arguments),
                                        (add_2d(rows=4, cols=4), _add_arguments),
                                        (halves, _halves_arguments)],
                         ids=["shift", "add", "halves"])
def test_the_entry_point_accepts_exactly_what_the_binder_accepts(rng, func, make):
    """Random arguments, right and wrong (some overlapping views of one array): the entry
    point runs the kernel only when the checks in Python accept the call, and refuses every
    call they refuse."""
    kernel = sched.build(func, target="c")
    binder = ArgumentBinder(kernel.func, "cpu")
    base = np.zeros(64, np.float32)
    agreed = {True: 0, False: 0}
    for _ in range(400):
        args = make(rng, base)
        try:
            binder.bind(args)
            accepted = True
        except KernelArgumentError:
            accepted = False
        status = kernel.entry_status(*args)
        assert (status == Status.RAN) == accepted, ([a.shape for a in args], status)
        agreed[accepted] += 1
    assert min(agreed.values()) > 10, agreed


def test_torch_calls_with_a_known_layout_check_only_their_pointers(add, rng):
    a, b, c = arrays(rng)
    ta, tb, tc = (torch.from_numpy(x.copy()) for x in (a, b, c))
    add(ta, tb, tc)                                        # the layout is checked, remembered
    before = add.slow_calls
    tb2 = torch.from_numpy(b * 2)
    add(ta, tb2, tc)
    assert add.slow_calls == before
    np.testing.assert_array_equal(tc.numpy(), a + 2 * b)
    # the same layout, but the output is an input: refused by its pointers
    with pytest.raises(KernelArgumentError, match=r"arguments 1 'A' and 3 'C' share memory"):
        add(ta, tb, ta)
    misaligned = torch.frombuffer(bytearray(16 * 16 * 4 + 4), dtype=torch.float32, offset=2,
                                  count=256).view(16, 16)
    with pytest.raises(KernelArgumentError, match=r"argument 3 'C': its data .* is not aligned"):
        add(ta, tb, misaligned)
    for wrong, message in [(tb.double(), "expected dtype torch.float32, got torch.float64"),
                           (tb.t(), "expected a contiguous tensor"),
                           (tb[:15], r"expected shape \(16, 16\), got \(15, 16\)")]:
        with pytest.raises(KernelArgumentError, match=rf"argument 2 'B': {message}"):
            add(ta, wrong, tc)
    np.testing.assert_array_equal(tc.numpy(), a + 2 * b)


def test_torch_calls_the_full_checks_refuse_stay_refused_after_a_known_layout(add, rng):
    """Tensors with the dtype, shape and strides of an accepted call that the kernel still
    cannot take (audit, stop 28): on the meta device, negated views, storages resized
    smaller, layouts other than strided."""
    a, b, c = arrays(rng)
    ta, tb, tc = (torch.from_numpy(x.copy()) for x in (a, b, c))
    add(ta, tb, tc)                                        # the layout is remembered
    with pytest.raises(KernelArgumentError, match=r"argument 3 'C': expected a tensor on cpu, "
                                                  r"got one on meta"):
        add(ta, tb, torch.empty(16, 16, device="meta"))
    negated = torch._neg_view(tb)
    with pytest.raises(KernelArgumentError, match=r"argument 2 'B': .* a negated or conjugated "
                                                  r"view: pass tensor.resolve_neg\(\)"):
        add(ta, negated, tc)
    add(ta, negated.resolve_neg(), tc)
    np.testing.assert_array_equal(tc.numpy(), a - b)
    freed = torch.zeros(16, 16)
    freed.untyped_storage().resize_(64)
    with pytest.raises(KernelArgumentError, match=r"argument 3 'C': its storage holds 64 bytes, "
                                                  r"fewer than the 1024 its shape needs"):
        add(ta, tb, freed)
    with pytest.raises(KernelArgumentError, match=r"argument 1 'A': expected a dense "
                                                  r"\(strided\) tensor, got a sparse_csr one"):
        add(ta.to_sparse_csr(), tb, tc)


def test_torch_calls_with_symbolic_dims_bind_them_for_each_layout(rng):
    kernel = sched.build(symbolic_shift, target="c")
    for m, n in [(9, 8), (9, 8), (5, 3), (9, 8)]:
        a = torch.from_numpy(rng.standard_normal(m).astype(np.float32))
        b = torch.zeros(n)
        kernel(a, b)
        np.testing.assert_array_equal(b.numpy(), a.numpy()[1:n + 1])
    with pytest.raises(KernelArgumentError, match=r"with m = 8, n = 8"):
        kernel(torch.zeros(8), torch.zeros(8))


@T.prim_func
def strided_gather(a: T.handle, b: T.handle, c: T.handle):
    n = T.int32()
    m = T.int32()
    k = T.int32()
    A = T.match_buffer(a, (m,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    C = T.match_buffer(c, (k, 2), "float32")
    for i in range(n):
        with T.block("S"):
            vi = T.axis.spatial(n, i)
            B[vi] = A[vi // 3 * 2 + 1] + C[vi % 5, 1]


def test_the_c_entry_condition_agrees_with_isl_on_a_grid_of_sizes():
    """Quasi-affine accesses (// and %): the C condition isl writes refuses exactly the sizes
    for which the checks in Python (isl emptiness) find an access out of bounds."""
    kernel = sched.build(strided_gather, target="c")
    assert kernel.entry is not None, kernel.entry_unused
    binder = ArgumentBinder(kernel.func, "cpu")
    refused = 0
    for n in range(1, 13):
        for m in range(1, 10):
            for k in range(1, 7):
                args = (np.zeros(m, np.float32), np.zeros(n, np.float32),
                        np.zeros((k, 2), np.float32))
                try:
                    binder.bind(args)
                    accepted = True
                except KernelArgumentError:
                    accepted = False
                    refused += 1
                expected = Status.RAN if accepted else Status.BOUNDS
                assert kernel.entry_status(*args) == expected, (n, m, k)
    assert 0 < refused < 12 * 9 * 6


@T.prim_func
def scale_half(a: T.handle, h: T.float16):
    A = T.match_buffer(a, (4,), "float32")
    for i in range(4):
        with T.block("S"):
            vi = T.axis.spatial(4, i)
            A[vi] = A[vi] * T.Cast("float32", h)


@T.prim_func
def shift_bfloat16(a: T.handle, g: T.bfloat16):
    A = T.match_buffer(a, (4,), "float32")
    for i in range(4):
        with T.block("S"):
            vi = T.axis.spatial(4, i)
            A[vi] = A[vi] + T.Cast("float32", g)


@pytest.mark.parametrize("path", ["entry point", "checks in Python"])
def test_float16_scalars_arrive_rounded_to_nearest(path):
    """A float16 scalar used to arrive as garbage (ctypes passed a float where C expects a
    _Float16 in a vector register); it now goes as its bits, on both paths."""
    kernel = sched.build(scale_half, target="c")
    assert kernel.entry is not None, kernel.entry_unused
    for h in (3.0, 0.1, -65504.0, 1e-7):
        a = np.array([1.0, -2.0, 0.5, 4.0], np.float32)
        before = kernel.slow_calls
        kernel(a, h if path == "entry point" else np.float64(h))
        assert kernel.slow_calls == before + (path != "entry point")
        expected = np.array([1.0, -2.0, 0.5, 4.0], np.float32) * np.float32(np.float16(h))
        np.testing.assert_array_equal(a, expected)


def test_bfloat16_scalar_bits_round_to_nearest_even():
    from sched.c.entry import scalar_bits

    for value in (0.5, 1.0 / 3.0, -2.5, 1e30, 3.0e-39, float("inf")):
        expected = int(torch.tensor(value, dtype=torch.bfloat16).view(torch.int16)) & 0xFFFF
        assert scalar_bits(value, "bfloat16") == expected, value
    assert scalar_bits(float("nan"), "bfloat16") & 0x7FC0 == 0x7FC0


def test_bfloat16_scalars_arrive_as_their_value():
    kernel = sched.build(shift_bfloat16, target="c")
    a = np.zeros(4, np.float32)
    kernel(a, 0.5)
    np.testing.assert_array_equal(a, np.full(4, 0.5, np.float32))


def test_the_entry_condition_does_not_overflow_at_the_int64_limits():
    # `off + m + 3 >= n` in int64 C wrapped at off = -2**63 and passed: the numpy path read
    # A[-1] where the torch path refused (audit helper-114)
    @T.prim_func
    def f(a: T.handle, B: T.Buffer((4,), "float32"), off: T.int64, m: T.int64):
        n = T.int64()
        A = T.match_buffer(a, (n,), "float32")
        for i in range(T.int64(4)):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi + off + m]

    kernel = sched.build(f, target="c")
    a = np.arange(10, dtype=np.float32)
    for off, m in ((-(2**63), -1), (2**63 - 1, 1), (-(2**63), 2**63 - 1 - 7)):
        with pytest.raises(KernelArgumentError, match="out of bounds"):
            kernel(a, np.zeros(4, np.float32), off, m)
    b = np.zeros(4, np.float32)
    kernel(a, b, -(2**63) + 3, 2**63 - 1)          # off + m = 2: in bounds
    np.testing.assert_array_equal(b, a[2:6])

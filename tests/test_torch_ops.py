"""sched kernels as torch operators (`sched.torch.custom_op`): functional and out forms, the
fake implementation under torch.compile(fullgraph=True), and the refusals."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import sched
from sched import compute as te
from sched import hand_schedules

_names = itertools.count()


def unique(name: str) -> str:
    """A fresh operator name: torch keeps registrations for the whole process."""
    return f"sched_test::{name}_{next(_names)}"


def matmul_bias_relu():
    n = te.var("n")
    A = te.placeholder((n, 16), "float32", name="A")
    B = te.placeholder((16, 8), "float32", name="B")
    bias = te.placeholder((8,), "float32", name="bias")
    return te.create_prim_func([A, B, bias, te.ops.matmul_bias_relu(A, B, bias)], name="mbr")


@pytest.fixture(scope="module")
def mbr():
    return sched.build(matmul_bias_relu(), target="c")


def reference(a, b, bias):
    return torch.relu(a.double() @ b.double() + bias.double()).float()


def test_functional_form_allocates_the_output(mbr):
    op = sched.torch.custom_op(unique("mbr"), mbr)
    a, b, bias = torch.randn(5, 16), torch.randn(16, 8), torch.randn(8)
    out = op.functional(a, b, bias)
    assert out.shape == (5, 8) and out.dtype == torch.float32
    torch.testing.assert_close(out, reference(a, b, bias), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(op(a.T.contiguous().T, b, bias), out)   # non-contiguous input


def test_out_form_writes_in_place(mbr):
    op = sched.torch.custom_op(unique("mbr"), mbr)
    a, b, bias = torch.randn(3, 16), torch.randn(16, 8), torch.randn(8)
    c = torch.full((3, 8), 7.0)
    assert op.out(a, b, bias, c) is None
    torch.testing.assert_close(c, reference(a, b, bias), rtol=1e-4, atol=1e-4)


def test_backward_through_the_operator_says_it_has_no_gradient(mbr):
    """The operator has no backward formula: torch only warned and gave gradients that
    left the kernel out (d/da of sum(op(a) + a) came out 1; audit helper-76). backward()
    raises now; forward with inputs that require grad still runs."""
    op = sched.torch.custom_op(unique("mbr"), mbr)
    a = torch.randn(3, 16, requires_grad=True)
    b, bias = torch.randn(16, 8), torch.randn(8)
    out = op(a, b, bias)
    torch.testing.assert_close(out.detach(), reference(a.detach(), b, bias), rtol=1e-4,
                               atol=1e-4)
    with pytest.raises(RuntimeError, match="a sched kernel has no gradient"):
        (out.sum() + a.sum()).backward()


def test_torch_compile_fullgraph_with_changing_sizes(mbr):
    op = sched.torch.custom_op(unique("mbr"), mbr)
    compiled = torch.compile(lambda a, b, bias: op.functional(a, b, bias) * 2 + 1,
                             fullgraph=True)
    b, bias = torch.randn(16, 8), torch.randn(8)
    for n in (4, 9, 17):
        a = torch.randn(n, 16)
        torch.testing.assert_close(compiled(a, b, bias), reference(a, b, bias) * 2 + 1,
                                   rtol=1e-4, atol=1e-4)


def test_torch_compile_of_the_out_form(mbr):
    op = sched.torch.custom_op(unique("mbr"), mbr)

    def run(a, b, bias):
        c = torch.empty(a.shape[0], 8)
        op.out(a, b, bias, c)
        return c - 1

    a, b, bias = torch.randn(6, 16), torch.randn(16, 8), torch.randn(8)
    torch.testing.assert_close(torch.compile(run, fullgraph=True)(a, b, bias),
                               reference(a, b, bias) - 1, rtol=1e-4, atol=1e-4)


def test_opcheck_passes(mbr):
    op = sched.torch.custom_op(unique("mbr"), mbr)
    args = (torch.randn(5, 16), torch.randn(16, 8), torch.randn(8))
    results = torch.library.opcheck(op.functional, args)
    assert set(results.values()) == {"SUCCESS"}, results


def test_a_scheduled_kernel_with_a_scalar(rng):
    from sched.script import T

    @T.prim_func
    def axpy(x: T.handle, y: T.handle, alpha: T.float32, n: T.int32):
        X = T.match_buffer(x, (n,), "float32")
        Y = T.match_buffer(y, (n,), "float32")
        for i in range(n):
            with T.block("Y"):
                vi = T.axis.spatial(n, i)
                Y[vi] = X[vi] * alpha + T.float32(1)

    op = sched.torch.custom_op(unique("axpy"), sched.build(axpy, target="c"))
    x = torch.randn(10)
    torch.testing.assert_close(op(x, 3.0, 10), x * 3 + 1)


def test_a_cpu_hand_schedule_as_an_operator():
    kernel = sched.build(hand_schedules.cpu_matmul(32, 32, 32).func, target="c")
    op = sched.torch.custom_op(unique("cpu_matmul"), kernel)
    a, b = torch.randn(32, 32), torch.randn(32, 32)
    torch.testing.assert_close(op(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_wrong_shapes_are_refused_by_the_kernel_checks(mbr):
    op = sched.torch.custom_op(unique("mbr"), mbr)
    with pytest.raises(sched.KernelArgumentError, match="B"):
        op(torch.randn(5, 16), torch.randn(15, 8), torch.randn(8))


def test_an_output_dim_no_input_fixes_leaves_only_the_out_form():
    n = te.var("n")
    A = te.placeholder((4,), "float32", name="A")
    B = te.compute((n, 4), lambda i, j: A[j], name="B")
    kernel = sched.build(te.create_prim_func([A, B], name="spread"), target="c")
    op = sched.torch.custom_op(unique("spread"), kernel)
    assert op.functional is None
    with pytest.raises(TypeError, match="symbolic dim 'n' of 'spread' is a whole dimension of "
                                        "no input.*use the out form"):
        op(torch.randn(4))
    b = torch.empty(3, 4)
    a = torch.randn(4)
    op.out(a, b)
    torch.testing.assert_close(b, a.expand(3, 4))


@pytest.mark.parametrize("qualname, message", [
    ("nonamespace", "expected a name 'namespace::name'"),
    ("a::b::c", "expected a name 'namespace::name'"),
])
def test_bad_names_are_refused(mbr, qualname, message):
    with pytest.raises(ValueError, match=message):
        sched.torch.custom_op(qualname, mbr)


def test_registering_a_name_twice_is_refused(mbr):
    name = unique("mbr")
    sched.torch.custom_op(name, mbr)
    with pytest.raises(ValueError, match=f"cannot register '{name}'"):
        sched.torch.custom_op(name, mbr)


def test_not_a_kernel_and_unknown_outputs_are_refused(mbr):
    with pytest.raises(TypeError, match="expected kernels built by sched.build, got PrimFunc"):
        sched.torch.custom_op(unique("x"), matmul_bias_relu())
    with pytest.raises(ValueError, match=r"outputs \['nothing'\] are not buffers of 'mbr'"):
        sched.torch.custom_op(unique("x"), mbr, outputs=["nothing"])
    with pytest.raises(ValueError, match="two kernels for cpu"):
        sched.torch.custom_op(unique("x"), mbr, mbr)


@pytest.mark.gpu
def test_cpu_and_cuda_kernels_of_one_function():
    func = hand_schedules.gpu_matmul(64, 64, 32)
    op = sched.torch.custom_op(unique("mm"), sched.build(func.func, target="c"),
                               sched.build(func.func, target="cuda"))
    a, b = torch.randn(64, 32), torch.randn(32, 64)
    torch.testing.assert_close(op(a, b), a @ b, rtol=1e-4, atol=1e-4)
    out = op(a.cuda(), b.cuda())
    assert out.is_cuda
    torch.testing.assert_close(out.cpu(), a @ b, rtol=1e-4, atol=1e-4)
    compiled = torch.compile(lambda x, y: op.functional(x, y) + 1, fullgraph=True)
    torch.testing.assert_close(compiled(a.cuda(), b.cuda()).cpu(), a @ b + 1, rtol=1e-4,
                               atol=1e-4)
    np.testing.assert_allclose(op(a, b).numpy(), (a @ b).numpy(), rtol=1e-4, atol=1e-4)


def test_an_output_updated_in_place_leaves_only_the_out_form():
    from sched.script import T

    @T.prim_func
    def accumulate(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = C[vi] + A[vi]

    op = sched.torch.custom_op(unique("accumulate"), sched.build(accumulate, target="c"))
    assert op.functional is None
    assert op.unsized == ("block 'C' of 'accumulate' reads output 'C' before writing it (an "
                          "update in place, with no init), so the functional form cannot "
                          "allocate it empty: use the out form")
    a, c = torch.randn(8), torch.ones(8)
    op.out(a, c)
    torch.testing.assert_close(c, a + 1)


def test_an_output_read_ahead_of_its_writer_leaves_only_the_out_form():
    # D read C before block C wrote it: the functional form computed D from torch.empty's
    # garbage (audit helper-137); likewise a store outside blocks updating C
    from sched.script import T

    @T.prim_func
    def reads_ahead(A: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32"),
                    C: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("D"):
                vi = T.axis.spatial(8, i)
                D[vi] = C[vi] + A[vi]
        for i in range(8):
            with T.block("C"):
                vi = T.axis.spatial(8, i)
                C[vi] = A[vi] * T.float32(2)

    @T.prim_func
    def bumped(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        for i in range(8):
            C[i] = C[i] + A[i]

    for func in (reads_ahead, bumped):
        op = sched.torch.custom_op(unique(func.name), sched.build(func, target="c"))
        assert op.functional is None
        assert "so the functional form cannot allocate it empty" in op.unsized


@pytest.mark.parametrize("step", ["decompose_reduction", "blockize"])
def test_a_decomposed_or_blockized_reduction_keeps_its_functional_form(step):
    # C_update (no init of its own) reads what C_init wrote: refused by name (helper-149)
    A = te.placeholder((8, 4), "float32", name="A")
    B = te.placeholder((4, 8), "float32", name="B")
    sch = sched.Schedule(te.create_prim_func([A, B, te.ops.matmul(A, B)], name="matmul"))
    i, j, k = sch.get_loops(sch.get_block("C"))
    if step == "blockize":
        sch.blockize(j)
    else:
        sch.decompose_reduction(sch.get_block("C"), k)
    op = sched.torch.custom_op(unique(step), sched.build(sch.mod, target="c"))
    a, b = torch.randn(8, 4), torch.randn(4, 8)
    torch.testing.assert_close(op.functional(a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_an_output_partly_written_leaves_only_the_out_form():
    # B[n - 1] was never written: the functional form returned torch.empty's garbage there
    # (audit helper-146)
    from sched.script import T

    @T.prim_func
    def head(a: T.handle, b: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for i in range(n - 1):
            with T.block("B"):
                vi = T.axis.spatial(n - 1, i)
                B[vi] = A[vi] * T.float32(2)

    op = sched.torch.custom_op(unique("head"), sched.build(head, target="c"))
    assert op.functional is None
    assert op.unsized.startswith("'head' may leave B[0] of its output unwritten with n = 1")
    a, b = torch.randn(6), torch.zeros(6)
    op.out(a, b)
    torch.testing.assert_close(b[:5], a[:5] * 2)


def test_a_reduction_output_has_a_functional_form():
    # the reduction block reads C too, but its init writes it first
    A = te.placeholder((8, 4), "float32", name="A")
    B = te.placeholder((4, 8), "float32", name="B")
    func = te.create_prim_func([A, B, te.ops.matmul(A, B)], name="matmul")
    op = sched.torch.custom_op(unique("matmul"), sched.build(func, target="c"))
    a, b = torch.randn(8, 4), torch.randn(4, 8)
    torch.testing.assert_close(op.functional(a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_every_buffer_the_kernel_writes_is_marked_mutated():
    """`outputs=["C"]` of a kernel that also writes D: the out form's schema marks D mutated
    and there is no functional form (its schema said D was only read: torch.compile kept a
    stale value; audit helper-78); an output the kernel never writes is refused (it came
    back as allocated, garbage)."""
    from sched.script import T

    @T.prim_func
    def two(a: T.handle, c: T.handle, d: T.handle):
        A = T.match_buffer(a, (4,), "float32")
        C = T.match_buffer(c, (4,), "float32")
        D = T.match_buffer(d, (4,), "float32")
        for i in range(4):
            with T.block("S"):
                vi = T.axis.spatial(4, i)
                C[vi] = A[vi] + T.float32(1)
                D[vi] = T.float32(100)

    kernel = sched.build(two, target="c")
    op = sched.torch.custom_op(unique("two"), kernel, outputs=["C"])
    assert op.functional is None and "also writes ['D']" in op.unsized
    assert "Tensor(c!) D" in str(op.out._schema)
    with pytest.raises(ValueError, match=r"outputs \['A'\] are not written by 'two'"):
        sched.torch.custom_op(unique("two"), kernel, outputs=["A"])
    # a written buffer left out of the outputs is never copied to contiguous memory: the
    # kernel wrote the copy, and D kept its values (audit helper-88)
    a, c = torch.arange(4.0), torch.empty(4)
    d = torch.zeros(4, 2)[:, 0]                           # strided
    with pytest.raises(sched.KernelArgumentError, match=r"argument 3 'D': expected a "
                       r"contiguous tensor"):
        op.out(a, c, d)
    d = torch.zeros(4)
    op.out(a, c, d)
    assert d.tolist() == [100.0] * 4 and c.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_written_tensors_past_the_26th_parameter_have_alias_sets_of_their_own():
    # helper-88: the alias set was the letter of the position modulo 26: Y0 (0) and Y1 (26)
    # were both (a!), telling torch that two outputs may alias
    inputs = [te.placeholder((4,), name=f"A{k}") for k in range(25)]
    Y0 = te.compute((4,), lambda i: inputs[0][i] + inputs[1][i], name="Y0")
    Y1 = te.compute((4,), lambda i: inputs[2][i] * inputs[3][i], name="Y1")
    func = te.create_prim_func([Y0, *inputs, Y1])
    op = sched.torch.custom_op(unique("many"), sched.build(func, target="c"),
                               outputs=["Y0", "Y1"])
    schema = str(op.out._schema)
    assert "Tensor(a!) Y0" in schema and "Tensor(a1!) Y1" in schema
    a = [torch.randn(4) for _ in inputs]
    y0, y1 = torch.empty(4), torch.empty(4)
    op.out(y0, *a, y1)
    torch.testing.assert_close(y0, a[0] + a[1])
    torch.testing.assert_close(y1, a[2] * a[3])



def test_outputs_named_in_another_order_than_the_parameters_are_returned_as_named():
    # outputs=["C", "B"] returned B's values as c and C's as b; naming one twice returned an
    # unwritten tensor (audit helper-164)
    A = te.placeholder((4, 3), "float32", name="A")
    B = te.compute((4, 3), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((3, 4), lambda j, i: A[i, j] * 2.0, name="C")
    kernel = sched.build(te.create_prim_func([A, B, C], name="two"), target="c")
    op = sched.torch.custom_op(unique("two"), kernel, outputs=["C", "B"])
    a = torch.randn(4, 3)
    c, b = op(a)
    torch.testing.assert_close(c, (a * 2).T)
    torch.testing.assert_close(b, a + 1)
    with pytest.raises(ValueError, match=r"outputs \['B'\] are named more than once"):
        sched.torch.custom_op(unique("two"), kernel, outputs=["B", "B"])


def test_a_negative_output_size_from_a_scalar_names_the_output():
    from sched.script import T

    @T.prim_func
    def take(a: T.handle, b: T.handle, k: T.int32):
        A = T.match_buffer(a, (10,), "float32")
        B = T.match_buffer(b, (k,), "float32")
        for i in range(k):
            with T.block("B"):
                vi = T.axis.spatial(k, i)
                B[vi] = A[vi]

    op = sched.torch.custom_op(unique("take"), sched.build(take, target="c"))
    a = torch.randn(10)
    torch.testing.assert_close(op(a, 3), a[:3])
    with pytest.raises(sched.KernelArgumentError, match=r"output 'B' of shape \(k,\) would "
                                                        r"have the negative shape \(-1,\)"):
        op(a, -1)


def test_a_cuda_emu_kernel_is_refused_saying_which_targets_register():
    A = te.placeholder((8,), "float32", name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    emulated = sched.build(te.create_prim_func([A, B]), target="cuda-emu")
    with pytest.raises(TypeError, match="register kernels built for target 'c' or 'cuda'"):
        sched.torch.custom_op(unique("emu"), emulated)


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64"])
def test_unsigned_outputs_torch_has_tensors_of(dtype):
    # refused as "torch has no tensor of" (audit helper-167)
    A = te.placeholder((5,), dtype, name="A")
    B = te.compute((5,), lambda i: A[i] * te.const(3, dtype), name="B")
    op = sched.torch.custom_op(unique(dtype), sched.build(te.create_prim_func([A, B]),
                                                          target="c"))
    a = torch.arange(5).to(getattr(torch, dtype))
    assert op(a).dtype == a.dtype
    np.testing.assert_array_equal(op(a).numpy(), a.numpy() * 3)

"""The verifier accepts what the DSL makes and names each kind of ill-formed IR."""

from __future__ import annotations

import dataclasses

import pytest

import sched
from sched import compute as te
from sched.ir import (
    TRUE,
    BinaryOp,
    Block,
    BlockRealize,
    Buffer,
    BufferStore,
    For,
    IntImm,
    IRMutator,
    PrimFunc,
    Var,
    collect,
    const,
    substitute,
)
from sched.ir.verify import VerifyError, verify


def elementwise():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] * 2.0, name="B")
    return te.create_prim_func([A, B])


def inner_block(func):
    return [r for r in collect(func.body, BlockRealize) if r.block.name != "root"][0]


def test_dsl_functions_verify():
    verify(elementwise())


def test_loop_variable_used_inside_a_block_breaks_isolation():
    func = elementwise()
    realize = inner_block(func)
    store = realize.block.body
    leaky = dataclasses.replace(store, indices=(Var("i"),))
    bad = _replace_block_body(func, leaky)
    with pytest.raises(VerifyError, match="variable 'i' of an enclosing loop is used inside"):
        verify(bad)


def test_store_to_an_undeclared_buffer_is_reported():
    func = elementwise()
    A = func.params[0]
    store = inner_block(func).block.body
    bad = _replace_block_body(func, BufferStore(A, store.value, store.indices))
    with pytest.raises(VerifyError, match="'A' is stored but not declared in the block's T.writes"):
        verify(bad)


def test_unknown_buffer_is_reported():
    func = elementwise()
    stray = Buffer("stray", (IntImm(4),))
    store = inner_block(func).block.body
    block = inner_block(func).block
    writes = (*block.writes, dataclasses.replace(block.writes[0], buffer=stray))
    bad = _replace_block(func, dataclasses.replace(
        block, writes=writes, body=BufferStore(stray, store.value, store.indices)))
    with pytest.raises(VerifyError, match="'stray' is stored but is neither a parameter"):
        verify(bad)


def test_dtype_mismatch_in_store_is_reported():
    func = elementwise()
    store = inner_block(func).block.body
    bad = _replace_block_body(func, dataclasses.replace(store, value=const(1, "int32")))
    with pytest.raises(VerifyError, match="int32 value is stored to 'B' of dtype float32"):
        verify(bad)


def test_duplicate_block_names_are_reported():
    A = Buffer("A", (IntImm(2),))
    body = BufferStore(A, const(0.0, "float32"), (IntImm(0),))
    block = Block("b", (), (), (), body)
    from sched.ir.regions import infer_block_regions
    _, writes = infer_block_regions(body, None, ())
    block = dataclasses.replace(block, writes=writes)
    realize = BlockRealize((), TRUE, block)
    from sched.ir import seq
    root = BlockRealize((), TRUE, Block("root", (), (), (), seq(realize, realize)))
    with pytest.raises(VerifyError, match="two blocks are named 'b'"):
        verify(PrimFunc("f", (A,), root))


def test_shadowed_loop_variable_is_reported():
    A = Buffer("A", (IntImm(2),))
    i = Var("i")
    inner = For(i, IntImm(0), IntImm(2), "serial", BufferStore(A, const(0.0, "float32"), (i,)))
    with pytest.raises(VerifyError, match="variable 'i' is defined twice"):
        verify(PrimFunc("f", (A,), For(i, IntImm(0), IntImm(2), "serial", inner)))


def _replace_block(func, new_block):
    from sched.ir import IRMutator

    class Replace(IRMutator):
        def visit_Block(self, block):
            return new_block if block.name == new_block.name else self.visit_children(block)
    return Replace().visit(func)


def _replace_block_body(func, body):
    return _replace_block(func, dataclasses.replace(inner_block(func).block, body=body))


def test_a_block_checked_before_is_checked_again_where_it_is_now():
    # the verifier remembers each block realize's problems with what is visible around it:
    # the same realize (one object) put where its loop or its buffer is not must be refused
    func = elementwise()
    verify(func)
    realize = inner_block(func)
    root = func.body
    out_of_loop = dataclasses.replace(root, block=dataclasses.replace(root.block, body=realize))
    with pytest.raises(VerifyError, match="variable 'i' is used outside its scope"):
        verify(dataclasses.replace(func, body=out_of_loop))
    with pytest.raises(VerifyError, match="'B' is stored but is neither a parameter"):
        verify(dataclasses.replace(func, params=func.params[:1]))
    with pytest.raises(VerifyError, match="two blocks are named 'B'"):
        loop = root.block.body
        twice = dataclasses.replace(root, block=dataclasses.replace(
            root.block, body=For(Var("j"), IntImm(0), IntImm(4), "serial",
                                 dataclasses.replace(loop.body, iter_values=(Var("j"),)))))
        from sched.ir import seq
        verify(dataclasses.replace(func, body=dataclasses.replace(
            root, block=dataclasses.replace(root.block, body=seq(loop, twice.block.body)))))
    verify(func)                               # and the first function is still well formed


def test_sibling_loops_of_one_name_are_reported_in_block_ir():
    # names identify loops for the analyses: two sibling nests whose loops share a name
    # would be taken for one loop (a race between them was accepted)
    func = sched.parse(_SIBLING_NESTS)
    assert [loop.loop_var.name for loop in collect(func.body, For)] == ["i", "i_1"]

    class Unrename(IRMutator):         # the second loop back to the script's name
        def visit_For(self, node):
            if node.loop_var.name != "i_1":
                return self.visit_children(node)
            return dataclasses.replace(node, loop_var=Var("i"),
                                       body=substitute(node.body, {node.loop_var: Var("i")}))
    with pytest.raises(VerifyError, match="2 loops are named 'i'; names identify loops"):
        verify(Unrename().visit(func))


def test_a_lowered_function_may_repeat_a_loop_name():
    A = Buffer("A", (IntImm(2),))
    i = Var("i")
    loop = For(i, IntImm(0), IntImm(2), "serial", BufferStore(A, const(0.0, "float32"), (i,)))
    from sched.ir import seq
    verify(PrimFunc("f", (A,), seq(loop, loop)))


_SIBLING_NESTS = """
@T.prim_func
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] + T.float32(1)
    for i in range(4):
        with T.block("A"):
            vi = T.axis.remap("S", [i])
            A[vi] = B[vi] * T.float32(2)
"""


def test_a_loop_whose_extent_has_another_dtype_than_its_variable_is_reported():
    # compute_at made `ax0: int32` over an int64 extent; TVM refuses such a loop, and its
    # script read back as another function (audit helper-115)
    from sched.schedule.state import replace

    func = elementwise()
    (loop,) = collect(func.body, For)
    extent = BinaryOp("min", IntImm(4, "int64"), Var("n", "int64"))
    wide = dataclasses.replace(loop, extent=extent)
    with pytest.raises(VerifyError, match="loop 'i' of dtype int32 has an extent of dtype int64"):
        verify(replace(func, loop, wide))


@pytest.mark.parametrize("source, problem", [
    ('tx = T.launch_thread("threadIdx.x", 0)\n    B[0] = A[0]',
     "bound to threadIdx.x has extent 0: a launch has at least one"),
    ('X = T.alloc_buffer((-4,), "float32")\n    B[0] = A[0]',
     "buffer 'X' has a negative size -4 in its shape"),
])
def test_an_empty_launch_and_a_negative_size_are_not_well_formed(source, problem):
    # a raw ValueError from the launch configuration, a gcc error (audit helper-137)
    func = sched.parse(f'''
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    {source}
''')
    with pytest.raises(VerifyError, match=problem):
        verify(func)

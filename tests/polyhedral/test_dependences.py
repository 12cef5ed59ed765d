"""Dependences of the usual kernels: kinds, reduction marks, distances, symbolic dims, and the
conservative answer for indices isl cannot represent."""

from __future__ import annotations

from sched import compute as te
from sched.ir import (
    TRUE,
    Block,
    BlockRealize,
    Buffer,
    BufferStore,
    For,
    IntImm,
    IterVar,
    PrimFunc,
    Range,
    Var,
    infer_block_regions,
)
from sched.polyhedral import build_model, dependences


def matmul(n=None):
    rows = n if n is not None else 6
    A = te.placeholder((rows, 5), name="A")
    B = te.placeholder((5, 4), name="B")
    return te.create_prim_func([A, B, te.ops.matmul(A, B)])


def one_block_func(name, buffers, body, extent=9, start=1):
    """`for i in [start, start + extent): block name (vi = i) { body }`."""
    vi = Var("vi")
    iter_var = IterVar(vi, Range(IntImm(start), IntImm(extent)))
    reads, writes = infer_block_regions(body, None, (iter_var,))
    block = Block(name, (iter_var,), reads, writes, body)
    i = Var("i")
    loop = For(i, IntImm(start), IntImm(extent), "serial", BlockRealize((i,), TRUE, block))
    return PrimFunc(name, buffers, BlockRealize((), TRUE, Block("root", (), (), (), loop)))


def test_matmul_update_dependences_are_reductions():
    deps = dependences(matmul())
    kinds = {(d.kind, d.source.name, d.sink.name, d.is_reduction) for d in deps}
    assert ("flow", "S_C", "S_C", True) in kinds
    assert ("output", "S_C", "S_C", True) in kinds
    assert ("flow", "I_C", "S_C", False) in kinds      # the init runs before every update
    assert all(d.buffer == "C" for d in deps)


def test_prefix_sum_has_a_flow_dependence_at_distance_one():
    A = Buffer("A", (IntImm(10),))
    vi = Var("vi")
    func = one_block_func("S", (A,), BufferStore(A, A[vi - 1] + A[vi], (vi,)))
    (dep,) = dependences(func)
    assert (dep.kind, dep.buffer, dep.distance, dep.is_reduction) == ("flow", "A", (1,), False)
    assert dep.exact


def test_symbolic_dims_are_isl_parameters():
    n = te.var("n")
    model = build_model(matmul(n))
    assert model.params == ["n"]
    assert "[n] ->" in str(model.domain)
    assert all("[n] ->" in str(d.relation) for d in dependences(matmul(n)))


def test_indirect_load_gives_a_conservative_answer_that_says_so():
    A = Buffer("A", (IntImm(10),))
    index = Buffer("index", (IntImm(10),), "int32")
    vi = Var("vi")
    # A[index[vi]] = A[vi] + 1: which elements are written is not known statically
    body = BufferStore(A, A[vi] + 1.0, (index[vi],))
    func = one_block_func("S", (A, index), body, extent=10, start=0)
    model = build_model(func)
    assert not model.is_exact
    assert any("index" in note and "not affine" in note for note in model.notes)
    deps = dependences(func)
    assert deps and not any(d.exact for d in deps)
    assert {"flow", "anti", "output"} <= {d.kind for d in deps}


def test_softmax_chains_its_four_blocks():
    X = te.placeholder((3, 7), name="X")
    func = te.create_prim_func([X, te.ops.softmax(X)])
    pairs = {(d.source.block.name, d.sink.block.name) for d in dependences(func)
             if d.kind == "flow" and d.source.block.name != d.sink.block.name}
    assert {("softmax_max", "softmax_exp"), ("softmax_exp", "softmax_sum"),
            ("softmax_sum", "softmax"), ("softmax_exp", "softmax")} <= pairs

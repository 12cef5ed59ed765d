"""Small block-IR functions built node by node, for the pass and C target tests.

Each builder takes the loop kinds or sizes it varies, so a test can make the variant it shows
(a parallel outer loop, a non-dividing split) without schedule primitives.
"""

from __future__ import annotations

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
    Stmt,
    Var,
    const,
    infer_block_regions,
    seq,
)


def root(body: Stmt, alloc_buffers: tuple[Buffer, ...] = ()) -> BlockRealize:
    return BlockRealize((), TRUE, Block("root", (), (), (), body, None, alloc_buffers))


def block(name: str, iter_vars, values, body: Stmt, init: Stmt | None = None,
          predicate=TRUE) -> BlockRealize:
    reads, writes = infer_block_regions(body, init, tuple(iter_vars))
    return BlockRealize(tuple(values), predicate,
                        Block(name, tuple(iter_vars), reads, writes, body, init))


def loop(var: Var, extent, body: Stmt, kind: str = "serial", start=0) -> For:
    tag = "threadIdx.x" if kind == "thread_binding" else None
    return For(var, IntImm(start) if isinstance(start, int) else start,
               IntImm(extent) if isinstance(extent, int) else extent, kind, body, tag)


def spatial(var: Var, extent) -> IterVar:
    return IterVar(var, Range(IntImm(0), IntImm(extent) if isinstance(extent, int) else extent))


def add_2d(rows=16, cols=8, outer_kind="serial", inner_kind="serial", dtype="float32") -> PrimFunc:
    """C[i, j] = A[i, j] + B[i, j]."""
    A, B, C = (Buffer(name, (IntImm(rows), IntImm(cols)), dtype) for name in "ABC")
    i, j, vi, vj = Var("i"), Var("j"), Var("vi"), Var("vj")
    body = BufferStore(C, A[vi, vj] + B[vi, vj], (vi, vj))
    nest = loop(i, rows, loop(j, cols, block("C", [spatial(vi, rows), spatial(vj, cols)],
                                             [i, j], body), inner_kind), outer_kind)
    return PrimFunc("add_2d", (A, B, C), root(nest))


def matmul_parts(m=16, n=4, k=8):
    """The pieces of C[i, j] = sum_k A[i, k] * B[k, j], for tests that rebuild it."""
    A = Buffer("A", (IntImm(m), IntImm(k)))
    B = Buffer("B", (IntImm(k), IntImm(n)))
    C = Buffer("C", (IntImm(m), IntImm(n)))
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    iter_vars = (spatial(vi, m), spatial(vj, n), IterVar(vk, Range(IntImm(0), IntImm(k)),
                                                         "reduce"))
    init = BufferStore(C, const(0.0, "float32"), (vi, vj))
    update = BufferStore(C, C[vi, vj] + A[vi, vk] * B[vk, vj], (vi, vj))
    return A, B, C, iter_vars, init, update


def matmul(m=16, n=4, k=8) -> PrimFunc:
    A, B, C, iter_vars, init, update = matmul_parts(m, n, k)
    i, j, kk = Var("i"), Var("j"), Var("k")
    nest = loop(i, m, loop(j, n, loop(kk, k, block("C", iter_vars, [i, j, kk], update, init))))
    return PrimFunc("matmul", (A, B, C), root(nest))


def scale_split(extent=100, factor=32) -> PrimFunc:
    """B[i] = A[i] * 2 over a loop split by a factor that need not divide the extent:
    `T.where(io * factor + ii < extent)`."""
    A, B = Buffer("A", (IntImm(extent),)), Buffer("B", (IntImm(extent),))
    io, ii, vi = Var("io"), Var("ii"), Var("vi")
    value = io * factor + ii
    body = BufferStore(B, A[vi] * const(2.0, "float32"), (vi,))
    inner = block("B", [spatial(vi, extent)], [value], body, predicate=value < extent)
    outer = -(-extent // factor)
    return PrimFunc("scale_split", (A, B), root(loop(io, outer, loop(ii, factor, inner))))


def two_stage(n=None) -> PrimFunc:
    """T = A * 2 in an intermediate buffer (root alloc_buffers), then B = T + 1.
    Symbolic length `n` when given a Var."""
    size = n if n is not None else IntImm(10)
    A, B = Buffer("A", (size,)), Buffer("B", (size,))
    T = Buffer("T", (size,))
    i, j, vi, vj = Var("i"), Var("j"), Var("vi"), Var("vj")
    first = block("T", [spatial(vi, size)], [i],
                  BufferStore(T, A[vi] * const(2.0, "float32"), (vi,)))
    second = block("B", [spatial(vj, size)], [j],
                   BufferStore(B, T[vj] + const(1.0, "float32"), (vj,)))
    return PrimFunc("two_stage", (A, B), root(seq(loop(i, size, first), loop(j, size, second)),
                                               (T,)))

"""Random small loop nests for the cross-checks: stencils, matmul-like reductions (some reading
other elements of their own output, `C[x + 1] = C[x + 1] + C[x] * A[k]`), skewed, transposed,
`//` and `%` indices, over one or two nests sharing buffers; and random rescheduled versions of
them (permuted loops, reversed loops, swapped nests)."""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

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
    const,
    seq,
    substitute,
)
from sched.ir.regions import infer_block_regions

BUFFERS = (Buffer("A", (IntImm(16), IntImm(16))), Buffer("B", (IntImm(16), IntImm(16))))


@st.composite
def index(draw, variables: list[Var]):
    v = draw(st.sampled_from(variables))
    w = draw(st.sampled_from(variables))
    form = draw(st.sampled_from(["v", "v+1", "v+2", "v//2", "v%3", "v+w", "2v", "const"]))
    return {"v": v, "v+1": v + 1, "v+2": v + 2, "v//2": v // 2, "v%3": v % 3, "v+w": v + w,
            "2v": v * 2, "const": IntImm(draw(st.sampled_from([0, 3])))}[form]


@st.composite
def nest(draw, number: int):
    """One loop nest with one block: `W[...] = loads` or a reduction `W[...] += load`."""
    depth = draw(st.integers(1, 3))
    extents = [draw(st.integers(2, 5)) for _ in range(depth)]
    loops = [Var(f"l{number}_{d}") for d in range(depth)]
    reduce = depth >= 2 and draw(st.booleans())
    kinds = ["spatial"] * depth
    if reduce:
        kinds[-1] = "reduce"
    iters = [IterVar(Var(f"v{number}_{d}"), Range(IntImm(0), IntImm(e)), k)
             for d, (e, k) in enumerate(zip(extents, kinds))]
    spatial = [iv.var for iv in iters if iv.kind == "spatial"]
    everything = [iv.var for iv in iters]
    out = draw(st.sampled_from(BUFFERS))
    out_index = (draw(index(spatial)), draw(index(spatial)))
    loads = [draw(st.sampled_from(BUFFERS))[draw(index(everything)), draw(index(everything))]
             for _ in range(draw(st.integers(1, 2)))]
    if reduce and draw(st.booleans()):
        # the update reads another element of its own output: `C[x + 1] = C[x + 1] + C[x] * ..`
        # (an ordinary dependence, not part of the accumulator chain)
        shift = draw(st.sampled_from([(0, 1), (1, 0), (0, -1), (1, 1)]))
        other = tuple(i + s if s else i for i, s in zip(out_index, shift))
        loads[0] = out[other]
    value = loads[0] if len(loads) == 1 else loads[0] + loads[1]
    init = None
    if reduce:
        init = BufferStore(out, const(0.0, "float32"), out_index)
        value = out[out_index] + value
    body = BufferStore(out, value, out_index)
    reads, writes = infer_block_regions(body, init, tuple(iters))
    block = Block(f"X{number}", tuple(iters), reads, writes, body, init)
    return loops, extents, BlockRealize(tuple(loops), TRUE, block)


def build_nest(loops, extents, realize, order=None, reversed_loops=()):
    """The For nest over `realize`, loops in `order`, the loops in `reversed_loops` running
    backwards (their variable replaced by extent - 1 - variable in the bindings)."""
    order = order or list(range(len(loops)))
    mapping = {loops[d]: IntImm(extents[d] - 1) - loops[d] for d in reversed_loops}
    realize = dataclasses.replace(
        realize, iter_values=tuple(substitute(v, mapping) for v in realize.iter_values))
    stmt = realize
    for d in reversed(order):
        stmt = For(loops[d], IntImm(0), IntImm(extents[d]), "serial", stmt)
    return stmt


def function(nests, order_of_nests=None, per_nest=None) -> PrimFunc:
    order_of_nests = order_of_nests or list(range(len(nests)))
    per_nest = per_nest or {}
    bodies = [build_nest(*nests[i], **per_nest.get(i, {})) for i in order_of_nests]
    root = BlockRealize((), TRUE, Block("root", (), (), (), seq(*bodies)))
    return PrimFunc("random", BUFFERS, root)


programs = st.lists(st.integers(0, 0), min_size=1, max_size=2).flatmap(
    lambda sizes: st.tuples(*[nest(i) for i in range(len(sizes))]))

"""decompose_padding: a padding block split into a block that fills the pad value and one
that copies the inside, so the copy runs without the per-element condition.

    for i in range(10):                              for i in range(10):          # B_pad_const
        B[i] = T.if_then_else(1 <= i and i < 9,  ->      B[i] = T.float32(0.0)
                              A[i - 1], 0.0)         for i in range(8):           # B
                                                         B[i + 1] = A[i]

The padding block stores, at its iteration variables, `T.if_then_else(cond, value, pad)` with a
pad value that reads no buffer. Under the loop the step is given, the loops down to the block
are copied for the fill block (placed just before them, so for every iteration of the loops
outside both nests run in turn), and the block keeps `value` and runs only where `cond` holds:
its loops are shrunk to that box when isl finds the condition to be one, else it gets the
condition as a `T.where`.

Why the numbers stay: every element the block wrote is written by the same instance of the
fill block, in the same iteration of the outer loops, then (where `cond` holds) by the block
with the same value as before; nothing runs between the two nests, and the block reads no
element of its own buffer. What could go wrong is the rewrite itself, so polyhedral/ checks it:
the fill block runs exactly the old block's instances and the block exactly those where `cond`
holds (isl compares the domains).
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.functor import collect, free_vars, substitute
from sched.ir.intervals import block_ranges
from sched.ir.names import fresh
from sched.ir.nodes import (
    Block,
    BlockRealize,
    BufferLoad,
    BufferStore,
    For,
    IntImm,
    PrimFunc,
    Select,
    SeqStmt,
    Var,
    const,
    is_constant,
    seq,
)
from sched.ir.simplify import simplify
from sched.polyhedral import build_model
from sched.polyhedral.data_wrap import wrapping_int32
from sched.polyhedral.isl_expr import isl_name, to_isl_condition
from sched.polyhedral.isl_text import read_set
from sched.schedule.base import BlockRV, LoopRV, ScheduleBase
from sched.schedule.scope import taken_names
from sched.schedule.state import (
    and_predicate,
    enclosing_loops,
    find_block,
    find_loop,
    path_to,
    refuse_other_views,
    replace,
)

PRIMITIVE = "decompose_padding"


def _padding_store(block: Block) -> BufferStore:
    """The block's one store `B[v...] = T.if_then_else(cond, value, pad)`, or a refusal."""
    store = block.body
    how = ("a padding block is spatial, with one store at its iteration variables of "
           "T.if_then_else(condition, value, pad value)")
    if any(iv.kind != "spatial" for iv in block.iter_vars) or block.init is not None:
        raise ScheduleError(PRIMITIVE, f"block {block.name!r} is a reduction; {how}")
    if not isinstance(store, BufferStore) or not isinstance(store.value, Select):
        raise ScheduleError(PRIMITIVE, f"block {block.name!r} does not store a "
                            f"T.if_then_else; {how}")
    own = [iv.var for iv in block.iter_vars]
    if sorted(store.indices, key=repr) != sorted(own, key=repr) or \
            len(set(store.indices)) != len(own):
        raise ScheduleError(PRIMITIVE, f"block {block.name!r} stores "
                            f"{store.buffer.name}[{', '.join(i.script() for i in store.indices)}]"
                            f", not at its iteration variables; {how}")
    if collect(store.value.false_value, BufferLoad):
        raise ScheduleError(PRIMITIVE, f"the pad value {store.value.false_value.script()} of "
                            f"block {block.name!r} reads a buffer; the fill block must compute "
                            f"it alone (a constant or a function of the indices)")
    if any(load.buffer.name == store.buffer.name for load in collect(store.value, BufferLoad)):
        raise ScheduleError(PRIMITIVE, f"block {block.name!r} reads {store.buffer.name!r}, "
                            f"which it pads: filling it first would change what it reads")
    return store


def _chain(func: PrimFunc, realize: BlockRealize, loop: For) -> list[For]:
    """The loops from `loop` down to the block, each the only statement of the one before."""
    loops = enclosing_loops(func, realize)
    if not any(lp is loop for lp in loops):
        raise ScheduleError(PRIMITIVE, f"loop {loop.loop_var.name!r} is not around block "
                            f"{realize.block.name!r}: give one of its loops (sch.get_loops)")
    chain = loops[next(i for i, lp in enumerate(loops) if lp is loop):]
    for outer, inner in zip(chain, [*chain[1:], realize]):
        if outer.body is not inner:
            raise ScheduleError(PRIMITIVE, f"loop {outer.loop_var.name!r} holds more than the "
                                f"nest of block {realize.block.name!r}: decompose at a loop "
                                f"whose body is that nest alone (a loop further in)")
    return chain


def _box(chain: list[For], condition) -> list[tuple[int, int]] | None:
    """Per loop of `chain`, the [low, high] its variable takes where `condition` (over the
    chain's variables only) holds, when those iterations form a box (isl decides); else
    None."""
    names = [isl_name(lp.loop_var) for lp in chain]
    text = to_isl_condition(condition)
    if text is None or not all(isinstance(lp.extent, IntImm) for lp in chain) or \
            not set(free_vars(condition)) <= {lp.loop_var for lp in chain}:
        return None
    bounds = " and ".join(f"0 <= {n} < {lp.extent.value}" for n, lp in zip(names, chain))
    inside = read_set(f"{{ [{', '.join(names)}] : {bounds} and {text} }}")
    if inside.is_empty():
        return None
    box = [(inside.dim_min_val(d).to_python(), inside.dim_max_val(d).to_python())
           for d in range(len(chain))]
    limits = " and ".join(f"{lo} <= {n} <= {hi}" for n, (lo, hi) in zip(names, box))
    return box if inside.is_equal(read_set(f"{{ [{', '.join(names)}] : {limits} }}")) else None


def decompose_padding(func: PrimFunc, block_name: str, loop_name: str
                      ) -> tuple[PrimFunc, str]:
    """`func` with the padding block split under `loop_name` (see Schedule.decompose_padding);
    the fill block's name."""
    realize = find_block(func, block_name, PRIMITIVE)
    loop = find_loop(func, loop_name, PRIMITIVE)
    store = _padding_store(realize.block)
    chain = _chain(func, realize, loop)
    refuse_other_views(func, store.buffer, PRIMITIVE, "filling it with the pad value")
    binding = dict(zip((iv.var for iv in realize.block.iter_vars), realize.iter_values))
    condition = store.value.condition
    if to_isl_condition(condition) is None:
        raise ScheduleError(PRIMITIVE, f"the padding condition {condition.script()} of block "
                            f"{block_name!r} is not affine, so the inside cannot be bounded")
    if wrapping_int32(condition, block_ranges(func, realize.block)) is not condition:
        # in the stored value it is data, whose int32 arithmetic wraps; as loop bounds or a
        # predicate it would be exact (audit helper-155: vi * 2**30 < 1 held at vi = 2..4;
        # helper-157: a symbolic size's v < n + 1 at n = 2**31 - 1, a legal size)
        sizes = sorted(v.name for v in free_vars(condition)
                       if v in func.symbolic_vars and v.dtype == "int32")
        # (a constant bound is no advice for a symbolic size: audit helper-178)
        advice = (f"declare {', '.join(sizes)} int64 (te.var(name, 'int64'), T.int64()), "
                  f"whose arithmetic does not wrap there" if sizes else
                  "pad with a condition of constant bounds")
        raise ScheduleError(PRIMITIVE, f"the padding condition {condition.script()} of block "
                            f"{block_name!r} computes int32 arithmetic that may wrap (in the "
                            f"stored value it is data), which loop bounds would compute "
                            f"exactly (with a symbolic size: at sizes near 2**31); keep the "
                            f"block as it is, or {advice}")
    taken = taken_names(func)
    fill_name = fresh(f"{block_name}_pad_const", taken)
    fill_vars = {lp.loop_var: Var(fresh(lp.loop_var.name, taken), lp.loop_var.dtype)
                 for lp in chain}
    fill_block = dataclasses.replace(
        realize.block, name=fill_name, reads=(), annotations=(),
        body=dataclasses.replace(store, value=store.value.false_value))
    fill = dataclasses.replace(realize, block=fill_block, iter_values=tuple(
        substitute(v, fill_vars) for v in realize.iter_values),
        predicate=substitute(realize.predicate, fill_vars))
    for lp in reversed(chain):
        # (bounds over the loops around, in their copies: `range(i + 1)` of a triangular nest
        # named the old `i`, an isl syntax error, audit helper-154)
        fill = For(fill_vars[lp.loop_var], substitute(lp.min, fill_vars),
                   substitute(lp.extent, fill_vars), lp.kind, fill, lp.thread_tag)
    inside = _inside(realize, store, chain, substitute(condition, binding))
    parent = path_to(func.body, chain[0])[-1]
    if isinstance(parent, SeqStmt):        # one sequence, as the parser would read it back
        stmts = [x for s in parent.stmts for x in ((fill, inside) if s is chain[0] else (s,))]
        new_func = replace(func, parent, seq(*stmts))
    else:
        new_func = replace(func, chain[0], seq(fill, inside))
    _check_domains(func, new_func, realize, fill_name, condition)
    return new_func, fill_name


def _inside(realize: BlockRealize, store: BufferStore, chain: list[For], condition):
    """The block storing `value`, over the box where `condition` (over the loops) holds, or
    under it as a `T.where`."""
    block = dataclasses.replace(realize.block, body=dataclasses.replace(
        store, value=store.value.true_value))
    from sched.ir.regions import infer_block_regions

    reads, _ = infer_block_regions(block.body, None, block.iter_vars, block.alloc_buffers)
    block = dataclasses.replace(block, reads=reads)
    box = _box(chain, condition) if all(is_constant(lp.min, 0) for lp in chain) else None
    if box is None:
        stmt = and_predicate(dataclasses.replace(realize, block=block), condition)
        for lp in reversed(chain):
            stmt = dataclasses.replace(lp, body=stmt)
        return stmt
    shifted = {lp.loop_var: simplify(lp.loop_var + const(lo, lp.loop_var.dtype))
               for lp, (lo, _) in zip(chain, box) if lo != 0}
    stmt = dataclasses.replace(realize, block=block, iter_values=tuple(
        simplify(substitute(v, shifted)) for v in realize.iter_values),
        predicate=simplify(substitute(realize.predicate, shifted)))
    for lp, (lo, hi) in reversed(list(zip(chain, box))):
        stmt = dataclasses.replace(lp, extent=const(hi - lo + 1, lp.extent.dtype), body=stmt)
    return stmt


def _check_domains(func: PrimFunc, new_func: PrimFunc, realize: BlockRealize, fill_name: str,
                   condition) -> None:
    """isl: the fill block runs the old block's instances, the block those where `condition`
    (over its iteration variables) holds."""
    block_name = realize.block.name
    old = build_model(func).statements_of_block(block_name)
    new = build_model(new_func)
    if len(old) != 1 or old[0].keys:
        raise ScheduleError(PRIMITIVE, f"the bindings of block {block_name!r} are not affine: "
                            f"its instances cannot be compared")
    statement = old[0]
    inside = read_set(f"{statement.param_text} {{ {statement.name}"
                     f"[{', '.join(statement.iter_names)}] : {to_isl_condition(condition)} }}")
    want_inside = statement.domain.intersect(inside)
    (kept,) = new.statements_of_block(block_name)
    (filled,) = new.statements_of_block(fill_name)
    filled_domain = filled.domain.set_tuple_name(statement.name)
    if not (kept.domain.is_equal(want_inside) and filled_domain.is_equal(statement.domain)):
        raise AssertionError(f"decompose_padding: the rewrite of {block_name!r} changed its "
                             f"instances")


class PaddingPrimitives(ScheduleBase):
    """decompose_padding, can_decompose_padding."""

    def decompose_padding(self, block: BlockRV | str, loop: LoopRV) -> BlockRV:
        """Split a padding block into a block that writes the pad value everywhere, before
        `loop`, and the block itself writing the inside only.

        Requires: the block is spatial and stores, at its iteration variables, one
        `T.if_then_else(condition, value, pad)` with an affine condition and a pad value that
        reads no buffer; it does not read the buffer it pads, which has no other view; `loop`
        is around it and holds only its nest.

        Arguments: `block` a block handle or name; `loop` a loop of its nest.
        Returns: a handle to the new fill block (`<block>_pad_const`). Handles: `block` and
        its loops stay valid (the loops may run fewer iterations).
        Also known as: `decompose_padding` in TVM.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((8,), name="A")
        >>> P = te.compute((10,), lambda i: te.if_then_else(
        ...     te.all(i >= 1, i < 9), A[i - 1], 0.0), name="P")
        >>> sch = sched.Schedule(te.create_prim_func([A, P]))
        >>> (i,) = sch.get_loops(sch.get_block("P"))
        >>> fill = sch.decompose_padding(sch.get_block("P"), i)
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((8,), "float32"), P: T.Buffer((10,), "float32")):
            with T.block("root"):
                for i_1 in range(10):
                    with T.block("P_pad_const"):
                        v_i = T.axis.remap("S", [i_1])
                        T.reads()
                        T.writes(P[v_i])
                        P[v_i] = T.float32(0.0)
                for i in range(8):
                    with T.block("P"):
                        v_i = T.axis.spatial(10, i + 1)
                        T.reads(A[v_i - 1])
                        T.writes(P[v_i])
                        P[v_i] = A[v_i - 1]
        """
        name = self._block(block, PRIMITIVE)
        loop_name = self._loop(loop, PRIMITIVE)
        new_func, fill_name = decompose_padding(self._func, name, loop_name)
        handle = BlockRV(fill_name, self._new_rv("b"))
        self._record(PRIMITIVE, new_func, (block, loop), outputs=(handle,))
        return handle

    def can_decompose_padding(self, block: BlockRV | str, loop: LoopRV) -> bool:
        """Whether `decompose_padding(block, loop)` would be accepted (nothing changes, nothing
        is recorded). Also known as: `can_decompose_padding` in TVM."""
        from sched.errors import ScheduleError as Refused

        try:
            decompose_padding(self._func, self._block(block, PRIMITIVE),
                              self._loop(loop, PRIMITIVE))
        except Refused:
            return False
        return True

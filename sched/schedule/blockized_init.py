"""decompose_reduction of a blockized reduction: the init of the block nested in the outer
block (sched's blockize keeps it there) is hoisted before a loop around the outer block, in
the two blocks TVM makes of it (TVM's blockize moves the init to the outer block, its
decompose_reduction of the outer block then hoists that):

    before                                   after decompose_reduction(C_o, k_0's outer loop)

    for i_0, j_0, k_0:                       for i_0, j_0:
      with T.block("C_o"):                     with T.block("C_o_init"):     # C_o's spatial vars
        for i_1, j_1, k_1:                       for i_1_init, j_1_init:
          with T.block("C"):                       with T.block("C_init"):   # C's spatial vars
            with T.init(): C[..] = 0                 C[..] = 0
            C[..] += ...                       for k_0:
                                                 with T.block("C_o_update"): ... C[..] += ...

The init block runs C's init once per element, in C's spatial variables (the same names), so
the check of decompose_reduction (reduction._check_init_moved) compares it with C's init
instance by instance: the same elements, and every dependence of the init kept; the wrapper
`C_o_init` has no accesses of its own and takes no part in it.
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.functor import collect, free_vars, substitute
from sched.ir.names import fresh
from sched.ir.nodes import (
    Block,
    BlockRealize,
    For,
    IntImm,
    PrimFunc,
    Var,
    conjuncts,
    logical_and,
)
from sched.ir.regions import infer_block_regions
from sched.ir.simplify import simplify
from sched.schedule.scope import block_names, splice, taken_names
from sched.schedule.state import path_to, replace_in


def nested_init(block: Block) -> BlockRealize | None:
    """The one block nested in `block` (a blockized outer block with no init of its own) that
    has an init, or None."""
    with_init = [r for r in collect(block.body, BlockRealize) if r.block.init is not None]
    return with_init[0] if len(with_init) == 1 else None


def hoist_nested_init(func: PrimFunc, outer: BlockRealize, inner: BlockRealize, loop: For,
                      loops_from: list[For]) -> tuple[PrimFunc, str, str]:
    """`func` with the init of `inner` (nested in `outer`) in `<outer>_init` > `<inner>_init`
    before `loop`, and `inner` without it. `loops_from`: the loops from `loop` to `outer`.
    Returns the function and the two new blocks' names (wrapper, init)."""
    taken = taken_names(func)
    blocks = block_names(func)
    wrapper_name = fresh(f"{outer.block.name}_init", blocks)
    init_name = fresh(f"{inner.block.name}_init", blocks | {wrapper_name})
    # the init block: the inner block's spatial variables, under copies of the loops between
    # the two blocks that their bindings use
    path = path_to(outer.block.body, inner) or []
    between = [node for node in path if isinstance(node, For)]
    if any(isinstance(node, BlockRealize) for node in path):
        raise ScheduleError("decompose_reduction", f"block {inner.block.name!r} is nested in "
                            f"{outer.block.name!r} through another block; decompose it there")
    spatial = [(iv, value) for iv, value in zip(inner.block.iter_vars, inner.iter_values)
               if iv.kind == "spatial"]
    # the wrapper: the outer block's spatial variables, under copies of the loops from `loop`
    # that their bindings use
    outer_spatial = [(iv, value) for iv, value in zip(outer.block.iter_vars, outer.iter_values)
                     if iv.kind == "spatial"]
    reduce_vars = {iv.var for iv in outer.block.iter_vars if iv.kind == "reduce"}
    if any(set(free_vars(value)) & reduce_vars for _, value in spatial):
        raise ScheduleError("decompose_reduction", f"a spatial variable of block "
                            f"{inner.block.name!r} is bound through a reduce variable of "
                            f"{outer.block.name!r}; blockize where the inner loops separate "
                            f"them")
    nest = _init_nest(inner, spatial, between, reduce_vars, init_name, taken)
    wrapper = Block(wrapper_name, tuple(iv for iv, _ in outer_spatial), (), outer.block.writes,
                    nest)
    stmt = init_copy_nest(wrapper, outer_spatial, outer.predicate, loops_from, set(), taken)
    bare = dataclasses.replace(inner, block=dataclasses.replace(inner.block, init=None))
    new_outer = dataclasses.replace(outer, block=dataclasses.replace(
        outer.block, body=replace_in(outer.block.body, inner, bare)))
    loop_without = replace_in(loop, outer, new_outer)
    return splice(func, loop, [stmt, loop_without]), wrapper_name, init_name


def _init_nest(inner: BlockRealize, spatial, between: list[For], reduce_vars: set[Var],
               name: str, taken: set[str]):
    """`for <copies of the loops the spatial bindings use>: with T.block(name): <init>`; the
    parts of the predicate on other loops, or on the outer block's reduce variables, left out
    (the check that follows refuses an init that would then cover other elements)."""
    iter_vars = tuple(iv for iv, _ in spatial)
    reads, writes = infer_block_regions(inner.block.init, None, iter_vars)
    block = Block(name, iter_vars, reads, writes, inner.block.init,
                  annotations=inner.block.annotations)
    return init_copy_nest(block, spatial, inner.predicate, between, reduce_vars, taken)


def init_copy_nest(block: Block, spatial, predicate, loops: list[For], dropped: set[Var],
                   taken: set[str]):
    """`block` realized at the values of its `spatial` bindings ((iter var, value) pairs)
    under copies of those of `loops` the values use (fresh `<loop>_init` variables, named in
    `taken`), with the conjuncts of `predicate` on the other loops taken at those loops'
    first values and those on `dropped` variables left out: the nest an init block is
    hoisted in (decompose_reduction)."""
    used = {var for _, value in spatial for var in free_vars(value)}
    chosen = [lp for lp in loops if lp.loop_var in used]
    dropped = ({lp.loop_var for lp in loops} - used) | dropped
    copies = {lp.loop_var: Var(fresh(f"{lp.loop_var.name}_init", taken), lp.loop_var.dtype)
              for lp in chosen}
    # a conjunct on loops left out holds for the init where it holds at their first values
    # (an element's first point, where its init ran: decompose_reduction compares domains)
    firsts = {lp.loop_var: lp.min for lp in loops if lp.loop_var in dropped and
              not set(free_vars(lp.min)) & dropped}
    at_firsts = [simplify(substitute(c, firsts)) for c in conjuncts(predicate)]
    kept = logical_and(*[c for c in at_firsts if not set(free_vars(c)) & dropped
                         and c != IntImm(1, "bool")])
    stmt = BlockRealize(tuple(substitute(v, copies) for _, v in spatial),
                        substitute(kept, copies), block)
    for lp in reversed(chosen):
        stmt = For(copies[lp.loop_var], substitute(lp.min, copies), substitute(lp.extent, copies),
                   lp.kind, stmt, lp.thread_tag)
    return stmt

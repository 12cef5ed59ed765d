"""blockize: the subtree under a loop (the loop included) becomes one block, the blocks in it
nested inside.

The new block `<block>_o` takes one iteration variable per variable of the enclosing loops (and
blocks) that the subtree uses, bound to it: spatial when only spatial variables of the nested
blocks use it, reduce when only reduce ones do (TVM's subspace division gives the same
`vio = T.axis.spatial(4, io)` for a split loop). Its regions are the boxes its nested blocks
touch in one of its instances, found by polyhedral/ (the whole buffer where an access is not
affine). Nothing runs in another order, so no dependence check is needed: the invariant is
that the new block computes, instance by instance, what the subtree computed.

A guard of the nested block that holds for all of a tile or for none of it (each conjunct of
its predicate whose value does not change over the loops from `loop` down, asked of isl: `i_0
* 16 + i_1 < 37` under a blockized loop `k_1`, or `(i_0 * 2 + i_1) * 16 + i_2 < 48` under
`i_2` of extent 16) moves to the new block, at the tile's first point, as TVM's blockize
moves it: the nested block then covers whole tiles, which `tensorize` needs.
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.functor import collect, free_vars, substitute
from sched.ir.intervals import loop_invariant_domain
from sched.ir.names import fresh
from sched.ir.nodes import (
    TRUE,
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    Expr,
    For,
    IterVar,
    PrimFunc,
    Range,
    Var,
    conjuncts,
    const,
    logical_and,
)
from sched.ir.simplify import simplify
from sched.polyhedral import buffer_region
from sched.polyhedral.expr_equality import same_truth_on_box
from sched.schedule.base import BlockRV, LoopRV, ScheduleBase
from sched.schedule.memory import _hull
from sched.schedule.scope import block_names, taken_names
from sched.schedule.state import find_loop, path_to, replace, replace_in

PRIMITIVE = "blockize"


def blockize(func: PrimFunc, loop_name: str) -> tuple[PrimFunc, str]:
    """`func` with the subtree of loop `loop_name` in a new block (see Schedule.blockize)."""
    loop = find_loop(func, loop_name, PRIMITIVE)
    inner = collect(loop, BlockRealize)
    if not inner:
        raise ScheduleError(PRIMITIVE, f"loop {loop_name!r} holds no block")
    domains = _enclosing_domains(func, loop)
    used = [v for v in free_vars(loop) if v in domains]
    taken = taken_names(func)
    mapping: dict[Var, Var] = {}
    iter_vars = []
    for var in used:
        new = Var(fresh(f"v_{var.name}", taken), var.dtype)
        mapping[var] = new
        dom = loop_invariant_domain(domains[var], domains, func.symbolic_vars)
        iter_vars.append(IterVar(new, dom, _kind(var, inner, loop_name)))
    name = fresh(f"{inner[0].block.name}_o", block_names(func))
    reads = _regions(func, loop, inner, "read", mapping)
    writes = _regions(func, loop, inner, "write", mapping)
    subtree, guard = _hoist_tile_guards(loop, inner, domains)
    block = Block(name, tuple(iter_vars), reads, writes, substitute(subtree, mapping))
    return replace(func, loop, BlockRealize(tuple(used), guard, block)), name


def _hoist_tile_guards(loop: For, inner: list[BlockRealize], domains: dict[Var, Range]
                       ) -> tuple[For, Expr]:
    """`loop` with the conjuncts of its one nested block's predicate that hold for all or none
    of each tile taken out, and those conjuncts at the tile's first point (the new block's
    predicate, over the variables around `loop`; TRUE when none)."""
    if len(inner) != 1 or inner[0].predicate == TRUE:
        return loop, TRUE
    loops = collect(loop, For)
    box = {**domains, **{lp.loop_var: Range(lp.min, lp.extent) for lp in loops}}
    first = {lp.loop_var: lp.min for lp in loops}
    if any(v in first for lp in loops for v in (*free_vars(lp.min), *free_vars(lp.extent))):
        return loop, TRUE                       # a tile whose shape depends on its loops
    kept, hoisted = [], []
    for part in conjuncts(inner[0].predicate):
        at_first = simplify(substitute(part, first))
        if same_truth_on_box(part, at_first, box) is True:
            hoisted.append(at_first)
        else:
            kept.append(part)
    if not hoisted:
        return loop, TRUE
    realize = dataclasses.replace(inner[0], predicate=logical_and(*kept))
    return replace_in(loop, inner[0], realize), logical_and(*hoisted)


def _enclosing_domains(func: PrimFunc, loop: For) -> dict[Var, Range]:
    """The loops and block iteration variables around `loop`, with their domains."""
    domains: dict[Var, Range] = {}
    for node in path_to(func.body, loop) or []:
        if isinstance(node, For):
            domains[node.loop_var] = Range(node.min, node.extent)
        elif isinstance(node, BlockRealize):
            domains.update({iv.var: iv.dom for iv in node.block.iter_vars})
    return domains


def _kind(var: Var, inner: list[BlockRealize], loop_name: str) -> str:
    """The kind of the new iteration variable bound to `var`: that of the nested blocks'
    variables whose bindings use it (refused when it feeds both spatial and reduce ones)."""
    kinds = {iv.kind for realize in inner
             for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True)
             if var in free_vars(value)}
    if {"scan", "opaque"} & kinds:
        return "opaque"
    if kinds == {"spatial", "reduce"}:
        raise ScheduleError(PRIMITIVE, f"loop {var.name!r} outside loop {loop_name!r} feeds both "
                            f"spatial and reduce iteration variables of the blocks under it (a "
                            f"fused loop): the new block's variable would be neither; split or "
                            f"reorder so that the blockized loops separate them")
    return "reduce" if kinds == {"reduce"} else "spatial"


def _regions(func: PrimFunc, loop: For, inner: list[BlockRealize], access: str,
             mapping: dict[Var, Var]) -> tuple[BufferRegion, ...]:
    """The box of each buffer the nested blocks `access` in one iteration of the loops
    outside `loop`, in the new block's variables."""
    local = {b for realize in inner for b in realize.block.alloc_buffers}
    allowed = set(mapping.values()) | set(func.symbolic_vars) | \
        {p for p in func.params if isinstance(p, Var)}
    boxes: dict[str, tuple[Buffer, tuple[Range, ...]]] = {}
    for realize in inner:
        regions = realize.block.reads if access == "read" else realize.block.writes
        for region in regions:
            buffer = region.buffer
            if buffer in local:
                continue
            box = _box(func, realize.block.name, buffer, loop.loop_var.name, access)
            box = tuple(Range(substitute(r.min, mapping), substitute(r.extent, mapping))
                        for r in box)
            named = {v for r in box for v in (*free_vars(r.min), *free_vars(r.extent))}
            if not named <= allowed:
                # the box is over the loops around the block, some outside an enclosing
                # block, which the new block (inside that one) may not name: the declared
                # region relaxed over the loops from `loop` down, in the variables around
                # `loop` (isl), else the whole buffer
                box = _relaxed(func, loop, realize, region, mapping, allowed) or \
                    tuple(Range(const(0, d.dtype), d) for d in buffer.shape)
            if buffer.name in boxes:
                box = _hull(boxes[buffer.name][1], box)
            boxes[buffer.name] = (buffer, box)
    return tuple(BufferRegion(buffer, box) for buffer, box in boxes.values())


def _relaxed(func: PrimFunc, loop: For, realize: BlockRealize, region: BufferRegion,
             mapping: dict[Var, Var], allowed: set[Var]) -> tuple[Range, ...] | None:
    """`region` of `realize` relaxed over the loops from `loop` down to it, in the new
    block's variables (None where isl cannot, or a block lies between them)."""
    from sched.schedule.relaxed_region import relaxed_region

    path = path_to(loop, realize)
    if path is None or any(isinstance(node, BlockRealize) for node in path):
        return None
    loops = [node for node in path if isinstance(node, For)]
    bindings = dict(zip((iv.var for iv in realize.block.iter_vars), realize.iter_values))
    domains = _enclosing_domains(func, loop)
    outer = {var: domains[var] for var in mapping}
    box = relaxed_region(region, bindings, loops, outer)
    if box is None:
        return None
    box = tuple(Range(substitute(r.min, mapping), substitute(r.extent, mapping)) for r in box)
    named = {v for r in box for v in (*free_vars(r.min), *free_vars(r.extent))}
    return box if named <= allowed else None


def _box(func: PrimFunc, block: str, buffer: Buffer, loop: str, access: str):
    whole = tuple(Range(const(0, d.dtype), d) for d in buffer.shape)
    try:
        box = buffer_region(func, block, buffer.name, loop, access)
    except ValueError:
        return whole
    return box if len(box) == buffer.ndim else whole


class BlockizePrimitives(ScheduleBase):
    """blockize."""

    def blockize(self, loop: LoopRV, preserve_unit_iters: bool = True) -> BlockRV:
        """Make the subtree under `loop` (the loop included) one block, `<block>_o`, with the
        blocks under it nested inside; schedules then treat it as one unit (compute_at,
        cache_read, parallel...), and `get_loops` of a nested block stops at it.

        Requires: a block under `loop`; no loop outside it feeds both spatial and reduce
        variables of the blocks under it. Its iteration variables are bound to the loops
        (and enclosing block variables) that the subtree uses; its regions are what the
        nested blocks touch in one of its instances.

        Arguments: `loop` a loop handle; `preserve_unit_iters` (TVM's) is accepted and changes
        nothing: the new block keeps an iteration variable per loop its subtree uses.
        Returns: a handle to the new block. Handles stay valid.
        Also known as: `blockize` in TVM (which also takes a list of blocks; sched takes the
        loop above them).

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((8,), name="A")
        >>> B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]))
        >>> i_0, i_1 = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 4])
        >>> outer = sch.blockize(i_1)
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
            with T.block("root"):
                for i_0 in range(2):
                    with T.block("B_o"):
                        v_i_0 = T.axis.remap("S", [i_0])
                        T.reads(A[v_i_0 * 4:v_i_0 * 4 + 4])
                        T.writes(B[v_i_0 * 4:v_i_0 * 4 + 4])
                        for i_1 in range(4):
                            with T.block("B"):
                                v_i = T.axis.spatial(8, v_i_0 * 4 + i_1)
                                T.reads(A[v_i])
                                T.writes(B[v_i])
                                B[v_i] = A[v_i] * T.float32(2.0)
        """
        name = self._loop(loop, PRIMITIVE)
        new_func, block_name = blockize(self._func, name)
        handle = BlockRV(block_name, self._new_rv("b"))
        self._record(PRIMITIVE, new_func, (loop,), outputs=(handle,))
        return handle

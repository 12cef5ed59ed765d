"""The consumer instances that one iteration of a loop makes computable, for
reverse_compute_at of a consumer whose indices are not its variables (`B[i * 4 + j]`,
`B[i // 2, i % 2]`), and the producer instances it needs, for compute_at of a producer that
stores at such indices (`D[15 - vi]`).

Under the loop, the producers write a box of their buffer (`needed_region.exact_box`); the
consumer instances whose loads of those buffers all fall in that box are a set isl describes
exactly (`{ [i, j] : io * 4 <= i * 4 + j < io * 4 + 4 }`); each variable's range over it is
the range its new loop covers, with the largest extent it takes (a last partial tile's is
smaller) where that is bounded. Nothing here decides
legality: the moved block is checked afterwards like every move (each instance run once, every
dependence kept), so a range that is too wide or too narrow is refused there, not run.
"""

from __future__ import annotations

import islpy as isl

from sched.ir.builders import binary
from sched.ir.functor import free_vars
from sched.ir.nodes import (
    BlockRealize,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    IntImm,
    PrimFunc,
    Var,
)
from sched.ir.simplify import simplify
from sched.polyhedral.isl_expr import (
    isl_name,
    piecewise_form,
    pw_aff_to_expr,
    to_isl,
    to_isl_condition,
)
from sched.polyhedral.isl_text import read_set
from sched.schedule.inlining import block_accesses
from sched.schedule.needed_region import exact_box
from sched.schedule.state import enclosing_loops


def preimage_ranges(func: PrimFunc, loop: For, realize: BlockRealize,
                    here: list[BlockRealize], reverse: bool = True
                    ) -> dict[Var, tuple[Expr, Expr]]:
    """(low, extent) of the moved block's iteration variables over the instances whose loads
    of the buffers `here` write under `loop` fall in what one iteration writes (`reverse`: a
    consumer), or whose stores fall in what `here` read there (a producer); only variables
    whose extent there is bounded, with its largest value (none when an index or a bound is
    not affine)."""
    block = realize.block
    if reverse:
        touched = {r.buffer.name for p in here for r in p.block.writes}
        loads = [x for x in block_accesses(block, BufferLoad) if x.buffer.name in touched]
    else:
        touched = {r.buffer.name for p in here for r in p.block.reads}
        loads = [x for x in block_accesses(block, BufferStore) if x.buffer.name in touched]
    access = "write" if reverse else "read"
    outer = [*enclosing_loops(func, loop), loop]
    params = {isl_name(lp.loop_var): lp.loop_var for lp in outer}
    params.update({isl_name(v): v for v in func.symbolic_vars})
    dims = [isl_name(iv.var) for iv in block.iter_vars]
    constraints = []
    for iv in block.iter_vars:
        low, extent = to_isl(iv.dom.min), to_isl(iv.dom.extent)
        if low is None or extent is None:
            return {}
        constraints.append(f"{low} <= {isl_name(iv.var)} < {low} + {extent}")
    for lp in outer:
        low, extent = to_isl(lp.min), to_isl(lp.extent)
        if low is None or extent is None:
            return {}
        constraints.append(f"{low} <= {isl_name(lp.loop_var)} < {low} + {extent}")
    boxes = {}
    for load in loads:
        name = load.buffer.name
        if name not in boxes:
            users = [r for r in here if any(w.buffer.name == name for w in
                                            (r.block.writes if reverse else r.block.reads))]
            boxes[name] = exact_box(func, loop, users, name, access,
                                    load.buffer.scope == "shared")
        for index, r in zip(load.indices, boxes[name]):
            # (a box's bounds may be piecewise: `T.if_then_else(io == 2, 0, 6 - io * 4)`, and
            # the index too: `T.truncdiv(vi, 2)`, audit helper-110)
            index = piecewise_form(index)
            inside = (to_isl_condition(binary("ge", index, r.min)),
                      to_isl_condition(binary("lt", index, r.min + r.extent)))
            outside_names = (set(free_vars(r.min)) | set(free_vars(r.extent))) - \
                set(params.values())
            if None in inside or outside_names:
                return {}
            constraints += [f"({c})" for c in inside]
    names = ", ".join(params)
    instances = read_set(f"[{names}] -> {{ [{', '.join(dims)}] : {' and '.join(constraints)} }}")
    context = instances.params()
    found = {}
    for k, iv in enumerate(block.iter_vars):
        low, high = instances.dim_min(k), instances.dim_max(k)
        extent = _largest(high.sub(low).intersect_params(context))
        if extent is None:
            continue
        found[iv.var] = (simplify(pw_aff_to_expr(low, context, params)),
                         IntImm(extent + 1, iv.var.dtype))
    return found


def _largest(difference) -> int | None:
    """The largest value of `difference` (a piecewise quasi-affine function of the loops
    around), or None where it has none: a range whose extent changes with the loops (the last
    tile of a split that does not divide, `[4 * io, min(4 * io + 3, 9)]`) is covered by its
    largest extent; the moved block's domain guard drops what lies outside its domain, and
    the check of the move refuses instances that would run twice."""
    if difference.is_empty():
        return None
    try:
        value = difference.max_val()
    except isl.Error:               # isl bounds affine pieces only (not `floor(io / 2)`)
        return None
    if not value.is_int():
        return None                 # unbounded (infinity) or undefined (NaN)
    return value.to_python()

"""Iteration variables whose order is part of the meaning: `T.axis.scan` and `T.axis.opaque`.

TVM marks an iteration variable `scan` when each instance depends on the previous one (a prefix
sum) and `opaque` when nothing is known of it; sched also gives the kind `opaque` to what the
parser binds for a block that used enclosing loop variables (see `parse_stmt`). Schedules keep
the order of such variables:

- a loop whose variable a block binds to one of them is not reordered, run in parallel,
  vectorized or bound to a thread (a split or fuse keeps the order and stays allowed; a loop
  of one iteration has no order to keep);
- a block that has one is not moved, inlined or factored (compute_at, reverse_compute_at,
  compute_inline, reverse_compute_inline, rfactor, decompose_reduction): those primitives
  reason about spatial and reduce variables alone.

The dependence analysis would already refuse most of these steps where they change a result;
the rule states TVM's contract independently of what the analysis can prove.
"""

from __future__ import annotations

from sched.errors import ScheduleError
from sched.ir.functor import collect, free_vars
from sched.ir.nodes import Block, BlockRealize, For, IntImm

ORDERED_KINDS = ("scan", "opaque")
# primitives that move a block or rewrite its iteration variables
BLOCK_PRIMITIVES = ("compute_at", "reverse_compute_at", "compute_inline",
                    "reverse_compute_inline", "rfactor", "decompose_reduction")


def ordered_binding(loop: For) -> tuple[str, str, str] | None:
    """(block, iteration variable, kind) of a block under `loop` that binds a scan or opaque
    variable to a value using the loop's variable, or None."""
    for realize in collect(loop.body, BlockRealize):
        for iter_var, value in zip(realize.block.iter_vars, realize.iter_values, strict=True):
            if iter_var.kind in ORDERED_KINDS and loop.loop_var in free_vars(value):
                return realize.block.name, iter_var.var.name, iter_var.kind
    return None


def check_loop_keeps_order(loop: For, primitive: str, what: str) -> None:
    """Refuse `primitive` (which would `what` the loop) on a loop bound to a scan/opaque
    variable, unless it runs once (extent 1: no order to keep; the default GPU schedule runs
    a scan on one thread by binding such loops, audit helper-92)."""
    if isinstance(loop.extent, IntImm) and loop.extent.value == 1:
        return
    found = ordered_binding(loop)
    if found is not None:
        block, var, kind = found
        raise ScheduleError(primitive, f"loop {loop.loop_var.name!r} is bound to the {kind} "
                            f"iteration variable {var!r} of block {block!r}, whose order is "
                            f"part of its meaning: it cannot be {what}")


def check_block_keeps_order(block: Block, primitive: str) -> None:
    """Refuse a block-moving primitive on a block with scan/opaque variables."""
    if primitive not in BLOCK_PRIMITIVES:
        return
    ordered = [iv for iv in block.iter_vars if iv.kind in ORDERED_KINDS]
    if ordered:
        shown = ", ".join(f"{iv.var.name!r} ({iv.kind})" for iv in ordered)
        raise ScheduleError(primitive, f"block {block.name!r} has iteration variables whose "
                            f"order is part of its meaning: {shown}; {primitive} works on "
                            f"blocks with spatial and reduce variables alone (schedule the "
                            f"loops around it with split and fuse instead)")

"""Opaque blocks under a schedule: kept whole (see `sched/ir/extern.py` for what makes one).

An opaque block calls C or CUDA code; what the call reads and writes is known only from the
block's declared regions, and only as a MAY: every element of a write region may be written,
none is certainly written. The dependence checks see those regions (memory-based dependences
never need a certain write), so the loops around the block may be split, fused, reordered,
made parallel or bound to threads where the regions prove the iterations independent. What
needs more is refused:

- a step may not change the block itself (body, init, regions, iteration variables,
  allocations): a rewrite of what it accesses (cache_read/cache_write/reindex/transform_layout
  of a buffer it passes to the call, compute_inline into it, rfactor, decompose_reduction,
  tensorize, blockize of a loop inside it) would change what the callee sees, and a rewrite
  that needs its certain writes (cache_write's copy back, compute_inline and
  reverse_compute_inline of it) cannot be proved;
- it is not moved (compute_at, reverse_compute_at): it stays one unit under its loops;
- its runs are never idempotent (polyhedral/runs.py), so no step may make it run twice.

`check_opaque_blocks_kept` states the first rule once, for every primitive, on the functions
before and after a step; `check_block_not_opaque` gives the early, specific refusal.
"""

from __future__ import annotations

from sched.errors import ScheduleError
from sched.ir.extern import is_opaque
from sched.ir.functor import collect
from sched.ir.nodes import Block, Call, PrimFunc, StringImm

# primitives that move or rewrite the block they are given
REFUSED = {
    "compute_inline": "inlining needs the values it certainly writes",
    "reverse_compute_inline": "inlining needs the values it certainly writes",
    "compute_at": "it stays one unit under its own loops",
    "reverse_compute_at": "it stays one unit under its own loops",
    "cache_write": "the copy back would need the elements it certainly writes",
    "rfactor": "its computation is not visible",
    "decompose_reduction": "its computation is not visible",
    "reindex": "the callee assumes the buffers' layout",
    "transform_block_layout": "its computation is not visible",
}
_ADVICE = ("schedule the loops around it (split, fuse, reorder, parallel, bind), or leave it "
           "out of the step")


def callees(block: Block) -> list[str]:
    """The names of the functions the block's opaque calls call."""
    names = [c.args[0].value for c in collect(block.body, Call)
             if c.args and isinstance(c.args[0], StringImm)]
    return list(dict.fromkeys(names))


def _described(block: Block) -> str:
    called = callees(block)
    calls = f"it calls {', '.join(called)}" if called else "it takes buffer addresses"
    return f"block {block.name!r} is opaque ({calls}; its accesses are its declared regions)"


def check_block_not_opaque(block: Block, primitive: str) -> None:
    """Refuse `primitive` on an opaque block when it is one that moves or rewrites it."""
    reason = REFUSED.get(primitive)
    if reason is not None and is_opaque(block):
        raise ScheduleError(primitive, f"{_described(block)}: {primitive} cannot be applied "
                            f"to it ({reason}); {_ADVICE}")


def check_opaque_blocks_kept(old: PrimFunc, new: PrimFunc, primitive: str) -> None:
    """Refuse a step that changed, removed, duplicated or made an opaque block."""
    before = {b.name: b for b in collect(old.body, Block) if is_opaque(b)}
    after = [b for b in collect(new.body, Block) if is_opaque(b)]
    if not before and not after:
        return
    for block in after:
        if block.name not in before:
            if primitive == "tensorize":
                raise ScheduleError(primitive, f"the intrinsic's implementation calls code sched "
                                    f"cannot read (an opaque call: T.call_extern, "
                                    f"T.call_packed, an address passed out), which would make "
                                    f"block {block.name!r} opaque, and no step makes an opaque "
                                    f"block (the analysis cannot see what it touches). Write "
                                    f"the "
                                    f"implementation with loops over its buffers (or use a "
                                    f"registered intrinsic such as the wmma and mma ones), or "
                                    f"call the external function in the function itself "
                                    f"(T.call_extern in a block) and schedule around it")
            raise ScheduleError(primitive, f"the step would make a new opaque block "
                                f"{block.name!r} (a copy or rewrite of an opaque call); "
                                f"{_ADVICE}")
    for name, block in before.items():
        found = [b for b in after if b.name == name]
        if len(found) != 1 or found[0] != block:
            what = "remove" if not found else "change"
            raise ScheduleError(primitive, f"{_described(block)}: the step would {what} it "
                                f"(its body, regions or the buffers it passes); {_ADVICE}")

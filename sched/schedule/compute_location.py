"""sample_compute_location: draw where a block is computed, as MetaSchedule's traces do.

    l5 = sch.sample_compute_location(b0, decision=2)
    sch.compute_at(b0, l5, preserve_unit_loops=True)

The candidates are TVM's (`CollectComputeLocation`), each named by an integer, the decision:

- `-2`: inline the block (when `compute_inline` would accept it),
- `-1`: leave it at the root (compute_at of it does nothing),
- `i >= 0`: loop `i` of the block's first consumer (its `get_loops` order), for the loops from
  the outermost down to the innermost loop around every consumer, skipping unit loops,
  stopping at the first data-parallel loop after a reduce loop and at the reduce loops after
  the last data-parallel one, and keeping only the loops where `compute_at` is accepted (the
  polyhedral check that every compute_at makes; nothing is trusted).

The step returns a loop handle: a real loop, or one of two marks (`LocationMark`) that
`compute_at`/`reverse_compute_at` read as "inline" and "root". A replayed decision that is no
longer a candidate falls back, as in TVM, to the nearest candidate before it (or the root).
"""

from __future__ import annotations

from sched.errors import ScheduleError
from sched.ir.functor import collect, free_vars
from sched.ir.nodes import BlockRealize, For, IntImm, PrimFunc
from sched.schedule.base import BlockRV, LoopRV, ScheduleBase
from sched.schedule.compute_at import move_under
from sched.schedule.inlining import compute_inline, neighbours
from sched.schedule.reverse_inlining import reverse_compute_inline
from sched.schedule.state import blocks_under, find_block, path_to

INLINE, ROOT = -2, -1


class LocationMark(LoopRV):
    """A loop handle that is no loop: where `sample_compute_location` chose "inline" (-2) or
    "root" (-1). `compute_at` of a block at it inlines the block or leaves it in place."""

    __slots__ = ("decision",)

    def __init__(self, decision: int, rv: str) -> None:
        super().__init__("<compute inline>" if decision == INLINE else "<compute root>", rv)
        self.decision = decision

    def __repr__(self) -> str:
        return f"LocationMark({'inline' if self.decision == INLINE else 'root'})"


def _loop_kind(loop: For) -> str:
    """"spatial", "reduce" or "opaque": how the blocks under `loop` bind its variable (TVM's
    GetLoopIterType)."""
    kinds = set()
    for realize in blocks_under(loop):
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if loop.loop_var in free_vars(value):
                kinds.add(iv.kind)
    return kinds.pop() if len(kinds) == 1 and kinds <= {"spatial", "reduce"} else "opaque"


def _consumer_loops(func: PrimFunc, block: str) -> list[For]:
    """The loops of the block's first consumer (as get_loops), down to the innermost loop
    around every consumer; none when the block has no consumer or no loop holds them all."""
    names = neighbours(func, block, "consumers")
    realizes = [r for r in collect(func.body, BlockRealize) if r.block.name in names]
    if not realizes:
        return []
    paths = [path_to(func.body, r) for r in realizes]     # the realize itself excluded
    first = paths[0]
    inner = max((i for i, node in enumerate(first) if isinstance(node, BlockRealize)),
                default=-1)
    loops = [node for node in first[inner + 1:] if isinstance(node, For)]
    common = [lp for lp in loops if all(any(node is lp for node in p) for p in paths)]
    return loops[:loops.index(common[-1]) + 1] if common else []


def _accepted(schedule: ScheduleBase, func: PrimFunc, block: str, loop: str) -> bool:
    """Whether `compute_at(block, loop, preserve_unit_loops=True)` would be accepted."""
    try:
        new_func = move_under(func, block, loop, True, render=False, suggest=False)
        # a candidate is judged whole even where the schedule defers the rule, so a
        # decision means the same location in every replay
        schedule._check_concurrent_loops("compute_at", new_func, deferred=False)
        schedule._check_nested_thread_axes("compute_at", new_func)
    except ScheduleError:
        return False
    return True


def compute_locations(schedule: ScheduleBase, block: str) -> list[tuple[int, object]]:
    """The candidates for `block`: (decision, loop name or mark decision), in decision order."""
    func = schedule.func
    found: list[tuple[int, object]] = []
    try:
        compute_inline(func, block, render=False)
        found.append((INLINE, INLINE))
    except ScheduleError:
        pass
    found.append((ROOT, ROOT))
    loops = _consumer_loops(func, block)
    kinds = [_loop_kind(lp) for lp in loops]
    last_spatial = max((i for i, k in enumerate(kinds) if k == "spatial"), default=-1)
    seen_reduce = False
    own = {id(lp) for lp in path_to(func.body, find_block(func, block)) or ()}
    for i, (loop, kind) in enumerate(zip(loops, kinds)):
        if isinstance(loop.extent, IntImm) and loop.extent.value == 1:
            continue
        if kind == "spatial" and seen_reduce:
            break
        if kind != "spatial":
            seen_reduce = True
            if i > last_spatial:
                break
        if id(loop) not in own and _accepted(schedule, func, block, loop.loop_var.name):
            found.append((i, loop.loop_var.name))
    return found


def choose(candidates: list[tuple[int, object]], decision: int) -> tuple[int, object]:
    """The candidate of `decision`, else (TVM's rule) the nearest one before it, else root."""
    before = [c for c in candidates if c[0] <= decision]
    return before[-1] if before else (ROOT, ROOT)


class ComputeLocationPrimitives(ScheduleBase):
    """sample_compute_location; compute_at and reverse_compute_at at its marks."""

    def sample_compute_location(self, block: BlockRV | str, decision: int | None = None
                                ) -> LoopRV:
        """Draw where `block` is computed: inline, at the root, or under a loop of its first
        consumer where compute_at is legal (the candidates are listed in this module's doc).

        Requires: nothing; a block with no consumer has the candidates inline (if legal) and
        root. The choice (or `decision`, as in a replayed trace) is recorded in the trace, so
        `trace.with_decision(step, d)` replays with another location.

        Arguments: `block` a block handle or name; `decision` -2 (inline), -1 (root) or the
        index of a loop in `get_loops` of the first consumer.
        Returns: a loop handle for `compute_at(block, loop)`, or a mark (`LocationMark`) that
        compute_at reads as inline or root. Also known as: `sample_compute_location` in
        TVM's MetaSchedule.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((8, 8), name="A")
        >>> B = te.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
        >>> C = te.compute((8, 8), lambda i, j: B[i, j] + 1.0, name="C")
        >>> sch = sched.Schedule(te.create_prim_func([A, C]), seed=0)
        >>> b = sch.get_block("B")
        >>> loop = sch.sample_compute_location(b, decision=0)
        >>> sch.compute_at(b, loop, preserve_unit_loops=True)
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
            with T.block("root"):
                B = T.alloc_buffer((8, 8), "float32")
                for i_1 in range(8):
                    for ax0, ax1 in T.grid(1, 8):
                        with T.block("B"):
                            v_i = T.axis.spatial(8, i_1 + ax0)
                            v_j = T.axis.spatial(8, ax1)
                            T.reads(A[v_i, v_j])
                            T.writes(B[v_i, v_j])
                            B[v_i, v_j] = A[v_i, v_j] * T.float32(2.0)
                    for j_1 in range(8):
                        with T.block("C"):
                            v_i, v_j = T.axis.remap("SS", [i_1, j_1])
                            T.reads(B[v_i, v_j])
                            T.writes(C[v_i, v_j])
                            C[v_i, v_j] = B[v_i, v_j] + T.float32(1.0)
        >>> print(sch.trace)
        b0 = sch.get_block('B')
        l1 = sch.sample_compute_location(b0, decision=0)
        sch.compute_at(b0, l1, preserve_unit_loops=True)
        """
        name = self._block(block, "sample_compute_location")
        candidates = compute_locations(self, name)
        if decision is None:
            chosen = candidates[self.rng.randrange(len(candidates))]
        elif isinstance(decision, int) and not isinstance(decision, bool):
            chosen = choose(candidates, decision)
        else:
            raise ScheduleError("sample_compute_location", f"argument 'decision': expected -2 "
                                f"(inline), -1 (root) or a loop index, got {decision!r}")
        rv = self._new_rv("l")
        handle = LocationMark(chosen[0], rv) if chosen[0] < 0 else LoopRV(chosen[1], rv)
        self._record("sample_compute_location", self._func, (block,), outputs=(handle,),
                     decision=chosen[0])
        return handle

    def _compute_at_mark(self, primitive: str, block, mark: LocationMark,
                         preserve_unit_loops: bool, index) -> None:
        """compute_at / reverse_compute_at at a mark: inline the block, or leave it."""
        self._check_owner(mark, "loop", primitive)
        name = self._block(block, primitive)
        new_func = self._func
        if mark.decision == INLINE:
            inline = reverse_compute_inline if primitive == "reverse_compute_at" \
                else compute_inline
            new_func = inline(self._func, name, self.render_errors)
        attrs = (("preserve_unit_loops", preserve_unit_loops),)
        if index is not None and index != -1:
            attrs += (("index", index),)
        self._record(primitive, new_func, (block, mark), attrs)
        if mark.decision == INLINE:
            self._note_replaced("block", name, f"{primitive} at an inline mark removed it")

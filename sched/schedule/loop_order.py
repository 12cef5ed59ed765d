"""Loop order: reorder, and tile (split, then reorder); add_unit_loop, a loop of extent 1.

Pure functions `(func, loop names, arguments) -> new func`, wrapped by `LoopOrderPrimitives`
as Schedule methods with handles, docs and the trace. Reorder asks polyhedral/ whether the new
order keeps every dependence and raises ScheduleError naming the one it would break, with up
to three orders that keep them.
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.functor import free_vars
from sched.ir.nodes import For, IntImm, PrimFunc, Stmt, Var
from sched.polyhedral.isl_text import within_operations
from sched.polyhedral.legality import check_order, schedule_error
from sched.schedule.base import BlockRV, LoopRV, ScheduleBase
from sched.schedule.loops import _outermost, _perfect_chain
from sched.schedule.ordered_axes import check_loop_keeps_order
from sched.schedule.state import find_block, find_loop, fresh_name, path_to, replace


def reorder(func: PrimFunc, loop_names: list[str], render: bool = True,
            suggest: bool = True) -> PrimFunc:
    """Put the given loops in the given order, outermost first (see Schedule.reorder)."""
    if len(set(loop_names)) != len(loop_names):
        raise ScheduleError("reorder", f"a loop appears twice in {list(loop_names)}")
    outer = _outermost(func, loop_names, "reorder")
    for name in loop_names:
        loop = find_loop(func, name, "reorder")
        if loop is not outer and path_to(outer, loop) is None:
            raise ScheduleError("reorder", f"loop {name!r} is not inside loop "
                                f"{outer.loop_var.name!r}: reorder works on the loops of one "
                                f"nest")
    chain = _perfect_chain(outer, set(loop_names), "reorder")
    slots = [i for i, lp in enumerate(chain) if lp.loop_var.name in loop_names]
    by_name = {lp.loop_var.name: lp for lp in chain}
    new_chain = list(chain)
    for slot, name in zip(slots, loop_names):
        new_chain[slot] = by_name[name]
        if chain[slot].loop_var.name != name:
            check_loop_keeps_order(by_name[name], "reorder", "reordered")
    for depth, lp in enumerate(new_chain):
        outer_vars = {x.loop_var for x in new_chain[depth:]}
        if free_vars(lp.extent) and set(free_vars(lp.extent)) & outer_vars - {lp.loop_var}:
            raise ScheduleError("reorder", f"the extent of loop {lp.loop_var.name!r} depends "
                                f"on a loop that would move inside it")
    body = chain[-1].body
    for lp in reversed(new_chain):
        body = dataclasses.replace(lp, body=body)
    new_func = replace(func, outer, body)
    violation = check_order(func, new_func)
    if violation is not None:
        moved = next((n for n, lp in zip(loop_names, (chain[s] for s in slots))
                      if n != lp.loop_var.name), loop_names[0])
        alternatives = _legal_orders(func, loop_names) if render and suggest else ()
        raise schedule_error("reorder", violation, func, loop=moved, render=render,
                             alternatives=alternatives)
    return new_func


# what listing the legal orders of a refused reorder may take: isl operations per candidate
# order (about a second), and seconds in all. On a symbolic in-place stencil one candidate took
# minutes (audit helper-58), a refusal must come back at once, and a candidate not judged in
# time is left out of the list (the list is advice: each order is checked when applied).
SUGGESTION_OPERATIONS = 2_000_000
SUGGESTION_SECONDS = 2.0


def _legal_orders(func, loop_names) -> tuple[str, ...]:
    """Up to three orders of the same loops that keep every dependence (for four loops or
    fewer: more would take too long to list), among those judged within the budget above."""
    import itertools
    import time

    if len(loop_names) > 4:
        return ()
    found = []
    started = time.perf_counter()
    for order in itertools.permutations(loop_names):
        if len(found) >= 3 or time.perf_counter() - started > SUGGESTION_SECONDS:
            break
        if list(order) != list(loop_names) and within_operations(
                SUGGESTION_OPERATIONS, lambda order=order: _keeps_order(func, list(order))):
            found.append(f"sch.reorder({', '.join(order)})")
    return tuple(found)


def _keeps_order(func, loop_names) -> bool:
    try:
        reorder(func, loop_names, render=False, suggest=False)
    except ScheduleError:
        return False
    return True


def add_unit_loop(func: PrimFunc, target: str, is_block: bool) -> tuple[PrimFunc, str]:
    """A loop of extent 1 around a block or a loop (see Schedule.add_unit_loop)."""
    node: Stmt = find_block(func, target, "add_unit_loop") if is_block \
        else find_loop(func, target, "add_unit_loop")
    if is_block and node is func.body:      # (its script read back as another function)
        raise ScheduleError("add_unit_loop", "the root block holds the whole function: add "
                            "the loop around a block or a loop inside it")
    name = fresh_name(func, "u")
    loop = For(Var(name), IntImm(0), IntImm(1), "serial", node)
    return replace(func, node, loop), name


class LoopOrderPrimitives(ScheduleBase):
    """reorder, add_unit_loop, tile."""

    def reorder(self, *ordered: LoopRV) -> None:
        """Put the given loops in this order, outermost first; other loops keep their place.

        Requires: the loops are in one nest, perfectly nested from the outermost given loop to
        the innermost; the new order keeps every dependence (polyhedral/ checks; reduce loops
        of an associative reduction may move freely).

        Arguments: the loop handles in their new order. Handles stay valid.
        Also known as: `reorder` in Halide and TVM.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((4, 6), name="A")
        >>> B = te.compute((6, 4), lambda j, i: A[i, j], name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]))
        >>> j, i = sch.get_loops(sch.get_block("B"))
        >>> sch.reorder(i, j)
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((4, 6), "float32"), B: T.Buffer((6, 4), "float32")):
            with T.block("root"):
                for i, j in T.grid(4, 6):
                    with T.block("B"):
                        v_j, v_i = T.axis.remap("SS", [j, i])
                        T.reads(A[v_i, v_j])
                        T.writes(B[v_j, v_i])
                        B[v_j, v_i] = A[v_i, v_j]
        """
        names = [self._loop(lp, "reorder", f"loop {i + 1}") for i, lp in enumerate(ordered)]
        new_func = reorder(self._func, names, render=self.render_errors)
        self._record("reorder", new_func, tuple(ordered))

    def add_unit_loop(self, target: BlockRV | LoopRV) -> LoopRV:
        """A new loop of extent 1 around a block or a loop.

        Requires: nothing. Returns: a handle to the new loop.
        Also known as: `add_unit_loop` in TVM.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((4,), name="A")
        >>> B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]))
        >>> u = sch.add_unit_loop(sch.get_block("B"))
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
            with T.block("root"):
                for i, u in T.grid(4, 1):
                    with T.block("B"):
                        v_i = T.axis.remap("S", [i])
                        T.reads(A[v_i])
                        T.writes(B[v_i])
                        B[v_i] = A[v_i] + T.float32(1.0)
        """
        is_block = isinstance(target, BlockRV)
        name = self._block(target, "add_unit_loop", "target") if is_block \
            else self._loop(target, "add_unit_loop", "target")
        new_func, loop_name = add_unit_loop(self._func, name, is_block)
        handle = LoopRV(loop_name, self._new_rv("l"))
        self._record("add_unit_loop", new_func, (target,), outputs=(handle,))
        return handle

    def tile(self, x: LoopRV, y: LoopRV, x_factor: int, y_factor: int) -> list[LoopRV]:
        """Split x and y by the factors and reorder to xo, yo, xi, yi; recorded as its split
        and reorder steps.

        Requires: x directly outside y, in one nest. Returns: [xo, yo, xi, yi]; invalidates
        x and y. Also known as: `tile` in Halide.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((8, 12), name="A")
        >>> B = te.compute((8, 12), lambda i, j: A[i, j] + 1.0, name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]))
        >>> i, j = sch.get_loops(sch.get_block("B"))
        >>> sch.tile(i, j, 4, 4)
        [LoopRV('i_0'), LoopRV('j_0'), LoopRV('i_1'), LoopRV('j_1')]
        >>> print(sch.func.script().splitlines()[5])
                for i_0, j_0, i_1, j_1 in T.grid(2, 3, 4, 4):
        """
        with self._all_or_nothing():            # a refused reorder leaves no split behind
            xo, xi = self.split(x, [None, x_factor])
            yo, yi = self.split(y, [None, y_factor])
            self.reorder(xo, yo, xi, yi)
        return [xo, yo, xi, yi]

"""merge: the loop nests of sibling statements run as one nest, their bodies one after the
other in each iteration (loop fusion across nests, "merge" in TVM).

    for i in range(8): B[i] = ...          merge(i, i_1)      for i in range(8):
    for i_1 in range(8): C[i_1] = ...       ---------->           B[i] = ...
                                                                  C[i] = ...

Each given loop is the bottom of a chain of loops from the statement under the loops' lowest
common ancestor down to it, each the only statement in the body of the one before; the chains
have the same depth and, level by level, the same extents. The blocks keep their iteration
variables (their bindings use the merged loops' variables), so they run the same instances,
interleaved: `polyhedral.check_order` decides whether every dependence is kept (a consumer
that reads what a later iteration of its producer writes is refused, naming the dependence).
"""

from __future__ import annotations

from sched.errors import ScheduleError
from sched.ir.functor import substitute
from sched.ir.nodes import For, PrimFunc, SeqStmt, Stmt, is_constant, seq
from sched.polyhedral.legality import check_order, schedule_error
from sched.schedule.base import LoopRV, ScheduleBase
from sched.schedule.ordered_axes import check_loop_keeps_order
from sched.schedule.state import find_loop, path_to, replace


def _chains(func: PrimFunc, loops: list[For]) -> tuple[object, list[list[For]]]:
    """The lowest common ancestor of `loops` and, for each, the loops from the one under the
    ancestor down to it."""
    paths = [path_to(func.body, lp) + [lp] for lp in loops]
    depth = 0
    while all(len(p) > depth + 1 for p in paths) and \
            all(p[depth] is paths[0][depth] for p in paths):
        depth += 1
    if depth == 0 or not all(p[depth - 1] is paths[0][depth - 1] for p in paths):
        raise AssertionError("the loops share no ancestor")
    ancestor = paths[0][depth - 1]
    chains = []
    for path, loop in zip(paths, loops):
        below = path[depth:]
        below = [n for n in below if not isinstance(n, SeqStmt)] if isinstance(
            ancestor, SeqStmt) else below
        if not all(isinstance(n, For) for n in below):
            kinds = ", ".join(sorted({type(n).__name__ for n in below if not isinstance(n, For)}))
            raise ScheduleError("merge", f"loop {loop.loop_var.name!r} is under a {kinds} "
                                f"below the loops' common ancestor: merge takes loops of "
                                f"sibling nests, each perfectly nested down from the statement "
                                f"beside the others")
        chains.append(below)
    return ancestor, chains


def _check_chains(chains: list[list[For]]) -> None:
    first = chains[0]
    for chain in chains:
        target = chain[-1].loop_var.name
        if len(chain) != len(first):
            raise ScheduleError("merge", f"loop {target!r} is {len(chain)} loop(s) deep below "
                                f"the common ancestor, loop {first[-1].loop_var.name!r} "
                                f"{len(first)}: merge the loops of one depth")
        for outer, inner in zip(chain, chain[1:]):
            if inner is not outer.body:
                raise ScheduleError("merge", f"loop {inner.loop_var.name!r} is not the only "
                                    f"statement in the body of loop {outer.loop_var.name!r}: "
                                    f"the loops down to a merged loop must be perfectly nested")
        for loop, model in zip(chain, first):
            name = loop.loop_var.name
            if not is_constant(loop.min, 0):
                raise ScheduleError("merge", f"loop {name!r} starts at {loop.min.script()}, "
                                    f"not 0: merged loops start at 0 (the merged loop's "
                                    f"variable stands for each of them)")
            if loop.extent != model.extent:
                raise ScheduleError("merge", f"loop {name!r} runs {loop.extent.script()} "
                                    f"iterations, loop {model.loop_var.name!r} "
                                    f"{model.extent.script()}: merged loops have the same "
                                    f"extent (split one first)")
            if loop.kind != "serial" or loop.annotations:
                shown = loop.thread_tag or loop.kind if loop.kind != "serial" else "annotated"
                raise ScheduleError("merge", f"loop {name!r} is {shown}: merge makes a serial "
                                    f"loop without annotations; merge first, then mark the "
                                    f"merged loop")
            check_loop_keeps_order(loop, "merge", "merged")


def merge(func: PrimFunc, loop_names: list[str], render: bool = True
          ) -> tuple[PrimFunc, str]:
    """`func` with the nests of `loop_names` merged (see Schedule.merge); the merged loop's
    name."""
    if len(loop_names) < 2 or len(set(loop_names)) != len(loop_names):
        raise ScheduleError("merge", f"expected at least two different loops, got "
                            f"{list(loop_names)}")
    loops = [find_loop(func, name, "merge") for name in loop_names]
    for loop in loops:
        for other in loops:
            if other is not loop and path_to(loop, other) is not None:
                raise ScheduleError("merge", f"loop {other.loop_var.name!r} is inside loop "
                                    f"{loop.loop_var.name!r}: merge takes loops of sibling "
                                    f"nests")
    ancestor, chains = _chains(func, loops)
    _check_chains(chains)
    siblings = list(ancestor.stmts) if isinstance(ancestor, SeqStmt) else []
    heads = [chain[0] for chain in chains]
    if not all(any(head is s for s in siblings) for head in heads):
        raise ScheduleError("merge", "the loops' nests are not statements of one sequence")
    order = sorted(range(len(chains)), key=lambda k: next(
        i for i, s in enumerate(siblings) if s is heads[k]))
    kept = chains[order[0]]
    bodies: list[Stmt] = []
    for k in order:
        mapping = {lp.loop_var: target.loop_var for lp, target in zip(chains[k], kept)}
        bodies.append(substitute(chains[k][-1].body, mapping) if k != order[0]
                      else chains[k][-1].body)
    merged: Stmt = seq(*bodies)
    for loop in reversed(kept):
        merged = For(loop.loop_var, loop.min, loop.extent, loop.kind, merged, loop.thread_tag,
                     loop.annotations)
    rest = [s for s in siblings if not any(s is head for head in heads)]
    first = next(i for i, s in enumerate(siblings) if s is heads[order[0]])
    position = sum(1 for s in siblings[:first] if not any(s is h for h in heads))
    rest.insert(position, merged)
    new_func = replace(func, ancestor, seq(*rest))
    violation = check_order(func, new_func)
    if violation is not None:
        raise schedule_error("merge", violation, func, loop=loop_names[order[-1]],
                             render=render)
    return new_func, kept[-1].loop_var.name


class LoopMergePrimitives(ScheduleBase):
    """merge."""

    def merge(self, *loops: LoopRV) -> LoopRV:
        """Run the nests of sibling loops as one nest: in each iteration, the body of each
        nest in program order.

        Requires: at least two loops, in nests that are statements of one sequence; from that
        statement down to each given loop the loops are perfectly nested, as many for each,
        level by level serial, from 0, of the same extent, without annotations; the
        interleaved order keeps every dependence (polyhedral/ checks).

        Arguments: the loop handles. Returns: a handle to the merged loop (the given loop of
        the first nest in program order). Invalidates the loops of the other nests.
        Also known as: `merge` in TVM; loop fusion of two nests (Halide's compute_with).

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((8,), name="A")
        >>> B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
        >>> C = te.compute((8,), lambda i: B[i] + 1.0, name="C")
        >>> sch = sched.Schedule(te.create_prim_func([A, C]))
        >>> (i,) = sch.get_loops(sch.get_block("B"))
        >>> (i_1,) = sch.get_loops(sch.get_block("C"))
        >>> sch.merge(i, i_1)
        LoopRV('i')
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
            with T.block("root"):
                B = T.alloc_buffer((8,), "float32")
                for i in range(8):
                    with T.block("B"):
                        v_i = T.axis.remap("S", [i])
                        T.reads(A[v_i])
                        T.writes(B[v_i])
                        B[v_i] = A[v_i] * T.float32(2.0)
                    with T.block("C"):
                        v_i = T.axis.remap("S", [i])
                        T.reads(B[v_i])
                        T.writes(C[v_i])
                        C[v_i] = B[v_i] + T.float32(1.0)
        """
        names = [self._loop(lp, "merge", f"loop {i + 1}") for i, lp in enumerate(loops)]
        new_func, merged = merge(self._func, names, self.render_errors)
        handle = LoopRV(merged, self._new_rv("l"))
        self._record("merge", new_func, tuple(loops), outputs=(handle,))
        for name in names:
            if name != merged:
                self._note_replaced("loop", name, f"merge merged it into {merged}")
        return handle

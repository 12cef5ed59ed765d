"""reorder_block_iter_var: permute the iteration variables of a block (and their bindings).

The block runs the same instances, at the same times, with the same accesses: only the order
in which its variables are declared changes (what `T.axis.remap` lists, and the order of the
instance tuple a later `transform_block_layout` or `tensorize` sees). No dependence can break,
so there is nothing to ask polyhedral/; the step is checked to be a permutation.
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.nodes import PrimFunc
from sched.schedule.base import BlockRV, ScheduleBase
from sched.schedule.state import find_block, replace


def reorder_block_iter_var(func: PrimFunc, block_name: str, new_order) -> PrimFunc:
    """`func` with the iteration variables of `block_name` in the order `new_order` (see
    Schedule.reorder_block_iter_var)."""
    realize = find_block(func, block_name, "reorder_block_iter_var")
    count = len(realize.block.iter_vars)
    if not isinstance(new_order, list | tuple) or sorted(new_order) != list(range(count)) \
            or any(isinstance(i, bool) for i in new_order):
        raise ScheduleError("reorder_block_iter_var", f"argument 2, 'new_order' to "
                            f"reorder_block_iter_var: expected a permutation of "
                            f"{list(range(count))} (block {block_name!r} has {count} iteration "
                            f"variables), got {new_order!r}")
    block = dataclasses.replace(realize.block,
                                iter_vars=tuple(realize.block.iter_vars[i] for i in new_order))
    new = dataclasses.replace(realize, block=block,
                              iter_values=tuple(realize.iter_values[i] for i in new_order))
    return replace(func, realize, new)


class BlockIterPrimitives(ScheduleBase):
    """reorder_block_iter_var."""

    def reorder_block_iter_var(self, block: BlockRV, new_order: list[int]) -> None:
        """Declare the iteration variables of a block in another order.

        Requires: `new_order` is a permutation of the positions of the block's variables.
        Nothing runs in another order, so every dependence is kept.

        Arguments: `block` a block handle; `new_order` the old positions, in their new order.
        Returns: nothing. Handles stay valid.
        Also known as: `reorder_block_iter_var` in TVM.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((4, 6), name="A")
        >>> k = te.reduce_axis((0, 6), name="k")
        >>> B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]))
        >>> sch.reorder_block_iter_var(sch.get_block("B"), [1, 0])
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((4, 6), "float32"), B: T.Buffer((4,), "float32")):
            with T.block("root"):
                for i, k in T.grid(4, 6):
                    with T.block("B"):
                        v_k, v_i = T.axis.remap("RS", [k, i])
                        T.reads(A[v_i, v_k], B[v_i])
                        T.writes(B[v_i])
                        with T.init():
                            B[v_i] = T.float32(0.0)
                        B[v_i] = B[v_i] + A[v_i, v_k]
        """
        name = self._block(block, "reorder_block_iter_var")
        new_func = reorder_block_iter_var(self._func, name, new_order)
        self._record("reorder_block_iter_var", new_func, (block, list(new_order)))

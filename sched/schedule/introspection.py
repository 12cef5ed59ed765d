"""What a TVM user asks of a schedule besides its steps: `mod`, `work_on`, `show`,
`fork_seed`, `get` (the loop or block a handle names), and the output blocks of a scope
(`get_output_blocks`, recorded like get_block).

None of these changes the function.
"""

from __future__ import annotations

from sched.ir.functor import collect
from sched.ir.module import IRModule
from sched.ir.nodes import Block, BlockRealize, For
from sched.schedule.base import BlockRV, IntRV, LoopRV, ScheduleBase
from sched.schedule.state import find_block, find_loop


def output_blocks(func, scope: str) -> list[str]:
    """The blocks under block `scope` (nested ones too) that write a buffer not allocated
    inside it: a parameter, or a buffer of an enclosing block."""
    realize = find_block(func, scope, "get_output_blocks")
    inner = collect(realize.block.body, BlockRealize)
    allocated = {b.name for b in realize.block.alloc_buffers}
    allocated |= {b.name for r in inner for b in r.block.alloc_buffers}
    return [r.block.name for r in inner
            if any(w.buffer.name not in allocated for w in r.block.writes)]


class IntrospectionPrimitives(ScheduleBase):
    """mod, work_on, show, enter_postproc, fork_seed, get, get_output_blocks."""

    def get(self, handle: LoopRV | BlockRV | IntRV) -> For | Block | int:
        """The loop (a `For`: `.extent`, `.kind`, `.thread_tag`) or the block a handle names
        now, or the value a sampling step chose (an int), as TVM's `sch.get(rv)`. Not
        recorded: it changes nothing.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((64,), name="A")
        >>> B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]))
        >>> outer, inner = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 16])
        >>> sch.get(outer).extent.value, sch.get(inner).extent.value
        (4, 16)
        >>> sch.get(sch.get_block("B")).name
        'B'
        >>> [sch.get(v) for v in sch.sample_perfect_tile(inner, n=2, decision=[4, 4])]
        [4, 4]
        """
        if isinstance(handle, LoopRV):
            return find_loop(self._func, self._loop(handle, "get", "handle"), "get")
        if isinstance(handle, BlockRV):
            self._check_owner(handle, "block", "get")
            return find_block(self._func, self._check_current(handle, "block", "get"),
                              "get").block
        if isinstance(handle, IntRV):
            return int(handle)
        raise TypeError(f"get: expected a loop or block handle or a sampled value, got "
                        f"{type(handle).__name__}")

    @property
    def mod(self) -> IRModule:
        """The function as scheduled so far, as a module: `sch.mod["main"]` is `sch.func`
        (TVM's `tir.Schedule(func).mod` holds it as "main"). A schedule of a module keeps
        its other functions as they were, in their order, with the scheduled one under its
        name."""
        module = self._module
        if module is None:
            return IRModule({"main": self._func})
        return IRModule({name: self._func if func is self.original_func else func
                         for name, func in module.functions.items()}, module.name)

    def work_on(self, func_name: str) -> None:
        """Choose the function the following steps work on (TVM's, for a module of several).

        Requires: `func_name` is "main" (or the function's own name): a schedule holds one
        function. Not recorded: it changes nothing.
        """
        self._check_func_name(func_name, "work_on")

    def show(self, *args, **kwargs) -> None:
        """Print the function as scheduled so far, then the trace (TVM's style arguments are
        accepted and ignored)."""
        self.mod.show()
        if len(self.trace):
            print(self.trace)

    def enter_postproc(self) -> None:
        """Mark, in the trace, where MetaSchedule's post-processing steps begin (TVM's);
        changes nothing and replays as itself."""
        self._record("enter_postproc", self._func, ())

    def seed(self, seed: int) -> None:
        """Seed the sampling primitives' random state (TVM's `sch.seed(n)`). Not recorded:
        a trace records the decisions themselves."""
        self.rng.seed(seed)

    def remove_rv(self, rv) -> None:
        """TVM's, to drop a handle from the schedule's symbol table: a handle here is only a
        name, so there is nothing to drop (a stale handle is refused where it is used)."""

    @property
    def func_working_on(self) -> str:
        """The name of the function the steps work on: "main" (TVM's; see `work_on`)."""
        return "main"

    def fork_seed(self) -> int:
        """A new seed drawn from this schedule's random state (for another Schedule or
        search). Not recorded: it changes nothing."""
        return self.rng.randrange(1, 2 ** 31 - 1)

    def get_output_blocks(self, scope_block: BlockRV | str) -> list[BlockRV]:
        """The blocks under `scope_block` that write a buffer not allocated inside it (a
        parameter of the function, for the root block), in program order.

        Arguments: `scope_block` a block handle or name (usually "root").
        Returns: block handles. Also known as: `get_output_blocks` in TVM.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((8,), name="A")
        >>> B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
        >>> C = te.compute((8,), lambda i: B[i] + 1.0, name="C")
        >>> sch = sched.Schedule(te.create_prim_func([A, C]))
        >>> sch.get_output_blocks("root")
        [BlockRV('C')]
        """
        if isinstance(scope_block, str):
            find_block(self._func, scope_block, "get_output_blocks")
            name = scope_block
        else:
            name = self._block(scope_block, "get_output_blocks", "scope_block")
        handles = [BlockRV(n, self._new_rv("b")) for n in output_blocks(self._func, name)]
        self._record("get_output_blocks", self._func, (scope_block,), outputs=tuple(handles))
        return handles

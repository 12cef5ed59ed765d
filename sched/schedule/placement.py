"""Placement primitives, the Schedule methods: compute_at and reverse_compute_at move a block
under a loop of its neighbour (pure functions in compute_at.py), compute_inline and
reverse_compute_inline fold a block into its neighbour (inlining.py).

In Halide's terms a block's loops are where it is computed and stored; compute_at picks the
first for a producer, reverse_compute_at for a consumer, and inlining computes a value where it
is used. Each method checks its handles, calls the pure function (which checks legality with
polyhedral/ and raises ScheduleError), and records the step only on success.
"""

from __future__ import annotations

from sched.schedule.base import BlockRV, LoopRV, ScheduleBase
from sched.schedule.compute_at import move_under
from sched.schedule.compute_location import LocationMark
from sched.schedule.inlining import compute_inline
from sched.schedule.reverse_inlining import reverse_compute_inline


def _check_flag(value, primitive: str) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"argument 3, 'preserve_unit_loops' to {primitive}: expected a bool, "
                        f"got {value!r}")


class PlacementPrimitives(ScheduleBase):
    """compute_at, reverse_compute_at, compute_inline, reverse_compute_inline."""

    def compute_at(self, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False,
                   index: int = -1) -> None:
        """Move a producer block under a loop of its consumers, computing per iteration of the
        loop (and the loops outside it) the region of its buffer they read there.

        Requires: the block writes one buffer, at its spatial iteration variables; some
        consumer is under the loop, which is not around the block; the new order keeps every
        dependence (polyhedral/ checks; consumers outside the loop may still read the buffer
        after it). The block's loops are regenerated (`ax0`, `ax1`...; unit loops dropped
        unless `preserve_unit_loops`) over the box of the region, under a `T.where` guard when
        the box may leave the block's domain (a non-dividing split of the consumer). The block
        goes before the first statement of the loop's body that holds a consumer. Overlapping
        regions (a stencil) are computed again in each iteration.

        Arguments: `block` a block handle; `loop` a loop handle; `preserve_unit_loops` a bool;
        `index` (TVM's) the position among the statements of the loop's body: -1 the last
        possible one (before the first consumer, the default), -2 the first (after the
        block's producers), or a position between those.
        Returns: nothing. Handles: `block` and `loop` stay valid; the block's old loops go.
        Also known as: `compute_at` in Halide (with `store_at` the same loop) and in TVM.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((8,), name="A")
        >>> B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
        >>> C = te.compute((8,), lambda i: B[i] + 1.0, name="C")
        >>> sch = sched.Schedule(te.create_prim_func([A, C]))
        >>> i_0, i_1 = sch.split(sch.get_loops(sch.get_block("C"))[0], factors=[None, 4])
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
                for i_1_0, i_1_1 in T.grid(2, 4):
                    with T.block("C"):
                        v_i = T.axis.spatial(8, i_1_0 * 4 + i_1_1)
                        T.reads(B[v_i])
                        T.writes(C[v_i])
                        C[v_i] = B[v_i] + T.float32(1.0)
        >>> sch.compute_at(sch.get_block("B"), i_0)
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
            with T.block("root"):
                B = T.alloc_buffer((8,), "float32")
                for i_1_0 in range(2):
                    for ax0 in range(4):
                        with T.block("B"):
                            v_i = T.axis.spatial(8, i_1_0 * 4 + ax0)
                            T.reads(A[v_i])
                            T.writes(B[v_i])
                            B[v_i] = A[v_i] * T.float32(2.0)
                    for i_1_1 in range(4):
                        with T.block("C"):
                            v_i = T.axis.spatial(8, i_1_0 * 4 + i_1_1)
                            T.reads(B[v_i])
                            T.writes(C[v_i])
                            C[v_i] = B[v_i] + T.float32(1.0)
        """
        if isinstance(loop, LocationMark):     # from sample_compute_location: inline or root
            return self._compute_at_mark("compute_at", block, loop, preserve_unit_loops, index)
        self._move("compute_at", block, loop, preserve_unit_loops, reverse=False,
                   index=None if index == -1 else index)

    def reverse_compute_at(self, block: BlockRV, loop: LoopRV,
                           preserve_unit_loops: bool = False, index: int | None = None) -> None:
        """Move a consumer block under a loop of its producers, computing per iteration of the
        loop what it can from the region of their buffers they wrote there.

        Requires: a producer is under the loop, which is not a reduce loop of that producer (the
        consumer would read a partial result) and not around the block; each instance of the
        block runs in one iteration; the new order keeps every dependence. The block's loops
        are regenerated as for compute_at: the iteration variables that index a buffer written
        under the loop cover the box written there, the others (a broadcast dimension, a
        reduction) their whole domain. The block goes after the last statement of the loop's
        body that holds a producer.

        Arguments: `block` a block handle; `loop` a loop handle; `preserve_unit_loops` a bool;
        `index` (TVM's) the position among the statements of the loop's body: None (the
        default) right after the last statement holding a producer, -1 the last possible
        position (before the block's consumers there), -2 the first, or a position between.
        Returns: nothing. Handles: `block` and `loop` stay valid; the block's old loops go.
        Also known as: `reverse_compute_at` in TVM; in Halide, compute_at of the producer
        at the consumer's loop, seen from the other side.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((4, 6), name="A")
        >>> B = te.compute((4, 6), lambda i, j: A[i, j] * 2.0, name="B")
        >>> C = te.compute((4, 6), lambda i, j: B[i, j] + 1.0, name="C")
        >>> sch = sched.Schedule(te.create_prim_func([A, C]))
        >>> i, j = sch.get_loops(sch.get_block("B"))
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((4, 6), "float32"), C: T.Buffer((4, 6), "float32")):
            with T.block("root"):
                B = T.alloc_buffer((4, 6), "float32")
                for i, j in T.grid(4, 6):
                    with T.block("B"):
                        v_i, v_j = T.axis.remap("SS", [i, j])
                        T.reads(A[v_i, v_j])
                        T.writes(B[v_i, v_j])
                        B[v_i, v_j] = A[v_i, v_j] * T.float32(2.0)
                for i_1, j_1 in T.grid(4, 6):
                    with T.block("C"):
                        v_i, v_j = T.axis.remap("SS", [i_1, j_1])
                        T.reads(B[v_i, v_j])
                        T.writes(C[v_i, v_j])
                        C[v_i, v_j] = B[v_i, v_j] + T.float32(1.0)
        >>> sch.reverse_compute_at(sch.get_block("C"), i)
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((4, 6), "float32"), C: T.Buffer((4, 6), "float32")):
            with T.block("root"):
                B = T.alloc_buffer((4, 6), "float32")
                for i in range(4):
                    for j in range(6):
                        with T.block("B"):
                            v_i, v_j = T.axis.remap("SS", [i, j])
                            T.reads(A[v_i, v_j])
                            T.writes(B[v_i, v_j])
                            B[v_i, v_j] = A[v_i, v_j] * T.float32(2.0)
                    for ax0 in range(6):
                        with T.block("C"):
                            v_i, v_j = T.axis.remap("SS", [i, ax0])
                            T.reads(B[v_i, v_j])
                            T.writes(C[v_i, v_j])
                            C[v_i, v_j] = B[v_i, v_j] + T.float32(1.0)
        """
        if isinstance(loop, LocationMark):
            return self._compute_at_mark("reverse_compute_at", block, loop,
                                         preserve_unit_loops, index)
        self._move("reverse_compute_at", block, loop, preserve_unit_loops, reverse=True,
                   index=index)

    def _move(self, primitive: str, block, loop, preserve_unit_loops, reverse: bool,
              index: int | None = None) -> None:
        name = self._block(block, primitive)
        loop_name = self._loop(loop, primitive)
        _check_flag(preserve_unit_loops, primitive)
        new_func = move_under(self._func, name, loop_name, preserve_unit_loops, reverse,
                              render=self.render_errors, index=index)
        attrs = (("preserve_unit_loops", preserve_unit_loops),)
        if index is not None:
            attrs += (("index", index),)
        self._record(primitive, new_func, (block, loop), attrs)

    def compute_inline(self, block: BlockRV) -> None:
        """Inline a block into its consumers: each load of its buffer becomes the value it
        stores there, and the block and its buffer go.

        Requires: the block is spatial (no reduce variable, no init) with one store
        `B[v...] = f(...)` at its iteration variables, each once; `B` is an intermediate buffer
        (not a parameter) that no other block writes; no block between it and a consumer
        overwrites what it reads.

        Arguments: `block` a block handle. Returns: nothing. Handles: `block` and its loops
        become invalid.
        Also known as: `compute_inline` in Halide (the default schedule of a Func) and TVM.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((8,), name="A")
        >>> B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
        >>> C = te.compute((8,), lambda i: B[i] + 1.0, name="C")
        >>> sch = sched.Schedule(te.create_prim_func([A, C]))
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
                for i_1 in range(8):
                    with T.block("C"):
                        v_i = T.axis.remap("S", [i_1])
                        T.reads(B[v_i])
                        T.writes(C[v_i])
                        C[v_i] = B[v_i] + T.float32(1.0)
        >>> sch.compute_inline(sch.get_block("B"))
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
            with T.block("root"):
                for i_1 in range(8):
                    with T.block("C"):
                        v_i = T.axis.remap("S", [i_1])
                        T.reads(A[v_i])
                        T.writes(C[v_i])
                        C[v_i] = A[v_i] * T.float32(2.0) + T.float32(1.0)
        """
        name = self._block(block, "compute_inline")
        self._record("compute_inline", compute_inline(self._func, name, self.render_errors),
                     (block,))
        self._note_replaced("block", name, "compute_inline removed it")

    def reverse_compute_inline(self, block: BlockRV) -> None:
        """Inline a consumer into its producer: the producer stores the consumer's value,
        computed from its own, and the consumer and the buffer between them go.

        Requires: the block is spatial with one store and no predicate, and reads the buffer of
        exactly one producer, at its iteration variables, each once, over the producer's
        domains (the two blocks' instances match one to one); the producer is spatial, stores
        at its iteration variables, and its buffer is an intermediate no other block reads.
        Inlined, the consumer writes the elements it wrote before (isl compares them: its
        loops must run its whole domain, under no `if` or loop bound read from memory), and
        no read of its output from the producer on (by the producer at other elements, or in
        a predicate, condition or loop bound) sees the new values early.

        Arguments: `block` a block handle. Returns: nothing. Handles: `block` and its loops
        become invalid; the producer keeps its name and loops.
        Also known as: `reverse_compute_inline` in TVM (an epilogue fused into its producer).

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((8,), name="A")
        >>> B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
        >>> C = te.compute((8,), lambda i: te.max(B[i], 0.0), name="C")
        >>> sch = sched.Schedule(te.create_prim_func([A, C]))
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
                for i_1 in range(8):
                    with T.block("C"):
                        v_i = T.axis.remap("S", [i_1])
                        T.reads(B[v_i])
                        T.writes(C[v_i])
                        C[v_i] = T.max(B[v_i], T.float32(0.0))
        >>> sch.reverse_compute_inline(sch.get_block("C"))
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
            with T.block("root"):
                for i in range(8):
                    with T.block("B"):
                        v_i = T.axis.remap("S", [i])
                        T.reads(A[v_i])
                        T.writes(C[v_i])
                        C[v_i] = T.max(A[v_i] * T.float32(2.0), T.float32(0.0))
        """
        name = self._block(block, "reverse_compute_inline")
        self._record("reverse_compute_inline",
                     reverse_compute_inline(self._func, name, self.render_errors), (block,))
        self._note_replaced("block", name, "reverse_compute_inline removed it")

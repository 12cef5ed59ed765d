"""Properties of a buffer TVM lets a schedule set: `set_axis_separator` and `unsafe_set_dtype`.

Neither changes an order, so no dependence can break; what they could break is the values.

- `set_axis_separator` asks for a physical layout of several dimensions (TVM uses it for
  texture memory and Hexagon's VTCM). sched flattens every buffer to one dimension, on both
  targets: the identity (no separator) is accepted, any other is refused with that reason.
- `unsafe_set_dtype` stores an intermediate buffer in another dtype, casting at the store and
  back to the old dtype at every load (as TVM does). TVM lets it round values; sched accepts it
  only where the cast and the cast back give every value unchanged (a widening: float16 or
  bfloat16 to float32 or float64, float32 to float64, an integer to a wider integer of the
  same signedness or an unsigned one to a wider signed one), so the numbers stay exactly those
  of the function before: never trust, prove.
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.dtype import DTYPES, bits
from sched.ir.functor import IRMutator
from sched.ir.nodes import Block, BufferLoad, BufferStore, Cast, PrimFunc
from sched.schedule.base import BlockRV, ScheduleBase
from sched.schedule.memory import _check_index
from sched.schedule.scope import replace_buffer
from sched.schedule.state import find_block, refuse_other_views

_FLOATS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}     # mantissa bits
_EXPONENTS = {"float16": 5, "bfloat16": 8, "float32": 8, "float64": 11}


def holds_every_value(old: str, new: str) -> bool:
    """Whether every value of dtype `old` is a value of dtype `new` (so a cast to `new` and
    back gives it unchanged)."""
    if old == new:
        return True
    if old in _FLOATS and new in _FLOATS:
        return _FLOATS[new] >= _FLOATS[old] and _EXPONENTS[new] >= _EXPONENTS[old]
    if old.startswith(("int", "uint")) and new.startswith(("int", "uint")):
        if old.startswith("uint") and new.startswith("uint") or \
                old.startswith("int") and new.startswith("int"):
            return bits(new) >= bits(old)
        return old.startswith("uint") and bits(new) > bits(old)
    # (an integer into a float is exact only for few bits: not worth a special case)
    return old == "bool" and new.startswith(("int", "uint"))


def _buffer_of(block: Block, ref, primitive: str):
    """The buffer named by `ref`: ("read" | "write", index), a name, or a Buffer."""
    if isinstance(ref, tuple | list) and len(ref) == 2 and ref[0] in ("read", "write"):
        regions = block.reads if ref[0] == "read" else block.writes
        return _check_index(ref[1], regions, block, primitive, "buffer",
                            "reads" if ref[0] == "read" else "writes")
    return _check_index(ref, (*block.reads, *block.writes), block, primitive, "buffer",
                        "regions")


def set_axis_separator(func: PrimFunc, block_name: str, buffer_ref, axis_separators
                       ) -> PrimFunc:
    """`func` unchanged when `axis_separators` asks for no separator; else a refusal."""
    block = find_block(func, block_name, "set_axis_separator").block
    buffer = _buffer_of(block, buffer_ref, "set_axis_separator")
    if axis_separators is None or (isinstance(axis_separators, list | tuple)
                                   and len(axis_separators) == 0):
        return func
    raise ScheduleError("set_axis_separator", f"axis_separators={list(axis_separators)!r} for "
                        f"{buffer.name!r}: sched lays out every buffer as one flat dimension on "
                        f"both targets (no texture or VTCM memory with 2-d addressing); drop "
                        f"the step, or pass [] (no separator)")


class _CastAccesses(IRMutator):
    """Stores to `old` cast to `dtype`; loads of it cast back to its dtype."""

    def __init__(self, old, dtype: str) -> None:
        self.old, self.dtype = old, dtype

    def visit_BufferLoad(self, node: BufferLoad):
        node = self.visit_children(node)
        return Cast(self.old.dtype, node) if node.buffer == self.old else node

    def visit_BufferStore(self, node: BufferStore):
        node = self.visit_children(node)
        if node.buffer == self.old:
            return dataclasses.replace(node, value=Cast(self.dtype, node.value))
        return node


def unsafe_set_dtype(func: PrimFunc, block_name: str, buffer_index, dtype: str) -> PrimFunc:
    """`func` with the buffer `block.writes[buffer_index]` stored as `dtype` (see
    Schedule.unsafe_set_dtype)."""
    primitive = "unsafe_set_dtype"
    block = find_block(func, block_name, primitive).block
    buffer = _check_index(buffer_index, block.writes, block, primitive, "buffer_index",
                          "writes")
    if dtype not in DTYPES:
        raise ScheduleError(primitive, f"argument 3, 'dtype' to {primitive}: expected one of "
                            f"{', '.join(DTYPES)}, got {dtype!r}")
    if buffer in func.buffers:
        raise ScheduleError(primitive, f"{buffer.name!r} is a parameter of the function: its "
                            f"dtype is the caller's; only a buffer the function allocates can "
                            f"change (cache_write makes one)")
    if dtype == buffer.dtype:
        return func
    if not holds_every_value(buffer.dtype, dtype):
        raise ScheduleError(primitive, f"{buffer.name!r} holds {buffer.dtype} values, which "
                            f"{dtype} cannot all hold: the cast would change results (TVM "
                            f"accepts it and rounds; sched keeps the numbers). Compute in "
                            f"{dtype} in the algorithm (a te.compute with dtype={dtype!r}, or "
                            f"T.Cast), or store in a wider dtype")
    refuse_other_views(func, buffer, primitive, "changing its dtype")
    body = _CastAccesses(buffer, dtype).visit(func.body)
    new = dataclasses.replace(buffer, dtype=dtype)
    return dataclasses.replace(func, body=replace_buffer(body, buffer, new))


class BufferPropertyPrimitives(ScheduleBase):
    """set_axis_separator, unsafe_set_dtype."""

    def set_axis_separator(self, block: BlockRV | str, buffer, axis_separators=None) -> None:
        """Ask for a buffer's physical layout to keep several dimensions, separated before the
        given axes (TVM's, for texture memory and Hexagon VTCM).

        Requires: `axis_separators` is None or [] (the flat layout sched makes on both
        targets); any other is refused, saying so.

        Arguments: `block` a block handle or name; `buffer` ("read" | "write", index), a name
        or a Buffer; `axis_separators` a list of axes. Returns: nothing.
        Also known as: `set_axis_separator` in TVM.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((4, 4), name="A")
        >>> B = te.compute((4, 4), lambda i, j: A[i, j] + 1.0, name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]))
        >>> sch.set_axis_separator(sch.get_block("B"), ("write", 0), [])
        >>> sch.set_axis_separator(sch.get_block("B"), "B", [1])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        sched.errors.ScheduleError: set_axis_separator: axis_separators=[1] for 'B': sched ...
        """
        name = self._block(block, "set_axis_separator")
        new_func = set_axis_separator(self._func, name, buffer, axis_separators)
        self._record("set_axis_separator", new_func,
                     (block, list(buffer) if isinstance(buffer, tuple) else buffer,
                      [] if axis_separators is None else list(axis_separators)))

    def unsafe_set_dtype(self, block: BlockRV | str, buffer_index, dtype: str) -> None:
        """Store the buffer a block writes in another dtype: the stores cast to it, the loads
        cast back.

        Requires: the buffer is allocated by the function (not a parameter), has no other
        view, and `dtype` holds every value of its dtype (a widening: float16 -> float32,
        int8 -> int32...), so no number changes; TVM also accepts narrowing casts, which
        round, and sched refuses them saying so.

        Arguments: `block` a block handle or name; `buffer_index` the index (or name) of the
        buffer in the block's writes; `dtype` the new dtype. Returns: nothing.
        Also known as: `unsafe_set_dtype` in TVM.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((4,), "float16", name="A")
        >>> B = te.compute((4,), lambda i: A[i] * A[i], name="B")
        >>> C = te.compute((4,), lambda i: B[i] + B[i], name="C")
        >>> sch = sched.Schedule(te.create_prim_func([A, C]))
        >>> sch.unsafe_set_dtype(sch.get_block("B"), 0, "float32")
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((4,), "float16"), C: T.Buffer((4,), "float16")):
            with T.block("root"):
                B = T.alloc_buffer((4,), "float32")
                for i in range(4):
                    with T.block("B"):
                        v_i = T.axis.remap("S", [i])
                        T.reads(A[v_i])
                        T.writes(B[v_i])
                        B[v_i] = T.Cast("float32", A[v_i] * A[v_i])
                for i_1 in range(4):
                    with T.block("C"):
                        v_i = T.axis.remap("S", [i_1])
                        T.reads(B[v_i])
                        T.writes(C[v_i])
                        C[v_i] = T.Cast("float16", B[v_i]) + T.Cast("float16", B[v_i])
        """
        name = self._block(block, "unsafe_set_dtype")
        new_func = unsafe_set_dtype(self._func, name, buffer_index, dtype)
        self._record("unsafe_set_dtype", new_func, (block, buffer_index, dtype))

"""storage_align: pad a buffer so that the stride of an axis is `factor * n + offset`.

The request is a block annotation ("buffer_dim_align", JSON [[buffer_index, axis, factor,
offset]]); the lowering (sched/lower/align_storage.py) pads each buffer once compacted. The
check that the lowering can meet the requests runs here at the step and, from
`ScheduleBase._record`, after every later step (a step can change the compacted shape).
"""

from __future__ import annotations

import dataclasses
import json

from sched.errors import ScheduleError
from sched.ir.functor import collect
from sched.ir.nodes import Block, Buffer, IntImm, PrimFunc
from sched.schedule.base import BlockRV, ScheduleBase
from sched.schedule.memory import _check_allocated, _check_index
from sched.schedule.state import find_block, refuse_other_views, replace

DIM_ALIGN = "buffer_dim_align"    # block annotation: JSON [[buffer_index, axis, factor, offset]]


def storage_align(func: PrimFunc, block_name: str, index: int, axis: int, factor: int,
                  offset: int) -> PrimFunc:
    """Ask for the stride of `axis` of `block.writes[index]` to be `factor * n + offset`
    (see Schedule.storage_align)."""
    primitive = "storage_align"
    realize = find_block(func, block_name, primitive)
    buffer = _check_index(index, realize.block.writes, realize.block, primitive,
                          "buffer_index", "writes")
    _check_allocated(func, buffer, primitive)
    refuse_other_views(func, buffer, primitive, "padding its rows")
    ndim, a = buffer.ndim, _int(axis)
    if ndim < 2:
        raise ScheduleError(primitive, f"{buffer.name!r} has {ndim} dimension(s): only an axis "
                            f"other than the innermost has a stride to align, so a buffer of "
                            f"one dimension has none (transform_layout it into rows first)")
    checks = (("axis", axis, -ndim <= a < ndim and a % ndim != ndim - 1,
               f"an axis other than the innermost (its stride is 1): one of "
               f"{', '.join(str(x) for x in range(ndim - 1))} (or "
               f"{', '.join(str(x) for x in range(-ndim, -1))} from the end)"),
              ("factor", factor, _int(factor) > 0, "a positive int"),
              ("offset", offset, 0 <= _int(offset) < _int(factor, 1), "an int in [0, factor)"))
    for position, (name, value, valid, expected) in enumerate(checks, start=3):
        if not valid:
            raise ScheduleError(primitive, f"argument {position}, {name!r} to {primitive}: "
                                f"expected {expected} for the {ndim}-dimensional "
                                f"{buffer.name!r}, got {value!r}")
    axis = axis % ndim
    block = realize.block
    requests = [r for r in dim_align_requests(block) if r[:2] != [index, axis]]
    value = json.dumps(requests + [[index, axis, factor, offset]])
    annotations = tuple((k, v) for k, v in block.annotations if k != DIM_ALIGN)
    new = dataclasses.replace(block, annotations=annotations + ((DIM_ALIGN, value),))
    new_func = replace(func, realize, dataclasses.replace(realize, block=new))
    check_storage_align(new_func, primitive)
    return new_func


def check_storage_align(func: PrimFunc, primitive: str) -> None:
    """Refuse a function whose storage_align requests the lowering could not meet: the
    lowering's own passes (plan_buffer_allocation, compact_buffers, then align_storage, which
    pads each buffer as compacted) run here, so that a request on a symbolic dimension or for
    a stride no padding reaches fails at the step, not at build. The Schedule checks again
    after every later step while some request stands (a step can change the compacted
    shape)."""
    requested: dict[Buffer, set[int]] = {}
    for block in collect(func.body, Block):
        for index, axis, _, _ in dim_align_requests(block):
            buffer = block.writes[index].buffer
            requested.setdefault(buffer, set()).add(axis % buffer.ndim)
    if all(_always_met(buffer, axes) for buffer, axes in requested.items()):
        return
    from sched.lower.align_storage import align_storage
    from sched.lower.compact_buffers import compact_buffers
    from sched.lower.plan_buffer_allocation import plan_buffer_allocation

    compacted = compact_buffers(plan_buffer_allocation(func),
                                only={buffer.name for buffer in requested})
    try:
        align_storage(compacted)
    except ValueError as error:
        raise ScheduleError(primitive, f"{error} (the lowering pads each buffer as compacted "
                            f"to what its users touch); storage_align needs constant "
                            f"dimensions after the axis, with a stride the padding can reach: "
                            f"move the cache under compute_at first, or choose another factor "
                            f"or offset") from None


def _always_met(buffer: Buffer, axes: set[int]) -> bool:
    """Whether align_storage meets requests on `axes` of `buffer` whatever compact_buffers
    makes of its shape (the check need not compact it): every request is on the axis before
    the innermost, whose stride is the innermost length m, and some m in [length, length +
    factor) is `offset` modulo `factor`; compaction leaves a constant length constant."""
    return axes == {buffer.ndim - 2} and isinstance(buffer.shape[-1], IntImm)


def _int(value, default: int = -(2**62)) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def storage_align_by_annotation(func: PrimFunc, block_name: str, value) -> PrimFunc:
    """`annotate(block, "buffer_dim_align", value)`: each [buffer_index, axis, factor, offset]
    of `value` (a list, or its JSON text) requested as storage_align requests it, with its
    checks (audit helper-93: the annotation bypassed them; a bad value was a raw error or
    ignored, a factor of 0 failed at build)."""
    try:
        requests = json.loads(value) if isinstance(value, str) else value
        requests = [[int(n) for n in request] for request in requests]
        if any(len(request) != 4 for request in requests):
            raise ValueError
    except (TypeError, ValueError):
        raise ScheduleError("annotate", f"'{DIM_ALIGN}' takes [[buffer_index, axis, factor, "
                            f"offset], ...], got {value!r}; storage_align makes it") from None
    realize = find_block(func, block_name, "annotate")
    kept = tuple((k, v) for k, v in realize.block.annotations if k != DIM_ALIGN)
    func = replace(func, realize, dataclasses.replace(
        realize, block=dataclasses.replace(realize.block, annotations=kept)))
    for request in requests:
        func = storage_align(func, block_name, *request)
    return func


def dim_align_requests(block: Block) -> list[list[int]]:
    """The [buffer_index, axis, factor, offset] requests of storage_align on `block`."""
    value = dict(block.annotations).get(DIM_ALIGN)
    return json.loads(value) if isinstance(value, str) else []


class StorageAlignPrimitives(ScheduleBase):
    """storage_align."""

    def storage_align(self, block: BlockRV, buffer_index: int, axis: int, factor: int,
                      offset: int) -> None:
        """Pad a buffer so that the stride of `axis` is `factor * n + offset` (to spread the
        rows of a shared tile over memory banks). Recorded as the block annotation
        "buffer_dim_align"; the lowering pads the buffer once compacted.

        Requires: the buffer is allocated by the function; `axis` is not the innermost axis.
        Arguments: `block` a block handle; `buffer_index` an index into its writes (or the
        buffer's name); `axis`
        (negative counts from the end); `factor` positive; `offset` in [0, factor).
        Also known as: `storage_align` in TVM; Halide's `align_storage` aligns the extent of
        one dimension instead.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((4, 8), name="A")
        >>> B = te.compute((4, 8), lambda i, j: A[i, j] * 2.0, name="B")
        >>> C = te.compute((4, 8), lambda i, j: B[i, j] + 1.0, name="C")
        >>> sch = sched.Schedule(te.create_prim_func([A, C]))
        >>> sch.storage_align(sch.get_block("B"), 0, axis=0, factor=16, offset=1)
        >>> print(sch.func.script().splitlines()[11])
                        T.block_attr({"buffer_dim_align": "[[0, 0, 16, 1]]"})
        """
        name = self._block(block, "storage_align")
        new_func = storage_align(self._func, name, buffer_index, axis, factor, offset)
        self._record("storage_align", new_func, (block, buffer_index),
                     (("axis", axis), ("factor", factor), ("offset", offset)))

"""Storage alignment: the buffers `storage_align` asked for are padded so that the stride of each
requested axis is `factor * n + offset` (for a shared tile, rows then start in different banks).

Runs after `compact_buffers` (the strides depend on the compacted shape) and before
`convert_blocks_to_loops`, which drops the block annotations that carry the requests
(`"buffer_dim_align"`: JSON `[[buffer_index, axis, factor, offset], ...]`, the index into the
block's writes). Buffers are row-major, so the stride of axis d is the product of the
dimensions after it: padding dimension d + 1 sets it, and `flatten_buffers` then computes the
padded offsets with no further help. TVM pads strides in its buffer flattening instead.
"""

from __future__ import annotations

import dataclasses
import json
import math

from sched.ir.functor import IRMutator, collect
from sched.ir.nodes import Allocate, Block, Buffer, IntImm, PrimFunc

DIM_ALIGN = "buffer_dim_align"


def _requests(func: PrimFunc) -> dict[str, dict[int, tuple[int, int]]]:
    """buffer name -> axis -> (factor, offset), from every block's annotation."""
    found: dict[str, dict[int, tuple[int, int]]] = {}
    for block in collect(func.body, Block):
        value = dict(block.annotations).get(DIM_ALIGN)
        if not isinstance(value, str):
            continue
        for index, axis, factor, offset in json.loads(value):
            buffer = block.writes[index].buffer
            found.setdefault(buffer.name, {})[axis % buffer.ndim] = (factor, offset)
    return found


def padded_shape(buffer: Buffer, requests: dict[int, tuple[int, int]]) -> tuple:
    """The shape of `buffer` with the dimension after each requested axis padded to the
    smallest length that gives the axis a stride `factor * n + offset`."""
    shape = list(buffer.shape)
    stride = 1                                     # the stride of axis + 1
    for axis in range(buffer.ndim - 2, -1, -1):
        length = shape[axis + 1]
        if not isinstance(length, IntImm):
            if any(a <= axis for a in requests):
                raise ValueError(f"storage_align of {buffer.name!r}: dimension {axis + 1} has "
                                 f"the symbolic length {length.script()}; only constant "
                                 f"shapes can be padded")
            return tuple(shape)
        if axis in requests:
            factor, offset = requests[axis]
            padded = _smallest_length(length.value, stride, factor, offset)
            if padded is None:
                raise ValueError(f"storage_align of {buffer.name!r}: no padding of dimension "
                                 f"{axis + 1} gives axis {axis} a stride {factor} * n + "
                                 f"{offset} (the stride of axis {axis + 1} is {stride})")
            shape[axis + 1] = IntImm(padded, length.dtype)
        stride *= shape[axis + 1].value
    return tuple(shape)


def _smallest_length(length: int, stride: int, factor: int, offset: int) -> int | None:
    """The smallest m >= `length` with `stride * m % factor == offset`, or None: in closed
    form (a scan over a factor of 2**40 did not end: audit helper-129). With g = gcd(stride,
    factor), m solves it iff g divides offset, and then m is one residue modulo factor / g."""
    g = math.gcd(stride, factor)
    if offset % g:
        return None
    modulus = factor // g
    residue = (offset // g) * pow(stride // g, -1, modulus) % modulus if modulus > 1 else 0
    return length + (residue - length) % modulus


class _ReplaceBuffers(IRMutator):
    def __init__(self, new: dict[str, Buffer]) -> None:
        self.new = new

    def visit_Buffer(self, buffer: Buffer) -> Buffer:
        return self.new.get(buffer.name, buffer) if buffer.data is None else buffer


def align_storage(func: PrimFunc) -> PrimFunc:
    """`func` with the buffers named in `"buffer_dim_align"` block annotations padded.

    Takes block IR. Each requested buffer (allocated, never a parameter: storage_align refuses
    those) gets a new shape in which, for each request (axis, factor, offset), dimension
    axis + 1 is the smallest length at least its own such that the stride of `axis` (the
    product of the dimensions after it) is `offset` modulo `factor`; innermost requests are
    met first. Indices do not change: the padding is never accessed. A request that cannot
    be met (a symbolic dimension, or no solution) raises ValueError.

    Later passes may rely on: shapes only grow; annotations stay.
    """
    requests = _requests(func)
    if not requests:
        return func
    allocated = [b for block in collect(func.body, Block) for b in block.alloc_buffers]
    allocated += [node.buffer for node in collect(func.body, Allocate)]
    new = {b.name: dataclasses.replace(b, shape=padded_shape(b, requests[b.name]))
           for b in allocated if b.name in requests}
    new = {name: b for name, b in new.items() if b not in allocated}
    if not new:
        return func
    return dataclasses.replace(func, body=_ReplaceBuffers(new).visit(func.body))

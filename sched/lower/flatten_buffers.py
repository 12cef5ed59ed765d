"""Buffer flattening: every buffer access becomes a one-dimensional, row-major access.

Runs after `convert_blocks_to_loops` (there are no block regions left to rewrite, and every
local buffer has its `Allocate`) and before `simplify_indices`, which normalizes the linear
indices this pass builds (`(i * 64 + j) * 32 + k` -> `i * 2048 + j * 32 + k`).

Index width: a flattened index is computed in int64 wherever it may exceed 2**31 - 1, that
is for a buffer (or the storage a view shares) with a symbolic dim, whose size is unbounded, or
with a constant size of 2**31 elements or more; other indices stay int32, the cheaper type on
the GPU. `simplify_indices` keeps an int64 index in int64 arithmetic throughout.
"""

from __future__ import annotations

import dataclasses
import math

from sched.errors import ScheduleError
from sched.ir.builders import widen
from sched.ir.functor import IRMutator
from sched.ir.nodes import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    IntImm,
    PrimFunc,
    Stmt,
)
from sched.ir.simplify import simplify

INT32_MAX = 2 ** 31 - 1
WIDE_INDEX = "int64"


def needs_wide_index(shape: tuple[Expr, ...]) -> bool:
    """Whether a row-major index into an array of `shape` may exceed 2**31 - 1: some dim is
    symbolic (a size has no bound), or the constant size is 2**31 elements or more."""
    if not all(isinstance(dim, IntImm) for dim in shape):
        return True
    return math.prod(dim.value for dim in shape) > INT32_MAX


def _size(shape: tuple[Expr, ...], wide: bool) -> Expr:
    size: Expr = IntImm(1, WIDE_INDEX if wide else "int32")
    for dim in shape:
        size = size * (widen(dim) if wide else dim)
    return simplify(size)


def linear_index(indices: tuple[Expr, ...], shape: tuple[Expr, ...],
                 wide: bool = False) -> Expr:
    """The row-major position of `indices` in an array of `shape`:
    `((i0 * d1 + i1) * d2 + i2) ...` (0 for a zero-dimensional array), in int64 arithmetic
    when `wide`."""
    if not indices:
        return IntImm(0, WIDE_INDEX if wide else "int32")
    cast = widen if wide else (lambda e: e)
    index = cast(indices[0])
    for i, dim in zip(indices[1:], shape[1:], strict=True):
        index = index * cast(dim) + cast(i)
    return simplify(index)


def flat_view(buffer: Buffer) -> Buffer:
    """The one-dimensional view of parameter `buffer`: `<name>_flat`, sharing its storage."""
    return Buffer(f"{buffer.name}_flat", (_size(buffer.shape, needs_wide_index(buffer.shape)),),
                  buffer.dtype, buffer.scope, data=buffer.storage_name)


class _Flattener(IRMutator):
    def __init__(self, params: tuple[Buffer, ...]) -> None:
        # buffer -> its one-dimensional replacement; a 1-D buffer stands for itself
        self.flat: dict[Buffer, Buffer] = {
            b: b if b.ndim == 1 else flat_view(b) for b in params}
        # storage name -> the buffer that owns the storage (a parameter or an allocation)
        self.storage: dict[str, Buffer] = {b.name: b for b in params}
        self.wide: set[str] = {b.name for b in params if needs_wide_index(b.shape)}

    def _flatten(self, buffer: Buffer, indices: tuple[Expr, ...]):
        if buffer not in self.flat:
            return self._flatten_view(buffer, indices)
        flat = self.flat[buffer]
        wide = buffer.storage_name in self.wide
        if flat is buffer:
            if wide and len(indices) == 1:
                return buffer, (widen(indices[0]),)
            return buffer, indices
        return flat, (linear_index(indices, buffer.shape, wide),)

    def _flatten_view(self, view: Buffer, indices: tuple[Expr, ...]):
        """An access through a view (`T.Buffer(shape, data=A.data)`): a row-major index into
        the view's shape, from the start of the storage it shares."""
        owner = self.storage.get(view.storage_name)
        if owner is None:
            raise AssertionError(f"flatten_buffers: buffer '{view.name}' is neither a "
                                 f"parameter, nor allocated, nor a view of either")
        if view.dtype != owner.dtype:
            raise ScheduleError("build", f"buffer '{view.name}' views the storage of "
                                f"'{owner.name}' as {view.dtype}, but '{owner.name}' holds "
                                f"{owner.dtype}: a view must keep the element type")
        wide = owner.name in self.wide or needs_wide_index(view.shape)
        return self.flat[owner], (linear_index(indices, view.shape, wide),)

    def visit_Allocate(self, node: Allocate) -> Stmt:
        buffer = node.buffer
        wide = needs_wide_index(buffer.shape)
        flat = buffer if buffer.ndim == 1 else dataclasses.replace(
            buffer, shape=(_size(buffer.shape, wide),))
        self.flat[buffer] = flat
        self.storage[buffer.name] = buffer
        if wide:
            self.wide.add(buffer.name)
        body = self.visit(node.body)
        return node if flat is buffer and body is node.body else Allocate(flat, body)

    def visit_BufferLoad(self, node: BufferLoad) -> Expr:
        indices = tuple(self.visit(i) for i in node.indices)
        buffer, flat_indices = self._flatten(node.buffer, indices)
        if buffer is node.buffer and flat_indices == node.indices:
            return node
        return BufferLoad(buffer, flat_indices)

    def visit_BufferStore(self, node: BufferStore) -> Stmt:
        indices = tuple(self.visit(i) for i in node.indices)
        buffer, flat_indices = self._flatten(node.buffer, indices)
        value = self.visit(node.value)
        if buffer is node.buffer and flat_indices == node.indices and value is node.value:
            return node
        return BufferStore(buffer, value, flat_indices)


def flatten_buffers(func: PrimFunc) -> PrimFunc:
    """`func` with every buffer access one-dimensional.

    Requires: no blocks (run `convert_blocks_to_loops` first).

    An access `A[i, j]` to an n-dimensional parameter `A` of shape `(m, n)` becomes
    `A_flat[i * n + j]`, where `A_flat = T.Buffer((m * n,), data=A.data)` is a view of the
    parameter's storage. An `Allocate`d buffer becomes one-dimensional itself (same name,
    shape `(product,)`). One-dimensional buffers are kept as they are. An access through a
    view of a parameter or an allocation (`T.Buffer(shape, data=A.data)`, same element type)
    becomes an access to the flat form of the storage's owner, at the row-major position in
    the view's shape. The parameters are unchanged: they still describe the kernel's arguments,
    shapes included. Indices are int64 where they may exceed 2**31 - 1 (module docstring).

    Later passes and code generators may rely on: every access has one index; a buffer that
    is not allocated is a parameter or a view of one (`data` names the parameter); indices
    are in elements, row-major.
    """
    body = _Flattener(func.buffers).visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)

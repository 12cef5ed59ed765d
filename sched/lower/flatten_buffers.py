"""Buffer flattening: every buffer access becomes a one-dimensional, row-major access.

Runs after `convert_blocks_to_loops` (there are no block regions left to rewrite, and every
local buffer has its `Allocate`) and before `simplify_indices`, which normalizes the linear
indices this pass builds (`(i * 64 + j) * 32 + k` -> `i * 2048 + j * 32 + k`).
"""

from __future__ import annotations

import dataclasses

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


def _size(shape: tuple[Expr, ...]) -> Expr:
    size: Expr = IntImm(1)
    for dim in shape:
        size = size * dim
    return simplify(size)


def linear_index(indices: tuple[Expr, ...], shape: tuple[Expr, ...]) -> Expr:
    """The row-major position of `indices` in an array of `shape`:
    `((i0 * d1 + i1) * d2 + i2) ...` (0 for a zero-dimensional array)."""
    if not indices:
        return IntImm(0)
    index = indices[0]
    for i, dim in zip(indices[1:], shape[1:], strict=True):
        index = index * dim + i
    return simplify(index)


def flat_view(buffer: Buffer) -> Buffer:
    """The one-dimensional view of parameter `buffer`: `<name>_flat`, sharing its storage."""
    return Buffer(f"{buffer.name}_flat", (_size(buffer.shape),), buffer.dtype, buffer.scope,
                  data=buffer.storage_name)


class _Flattener(IRMutator):
    def __init__(self, params: tuple[Buffer, ...]) -> None:
        # buffer -> its one-dimensional replacement; a 1-D buffer stands for itself
        self.flat: dict[Buffer, Buffer] = {
            b: b if b.ndim == 1 else flat_view(b) for b in params}

    def _flatten(self, buffer: Buffer, indices: tuple[Expr, ...]):
        assert buffer in self.flat, (
            f"flatten_buffers: buffer '{buffer.name}' is neither a parameter nor allocated")
        flat = self.flat[buffer]
        if flat is buffer:
            return buffer, indices
        return flat, (linear_index(indices, buffer.shape),)

    def visit_Allocate(self, node: Allocate) -> Stmt:
        buffer = node.buffer
        flat = buffer if buffer.ndim == 1 else dataclasses.replace(
            buffer, shape=(_size(buffer.shape),))
        self.flat[buffer] = flat
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
    shape `(product,)`). One-dimensional buffers are kept as they are. The parameters are
    unchanged: they still describe the kernel's arguments, shapes included.

    Later passes and code generators may rely on: every access has one index; a buffer that
    is not allocated is a parameter or a view of one (`data` names the parameter); indices
    are in elements, row-major.
    """
    body = _Flattener(func.buffers).visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)

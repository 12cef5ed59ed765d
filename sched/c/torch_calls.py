"""Calls on torch tensors whose layout was checked before: only the pointers are checked.

The C entry point (`sched.c.entry`) reads numpy arrays only; a call on torch tensors is checked
by `ArgumentBinder` in Python (tens of microseconds), and so is every call of a CUDA kernel.
What those checks depend on, except the data pointers and the storages' sizes, is the tensors'
type, dtype, device, layout, negation bit, shape and strides (torch tensors are never
read-only), and for CUDA the current device:
`TorchCalls` keys a call by them (`context` adds what else the checks read) and, once the
binder accepted a call with that key, checks a later call with the same key by its pointers
and storages alone (each pointer aligned to its element size; no two overlapping when one is
written, as `ArgumentBinder.check_no_overlap`; each tensor within its storage) and runs the
kernel with the dims bound then. Anything else, or a check failing, goes to the binder, which
raises the error naming the argument.
"""

from __future__ import annotations

import math

from sched.arguments import ArgumentBinder, increment_version, numpy_dtype
from sched.ir.nodes import Buffer

MAX_KEYS = 64       # layouts remembered per kernel (then forgotten all at once)


class TorchCalls:
    """The layouts of torch-tensor calls `binder` accepted, and the dims they bound."""

    def __init__(self, binder: ArgumentBinder, context=None) -> None:
        self.context = context      # () -> what else the binder's checks read (or None)
        self.only_arrays = all(isinstance(p, Buffer) for p in binder.params)
        buffers = binder.func.buffers
        self.itemsizes = [numpy_dtype(b.dtype).itemsize for b in buffers]
        self.pairs = [(i, j) for i in range(len(buffers)) for j in range(i + 1, len(buffers))
                      if binder.written & {buffers[i].storage_name, buffers[j].storage_name}]
        self.dims: dict[tuple, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self.tensor_type = None
        self.written = binder.written_positions

    def key(self, args: tuple) -> tuple | None:
        """What the binder's checks of `args` depend on, but the pointers; None unless every
        argument is a torch tensor (of exactly the type torch.Tensor) and there are no
        scalar parameters."""
        if not self.only_arrays or not args:
            return None
        tensor = self.tensor_type
        if tensor is None:
            if not type(args[0]).__module__.startswith("torch"):
                return None
            import torch

            tensor = self.tensor_type = torch.Tensor
        for t in args:
            if type(t) is not tensor:
                return None
        try:
            layout = tuple([(t.dtype, t.device, t.layout, t.is_neg(), t.shape, t.stride())
                            for t in args])
        except (RuntimeError, TypeError):        # e.g. a sparse tensor: the binder says why
            return None
        if self.context is None:
            return layout
        try:
            return (*layout, self.context())
        except (RuntimeError, AssertionError):   # torch without CUDA: the binder says why
            return None

    def run(self, key: tuple, args: tuple, function) -> bool:
        """Run `function` when `key` was accepted before and the pointers pass; else False."""
        known = self.dims.get(key)
        if known is None:
            return False
        sizes, dims = known
        pointers = [t.data_ptr() for t in args]
        for pointer, itemsize in zip(pointers, self.itemsizes):
            if pointer % itemsize or not pointer:      # (no memory: the binder says why)
                return False
        for t, size, itemsize in zip(args, sizes, self.itemsizes):
            # a storage resized since (untyped_storage().resize_) keeps shape and strides
            if t.untyped_storage().nbytes() < t.storage_offset() * itemsize + size:
                return False
        for i, j in self.pairs:
            if pointers[i] < pointers[j] + sizes[j] and pointers[j] < pointers[i] + sizes[i]:
                return False
        written = [args[k] for k in self.written]
        for t in written:
            if t.requires_grad:
                return False        # the binder says whether autograd allows the write
        function(*pointers, *dims)
        for t in written:
            increment_version(t)
        return True

    def remember(self, key: tuple, dims: tuple[int, ...]) -> None:
        """`key`'s call was accepted by the binder and bound `dims`."""
        if None in key:
            return
        if len(self.dims) >= MAX_KEYS:
            self.dims.clear()
        layout = key[:len(self.itemsizes)]
        sizes = tuple(math.prod(tensor[-2]) * itemsize
                      for tensor, itemsize in zip(layout, self.itemsizes, strict=True))
        self.dims[key] = (sizes, dims)

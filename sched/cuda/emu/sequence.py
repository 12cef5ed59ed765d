"""`EmulatedKernelSequence`: a function of several CUDA kernels (sched/cuda/kernel_sequence.py)
run by the emulator, in order, as the "cuda" target launches them.

One executable holds every kernel (compile.entry_source: the SCHED_EMU_KERNEL variable picks
one); one launch file holds the arguments and the workspace (zeroed; the GPU's is
uninitialized, and a legal schedule reads only what it wrote). Each kernel runs in its own
child process on that file, with the file's grid and block set to its own: what one kernel
writes is in the file when the next one starts, as a kernel boundary orders memory on the GPU.
"""

from __future__ import annotations

import ctypes
import math
import os
import tempfile

import numpy as np

from sched.arguments import numpy_dtype
from sched.cuda.alignment import allocation_offsets, check_pointer_alignment
from sched.cuda.emu.kernel import EmulatedKernel
from sched.cuda.kernel_sequence import KernelLaunch, workspace_shapes
from sched.errors import BuildError
from sched.ir.functor import free_vars
from sched.ir.nodes import Buffer, PrimFunc


class EmulatedKernelSequence(EmulatedKernel):
    """Several kernels of one CUDA source run in order on the CPU (module docstring); called
    like an EmulatedKernel. Attributes as EmulatedKernel's (for the first kernel), and
    `kernels` and `workspace`."""

    def __init__(self, func: PrimFunc, source: str, kernels: tuple[KernelLaunch, ...],
                 workspace: tuple[Buffer, ...], *, aligned_params: dict | frozenset = frozenset(),
                 sanitize: str | None = None, cache_dir=None) -> None:
        self.kernels, self.workspace = kernels, workspace
        names = tuple(k.name for k in kernels)
        super().__init__(func, source, names, kernels[0].launch, lowered=kernels[0].lowered,
                         aligned_params=aligned_params, sanitize=sanitize,
                         cache_dir=cache_dir)
        self.kernel_name = kernels[0].name
        for kernel in kernels[1:]:
            for extent in kernel.launch.grid:
                unknown = [v.name for v in free_vars(extent) if v not in set(self._grid_vars)]
                if unknown:
                    raise BuildError(f"kernel '{kernel.name}': grid extent {extent} uses "
                                     f"{', '.join(unknown)}, which is neither a symbolic dim "
                                     f"nor a scalar parameter of '{func.name}'")

    def __call__(self, *args) -> None:
        bound = self._binder.bind(args)
        arrays = [args[self.func.params.index(b)] for b in self.func.buffers]
        check_pointer_alignment(self.func, self._aligned, allocation_offsets(arrays),
                                "offset in its allocation")
        values = (*bound.scalars, *bound.dims)
        by_var = dict(zip(self._grid_vars, values))
        grids = [k.launch.grid_dims(by_var) for k in self.kernels]
        sizes = [numpy_dtype(b.dtype).itemsize * math.prod(np.shape(a))
                 for b, a in zip(self.func.buffers, arrays)]
        sizes += [numpy_dtype(b.dtype).itemsize * math.prod(shape) for b, shape in
                  zip(self.workspace, workspace_shapes(self.workspace, by_var))]
        pointers = [*bound.pointers, *([None] * len(self.workspace))]
        self.launch = self.kernels[0].launch
        blob, offsets = self._launch_file(grids[0], pointers, sizes, values)
        handle, path = tempfile.mkstemp(prefix="sched-emu-", suffix=".launch")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(blob)
            for index, (kernel, grid) in enumerate(zip(self.kernels, grids)):
                if 0 in grid:
                    continue
                launch = kernel.launch
                words = [*grid, *launch.block, launch.dynamic_shared_bytes]
                with open(path, "r+b") as file:       # words 1-7: grid, block, shared bytes
                    file.seek(8)
                    file.write(np.array(words, dtype=np.uint64).tobytes())
                self.kernel_name, self.launch = kernel.name, launch
                try:
                    self._run(path, index)
                finally:
                    self.kernel_name, self.launch = self.kernels[0].name, self.kernels[0].launch
            result = np.fromfile(path, np.uint8)
        finally:
            os.unlink(path)
        for buffer, pointer, offset, size in zip(self.func.buffers, bound.pointers, offsets,
                                                 sizes):
            if buffer.storage_name in self._binder.written and size:
                ctypes.memmove(pointer, result.ctypes.data + offset, size)
        self._binder.count_writes(args)

    def save_launch(self, path, *args) -> str:
        raise ValueError(f"save_launch: '{self.func.name}' runs {len(self.kernels)} kernels; "
                         f"stepping through one of a sequence is not supported: build its "
                         f"stages as separate functions to step through one")

    def __repr__(self) -> str:
        names = ", ".join(p.name for p in self.func.params)
        return (f"<EmulatedKernelSequence {self.func.name}({names}): "
                f"{', '.join(k.name for k in self.kernels)} on the CPU>")

"""The C target's kernel: a PrimFunc built into a shared library, called through ctypes."""

from __future__ import annotations

import ctypes
from pathlib import Path

from sched.arguments import ArgumentBinder
from sched.c.build import compile_library
from sched.c.codegen import c_function_name, generate_c
from sched.ir.nodes import PrimFunc, Var
from sched.lower import lower

_CTYPES = {"float16": ctypes.c_float, "bfloat16": ctypes.c_float, "float32": ctypes.c_float,
           "float64": ctypes.c_double, "int8": ctypes.c_int8, "int16": ctypes.c_int16,
           "int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint8": ctypes.c_uint8,
           "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
           "bool": ctypes.c_bool}


class CKernel:
    """A compiled kernel for the CPU: `kernel(*args)` runs it on numpy arrays or CPU torch
    tensors, in parameter order, writing its outputs in place.

    Attributes: `func` (the PrimFunc it was built from), `lowered` (the loop IR), `source`
    (the C code), `library_path` (the shared library in the cache).
    """

    def __init__(self, func: PrimFunc, lowered: PrimFunc, source: str, library_path: Path):
        self.func = func
        self.lowered = lowered
        self.source = source
        self.library_path = library_path
        self._binder = ArgumentBinder(func, device="cpu")
        self._library = ctypes.CDLL(str(library_path))
        self._function = getattr(self._library, c_function_name(lowered))
        scalars = [p for p in func.params if isinstance(p, Var)]
        self._function.argtypes = (
            [ctypes.c_void_p] * len(func.buffers)
            + [_CTYPES[v.dtype] for v in (*scalars, *func.symbolic_vars)])
        self._function.restype = None

    def __call__(self, *args) -> None:
        bound = self._binder.bind(args)
        self._function(*bound.pointers, *bound.scalars, *bound.dims)

    def __repr__(self) -> str:
        names = ", ".join(p.name for p in self.func.params)
        return f"<CKernel {self.func.name}({names}) from {self.library_path}>"


def build_c(func: PrimFunc, *, debug: bool = False, thread_order: str | None = None,
            fast_math: bool = False) -> CKernel:
    """`func` (block IR) lowered, generated as C, compiled (or found in the cache) and loaded.
    A GPU schedule's blocks and threads run in `thread_order` (forward, reverse,
    shuffle[:seed]; default: the SCHED_THREAD_ORDER environment variable). `fast_math`: see
    `sched.build`."""
    lowered = lower(func, debug=debug, thread_order=thread_order)
    source = generate_c(lowered, fast_math=fast_math)
    return CKernel(func, lowered, source, compile_library(source, fast_math=fast_math))

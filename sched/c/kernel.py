"""The C target's kernel: a PrimFunc built into a shared library, called through ctypes.

A call goes first to the library's entry point (`sched.c.entry`), which checks the arguments
in C and runs the kernel (well under a microsecond for a few numpy arrays); when the entry
point refuses them (a torch tensor, an ndarray subclass, or a mistake), the checks run in
Python (`sched.arguments.ArgumentBinder`), which either accept them and run the kernel or
raise the `KernelArgumentError` naming the argument. As before, the call releases the GIL
(ctypes.CDLL): the entry point reads the arguments while the calling thread holds them; another
thread reshaping one of them meanwhile is a race, as it would be for the kernel's data.
"""

from __future__ import annotations

import ctypes
import math
import re
import warnings
from pathlib import Path

from sched.arguments import ArgumentBinder, numpy_dtype
from sched.c.build import compile_library
from sched.c.codegen import c_function_name, generate_c
from sched.c.entry import EntrySource, Status, entry_source, launcher_source, scalar_bits
from sched.c.object_layout import CHECK_BOUNDS, layout_words, verify_layout
from sched.c.openmp import load_kernel_library
from sched.c.torch_calls import TorchCalls
from sched.errors import BuildError
from sched.ir.dtype import LARGEST_FINITE, is_bool, is_float
from sched.ir.nodes import PrimFunc, Var
from sched.lower import lower

# a 16-bit float scalar is passed as its bits (sched.c.entry.scalar_bits): to the launcher for
# float16, to the kernel itself for bfloat16 (a uint16_t in C)
_CTYPES = {"float16": ctypes.c_uint16, "bfloat16": ctypes.c_uint16, "float32": ctypes.c_float,
           "float64": ctypes.c_double, "int8": ctypes.c_int8, "int16": ctypes.c_int16,
           "int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint8": ctypes.c_uint8,
           "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
           "bool": ctypes.c_bool}
_EXACT_FLOAT_INT = 2 ** 53      # ints a float scalar takes on the entry point's path


class CKernel:
    """A compiled kernel for the CPU: `kernel(*args)` runs it on numpy arrays or CPU torch
    tensors, in parameter order, writing its outputs in place.

    Attributes: `func` (the PrimFunc it was built from), `lowered` (the loop IR), `source`
    (the C code), `library_path` (the shared library in the cache), `entry` (the C entry point
    that checks calls on numpy arrays, or None, then `entry_unused` says why), `fast_math`.
    `export(directory)` writes it as C files for a program without Python.
    """

    def __init__(self, func: PrimFunc, lowered: PrimFunc, source: str, library_path: Path,
                 *, binder: ArgumentBinder | None = None, entry: EntrySource | None = None,
                 launcher: str | None = None):
        self.func = func
        self.lowered = lowered
        self.source = source
        self.library_path = library_path
        self._binder = binder or ArgumentBinder(func, device="cpu")
        try:
            self._library = load_kernel_library(library_path)
        except OSError as error:
            raise BuildError(_load_failure(str(error), source)) from None
        self._function = getattr(self._library, launcher or c_function_name(lowered))
        scalars = [p for p in func.params if isinstance(p, Var)]
        self._function.argtypes = (
            [ctypes.c_void_p] * len(func.buffers)
            + [_CTYPES[v.dtype] for v in (*scalars, *func.symbolic_vars)])
        self._function.restype = None
        self.entry, self.entry_unused = None, "no entry point was generated"
        self._entry = None           # the entry point's ctypes function, when used
        self._scalar_checks = _scalar_checks(func)
        self._dtypes_of_scalars = [v.dtype for v in scalars]
        self._half_scalars = any(d in ("float16", "bfloat16") for d in self._dtypes_of_scalars)
        self.fast_math = False       # set by build_c
        self.extern_c = ""           # set by build_c: the user's C the kernel calls
        self.slow_calls = 0          # calls whose arguments were checked in Python
        self._torch_calls = TorchCalls(self._binder)
        if entry is not None:
            self._load_entry(entry)

    def _load_entry(self, entry: EntrySource) -> None:
        if not verify_layout(self._library.sched_probe_layout):
            self.entry_unused = ("the objects' layout in memory is not the one the entry "
                                 "point reads (see sched.c.object_layout)")
            return
        function = getattr(self._library, entry.name)
        scalars = [p for p in self.func.params if isinstance(p, Var)]
        function.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [_CTYPES[v.dtype]
                                                                   for v in scalars]
        function.restype = ctypes.c_int
        self._dtypes = [numpy_dtype(b.dtype) for b in self.func.buffers]   # kept alive
        check_bounds = int(self._binder.entry_check is not None)
        self._state = (ctypes.c_int64 * (len(layout_words()) + 1 + len(self._dtypes)))(
            *layout_words(), check_bounds, *(id(d) for d in self._dtypes))
        self._state_address = ctypes.addressof(self._state)
        self.entry, self.entry_unused, self._entry = entry, None, function

    def __call__(self, *args) -> None:
        entry = self._entry
        if entry is not None:
            if self._scalar_checks is None:
                if not entry(self._state_address, id(args)):
                    return
            else:
                values = self._fast_scalars(args)
                if values is not None and not entry(self._state_address, id(args), *values):
                    return
        self._call_checked(args)

    def _call_checked(self, args: tuple) -> None:
        """The call with its arguments checked in Python (which raises on a mistake); torch
        tensors whose layout was checked before only have their pointers checked."""
        key = self._torch_calls.key(args)
        if key is not None and self._torch_calls.run(key, args, self._function):
            return
        self.slow_calls += 1
        bound = self._binder.bind(args)
        scalars = bound.scalars
        if self._half_scalars:
            scalars = [scalar_bits(value, dtype)
                       for value, dtype in zip(scalars, self._dtypes_of_scalars, strict=True)]
        self._function(*bound.pointers, *scalars, *bound.dims)
        self._binder.count_writes(args)
        if key is not None:
            self._torch_calls.remember(key, bound.dims)

    def entry_status(self, *args) -> Status | None:
        """What the entry point says of these arguments (it runs the kernel when they pass),
        or None when the kernel has no entry point: for tests and diagnosis."""
        if self._entry is None:
            return None
        values = [] if self._scalar_checks is None else self._fast_scalars(args)
        if values is None:
            return None
        return Status(self._entry(self._state_address, id(args), *values))

    def _fast_scalars(self, args: tuple) -> list | None:
        """The scalar arguments when each is a plain Python value in range, else None."""
        if len(args) != len(self.func.params):
            return None
        values = []
        for position, kind, low, high, dtype in self._scalar_checks:
            value = args[position]
            if kind == "int":
                if type(value) is not int or not low <= value <= high:
                    return None
            elif kind == "bool":
                if type(value) is not bool:
                    return None
            elif type(value) is float:
                # a finite value beyond the dtype would arrive as an infinity: the binder
                # refuses it (audit helper-76)
                if not -high <= value <= high and math.isfinite(value):
                    return None
            elif type(value) is not int or not low <= value <= high:
                return None
            values.append(value if dtype is None else scalar_bits(value, dtype))
        return values

    @property
    def checks_bounds(self) -> bool:
        """Whether calls check that every access is in bounds (`check_bounds` not "off")."""
        return self._binder.entry_check is not None

    def export(self, directory, name: str | None = None, *, shared_library: bool = False):
        """Write this kernel as a `.c` and a `.h` (and a CMakeLists.txt) to `directory`, to
        build into a program without Python, and with `shared_library` a prebuilt
        `libNAME.so`: see `sched.c.export`. Returns what was written (an `ExportedKernel`)."""
        from sched.c.export import export_c

        return export_c(self, directory, name, shared_library=shared_library)

    def disable_entry_check(self) -> None:
        """Check no access bounds at calls (`sched.build(..., check_bounds="off")`)."""
        self._binder.entry_check = None
        if self._entry is not None:
            self._state[CHECK_BOUNDS] = 0

    def __repr__(self) -> str:
        names = ", ".join(p.name for p in self.func.params)
        return f"<CKernel {self.func.name}({names}) from {self.library_path}>"


def _scalar_checks(func: PrimFunc) -> list[tuple[int, str, int, int, str | None]] | None:
    """(position, kind, low, high, 16-bit float dtype or None) of each scalar parameter, for
    `CKernel._fast_scalars`."""
    import numpy as np

    checks = []
    for position, param in enumerate(func.params):
        if not isinstance(param, Var):
            continue
        if is_bool(param.dtype):
            checks.append((position, "bool", 0, 1, None))
        elif is_float(param.dtype):
            half = param.dtype if param.dtype in ("float16", "bfloat16") else None
            # ints exactly representable, floats finite in the dtype: one bound, the smaller
            # (a larger finite float takes the checked path, which says which it is)
            limit = min(_EXACT_FLOAT_INT, LARGEST_FINITE[param.dtype])
            checks.append((position, "float", -limit, limit, half))
        else:
            info = np.iinfo(param.dtype)
            checks.append((position, "int", int(info.min), int(info.max), None))
    return checks or None


def build_c(func: PrimFunc, *, debug: bool = False, thread_order: str | None = None,
            fast_math: bool = False, extern_c: str = "") -> CKernel:
    """`func` (block IR) lowered, generated as C, compiled (or found in the cache) and loaded.
    A GPU schedule's blocks and threads run in `thread_order` (forward, reverse,
    shuffle[:seed]; default: the SCHED_THREAD_ORDER environment variable). `fast_math`: see
    `sched.build`."""
    lowered = lower(func, debug=debug, thread_order=thread_order)
    source = generate_c(lowered, fast_math=fast_math, extern_c=extern_c)
    binder = ArgumentBinder(func, device="cpu")
    launcher = launcher_source(func, lowered)        # for float16 scalars: see sched.c.entry
    compiled = source + (launcher[1] if launcher else "")
    entry, reason = entry_source(binder, lowered)
    if entry is None:
        library = compile_library(compiled, fast_math=fast_math)
    else:
        try:
            library = compile_library(compiled + entry.text, fast_math=fast_math)
        except BuildError as error:
            # the kernel's own error is raised here; else the entry point has a bug: the
            # kernel works without it
            library = compile_library(compiled, fast_math=fast_math)
            warnings.warn(f"kernel '{func.name}': its C entry point did not compile, calls "
                          f"are checked in Python: {error}", stacklevel=2)
            entry, reason = None, "the entry point did not compile"
    kernel = CKernel(func, lowered, source, library, binder=binder, entry=entry,
                     launcher=launcher[0] if launcher else None)
    kernel.fast_math = fast_math
    kernel.extern_c = extern_c      # (an export dropped it: audit helper-192)
    if reason:
        kernel.entry_unused = reason
    return kernel


def _load_failure(error: str, source: str) -> str:
    """Why the kernel library does not load, with the first source line that uses a symbol
    defined nowhere (the linker of a shared library lets it through; the loader does not)."""
    missing = re.search(r"undefined symbol: (\w+)", error)
    if missing is None:
        return f"the kernel library does not load: {error}"
    name = missing[1]
    lines = source.splitlines()
    used = next((n for n, text in enumerate(lines, 1) if re.search(rf"\b{name}\s*\(", text)),
                None)
    marked = f"\noffending lines:\n>{used:5d} | {lines[used - 1]}" if used else ""
    return (f"kernel.c: error: undefined symbol \"{name}\": the kernel calls {name}, which "
            f"nothing it is linked with defines: give its code to the build (sched.build(..., "
            f"extern_c=...)) or fix its name{marked}")


"""Binding a kernel's call arguments to its PrimFunc's parameters, shared by every target.

`ArgumentBinder(func, device).bind(args)` checks each argument against its parameter (count,
kind, ndim, dtype, device, layout, alignment to the element size, shape, writability) and
returns the data pointers, scalar values and symbolic dims a launcher passes. Arrays are
numpy arrays or torch tensors; torch is imported only when an argument is a torch tensor.
Every mismatch is a `KernelArgumentError` naming the argument:
`argument 2 'B': expected shape (64, 32), got (64, 31)`.

Symbolic dims are bound from the first argument (in parameter order) whose shape has the dim
as a dimension of its own (`n`, not `n * 2`); then every dimension is checked. A scalar parameter
used in a shape (`n: T.int32` with `T.match_buffer(a, (128, n))`) is the value passed for it:
the array's shape is checked against it.

The C target checks calls on numpy arrays in C first (`sched.c.entry`, generated from this
binder: keep the two in step) and comes here for what C refuses, to accept it or raise.

Then the function's accesses are checked for these values, Halide-style: the bounds the static
check could not prove for every value of the symbolic dims are a condition on them
(`sched.polyhedral.in_bounds`), tested here on entry, before the kernel runs, and a call that
would access out of bounds is a `KernelArgumentError` naming the access and the values.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from sched.errors import KernelArgumentError
from sched.ir.dtype import LARGEST_FINITE, is_bool, is_float, is_int
from sched.ir.extern import written_storages
from sched.ir.functor import free_vars, substitute
from sched.ir.nodes import BinaryOp, Buffer, Cast, Expr, IntImm, PrimFunc, Var
from sched.ir.simplify import simplify

DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class BoundArguments:
    """What a launcher passes: a data pointer per buffer parameter (in order), the scalar
    parameters (in order), and the symbolic dims (in `PrimFunc.symbolic_vars` order)."""

    pointers: tuple[int, ...]
    scalars: tuple[int | float | bool, ...]
    dims: tuple[int, ...]


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of an array for a buffer of `dtype` (bfloat16 is stored as uint16)."""
    return np.dtype("uint16" if dtype == "bfloat16" else dtype)


def _torch_dtype(dtype: str):
    import torch

    return getattr(torch, dtype)


def _is_torch_tensor(value) -> bool:
    if not type(value).__module__.startswith("torch"):
        return False
    import torch

    return isinstance(value, torch.Tensor)


def _becomes_infinite(value, dtype: str) -> bool:
    """Whether a finite `value` (an int, a float, a numpy scalar of any precision) rounds to
    an infinity in float `dtype`: beyond its largest finite value by more than half a step
    (65519.0 rounds to float16's 65504, 65520.0 to inf; float32's largest is written
    3.4028235e38)."""
    if isinstance(value, int | np.integer):
        exact = abs(int(value))
    elif np.isinf(value) or np.isnan(value):
        return False
    else:
        exact = abs(float(np.longdouble(value))) if np.isfinite(np.float64(value)) \
            else math.inf
    largest = LARGEST_FINITE[dtype]
    if dtype == "float64":
        return exact > largest
    step = {"float16": 2.0 ** 5, "bfloat16": 2.0 ** 120, "float32": 2.0 ** 104}[dtype]
    return exact >= largest + step / 2       # the halfway point rounds (to even) up


def increment_version(tensor) -> None:
    """Tell autograd that a kernel wrote `tensor` in place (its version counter), as torch's
    own in-place operations do: a tensor saved for backward and overwritten then fails
    backward() instead of giving wrong gradients (audit helper-73)."""
    _torch_increment_version()(tensor)


@functools.cache
def _torch_increment_version():
    import torch

    return torch.autograd.graph.increment_version


# tensor types of torch's tracing whose data pointer is no memory of theirs
_NO_MEMORY_TENSORS = frozenset({"FakeTensor", "FunctionalTensor", "BatchedTensor"})


def _misaligned(pointer: int, itemsize: int, copy: str) -> str:
    return (f"its data (address {pointer:#x}) is not aligned to its {itemsize}-byte elements "
            f"(a view at an odd byte offset?): pass a copy ({copy})")


def _shape_text(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


class ArgumentBinder:
    """Checks and binds the arguments of calls to a kernel built from `func` for `device`."""

    def __init__(self, func: PrimFunc, device: str) -> None:
        assert device in DEVICES, device
        self.func = func
        self.device = device
        self.params = func.params
        self.symbolic_vars = func.symbolic_vars
        self.written = written_storages(func.body)
        # the parameters the kernel writes, by position (count_writes)
        self.written_positions = [k for k, p in enumerate(func.params)
                                  if isinstance(p, Buffer) and p.storage_name in self.written]
        self.numpy_dtypes = {b.name: numpy_dtype(b.dtype) for b in func.buffers}
        # where each symbolic dim is bound: (index among the buffers, dimension), first found
        self.dim_sources: dict[Var, tuple[int, int]] = {}
        for k, buffer in enumerate(func.buffers):
            for d, dim in enumerate(buffer.shape):
                if isinstance(dim, Var):
                    self.dim_sources.setdefault(dim, (k, d))
        # the bounds of every access, checked on the dims' values at each call (see in_bounds)
        from sched.polyhedral.in_bounds import entry_bounds_check

        self.entry_check = entry_bounds_check(func)

    def error(self, position: int, message: str) -> KernelArgumentError:
        param = self.params[position]
        return KernelArgumentError(f"argument {position + 1} '{param.name}': {message}")

    def count_writes(self, args) -> None:
        """After a call: the torch tensors among `args` the kernel wrote are written, for
        autograd (`increment_version`)."""
        for k in self.written_positions:
            if _is_torch_tensor(args[k]):
                increment_version(args[k])

    def bind(self, args: tuple) -> BoundArguments:
        if len(args) != len(self.params):
            names = ", ".join(p.name for p in self.params)
            raise KernelArgumentError(
                f"kernel '{self.func.name}' takes {len(self.params)} arguments ({names}), "
                f"got {len(args)}")
        pointers, scalars, shapes = [], [], []
        scalar_values: dict[Var, int | float | bool] = {}
        for position, (param, arg) in enumerate(zip(self.params, args, strict=True)):
            if isinstance(param, Buffer):
                pointer, shape = self.check_array(position, param, arg)
                pointers.append(pointer)
                shapes.append((position, param, shape))
            else:
                scalars.append(self.check_scalar(position, param, arg))
                scalar_values[param] = scalars[-1]
        self.check_no_overlap(shapes, pointers)
        # a scalar parameter in a shape (`n: T.int32`, `T.match_buffer(a, (128, n))`) is not
        # bound from the shape: the array's shape is checked against the value passed
        values = {**self.bind_dims(shapes), **scalar_values}
        for position, param, shape in shapes:
            self.check_shape(position, param, shape, values)
        if self.entry_check is not None:
            self.entry_check(values)
        return BoundArguments(tuple(pointers), tuple(scalars),
                              tuple(values[v] for v in self.symbolic_vars))

    def check_no_overlap(self, shapes, pointers) -> None:
        """Refuse two buffer arguments whose memory overlaps when the kernel writes one of
        them: the generated code declares its pointers `restrict` (no aliasing), so the
        compiler may reorder a write past a read of the other name."""
        spans = []
        for (position, param, shape), pointer in zip(shapes, pointers, strict=True):
            size = math.prod(shape) * np.dtype(self.numpy_dtypes[param.name]).itemsize
            spans.append((pointer, pointer + size, position, param))
        for k, (start, end, position, param) in enumerate(spans):
            for start2, end2, position2, param2 in spans[k + 1:]:
                written = [p.name for p in (param, param2) if p.storage_name in self.written]
                if written and start < end2 and start2 < end:
                    raise KernelArgumentError(
                        f"arguments {position + 1} '{param.name}' and {position2 + 1} "
                        f"'{param2.name}' share memory, and the kernel writes "
                        f"'{written[0]}': the kernel assumes its buffers do not overlap; pass "
                        f"a separate array (e.g. a copy) for one of them")

    # -- one argument --------------------------------------------------------------------------

    def check_array(self, position: int, buffer: Buffer, arg) -> tuple[int, tuple[int, ...]]:
        """The data pointer and shape of array `arg`, after checking all but its shape."""
        if not isinstance(arg, np.ndarray):
            if _is_torch_tensor(arg):
                return self.check_tensor(position, buffer, arg)
            kind = "a torch tensor" if self.device == "cuda" else "a numpy array or torch tensor"
            raise self.error(position, f"expected {kind}, got {type(arg).__name__}")
        if self.device != "cpu":
            raise self.error(position, f"expected a torch tensor on {self.device}, got a numpy "
                                       f"array (on the CPU): move it to the GPU with "
                                       f"torch.from_numpy(array).cuda()")
        self.check_ndim(position, buffer, arg.ndim)
        expected = self.numpy_dtypes[buffer.name]
        if arg.dtype != expected:
            hint = " (bfloat16 arrays are numpy uint16)" if buffer.dtype == "bfloat16" else ""
            raise self.error(position, f"expected dtype {expected}{hint}, got {arg.dtype}")
        if not arg.flags.c_contiguous:
            raise self.error(position, "expected a C-contiguous array, got strides "
                                       f"{arg.strides}: pass np.ascontiguousarray(...)")
        if not arg.flags.aligned:
            raise self.error(position, _misaligned(arg.__array_interface__["data"][0],
                                                   arg.itemsize, "array.copy()"))
        if buffer.name in self.written and not arg.flags.writeable:
            raise self.error(position, "the kernel writes this buffer, but the array is "
                                       "read-only")
        return arg.__array_interface__["data"][0], arg.shape

    def check_tensor(self, position: int, buffer: Buffer, tensor) -> tuple[int, tuple[int, ...]]:
        import torch

        if tensor.layout is not torch.strided or tensor.is_nested:
            kind = "nested" if tensor.is_nested else str(tensor.layout).removeprefix("torch.")
            raise self.error(position, f"expected a dense (strided) tensor, got a {kind} one: "
                                       f"pass tensor.to_dense()")
        self.check_ndim(position, buffer, tensor.dim())
        expected = _torch_dtype(buffer.dtype)
        if tensor.dtype != expected:
            raise self.error(position, f"expected dtype {expected}, got {tensor.dtype}")
        if tensor.device.type != self.device:
            move = ".cpu()" if self.device == "cpu" else ".cuda()"
            raise self.error(position, f"expected a tensor on {self.device}, got one on "
                                       f"{tensor.device}: move it with {move}")
        if self.device == "cuda":
            self.check_current_device(position, tensor)
        if not tensor.is_contiguous():
            raise self.error(position, f"expected a contiguous tensor, got strides "
                                       f"{tuple(tensor.stride())}: pass tensor.contiguous()")
        if buffer.name in self.written and tensor.requires_grad and torch.is_grad_enabled():
            raise self.error(position, "the kernel writes this tensor, which requires grad: "
                                       "autograd cannot follow the kernel's writes; call it "
                                       "under torch.no_grad(), or write a tensor that does "
                                       "not require grad")
        if tensor.is_neg() or tensor.is_conj():
            # a lazy negation (or conjugation) of its storage, which the kernel would read as
            # it is stored
            raise self.error(position, "expected a tensor whose values are its storage's, got "
                                       "a negated or conjugated view: pass "
                                       "tensor.resolve_neg().resolve_conj()")
        try:
            storage_bytes, pointer = tensor.untyped_storage().nbytes(), tensor.data_ptr()
            resized = storage_bytes == 0 and type(tensor) is torch.Tensor
        except (RuntimeError, NotImplementedError):
            storage_bytes = pointer = 0
            resized = False
        needed = (tensor.storage_offset() + tensor.numel()) * tensor.element_size()
        if resized and needed or type(tensor) is torch.Tensor and not tensor.numel():
            pass            # a storage resized to nothing, an empty tensor: said below or by
            #                 the shape checks (audit helpers 146, 149)
        elif not pointer or type(tensor).__name__ in _NO_MEMORY_TENSORS:
            # torch's tracing tensors (functionalize, vmap, fake and meta modes) stand for
            # values with no memory of theirs: a kernel would read address 0 (audit
            # helper-125: a segfault)
            raise self.error(position, f"expected a tensor with memory, got a "
                                       f"{type(tensor).__name__} with none (a tensor of "
                                       f"torch's tracing: functionalize, vmap, fake tensors); "
                                       f"call the kernel on real tensors, or register it with "
                                       f"sched.torch.custom_op for traced code")
        if storage_bytes < needed:
            raise self.error(position, f"its storage holds {storage_bytes} bytes, fewer than "
                                       f"the {needed} its shape needs (resized or freed?)")
        if pointer % tensor.element_size():
            raise self.error(position, _misaligned(pointer, tensor.element_size(),
                                                   "tensor.clone()"))
        return pointer, tuple(tensor.shape)

    def check_current_device(self, position: int, tensor) -> None:
        import torch

        current = torch.cuda.current_device()
        if tensor.device.index != current:
            raise self.error(position, f"expected a tensor on the current device cuda:{current}, "
                                       f"got one on {tensor.device}: move it with "
                                       f".to('cuda:{current}'), or call the kernel under "
                                       f"torch.cuda.device({tensor.device.index})")

    def check_ndim(self, position: int, buffer: Buffer, ndim: int) -> None:
        if ndim != buffer.ndim:
            raise self.error(position, f"expected {buffer.ndim} dimensions "
                                       f"{_shape_text(buffer.shape)}, got {ndim}")

    def check_scalar(self, position: int, var: Var, arg) -> int | float | bool:
        return checked_scalar(position, var, arg)

    # -- shapes --------------------------------------------------------------------------------

    def bind_dims(self, shapes) -> dict[Var, int]:
        """Each symbolic dim's value, from the first shape that has it as a dimension."""
        values: dict[Var, int] = {}
        for var in self.symbolic_vars:
            if var not in self.dim_sources:
                raise KernelArgumentError(unbound_dim_message(self.func, var))
            k, d = self.dim_sources[var]
            values[var] = shapes[k][2][d]
            if values[var] > largest_dim(var.dtype):
                raise self.error(shapes[k][0], f"dimension {d} (symbolic dim '{var.name}') is "
                                    f"{values[var]}, {beyond_dim(var.dtype)}")
            if values[var] < 1:
                # the analysis proves accesses in bounds for sizes of at least 1: with an empty
                # dimension an access that does not depend on it (A[0]) would still run
                raise self.error(shapes[k][0], f"dimension {d} (symbolic dim '{var.name}') is "
                                    f"{values[var]}: a kernel with symbolic dims runs on sizes "
                                    f"of at least 1, for which its accesses were checked; skip "
                                    f"the call when there is nothing to compute")
        return values

    def check_shape(self, position: int, buffer: Buffer, shape, values: dict[Var, int]) -> None:
        expected = tuple(_evaluate(dim, values) for dim in buffer.shape)
        problem = next((found for found in expected if isinstance(found, str)), None)
        if problem is not None:
            used = {v for dim in buffer.shape for v in free_vars(dim)}
            scalars = ", ".join(f"{v.name} = {n}" for v, n in values.items() if v in used)
            raise self.error(position, f"its shape {_shape_text(buffer.shape)} cannot be "
                                       f"computed with {scalars}: {problem}")
        if tuple(shape) != expected:
            used = {v for dim in buffer.shape for v in free_vars(dim)}
            bound = [f"{v.name} = {values[v]}" for v in self.symbolic_vars]
            bound += [f"{p.name} = {values[p]} (argument {k + 1})"
                      for k, p in enumerate(self.params) if isinstance(p, Var) and p in used]
            given = f" ({', '.join(bound)})" if bound else ""
            raise self.error(position, f"expected shape {_shape_text(expected)}{given}, got "
                                       f"{_shape_text(tuple(shape))}")


def checked_scalar(position: int, var: Var, arg) -> int | float | bool:
    """Scalar argument `arg` for parameter `var` (at `position`) as the kernel takes it, or a
    KernelArgumentError: a Python (or numpy) value of the parameter's kind, within its dtype
    (a float beyond a float type would arrive as an infinity: audit helpers 76, 78)."""
    def error(message: str) -> KernelArgumentError:
        return KernelArgumentError(f"argument {position + 1} '{var.name}': {message}")
    if is_bool(var.dtype):
        if isinstance(arg, bool | np.bool_):
            return bool(arg)
    elif is_int(var.dtype):
        if isinstance(arg, int | np.integer) and not isinstance(arg, bool | np.bool_):
            info = np.iinfo(var.dtype)
            if not info.min <= int(arg) <= info.max:
                raise error(f"{int(arg)} is out of range for {var.dtype}")
            return int(arg)
    elif is_float(var.dtype):
        if isinstance(arg, int | float | np.integer | np.floating) \
                and not isinstance(arg, bool):
            if _becomes_infinite(arg, var.dtype):
                raise error(f"{arg} is beyond {var.dtype} (at most "
                            f"{LARGEST_FINITE[var.dtype]:g} in magnitude)")
            return float(arg)
    kind = "a Python int" if is_int(var.dtype) else \
        "a Python bool" if is_bool(var.dtype) else "a Python float"
    raise error(f"expected {kind} ({var.dtype}), got {type(arg).__name__} {arg!r}")


def _evaluate(dim: Expr, values: dict[Var, int]) -> int | str:
    """The value of shape expression `dim` as the kernel computes it, or why it has none: a
    division by zero, or a value that leaves the dtype it is computed in (int32 index
    arithmetic is computed in int64 where it could wrap, lower/wide_integers.py; 8- and
    16-bit arithmetic wraps for real: audit helpers 76 and 77 saw an int8 `n * 2` of 200 run
    as -56, nothing written)."""
    if isinstance(dim, IntImm):
        return dim.value
    if isinstance(dim, Var):
        return values[dim]
    if isinstance(dim, Cast) and is_int(dim.dtype):
        value = _evaluate(dim.value, values)
        return value if isinstance(value, str) else _within(dim, value)
    if isinstance(dim, BinaryOp) and dim.op in _SHAPE_ARITHMETIC:
        a, b = _evaluate(dim.a, values), _evaluate(dim.b, values)
        for found in (a, b):
            if isinstance(found, str):
                return found
        if dim.op in ("floordiv", "floormod") and b == 0:
            return f"{dim.script()} divides by zero"
        return _within(dim, _SHAPE_ARITHMETIC[dim.op](a, b))
    result = simplify(substitute(dim, {v: IntImm(n, v.dtype) for v, n in values.items()}))
    return result.value if isinstance(result, IntImm) else f"{dim.script()} has no value"


_SHAPE_ARITHMETIC = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b,
                     "mul": lambda a, b: a * b, "floordiv": lambda a, b: a // b,
                     "floormod": lambda a, b: a % b, "min": min, "max": max}


def _within(dim: Expr, value: int) -> int | str:
    """`value`, or why the kernel computes another: it leaves `dim`'s dtype (int32 is
    computed in int64)."""
    dtype = "int64" if dim.dtype == "int32" else dim.dtype
    info = np.iinfo(dtype)
    if info.min <= value <= info.max:
        return value
    return f"{dim.script()} is {value}, beyond {dtype}, the type the kernel computes it in"


def unbound_dims(func: PrimFunc) -> list[Var]:
    """The symbolic dims of `func` that no parameter's shape has as a dimension of its own
    (`(16 * n,)` only): no argument gives their values."""
    bound = {dim for buffer in func.buffers for dim in buffer.shape if isinstance(dim, Var)}
    return [var for var in func.symbolic_vars if var not in bound]


def unbound_dim_message(func: PrimFunc, var: Var) -> str:
    """Why `var` (of `unbound_dims`) has no value, and how to give it one."""
    return (f"kernel '{func.name}': symbolic dim '{var.name}' is never a dimension of its own "
            f"in a parameter's shape, so no argument binds it: pass it as a parameter "
            f"(te.create_prim_func([..., {var.name}]), or `{var.name}: T.int32` in a script's "
            f"signature) or give a parameter a dimension of exactly {var.name}")


def largest_dim(dtype: str) -> int:
    """The largest value a symbolic dim of `dtype` takes at a call. The kernel takes the dim
    as its dtype: a larger size would wrap (audit helper-73: 40000 rows of an int16 dim ran
    as n = -25536, nothing written). An int64 dim is at most 2**40, the magnitude the
    compiler reads int64 arithmetic exactly for (`isl_expr.INT64_MAGNITUDE`); only an array
    with an empty dimension elsewhere can have a larger one (audit helper-171: an (n, 0)
    array with n = 2**50 stored to C[-8] through `n * 8192 // 2**60`)."""
    from sched.polyhedral.isl_expr import INT64_MAGNITUDE

    largest = int(np.iinfo(dtype).max)
    return INT64_MAGNITUDE if dtype == "int64" else largest


def beyond_dim(dtype: str) -> str:
    """What a dim past `largest_dim(dtype)` is, and how to fix the call, for messages."""
    if dtype == "int64":
        return ("past 2**40, the largest int64 size the compiler proves the kernel's "
                "arithmetic for (only an array with an empty dimension can be that long): skip "
                "the call when there is nothing to compute")
    return (f"beyond {dtype} (at most {largest_dim(dtype)}); declare the dim wider "
            f"(te.var(name, 'int64'), T.int64()) to run on such sizes")

"""The C entry point of a CPU kernel: every argument check of `sched.arguments`, in C.

`entry_source(binder, lowered)` is C text appended to the kernel's source: a function
`sched_call_<kernel>(state, args, scalars...)` that takes the address of the call's argument
tuple, checks it as `ArgumentBinder.bind` does (count; each array's type, ndim, dtype,
C-contiguity, alignment, writability when written; its shape, binding the symbolic dims from
the same dimensions and checking every other against the dims' and scalars' values; no two
arrays overlapping when one is written; and the Halide-style entry check of
`sched.polyhedral.in_bounds`, generated as a C condition by isl), and runs the kernel. It
returns 0 when the kernel ran, else the number of the check that failed (`Status`), without
running it: the caller then takes the checks in Python, which accept what C does not know
(a torch tensor, an ndarray subclass, an equal dtype that is a different object) or raise the
error naming the argument. Scalars are checked in Python (`CKernel`) and passed as C values.

How the objects are read: see `sched.c.object_layout`. `entry_source` returns None (and the
reason) for what it does not generate: a shape that is not built from +, -, *, //, %, min and
max, an entry condition isl cannot write.

Half-precision scalars are passed as their 16 bits (`scalar_bits`), to the entry point and to
`launcher_source`'s function: C passes a `_Float16` argument in a vector register, which ctypes
cannot do (a float passed for it arrived as garbage).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sched.arguments import (
    ArgumentBinder,
    largest_dim,
    numpy_dtype,
)
from sched.c.codegen import c_function_name
from sched.c.dtypes import STORAGE_TYPES
from sched.c.object_layout import (
    ALIGNED,
    C_CONTIGUOUS,
    CHECK_BOUNDS,
    DTYPES,
    FIELDS_OFFSET,
    ITEMS_OFFSET,
    NDARRAY_TYPE,
    SIZE_OFFSET,
    TUPLE_TYPE,
    TYPE_OFFSET,
    WRITEABLE,
)
from sched.entry_condition import entry_condition_c, entry_condition_function
from sched.ir.nodes import BinaryOp, Buffer, Expr, IntImm, PrimFunc, Var


class Status(enum.IntEnum):
    """What the entry point returns: 0 when the kernel ran, else the check that failed."""

    RAN = 0
    COUNT = 1        # not a tuple of the right length
    ARRAY = 2        # not an ndarray of the right ndim, dtype object and flags
    SHAPE = 3        # a dimension differs from its expected value, or a dim out of range
    OVERLAP = 4      # two arrays share memory and one is written
    BOUNDS = 5       # the entry condition: some access would be out of bounds


@dataclass(frozen=True)
class EntrySource:
    """The entry point's name and its C text (appended to the kernel's source)."""

    name: str
    text: str


_SHAPE_OPS = ("add", "sub", "mul")     # (checked with gcc's __builtin_*_overflow)
# the 8- and 16-bit integer types, in which a kernel computes for real (wrapping)
NARROW_RANGES = {"int8": (-2 ** 7, 2 ** 7 - 1), "int16": (-2 ** 15, 2 ** 15 - 1),
                 "uint8": (0, 2 ** 8 - 1), "uint16": (0, 2 ** 16 - 1)}
_INT_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}

# a float16 from its bits (shared by the entry point and the launcher)
_HALF = """#ifndef SCHED_ENTRY_HALF
#define SCHED_ENTRY_HALF
static inline _Float16 sched_entry_half(uint16_t bits) {
    _Float16 value;
    memcpy(&value, &bits, sizeof value);
    return value;
}
#endif"""

_PRELUDE = f"""
// ---- the entry point: the call's arguments checked in C (sched.c.entry) ----
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <string.h>
{_HALF.replace("{", "{{").replace("}", "}}")}

typedef struct {{                      // numpy's PyArrayObject_fields, after the object header
    char *data;
    int nd;
    const intptr_t *dims;
    const intptr_t *strides;
    const void *base;
    const void *descr;
    int flags;
}} sched_entry_ndarray;

static inline const void *sched_entry_type(const int64_t *state, const void *object) {{
    return *(const void *const *)((const char *)object + state[{TYPE_OFFSET}]);
}}

static inline const sched_entry_ndarray *sched_entry_fields(const int64_t *state,
                                                            const void *object) {{
    return (const sched_entry_ndarray *)((const char *)object + state[{FIELDS_OFFSET}]);
}}

// the fields of `object` when it is an ndarray (exactly) with this ndim, dtype and flags
static inline const sched_entry_ndarray *sched_entry_array(const int64_t *state,
        const void *object, int ndim, int buffer, int flags) {{
    if (sched_entry_type(state, object) != (const void *)(intptr_t)state[{NDARRAY_TYPE}])
        return NULL;
    const sched_entry_ndarray *array = sched_entry_fields(state, object);
    if (array->nd != ndim || array->descr != (const void *)(intptr_t)state[{DTYPES} + buffer]
            || (array->flags & flags) != flags)
        return NULL;
    return array;
}}

static inline bool sched_entry_floordiv(int64_t a, int64_t b, int64_t *q) {{
    if (b == 0 || (a == INT64_MIN && b == -1)) return false;
    *q = a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
    return true;
}}

static inline bool sched_entry_floormod(int64_t a, int64_t b, int64_t *r) {{
    int64_t q;
    if (!sched_entry_floordiv(a, b, &q)) return false;
    *r = a - q * b;
    return true;
}}

static inline bool sched_entry_overlap(const char *p, int64_t p_bytes, const char *q,
                                       int64_t q_bytes) {{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)q;
    return a < b + (uintptr_t)q_bytes && b < a + (uintptr_t)p_bytes;
}}

// what the entry points read, for sched.c.object_layout.verify_layout
void sched_probe_layout(const int64_t *state, const void *object, int64_t *out) {{
    for (int k = 0; k < 16; ++k) out[k] = 0;
    out[0] = (int64_t)(intptr_t)sched_entry_type(state, object);
    if (out[0] == state[{TUPLE_TYPE}]) {{
        const char *tuple = (const char *)object;
        out[1] = *(const intptr_t *)(tuple + state[{SIZE_OFFSET}]);
        const void *const *items = (const void *const *)(tuple + state[{ITEMS_OFFSET}]);
        for (int k = 0; k < out[1] && k < 2; ++k) out[2 + k] = (int64_t)(intptr_t)items[k];
    }} else if (out[0] == state[{NDARRAY_TYPE}]) {{
        const sched_entry_ndarray *array = sched_entry_fields(state, object);
        out[1] = (int64_t)(intptr_t)array->data;
        out[2] = array->nd;
        out[3] = array->flags;
        out[4] = (int64_t)(intptr_t)array->descr;
        for (int d = 0; d < array->nd && d < 4; ++d) {{
            out[5 + d] = array->dims[d];
            out[9 + d] = array->strides[d];
        }}
    }}
}}
"""


def scalar_bits(value, dtype: str):
    """A scalar argument as the entry point and the launcher take it: a float16 or bfloat16
    as its 16 bits (nearest even, as numpy and sched's C conversions round), else itself."""
    import numpy as np

    if dtype == "float16":
        return int(np.float16(value).view(np.uint16))
    if dtype == "bfloat16":
        bits = int(np.float32(value).view(np.uint32))
        if bits & 0x7FFFFFFF > 0x7F800000:                     # NaN: stays a (quiet) NaN
            return (bits >> 16) | 0x40
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF
    return value


def _scalar_type(dtype: str) -> str:
    """The C type a scalar is passed as (16-bit floats: their bits)."""
    return "uint16_t" if dtype in ("float16", "bfloat16") else STORAGE_TYPES[dtype]


def _scalar_value(name: str, dtype: str) -> str:
    """The kernel's argument for scalar `name` passed as `_scalar_type(dtype)`."""
    return f"sched_entry_half({name})" if dtype == "float16" else name


def launcher_source(func: PrimFunc, lowered: PrimFunc) -> tuple[str, str] | None:
    """For a kernel with a float16 scalar parameter: the name and C text of a function that
    takes it as its bits (see the module doc) and calls the kernel; else None."""
    scalars = [p for p in func.params if isinstance(p, Var)]
    if not any(v.dtype == "float16" for v in scalars):
        return None
    name = f"sched_launch_{c_function_name(lowered)}"
    params = [f"void *sched_p{k}" for k in range(len(func.buffers))]
    params += [f"{_scalar_type(v.dtype)} sched_s{k}" for k, v in enumerate(scalars)]
    params += [f"{STORAGE_TYPES[v.dtype]} sched_d{k}" for k, v in enumerate(func.symbolic_vars)]
    args = [f"sched_p{k}" for k in range(len(func.buffers))]
    args += [_scalar_value(f"sched_s{k}", v.dtype) for k, v in enumerate(scalars)]
    args += [f"sched_d{k}" for k in range(len(func.symbolic_vars))]
    return name, "\n".join([
        "", "#include <stdint.h>", "#include <string.h>", _HALF,
        f"void {name}({', '.join(params)}) {{",
        f"    {c_function_name(lowered)}({', '.join(args)});", "}", ""])




class Unsupported(Exception):
    """What the entry point does not handle (the kernel then checks its calls in Python)."""


def entry_name(lowered: PrimFunc) -> str:
    return f"sched_call_{c_function_name(lowered)}"


def entry_source(binder: ArgumentBinder, lowered: PrimFunc) -> tuple[EntrySource | None, str]:
    """The entry point of the kernel `lowered` whose calls `binder` checks, or None and why."""
    try:
        return EntrySource(entry_name(lowered), _Generator(binder, lowered).text()), ""
    except Unsupported as reason:
        return None, str(reason)


class _Generator:
    def __init__(self, binder: ArgumentBinder, lowered: PrimFunc) -> None:
        self.binder = binder
        self.func: PrimFunc = binder.func
        self.lowered = lowered
        self.lines: list[str] = []
        self.helpers: list[str] = []    # C functions the entry point calls
        self.temporaries = 0
        self.scalars = [p for p in self.func.params if isinstance(p, Var)]
        self.buffers = list(self.func.buffers)
        # the C expression of each variable's value: a symbolic dim or a scalar parameter
        self.values: dict[Var, str] = {}
        for k, var in enumerate(self.scalars):
            self.values[var] = f"sched_s{k}"
        for k, var in enumerate(self.func.symbolic_vars):
            if var not in binder.dim_sources:
                raise Unsupported(f"symbolic dim '{var.name}' is bound by no argument")
            self.values[var] = f"sched_d{k}"

    def line(self, text: str) -> None:
        self.lines.append("    " + text)

    def text(self) -> str:
        condition = self.bounds_condition()
        params = ["const int64_t *sched_state", "const void *sched_args"]
        params += [f"{_scalar_type(v.dtype)} sched_s{k}" for k, v in enumerate(self.scalars)]
        self.check_tuple()
        self.check_arrays()
        self.bind_dims()
        self.check_shapes()
        self.check_overlaps()
        if condition is not None:
            self.line(f"if (sched_state[{CHECK_BOUNDS}] && {condition}) return {Status.BOUNDS};")
        self.run_kernel()
        head = f"int {entry_name(self.lowered)}({', '.join(params)}) {{"
        return "\n".join([_PRELUDE, *self.helpers, head, *self.lines, "    return 0;", "}", ""])

    # -- the checks, in the order of ArgumentBinder.bind --------------------------------------

    def check_tuple(self) -> None:
        count = len(self.func.params)
        self.line(f"if (sched_entry_type(sched_state, sched_args) != (const void *)(intptr_t)"
                  f"sched_state[{TUPLE_TYPE}]) return {Status.COUNT};")
        self.line(f"if (*(const intptr_t *)((const char *)sched_args + "
                  f"sched_state[{SIZE_OFFSET}]) != {count}) return {Status.COUNT};")
        self.line(f"const void *const *sched_items = (const void *const *)"
                  f"((const char *)sched_args + sched_state[{ITEMS_OFFSET}]);")

    def check_arrays(self) -> None:
        for k, buffer in enumerate(self.buffers):
            position = self.func.params.index(buffer)
            flags = C_CONTIGUOUS | ALIGNED
            if buffer.name in self.binder.written:
                flags |= WRITEABLE
            self.line(f"const sched_entry_ndarray *sched_a{k} = sched_entry_array(sched_state, "
                      f"sched_items[{position}], {buffer.ndim}, {k}, {flags:#x});")
            self.line(f"if (!sched_a{k}) return {Status.ARRAY};")

    def bind_dims(self) -> None:
        for k, var in enumerate(self.func.symbolic_vars):
            buffer_index, dim = self.binder.dim_sources[var]
            self.line(f"const int64_t sched_d{k} = sched_a{buffer_index}->dims[{dim}];")
            if var.dtype not in _INT_RANGES:
                raise Unsupported(f"a symbolic dim of dtype {var.dtype}")
            # the bounds were proven for sizes from 1 to largest_dim (ArgumentBinder.bind_dims)
            self.line(f"if (sched_d{k} < 1 || sched_d{k} > {largest_dim(var.dtype)}LL) "
                      f"return {Status.SHAPE};")

    def check_shapes(self) -> None:
        bound_from = {self.binder.dim_sources[v] for v in self.func.symbolic_vars}
        for k, buffer in enumerate(self.buffers):
            for d, dim in enumerate(buffer.shape):
                if (k, d) in bound_from:
                    continue            # the dimension a symbolic dim was bound from
                # (a scalar parameter in a shape is checked like any other expression)
                expected = self.expression(dim)
                self.line(f"if (sched_a{k}->dims[{d}] != {expected}) return {Status.SHAPE};")

    def expression(self, dim: Expr) -> str:
        """The C text of shape expression `dim` (int64); a temporary for // and %, and for
        8- and 16-bit arithmetic, checked to stay in its dtype: the kernel computes it there
        and it wraps (an int8 `n * 2` of 200 ran as -56; int32 arithmetic is computed in
        int64 where it could wrap, lower/wide_integers.py)."""
        text = self._expression(dim)
        if isinstance(dim, BinaryOp) and dim.dtype in NARROW_RANGES:
            low, high = NARROW_RANGES[dim.dtype]
            self.temporaries += 1
            name = f"sched_t{self.temporaries}"
            self.line(f"const int64_t {name} = {text};")
            self.line(f"if ({name} < {low}LL || {name} > {high}LL) return {Status.SHAPE};")
            return name
        return text

    def _expression(self, dim: Expr) -> str:
        if isinstance(dim, IntImm):
            return f"INT64_C({dim.value})"
        if isinstance(dim, Var):
            if dim not in self.values:
                raise Unsupported(f"shape variable '{dim.name}'")
            return f"(int64_t){self.values[dim]}"
        if isinstance(dim, BinaryOp) and dim.op in _SHAPE_OPS:
            # int64 overflow is undefined in C: checked (helper-78: `n * 4` at n = 2**62
            # wrapped to 0 and a kernel wrote past an empty array)
            a, b = self.expression(dim.a), self.expression(dim.b)
            self.temporaries += 1
            name = f"sched_t{self.temporaries}"
            self.line(f"int64_t {name};")
            self.line(f"if (__builtin_{dim.op}_overflow({a}, {b}, &{name})) "
                      f"return {Status.SHAPE};")
            return name
        if isinstance(dim, BinaryOp) and dim.op in ("min", "max"):
            a, b = self.expression(dim.a), self.expression(dim.b)
            compare = "<" if dim.op == "min" else ">"
            return f"({a} {compare} {b} ? {a} : {b})"
        if isinstance(dim, BinaryOp) and dim.op in ("floordiv", "floormod"):
            a, b = self.expression(dim.a), self.expression(dim.b)
            self.temporaries += 1
            name = f"sched_t{self.temporaries}"
            self.line(f"int64_t {name};")
            self.line(f"if (!sched_entry_{dim.op}({a}, {b}, &{name})) return {Status.SHAPE};")
            return name
        raise Unsupported(f"shape expression {dim}")

    def check_overlaps(self) -> None:
        """ArgumentBinder.check_no_overlap: a pair of arrays, one written, sharing memory."""
        sizes = []
        for k, buffer in enumerate(self.buffers):
            itemsize = numpy_dtype(buffer.dtype).itemsize
            dims = " * ".join(f"(int64_t)sched_a{k}->dims[{d}]" for d in range(buffer.ndim))
            sizes.append(f"{dims} * {itemsize}" if dims else f"{itemsize}")
        for k, buffer in enumerate(self.buffers):
            for k2 in range(k + 1, len(self.buffers)):
                if self.written(buffer) or self.written(self.buffers[k2]):
                    self.line(f"if (sched_entry_overlap(sched_a{k}->data, {sizes[k]}, "
                              f"sched_a{k2}->data, {sizes[k2]})) return {Status.OVERLAP};")

    def written(self, buffer: Buffer) -> bool:
        return buffer.storage_name in self.binder.written

    def bounds_condition(self) -> str | None:
        """A C call that is true when some access would be out of bounds (see in_bounds)."""
        if self.binder.entry_check is None:
            return None
        try:
            found = entry_condition_c(self.func)
        except ValueError as error:
            raise Unsupported(str(error)) from None
        if found is None:
            return None
        variables, condition = found
        if any(v not in self.values or v.dtype not in _INT_RANGES for v in variables):
            raise Unsupported("the entry condition's parameters")
        self.helpers.append(entry_condition_function("sched_entry_out_of_bounds", "bool",
                                                     condition, len(variables)))
        return (f"sched_entry_out_of_bounds("
                f"{', '.join(f'(int64_t){self.values[v]}' for v in variables)})")

    def run_kernel(self) -> None:
        args = [f"(void *)sched_a{k}->data" for k in range(len(self.buffers))]
        args += [_scalar_value(f"sched_s{k}", v.dtype) for k, v in enumerate(self.scalars)]
        args += [f"({STORAGE_TYPES[v.dtype]})sched_d{k}"
                 for k, v in enumerate(self.func.symbolic_vars)]
        self.line(f"{c_function_name(self.lowered)}({', '.join(args)});")

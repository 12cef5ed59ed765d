"""The C interface of an exported kernel, shared by the C and the CUDA export.

An exported kernel `NAME` is one C function that checks its arguments and runs the kernel:

    int NAME(const float *A, const float *B, float *C, int64_t n);          // C target
    int NAME(CUdeviceptr A, CUdeviceptr B, CUdeviceptr C, int64_t n, CUstream stream);  // CUDA
    const char *NAME_error_message(void);     // what the last failure on this thread was
    const char *NAME_status_string(int status);

The arguments are the function's parameters in their order (a pointer per buffer, a value per
scalar parameter), then each symbolic dim (`PrimFunc.symbolic_vars` order) as an `int64_t`.
It returns `SCHED_OK` (0) when the kernel ran (or was launched), else a `sched_status` code
without running it; `NAME_error_message()` then says which argument was wrong and why. The
checks are those a sched kernel call makes on the values the C caller passes: each dim at least
1 and in its dtype's range, shapes that depend on scalar parameters non-negative, every buffer
pointer non-NULL and aligned to its element (16 bytes where the CUDA kernel moves it as
float4), no written buffer overlapping another argument (the kernel's pointers are
`restrict`), and the condition under which every access is in bounds
(`sched.entry_condition.entry_condition_c`, written by isl) unless the kernel was built with
`check_bounds="off"`. The shapes themselves are the caller's promise: a C pointer carries none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sched.arguments import (
    ArgumentBinder,
    beyond_dim,
    largest_dim,
    numpy_dtype,
)
from sched.c.entry import NARROW_RANGES
from sched.c.names import RESERVED, function_identifier, sanitize
from sched.entry_condition import (
    entry_condition_c,
    entry_condition_function,
    magnitude_checked_scalars,
)
from sched.ir.nodes import BinaryOp, Buffer, Cast, Expr, IntImm, PrimFunc, Var

STATUSES = (   # (name, value, what it means): the common enum of every export
    ("SCHED_OK", 0, "success"),
    ("SCHED_ERROR_NULL_POINTER", 1, "a buffer argument is NULL"),
    ("SCHED_ERROR_MISALIGNED", 2, "a buffer argument is not aligned as the kernel needs"),
    ("SCHED_ERROR_BAD_DIM", 3, "a symbolic dim is below 1 or past its largest (its dtype's; "
     "2**40 for int64)"),
    ("SCHED_ERROR_BAD_SHAPE", 4, "a buffer's shape computed from the scalars is invalid"),
    ("SCHED_ERROR_OVERLAP", 5, "a buffer the kernel writes overlaps another argument"),
    ("SCHED_ERROR_OUT_OF_BOUNDS", 6, "with these sizes some access would be out of bounds, or "
     "an int64 scalar is past the 2**40 its arithmetic is proven for"),
    ("SCHED_ERROR_LAUNCH", 7, "the grid is beyond CUDA's limits"),
    ("SCHED_ERROR_CUDA", 8, "a CUDA driver call failed"),
)
_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64,
             "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Argument:
    """One argument of the exported function: its C name, C type, and the IR it stands for."""

    name: str
    c_type: str
    ir: Buffer | Var
    kind: str           # "buffer", "scalar" or "dim"
    written: bool = False

    def describe(self) -> str:
        """`A: float32[n, 64], read` as the header's comment shows it."""
        if self.kind == "buffer":
            shape = ", ".join(dim.script() for dim in self.ir.shape)
            return f"{self.name}: {self.ir.dtype}[{shape}], {'written' if self.written else 'read'}"
        if self.kind == "dim":
            return f"{self.name}: symbolic dim '{self.ir.name}' ({self.ir.dtype} in the kernel)"
        return f"{self.name}: scalar parameter '{self.ir.name}' ({self.ir.dtype})"


def export_name(func: PrimFunc, name: str | None) -> str:
    """The C name of the exported function: `name`, or the PrimFunc's; a ValueError when `name`
    is not a C identifier sched may export."""
    if name is None:
        return function_identifier(func.name)
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name) or name in RESERVED \
            or name.lower().startswith("sched_"):
        raise ValueError(f"export: name {name!r} is not a C identifier sched can export: "
                         f"use letters, digits and '_', starting with a letter, not a C keyword "
                         f"or libc name, not starting with 'sched_' (any case)")
    return name


def arguments(func: PrimFunc, pointer_type, scalar_type, name: str) -> list[Argument]:
    """The exported function's arguments (see the module doc); `pointer_type(buffer, written)`
    and `scalar_type(var)` give their C types; `name` is the exported function's, whose
    file-scope helpers (`NAME_kernel`, `NAME_fail`...) no argument may shadow."""
    written = ArgumentBinder(func, device="cpu").written
    taken: set[str] = set()

    def unique(ir_name: str) -> str:
        base = sanitize(ir_name)
        if base == name or base.startswith(f"{name}_"):      # the export's own names
            base = f"arg_{base}"
        text, k = base, 0
        while text in taken or text == "stream":
            k += 1
            text = f"{base}_{k}"
        taken.add(text)
        return text

    found = []
    for param in func.params:
        if isinstance(param, Buffer):
            is_written = param.storage_name in written
            found.append(Argument(unique(param.name), pointer_type(param, is_written), param,
                                  "buffer", is_written))
        else:
            found.append(Argument(unique(param.name), scalar_type(param), param, "scalar"))
    for var in func.symbolic_vars:
        found.append(Argument(unique(var.name), "int64_t", var, "dim"))
    return found


def status_enum() -> str:
    """The `sched_status` enum every export's header declares (once per program)."""
    lines = ["#ifndef SCHED_STATUS_DEFINED", "#define SCHED_STATUS_DEFINED",
             "typedef enum sched_status {"]
    lines += [f"    {name} = {value},   /* {meaning} */" for name, value, meaning in STATUSES]
    return "\n".join([*lines, "} sched_status;", "#endif"])


def messages(name: str) -> str:
    """C: the per-thread message of the last failure, `NAME_fail` to set it, and the two
    message functions the header declares."""
    cases = "\n".join(f'    case {status}: return "{status}: {meaning}";'
                      for status, _, meaning in STATUSES)
    return f"""static _Thread_local char {name}_message[512];

static int {name}_fail(int status, const char *format, ...) {{
    va_list values;
    va_start(values, format);
    vsnprintf({name}_message, sizeof {name}_message, format, values);
    va_end(values);
    return status;
}}

const char *{name}_error_message(void) {{
    return {name}_message;
}}

const char *{name}_status_string(int status) {{
    switch (status) {{
{cases}
    default: return "unknown sched_status";
    }}
}}
"""


def c_text(text: str) -> str:
    """`text` inside a C string literal that is a printf format."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("\n", " ")


class CheckWriter:
    """The C lines that check an exported call's arguments (see the module doc), in order.

    `values` maps each symbolic dim and integer scalar to its int64 C expression;
    `alignments` maps a buffer's name to the bytes its pointer must be aligned to (default: its
    element size) and `alignment_reasons` what needs it (said in the message);
    `pointer_value(argument)` is the pointer as an unsigned integer.
    """

    def __init__(self, func: PrimFunc, name: str, args: list[Argument], *, check_bounds: bool,
                 alignments: dict[str, int], pointer_value,
                 alignment_reasons: dict[str, str] | None = None) -> None:
        self.func, self.name, self.args = func, name, args
        self.lines: list[str] = []
        self.helpers: list[str] = []
        self.values: dict[Var, str] = {}
        for arg in args:
            if arg.kind == "dim" or (arg.kind == "scalar" and arg.ir.dtype in _INT_BITS):
                self.values[arg.ir] = f"(int64_t){arg.name}"
        self.check_bounds = check_bounds
        self.alignments = alignments
        self.alignment_reasons = alignment_reasons or {}
        self.pointer_value = pointer_value
        self.temporaries = 0

    def fail(self, condition: str, status: str, message: str, *values: str) -> None:
        extra = "".join(f", {v}" for v in values)
        self.lines.append(f"    if ({condition}) return {self.name}_fail({status}, "
                          f"\"{self.name}: {message}\"{extra});")

    def write(self) -> list[str]:
        """Every check, as lines of the exported function's body."""
        for arg in self.args:
            if arg.kind == "dim":
                self.check_dim(arg)
        sizes = {arg.name: self.byte_size(arg) for arg in self.args if arg.kind == "buffer"}
        for arg in self.args:
            if arg.kind == "buffer":
                self.check_pointer(arg, sizes[arg.name])
        self.check_overlaps(sizes)
        if self.check_bounds:
            self.check_in_bounds()
        return self.lines

    def check_dim(self, arg: Argument) -> None:
        self.fail(f"{arg.name} < 1", "SCHED_ERROR_BAD_DIM",
                  f"dim {arg.name} = %lld: sizes must be at least 1", f"(long long){arg.name}")
        bits = _INT_BITS.get(arg.ir.dtype)
        if bits is None:
            raise ValueError(f"export: symbolic dim '{arg.ir.name}' has dtype {arg.ir.dtype}: "
                             f"an exported kernel takes integer dims; declare it an integer")
        largest = largest_dim(arg.ir.dtype)
        if largest < 2 ** 63 - 1:
            self.fail(f"{arg.name} > INT64_C({largest})", "SCHED_ERROR_BAD_DIM",
                      f"dim {arg.name} = %lld is {c_text(beyond_dim(arg.ir.dtype))}",
                      f"(long long){arg.name}")

    def byte_size(self, arg: Argument) -> str:
        """The C expression of the buffer's size in bytes (its shape checked non-negative, the
        product checked not to overflow int64: undefined in C, and the pointer and overlap
        checks use it; audit helper-88)."""
        parts = []
        for d, dim in enumerate(arg.ir.shape):
            text = self.expression(dim)
            # a constant, a dim (checked), an unsigned scalar narrower than int64: never < 0
            # (and gcc's -Wtype-limits says so)
            never_negative = isinstance(dim, IntImm) or isinstance(dim, Var) and (
                any(a.kind == "dim" and a.ir == dim for a in self.args)
                or dim.dtype in ("uint8", "uint16", "uint32"))
            if not never_negative:
                self.fail(f"{text} < 0", "SCHED_ERROR_BAD_SHAPE",
                          f"{arg.name}'s dimension {d} ({c_text(dim.script())}) is %lld with "
                          f"these scalars", f"(long long)({text})")
            parts.append(text)
        return self.bytes_of(f"buffer {arg.name}", parts, numpy_dtype(arg.ir.dtype).itemsize)

    def bytes_of(self, what: str, extents: list[str], itemsize: int) -> str:
        """The C expression of `itemsize` times the non-negative int64 `extents`, each
        product checked not to overflow int64 (refused as SCHED_ERROR_BAD_SHAPE)."""
        size = f"INT64_C({itemsize})"
        for part in extents:
            if part.startswith("INT64_C(") and size.startswith("INT64_C("):
                size = f"INT64_C({int(part[8:-1]) * int(size[8:-1])})"   # constants
                continue
            self.temporaries += 1
            temporary = f"sched_t{self.temporaries}"
            self.lines.append(f"    int64_t {temporary};")
            self.fail(f"__builtin_mul_overflow({size}, {part}, &{temporary})",
                      "SCHED_ERROR_BAD_SHAPE", f"{what} of these sizes holds more bytes than "
                      f"int64 counts")
            size = temporary
        return size

    def check_pointer(self, arg: Argument, size: str) -> None:
        pointer = self.pointer_value(arg)
        self.fail(f"{pointer} == 0 && {size} > 0", "SCHED_ERROR_NULL_POINTER",
                  f"buffer {arg.name} is NULL")
        alignment = self.alignments.get(arg.ir.name, numpy_dtype(arg.ir.dtype).itemsize)
        if alignment > 1:
            why = self.alignment_reasons.get(arg.ir.name)
            because = f": the kernel {c_text(why)}" if why else ""
            self.fail(f"{pointer} % {alignment}u != 0", "SCHED_ERROR_MISALIGNED",
                      f"buffer {arg.name} is not {alignment}-byte aligned{because}")

    def check_overlaps(self, sizes: dict[str, str]) -> None:
        buffers = [arg for arg in self.args if arg.kind == "buffer"]
        for i, a in enumerate(buffers):
            for b in buffers[i + 1:]:
                if not (a.written or b.written):
                    continue
                pa, pb = self.pointer_value(a), self.pointer_value(b)
                self.fail(f"{pa} < {pb} + (uint64_t)({sizes[b.name]}) && "
                          f"{pb} < {pa} + (uint64_t)({sizes[a.name]})", "SCHED_ERROR_OVERLAP",
                          f"buffers {a.name} and {b.name} overlap, and the kernel writes "
                          f"{a.name if a.written else b.name}")

    def check_in_bounds(self) -> None:
        try:
            found = entry_condition_c(self.func)
        except ValueError as error:
            raise ValueError(f"export: cannot write the in-bounds condition of "
                             f"'{self.func.name}' as C ({error}); build it with "
                             f"check_bounds='off' to export it without that check") from None
        if found is None:
            return
        variables, condition = found
        missing = [v.name for v in variables if v not in self.values]
        if missing:
            raise ValueError(f"export: the in-bounds condition uses {', '.join(missing)}, "
                             f"which is neither a symbolic dim nor an integer scalar")
        self.helpers.append(entry_condition_function(f"{self.name}_out_of_bounds", "int",
                                                     condition, len(variables)))
        call = ", ".join(self.values[v] for v in variables)
        shown = ", ".join(f"{c_text(v.name)} = %lld" for v in variables)
        wrapping = magnitude_checked_scalars(self.func)
        magnitude = (f" (or {', '.join(wrapping)} is past the 2**40 in magnitude its "
                     f"arithmetic is proven for)") if wrapping else ""
        self.fail(f"{self.name}_out_of_bounds({call})", "SCHED_ERROR_OUT_OF_BOUNDS",
                  f"with {shown} some access of the kernel would be out of bounds"
                  f"{c_text(magnitude)}",
                  *(f"(long long){self.values[v]}" for v in variables))

    def expression(self, expr: Expr) -> str:
        """The int64 C text of integer expression `expr` over dims and scalars (a temporary
        and a check for // and % by a non-constant, and for 8- and 16-bit arithmetic, which
        the kernel computes in its dtype: it must not leave it, as sched.c.entry checks)."""
        text = self._expression(expr)
        if isinstance(expr, BinaryOp) and expr.dtype in NARROW_RANGES:
            self.temporaries += 1
            temporary = f"sched_t{self.temporaries}"
            self.lines.append(f"    const int64_t {temporary} = {text};")
            low, high = NARROW_RANGES[expr.dtype]
            self.fail(f"{temporary} < INT64_C({low}) || {temporary} > INT64_C({high})",
                      "SCHED_ERROR_BAD_SHAPE", f"{c_text(expr.script())} = %lld leaves "
                      f"{expr.dtype}, the type the kernel computes it in",
                      f"(long long){temporary}")
            return temporary
        return text

    def _expression(self, expr: Expr) -> str:
        if isinstance(expr, IntImm):
            return f"INT64_C({expr.value})"
        if isinstance(expr, Var):
            if expr not in self.values:
                raise ValueError(f"export: '{expr.name}' in a shape or the grid is neither a "
                                 f"symbolic dim nor an integer scalar parameter")
            return self.values[expr]
        if isinstance(expr, Cast):
            return self.expression(expr.value)
        if not isinstance(expr, BinaryOp):
            raise ValueError(f"export: cannot write {expr.script()} as C (expected + - * // % "
                             f"min max of dims and integer scalars)")
        a, b = self.expression(expr.a), self.expression(expr.b)
        if expr.op in ("add", "sub", "mul"):      # int64 overflow: undefined in C, refused
            self.temporaries += 1
            temporary = f"sched_t{self.temporaries}"
            self.lines.append(f"    int64_t {temporary};")
            self.fail(f"__builtin_{expr.op}_overflow({a}, {b}, &{temporary})",
                      "SCHED_ERROR_BAD_SHAPE", f"{c_text(expr.script())} overflows int64 with "
                      f"these scalars")
            return temporary
        if expr.op in ("min", "max"):
            return f"({a} {'<' if expr.op == 'min' else '>'} {b} ? {a} : {b})"
        if expr.op in ("floordiv", "floormod"):
            if not isinstance(expr.b, IntImm) or expr.b.value == -1:
                # INT64_MIN / -1 traps as / 0 does (audit helper-73: SIGFPE in the check)
                self.fail(f"{b} == 0 || ({a} == INT64_MIN && {b} == -1)",
                          "SCHED_ERROR_BAD_SHAPE", f"{c_text(expr.script())} divides by zero "
                          f"or overflows int64 with these scalars")
            self.temporaries += 1
            temporary = f"sched_t{self.temporaries}"
            quotient = f"({a} / {b} - (({a} % {b} != 0) && (({a} < 0) != ({b} < 0))))"
            value = quotient if expr.op == "floordiv" else f"({a} - {quotient} * {b})"
            self.lines.append(f"    const int64_t {temporary} = {value};")
            return temporary
        raise ValueError(f"export: cannot write {expr.script()} as C (operator {expr.op})")


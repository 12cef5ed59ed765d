"""C code generation for the CPU target: lowered loop IR -> one readable C11 translation unit.

The unit holds one exported function

    void <name>(const float* restrict A, float* restrict B, int32_t n)

taking the buffers in parameter order (`const` when the kernel never stores to them), then the
scalar parameters, then the symbolic dims in `PrimFunc.symbolic_vars` order. Loop kinds map to
pragmas: parallel -> `#pragma omp parallel for`, vectorized -> explicit SIMD code of the host's
vector width with GCC vector types where vectorize.py allows it (vector_codegen.py, with the math
functions of vector_math.py, relaxed ones with `fast_math`), else `#pragma omp simd`,
unrolled -> `#pragma GCC unroll N`;
thread-bound loops run as serial loops. Integer `//` and `%` are floor
division and modulo: plain `/` and `%` where both operands are provably non-negative (loop
variables from a non-negative start, symbolic dims, constants), else a static inline helper.
"""

from __future__ import annotations

from dataclasses import replace

from sched.c import dtypes
from sched.c.bit_intrinsics import BitCallEmitter
from sched.c.int_ranges import IntRanges, unsigned_c_type
from sched.c.names import CNames, function_identifier, sanitize
from sched.c.vector_codegen import VectorCode, unroll_pragma
from sched.c.vectorize import plan_vector_loop
from sched.errors import BuildError
from sched.ir.builders import widen
from sched.ir.dtype import bits, is_float, is_int, max_value
from sched.ir.extern import ADDRESS_OF, addressed_storages, written_storages
from sched.ir.intervals import interval
from sched.ir.nodes import (
    BIT_FUNCTIONS,
    EXTERN_CALLS,
    INT_FUNCTIONS,
    REINTERPRET,
    Allocate,
    Assume,
    BinaryOp,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    Evaluate,
    Expr,
    FloatImm,
    For,
    IfThenElse,
    IntImm,
    LetStmt,
    Not,
    PrimFunc,
    Select,
    SeqStmt,
    Stmt,
    Var,
    While,
)
from sched.ir.simplify import simplify

STACK_LIMIT_BYTES = 64 * 1024   # larger or symbolic allocations go to the heap
LARGEST_ALLOCATION = 1 << 62     # bytes; a constant size past it is refused

# C operator precedence (higher binds tighter); ops of equal precedence associate left
_PRECEDENCE = {"mul": 13, "div": 13, "floordiv": 13, "floormod": 13, "add": 12, "sub": 12,
               "lt": 10, "le": 10, "gt": 10, "ge": 10, "eq": 9, "ne": 9, "and": 5, "or": 4}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "/", "floormod": "%",
           "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=",
           "and": "&&", "or": "||"}
_ATOM, _UNARY, _SELECT = 16, 15, 3


def c_name(name: str) -> str:
    """A valid C identifier for an IR name, clashing with nothing reserved (not necessarily
    unique in a function: the emitters use `CNames`, which is)."""
    return sanitize(name)


def c_function_name(func: PrimFunc) -> str:
    """The name of the function `generate_c(func)` exports."""
    return function_identifier(func.name)


def generate_c(lowered: PrimFunc, *, fast_math: bool = False, extern_c: str = "",
               static: bool = False) -> str:
    """The C source of `lowered` (the output of `sched.lower.lower`); `fast_math`: see
    `sched.build`; `extern_c`: C code for the functions opaque calls call (placed after the
    standard headers, before the kernel); `static`: the kernel function is local to its file
    (an export's, called by the checked entry point beside it).

    Requires: no blocks, one index per access (flattened), every non-parameter buffer
    allocated by an `Allocate`.
    """
    emitter = _CEmitter(lowered, fast_math=fast_math)
    emitter.extern_c = extern_c
    emitter.linkage = "static " if static else ""
    return emitter.emit()


class _CEmitter(BitCallEmitter):
    RESTRICT = "restrict"                   # how the language spells a non-aliasing pointer
    STORAGE_TYPES = dtypes.STORAGE_TYPES    # element and parameter types
    TAKEN: tuple[str, ...] = ()             # identifiers the emitter itself declares
    linkage = ""                            # "static " for an export's kernel (generate_c)

    def __init__(self, func: PrimFunc, *, fast_math: bool = False) -> None:
        self.func = func
        self.fast_math = fast_math
        self.names = CNames(func, self.TAKEN)
        self.lines: list[str] = []
        self.depth = 1
        self.helpers: dict[str, None] = {}
        # the ranges of the integer variables in scope: which arithmetic may overflow
        self.ranges = IntRanges({v: (0, max_value(v.dtype)) for v in func.symbolic_vars})
        self.vector_helpers: dict[str, str] = {}   # vector typedefs and functions, by name
        self.in_simd = False                          # inside a `#pragma omp simd` loop
        self.declared: set[str] = set()               # let variables and arrays declared

    # -- the translation unit ------------------------------------------------------------------

    def emit(self) -> str:
        self.stmt(self.func.body)
        body = self.lines
        header = [f"// Generated by sched from PrimFunc '{self.func.name}'.",
                  "#include <math.h>", "#include <stdbool.h>", "#include <stdint.h>",
                  "#include <stdlib.h>", ""]
        if getattr(self, "extern_c", ""):
            header += ["// extern code given to sched.build (extern_c=)", self.extern_c, ""]
        helpers = [dtypes.helper_source(name) + "\n" for name in self.helpers]
        vector = self.vector_helpers.values()
        typedefs = [text for text in vector if text.startswith("typedef")]
        if typedefs:
            helpers = ["\n".join(typedefs) + "\n", *helpers,
                       *(text for text in vector if not text.startswith("typedef"))]
        signature = f"{self.linkage}void {c_function_name(self.func)}(" \
            f"{', '.join(self.parameters())})"
        return "\n".join([*header, *helpers, signature + " {", *body, "}", ""])

    def parameters(self) -> list[str]:
        # C's const: what the kernel stores to, and every buffer an opaque call gets an address
        # of (a callee may take a non-const pointer for an input it only reads)
        stored = written_storages(self.func.body) | addressed_storages(self.func.body)
        params = []
        for buffer in self.func.buffers:
            const = "" if buffer.name in stored else "const "
            params.append(f"{const}{self.STORAGE_TYPES[buffer.dtype]}* {self.RESTRICT} "
                          f"{self.name(buffer.name)}")
        scalars = [p for p in self.func.params if isinstance(p, Var)]
        for var in (*scalars, *self.func.symbolic_vars):
            params.append(f"{self.STORAGE_TYPES[var.dtype]} {self.var_name(var.name)}")
        return params

    def name(self, ir_name: str) -> str:
        """The C identifier of the IR name of a buffer or storage."""
        return self.names[ir_name]

    def var_name(self, ir_name: str) -> str:
        """The C identifier of the IR name of a variable."""
        return self.names.var(ir_name)

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def helper(self, name: str) -> str:
        self.helpers[name] = None
        return name

    # -- statements ----------------------------------------------------------------------------

    def stmt(self, node: Stmt) -> None:
        getattr(self, "stmt_" + type(node).__name__)(node)

    def block(self, node: Stmt) -> None:
        self.depth += 1
        self.stmt(node)
        self.depth -= 1

    def stmt_SeqStmt(self, node: SeqStmt) -> None:
        for stmt in node.stmts:
            self.stmt(stmt)

    def stmt_BufferStore(self, node: BufferStore) -> None:
        (index,) = node.indices
        value = self.expr(node.value)
        if node.buffer.dtype == "float16":
            value = f"(_Float16)({value})"
        elif node.buffer.dtype == "bfloat16":
            value = f"{self.helper('sched_f32_to_bf16')}({value})"
        self.line(f"{self.name(node.buffer.storage_name)}[{self.expr(index)}] = {value};")

    def stmt_For(self, node: For) -> None:
        var, ctype = self.var_name(node.loop_var.name), dtypes.storage_type(node.loop_var.dtype)
        plan = plan_vector_loop(node) if node.kind == "vectorized" and not self.in_simd \
            else None
        if plan is not None:
            self.vector_loop(node, plan)
            return
        in_simd = self.in_simd
        if node.kind in ("parallel", "vectorized") and in_simd:
            # OpenMP allows no construct inside a simd loop: the inner loop runs serially
            self.line(f"// {node.kind} inside a vectorized loop: serial")
        elif node.kind == "parallel":
            self.line("#pragma omp parallel for")
        elif node.kind == "vectorized":
            self.line("#pragma omp simd")
            self.in_simd = True
        elif node.kind == "unrolled" and isinstance(node.extent, IntImm):
            self.line(unroll_pragma(node.extent.value))
        elif node.kind == "thread_binding":
            self.line(f"// {node.thread_tag}: a serial loop on the CPU")
        end = node.extent if _is_zero(node.min) else simplify(node.min + node.extent)
        self.line(f"for ({ctype} {var} = {self.expr(node.min)}; {var} < {self.bound(end)}; "
                  f"++{var}) {{")
        self.with_var(node.loop_var, self.ranges.loop(node.min, node.extent),
                      lambda: self.block(node.body))
        self.in_simd = in_simd
        self.line("}")

    def vector_loop(self, node: For, plan) -> None:
        """A vectorized loop as SIMD code (vectorize.py, vector_codegen.py): `plan.lanes`
        elements per iteration over the first `plan.vector_extent` iterations, then the rest
        as a scalar loop."""
        var = self.var_name(node.loop_var.name)
        ctype = dtypes.storage_type(node.loop_var.dtype)
        start = node.min.value
        end = start + plan.vector_extent
        self.line(f"for ({ctype} {var} = {start}; {var} < {end}; {var} += {plan.lanes}) {{"
                  f"  // vectorized: {plan.lanes} lanes")
        code = VectorCode(self, node.loop_var, plan.lanes, self.fast_math)
        self.depth += 1
        self.with_var(node.loop_var, (start, end - 1), lambda: code.stmt(node.body))
        self.depth -= 1
        self.line("}")
        rest = node.extent.value - plan.vector_extent
        if rest:
            self.line(f"// the last {rest} iterations, scalar")
            self.stmt(replace(node, min=IntImm(end, node.min.dtype),
                              extent=IntImm(rest, node.extent.dtype), kind="serial"))

    def stmt_IfThenElse(self, node: IfThenElse) -> None:
        self.line(f"if ({self.expr(node.condition)}) {{")
        self.block(node.then_body)
        if node.else_body is not None:
            self.line("} else {")
            self.block(node.else_body)
        self.line("}")

    def stmt_While(self, node: While) -> None:
        self.line(f"while ({self.expr(node.condition)}) {{")
        self.block(node.body)
        self.line("}")

    def stmt_Assume(self, node: Assume) -> None:
        self.line(f"// T.assume({node.condition.script()}): a hint, no code")

    def declaring(self, name: str, emit) -> None:
        """Run `emit`, which declares the C identifier `name` and emits what uses it: in a C
        block of its own where the function declared it before (a pipeline's prologue and
        epilogue copy a body with its `let`s and allocations into one scope)."""
        if name not in self.declared:
            self.declared.add(name)
            emit()
            return
        self.line("{")
        self.depth += 1
        emit()
        self.depth -= 1
        self.line("}")

    def stmt_LetStmt(self, node: LetStmt) -> None:
        def emit() -> None:
            ctype = dtypes.compute_type(node.var.dtype)
            self.line(f"const {ctype} {self.var_name(node.var.name)} = {self.expr(node.value)};")
            self.with_var(node.var, self.ranges.value(node.value), lambda: self.stmt(node.body))

        self.declaring(self.var_name(node.var.name), emit)

    def stmt_Allocate(self, node: Allocate) -> None:
        self.declaring(self.name(node.buffer.name), lambda: self._allocate(node))

    def _allocate(self, node: Allocate) -> None:
        buffer: Buffer = node.buffer
        (size,) = buffer.shape
        ctype, name = dtypes.storage_type(buffer.dtype), self.name(buffer.name)
        element_bytes = 1 if buffer.dtype in ("bool", "int8", "uint8") else \
            int("".join(c for c in buffer.dtype if c.isdigit())) // 8
        constant = interval(widen(size), {}) if is_int(size.dtype) else None
        if constant is not None and constant[0][1] * element_bytes > LARGEST_ALLOCATION:
            # (its byte count wrapped modulo 2**64: 0 bytes, or 64 for 2**64 + 16 elements,
            # written far past: audit helper-137)
            raise BuildError(f"build: buffer {buffer.name!r} holds {constant[0][1]} elements "
                             f"of {buffer.dtype}, more bytes than a 64-bit address space: "
                             f"give it a smaller shape")
        if isinstance(size, IntImm) and size.value * element_bytes <= STACK_LIMIT_BYTES:
            self.line(f"{ctype} {name}[{size.value}];  // scope {buffer.scope}")
            self.stmt(node.body)
            return
        # the size in int64 arithmetic: a declared `n * 2**30 - 2**30 + 1` computed in int32
        # wrapped to one element at n = 5 (audit helper-129)
        count = str(size.value) if isinstance(size, IntImm) else self.checked_count(
            widen(size), name)
        allocate = self.helper("sched_malloc_checked")
        self.line(f"{ctype}* {name} = ({ctype}*){allocate}({count}, sizeof({ctype}), "
                  f"\"{name}\");  // scope {buffer.scope}")
        self.stmt(node.body)
        self.line(f"free({name});")

    def checked_count(self, size: Expr, name: str) -> str:
        """The C text of element count `size` (int64), each product of its factors checked
        not to pass int64: the count of a `(m, m)` buffer at m = 2**32 wrapped to 0, and the
        kernel wrote through NULL (audit helper-159)."""
        factors = _factors(size)
        if len(factors) == 1:
            return self.expr(size)
        multiply = self.helper("sched_mulcount_checked")
        count = self.expr(factors[0])
        for factor in factors[1:]:
            count = f"{multiply}({count}, {self.expr(factor)}, \"{name}\")"
        return count

    # -- expressions ---------------------------------------------------------------------------

    def expr(self, node: Expr) -> str:
        return self.expr_prec(node)[0]

    def bound(self, end: Expr) -> str:
        """`end` as the right operand of `<` in a loop condition."""
        return self.operand(end, _PRECEDENCE["lt"] + 1)

    def operand(self, node: Expr, min_prec: int) -> str:
        text, prec = self.expr_prec(node)
        return text if prec >= min_prec else f"({text})"

    def expr_prec(self, node: Expr) -> tuple[str, int]:
        """C text of `node` (of type `dtypes.compute_type(node.dtype)`), and its precedence."""
        return getattr(self, "expr_" + type(node).__name__)(node)

    def expr_Var(self, node: Var):
        if node.dtype == "bfloat16" and node in self.func.params:
            # a bfloat16 scalar parameter arrives as its bits (uint16_t), as a stored element
            return f"{self.helper('sched_bf16_to_f32')}({self.var_name(node.name)})", _ATOM
        return self.var_name(node.name), _ATOM

    def expr_IntImm(self, node: IntImm):
        text = dtypes.int_literal(node.value, node.dtype)
        return text, _UNARY if text.startswith("-") else _ATOM

    def expr_FloatImm(self, node: FloatImm):
        text = dtypes.float_literal(node.value, node.dtype)
        return text, _UNARY if text.startswith(("-", "(")) else _ATOM

    def expr_BufferLoad(self, node: BufferLoad):
        (index,) = node.indices
        text = f"{self.name(node.buffer.storage_name)}[{self.expr(index)}]"
        if node.buffer.dtype == "float16":
            return f"(float){text}", _UNARY
        if node.buffer.dtype == "bfloat16":
            return f"{self.helper('sched_bf16_to_f32')}({text})", _ATOM
        if node.buffer.dtype == "bool":
            # its byte, nonzero as True, as numpy and torch read a bool array: a C bool
            # holding 2 (a view of uint8 data) is undefined, and gcc read it as 2 (audit
            # helper-125)
            storage = self.name(node.buffer.storage_name)
            return f"(((const uint8_t*){storage})[{self.expr(index)}] != 0)", _ATOM
        return text, _ATOM

    def expr_Cast(self, node: Cast):
        value = self.operand(node.value, _UNARY)
        if node.dtype == "float16":
            return f"(float)(_Float16){value}", _UNARY
        if node.dtype == "bfloat16":
            to_bf16 = self.helper("sched_f32_to_bf16")
            return f"{self.helper('sched_bf16_to_f32')}({to_bf16}({value}))", _ATOM
        if node.dtype == "bool":
            return f"({value} != 0)", _ATOM
        if is_int(node.dtype) and is_float(node.value.dtype):     # C: undefined beyond range
            helper = f"sched_saturate_{dtypes.short_name(node.value.dtype)}_" \
                     f"{dtypes.short_name(node.dtype)}"
            return self.call(helper, [self.expr(node.value)], node.dtype)
        return f"({dtypes.storage_type(node.dtype)}){value}", _UNARY

    def expr_Not(self, node: Not):
        return f"!{self.operand(node.a, _UNARY)}", _UNARY

    def expr_Select(self, node: Select):
        condition = self.operand(node.condition, _SELECT + 1)
        return (f"{condition} ? {self.operand(node.true_value, _SELECT + 1)} : "
                f"{self.operand(node.false_value, _SELECT)}", _SELECT)

    def stmt_Evaluate(self, node: Evaluate) -> None:
        self.line(f"{self.expr(node.value)};")

    def expr_Call(self, node: Call):
        if node.op == ADDRESS_OF:          # &A[i]: the element itself, never a conversion
            (load,) = node.args
            (index,) = load.indices
            return f"(&{self.name(load.buffer.storage_name)}[{self.expr(index)}])", _ATOM
        if node.op in EXTERN_CALLS:        # the user's function, by its own name
            name, *args = node.args
            return f"{name.value}({', '.join(self.expr(a) for a in args)})", _ATOM
        args = [self.expr(arg) for arg in node.args]
        if node.op in BIT_FUNCTIONS or node.op == REINTERPRET:
            return self.expr_bit_call(node, args), _ATOM
        if node.op in _SHIFTS and not self.count_in_range(node.args[1], node.dtype):
            # a count C leaves undefined: numpy's result (dtypes.shift_source)
            helper = f"sched_{_SHIFTS[node.op]}_{dtypes.shift_type(node.dtype)}"
            return self.call(helper, args, node.dtype)
        if node.op in INT_FUNCTIONS:
            return _int_call(node.op, args, node.dtype), _ATOM
        if node.op == "abs" and not is_float(node.dtype):
            return self.call(f"sched_abs_{dtypes.short_name(node.dtype)}", args, node.dtype)
        if node.op == "sigmoid":     # the vector code's formula, no overflow (dtypes.py)
            wide = dtypes.compute_type(node.dtype) == "double"
            return self.call(f"sched_sigmoid_{'f64' if wide else 'f32'}", args, node.dtype)
        return dtypes.math_call(node.op, args, node.dtype), _ATOM

    def call(self, helper: str, args: list[str], dtype: str):
        text = f"{self.helper(helper)}({', '.join(args)})"
        if dtypes.is_narrow_int(dtype):
            return f"({dtypes.storage_type(dtype)}){text}", _UNARY
        return text, _ATOM

    def expr_BinaryOp(self, node: BinaryOp):
        op, dtype = node.op, node.a.dtype
        short = dtypes.short_name(dtype)
        if op in ("min", "max"):
            return self.call(f"sched_{op}_{short}", [self.expr(node.a), self.expr(node.b)], dtype)
        if op in ("floordiv", "floormod") and is_float(dtype):
            return self.call(f"sched_{op}_{short}", [self.expr(node.a), self.expr(node.b)],
                             dtype)
        if op in ("div", "floordiv", "floormod") and is_int(dtype) and _needs_helper(
                node, self.is_nonneg(node.a) and self.is_nonneg(node.b)):
            return self.call(f"sched_{op}_{dtypes.division_type(dtype)}",
                             [self.expr(node.a), self.expr(node.b)], dtype)
        if is_int(dtype) and self.ranges.may_overflow(node):
            return self.wrapping(node)
        prec = _PRECEDENCE[op]
        text = f"{self.int_operand(node.a, node.b, prec)} {_SYMBOL[op]} " \
               f"{self.int_operand(node.b, node.a, prec + 1)}"
        if dtypes.is_narrow_int(dtype) and op in ("add", "sub", "mul", "floordiv", "floormod"):
            return f"({dtypes.storage_type(dtype)})({text})", _UNARY
        return text, prec

    def wrapping(self, node: BinaryOp):
        """Integer `node` (`+`, `-`, `*`) where its values may leave the C type: computed
        unsigned, which wraps (int_ranges.py), and converted back to its type."""
        unsigned = unsigned_c_type(node.a.dtype)
        text = f"({unsigned}){self.operand(node.a, _UNARY)} {_SYMBOL[node.op]} " \
               f"({unsigned}){self.operand(node.b, _UNARY)}"
        return f"({dtypes.storage_type(node.dtype)})({text})", _UNARY

    def int_operand(self, node: Expr, other: Expr, min_prec: int) -> str:
        """An operand of a binary operator: an int64 constant that fits in 32 bits beside a
        non-constant int64 operand prints plainly (`(int64_t)i * 4`, not `INT64_C(4)`): C's
        usual conversions make it int64."""
        if isinstance(node, IntImm) and node.dtype == "int64" and other.dtype == "int64" \
                and not isinstance(other, IntImm) and -2 ** 31 < node.value < 2 ** 31:
            text = str(node.value)
            return text if node.value >= 0 or min_prec <= _UNARY else f"({text})"
        return self.operand(node, min_prec)

    # -- facts ---------------------------------------------------------------------------------

    def with_var(self, var: Var, values: tuple[int, int] | None, emit_scope) -> None:
        """Emits the scope of `var` knowing the range of its values (None: any of its dtype;
        names may be reused by sibling loops, so the fact ends with the scope)."""
        before = self.ranges.bind(var, values)
        emit_scope()
        self.ranges.restore(var, before)

    def count_in_range(self, count: Expr, dtype: str) -> bool:
        """Whether shift count `count` of a `dtype` value is provably one C defines: from 0
        to the width C shifts `dtype` in, less 1 (32 bits for the narrower types, which C
        promotes to int)."""
        values = self.ranges.value(count)
        return values is not None and 0 <= values[0] and values[1] < max(32, bits(dtype))

    def is_nonneg(self, node: Expr) -> bool:
        """Whether integer `node` is provably >= 0."""
        return self.ranges.is_nonneg(node)


_SHIFTS = {"shift_left": "shl", "shift_right": "shr"}
_BITWISE = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "shift_right": ">>"}


def _needs_helper(node: BinaryOp, both_nonneg: bool) -> bool:
    """Whether an integer division or modulo is written with its helper (dtypes.helper_source:
    x // 0 is 0 and INT_MIN // -1 wraps, as in numpy, where C's operators trap) rather than
    C's operator: unless its divisor is a constant other than 0 and (signed) -1, and, for a
    signed floor division or modulo, both operands are non-negative (C truncates)."""
    divisor = node.b
    unsigned = node.dtype.startswith("uint")
    safe = isinstance(divisor, IntImm) and divisor.value != 0 and \
        (unsigned or divisor.value != -1)
    floors = node.op != "div" and not unsigned and not both_nonneg
    return floors or not safe


def _int_call(op: str, args: list[str], dtype: str) -> str:
    """An integer intrinsic in C, converted back to `dtype` (C computes narrow ints as int).
    A left shift is done unsigned (shifting a negative signed value is undefined in C); a
    right shift of a signed value is arithmetic, as gcc and nvcc define it."""
    ctype = dtypes.storage_type(dtype)
    if op == "bitwise_not":
        text = f"~({args[0]})"
    elif op == "shift_left":
        unsigned = dtypes.storage_type(dtype if dtype.startswith("u") else "u" + dtype)
        text = f"({unsigned})({args[0]}) << ({args[1]})"
    else:
        text = f"({args[0]}) {_BITWISE[op]} ({args[1]})"
    return f"(({ctype})({text}))"


def _is_zero(node: Expr) -> bool:
    return isinstance(node, IntImm) and node.value == 0


def _factors(e: Expr) -> list[Expr]:
    """The factors of a product `e` (itself where it is none)."""
    if isinstance(e, BinaryOp) and e.op == "mul":
        return _factors(e.a) + _factors(e.b)
    return [e]

"""C text of IR expressions, for the CPU target's emitter (codegen.py): operators with C's
precedence, numpy's integer semantics where C's differ (floor division and modulo by helpers,
wrapping arithmetic computed unsigned, shift counts C leaves undefined), saturating float to
integer casts, float16 and bfloat16 through float, math calls.

`CExprEmitter` is the part of `_CEmitter` that writes expressions; it reads the emitter's
names (`name`, `var_name`, `helper`), the function and the value ranges it tracks.
"""

from __future__ import annotations

from sched.c import dtypes
from sched.c.bit_intrinsics import BitCallEmitter
from sched.c.int_ranges import unsigned_c_type
from sched.ir.dtype import bits, is_float, is_int
from sched.ir.extern import ADDRESS_OF
from sched.ir.nodes import (
    BIT_FUNCTIONS,
    EXTERN_CALLS,
    INT_FUNCTIONS,
    REINTERPRET,
    BinaryOp,
    BufferLoad,
    Call,
    Cast,
    Expr,
    FloatImm,
    IntImm,
    Not,
    Select,
    Var,
)

# C operator precedence (higher binds tighter); ops of equal precedence associate left
_PRECEDENCE = {"mul": 13, "div": 13, "floordiv": 13, "floormod": 13, "add": 12, "sub": 12,
               "lt": 10, "le": 10, "gt": 10, "ge": 10, "eq": 9, "ne": 9, "and": 5, "or": 4}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "/", "floormod": "%",
           "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=",
           "and": "&&", "or": "||"}
_ATOM, _UNARY, _SELECT = 16, 15, 3


class CExprEmitter(BitCallEmitter):
    """Expressions as C text (see the module doc)."""

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
            if _from_integer(node.value):
                # gcc 12 (-O2, AVX512-FP16) folded (float)(_Float16) of an integer's value
                # whose bits fit float16's mantissa, dropping the overflow to inf (int8 127
                # * 1024 gave 130048: audit helper-167); a helper it cannot see through
                return f"{self.helper('sched_tof16_f64')}({self.expr(node.value)})", _ATOM
            return f"(float)(_Float16){value}", _UNARY
        if node.dtype == "bfloat16":
            to_bf16 = self.helper("sched_f32_to_bf16")
            return f"{self.helper('sched_bf16_to_f32')}({to_bf16}({value}))", _ATOM
        if node.dtype == "bool":
            return f"({value} != 0)", _ATOM
        if node.value.dtype == "bool":
            # a select, not a conversion: gcc 12.2's loop vectorizer (-O2 and -O3, any x86
            # ISA) turns `(int32_t)(a | b)` of two comparisons into the vector mask, -1 for
            # true, where it is a gathered load's index (`A[(int32_t)(a | b) + 2]` read A[1]:
            # a bool max in an index on an AVX2 host); the select's form is vectorized right
            one, zero = (f"({dtypes.storage_type(node.dtype)}){v}" for v in (1, 0))
            return f"{value} ? {one} : {zero}", _SELECT
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


def _from_integer(value: Expr) -> bool:
    """Whether `value` is an integer, or a float conversion of one."""
    while isinstance(value, Cast) and is_float(value.dtype):
        value = value.value
    return is_int(value.dtype)

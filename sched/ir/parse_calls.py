"""The `T.<name>(...)` calls the expression parser reads by rule (`CALLS`: T.max, T.Cast,
T.min_value, T.if_then_else, T.shift_left...), as a mixin of `parse_expr.ExprParser` like the
other call families (parse_bits, parse_extern, parse_intrin, parse_vector); and `unify`, the
dtype matching of two operands that those rules and the operators share.
"""

from __future__ import annotations

import ast

from sched.ir.builders import cast_to, literal_dtype, promoted
from sched.ir.dtype import LARGEST_FINITE, is_float, is_int, max_value, min_value
from sched.ir.nodes import Call, Cast, Expr, Select, binary, const, convert
from sched.ir.parse_bits import BIT_CALLS

Value = Expr | int | float | bool


def unify(a: Value, b: Value) -> tuple[Expr, Expr]:
    """Two operands as expressions of one dtype where TVM's matching gives one: a literal
    takes the dtype it takes beside the other operand (builders.literal_dtype: a float beside
    an integer is float32, an int beside a bool int32), then both are promoted
    (builders.promoted); operands no promotion matches are left for the caller to refuse."""
    if not isinstance(a, Expr):
        a = convert(a, literal_dtype(a, b.dtype) if isinstance(b, Expr) else None)
    b = convert(b, literal_dtype(b, a.dtype))
    dtype = promoted(a.dtype, b.dtype) if a.dtype != b.dtype else a.dtype
    return (cast_to(a, dtype), cast_to(b, dtype)) if dtype is not None else (a, b)


class TCallParser:
    """The rules of `CALLS` (`_call_<rule>(node, name, dtype)`), for ExprParser, which gives
    `value`, `expr`, `dtype` and `error`."""

    def _operands(self, node: ast.Call, dtype: str | None) -> list[Expr]:
        """The arguments of a call, of one dtype: `dtype` when given, else the first
        expression's (a literal takes it)."""
        values = [self.value(arg) for arg in node.args]
        typed = dtype or next((v.dtype for v in values if isinstance(v, Expr)), None)
        return [convert(v, typed) for v in values]

    def _call_binary(self, node: ast.Call, name: str, dtype: str | None) -> Value:
        if dtype is not None:
            return binary(name, *self._operands(node, dtype))
        return binary(name, *unify(self.value(node.args[0]), self.value(node.args[1])))

    def _call_cast(self, node: ast.Call, name: str, dtype: str | None) -> Value:
        """`T.Cast("float16", x)` (TVM's node) or `T.cast(x, "float16")` (TVM's function)."""
        type_node, value_node = node.args if name == "Cast" else node.args[::-1]
        return Cast(self.dtype(type_node), self.expr(value_node))

    def _call_math(self, node: ast.Call, name: str, dtype: str | None) -> Value:
        args = self._operands(node, dtype)
        return Call(name, tuple(args), args[0].dtype)

    def _call_integer(self, node: ast.Call, name: str, dtype: str | None) -> Value:
        """`T.bitwise_and(a, b)`, `T.shift_left(a, b)`, `T.bitwise_not(a)` on integers."""
        args = self._operands(node, dtype)
        if not is_int(args[0].dtype) or any(a.dtype != args[0].dtype for a in args):
            raise self.error(node, f"T.{name} takes integer operands of one dtype, got "
                                   f"{', '.join(a.dtype for a in args)}: cast them first")
        return Call(name, tuple(args), args[0].dtype)

    def _call_shuffle(self, node: ast.Call, name: str, dtype: str | None) -> Value:
        """`T.shfl_down_sync(value, offset, lanes, width)`, which the CUDA lowering of a
        cross-thread reduction makes (GPU_INTRINSICS): the value's dtype, int32 offset, lane
        count and segment width."""
        value = self.value(node.args[0])
        if not isinstance(value, Expr):
            raise self.error(node, f"T.{name}: the value must be an expression")
        offset, lanes, width = (convert(self.value(a), "int32") for a in node.args[1:])
        return Call(name, (value, offset, lanes, width), value.dtype)

    def _call_limit(self, node: ast.Call, name: str, dtype: str | None) -> Value:
        """`T.min_value("float32")`: the lowest finite value of the dtype (as TVM's), and
        `T.max_value` the highest; `T.infinity("float32")` (float dtypes only, as TVM's)."""
        target = self.dtype(node.args[0])
        if name == "infinity":
            if not is_float(target):
                raise self.error(node, f"T.infinity({target!r}): a float dtype has an infinity, "
                                       f"{target} has none (T.max_value gives its largest)")
            return const(float("inf"), target)
        if is_float(target):
            limit = LARGEST_FINITE[target]
            return const(-limit if name == "min_value" else limit, target)
        return const(min_value(target) if name == "min_value" else max_value(target), target)

    def _call_select(self, node: ast.Call, name: str, dtype: str | None) -> Value:
        condition, a, b = node.args
        test = self.expr(condition)
        if test.dtype != "bool":      # refused here, with the line, not at build (helper-115)
            raise self.error(node, f"the condition of T.{name} must be a bool, got "
                                   f"{test.dtype} '{ast.unparse(condition)}': compare it "
                                   f"('{ast.unparse(condition)} != 0')")
        if dtype is not None:
            return Select(test, self.expr(a, dtype), self.expr(b, dtype))
        return Select(test, *unify(self.value(a), self.value(b)))

    def _call_identity(self, node: ast.Call, name: str, dtype: str | None) -> Value:
        """`T.likely(c)` is `c` (a hint); `T.meta_var(x)` is `x` (TVM's marker of a Python
        value spliced into the script)."""
        return self.value(node.args[0])


# T.<name>: (rule, number of arguments); MATH_FUNCTIONS and the dtypes are handled apart
CALLS = {
    "min": ("binary", 2), "max": ("binary", 2),                    # T.max(a, b)
    "floordiv": ("binary", 2), "floormod": ("binary", 2),          # T.floordiv(a, b) -> a // b
    "Cast": ("cast", 2), "cast": ("cast", 2),       # T.Cast("float16", x), T.cast(x, "float16")
    "min_value": ("limit", 1), "max_value": ("limit", 1),          # T.min_value("float32")
    "infinity": ("limit", 1),                                      # T.infinity("float32")
    "bitwise_and": ("integer", 2), "bitwise_or": ("integer", 2),   # T.bitwise_and(a, b)
    "bitwise_xor": ("integer", 2), "bitwise_not": ("integer", 1),
    "shift_left": ("integer", 2), "shift_right": ("integer", 2),   # T.shift_left(a, b) a << b
    "if_then_else": ("select", 3), "Select": ("select", 3),       # T.if_then_else(c, a, b)
    "likely": ("identity", 1),                                     # T.likely(c) -> c
    "meta_var": ("identity", 1),                                   # T.meta_var(x) -> x
    "shfl_down_sync": ("shuffle", 4),     # T.shfl_down_sync(value, offset, lanes, width)
    **BIT_CALLS,                          # T.reinterpret, T.popcount... (parse_bits.py)
}

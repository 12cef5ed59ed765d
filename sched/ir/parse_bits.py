"""TVM's bit intrinsics in a script: `T.reinterpret("int32", x)`, `T.popcount(x)`, `T.clz(x)`,
`T.ldexp(x, e)` and `T.q_multiply_shift(x, y, q, s)` (sched/ir/bit_intrinsics.py defines them;
a q_multiply_shift is read as the int64 arithmetic it stands for, and printed so).
"""

from __future__ import annotations

import ast

from sched.ir import bit_intrinsics
from sched.ir.dtype import bits
from sched.ir.nodes import Expr

# T.<name>: (rule, number of arguments), merged into parse_expr's table of calls
BIT_CALLS = {
    "reinterpret": ("reinterpret", 2),       # T.reinterpret("float32", x)
    "popcount": ("bits", 1), "clz": ("bits", 1),
    "ldexp": ("ldexp", 2),                   # T.ldexp(x, e): x * 2**e
    "q_multiply_shift": ("q_multiply_shift", 4),
}


def _literal_dtype(value, target: str) -> str:
    """The dtype a literal reinterpreted as `target` is read in: the int of target's width
    (`T.reinterpret("float32", 1065353216)` is 1.0), or its float for a float literal."""
    width = bits(target) if target != "bool" else 8
    kind = "float" if isinstance(value, float) and width in (16, 32, 64) else "int"
    return f"{kind}{width}"


class BitCallParser:
    """The calls of BIT_CALLS; `self` is an `ExprParser`."""

    def _call_reinterpret(self, node: ast.Call, name: str, dtype: str | None) -> Expr:
        target = self.dtype(node.args[0])
        value = self.value(node.args[1])
        if not isinstance(value, Expr):     # a literal: the int (or float) of target's width
            value = self.expr(node.args[1], _literal_dtype(value, target))
        return self._built(node, lambda: bit_intrinsics.reinterpret(target, value))

    def _call_bits(self, node: ast.Call, name: str, dtype: str | None) -> Expr:
        operand = self.expr(node.args[0], dtype)
        build = bit_intrinsics.popcount if name == "popcount" else bit_intrinsics.clz
        return self._built(node, lambda: build(operand))

    def _call_ldexp(self, node: ast.Call, name: str, dtype: str | None) -> Expr:
        x = self.expr(node.args[0], dtype or "float32")
        exponent = self.expr(node.args[1], "int32")
        return self._built(node, lambda: bit_intrinsics.ldexp(x, exponent))

    def _call_q_multiply_shift(self, node: ast.Call, name: str, dtype: str | None) -> Expr:
        operands = [self.expr(arg, "int32") for arg in node.args]
        return self._built(node, lambda: bit_intrinsics.q_multiply_shift(*operands))

    def _built(self, node: ast.Call, build) -> Expr:
        """`build()`, its TypeError (a wrong dtype) as the script's error at `node`."""
        try:
            return build()
        except TypeError as error:
            raise self.error(node, str(error)) from None

"""`T.call_intrin(dtype, "tir.exp", x)` and `T.call_pure_intrin(...)`, as TVM's lowering
prints intrinsics: read as the call sched knows under that name (`T.exp(x)`, printed so), with
the dtype checked as `dtype=` is. An intrinsic sched does not know is refused naming it.
"""

from __future__ import annotations

import ast

from sched.ir.nodes import BIT_FUNCTIONS, INT_FUNCTIONS, MATH_FUNCTIONS

INTRIN_CALLS = ("call_intrin", "call_pure_intrin")
# TVM's op name (without "tir.") -> the T.<name> sched reads
KNOWN_INTRINSICS = {
    **{name: name for name in MATH_FUNCTIONS + INT_FUNCTIONS + BIT_FUNCTIONS},
    "q_multiply_shift": "q_multiply_shift",
    "fabs": "abs", "if_then_else": "if_then_else", "likely": "likely",
}


class IntrinCallParser:
    """`T.call_intrin`; `self` is an `ExprParser`."""

    def _intrin_call(self, node: ast.Call, name: str):
        if len(node.args) < 2 or node.keywords or not all(
                isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args[:2]):
            raise self.error(node, f"T.{name} takes (dtype, \"op name\", arguments...)")
        op = node.args[1].value
        known = KNOWN_INTRINSICS.get(op.removeprefix("tir."))
        if known is None:
            raise self.error(node, f"T.{name}: unknown intrinsic '{op}': sched knows "
                                   f"{', '.join(sorted(KNOWN_INTRINSICS))} (with or without "
                                   f"'tir.')")
        call = ast.Call(ast.Attribute(ast.Name("T", ast.Load()), known, ast.Load()),
                        node.args[2:], [ast.keyword("dtype", node.args[0])])
        return self.value(ast.copy_location(call, node))

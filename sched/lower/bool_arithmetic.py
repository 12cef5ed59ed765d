"""Arithmetic on bools, computed on their int32 values and converted back.

The IR keeps the dtype of `a + b` for two bool operands (as TVM's type matching does), and the
interpreter computes it on the values 0 and 1, a nonzero result being True: `True + True` is
True, `False - True` is True, `True // False` is False (`x // 0` is 0). C promotes bools to int
and would store the int, and a bool divisor of 0 is a C division by zero (audit helper-103:
C computed 2 where the interpreter had True, and `B // B2` divided by zero). This pass writes
each such operation on int32 operands and casts the result back to bool, so every target
computes what the interpreter does:

    T.Cast("int32", B[i] + B2[i])   ->   T.Cast("int32", T.Cast("bool", T.Cast("int32", B[i])
                                                                  + T.Cast("int32", B2[i])))
"""

from __future__ import annotations

import dataclasses

from sched.ir.functor import IRMutator
from sched.ir.nodes import BinaryOp, Cast, Expr, PrimFunc

# the operations on bools that compute on their values (comparisons, and/or, min and max keep
# bools as they are)
COUNTING_OPS = ("add", "sub", "mul", "div", "floordiv", "floormod")


class _BoolArithmetic(IRMutator):
    def visit_BinaryOp(self, node: BinaryOp) -> Expr:
        node = self.visit_children(node)
        if node.dtype != "bool" or node.op not in COUNTING_OPS:
            return node
        return Cast("bool", BinaryOp(node.op, Cast("int32", node.a), Cast("int32", node.b)))


def lower_bool_arithmetic(func: PrimFunc) -> PrimFunc:
    """`func` with arithmetic on bools computed in int32 (module docstring)."""
    body = _BoolArithmetic().visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)

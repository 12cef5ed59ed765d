"""`==` and `!=` on expressions, as TVM's: comparisons that are also structural equality.

In a compute definition `i == j`, `i % 2 == 0` and `A[i] != B[i]` are comparisons (IR nodes),
as TVM's `PrimExpr.__eq__` makes them: `te.all(i >= 0, i == j)`, `A[i, j] * (i == j)` and
TOPI's argmax tie-break `te.all(lv == rv, li < ri)` need them. Python's `==` on the node
dataclasses used to compare them structurally and return a bool, which then became the
constant `False` silently (wrong numbers).

Everywhere else sched compares nodes structurally (`if a == b:`, dict keys, `assert`): the
comparison node's truth value is that structural equality (`BinaryOp.__bool__` for "eq" and
"ne"), so such code keeps working. Comparisons with a Python number (`expr == 0`) build the
node too; its truth value is False (a node is never a number). Two expressions of different
dtypes are never structurally equal: their `==` stays the bool False (no node is built, so no
promotion can make the operands equal), and `equal(a, b)` writes that comparison.

`structural_equal(a, b)` is the equality the node dataclasses define, computed without
building comparison nodes.
"""

from __future__ import annotations

import dataclasses
import math

_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.compare)
    return names


def structural_equal(a, b) -> bool:
    """Whether two IR nodes (or values inside them) are equal field by field, as the node
    dataclasses' own equality says."""
    from sched.ir.nodes import Node

    if a is b:
        return True
    if isinstance(a, Node):
        if type(a) is not type(b):
            return False
        return all(structural_equal(getattr(a, name), getattr(b, name))
                   for name in _field_names(type(a)))
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and \
            all(structural_equal(x, y) for x, y in zip(a, b))
    if isinstance(b, Node):
        return False
    if isinstance(a, float) and isinstance(b, float):
        # a float constant: NaN equals NaN (it round-trips through the printer and the
        # parser), 0.0 is not -0.0 (they print and compute differently: the interpreter's
        # cache ran one function's -0.0 as the other's 0.0; helper-85)
        if a != a:
            return b != b
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


def install_comparisons(classes: tuple[type, ...]) -> None:
    """`==` / `!=` on the expression classes `classes` (module doc), and the truth value of
    BinaryOp comparisons "eq" and "ne"."""
    from sched.ir.nodes import BinaryOp, Expr, binary

    def operand(other):
        if isinstance(other, Expr):
            return other
        if isinstance(other, int | float) and not isinstance(other, bool):
            return other
        if hasattr(other, "as_expr"):              # a DSL object standing for an expression
            return other.as_expr()
        return None

    def compare(op: str, a, other):
        b = operand(other)
        if b is None:
            return NotImplemented
        if isinstance(b, Expr) and b.dtype != a.dtype:
            return (op == "ne")                    # never structurally equal (module doc)
        return binary(op, a, b) if not isinstance(b, Expr) else BinaryOp(op, a, b)

    def __eq__(self, other):
        return compare("eq", self, other)

    def __ne__(self, other):
        return compare("ne", self, other)

    for cls in classes:
        cls.__eq__, cls.__ne__ = __eq__, __ne__

    expression_truth = Expr.__bool__

    def __bool__(self):
        if self.op == "eq":
            return structural_equal(self.a, self.b)
        if self.op == "ne":
            return not structural_equal(self.a, self.b)
        return expression_truth(self)

    BinaryOp.__bool__ = __bool__

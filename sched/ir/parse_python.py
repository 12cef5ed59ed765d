"""Python values of the scope around a script, written into it as literals before it is read.

TVM's parser evaluates what a script takes from Python: a shape tuple defined at the top of the
file (`SHAPE = (128, 64)`, then `T.Buffer(SHAPE, "float32")`, `T.grid(*SHAPE)`, `SHAPE[0]`) and
arithmetic of Python numbers (`2 ** 10`). `inline_python_values` rewrites the script's syntax
tree so: a name the script never binds, whose Python value is a tuple or list of numbers (or of
such tuples), becomes that literal; indexing such a literal by a constant, and unpacking it into
a call's arguments, are done; a power of two number literals is computed, and so are the
shifts and bitwise operations of two integer literals. Numbers themselves stay
names, read where they are used (ExprParser.lookup), as before.
"""

from __future__ import annotations

import ast
import operator


def inline_python_values(function: ast.AST, outer: dict) -> ast.AST:
    """`function` (a FunctionDef or ClassDef) with the Python values of `outer` it uses as
    literals (module doc)."""
    bound = {node.id for node in ast.walk(function)
             if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load)}
    bound |= {arg.arg for node in ast.walk(function) if isinstance(node, ast.arguments)
              for arg in (*node.posonlyargs, *node.args, *node.kwonlyargs)}
    values = {name: value for name, value in outer.items()
              if name not in bound and _literal(value) is not None}
    return ast.fix_missing_locations(_Inliner(values).visit(function))


def _literal(value) -> ast.AST | None:
    """`value` as a literal: a tuple or list of numbers (nested), None for anything else."""
    if isinstance(value, tuple | list) and value:
        items = [_number(item) or _literal(item) for item in value]
        return None if any(item is None for item in items) else ast.Tuple(items, ast.Load())
    return None


def _number(value) -> ast.AST | None:
    if isinstance(value, bool | int | float):
        return ast.Constant(value)
    return None


_INTEGER_OPERATIONS = {ast.LShift: operator.lshift, ast.RShift: operator.rshift,
                       ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
                       ast.BitXor: operator.xor}


class _Inliner(ast.NodeTransformer):
    def __init__(self, values: dict) -> None:
        self.values = values

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.values:
            return ast.copy_location(_literal(self.values[node.id]), node)
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        index = node.slice
        if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub) and \
                isinstance(index.operand, ast.Constant):          # SHAPE[-1] (helper-121)
            index = ast.Constant(-index.operand.value)
        if isinstance(node.value, ast.Tuple) and isinstance(index, ast.Constant) and \
                type(index.value) is int and -len(node.value.elts) <= index.value < len(
                    node.value.elts):
            return ast.copy_location(node.value.elts[index.value], node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        args = []
        for arg in node.args:
            if isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Tuple):
                args.extend(arg.value.elts)
            else:
                args.append(arg)
        node.args = args
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Pow) and all(
                isinstance(side, ast.Constant) and type(side.value) in (int, float)
                for side in (node.left, node.right)):
            return ast.copy_location(ast.Constant(node.left.value ** node.right.value), node)
        # Python's own integers, as TVM's parser computes them (`T.Buffer((1 << 20,), ...)`
        # is a constant shape, not a call the argument checks cannot evaluate)
        operation = _INTEGER_OPERATIONS.get(type(node.op))
        if operation is not None and all(
                isinstance(side, ast.Constant) and type(side.value) is int
                for side in (node.left, node.right)) and (
                0 <= node.right.value <= 64 or not isinstance(node.op, ast.LShift | ast.RShift)):
            value = operation(node.left.value, node.right.value)
            if -(1 << 63) <= value < 1 << 63:
                return ast.copy_location(ast.Constant(value), node)
        return node

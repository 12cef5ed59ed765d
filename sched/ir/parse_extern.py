"""Opaque calls and element addresses in TVMScript (see `sched/ir/extern.py` for what they mean).

    T.call_extern("float32", "f", x, A.data)     # result dtype, function name, arguments
    T.call_pure_extern("float32", "expf", x)
    T.call_packed("f", A, B)                      # a buffer argument is its data pointer
    T.address_of(A[i, j])                         # &A[i][j]
    A.data                                        # &A[0, ..., 0]
    T.tvm_access_ptr(T.type_annotation("float32"), A.data, offset, extent, rw_mask)
                                                  # &A at the row-major offset `offset`

A mixin of the expression parser (`parse_expr.ExprParser`): it uses its scopes and errors.
"""

from __future__ import annotations

import ast

from sched.ir.dtype import DTYPES, INDEX_DTYPE
from sched.ir.extern import address_of
from sched.ir.nodes import (
    Buffer,
    BufferLoad,
    Call,
    Expr,
    IntImm,
    StringImm,
    const,
    convert,
)
from sched.ir.simplify import simplify

EXTERN_PARSED = ("call_extern", "call_pure_extern", "call_packed", "address_of",
                 "tvm_access_ptr")
_RESULT_DTYPES = (*DTYPES, "handle")


class ExternCallParser:
    """`T.call_extern`, `T.call_packed`, `T.address_of`, `A.data`, `T.tvm_access_ptr`."""

    def _extern_call(self, node: ast.Call, name: str) -> Expr:
        if node.keywords:
            raise self.error(node, f"T.{name}: unexpected keyword argument "
                                   f"'{node.keywords[0].arg}'")
        if name == "address_of":
            if len(node.args) != 1 or not isinstance(node.args[0], ast.Subscript):
                raise self.error(node, "T.address_of takes one buffer element: "
                                       "T.address_of(A[i, j])")
            load = self.value(node.args[0])
            return address_of(load)
        if name == "tvm_access_ptr":
            return self._access_ptr(node)
        args = list(node.args)
        dtype = "int32"
        if name != "call_packed":
            if not args:
                raise self.error(node, f"T.{name} takes the result dtype first: "
                                       f'T.{name}("float32", "f", x)')
            dtype = self._result_dtype(args.pop(0), name)
        if not args or not (isinstance(args[0], ast.Constant)
                            and isinstance(args[0].value, str)):
            raise self.error(node, f"T.{name}: expected the function's name (a string) "
                                   f"{'first' if name == 'call_packed' else 'after the dtype'}")
        function = args.pop(0).value
        if not function.isidentifier():
            raise self.error(node, f"T.{name}: {function!r} is not a C identifier")
        values = [self._extern_argument(a, name) for a in args]
        return Call(name, (StringImm(function), *values), dtype)

    def _result_dtype(self, node: ast.AST, name: str) -> str:
        if isinstance(node, ast.Constant) and node.value == "void":
            return "handle"             # TVM's spelling of a call made for its effect
        if isinstance(node, ast.Constant) and node.value in _RESULT_DTYPES:
            return node.value
        if isinstance(node, ast.Constant):
            raise self.error(node, f"T.{name} takes the result dtype first (\"float32\", "
                                   f"\"int32\", \"handle\"...), then the function's name, "
                                   f"got {node.value!r}")
        return self.dtype(node)

    def _extern_argument(self, node: ast.AST, name: str) -> Expr:
        """An argument: an expression, or a buffer (its data pointer, `call_packed`'s way of
        passing a tensor)."""
        if isinstance(node, ast.Name) and isinstance(self.lookup(node), Buffer):
            return self._data_pointer(self.lookup_buffer(node))
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            raise self.error(node, f"T.{name}: string arguments other than the function's "
                                   f"name are not supported")
        value = self.value(node)
        return value if isinstance(value, Expr) else convert(value)

    @staticmethod
    def _data_pointer(buffer: Buffer) -> Call:
        zeros = tuple(const(0, INDEX_DTYPE) for _ in buffer.shape)
        return address_of(BufferLoad(buffer, zeros))

    def _value_Attribute(self, node: ast.Attribute) -> Expr:
        """`A.data`: the address of the buffer's first element."""
        if node.attr != "data" or not isinstance(node.value, ast.Name):
            raise self.error(node, f"unsupported expression '{ast.unparse(node)}'")
        return self._data_pointer(self.lookup_buffer(node.value))

    def _access_ptr(self, node: ast.Call) -> Expr:
        """TVM's `T.tvm_access_ptr(T.type_annotation(dtype), A.data, offset, extent, mask)`:
        the address of the element at row-major `offset` (the extent and mask say what the
        callee touches: sched takes that from the block's declared regions)."""
        args = node.args
        if len(args) != 5 or not (isinstance(args[1], ast.Attribute)
                                  and args[1].attr == "data"
                                  and isinstance(args[1].value, ast.Name)):
            raise self.error(node, "expected T.tvm_access_ptr(T.type_annotation(dtype), "
                                   "A.data, offset, extent, rw_mask)")
        buffer = self.lookup_buffer(args[1].value)
        offset = convert(self.value(args[2]), INDEX_DTYPE)
        indices: list[Expr] = []
        stride = 1
        for position, dim in reversed(list(enumerate(buffer.shape))):
            if position == 0:
                indices.append(simplify(offset // stride) if stride != 1 else offset)
                break
            if not isinstance(dim, IntImm):
                raise self.error(node, f"T.tvm_access_ptr of '{buffer.name}': its shape is "
                                       f"symbolic; write T.address_of({buffer.name}[...]) "
                                       f"with the element's indices")
            indices.append(simplify((offset // stride) % dim.value))
            stride *= dim.value
        return address_of(BufferLoad(buffer, tuple(reversed(indices))))

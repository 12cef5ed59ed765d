"""Reading TVMScript expressions, regions, buffer declarations and annotations from Python's ast.

`ExprParser` holds what every part of the parser shares: the scopes (names to variables,
buffers and handles), error reporting with the user's line numbers, and the expression rules.
`parser.py` builds statements, blocks and functions on it.

A Python number stays a number (a *literal*) until it meets a typed operand, whose dtype it then
takes (`nodes.binary` does that): `i + 1` is int32 when `i` is, `x * 2.0` float16 when `x` is.
A literal that never meets one gets the default dtype (`convert`): int32, float32 or bool.
"""

from __future__ import annotations

import ast
import math

from sched.errors import ScriptError
from sched.ir.dtype import DTYPES, INDEX_DTYPE, check_dtype, is_float
from sched.ir.nodes import (
    MATH_FUNCTIONS,
    SCOPES,
    Annotations,
    BinaryOp,
    Buffer,
    BufferLoad,
    BufferRegion,
    Call,
    Cast,
    Expr,
    FloatImm,
    IntImm,
    Not,
    Range,
    Select,
    Var,
    binary,
    const,
    convert,
)
from sched.ir.simplify import simplify

Literal = int | float | bool
Value = Expr | Literal

_BINARY_OPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div",
               ast.FloorDiv: "floordiv", ast.Mod: "floormod"}
_COMPARE_OPS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt",
                ast.GtE: "ge"}
_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


class Handle:
    """A `T.handle` parameter waiting for its `T.match_buffer`."""

    def __init__(self, name: str, position: int) -> None:
        self.name, self.position, self.matched = name, position, False


def t_name(node: ast.AST) -> str | None:
    """`"axis.remap"` for the ast of `T.axis.remap`, None for anything not under `T.`."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id == "T" and parts:
        return ".".join(reversed(parts))
    return None


def call_name(node: ast.AST) -> str | None:
    """The `T.` name of a call (`"block"` for `T.block("C")`), None otherwise."""
    return t_name(node.func) if isinstance(node, ast.Call) else None


def extent_between(lo: Expr, hi: Expr) -> Expr:
    """The extent of [lo, hi): `e` when `hi` is `lo + e` as written, else `simplify(hi - lo)`.

    The printer writes `hi` so that this gives back the extent it had, exactly.
    """
    if isinstance(hi, BinaryOp) and hi.op == "add" and hi.a == lo:
        return hi.b
    return simplify(binary("sub", hi, lo))


def _typed(*values: Value) -> str:
    """The dtype of the first expression among `values` (int32 when all are literals)."""
    return next((v.dtype for v in values if isinstance(v, Expr)), INDEX_DTYPE)


def _unify(a: Value, b: Value) -> tuple[Expr, Expr]:
    """Two operands as expressions, a literal taking the dtype of the other operand."""
    if not isinstance(a, Expr):
        a = convert(a, b.dtype if isinstance(b, Expr) else None)
    return a, convert(b, a.dtype)


class ExprParser:
    """Scopes, errors and expressions: the part of the parser that statements build on."""

    def __init__(self, line_offset: int = 0, filename: str | None = None,
                 source: str = "") -> None:
        self.scopes: list[dict[str, Var | Buffer | Handle]] = [{}]
        self.line_offset = line_offset
        self.filename = filename
        self.source_lines = source.splitlines()

    # ----------------------------------------------------------------------------------------
    # Scopes and errors

    def error(self, node: ast.AST, message: str) -> ScriptError:
        """The error at `node`, carrying its source line for Python's traceback to show."""
        line = getattr(node, "lineno", None)
        error = ScriptError(message, None if line is None else line + self.line_offset,
                            self.filename)
        if line is not None and line <= len(self.source_lines):
            error.text = self.source_lines[line - 1] + "\n"
            error.offset = node.col_offset + 1
        return error

    def bind(self, name: str, value: Var | Buffer | Handle) -> None:
        self.scopes[-1][name] = value

    def lookup(self, node: ast.AST):
        if not isinstance(node, ast.Name):
            raise self.error(node, f"expected a name, got '{ast.unparse(node)}'")
        for scope in reversed(self.scopes):
            if node.id in scope:
                return scope[node.id]
        raise self.error(node, f"unknown name '{node.id}'")

    def lookup_buffer(self, node: ast.AST) -> Buffer:
        found = self.lookup(node)
        if not isinstance(found, Buffer):
            raise self.error(node, f"'{ast.unparse(node)}' is not a buffer")
        return found

    # ----------------------------------------------------------------------------------------
    # Expressions

    def expr(self, node: ast.AST, dtype: str | None = None) -> Expr:
        """The expression `node`; a bare literal gets `dtype` (or the default dtype)."""
        value = self.value(node)
        return self._guard(node, lambda: convert(value, dtype))

    def value(self, node: ast.AST) -> Value:
        """The expression `node`, or a Python number when `node` is a bare literal."""
        handler = getattr(self, "_value_" + type(node).__name__, None)
        if handler is None:
            raise self.error(node, f"unsupported expression '{ast.unparse(node)}'")
        return self._guard(node, lambda: handler(node))

    def _guard(self, node: ast.AST, build):
        """`build()`, with the TypeError/ValueError of a node constructor as a ScriptError."""
        try:
            return build()
        except (TypeError, ValueError) as exc:
            raise self.error(node, str(exc)) from None

    def _value_Name(self, node: ast.Name) -> Value:
        found = self.lookup(node)
        if not isinstance(found, Var):
            raise self.error(node, f"'{node.id}' is a buffer or handle, not a value: index it "
                                   f"as {node.id}[...]")
        return found

    def _value_Constant(self, node: ast.Constant) -> Value:
        if isinstance(node.value, bool | int | float):
            return node.value
        raise self.error(node, f"unexpected constant {node.value!r} in an expression")

    def _value_BinOp(self, node: ast.BinOp) -> Value:
        op = _BINARY_OPS.get(type(node.op))
        if op is None:
            raise self.error(node, f"unsupported operator in '{ast.unparse(node)}'")
        return binary(op, *_unify(self.value(node.left), self.value(node.right)))

    def _value_UnaryOp(self, node: ast.UnaryOp) -> Value:
        operand = self.value(node.operand)
        if isinstance(node.op, ast.Not):
            return Not(convert(operand))
        if isinstance(node.op, ast.USub):                  # -literal stays a literal
            return -operand
        if isinstance(node.op, ast.UAdd):
            return operand
        raise self.error(node, f"unsupported operator in '{ast.unparse(node)}': write 'not'")

    def _value_BoolOp(self, node: ast.BoolOp) -> Value:
        op = "and" if isinstance(node.op, ast.And) else "or"
        result = convert(self.value(node.values[0]))
        for operand in node.values[1:]:
            result = binary(op, result, convert(self.value(operand)))
        return result

    def _value_Compare(self, node: ast.Compare) -> Value:
        """`a < b < c` is `a < b and b < c`."""
        operands = [self.value(node.left)] + [self.value(c) for c in node.comparators]
        result = None
        for op, a, b in zip(node.ops, operands, operands[1:], strict=False):
            name = _COMPARE_OPS.get(type(op))
            if name is None:
                raise self.error(node, f"unsupported comparison in '{ast.unparse(node)}'")
            comparison = binary(name, *_unify(a, b))
            result = comparison if result is None else binary("and", result, comparison)
        return result

    def _value_IfExp(self, node: ast.IfExp) -> Value:
        return Select(self.expr(node.test), *_unify(self.value(node.body),
                                                     self.value(node.orelse)))

    def _value_Subscript(self, node: ast.Subscript) -> Value:
        buffer, indices = self.access(node)
        return BufferLoad(buffer, indices)

    def _value_Call(self, node: ast.Call) -> Value:
        name = call_name(node)
        if name is None:
            raise self.error(node, f"unknown function '{ast.unparse(node.func)}'")
        if node.keywords:
            raise self.error(node, f"T.{name}: unexpected keyword argument "
                                   f"'{node.keywords[0].arg}'")
        if name in DTYPES:
            return self._dtype_call(node, name)
        rule = _CALLS.get(name) or (("math", 2 if name == "pow" else 1)
                                    if name in MATH_FUNCTIONS else None)
        if rule is None:
            raise self.error(node, f"unknown construct 'T.{name}'")
        kind, arity = rule
        if len(node.args) != arity:
            raise self.error(node, f"T.{name} takes {arity} argument"
                                   f"{'s' if arity > 1 else ''}, got {len(node.args)}")
        return getattr(self, "_call_" + kind)(node, name)

    def _dtype_call(self, node: ast.Call, dtype: str) -> Value:
        """`T.float32(0.5)` a constant, `T.float32("inf")`, `T.float32(i)` a cast."""
        if len(node.args) != 1:
            raise self.error(node, f"T.{dtype} takes one value (a symbolic variable is declared "
                                   f"as `n = T.{dtype}()` at the start of the function)")
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            if not is_float(dtype) or arg.value not in _NON_FINITE:
                raise self.error(node, f"T.{dtype}: unexpected string {arg.value!r}")
            return const(_NON_FINITE[arg.value], dtype)
        value = self.value(arg)
        return Cast(dtype, value) if isinstance(value, Expr) else const(value, dtype)

    def _call_binary(self, node: ast.Call, name: str) -> Value:
        return binary(name, *_unify(self.value(node.args[0]), self.value(node.args[1])))

    def _call_cast(self, node: ast.Call, name: str) -> Value:
        return Cast(self.dtype(node.args[0]), self.expr(node.args[1]))

    def _call_math(self, node: ast.Call, name: str) -> Value:
        first = self.expr(node.args[0])
        rest = [self.expr(arg, first.dtype) for arg in node.args[1:]]
        return Call(name, (first, *rest), first.dtype)

    def _call_select(self, node: ast.Call, name: str) -> Value:
        condition, a, b = node.args
        return Select(self.expr(condition), *_unify(self.value(a), self.value(b)))

    def _call_likely(self, node: ast.Call, name: str) -> Value:
        return self.value(node.args[0])

    # ----------------------------------------------------------------------------------------
    # Buffer accesses, ranges and regions

    def access(self, node: ast.Subscript) -> tuple[Buffer, tuple[Expr, ...]]:
        """The buffer and indices of `A[i, j]` (a load or a store)."""
        buffer = self.lookup_buffer(node.value)
        elements = _subscript_elements(node)
        if any(isinstance(e, ast.Slice) for e in elements):
            raise self.error(node, f"'{ast.unparse(node)}': a slice is only allowed in "
                                   f"T.reads/T.writes")
        if len(elements) != buffer.ndim:
            raise self.error(node, f"buffer '{buffer.name}' has {buffer.ndim} dimension"
                                   f"{'' if buffer.ndim == 1 else 's'} but "
                                   f"'{ast.unparse(node)}' gives {len(elements)} indices")
        return buffer, tuple(self.expr(e) for e in elements)

    def bounds(self, lo_node: ast.AST | None, hi_node: ast.AST | None,
               default_hi: Expr | None = None) -> tuple[Expr, Expr]:
        """(min, extent) of the half-open range written `lo, hi` (see `extent_between`)."""
        lo = self.value(lo_node) if lo_node is not None else 0
        hi = self.value(hi_node) if hi_node is not None else default_hi
        dtype = _typed(lo, hi)
        lo, hi = convert(lo, dtype), convert(hi, dtype)
        return lo, self._guard(hi_node or lo_node, lambda: extent_between(lo, hi))

    def region(self, node: ast.AST) -> BufferRegion:
        """`A[vi, 0:128]` (a bare index is a range of extent 1), or `A` for all of it."""
        if isinstance(node, ast.Name):
            buffer = self.lookup_buffer(node)
            return BufferRegion(buffer, tuple(Range(const(0, d.dtype), d) for d in buffer.shape))
        if not isinstance(node, ast.Subscript):
            raise self.error(node, f"expected a buffer region such as A[vi, 0:128], got "
                                   f"'{ast.unparse(node)}'")
        buffer = self.lookup_buffer(node.value)
        elements = _subscript_elements(node)
        if len(elements) != buffer.ndim:
            raise self.error(node, f"buffer '{buffer.name}' has {buffer.ndim} dimensions but "
                                   f"region '{ast.unparse(node)}' gives {len(elements)}")
        ranges = []
        for element, dim in zip(elements, buffer.shape, strict=True):
            if isinstance(element, ast.Slice):
                if element.step is not None:
                    raise self.error(node, "a region cannot have a step")
                ranges.append(Range(*self.bounds(element.lower, element.upper, dim)))
            else:
                index = self.expr(element)
                ranges.append(Range(index, const(1, index.dtype)))
        return BufferRegion(buffer, tuple(ranges))

    # ----------------------------------------------------------------------------------------
    # Declarations: dtypes, shapes, buffers, annotations

    def dtype(self, node: ast.AST) -> str:
        """A dtype written `"float32"` or `T.float32`."""
        name = t_name(node)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value
        if name is None:
            raise self.error(node, f"expected a dtype such as \"float32\", got "
                                   f"'{ast.unparse(node)}'")
        return self._guard(node, lambda: check_dtype(name))

    def shape(self, node: ast.AST) -> tuple[Expr, ...]:
        elements = node.elts if isinstance(node, ast.Tuple | ast.List) else [node]
        return tuple(self.expr(e) for e in elements)

    def buffer(self, name: str, node: ast.Call | ast.Subscript, construct: str) -> Buffer:
        """The buffer `name` declared by `T.Buffer((128, 64), "float32", scope=..., data=X.data)`,
        `T.Buffer[(128, 64), "float32"]`, `T.alloc_buffer(...)`, `T.decl_buffer(...)` or the
        arguments after the handle of `T.match_buffer(...)`. The dtype defaults to float32."""
        if isinstance(node, ast.Subscript):
            items = _subscript_elements(node)
            last = items[-1] if items else None
            if not (isinstance(last, ast.Constant) and isinstance(last.value, str)):
                items = [node.slice]
            args, keywords = items, []
        else:
            args, keywords = node.args, node.keywords
            if construct == "T.match_buffer":
                args = args[1:]
        if len(args) > 2:
            raise self.error(node, f"{construct}: expected (shape, dtype), got "
                                   f"{len(args)} positional arguments")
        given = dict(zip(("shape", "dtype"), args, strict=False))
        for keyword in keywords:
            if keyword.arg not in ("shape", "dtype", "scope", "data") or keyword.arg in given:
                raise self.error(node, f"{construct}: unsupported argument '{keyword.arg}'")
            given[keyword.arg] = keyword.value
        if "shape" not in given:
            raise self.error(node, f"{construct}: missing the shape")
        dtype = self.dtype(given["dtype"]) if "dtype" in given else "float32"
        scope = self._scope(given["scope"]) if "scope" in given else "global"
        data = self._data(given["data"]) if "data" in given else None
        return Buffer(name, self.shape(given["shape"]), dtype, scope, data)

    def _scope(self, node: ast.AST) -> str:
        if not (isinstance(node, ast.Constant) and node.value in SCOPES):
            raise self.error(node, f"unknown storage scope '{ast.unparse(node)}': expected one "
                                   f"of {', '.join(SCOPES)}")
        return node.value

    def _data(self, node: ast.AST) -> str:
        if not (isinstance(node, ast.Attribute) and node.attr == "data"
                and isinstance(node.value, ast.Name)):
            raise self.error(node, f"expected data=X.data, got '{ast.unparse(node)}'")
        return node.value.id

    def annotations(self, node: ast.AST) -> Annotations:
        """`{"key": value, ...}` with number, string or bool values."""
        if not isinstance(node, ast.Dict):
            raise self.error(node, f"expected a dict of annotations, got '{ast.unparse(node)}'")
        pairs = []
        for key, value in zip(node.keys, node.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                raise self.error(node, "annotation keys must be strings")
            pairs.append((key.value, self._annotation_value(value)))
        return tuple(pairs)

    def _annotation_value(self, node: ast.AST):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        value = self.value(node) if isinstance(node, ast.Constant | ast.UnaryOp | ast.Call) \
            else None
        if isinstance(value, IntImm | FloatImm):
            value = bool(value.value) if value.dtype == "bool" else value.value
        if not isinstance(value, bool | int | float):
            raise self.error(node, f"annotation value '{ast.unparse(node)}' is not a number, "
                                   f"string or bool")
        return value


# T.<name>: (rule, number of arguments); MATH_FUNCTIONS and the dtypes are handled apart
_CALLS = {
    "min": ("binary", 2), "max": ("binary", 2),                    # T.max(a, b)
    "floordiv": ("binary", 2), "floormod": ("binary", 2),          # T.floordiv(a, b) -> a // b
    "Cast": ("cast", 2),                                           # T.Cast("float16", x)
    "if_then_else": ("select", 3), "Select": ("select", 3),       # T.if_then_else(c, a, b)
    "likely": ("likely", 1),                                       # T.likely(c) -> c
}


def _subscript_elements(node: ast.Subscript) -> list[ast.AST]:
    """The comma-separated items of `A[...]` (none for `A[()]`)."""
    index = node.slice
    return list(index.elts) if isinstance(index, ast.Tuple) else [index]

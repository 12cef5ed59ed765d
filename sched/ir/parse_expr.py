"""Reading TVMScript expressions from Python's ast.

`ExprParser` holds what every part of the parser shares: the scopes (names to variables,
buffers and handles), error reporting with the user's line numbers, and the expression rules;
accesses, regions and declarations are its part `RegionParser` (parse_regions.py).
`parser.py` builds statements, blocks and functions on it.

A Python number stays a number (a *literal*) until it meets a typed operand, whose dtype it then
takes (`nodes.binary` does that): `i + 1` is int32 when `i` is, `x * 2.0` float16 when `x` is.
A literal that never meets one gets the default dtype (`convert`): int32, float32 or bool.
"""

from __future__ import annotations

import ast
import math

from sched.errors import ScriptError
from sched.ir.builders import literal
from sched.ir.dtype import (
    DTYPES,
    is_float,
    is_int,
)
from sched.ir.nodes import (
    BINARY_MATH,
    MATH_FUNCTIONS,
    Buffer,
    BufferLoad,
    Call,
    Cast,
    Expr,
    Not,
    Select,
    Var,
    binary,
    const,
    convert,
)
from sched.ir.parse_bits import BitCallParser
from sched.ir.parse_calls import CALLS, TCallParser, unify
from sched.ir.parse_extern import EXTERN_PARSED, ExternCallParser
from sched.ir.parse_intrin import INTRIN_CALLS, IntrinCallParser
from sched.ir.parse_names import call_name
from sched.ir.parse_regions import RegionParser, RegionView, Value, dense_layout
from sched.ir.parse_spelled import SPELLED
from sched.ir.parse_vector import VECTOR_CALLS, VectorParser

_BINARY_OPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div",
               ast.FloorDiv: "floordiv", ast.Mod: "floormod"}
_COMPARE_OPS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt",
                ast.GtE: "ge"}
# Python's bitwise operators on integers: `a & b` is T.bitwise_and(a, b) (on bools, `and`)
_BITWISE_OPS = {ast.BitAnd: "bitwise_and", ast.BitOr: "bitwise_or", ast.BitXor: "bitwise_xor",
                ast.LShift: "shift_left", ast.RShift: "shift_right"}
_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
# the operators on two integer literals computed as Python's (floor division and remainder)
_LITERAL_OPS = {"add": int.__add__, "sub": int.__sub__, "mul": int.__mul__,
                "floordiv": int.__floordiv__, "floormod": int.__mod__}


class Handle:
    """A `T.handle` parameter waiting for its `T.match_buffer`."""

    def __init__(self, name: str, position: int) -> None:
        self.name, self.position, self.matched = name, position, False


class OuterSymbol:
    """What `T.int32()` (any integer type, no argument) gives outside a function: a symbolic
    variable that a function using the name declares at its top (TVM's module-level
    `n = T.int32()`, read in `T.Buffer((n,), ...)`)."""

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype

    def _refused(self, *args):
        raise TypeError("a symbolic variable declared around a function (`n = T.int32()`) is "
                        "read by its name inside the function: write the arithmetic there "
                        "(`T.Buffer((n + 1,), ...)`)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refused
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __neg__ = _refused


class ExprParser(RegionParser, TCallParser, ExternCallParser, VectorParser, IntrinCallParser,
                 BitCallParser):
    """Scopes, errors and expressions: the part of the parser that statements build on."""

    def __init__(self, line_offset: int = 0, filename: str | None = None,
                 source: str = "", outer: dict | None = None) -> None:
        self.scopes: list[dict[str, Var | Buffer | Handle]] = [{}]
        # `n = T.int32()` at the top of the function: the variables a layout may bind
        self.declared_symbols: dict[str, Var] = {}
        # Python's names around a decorated function (parser.parse_function): numbers and
        # IR expressions are read from them where the script does not define a name
        self.outer = outer or {}
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
        if isinstance(value, Buffer) and value.data is None:
            shadowed = next((scope[name] for scope in reversed(self.scopes) if name in scope),
                            None)
            if isinstance(shadowed, Buffer) and shadowed is not value:
                # buffers name their storage: a second one of the name would take the first's
                # views and C identifier (audit helper-108: a view of the parameter C read an
                # allocation C declared inside a block)
                raise self.error(None, f"buffer '{name}' is declared where the buffer "
                                       f"'{shadowed.name}' is already visible; give it "
                                       f"another name")
        self.scopes[-1][name] = value

    def lookup(self, node: ast.AST):
        if not isinstance(node, ast.Name):
            raise self.error(node, f"expected a name, got '{ast.unparse(node)}'")
        for scope in reversed(self.scopes):
            if node.id in scope:
                return scope[node.id]
        if node.id in self.outer:
            found = self.outer[node.id]
            if isinstance(found, bool | int | float | Expr):
                return found
            if isinstance(found, OuterSymbol):
                # `n = T.int32()` around the function, as TVM users write it: a symbolic
                # variable of the function, as if declared at its top
                var = self.declared_symbols.setdefault(node.id, Var(node.id, found.dtype))
                self.scopes[0][node.id] = var
                return var
            raise self.error(node, f"'{node.id}' is a Python {type(found).__name__} of the "
                                   f"scope around the function; a script reads numbers and IR "
                                   f"expressions from there")
        raise self.error(node, f"unknown name '{node.id}'")

    def lookup_buffer(self, node: ast.AST) -> Buffer:
        found = self.lookup(node)
        if isinstance(found, RegionView):
            return found.source
        if not isinstance(found, Buffer):
            raise self.error(node, f"'{ast.unparse(node)}' is not a buffer")
        return found

    def _view_of(self, node: ast.AST) -> RegionView | None:
        found = self.lookup(node) if isinstance(node, ast.Name) else None
        return found if isinstance(found, RegionView) else None

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
        if isinstance(found, Expr | bool | int | float):   # a variable bound to its value (see
            return found                                    # parse_buffer), or from Python
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
        if type(node.op) in _BITWISE_OPS:
            return self._bitwise(node, _BITWISE_OPS[type(node.op)],
                                 unify(self.value(node.left), self.value(node.right)))
        if isinstance(node.op, ast.Pow):        # TVM's PrimExpr.__pow__: T.pow of floats
            operands = unify(self.value(node.left), self.value(node.right))
            if not all(isinstance(o, Expr) and is_float(o.dtype) for o in operands):
                raise self.error(node, f"'{ast.unparse(node)}': ** takes float operands (as "
                                       f"T.pow); multiply integers out")
            return Call("pow", tuple(operands), operands[0].dtype)
        if op is None:
            raise self.error(node, f"unsupported operator in '{ast.unparse(node)}'")
        left, right = self.value(node.left), self.value(node.right)
        if type(left) is int and type(right) is int and op in _LITERAL_OPS and \
                (right != 0 or op in ("add", "sub", "mul")) and \
                not all(-2**31 <= v < 2**31
                        for v in (left, right, _LITERAL_OPS[op](left, right))):
            # Python's integers where one or the result is past int32, as TVM's parser
            # computes them: `2**63 - 1` is a number until it meets a typed operand (audit
            # helper-173: 2**63 was typed first and refused), `3 * 2**30` is 3221225472
            # (helper-176: int32 arithmetic wrapped it); others stay an expression, as
            # printed (`16 + 1`)
            return _LITERAL_OPS[op](left, right)
        return binary(op, *unify(left, right))

    def _value_UnaryOp(self, node: ast.UnaryOp) -> Value:
        operand = self.value(node.operand)
        if isinstance(node.op, ast.Not):
            return Not(convert(operand))
        if isinstance(node.op, ast.USub):                  # -literal stays a literal
            return -operand
        if isinstance(node.op, ast.UAdd):
            return operand
        if isinstance(node.op, ast.Invert):
            if isinstance(operand, Expr) and operand.dtype == "bool":
                return Not(operand)
            return self._bitwise(node, "bitwise_not", (convert(operand),))
        raise self.error(node, f"unsupported operator in '{ast.unparse(node)}': write 'not'")

    def _bitwise(self, node: ast.AST, name: str, operands) -> Expr:
        """`a & b`, `a | b` on bools are `and`/`or`; on integers, and `^ << >> ~`, the integer
        intrinsics."""
        if all(o.dtype == "bool" for o in operands) and name in ("bitwise_and", "bitwise_or"):
            return binary("and" if name == "bitwise_and" else "or", *operands)
        if not all(is_int(o.dtype) for o in operands):
            raise self.error(node, f"'{ast.unparse(node)}': bitwise operators take integers, "
                                   f"got {', '.join(o.dtype for o in operands)}")
        return Call(name, tuple(operands), operands[0].dtype)

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
            comparison = binary(name, *unify(a, b))
            result = comparison if result is None else binary("and", result, comparison)
        return result

    def _value_IfExp(self, node: ast.IfExp) -> Value:
        return Select(self.expr(node.test), *unify(self.value(node.body),
                                                     self.value(node.orelse)))

    def _value_Subscript(self, node: ast.Subscript) -> Value:
        target = node.value
        if isinstance(target, ast.Attribute) and target.attr in ("shape", "strides"):
            found = self.lookup(target.value)                  # A.shape[0], A.strides[0]
            buffer = found.buffer if isinstance(found, RegionView) else found
            try:
                dim = ast.literal_eval(node.slice)
            except ValueError:
                dim = None
            if not isinstance(buffer, Buffer) or not isinstance(dim, int) \
                    or not -len(buffer.shape) <= dim < len(buffer.shape):
                raise self.error(node, f"'{ast.unparse(node)}': a buffer's {target.attr} is "
                                       f"indexed by a constant dimension")
            if target.attr == "shape":
                return buffer.shape[dim]
            return dense_layout(found)[0][dim]
        buffer, indices = self.access(node)
        return BufferLoad(buffer, indices)

    def _value_Attribute(self, node: ast.Attribute) -> Value:
        """`A.elem_offset`: sched's buffers are dense from their first element (0); a view's
        is where its window starts in the buffer it views. (`A.data`: parse_extern.)"""
        if node.attr == "data":
            return super()._value_Attribute(node)
        found = self.lookup(node.value) if isinstance(node.value, ast.Name) else None
        if node.attr != "elem_offset" or not isinstance(found, Buffer | RegionView):
            raise self.error(node, f"unsupported expression '{ast.unparse(node)}'")
        return dense_layout(found)[1]

    def _value_Call(self, node: ast.Call) -> Value:
        """`T.exp(x)`, `T.max(a, b)`, `T.float32(x)`, `T.Cast("float16", x)`, `T.cast(x, "int8")`,
        `T.min_value("float32")`, `T.shift_left(a, b)`... `dtype=` (TVM's keyword) gives the
        result's dtype: literal operands take it, expressions must already have it."""
        name = call_name(node)
        if name is None:
            raise self.error(node, f"unknown function '{ast.unparse(node.func)}'")
        if name in EXTERN_PARSED:
            return self._extern_call(node, name)
        if name in VECTOR_CALLS or name in INTRIN_CALLS:     # parse_vector, parse_intrin
            return (self._vector_call if name in VECTOR_CALLS else self._intrin_call)(node, name)
        if name == "Let":
            return self._let_expression(node)
        keywords = {k.arg: k.value for k in node.keywords}
        dtype = self.dtype(keywords.pop("dtype")) if "dtype" in keywords else None
        if keywords:
            raise self.error(node, f"T.{name}: unexpected keyword argument "
                                   f"'{next(iter(keywords))}'")
        if name in DTYPES:
            return self._dtype_call(node, name)
        if name in SPELLED:                  # TVM's other names, written with sched's nodes
            arity, build = SPELLED[name]
            if len(node.args) != arity:
                raise self.error(node, f"T.{name} takes {arity} argument"
                                       f"{'s' if arity > 1 else ''}, got {len(node.args)}")
            try:
                return build(*self._operands(node, dtype))
            except TypeError as error:
                raise self.error(node, f"T.{name}: {error}") from None
        rule = CALLS.get(name) or (("math", 2 if name in BINARY_MATH else 1)
                                    if name in MATH_FUNCTIONS else None)
        if rule is None:
            raise self.error(node, f"unknown construct 'T.{name}'")
        kind, arity = rule
        if len(node.args) != arity:
            raise self.error(node, f"T.{name} takes {arity} argument"
                                   f"{'s' if arity > 1 else ''}, got {len(node.args)}")
        value = getattr(self, "_call_" + kind)(node, name, dtype)
        if dtype is not None and isinstance(value, Expr) and value.dtype != dtype:
            raise self.error(node, f"T.{name}(..., dtype=\"{dtype}\") has {value.dtype} "
                                   f"operands: cast them first (T.Cast(\"{dtype}\", x))")
        return value if dtype is None else convert(value, dtype)

    def _let_expression(self, node: ast.Call) -> Value:
        """`T.Let(x * x, where={x: A[i] + 1})`, TVM's let expression: the body with each name
        standing for its value (an expression has no side effect, so the value is written
        where the name is)."""
        where = next((k.value for k in node.keywords if k.arg == "where"), None)
        if len(node.args) != 1 or len(node.keywords) != 1 or not isinstance(where, ast.Dict) \
                or not all(isinstance(key, ast.Name) for key in where.keys):
            raise self.error(node, "T.Let takes the body and where={name: value, ...}")
        values = {key.id: self.expr(value) for key, value in zip(where.keys, where.values)}
        self.scopes.append(values)
        try:
            return self.value(node.args[0])
        finally:
            self.scopes.pop()

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
        return Cast(dtype, value) if isinstance(value, Expr) else literal(value, dtype)

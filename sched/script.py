"""`T`: the namespace TVMScript functions are written against.

    from sched.script import T

    @T.prim_func
    def scale(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
        for i in range(128):
            with T.block("B"):
                vi = T.axis.spatial(128, i)
                B[vi] = A[vi] * T.float32(2.0)

`scale` is then a `PrimFunc`. `T.prim_func` reads the function's source and parses it
(`sched.ir.parser.parse_function`); the body is never run. Every other `T.<name>` is a harmless
placeholder that only lets Python evaluate the signature's annotations (`T.Buffer(...)`,
`T.Buffer[...]`, `T.handle`, `T.int32`) when the function is defined: the parser, not Python,
decides what is valid and reports what is not, with its line.
"""

from __future__ import annotations

import sys

from sched.ir.builders import literal
from sched.ir.dtype import DTYPES, FLOAT_DTYPES, INT_DTYPES
from sched.ir.nodes import INT_FUNCTIONS, FloatImm, PrimFunc
from sched.ir.parse_expr import OuterSymbol
from sched.ir.parse_spelled import SPELLED
from sched.ir.parser import parse_function


class _Placeholder:
    """Accepts calls, subscripts and attribute access, and stands for nothing."""

    def __call__(self, *args, **kwargs) -> _Placeholder:
        return self

    def __getitem__(self, key) -> _Placeholder:
        return self

    def __getattr__(self, name: str) -> _Placeholder:
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __iter__(self):
        # iterable through __getitem__ otherwise, without end: `list(T.float32)` would hang
        raise TypeError("a TVMScript placeholder (T.<name> outside @T.prim_func) stands for "
                        "nothing")

    def __repr__(self) -> str:
        return "<TVMScript placeholder>"


_PLACEHOLDER = _Placeholder()


class _Namespace:
    """`T`: `T.prim_func` parses a function; any other attribute is a placeholder."""

    def prim_func(self, func=None, *, private: bool = False, check_well_formed: bool = True):
        """`@T.prim_func` or `@T.prim_func(private=True)` (TVM's flags are accepted and
        ignored): the decorated function as a PrimFunc named after it."""
        defined_in = sys._getframe(1).f_locals      # the scope defining the function
        if func is None:
            return lambda f: parse_function(f, defined_in)
        return parse_function(func, defined_in)

    def index_map(self, function, **_):
        """`T.index_map(lambda i, j: (j, i))`, as schedules take it (transform_layout): the
        function itself."""
        return function

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if name in INT_DTYPES:
            return _IntConstant(name)
        if name in FLOAT_DTYPES:
            return _FloatConstant(name)
        if name in _EXPR_FUNCTIONS:
            return _ExprFunction(name)
        if name == "Cast":
            return _CAST
        return _PLACEHOLDER

    def __repr__(self) -> str:
        return "sched.script.T"


class _IntConstant(_Placeholder):
    """`T.int64`: `T.int64(32)` outside a function is the constant (a schedule's split factor,
    as TVM users write it); anything else, a placeholder (`n: T.int32` in a signature)."""

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], int) and \
                not isinstance(args[0], bool):
            return literal(args[0], self.dtype)    # refuses T.int8(300), as TVM does
        if not args and not kwargs:
            return OuterSymbol(self.dtype)         # `n = T.int32()` around a function
        return _PLACEHOLDER


class _FloatConstant(_Placeholder):
    """`T.float32`: `T.float32(0.5)` outside a function is the constant (a pad value's
    `lambda i, j: T.float32(0.0)`, as TVM users write it and traces print it); anything else,
    a placeholder."""

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], int | float | str) and \
                not isinstance(args[0], bool):
            try:
                value = float(args[0])
            except ValueError:                  # a string that is no number
                return _PLACEHOLDER
            if isinstance(args[0], str):        # T.float32("inf")
                return FloatImm(value, self.dtype)
            return literal(value, self.dtype)   # refuses T.float16(1e6), as TVM does
        return _PLACEHOLDER


class _CastFunction(_Placeholder):
    """`T.Cast("float32", i)` outside a function, on an IR expression: the conversion (a pad
    value's function of the indices, as a trace prints it); anything else, a placeholder."""

    def __call__(self, *args, **kwargs):
        from sched.ir.nodes import Cast, Expr

        if len(args) == 2 and not kwargs and args[0] in DTYPES and isinstance(args[1], Expr):
            return args[1] if args[1].dtype == args[0] else Cast(args[0], args[1])
        return _PLACEHOLDER


_CAST = _CastFunction()

_EXPR_FUNCTIONS = ("min", "max", "floordiv", "floormod", "shift_left", "shift_right",
                   "bitwise_and", "bitwise_or", "bitwise_xor", "if_then_else", "Select",
                   *SPELLED)


class _ExprFunction(_Placeholder):
    """`T.min`, `T.max`, `T.floordiv`, `T.floormod`, the shifts, `T.bitwise_and`/`or`/`xor`,
    `T.if_then_else` (`T.Select`) and TVM's other spellings (`T.truncdiv`, `T.ceildiv`...:
    parse_spelled.py) outside a function, on IR expressions (an index map's
    `lambda i: (T.min(i, 7),)`, `lambda v: (T.shift_right(v, 2), T.bitwise_and(v, 3))`): the
    expression; anything else, a placeholder."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args, **kwargs):
        from sched.ir.nodes import Expr, Select, binary, convert, integer_call
        from sched.ir.parse_calls import unify

        arity = 3 if self.name in ("if_then_else", "Select") else \
            SPELLED[self.name][0] if self.name in SPELLED else 2
        if len(args) != arity or kwargs or not any(isinstance(a, Expr) for a in args) or \
                not all(isinstance(a, Expr | int) and not isinstance(a, bool) for a in args):
            return _PLACEHOLDER
        if arity == 3:
            condition, then, otherwise = args
            return Select(convert(condition), *unify(then, otherwise))
        if self.name in INT_FUNCTIONS:
            return integer_call(self.name, *args)
        if self.name in SPELLED:
            operands = unify(*args) if arity == 2 else (convert(args[0]),)
            return SPELLED[self.name][1](*operands)
        return binary(self.name, *(convert(a) for a in args))


T = _Namespace()


class _ModuleNamespace:
    """`I`: `@I.ir_module` makes an IRModule of a class whose methods are `@T.prim_func`s."""

    def ir_module(self, cls):
        from sched.ir.module import IRModule

        functions = {name: value for name, value in vars(cls).items()
                     if isinstance(value, PrimFunc)}
        return IRModule(functions, cls.__name__)

    def __repr__(self) -> str:
        return "sched.script.I"


I = _ModuleNamespace()  # noqa: E741  (TVM's name)

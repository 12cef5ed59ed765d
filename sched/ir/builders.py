"""Building expressions and statements from nodes and Python numbers: constants of a dtype,
conversion of numbers, binary operations with TVM's promotion of signed integers and of
literals past int32, comparisons, conjunctions and flattened sequences. `nodes.py` re-exports
them (Expr's operators call them).
"""

from __future__ import annotations

import math

from sched.ir.dtype import (
    INDEX_DTYPE,
    bits,
    check_dtype,
    is_bool,
    is_float,
    is_int,
    max_value,
    min_value,
)
from sched.ir.nodes import (
    LOGIC_OPS,
    BinaryOp,
    Call,
    Cast,
    Expr,
    FloatImm,
    IntImm,
    Select,
    SeqStmt,
    Stmt,
    _fits,
)


def is_constant(expr, value: int) -> bool:
    """Whether `expr` is the integer constant `value`, of any integer dtype: `T.int64(1)` is
    one as `1` is (a Relax function's loops and indices are int64; `IntImm(1) ==
    IntImm(1, "int64")` is False, structural equality comparing dtypes)."""
    return isinstance(expr, IntImm) and expr.value == value


def const(value: int | float | bool, dtype: str) -> Expr:
    """A constant of `dtype`: `const(0, "float32")` is `T.float32(0.0)`."""
    check_dtype(dtype)
    if is_float(dtype):
        value = float(value)
        if math.isfinite(value) and abs(value) >= ROUNDS_TO_INFINITY.get(dtype, math.inf):
            # the kernels compute it as infinity, and a script writes it so (audit
            # helper-167: `A[i] + 1e5` of float16 printed T.float16(100000.0), refused)
            value = math.copysign(math.inf, value)
        return FloatImm(value, dtype)
    if is_bool(dtype):
        return IntImm(int(bool(value)), dtype)
    if isinstance(value, float) and not value.is_integer():
        raise TypeError(f"cannot make a {dtype} constant of {value!r}")
    if not min_value(dtype) <= int(value) <= max_value(dtype):
        raise TypeError(f"the constant {int(value)} is outside {dtype} ({min_value(dtype)} .. "
                        f"{max_value(dtype)}): give a wider dtype")
    return IntImm(int(value), dtype)


# the finite values from which a float type's round to nearest gives infinity: the largest
# finite value plus half a unit in its last place
ROUNDS_TO_INFINITY = {"float16": 65520.0, "bfloat16": 3.3895313892515355e38 + 2.0 ** 119,
                      "float32": 3.4028235677973366e38}


def literal(value: int | float | bool, dtype: str) -> Expr:
    """`const(value, dtype)` for a literal the user writes (`T.float16(1e5)`): a finite value
    beyond the type's range is refused, as TVM refuses it, where a constant computed (a cast
    folded) becomes infinity as IEEE says."""
    if is_float(dtype) and dtype in ROUNDS_TO_INFINITY and isinstance(value, int | float) \
            and math.isfinite(value) and abs(value) >= ROUNDS_TO_INFINITY[dtype]:
        raise TypeError(f"the literal {value!r} is beyond the range of {dtype} (it would "
                        f"round to infinity); write T.{dtype}(\"inf\") for infinity or use a "
                        f"wider type")
    return const(value, dtype)


def convert(value, dtype: str | None = None) -> Expr:
    """An expression from an expression or a Python number (of `dtype` when given, else
    int32 for ints, float32 for floats, bool for bools)."""
    if isinstance(value, Expr):
        return value
    if hasattr(value, "as_expr"):          # a DSL object standing for an expression (te axes)
        found = value.as_expr()
        if isinstance(found, Expr):
            return found
    if isinstance(value, bool):
        return const(value, dtype or "bool")
    if isinstance(value, int):       # past int32: int64, as TVM infers
        return const(value, dtype or (INDEX_DTYPE if _fits(value, INDEX_DTYPE) else "int64"))
    if isinstance(value, float):
        return const(value, dtype if dtype is not None and is_float(dtype) else "float32")
    raise TypeError(f"expected an IR expression or a number, got {type(value).__name__}: "
                    f"{value!r}")


def literal_dtype(value, other: str) -> str:
    """The dtype a Python number takes beside an operand of dtype `other`: `other`; int64
    for an int past a narrower signed int (`i * 3000000000` is an int64 product, as in TVM:
    never a wrapped int32 constant); float32 for a float beside an integer (`i * 0.5`, then
    promoted), int32 for an int beside a bool (`(i == j) + 2` counts, as in TVM)."""
    if isinstance(value, bool):
        return other
    if isinstance(value, float) and not is_float(other):
        return "float32"
    if isinstance(value, int) and other == "bool":
        return INDEX_DTYPE
    if isinstance(value, int) and other in ("int8", "int16", "int32") and \
            not _fits(value, other):
        return "int64"
    return other


def power(a, b) -> Call:
    """`a ** b` (TVM's `tir.pow`): operands converted and matched as `binary` does; the
    result must be a float (cast an integer base first)."""
    a = a.as_expr() if hasattr(a, "as_expr") else a
    b = b.as_expr() if hasattr(b, "as_expr") else b
    product = binary("mul", a, b)          # the operands as binary matches them
    if not is_float(product.dtype):
        raise TypeError(f"'**' needs a floating-point operand, got {product.a.dtype} and "
                        f"{product.b.dtype}: cast the base first (te.cast(x, 'float32'))")
    return Call("pow", (product.a, product.b), product.dtype)


def bitwise(op: str, a, b) -> Expr:
    """`a & b` (`op` "and") or `a | b` ("or"), as Python's operators on expressions and the
    script's: on two bools the logical `and`/`or`, on integers `T.bitwise_and`/`or`."""
    bools = all(getattr(x, "dtype", None) == "bool" or isinstance(x, bool) for x in (a, b))
    return binary(op, a, b) if bools else integer_call(f"bitwise_{op}", a, b)


def integer_call(op: str, a, b) -> Call:
    """Integer intrinsic `op` (INT_FUNCTIONS: `a << b` is `shift_left`) of two operands of
    one integer dtype, converting a Python number to the other operand's."""
    if not isinstance(a, Expr):
        a = convert(a, b.dtype)
    if not isinstance(b, Expr):
        b = convert(b, a.dtype)
    if not is_int(a.dtype) or a.dtype != b.dtype:
        raise TypeError(f"'{op}' takes integer operands of one dtype, got {a.dtype} and "
                        f"{b.dtype}: cast them first (te.cast / T.Cast)")
    return Call(op, (a, b), a.dtype)


def binary(op: str, a, b) -> BinaryOp:
    """`a op b`, converting a Python number to the dtype of the other operand, and operands
    of different dtypes to one as TVM does (`promoted`): an int32 loop variable times an int64
    extent is an int64 product (never a wrap), `A[i] * i` (float32 times int32) a float32 one.
    """
    a = a.as_expr() if hasattr(a, "as_expr") else a
    b = b.as_expr() if hasattr(b, "as_expr") else b
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        raise TypeError(f"binary: at least one operand must be an IR expression, got {a!r}, {b!r}")
    if not isinstance(a, Expr):
        a = convert(a, literal_dtype(a, b.dtype))
    if not isinstance(b, Expr):
        b = convert(b, literal_dtype(b, a.dtype))
    if op in LOGIC_OPS:
        if a.dtype != "bool" or b.dtype != "bool":
            raise TypeError(f"'{op}' needs two bool operands, got {a.dtype} and {b.dtype}")
    elif a.dtype != b.dtype:
        dtype = promoted(a.dtype, b.dtype)
        if dtype is None:
            raise TypeError(f"'{op}' on {a.dtype} and {b.dtype}: cast one operand first "
                            f"(te.cast / T.Cast) so both have the same dtype")
        a, b = cast_to(a, dtype), cast_to(b, dtype)
    return BinaryOp(op, a, b)


def promoted(a: str, b: str) -> str | None:
    """The dtype two operands of dtypes `a` and `b` are brought to, as TVM's
    BinaryOpMatchTypes does: the wider of two floats; the float beside an integer or a bool;
    the wider of two signed or of two unsigned integers; of a signed and an unsigned integer,
    the wider one's type, and the unsigned one's where they are as wide (uint32 beside int32
    is uint32, as in C; a bool counts as a 1-bit unsigned). None for float16 beside bfloat16
    (no width decides; TVM keeps the left one's)."""
    if is_float(a) and is_float(b):
        return None if bits(a) == bits(b) else max(a, b, key=bits)
    if is_float(a) or is_float(b):
        return a if is_float(a) else b
    if _signed(a) == _signed(b):
        return max(a, b, key=lambda dtype: (bits(dtype), dtype != "bool"))
    if bits(a) != bits(b):
        return max(a, b, key=bits)
    return b if _signed(a) else a


def _signed(dtype: str) -> bool:
    return dtype.startswith("int")


def cast_to(expr: Expr, dtype: str) -> Expr:
    """`expr` in `dtype` (a constant stays a constant where `dtype` holds its value)."""
    if expr.dtype == dtype:
        return expr
    if isinstance(expr, IntImm | FloatImm):
        try:
            return const(expr.value, dtype)
        except TypeError:
            pass
    return Cast(dtype, expr)


def equal(a, b) -> BinaryOp:
    """The comparison `a == b` (Python's `==` on nodes is structural equality)."""
    return binary("eq", a, b)


def not_equal(a, b) -> BinaryOp:
    return binary("ne", a, b)


def logical_and(*conditions) -> Expr:
    """All of `conditions` (`True` when there are none)."""
    result: Expr = IntImm(1, "bool")
    for i, condition in enumerate(conditions):
        condition = convert(condition)
        result = condition if i == 0 else binary("and", result, condition)
    return result


def conjuncts(predicate: Expr) -> list[Expr]:
    """The terms of `a and b and ...` (none for True): `logical_and`'s inverse."""
    if isinstance(predicate, BinaryOp) and predicate.op == "and":
        return conjuncts(predicate.a) + conjuncts(predicate.b)
    return [] if isinstance(predicate, IntImm) and predicate.value == 1 else [predicate]


def logical_or(*conditions) -> Expr:
    result: Expr = IntImm(0, "bool")
    for i, condition in enumerate(conditions):
        condition = convert(condition)
        result = condition if i == 0 else binary("or", result, condition)
    return result


TRUE = IntImm(1, "bool")


def seq(*stmts: Stmt) -> Stmt:
    """One statement from several, flattening nested sequences; a single one is returned as is."""
    flat: list[Stmt] = []
    for stmt in stmts:
        if isinstance(stmt, SeqStmt):
            flat.extend(stmt.stmts)
        else:
            flat.append(stmt)
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))


# integer arithmetic `widen` computes in the wider type (the other operations are converted)
_WIDENED_OPS = ("add", "sub", "mul", "floordiv", "floormod", "min", "max")


def widen(e: Expr, dtype: str = "int64", keep_casts: bool = False) -> Expr:
    """The integer expression `e` computed in `dtype` throughout: constants retyped, integer
    arithmetic (and selects of it) on widened operands, every other leaf (a variable, a load,
    a cast) converted once. Equal to `e` wherever `e` does not overflow, and free of the
    narrow intermediate results that could. A narrowing cast of a value already in `dtype`
    is dropped (the index arithmetic it narrowed is computed wide), unless `keep_casts`: the
    program's own casts, which wrap."""
    if e.dtype == dtype:
        return e
    if isinstance(e, IntImm):
        return IntImm(e.value, dtype)
    if isinstance(e, BinaryOp) and e.op in _WIDENED_OPS:
        return BinaryOp(e.op, widen(e.a, dtype, keep_casts), widen(e.b, dtype, keep_casts))
    if isinstance(e, Select):
        return Select(e.condition, widen(e.true_value, dtype, keep_casts),
                      widen(e.false_value, dtype, keep_casts))
    if isinstance(e, Cast) and e.value.dtype == dtype and not keep_casts:
        return e.value           # a narrowing cast of an already wide value: the value itself
    return Cast(dtype, e)

"""Between IR expressions and isl: affine IR expressions as isl syntax, isl expressions as IR.

`to_isl(expr)` writes an integer expression in isl's input syntax when it is affine in isl's sense
(sums, products by constants, `//` and `%` by nonzero constants, min, max, shifts by a
constant, `& (2**k - 1)`) and returns None otherwise (a product of two variables, a load, a
float). `to_isl_comparison` and `to_isl_condition` also read piecewise affine expressions
(selects with affine conditions; `piecewise_form` writes truncating division and remainder
so), one disjunct per piece. `pw_aff_to_expr` goes the other way through isl's AST builder,
which picks the simplest expression valid in a given context (a min or max of pieces where it
is one); this is how sched lets isl do affine simplification and bounds instead of rewriting
by hand.
"""

from __future__ import annotations

import islpy as isl

from sched.ir.dtype import INDEX_DTYPE, bits, is_int, max_value, min_value
from sched.ir.functor import collect
from sched.ir.intervals import low_bits_mask
from sched.ir.nodes import (
    ARITH_OPS,
    BinaryOp,
    BufferLoad,
    Call,
    Cast,
    Expr,
    IntImm,
    Not,
    Select,
    Var,
    binary,
    const,
    is_constant,
)
from sched.polyhedral.isl_text import within_operations
from sched.polyhedral.names import isl_name

__all__ = ["NotAffine", "ast_to_expr", "exact_arithmetic", "isl_name", "keeps_values",
           "piecewise_form", "pw_aff_to_expr", "range_constraint",
           "to_isl", "to_isl_comparison", "to_isl_condition"]


def _constant(expr: Expr) -> int | None:
    return expr.value if isinstance(expr, IntImm) else None


def to_isl(expr: Expr) -> str | None:
    """`expr` in isl syntax, or None when it is not affine.

    isl's integers are exact. Index arithmetic in int32 and int64 is too (where int32 could
    overflow, the lowering computes it in int64: sched/lower/wide_integers.py), but the 8-
    and 16-bit and unsigned types wrap for real (an int8 `i * 2` at i = 100 is -56), and a
    narrowing cast wraps what does not fit: those are not affine here."""
    if isinstance(expr, IntImm):
        return str(expr.value)
    if isinstance(expr, Var):
        return isl_name(expr) if is_int(expr.dtype) else None
    if isinstance(expr, Cast) and is_int(expr.dtype) and is_int(expr.value.dtype):
        return _widened(expr) if keeps_values(expr.value.dtype, expr.dtype) else None
    if isinstance(expr, Call):
        return _call_to_isl(expr)
    if not isinstance(expr, BinaryOp) or not exact_arithmetic(expr.dtype):
        return None
    a, b = to_isl(expr.a), to_isl(expr.b)
    if a is None or b is None:
        return None
    op = expr.op
    if op in ("add", "sub"):
        return _wrapped_int64(f"({a} {'+' if op == 'add' else '-'} {b})", expr)
    if op == "mul":
        if _constant(expr.a) is None and _constant(expr.b) is None:
            return None
        return _wrapped_int64(f"({a} * {b})", expr)
    if op in ("floordiv", "floormod"):
        divisor = _constant(expr.b)
        if divisor is None or divisor == 0:
            return None
        if divisor < 0:          # floor(a / -d) = floor(-a / d); a mod -d = a - (-d) * that
            # (-a wraps where a is -2**63, as the kernel's a // -1 does: audit helper-166)
            negated = _wrapped_int64(f"(-({a}))", expr.a) if divisor == -1 else f"(-({a}))"
            quotient = f"floor({negated} / {-divisor})"
            return quotient if op == "floordiv" else f"(({a}) + {-divisor} * {quotient})"
        return f"floor(({a}) / {divisor})" if op == "floordiv" else f"(({a}) mod {divisor})"
    if op in ("min", "max"):
        return f"{op}({a}, {b})"
    return None


def _wrapped_int64(text: str, expr: Expr) -> str:
    """`text`, the isl form of the sum, product or left shift `expr`, modulo 2**64 (two's
    complement, as the kernels compute index arithmetic, int32 widened where it could pass
    int32) where its
    magnitude may reach 2**63 (`i * 2**61 < x` holds again at i = 4, audit helper-132;
    `(vi + 2**40) * 2**30`, `x * 2**30 * 2**30`, helper-136). The usual exact form otherwise:
    index arithmetic of sizes and loops stays far from 2**63."""
    magnitude = _magnitude(expr)
    if magnitude is None or magnitude < 1 << 63:
        return text
    half = 1 << 63
    return f"((({text}) + {half}) mod {2 * half} - {half})"


def may_pass_int64(expr: Expr, magnitudes: dict | None = None) -> bool:
    """Whether the index arithmetic `expr` (a sum, product or shift of constants and
    variables) may reach 2**63 in magnitude, where the kernel's int64 arithmetic wraps and the
    model reads it modulo 2**64 (`_wrapped_int64`): a pass that reads it with isl's exact
    integers must take it whole, as an opaque value. `magnitudes` bounds the variables it
    knows (a loop's, a let's: audit helper-166, a let `x = vi * 2**62` was taken as at most
    2**40 and `(x * 4) // 4` read as x)."""
    magnitude = _magnitude(expr, magnitudes)
    return magnitude is not None and magnitude >= 1 << 63


# the magnitude a variable is taken to reach when judging whether index arithmetic may pass
# int64: any value of an int32 one; an int64 one (a loop over a size, a scalar) up to 2**40,
# which calls check of the int64 scalars the model reads (in_bounds: INT64_MAGNITUDE); any
# value of an unsigned one (a uint32 scalar reaches 2**32: audit helper-166)
INT64_MAGNITUDE = 1 << 40
_VARIABLE_MAGNITUDE = {"int32": 1 << 31, "int64": INT64_MAGNITUDE}


def _magnitude(e: Expr, magnitudes: dict | None = None) -> int | None:
    """A bound of |e| over its integer arithmetic of constants and variables (those in
    `magnitudes` bounded by it), or None where it holds anything else (a load: not index
    arithmetic the model reads)."""
    if isinstance(e, IntImm):
        return abs(e.value)
    if isinstance(e, Var):
        if magnitudes and e in magnitudes:
            return magnitudes[e]
        signed = not e.dtype.startswith("u")
        return _VARIABLE_MAGNITUDE.get(e.dtype, 1 << (bits(e.dtype) - signed)) \
            if is_int(e.dtype) else None
    if isinstance(e, Cast) and is_int(e.dtype) and is_int(e.value.dtype):
        return _magnitude(e.value, magnitudes)
    if isinstance(e, Call) and e.op == WRAP32:
        return 1 << 31
    if low_bits_mask(e) is not None:     # whatever its operand: 0 .. 2**k - 1 (helper-169)
        return e.args[1].value
    if isinstance(e, Call) and e.op in ("shift_left", "shift_right") and \
            isinstance(e.args[1], IntImm) and 0 <= e.args[1].value < 64:
        inner = _magnitude(e.args[0], magnitudes)
        amount = e.args[1].value
        return None if inner is None else (inner << amount if e.op == "shift_left"
                                           else inner >> amount)
    if isinstance(e, Select) and is_int(e.dtype):
        a = _magnitude(e.true_value, magnitudes)
        b = _magnitude(e.false_value, magnitudes)
        return None if a is None or b is None else max(a, b)
    if isinstance(e, Call) and is_int(e.dtype) and not collect(e, BufferLoad):
        # another intrinsic of index arithmetic (`T.bitwise_xor(vi, 16)`): any value of its
        # type (audit helper-176: a select times 5 * 2**60 was taken as unable to pass
        # int64, and its product read exactly where the kernel wraps it)
        return 1 << (bits(e.dtype) - (not e.dtype.startswith("u")))
    if not isinstance(e, BinaryOp):
        return None
    a, b = _magnitude(e.a, magnitudes), _magnitude(e.b, magnitudes)
    if a is None or b is None:
        return None
    if e.op in ("add", "sub"):
        return a + b
    if e.op == "mul":
        return a * b
    if e.op in ("floordiv", "div") and _constant(e.b):
        return a // abs(_constant(e.b)) + 1
    if e.op in ("floormod", "mod"):
        return b
    return max(a, b) if e.op in ("min", "max") else None


def _widened(cast: Cast) -> str | None:
    """A widening cast: its operand's value, which an int32 sum or product past int32 has
    wrapped before the cast (as the kernel and the interpreter compute it; only index
    arithmetic outside a cast is computed wide: sched/lower/wide_integers.py). Such an operand
    is written modulo 2**32, exactly: isl drops the remainder where the operand's range keeps
    it in int32 (audit helper-110: `T.Cast("int64", vi * 2**30) // 2**30` was read as vi, and
    stores to C[-2] were proven in bounds)."""
    value = to_isl(cast.value)
    if value is None or cast.value.dtype != INDEX_DTYPE or cast.dtype == INDEX_DTYPE or \
            not isinstance(cast.value, BinaryOp | Call):
        return value          # (a cast to its own type is none: the lowering drops it)
    return _modulo_int32(value)


# the mark of int32 arithmetic to read modulo 2**32 (data_wrap.wrapping_int32)
WRAP32 = "sched.wrap32"


def _modulo_int32(text: str) -> str:
    half = 1 << 31
    return f"((({text}) + {half}) mod {2 * half} - {half})"


def _call_to_isl(expr: Call) -> str | None:
    """A shift by a constant (a product or a floor division by a power of two) and a
    bitwise and with a constant 2**k - 1 (the floor remainder modulo 2**k, in two's
    complement) in isl syntax; the mark of wrapping_int32 modulo 2**32; None otherwise."""
    if expr.op == WRAP32:
        inner = to_isl(expr.args[0])
        return None if inner is None else _modulo_int32(inner)
    if len(expr.args) != 2 or not exact_arithmetic(expr.dtype):
        return None
    amount = _constant(expr.args[1])
    a = to_isl(expr.args[0])
    if amount is None or a is None:
        return None
    if expr.op in ("shift_left", "shift_right") and 0 <= amount < bits(expr.dtype) - 1:
        # (a left shift wraps as a product does: audit helper-152)
        return _wrapped_int64(f"(({a}) * {1 << amount})", expr) if expr.op == "shift_left" \
            else f"floor(({a}) / {1 << amount})"
    if expr.op == "bitwise_and" and amount >= 0 and (amount + 1) & amount == 0:
        return f"(({a}) mod {amount + 1})"
    return None


def piecewise_form(expr: Expr) -> Expr:
    """`expr` with the integer operations whose value is piecewise affine written as
    selects, for `to_isl_comparison`: the truncating division and remainder by a positive
    constant (`a / 4` rounds toward zero: `floor(a / 4)` where a >= 0, `floor((a + 3) / 4)`
    below). Not `T.abs`: the lowering computes it on its operand narrowed to int32, not as
    index arithmetic (audit helper-106: `T.abs` of a sum past int32 was proven in bounds
    and stored elsewhere)."""
    if not isinstance(expr, BinaryOp) or not is_int(expr.dtype):
        return expr
    a, b = piecewise_form(expr.a), piecewise_form(expr.b)
    divisor = _constant(b)
    if expr.op in ("div", "mod") and divisor is not None and divisor > 0:
        # below 0, toward zero is up: floor((a + d - 1) / d), a sum that stays in range
        # where -floor(-a / d) negates a, which wraps at a = -2**63 (audit helper-166)
        zero = const(0, a.dtype)
        toward_zero = Select(binary("ge", a, zero), binary("floordiv", a, b), binary(
            "floordiv", binary("add", a, const(divisor - 1, a.dtype)), b))
        if expr.op == "div":
            return toward_zero
        return binary("sub", a, binary("mul", toward_zero, b))
    return expr if (a, b) == (expr.a, expr.b) else binary(expr.op, a, b)


def exact_arithmetic(dtype: str) -> bool:
    """Whether integer arithmetic in `dtype` is read as exact (int32, int64; see to_isl)."""
    return dtype in ("int32", "int64")


def keeps_values(source: str, target: str) -> bool:
    """Whether every `source` value is a `target` value (a widening conversion)."""
    if source.startswith("uint"):
        return bits(target) > bits(source) or (target.startswith("uint")
                                                and bits(target) >= bits(source))
    return target.startswith("int") and bits(target) >= bits(source)


def range_constraint(var: Var, start: Expr, extent: Expr) -> str | None:
    """`start <= var < start + extent` in isl syntax, or None when a bound is not affine."""
    low, size = to_isl(start), to_isl(extent)
    if low is None or size is None:
        return None
    return f"{low} <= {isl_name(var)} < ({low}) + ({size})"


def to_isl_comparison(left: str, op: str, expr: Expr) -> str | None:
    """The constraint `left op expr` (`left` in isl syntax, `op` one of < <= = >= >) where
    `expr` may hold selects with affine conditions (`T.if_then_else(n == 4, 2, (n + 1) // 2)`,
    as bounds from isl come back piecewise): one disjunct per piece; None when a piece or a
    condition is not affine."""
    expr = _selects_lifted(expr)
    if isinstance(expr, Select) and is_int(expr.dtype):
        condition = to_isl_condition(expr.condition)
        then = to_isl_comparison(left, op, expr.true_value)
        otherwise = to_isl_comparison(left, op, expr.false_value)
        if condition is None or then is None or otherwise is None:
            return None
        return f"((({condition}) and ({then})) or ((not ({condition})) and ({otherwise})))"
    text = to_isl(expr)
    return None if text is None else f"{left} {op} {text}"


def _selects_lifted(expr: Expr) -> Expr:
    """`expr` with a select inside integer arithmetic lifted to the top, one branch each
    (`T.min(T.if_then_else(c, m, n), m)` is `T.if_then_else(c, T.min(m, m), T.min(n, m))`):
    to_isl_comparison reads selects there only."""
    if not (isinstance(expr, BinaryOp) and expr.op in ARITH_OPS and is_int(expr.dtype)):
        return expr
    a, b = _selects_lifted(expr.a), _selects_lifted(expr.b)
    for index, side in enumerate((a, b)):
        if isinstance(side, Select) and is_int(side.dtype):
            def branch(value, index=index):
                return _selects_lifted(binary(expr.op, *((value, b) if index == 0 else
                                                          (a, value))))
            return Select(side.condition, branch(side.true_value), branch(side.false_value))
    return expr if (a, b) == (expr.a, expr.b) else binary(expr.op, a, b)


def to_isl_condition(expr: Expr) -> str | None:
    """A boolean IR expression as an isl constraint, or None when it is not affine."""
    if isinstance(expr, IntImm) and expr.dtype == "bool":
        return "true" if expr.value else "false"
    if isinstance(expr, Not):
        inner = to_isl_condition(expr.a)
        return None if inner is None else f"(not ({inner}))"
    if not isinstance(expr, BinaryOp):
        return None
    if expr.op in ("and", "or"):
        a, b = to_isl_condition(expr.a), to_isl_condition(expr.b)
        return None if a is None or b is None else f"(({a}) {expr.op} ({b}))"
    symbols = {"eq": "=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
    if expr.op not in symbols and expr.op != "ne":
        return None
    a, b = to_isl(expr.a), to_isl(expr.b)
    if a is None or b is None:
        return _piecewise_comparison(expr)
    if expr.op == "ne":
        return f"({a} < {b} or {a} > {b})"
    return f"{a} {symbols[expr.op]} {b}"


def _piecewise_comparison(expr: BinaryOp) -> str | None:
    """A comparison whose side holds a select with an affine condition (a bound from isl
    that came back piecewise, `T.if_then_else(io <= 1, io * 4, 12 - io * 4) + ax0 >= 0` in
    a predicate after compute_at): one disjunct per piece; None when a piece or a condition
    is not affine."""
    for index, side in enumerate((_selects_lifted(expr.a), _selects_lifted(expr.b))):
        if isinstance(side, Select) and is_int(side.dtype):
            def piece(value, index=index):
                return to_isl_condition(binary(expr.op, *((value, expr.b) if index == 0
                                                          else (expr.a, value))))
            condition = to_isl_condition(side.condition)
            then, otherwise = piece(side.true_value), piece(side.false_value)
            if condition is None or then is None or otherwise is None:
                return None
            return (f"((({condition}) and ({then})) or "
                    f"((not ({condition})) and ({otherwise})))")
    return None


_BINARY_OPS = {
    isl.ast_expr_op_type.add: "add", isl.ast_expr_op_type.sub: "sub",
    isl.ast_expr_op_type.mul: "mul", isl.ast_expr_op_type.min: "min",
    isl.ast_expr_op_type.max: "max",
    isl.ast_expr_op_type.fdiv_q: "floordiv",   # floor(a / b)
    isl.ast_expr_op_type.pdiv_q: "floordiv",   # a / b with a >= 0: floor division too
    isl.ast_expr_op_type.div: "floordiv",      # exact division
    isl.ast_expr_op_type.pdiv_r: "floormod",   # a % b with a >= 0
    isl.ast_expr_op_type.zdiv_r: "floormod",   # only ever compared with 0, where they agree
    isl.ast_expr_op_type.eq: "eq", isl.ast_expr_op_type.lt: "lt", isl.ast_expr_op_type.le: "le",
    isl.ast_expr_op_type.gt: "gt", isl.ast_expr_op_type.ge: "ge",
    isl.ast_expr_op_type.and_: "and", isl.ast_expr_op_type.and_then: "and",
    isl.ast_expr_op_type.or_: "or", isl.ast_expr_op_type.or_else: "or",
}


class NotAffine(Exception):
    """An isl expression (or IR expression) outside what the caller accepts."""


def ast_to_expr(ast: isl.AstExpr, variables: dict[str, Expr], dtype: str = INDEX_DTYPE,
                allow_select: bool = True) -> Expr:
    """An isl AST expression as IR, in the IR's usual spelling (`x * 4`, `y - x`); identifiers
    are looked up in `variables`. A piecewise result (select) raises NotAffine unless
    `allow_select`."""
    kind = ast.get_type()
    if kind == isl.ast_expr_type.int:          # int64 where it does not fit the index type
        value = ast.get_val().to_python()
        if not min_value("int64") <= value <= max_value("int64"):
            # (isl's exact form of arithmetic the model reads modulo 2**64: no IR constant
            # holds it; audit helper-166, a raw TypeError from compute_at and build)
            raise NotAffine
        fits = min_value(dtype) <= value <= max_value(dtype)
        return const(value, dtype if fits or dtype == "int64" else "int64")
    if kind == isl.ast_expr_type.id:
        return variables[ast.get_id().get_name()]
    op = ast.get_op_type()
    args = [ast_to_expr(ast.get_op_arg(i), variables, dtype, allow_select)
            for i in range(ast.get_op_n_arg())]
    if op == isl.ast_expr_op_type.minus:                       # -x -> 0 - x
        return binary("sub", const(0, args[0].dtype), args[0])
    if op in (isl.ast_expr_op_type.cond, isl.ast_expr_op_type.select):
        if not allow_select:
            raise NotAffine
        return Select(args[0], args[1], args[2])
    name = _BINARY_OPS.get(op)
    if name is None:
        raise NotAffine
    result = args[0]
    for b in args[1:]:                                          # min, max may take more than two
        a = result
        if name == "mul" and isinstance(a, IntImm):            # c * x -> x * c
            a, b = b, a
        if name == "add" and _is_negation(a):                  # (0 - x) + y -> y - x
            result = binary("sub", b, a.b)
        else:
            result = binary(name, a, b)
    return result


def _is_negation(e: Expr) -> bool:
    return isinstance(e, BinaryOp) and e.op == "sub" and isinstance(e.a, IntImm) \
        and e.a.value == 0


# isl operations (about 0.2 s) simplifying against the context may take before the context is
# taken without its existentially quantified variables
CONTEXT_OPERATIONS = 300_000


def pw_aff_to_expr(pw_aff: isl.PwAff, context: isl.Set, variables: dict[str, Var],
                   dtype: str = INDEX_DTYPE) -> Expr:
    """The simplest IR expression equal to `pw_aff` wherever `context` holds (its constants
    of `dtype`: int64 beside an int64 symbolic dim). Where the context's existentials make
    that slow (the instances of a cooperative fetch whose split loops divide: 1.5 s a call,
    22 s for one conv2d's lowering), it is simplified against the context without them, a
    larger set: equal there, so equal where `context` holds."""
    def expression(around: isl.Set) -> Expr:
        build = isl.AstBuild.from_context(around)

        def written(tree) -> Expr:                 # a _min_max_tree as IR
            if isinstance(tree, isl.Aff):
                return ast_to_expr(build.expr_from_pw_aff(isl.PwAff.from_aff(tree)),
                                   variables, dtype)
            op, parts = tree
            result = written(parts[0])
            for part in parts[1:]:
                result = binary(op, result, written(part))
            return result
        tree = _min_max_tree(pw_aff, around)
        if tree is not None:
            return written(tree)
        return ast_to_expr(build.expr_from_pw_aff(pw_aff.gist_params(around)), variables,
                           dtype)
    if all(piece.dim(isl.dim_type.div) == 0 for piece in context.get_basic_sets()):
        return expression(context)
    found = within_operations(CONTEXT_OPERATIONS, lambda: expression(context))
    return found if found is not None else expression(context.remove_divs())


# the most pieces a piecewise bound may have for pw_aff_to_expr to try it as mins and maxes
MIN_MAX_PIECES = 4


def _min_max_tree(pw_aff: isl.PwAff, context: isl.Set):
    """`pw_aff` of several pieces as a min or max of its pieces, or a min of one piece and
    the max of the others (or the other way round), where that equals it wherever it is
    defined in `context`: ("min" or "max", [isl.Aff or such a tree, ...]), else None.

    A region's start over two ranges is `min(io * 4, 12 - io * 4)`, clamped to the buffer
    `max(0, min(...))`: isl's AST builder writes those as selects, which the model reads in
    conditions and bindings one disjunct per piece, where a min or max is one affine
    expression; TVM writes such bounds with min and max too."""
    affs: dict[str, isl.Aff] = {}
    for where, aff in pw_aff.get_pieces():
        aff = aff.gist(where)                     # `6 - (8 + 3n) mod 4` where 4 divides n: 6
        affs.setdefault(str(aff), aff)
    if not 1 < len(affs) <= MIN_MAX_PIECES:
        return None
    pieces = list(affs.values())
    candidates = [("min", pieces), ("max", pieces)]
    if len(pieces) >= 3:
        for n, piece in enumerate(pieces):
            rest = pieces[:n] + pieces[n + 1:]
            candidates += [("max", [piece, ("min", rest)]), ("min", [piece, ("max", rest)])]
    where = pw_aff.domain().intersect_params(context if context.is_params()
                                             else context.params())
    for tree in candidates:
        if where.is_subset(_tree_pw_aff(tree).eq_set(pw_aff)):
            return tree
    return None


def _tree_pw_aff(tree) -> isl.PwAff:
    if isinstance(tree, isl.Aff):
        return isl.PwAff.from_aff(tree)
    op, parts = tree
    result = _tree_pw_aff(parts[0])
    for part in parts[1:]:
        result = getattr(result, op)(_tree_pw_aff(part))
    return result


def constraint_condition(constraint: isl.Constraint, variables: dict[str, Var]) -> Expr:
    """An isl constraint over parameters as a comparison: `a - b + 3 >= 0` -> `b < a + 4`."""
    from sched.ir.simplify import simplify

    positive: Expr = IntImm(0)
    negative: Expr = IntImm(0)
    for i in range(constraint.dim(isl.dim_type.param)):
        coefficient = constraint.get_coefficient_val(isl.dim_type.param, i).to_python()
        if coefficient:
            var = variables[constraint.get_dim_name(isl.dim_type.param, i)]
            term = var * abs(coefficient) if abs(coefficient) != 1 else var
            if coefficient > 0:
                positive = simplify(positive + term)
            else:
                negative = simplify(negative + term)
    constant = constraint.get_constant_val().to_python()
    if constraint.is_equality():
        if is_constant(negative, 0):                            # `j == 0`, not `0 == j`
            return binary("eq", positive, IntImm(-constant))
        return binary("eq", negative, simplify(positive + constant))
    if is_constant(negative, 0):
        return binary("ge", positive, IntImm(-constant))
    return binary("lt", negative, simplify(positive + (constant + 1)))

"""The C text of a vectorized loop's body as GCC vector code (vectorize.py decides when).

Each expression is either a scalar (it does not depend on the loop variable: the C emitter
prints it, gcc broadcasts it where it meets a vector) or a vector of `lanes` elements
(`sched_f32x8`). Comparisons give masks: vectors of int32 (or int64 for 64-bit operands) with
all bits set where true, as GCC's vector comparisons do; `and`/`or`/`not` are bitwise on masks;
a select of vectors is `sched_vselect_*` (bitwise blend); casts are `__builtin_convertvector`;
math calls are the functions of vector_math.py.

A select evaluates both sides on every lane, so a load inside one side, which the scalar code
performs only where the condition holds (padding: `if_then_else(inside, A[i - 1], 0)` reads
A[-1] on the border lanes), is a masked load (`sched_vload_masked_*`: AVX `vmaskmov`, AVX-512
masked `vmovups`, else a lane-by-lane loop that skips the masked lanes) unless the same load is
also performed unconditionally. A scalar-condition select stays C's lazy `?:`.
"""

from __future__ import annotations

import numpy as np

from sched.c import dtypes, vector_math
from sched.c.int_ranges import WRAPPING_OPS
from sched.c.vector_loads import masked_load_source
from sched.c.vectorize import (
    SHORT_NAMES,
    UNSIGNED_LANES,
    mask_dtype,
    vector_type,
    vector_typedef,
)
from sched.ir.dtype import is_float, is_int
from sched.ir.functor import collect, free_vars
from sched.ir.nodes import (
    COMPARE_OPS,
    BinaryOp,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    Expr,
    FloatImm,
    For,
    IfThenElse,
    IntImm,
    Not,
    Select,
    SeqStmt,
    Stmt,
    Var,
)
from sched.ir.simplify import simplify

_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">",
           "ge": ">=", "eq": "==", "ne": "!=", "and": "&", "or": "|"}
_CTYPES = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t"}


# gcc takes `#pragma GCC unroll n` for n < 65535 only (a loop of 70000 iterations unrolled
# failed to build: audit helper-119), and took over 10 minutes unrolling by 65534: a loop up
# to this long is unrolled whole (a copy of 4096 bodies already takes gcc seconds); a longer
# one, which no unrolling makes straight-line code, by PARTIAL_UNROLL (unrolled by 4096, a
# loop of 2**20 took gcc almost 3 minutes: audit helper-165)
MAX_UNROLL = 4096
PARTIAL_UNROLL = 64


def unroll_pragma(extent: int) -> str:
    """The pragma that unrolls a loop of `extent` iterations: whole up to MAX_UNROLL, by
    PARTIAL_UNROLL past it."""
    return f"#pragma GCC unroll {extent if extent <= MAX_UNROLL else PARTIAL_UNROLL}"


class VectorValue:
    """The C text of an expression in a vectorized loop: a vector of `dtype` lanes (a mask of
    int lanes when the IR type is bool), or a scalar when `vector` is False."""

    __slots__ = ("text", "dtype", "vector")

    def __init__(self, text: str, dtype: str, vector: bool) -> None:
        self.text, self.dtype, self.vector = text, dtype, vector


class VectorCode:
    """Emits the body of one vectorized loop over `var` with `lanes` lanes through `emitter`
    (the C emitter: lines, names, scalar expressions, helper definitions)."""

    def __init__(self, emitter, var: Var, lanes: int, fast_math: bool) -> None:
        self.c = emitter
        self.var = var
        self.lanes = lanes
        self.fast_math = fast_math
        self.unconditional: set[BufferLoad] = set()
        self.masks = 0                  # masks bound to names so far (sched_mask_<n>)
        self.lazy = 0                   # inside a side of a scalar ?: (evaluated only if taken)

    # -- declarations ---------------------------------------------------------------------------

    def type(self, dtype: str) -> str:
        name = vector_type(dtype, self.lanes)
        self.c.vector_helpers.setdefault(name, vector_typedef(dtype, self.lanes))
        return name

    def function(self, op: str, dtype: str) -> str:
        """The name of vector function `op` on `dtype` lanes, its definition added."""
        short = SHORT_NAMES[dtype]
        self.type(dtype)
        self.type(mask_dtype(dtype))
        for name, text in vector_math.functions(op, short, self.lanes, self.fast_math):
            self.c.vector_helpers.setdefault(name, text)
        if op == "select":
            return vector_math.select_name(short, self.lanes)
        return vector_math.function_name(op, short, self.lanes, self.fast_math)

    # -- statements ----------------------------------------------------------------------------

    def stmt(self, node: Stmt) -> None:
        if isinstance(node, SeqStmt):
            for stmt in node.stmts:
                self.stmt(stmt)
        elif isinstance(node, For):               # the same bounds on every lane
            var, ctype = self.c.var_name(node.loop_var.name), dtypes.storage_type(
                node.loop_var.dtype)
            if node.kind == "unrolled" and isinstance(node.extent, IntImm):
                self.c.line(unroll_pragma(node.extent.value))
            end = node.extent if _is_zero(node.min) else simplify(node.min + node.extent)
            self.c.line(f"for ({ctype} {var} = {self.c.expr(node.min)}; {var} < "
                        f"{self.c.bound(end)}; ++{var}) {{")
            self.c.with_var(node.loop_var, self.c.ranges.loop(node.min, node.extent),
                            lambda: self.block(node.body))
            self.c.line("}")
        elif isinstance(node, IfThenElse):        # the condition is the same on every lane
            self.c.line(f"if ({self.c.expr(node.condition)}) {{")
            self.block(node.then_body)
            if node.else_body is not None:
                self.c.line("} else {")
                self.block(node.else_body)
            self.c.line("}")
        else:
            self.store(node)

    def block(self, node: Stmt) -> None:
        self.c.depth += 1
        self.stmt(node)
        self.c.depth -= 1

    def store(self, node: BufferStore) -> None:
        (index,) = node.indices
        self.unconditional = _unconditional_loads(node.value, self.var)
        value = self.vector(self.expr(node.value, None), node.buffer.dtype)
        self.c.line(f"*({self.type(node.buffer.dtype)}*)&{self.c.name(node.buffer.storage_name)}"
                    f"[{self.c.expr(index)}] = {value};")

    # -- expressions ---------------------------------------------------------------------------

    def vector(self, value: VectorValue, dtype: str) -> str:
        """`value` as a vector of `dtype` (a scalar broadcast: s - 0 keeps -0.0 and NaN)."""
        if value.vector:
            return value.text
        return f"(({value.text}) - ({self.type(dtype)}){{0}})"

    def mask(self, value: VectorValue, dtype: str) -> str:
        """`value` (bool) as a mask for lanes of `dtype`."""
        wanted = mask_dtype(dtype)
        if not value.vector:                       # a scalar bool: all ones or all zeros
            return f"(-({_CTYPES[wanted]})({value.text}) - ({self.type(wanted)}){{0}})"
        if value.dtype == wanted:
            return value.text
        return f"__builtin_convertvector({value.text}, {self.type(wanted)})"

    def expr(self, node: Expr, guard: tuple[str, str] | None) -> VectorValue:
        """`node` as a VectorValue; `guard` (mask text, mask dtype): the lanes where the
        scalar code would evaluate `node` (None: all)."""
        if self.var not in free_vars(node):
            return self.scalar(node, guard)
        method = getattr(self, "expr_" + type(node).__name__)
        return method(node, guard)

    def scalar(self, node: Expr, guard) -> VectorValue:
        # parenthesized: the scalar printer leaves its top operator bare (`c ? a : b`), and
        # this text becomes an operand (`v + (c ? a : b)`, not `(v + c) ? a : b`)
        text = f"({self.c.expr(node)})"
        risky = [load for load in collect(node, BufferLoad) if load not in self.unconditional]
        risky += [op for op in collect(node, BinaryOp)
                  if op.op in ("div", "floordiv", "floormod") and not is_float(op.dtype)]
        if guard is not None and risky:          # evaluated only if some lane needs it
            any_lane = self.function_any(guard[1])
            text = f"({any_lane}({guard[0]}) ? {text} : 0)"
        return VectorValue(text, node.dtype, False)

    def function_any(self, dtype: str) -> str:
        name = f"sched_vany_{SHORT_NAMES[dtype]}x{self.lanes}"
        vtype = self.type(dtype)
        self.c.vector_helpers.setdefault(name, (
            f"static inline int {name}({vtype} m) {{\n    int any = 0;\n"
            f"    for (int l = 0; l < {self.lanes}; ++l) any |= m[l] != 0;\n"
            f"    return any;\n}}\n"))
        return name

    def expr_Var(self, node: Var, guard) -> VectorValue:
        lanes = ", ".join(str(lane) for lane in range(self.lanes))
        return VectorValue(f"({self.c.var_name(node.name)} + ({self.type(node.dtype)}){{{lanes}}})",
                           node.dtype, True)

    def expr_BufferLoad(self, node: BufferLoad, guard) -> VectorValue:
        (index,) = node.indices
        buffer, dtype = self.c.name(node.buffer.storage_name), node.buffer.dtype
        if guard is None or node in self.unconditional:
            return VectorValue(f"*({self.type(dtype)}*)&{buffer}[{self.c.expr(index)}]",
                               dtype, True)
        mask = self.mask(VectorValue(guard[0], guard[1], True), dtype)
        return VectorValue(f"{self.masked_load(dtype)}({buffer}, {self.c.expr(index)}, {mask})",
                           dtype, True)

    def masked_load(self, dtype: str) -> str:
        name = f"sched_vload_masked_{SHORT_NAMES[dtype]}x{self.lanes}"
        self.type(mask_dtype(dtype))
        self.c.vector_helpers.setdefault(name, masked_load_source(
            name, self.type(dtype), _CTYPES[dtype], self.type(mask_dtype(dtype)), dtype,
            self.lanes))
        return name

    def expr_BinaryOp(self, node: BinaryOp, guard) -> VectorValue:
        a = self.expr(node.a, guard)
        if node.op in ("and", "or"):               # C evaluates b only where a decides not
            if not a.vector:
                return self.scalar_and_or(node.op, a, node.b, guard)
            b = self.expr(node.b, self.narrow(guard, a, node.op == "or"))
            text = f"({a.text} {_SYMBOL[node.op]} {self.mask(b, a.dtype)})"
            return VectorValue(text, a.dtype, True)
        b = self.expr(node.b, guard)
        dtype = node.a.dtype
        if node.op in ("min", "max"):            # as the scalar code: a < b ? a : b
            va, vb = self.vector(a, dtype), self.vector(b, dtype)
            return VectorValue(f"{self.min_max(node.op, dtype)}({va}, {vb})", dtype, True)
        if node.op == "div" and self.fast_math and not b.vector:
            # relaxed: x / s with s the same on every lane is x * (1 / s), one division per
            # vector loop iteration (gcc hoists it) instead of one per lane; its error
            # is stated in vector_math.py (1.5 ulp while 1 / s is normal)
            one = "1.0" if dtype == "float64" else "1.0f"
            return VectorValue(f"({a.text} * ({one} / {b.text}))", dtype, True)
        if node.op in WRAPPING_OPS and dtype in UNSIGNED_LANES:
            # gcc leaves signed lanes' overflow undefined as C does scalars': computed on
            # unsigned lanes, which wrap (int_ranges.py), the same instructions
            unsigned = self.type(UNSIGNED_LANES[dtype])
            text = f"(({unsigned}){self.vector(a, dtype)} {_SYMBOL[node.op]} " \
                   f"({unsigned}){self.vector(b, dtype)})"
            return VectorValue(f"(({self.type(dtype)}){text})", dtype, True)
        text = f"({a.text} {_SYMBOL[node.op]} {b.text})"
        if node.op in COMPARE_OPS:
            return VectorValue(text, mask_dtype(dtype), True)
        return VectorValue(text, dtype, True)

    def scalar_and_or(self, op: str, a: VectorValue, b: Expr, guard) -> VectorValue:
        """`a and b` / `a or b` where `a` is the same on every lane: as C's `&&` / `||`, `b`
        (its loads, its divisions) is evaluated only where `a` does not decide, a `?:` on `a`
        (helper-81: `L[i] != 0 and A[i * i, j] > 0` loaded whole vectors of rows past A's
        end where L[i] == 0)."""
        self.lazy += 1                  # nothing of b's hoisted out of the ?:
        right = self.expr(b, guard)
        self.lazy -= 1
        zero = f"({self.type(right.dtype)}){{0}}"
        decided = zero if op == "and" else f"~{zero}"
        sides = (right.text, decided) if op == "and" else (decided, right.text)
        return VectorValue(f"({a.text} ? {sides[0]} : {sides[1]})", right.dtype, True)

    def min_max(self, op: str, dtype: str) -> str:
        """The name of the vector min or max of `dtype` lanes, its definition added: a < b ? a
        : b as the scalar code (NaN and -0.0 come out the same; vminps does exactly this)."""
        if dtype in ("float32", "float64"):      # one minps/maxps on x86 (vector_math.py)
            return self.function(op, dtype)
        vtype, name = self.type(dtype), f"sched_v{op}_{SHORT_NAMES[dtype]}x{self.lanes}"
        compare = "<" if op == "min" else ">"
        choice = self.select("m", "a", "b", dtype).text
        mask_type = self.type(mask_dtype(dtype))
        self.c.vector_helpers.setdefault(name, (
            f"static inline {vtype} {name}({vtype} a, {vtype} b) {{\n"
            f"    {mask_type} m = a {compare} b;\n    return {_strip(choice)};\n}}\n"))
        return name

    def select(self, mask: str, true_text: str, false_text: str, dtype: str) -> VectorValue:
        if dtype.startswith("int"):
            blend = f"(({true_text}) & ({mask})) | (({false_text}) & ~({mask}))"
            return VectorValue(f"({blend})", dtype, True)
        return VectorValue(f"{self.function('select', dtype)}({mask}, {true_text}, "
                           f"{false_text})", dtype, True)

    def expr_Not(self, node: Not, guard) -> VectorValue:
        a = self.expr(node.a, guard)
        return VectorValue(f"~{a.text}", a.dtype, True)

    def expr_Select(self, node: Select, guard) -> VectorValue:
        condition = self.expr(node.condition, guard)
        dtype = node.dtype
        if not condition.vector:                  # C's ?: evaluates one side only
            self.lazy += 1
            true = self.vector(self.expr(node.true_value, guard), dtype)
            false = self.vector(self.expr(node.false_value, guard), dtype)
            self.lazy -= 1
            return VectorValue(f"({condition.text} ? {true} : {false})", dtype, True)
        condition = self.bind(condition)
        mask = self.mask(condition, dtype)
        true = self.vector(self.expr(node.true_value, self.narrow(guard, condition, False)),
                           dtype)
        false = self.vector(self.expr(node.false_value, self.narrow(guard, condition, True)),
                            dtype)
        return self.select(mask, true, false, dtype)

    def bind(self, mask: VectorValue, prefix: str = "sched_mask") -> VectorValue:
        """`mask` (or other lanes, named `prefix`_n) computed once before the statement, in a
        named local (it is used by both sides of a select and by the masked loads inside);
        not hoisted out of a side of a scalar `?:`, whose loads the scalar code may skip."""
        if self.lazy:
            return mask
        self.masks += 1
        name = f"{prefix}_{self.masks}"
        self.c.line(f"const {self.type(mask.dtype)} {name} = {_strip(mask.text)};")
        return VectorValue(name, mask.dtype, True)

    def narrow(self, guard, condition: VectorValue, negate: bool) -> tuple[str, str]:
        """The guard of one side of a select on `condition`."""
        text = f"~{condition.text}" if negate else condition.text
        if guard is None:
            return text, condition.dtype
        outer = self.mask(VectorValue(guard[0], guard[1], True), condition.dtype)
        return f"({outer} & {text})", condition.dtype

    def expr_Cast(self, node: Cast, guard) -> VectorValue:
        value = self.expr(node.value, guard)
        if node.dtype == node.value.dtype:
            return value
        if node.value.dtype == "bool":          # all ones -> 1
            value = VectorValue(f"(-{self.mask(value, node.dtype)})", mask_dtype(node.dtype),
                                True)
            if value.dtype == node.dtype:
                return value
        if is_int(node.dtype) and is_float(node.value.dtype):
            return self.saturating_cast(value, node.value.dtype, node.dtype)
        return VectorValue(f"__builtin_convertvector({value.text}, {self.type(node.dtype)})",
                           node.dtype, True)

    def saturating_cast(self, value: VectorValue, source: str, target: str) -> VectorValue:
        """Float lanes converted to integer lanes as the scalar helper converts one
        (dtypes.saturation_bounds: NaN to 0, beyond the range to its nearest end; C leaves
        the conversion undefined there): out-of-range lanes are converted from 0, then
        replaced."""
        low, high = (dtypes.float_literal(v, source)
                     for v in dtypes.saturation_bounds(source, target))
        lanes = self.bind(VectorValue(self.vector(value, source), source, True),
                          "sched_lanes").text
        info = np.iinfo(target)

        def where(condition: str) -> str:        # a mask of `target` lanes
            return self.mask(VectorValue(condition, mask_dtype(source), True), target)

        def every_lane(limit) -> str:
            literal = dtypes.int_literal(int(limit), target)
            return self.vector(VectorValue(literal, target, False), target)

        inside = self.mask(VectorValue(f"(({lanes} > {low}) & ({lanes} < {high}))",
                                       mask_dtype(source), True), source)
        safe = self.select(inside, lanes, f"({self.type(source)}){{0}}", source).text
        converted = f"__builtin_convertvector({safe}, {self.type(target)})"
        below = self.select(where(f"({lanes} <= {low})"), every_lane(info.min), converted,
                            target).text
        return self.select(where(f"({lanes} >= {high})"), every_lane(info.max), below, target)

    def expr_Call(self, node: Call, guard) -> VectorValue:
        args = [self.vector(self.expr(arg, guard), node.dtype) for arg in node.args]
        return VectorValue(f"{self.function(node.op, node.dtype)}({', '.join(args)})",
                           node.dtype, True)

    def expr_FloatImm(self, node: FloatImm, guard) -> VectorValue:   # never reached: scalar
        return self.scalar(node, guard)

    def expr_IntImm(self, node: IntImm, guard) -> VectorValue:
        return self.scalar(node, guard)


def _is_zero(node: Expr) -> bool:
    return isinstance(node, IntImm) and node.value == 0


def _strip(text: str) -> str:
    """`text` without one pair of parentheses around all of it."""
    if text.startswith("(") and text.endswith(")"):
        depth = 0
        for position, char in enumerate(text):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0 and position < len(text) - 1:
                return text
        return text[1:-1]
    return text


def _unconditional_loads(expr: Expr, var: Var) -> set[BufferLoad]:
    """The loads the scalar code performs whenever it evaluates `expr`: not those in a side
    of a select or in the right operand of `and`/`or` (C's `?:`, `&&`, `||` skip them)."""
    found: set[BufferLoad] = set()

    def visit(node: Expr) -> None:
        if isinstance(node, BufferLoad):
            found.add(node)
        if isinstance(node, Select):
            visit(node.condition)
        elif isinstance(node, BinaryOp) and node.op in ("and", "or"):
            visit(node.a)
        else:
            for child in _children(node):
                visit(child)

    visit(expr)
    return found


def _children(node: Expr) -> tuple[Expr, ...]:
    if isinstance(node, BinaryOp):
        return node.a, node.b
    if isinstance(node, (Not,)):
        return (node.a,)
    if isinstance(node, Cast):
        return (node.value,)
    if isinstance(node, Call):
        return node.args
    if isinstance(node, BufferLoad):
        return node.indices
    return ()


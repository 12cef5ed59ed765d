"""Vectorized loops on the C target: which ones become explicit SIMD code, and how wide.

gcc's auto-vectorizer leaves a small accumulator array (a "local" cache of a matmul tile) in
memory and calls libm once per element for `expf`, so a `vectorized` loop is emitted with GCC
vector types of the host's width (`host_isa()`: 16 float32 lanes in a zmm register on
AVX-512, 8 on AVX2, 4 on SSE/NEON) when its body allows it (vector_codegen.py emits it):

    for (int32_t ji = 0; ji < 16; ji += 8) {      // vectorized: 8 lanes
        *(sched_f32x8*)&C_local[ii * 16 + ji] = *(sched_f32x8*)&C_local[ii * 16 + ji]
            + A[i * 1024 + k] * *(sched_f32x8*)&B_global[k * 16 + ji];
    }

Allowed in the body: stores of float32/float64/int32 at contiguous indices (coefficient 1 in
the loop variable), `if` statements whose condition does not depend on the loop variable,
serial or unrolled loops whose bounds do not (a reduction loop inside: all lanes step through
it together, each lane in its own order), and expressions of: contiguous loads, values that
do not depend on the loop variable (computed once, broadcast), the loop variable itself (lanes
i, i+1, ...), + - * (and / of floats), min/max, comparisons, and/or/not, selects
(`if_then_else`), casts among float32, float64, int32 and int64 and from bool (a comparison
used as a value: 1 or 0), and the math functions of vector_math.py. Anything else (a strided
or gathered access, integer division, a math function without a vector version) keeps the
whole loop scalar with `#pragma omp simd`, so the result never changes.

The lane count is the host's for the narrowest stored type; a constant extent that is not a
multiple of it uses the widest narrower vector (at least 16 bytes) that divides it, else runs
the remainder as a scalar loop after the vector one.
"""

from __future__ import annotations

from dataclasses import dataclass

from sched.c.isa import VectorISA, host_isa
from sched.c.vector_math import FLOAT32_FUNCTIONS, FLOAT64_FUNCTIONS
from sched.ir.dtype import bits
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

ELEMENT_BYTES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8}
SHORT_NAMES = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64"}
STORED = ("float32", "float64", "int32")          # element types a vector store may have
MIN_VECTOR_BYTES = 16                             # narrower vectors are not worth it
VECTOR_MATH = {"float32": FLOAT32_FUNCTIONS, "float64": FLOAT64_FUNCTIONS}
_ARITHMETIC = ("add", "sub", "mul", "min", "max")


def mask_dtype(dtype: str) -> str:
    """The integer type of a comparison of `dtype` lanes (GCC: all ones where true)."""
    return "int32" if ELEMENT_BYTES[dtype] == 4 else "int64"


# the lanes signed integer arithmetic is computed on where it wraps (int_ranges.py)
UNSIGNED_LANES = {"int32": "uint32", "int64": "uint64"}
_LANE_NAMES = {**SHORT_NAMES, "uint32": "u32", "uint64": "u64"}
_LANE_TYPES = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t",
               "uint32": "uint32_t", "uint64": "uint64_t"}


def vector_type(dtype: str, lanes: int) -> str:
    """The C name of the vector type of `lanes` elements of `dtype`: `sched_f32x8` (`dtype`
    one of SHORT_NAMES, or of UNSIGNED_LANES' values)."""
    return f"sched_{_LANE_NAMES[dtype]}x{lanes}"


def vector_typedef(dtype: str, lanes: int) -> str:
    """The typedef of `vector_type(dtype, lanes)`, unaligned (aligned to its element, so any
    element's address may be loaded from)."""
    ctype, size = _LANE_TYPES[dtype], bits(dtype) // 8
    return (f"typedef {ctype} {vector_type(dtype, lanes)} "
            f"__attribute__((vector_size({size * lanes}), aligned({size})));")


@dataclass(frozen=True)
class VectorPlan:
    """How to emit a vectorized loop: `lanes` per vector iteration over its first
    `vector_extent` iterations, the rest (fewer than `lanes`) as a scalar loop."""

    lanes: int
    vector_extent: int


def coefficient(expr: Expr, var: Var) -> int | None:
    """The integer c with expr = c * var + (terms without var), or None when `expr` is not of
    that form (var inside a division, a product of var with a non-constant...)."""
    if isinstance(expr, Var):
        return 1 if expr == var else 0
    if isinstance(expr, IntImm):
        return 0
    if var not in free_vars(expr):
        return 0
    if isinstance(expr, Cast) and expr.dtype in ("int32", "int64") \
            and expr.value.dtype in ("int32", "int64"):
        return coefficient(expr.value, var)
    if isinstance(expr, BinaryOp):
        a, b = coefficient(expr.a, var), coefficient(expr.b, var)
        if a is None or b is None:
            return None
        if expr.op == "add":
            return a + b
        if expr.op == "sub":
            return a - b
        if expr.op == "mul" and isinstance(expr.b, IntImm):
            return a * expr.b.value
        if expr.op == "mul" and isinstance(expr.a, IntImm):
            return b * expr.a.value
    return None


def stmt_allowed(stmt: Stmt, var: Var) -> bool:
    """Whether `stmt`, the body of a loop over `var`, can run as vector code."""
    if isinstance(stmt, SeqStmt):
        return all(stmt_allowed(s, var) for s in stmt.stmts)
    if isinstance(stmt, IfThenElse):
        return var not in free_vars(stmt.condition) and stmt_allowed(stmt.then_body, var) \
            and (stmt.else_body is None or stmt_allowed(stmt.else_body, var))
    if isinstance(stmt, For):     # runs for all lanes at once: legal, as no dependence is
        # carried by the vectorized loop (what `vectorize` checked), so each lane keeps its order
        return stmt.kind in ("serial", "unrolled") \
            and var not in (*free_vars(stmt.min), *free_vars(stmt.extent)) \
            and stmt_allowed(stmt.body, var)
    if isinstance(stmt, BufferStore):
        (index,) = stmt.indices
        return stmt.buffer.dtype in STORED and coefficient(index, var) == 1 \
            and stmt.value.dtype == stmt.buffer.dtype and expr_allowed(stmt.value, var)
    return False


def expr_allowed(expr: Expr, var: Var) -> bool:
    """Whether `expr` can be computed as vector code in a loop over `var`."""
    if var not in free_vars(expr):
        return expr.dtype in ELEMENT_BYTES or expr.dtype == "bool"   # computed once, broadcast
    if isinstance(expr, Var):
        return expr.dtype in ("int32", "int64")
    if isinstance(expr, BufferLoad):
        (index,) = expr.indices
        return expr.buffer.dtype in ELEMENT_BYTES and coefficient(index, var) == 1
    if isinstance(expr, BinaryOp):
        operands = expr_allowed(expr.a, var) and expr_allowed(expr.b, var)
        dtype = expr.a.dtype
        if expr.op in ("and", "or"):
            return operands
        if expr.op in COMPARE_OPS or expr.op in _ARITHMETIC:
            return operands and dtype in ELEMENT_BYTES
        return operands and expr.op == "div" and dtype in ("float32", "float64")
    if isinstance(expr, Not):
        return expr_allowed(expr.a, var)
    if isinstance(expr, Select):
        return expr.dtype in ELEMENT_BYTES and expr_allowed(expr.condition, var) \
            and expr_allowed(expr.true_value, var) and expr_allowed(expr.false_value, var)
    if isinstance(expr, Cast):               # a bool (a comparison) becomes 1 or 0
        return expr.dtype in ELEMENT_BYTES and expr_allowed(expr.value, var) \
            and (expr.value.dtype in ELEMENT_BYTES or expr.value.dtype == "bool")
    if isinstance(expr, Call):
        return expr.op in VECTOR_MATH.get(expr.dtype, ()) \
            and all(expr_allowed(arg, var) for arg in expr.args)
    return isinstance(expr, (FloatImm, IntImm))


def _stored_dtypes(stmt: Stmt) -> set[str]:
    if isinstance(stmt, SeqStmt):
        return set().union(*(_stored_dtypes(s) for s in stmt.stmts))
    if isinstance(stmt, IfThenElse):
        other = _stored_dtypes(stmt.else_body) if stmt.else_body is not None else set()
        return _stored_dtypes(stmt.then_body) | other
    if isinstance(stmt, For):
        return _stored_dtypes(stmt.body)
    return {stmt.buffer.dtype} if isinstance(stmt, BufferStore) else set()


def _compares_doubles(stmt: Stmt) -> bool:
    """Whether `stmt` compares float64 values: a min, a max, a comparison, a select."""
    compare = ("min", "max", "lt", "le", "gt", "ge", "eq", "ne")
    return any(e.op in compare and e.a.dtype == "float64" for e in collect(stmt, BinaryOp)) \
        or any(e.dtype == "float64" for e in collect(stmt, Select))


def plan_vector_loop(loop: For, isa: VectorISA | None = None) -> VectorPlan | None:
    """How to emit `loop` (a vectorized loop) as vector code for `isa` (the host's by
    default), or None to keep it scalar."""
    if not isinstance(loop.extent, IntImm) or not isinstance(loop.min, IntImm):
        return None
    if not stmt_allowed(loop.body, loop.loop_var):
        return None
    dtypes = _stored_dtypes(loop.body)
    if not dtypes:
        return None
    element = min(ELEMENT_BYTES[d] for d in dtypes)
    vector_bytes = (isa or host_isa()).vector_bytes
    if element < 8 and _compares_doubles(loop.body):
        # float64 comparisons (min, max, selects) in the lanes of narrower stores: vectors
        # of one register at most (gcc 12 failed with an internal error on a min of 16
        # doubles, 128 bytes, for an int32 store: audit helper-167)
        return vector_width(loop.extent.value, 8, vector_bytes)
    return vector_width(loop.extent.value, element, vector_bytes)


def vector_width(extent: int, element: int, vector_bytes: int) -> VectorPlan | None:
    """The vectors a loop of `extent` elements of `element` bytes runs as, with registers of
    `vector_bytes`: the widest (at least MIN_VECTOR_BYTES) that divides the extent, else full
    vectors and a scalar remainder when the extent holds one, else None (scalar). The
    autoscheduler's cost model asks the same (cost/cpu_estimate.py)."""
    full = vector_bytes // element
    lanes = full
    while lanes * element >= MIN_VECTOR_BYTES:
        if extent % lanes == 0:
            return VectorPlan(lanes, extent)
        lanes //= 2
    if full * element >= MIN_VECTOR_BYTES and extent > full:
        return VectorPlan(full, extent - extent % full)
    return None

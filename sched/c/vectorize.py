"""Vectorized loops on the C target: which ones become explicit SIMD code, and how wide.

gcc's auto-vectorizer leaves a small accumulator array (a "local" cache of a matmul tile) in
memory, so a register-tiled kernel runs at a fraction of its speed. A `vectorized` loop is
therefore emitted with GCC vector types (`sched_f32x8`, 32 bytes) when its body allows it:

    for (int32_t ji = 0; ji < 16; ji += 8) {      // vectorized, 8 lanes
        *(sched_f32x8*)&C_local[ii * 16 + ji] = *(sched_f32x8*)&C_local[ii * 16 + ji]
            + A[i * 1024 + k] * *(sched_f32x8*)&B_global[k * 16 + ji];
    }

Allowed: a body of stores, a constant extent that is a multiple of the lane count, and
expressions of + - * / over float32/float64 values where every load and store either does not
depend on the loop variable (a scalar, broadcast by gcc) or depends on it with coefficient 1
(contiguous lanes). Anything else (a strided or gathered access, the loop variable used as a
value, a call, a select) keeps the scalar loop with `#pragma omp simd`.
"""

from __future__ import annotations

from sched.ir.functor import free_vars
from sched.ir.nodes import (
    BinaryOp,
    BufferLoad,
    BufferStore,
    Expr,
    FloatImm,
    For,
    IntImm,
    SeqStmt,
    Stmt,
    Var,
)

VECTOR_BYTES = 32
ELEMENT_BYTES = {"float32": 4, "float64": 8}
VECTOR_TYPES = {"float32": "sched_f32x8", "float64": "sched_f64x4"}
ARITHMETIC = ("add", "sub", "mul", "div")


def vector_typedefs() -> str:
    """The GCC vector types (unaligned: `aligned` at element size allows any address)."""
    return ("typedef float sched_f32x8 __attribute__((vector_size(32), aligned(4)));\n"
            "typedef double sched_f64x4 __attribute__((vector_size(32), aligned(8)));\n")


def coefficient(expr: Expr, var: Var) -> int | None:
    """The integer c with expr = c * var + (terms without var), or None when `expr` is not of
    that form (var inside a division, a product of var with a non-constant...)."""
    if isinstance(expr, Var):
        return 1 if expr == var else 0
    if isinstance(expr, IntImm):
        return 0
    if var not in free_vars(expr):
        return 0
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


def _stores(body: Stmt) -> list[BufferStore] | None:
    if isinstance(body, BufferStore):
        return [body]
    if isinstance(body, SeqStmt) and all(isinstance(s, BufferStore) for s in body.stmts):
        return list(body.stmts)
    return None


def _expr_allowed(expr: Expr, var: Var, dtype: str) -> bool:
    if var not in free_vars(expr):
        return True                       # a scalar: gcc broadcasts it
    if isinstance(expr, BufferLoad):
        (index,) = expr.indices
        return expr.buffer.dtype == dtype and coefficient(index, var) == 1
    if isinstance(expr, BinaryOp) and expr.op in ARITHMETIC and expr.dtype == dtype:
        return _expr_allowed(expr.a, var, dtype) and _expr_allowed(expr.b, var, dtype)
    return isinstance(expr, FloatImm)


def vector_lanes(loop: For) -> int | None:
    """The number of lanes to emit `loop` (a vectorized loop) with, or None to keep it
    scalar."""
    if not isinstance(loop.extent, IntImm) or not isinstance(loop.min, IntImm):
        return None
    stores = _stores(loop.body)
    if not stores:
        return None
    dtype = stores[0].buffer.dtype
    if dtype not in ELEMENT_BYTES:
        return None
    lanes = VECTOR_BYTES // ELEMENT_BYTES[dtype]
    if loop.extent.value % lanes != 0:
        return None
    for store in stores:
        (index,) = store.indices
        if store.buffer.dtype != dtype or coefficient(index, loop.loop_var) != 1:
            return None
        if not _expr_allowed(store.value, loop.loop_var, dtype):
            return None
    return lanes

"""The tensor-expression DSL (TVM's `te`): `from sched import compute as te`.

    n = te.var("n")
    A = te.placeholder((n, 64), "float32", name="A")
    k = te.reduce_axis((0, 64), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    func = te.create_prim_func([A, B])
"""

from sched.compute import library as ops
from sched.compute.comm_reducer import comm_reducer, max_value, min_value
from sched.compute.create import create_prim_func
from sched.compute.intrinsics import (
    abs,
    acos,
    all,
    any,
    asin,
    atan,
    atan2,
    cast,
    clz,
    const,
    copysign,
    cos,
    cosh,
    equal,
    erf,
    exp,
    exp2,
    fmod,
    hypot,
    if_then_else,
    ldexp,
    log,
    log1p,
    log2,
    log10,
    not_equal,
    popcount,
    power,
    q_multiply_shift,
    reinterpret,
    rsqrt,
    sigmoid,
    sin,
    sinh,
    sqrt,
    tan,
    tanh,
)
from sched.compute.reduction import Reduce, max, min, sum
from sched.compute.tensor import ReduceAxis, Tensor, compute, placeholder, reduce_axis, var

__all__ = [
    "Reduce", "ReduceAxis", "Tensor", "abs", "acos", "all", "any", "asin", "atan", "atan2",
    "cast", "clz", "comm_reducer", "compute", "const", "copysign", "cos", "cosh",
    "create_prim_func",
    "equal", "erf", "exp", "exp2", "fmod", "hypot", "if_then_else", "ldexp", "log", "log10",
    "log1p", "log2", "max", "max_value", "min", "min_value", "not_equal", "ops", "placeholder",
    "popcount", "power", "q_multiply_shift", "reduce_axis", "reinterpret", "rsqrt", "sigmoid",
    "sin", "sinh", "sqrt", "sum", "tan", "tanh", "var",
]

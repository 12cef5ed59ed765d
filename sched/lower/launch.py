"""A GPU kernel's launch configuration, and the integer arithmetic that sizes its grid at a call.

The lowering reads it off the loops bound to blockIdx/threadIdx (gpu_threads.py); the CUDA
code generator and runtime use it.

The grid's extents are IR expressions: with symbolic dims (`n`) the number of blocks is known
only when the arguments are, so `LaunchConfig.grid_dims` evaluates them from the dims bound at
each call. The block is fixed at build time (it decides registers and shared memory).

>>> from sched.ir import IntImm, Var
>>> n = Var("n")
>>> launch = LaunchConfig(grid=((n + 127) // 128, 1, 1), block=(128, 1, 1))
>>> launch.grid_dims({n: 1000})
(8, 1, 1)
>>> str(launch)
'grid ((n + 127) // 128, 1, 1), block (128, 1, 1), 0 bytes of dynamic shared memory'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sched.ir.dtype import is_int
from sched.ir.nodes import BinaryOp, Cast, Expr, IntImm, Not, Select, Var

MAX_THREADS_PER_BLOCK = 1024
MAX_GRID = (2**31 - 1, 65535, 65535)   # blocks along x, y, z

_OPERATIONS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b,   # Python's // and % are floor division and modulo,
    "floormod": lambda a, b: a % b,    # as the IR's are
    "min": min,
    "max": max,
    "eq": lambda a, b: int(a == b),
    "ne": lambda a, b: int(a != b),
    "lt": lambda a, b: int(a < b),
    "le": lambda a, b: int(a <= b),
    "gt": lambda a, b: int(a > b),
    "ge": lambda a, b: int(a >= b),
    "and": lambda a, b: int(bool(a) and bool(b)),
    "or": lambda a, b: int(bool(a) or bool(b)),
}


def evaluate_int(expr: Expr, values: Mapping[Var, int]) -> int:
    """The value of integer expression `expr` with each variable taken from `values`.

    Handles constants, variables, `+ - * // %` (floor semantics), min, max, comparisons and
    `and`/`or`/`not` (1 or 0), `T.if_then_else` (a tile's piecewise size: compute_at of a
    producer over a symbolic extent, a padded layout's `T.if_then_else(n >= 4, 4, n)`) and
    casts between integer types. Raises ValueError for an unbound variable or a division by
    zero, TypeError for any other expression.
    """
    if isinstance(expr, IntImm):
        return expr.value
    if isinstance(expr, Var):
        if expr not in values:
            bound = ", ".join(v.name for v in values) or "none"
            raise ValueError(f"evaluate_int: variable '{expr.name}' has no value (bound: "
                             f"{bound})")
        return int(values[expr])
    if isinstance(expr, Cast) and (is_int(expr.dtype) or expr.dtype == "bool"):
        value = evaluate_int(expr.value, values)
        return int(bool(value)) if expr.dtype == "bool" else value
    if isinstance(expr, Select):
        taken = expr.true_value if evaluate_int(expr.condition, values) else expr.false_value
        return evaluate_int(taken, values)
    if isinstance(expr, Not):
        return int(not evaluate_int(expr.a, values))
    if isinstance(expr, BinaryOp) and expr.op in _OPERATIONS:
        a, b = evaluate_int(expr.a, values), evaluate_int(expr.b, values)
        if expr.op in ("floordiv", "floormod") and b == 0:
            raise ValueError(f"evaluate_int: division by zero in {expr}")
        return _OPERATIONS[expr.op](a, b)
    raise TypeError(f"evaluate_int: cannot evaluate {type(expr).__name__} {expr}: expected "
                    f"integer constants, variables, + - * // % min max, comparisons, "
                    f"T.if_then_else")


def _as_expr(extent) -> Expr:
    if isinstance(extent, Expr):
        return extent
    if isinstance(extent, int) and not isinstance(extent, bool):
        return IntImm(extent)
    raise TypeError(f"LaunchConfig: a grid extent must be an IR expression or an int, got "
                    f"{type(extent).__name__} {extent!r}")


@dataclass(frozen=True)
class LaunchConfig:
    """How a kernel is launched: `grid` (blocks along x, y, z: IR expressions over the
    function's symbolic dims and integer scalar parameters; ints are taken as constants),
    `block` (threads along x, y, z) and `dynamic_shared_bytes` (the `extern __shared__` size).

    Raises ValueError for a block of more than 1024 threads or a non-positive extent.
    """

    grid: tuple[Expr, Expr, Expr]
    block: tuple[int, int, int]
    dynamic_shared_bytes: int = 0

    def __post_init__(self) -> None:
        if len(self.grid) != 3 or len(self.block) != 3:
            raise ValueError(f"LaunchConfig: grid and block need 3 extents (x, y, z), got "
                             f"{len(self.grid)} and {len(self.block)}")
        object.__setattr__(self, "grid", tuple(_as_expr(g) for g in self.grid))
        object.__setattr__(self, "block", tuple(self.block))
        if not all(isinstance(b, int) and b > 0 for b in self.block):
            raise ValueError(f"LaunchConfig: block extents must be positive ints, got "
                             f"{self.block}")
        if self.threads_per_block > MAX_THREADS_PER_BLOCK:
            raise ValueError(f"LaunchConfig: block {self.block} has {self.threads_per_block} "
                             f"threads, more than CUDA's {MAX_THREADS_PER_BLOCK}: bind loops "
                             f"with smaller extents to threadIdx")
        if not isinstance(self.dynamic_shared_bytes, int) or self.dynamic_shared_bytes < 0:
            raise ValueError(f"LaunchConfig: dynamic_shared_bytes must be an int >= 0, got "
                             f"{self.dynamic_shared_bytes!r}")

    @property
    def threads_per_block(self) -> int:
        x, y, z = self.block
        return x * y * z

    def grid_dims(self, values: Mapping[Var, int]) -> tuple[int, int, int]:
        """The number of blocks along x, y, z for these values of the variables.

        A zero extent is returned as is (there is nothing to launch), as is a negative one
        (a loop `range(2, n)` at n = 1 runs no iteration either: audit helper-158); raises
        ValueError for one beyond CUDA's limits (2^31 - 1 along x, 65535 along y and z).
        """
        dims = tuple(max(0, evaluate_int(g, values)) for g in self.grid)
        for axis, (dim, limit) in enumerate(zip(dims, MAX_GRID)):
            if not 0 <= dim <= limit:
                given = ", ".join(f"{v.name} = {n}" for v, n in values.items())
                raise ValueError(
                    f"grid extent {'xyz'[axis]} = {self.grid[axis]} is {dim} ({given}): it "
                    f"must lie in [0, {limit}]; bind the loop with the most blocks to "
                    f"blockIdx.x (a function built unscheduled got the default schedule, "
                    f"whose grid axes suit typical sizes: schedule it by hand for these)")
        return dims

    def __str__(self) -> str:
        grid = ", ".join(str(g) for g in self.grid)
        block = ", ".join(str(b) for b in self.block)
        return (f"grid ({grid}), block ({block}), {self.dynamic_shared_bytes} bytes of dynamic "
                f"shared memory")

"""Every node of sched's IR: expressions, statements, buffers, blocks and functions.

Nodes are frozen, slotted dataclasses: `==` and `hash` are structural, and a pass builds new
nodes instead of mutating old ones. Sequences are tuples. Variables and buffers are identified
by name (and type), so names are unique within their scope: the printer prints them as written
and the parser reads them back, which is what makes `parse(print(f)) == f` hold.

Each class shows its printed form (see `printer.py`) in a comment.

Expressions overload Python's operators (`a + b`, `a * 2`, `i < n`) so that the compute DSL and
the passes can write `i * 4 + j` (built by `builders.py`). `a == b` builds the comparison too,
whose truth value is structural equality (`equality.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sched.ir.dtype import (
    INDEX_DTYPE,
    bits,
    check_dtype,
)
from sched.ir.memo import identity_cache

# a tuple of ints is TVM's list-valued loop annotation (`software_pipeline_stage: [0, 0, 1]`)
AnnotationValue = int | float | str | bool | tuple[int, ...]
Annotations = tuple[tuple[str, AnnotationValue], ...]

ARITH_OPS = ("add", "sub", "mul", "div", "floordiv", "floormod", "min", "max")
COMPARE_OPS = ("eq", "ne", "lt", "le", "gt", "ge")
LOGIC_OPS = ("and", "or")
MATH_FUNCTIONS = ("exp", "log", "sqrt", "rsqrt", "tanh", "erf", "abs", "sigmoid", "pow",
                  "sin", "cos", "floor", "ceil", "round", "exp2", "log2", "log10", "log1p",
                  "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
                  "atan2", "fmod", "hypot", "copysign", "nextafter", "ldexp")
# the math intrinsics of two operands (of one float dtype); the others take one, but for
# `T.ldexp(x, e)`: x * 2**e of a float x and an int32 e (sched/ir/bit_intrinsics.py)
BINARY_MATH = ("pow", "atan2", "fmod", "hypot", "copysign", "nextafter")
# bit counts of an integer's two's complement pattern, TVM's: `T.popcount(x)` (of x's dtype),
# `T.clz(x)` (int32; the width for 0); and `T.reinterpret("float32", x)`: the bits of x as a
# value of another dtype of the same width (sched/ir/bit_intrinsics.py)
BIT_FUNCTIONS = ("popcount", "clz")
REINTERPRET = "reinterpret"
# GPU intrinsics the lowering emits for the CUDA target only (never in block IR):
# `T.shfl_down_sync(value, offset, lanes, width)` is `__shfl_down_sync` over the first `lanes`
# lanes of the warp, in segments of `width` lanes (lower/cross_thread_reduction.py)
GPU_INTRINSICS = ("shfl_down_sync",)
# integer intrinsics, TVM's names: `T.bitwise_and(a, b)`, `T.shift_left(a, b)`, `T.bitwise_not(a)`
INT_FUNCTIONS = ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
                 "shift_left", "shift_right")
# opaque calls (TVM's names): `T.call_extern("float32", "f", x, A.data)` calls the C or CUDA
# function `f`, whose code the user gives to `sched.build(..., extern_c=...)`; `T.call_packed`
# likewise (an int32 result); `T.call_pure_extern` a pure function of its scalar arguments. A
# block that makes a call_extern/call_packed or takes an address (`T.address_of(A[i, j])`,
# `A.data`) is opaque: its accesses are its declared regions (schedule/opaque_blocks.py)
EXTERN_CALLS = ("call_extern", "call_packed", "call_pure_extern")
IMPURE_CALLS = ("call_extern", "call_packed")
FOR_KINDS = ("serial", "parallel", "vectorized", "unrolled", "thread_binding")
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z",
               "threadIdx.x", "threadIdx.y", "threadIdx.z",
               "vthread", "vthread.x", "vthread.y", "vthread.z")
# virtual threads (TVM's register tiling): checked and lowered as serial loops on both targets
VTHREAD_TAGS = ("vthread", "vthread.x", "vthread.y", "vthread.z")
# tensor-core fragments (TVM's names): in block IR each is private to a thread, as "local" is
# (every thread holds the whole tile: the reference semantics the C target runs)
FRAGMENT_SCOPES = ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator")
# mma.sync operands and accumulators (TVM's "warp"): in block IR private to a thread too, each
# holding whole 16x16 tiles; on the GPU each lane holds its part of every tile (cuda/mma.py)
WARP_SCOPE = "warp"
TENSOR_CORE_SCOPES = (*FRAGMENT_SCOPES, WARP_SCOPE)
SCOPES = ("global", "shared", "local", *TENSOR_CORE_SCOPES)
# TVM's "shared.dyn" (shared memory the launch sizes) is "shared": per block, as shared is; the
# CUDA target allocates each block's shared memory statically, or dynamically past 48 KB
# (sched/cuda/runtime.py). Read wherever a scope is given (scripts, primitives' arguments,
# intrinsics), printed as "shared".
SCOPE_ALIASES = {"shared.dyn": "shared"}


def canonical_scope(scope):
    """`scope` with TVM's aliases (SCOPE_ALIASES) read as sched's scope; anything else as is
    (the caller checks it against SCOPES)."""
    return SCOPE_ALIASES.get(scope, scope) if isinstance(scope, str) else scope
# scan and opaque variables keep their order under every schedule (schedule/ordered_axes.py)
ITER_KINDS = ("spatial", "reduce", "scan", "opaque")
# the loop annotation that marks the outer loop of a warp (tensor-core) intrinsic's nest, which
# tensorize puts there (sched/tensor_intrin/cuda.py) and the CUDA target emits as one call
WARP_INTRINSIC = "warp_intrinsic"


def warp_intrinsic(loop) -> str | None:
    """The call a loop stands for when it is the outer loop of a warp intrinsic, else None."""
    return dict(loop.annotations).get(WARP_INTRINSIC)


def is_thread_private(scope: str) -> bool:
    """Whether each thread has its own copy of a buffer of `scope` ("local", the wmma
    fragments and "warp")."""
    return scope == "local" or scope in TENSOR_CORE_SCOPES


class Node:
    """Base of every IR node."""

    __slots__ = ()

    def script(self) -> str:
        """This node as TVMScript-style text."""
        from sched.ir.printer import to_script

        return to_script(self)

    def __str__(self) -> str:
        return self.script()


# --------------------------------------------------------------------------------------------
# Expressions


class Expr(Node):
    """Base of every expression. Subclasses have a `dtype`."""

    __slots__ = ()
    dtype: str

    def __add__(self, other): return binary("add", self, other)
    def __radd__(self, other): return binary("add", other, self)
    def __sub__(self, other): return binary("sub", self, other)
    def __rsub__(self, other): return binary("sub", other, self)
    def __mul__(self, other): return binary("mul", self, other)
    def __rmul__(self, other): return binary("mul", other, self)
    def __truediv__(self, other): return binary("div", self, other)
    def __rtruediv__(self, other): return binary("div", other, self)
    def __floordiv__(self, other): return binary("floordiv", self, other)
    def __rfloordiv__(self, other): return binary("floordiv", other, self)
    def __mod__(self, other): return binary("floormod", self, other)
    def __rmod__(self, other): return binary("floormod", other, self)
    def __neg__(self): return binary("sub", const(0, self.dtype), self)
    def __lt__(self, other): return binary("lt", self, other)
    def __le__(self, other): return binary("le", self, other)
    def __gt__(self, other): return binary("gt", self, other)
    def __ge__(self, other): return binary("ge", self, other)
    def __and__(self, other): return bitwise("and", self, other)
    def __rand__(self, other): return bitwise("and", other, self)
    def __or__(self, other): return bitwise("or", self, other)
    def __ror__(self, other): return bitwise("or", other, self)
    def __xor__(self, other): return integer_call("bitwise_xor", self, other)
    def __rxor__(self, other): return integer_call("bitwise_xor", other, self)
    def __invert__(self):
        return Not(self) if self.dtype == "bool" else Call("bitwise_not", (self,), self.dtype)
    def __pow__(self, other): return power(self, other)
    def __rpow__(self, other): return power(other, self)
    def __lshift__(self, other): return integer_call("shift_left", self, other)
    def __rlshift__(self, other): return integer_call("shift_left", other, self)
    def __rshift__(self, other): return integer_call("shift_right", self, other)
    def __rrshift__(self, other): return integer_call("shift_right", other, self)

    def astype(self, dtype: str) -> Expr:
        """This expression converted to `dtype` (itself when it already has it)."""
        return self if check_dtype(dtype) == self.dtype else Cast(dtype, self)

    def __bool__(self):
        raise TypeError(
            "an IR expression has no truth value while the program is being built: use "
            "sched.ir.logical_and(a, b) / logical_or instead of 'and'/'or', and split chained "
            "comparisons such as 0 <= i < n into two comparisons")


@dataclass(frozen=True, slots=True)
class Var(Expr):
    """A loop, block-iteration, let-bound or symbolic variable. Printed: `i`."""

    name: str
    dtype: str = INDEX_DTYPE


@dataclass(frozen=True, slots=True)
class IntImm(Expr):
    """An integer or boolean constant. Printed: `5`, `T.int8(5)`, `T.bool(True)`."""

    value: int
    dtype: str = INDEX_DTYPE


@dataclass(frozen=True, slots=True, eq=False)
class FloatImm(Expr):
    """A floating-point constant. Printed: `T.float32(0.5)`, `T.float32("inf")`.

    Equality is structural with NaN equal to NaN (a NaN constant round-trips through the
    printer and parser)."""

    value: float
    dtype: str = "float32"

    def __eq__(self, other) -> bool:
        if not isinstance(other, FloatImm) or other.dtype != self.dtype:
            return False
        return self.value == other.value or (self.value != self.value
                                             and other.value != other.value)

    def __hash__(self) -> int:
        return hash(("FloatImm", self.dtype, "nan" if self.value != self.value else self.value))


@dataclass(frozen=True, slots=True)
class Cast(Expr):
    """A conversion. Printed: `T.Cast("float16", x)`."""

    dtype: str
    value: Expr


@dataclass(frozen=True, slots=True)
class BinaryOp(Expr):
    """Arithmetic, comparison or logic on two operands of one dtype.

    Printed: `a + b`, `a - b`, `a * b`, `a / b`, `a // b` (floor), `a % b` (floor),
    `T.min(a, b)`, `T.max(a, b)`, `a == b`, `a != b`, `a < b`, `a <= b`, `a > b`, `a >= b`,
    `a and b`, `a or b`.
    """

    op: str
    a: Expr
    b: Expr

    @property
    def dtype(self) -> str:
        return self.a.dtype if self.op in ARITH_OPS else "bool"


@dataclass(frozen=True, slots=True)
class Not(Expr):
    """Logical negation. Printed: `not a`."""

    a: Expr
    dtype: str = "bool"


@dataclass(frozen=True, slots=True)
class Select(Expr):
    """`true_value` where `condition` holds, else `false_value`.

    Printed: `T.if_then_else(condition, true_value, false_value)`.
    """

    condition: Expr
    true_value: Expr
    false_value: Expr

    @property
    def dtype(self) -> str:
        return self.true_value.dtype


@dataclass(frozen=True, slots=True)
class Call(Expr):
    """A math intrinsic (one of MATH_FUNCTIONS), an integer one (INT_FUNCTIONS, BIT_FUNCTIONS),
    a bit cast (REINTERPRET) or, in the CUDA lowering only, a GPU one (GPU_INTRINSICS).

    Printed: `T.exp(x)`, `T.bitwise_and(a, b)`, `T.shift_right(a, 2)`, `T.popcount(a)`,
    `T.reinterpret("int32", x)` (the result's dtype first, as TVM prints it),
    `T.shfl_down_sync(x, 16, 32, 32)`. Shifts of signed
    integers are arithmetic; a shift by a negative amount or by the bit width or more is
    undefined, as in C.

    Also an opaque call (EXTERN_CALLS; its first argument the function's name, a StringImm):
    `T.call_extern("float32", "f", x)`, `T.call_packed("f", x)`; and the address of an element
    (op "address_of", one BufferLoad argument, dtype "handle"): `T.address_of(A[i, j])`."""

    op: str
    args: tuple[Expr, ...]
    dtype: str


@dataclass(frozen=True, slots=True)
class StringImm(Expr):
    """The name of the function an opaque call calls (its first argument after the dtype).
    Printed: `"f"`."""

    value: str
    dtype: str = "handle"


@dataclass(frozen=True, slots=True)
class BufferLoad(Expr):
    """An element of a buffer. Printed: `A[i, j]`."""

    buffer: Buffer
    indices: tuple[Expr, ...]

    @property
    def dtype(self) -> str:
        return self.buffer.dtype


# --------------------------------------------------------------------------------------------
# Buffers, ranges, regions


@dataclass(frozen=True, slots=True)
class Buffer(Node):
    """A multi-dimensional array.

    Printed as a parameter `A: T.Buffer((128, n), "float32")`, an allocation
    `A = T.alloc_buffer((128,), "float32", scope="shared")`, or, once flattened, a view of another
    buffer's storage: `A_flat = T.Buffer((16384,), "float32", data=A.data)` (`data` names it).
    """

    name: str
    shape: tuple[Expr, ...]
    dtype: str = "float32"
    scope: str = "global"
    data: str | None = None

    def __getitem__(self, indices) -> BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return BufferLoad(self, tuple(convert(i) for i in indices))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def storage_name(self) -> str:
        """The name of the buffer whose memory this one uses (its own name unless a view)."""
        return self.data if self.data is not None else self.name


@dataclass(frozen=True, slots=True)
class Range(Node):
    """The half-open interval [min, min + extent). Printed in a region as `lo:hi`."""

    min: Expr
    extent: Expr

    def __post_init__(self) -> None:
        # a constant bound takes the wider int dtype of the other (`vi:vi + 1` with an int64
        # vi has an int64 extent, however it was built), so equal ranges compare equal
        a, b = self.min, self.extent
        if isinstance(a, Expr) and isinstance(b, Expr) and a.dtype != b.dtype \
                and _signed_ints(a.dtype, b.dtype):
            if isinstance(a, IntImm) and bits(a.dtype) < bits(b.dtype):
                object.__setattr__(self, "min", IntImm(a.value, b.dtype))
            elif isinstance(b, IntImm) and bits(b.dtype) < bits(a.dtype):
                object.__setattr__(self, "extent", IntImm(b.value, a.dtype))


@dataclass(frozen=True, slots=True)
class BufferRegion(Node):
    """A rectangular part of a buffer. Printed: `A[vi, 0:128]` (a bare index is extent 1)."""

    buffer: Buffer
    region: tuple[Range, ...]


@dataclass(frozen=True, slots=True)
class IterVar(Node):
    """A block iteration variable over `dom`, spatial or reduce.

    Printed with its binding: `vi = T.axis.spatial(128, i)`, `vk = T.axis.reduce((0, 64), k)`,
    `vt = T.axis.scan(128, t)`, `vx = T.axis.opaque(128, x)`,
    or several at once: `vi, vj, vk = T.axis.remap("SSR", [i, j, k])`.
    """

    var: Var
    dom: Range
    kind: str = "spatial"


# --------------------------------------------------------------------------------------------
# Statements


class Stmt(Node):
    """Base of every statement."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class BufferStore(Stmt):
    """Printed: `A[i, j] = value`."""

    buffer: Buffer
    value: Expr
    indices: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class SeqStmt(Stmt):
    """Statements one after another. Printed as consecutive lines."""

    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class For(Stmt):
    """A loop over [min, min + extent).

    Printed: `for i in range(n):`, `for i in T.serial(lo, hi):`, `T.parallel(n)`,
    `T.vectorized(n)`, `T.unroll(n)`, `T.thread_binding(n, thread="threadIdx.x")`; perfectly
    nested serial loops from 0 print as `for i, j in T.grid(n, m):`.
    """

    loop_var: Var
    min: Expr
    extent: Expr
    kind: str
    body: Stmt
    thread_tag: str | None = None
    annotations: Annotations = ()

    def __post_init__(self) -> None:
        # constant bounds take the loop variable's int dtype (a loop is over one index type)
        dtype = self.loop_var.dtype
        for name in ("min", "extent"):
            value = getattr(self, name)
            if isinstance(value, IntImm) and value.dtype != dtype \
                    and _signed_ints(value.dtype, dtype) and _fits(value.value, dtype):
                object.__setattr__(self, name, IntImm(value.value, dtype))


@dataclass(frozen=True, slots=True)
class IfThenElse(Stmt):
    """Printed: `if condition:` ... `else:` ..."""

    condition: Expr
    then_body: Stmt
    else_body: Stmt | None = None


@dataclass(frozen=True, slots=True)
class LetStmt(Stmt):
    """Binds `var` to `value` in `body`. Printed: `x: T.int32 = value`, then the body."""

    var: Var
    value: Expr
    body: Stmt


@dataclass(frozen=True, slots=True)
class Allocate(Stmt):
    """Allocates `buffer` for `body` (lowered code, after blocks are gone).

    Printed: `X = T.decl_buffer((16,), "float32", scope="local")`, then the body.
    """

    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, slots=True)
class Barrier(Stmt):
    """Every thread of a GPU thread block waits here until all have arrived (and their writes
    to `scope` memory are visible). Inserted by the lowering, never by hand.

    Printed: `T.tvm_storage_sync("shared")` (TVM's spelling); `__syncthreads()` in CUDA.
    """

    scope: str = "shared"


@dataclass(frozen=True, slots=True)
class Evaluate(Stmt):
    """An opaque call run for its effect; its block declares what it reads and writes.

    Printed: `T.evaluate(T.call_extern("int32", "f", T.address_of(A[vi, 0]), 16))`.
    """

    value: Expr


@dataclass(frozen=True, slots=True)
class Assume(Stmt):
    """A hint that `condition` holds here (TVM's `T.assume`): kept and printed, no code. An
    analysis may ignore it and never trusts it unless it proves it; the interpreter checks it
    (a false assumption makes the program undefined, as in TVM).

    Printed: `T.assume(n % 4 == 0)` (TVM prints `T.evaluate(T.assume(...))`: read too).
    """

    condition: Expr


@dataclass(frozen=True, slots=True)
class While(Stmt):
    """Runs `body` while `condition` holds (TVM's `T.While`; lowered TIR). The polyhedral
    model cannot see it: schedule steps that need the analysis refuse a function holding one
    (polyhedral/statements.py), and the GPU lowering refuses one inside thread loops.

    Printed: `while A[0] < 10:`, then the body.
    """

    condition: Expr
    body: Stmt


@dataclass(frozen=True, slots=True)
class AsyncCopy(Stmt):
    """The shared-memory stores in `body` may land at any point until the `AsyncWait` that
    covers the commit group they join (`cp.async` on sm_80+; a plain copy elsewhere). Made by
    lower/software_pipeline.py for the CUDA target, never by hand.

    Printed: `with T.async_copy():`, then the body.
    """

    body: Stmt


@dataclass(frozen=True, slots=True)
class AsyncCommit(Stmt):
    """The asynchronous copies issued by this thread since the last commit form a group.

    Printed: `T.ptx_commit_group()` (TVM's spelling); `cp.async.commit_group` in CUDA.
    """


@dataclass(frozen=True, slots=True)
class AsyncWait(Stmt):
    """This thread waits until at most `pending` of its most recent commit groups are still in
    flight (their copies landed in shared memory); other threads need a `Barrier` after it to
    see them.

    Printed: `T.ptx_wait_group(1)` (TVM's spelling); `cp.async.wait_group 1` in CUDA.
    """

    pending: int = 0


@dataclass(frozen=True, slots=True)
class Block(Node):
    """A unit of computation that only touches its iteration variables and declared regions.

    Printed as the inside of `with T.block("name"):` (axes, `T.reads`, `T.writes`,
    `T.block_attr`, `T.alloc_buffer`s, `with T.init():`, then the body).
    """

    name: str
    iter_vars: tuple[IterVar, ...]
    reads: tuple[BufferRegion, ...]
    writes: tuple[BufferRegion, ...]
    body: Stmt
    init: Stmt | None = None
    alloc_buffers: tuple[Buffer, ...] = ()
    annotations: Annotations = ()


@dataclass(frozen=True, slots=True)
class BlockRealize(Stmt):
    """A block executed with its iteration variables bound to `iter_values`.

    Printed: `with T.block("name"):`, the bindings inside the axis declarations and, when the
    predicate is not `True`, `T.where(predicate)`.
    """

    iter_values: tuple[Expr, ...]
    predicate: Expr
    block: Block


@dataclass(frozen=True, slots=True)
class PrimFunc(Node):
    """A function over buffers (and scalar parameters).

    Printed: `@T.prim_func` / `def name(A: T.Buffer(...), ...):`, with `T.func_attr({...})`
    when `attrs` is not empty. A buffer whose shape holds a symbolic dim is passed as a handle
    and matched: `A = T.match_buffer(a, (n, 128), "float32")`.
    """

    name: str
    params: tuple[Buffer | Var, ...]
    body: Stmt
    attrs: Annotations = ()

    @property
    def buffers(self) -> tuple[Buffer, ...]:
        return tuple(p for p in self.params if isinstance(p, Buffer))

    @property
    def symbolic_vars(self) -> tuple[Var, ...]:
        """The symbolic dims: variables in parameter shapes that are not scalar parameters,
        in order of first appearance (remembered per parameter tuple, which the functions a
        schedule makes share)."""
        return _symbolic_vars(self.params)

    def script(self) -> str:
        from sched.ir.printer import to_script

        return to_script(self)


def _symbolic_vars_of(params: tuple) -> tuple[Var, ...]:
    from sched.ir.functor import free_vars

    scalars = {p for p in params if isinstance(p, Var)}
    found: dict[Var, None] = {}
    for buffer in params:
        if not isinstance(buffer, Buffer):
            continue
        for dim in buffer.shape:
            for var in free_vars(dim):
                if var not in scalars:
                    found[var] = None
    return tuple(found)


_symbolic_vars = identity_cache(maxsize=256)(_symbolic_vars_of)


def _signed_ints(a: str, b: str) -> bool:
    return a in ("int8", "int16", "int32", "int64") and b in ("int8", "int16", "int32", "int64")


def _fits(value: int, dtype: str) -> bool:
    return -(2 ** (bits(dtype) - 1)) <= value < 2 ** (bits(dtype) - 1)


# the builders Expr's operators call, re-exported (most passes import them from here)
from sched.ir.builders import (  # noqa: E402, F401 (they need the classes above)
    TRUE,
    binary,
    bitwise,
    conjuncts,
    const,
    convert,
    equal,
    integer_call,
    is_constant,
    logical_and,
    logical_or,
    not_equal,
    power,
    seq,
)
from sched.ir.equality import install_comparisons  # noqa: E402 (needs the classes above)

install_comparisons((Var, IntImm, FloatImm, Cast, BinaryOp, Not, Select, Call, StringImm,
                     BufferLoad))

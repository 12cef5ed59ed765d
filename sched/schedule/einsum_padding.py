"""What pad_einsum may pad (pad_einsum.py rewrites): an einsum block, and the rules under
which padding its domain keeps every number.

The block is an einsum: one store (and an init to the same element), every index of every
access an iteration variable or a constant, each buffer accessed at one index tuple, the
output's variables distinct. Each growing variable is bound to a loop of its own over its
extent, those loops holding the block alone.

Why the numbers stay: inside the old extents every access reads and writes the same values,
through the copies. An instance at a padded spatial position writes only the output's padding,
which is never copied back (so every spatial variable that grows must index the output). An
instance at a padded reduction position (its spatial position inside) must leave the output as
it was: its update, with every read at a padded index taken as 0, must simplify to the output's
own value (`C + 0 * 0` is `C`; `max(C, 0)` is not, nor `C + 0 * D[i]` in floating point, where
`D[i]` may be inf), asked for each growing reduction variable alone, so also for several at once
(a read at one padded index is 0 whatever the others are). A float sum of zeros keeps its value
but may turn -0.0 into 0.0. The copies run next to the statement of the block's scope that holds
it, so nothing else in that statement may write an input or touch the output; a block that
reads its output needs an init (its copy would not hold the values read).
"""

from __future__ import annotations

import dataclasses
import math

from sched.errors import ScheduleError
from sched.ir.dtype import is_int
from sched.ir.functor import IRMutator, collect, free_vars
from sched.ir.nodes import (
    BinaryOp,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    FloatImm,
    For,
    IntImm,
    PrimFunc,
    Var,
    const,
)
from sched.ir.simplify import simplify
from sched.schedule.scope import blocks_accessing
from sched.schedule.state import enclosing_loops

PRIMITIVE = "pad_einsum"


@dataclasses.dataclass(frozen=True)
class Access:
    """A buffer the block accesses, at one index tuple (iteration variables and constants)."""

    buffer: Buffer
    indices: tuple


def einsum_store(block: Block) -> BufferStore:
    how = ("pad_einsum takes an einsum block: one store, T.init (if any) one store to the same "
           "element")
    if not isinstance(block.body, BufferStore):
        raise ScheduleError(PRIMITIVE, f"block {block.name!r} is not one store; {how}")
    store = block.body
    init = block.init
    if init is not None and not (isinstance(init, BufferStore) and init.buffer == store.buffer
                                 and init.indices == store.indices):
        raise ScheduleError(PRIMITIVE, f"the init of block {block.name!r} is not one store to "
                            f"{store.buffer.name}[...] at the update's indices; {how}")
    return store


def einsum_accesses(block: Block, store: BufferStore) -> dict[str, Access]:
    """Each buffer's one index tuple; refuses an index that is neither an iteration variable
    nor a constant, and a buffer accessed at two index tuples."""
    own = {iv.var for iv in block.iter_vars}
    found: dict[str, Access] = {}
    nodes = [store, *collect(store.value, BufferLoad)]
    if block.init is not None:
        nodes += collect(block.init.value, BufferLoad)
    for node in nodes:
        for index in node.indices:
            if not (isinstance(index, IntImm) or (isinstance(index, Var) and index in own)):
                written = ", ".join(i.script() for i in node.indices)
                raise ScheduleError(PRIMITIVE, f"block {block.name!r} accesses "
                                    f"{node.buffer.name}[{written}]: an einsum indexes by "
                                    f"iteration variables and constants only "
                                    f"({index.script()} is neither)")
        access = Access(node.buffer, tuple(node.indices))
        known = found.setdefault(node.buffer.name, access)
        if known != access:
            raise ScheduleError(PRIMITIVE, f"block {block.name!r} accesses {node.buffer.name!r} "
                                f"at two index tuples; an einsum accesses each buffer at one")
    return found


def check_spatial(block: Block, growing: set, output: Access) -> None:
    """A growing spatial variable must index the output (its padded instances then write the
    output's padding only); the output's indices must be distinct (the copy back copies the
    whole box of them: `C[vi, vi]` wrote only its diagonal)."""
    variables = [i for i in output.indices if isinstance(i, Var)]
    if len(set(variables)) != len(variables):
        written = ", ".join(i.script() for i in output.indices)
        raise ScheduleError(PRIMITIVE, f"block {block.name!r} stores {output.buffer.name}"
                            f"[{written}], a variable at two indices: copying the padded "
                            f"output back would overwrite the elements it never wrote; "
                            f"pad_einsum takes an output indexed by distinct variables")
    for iv in block.iter_vars:
        if iv.kind == "spatial" and iv.var in growing and iv.var not in output.indices:
            raise ScheduleError(PRIMITIVE, f"spatial variable {iv.var.name!r} of block "
                                f"{block.name!r} does not index its output "
                                f"{output.buffer.name!r}: its padded instances would overwrite "
                                f"it; pad it by 1")


def check_reads_of_output(block: Block, store: BufferStore) -> None:
    """A block that reads its output without an init would read, through the output's copy,
    values the copy never held."""
    if block.init is None and any(load.buffer == store.buffer
                                  for load in collect(store.value, BufferLoad)):
        raise ScheduleError(PRIMITIVE, f"block {block.name!r} reads its output "
                            f"{store.buffer.name!r} and has no T.init: its padded copy would "
                            f"not hold the values read; pad the block before "
                            f"decompose_reduction (or before the step that made it)")


def check_reductions(block: Block, store: BufferStore, growing: set,
                      accesses: dict[str, Access]) -> None:
    """An instance at a padded index of a reduction variable must leave the output as it was
    (see the module's docstring)."""
    own = BufferLoad(store.buffer, store.indices)
    for iv in block.iter_vars:
        if iv.kind != "reduce" or iv.var not in growing:
            continue
        zeros = {}
        for name, access in accesses.items():
            if name != store.buffer.name and iv.var in access.indices:
                zeros[name] = const(0, access.buffer.dtype)
        substituted = _zero_loads(store.value, zeros)
        value = simplify(substituted)
        if not (_leaves(substituted, own) or _leaves(value, own)):
            raise ScheduleError(PRIMITIVE, f"at a padded {iv.var.name!r} (its reads at padded "
                                f"indices 0) block {block.name!r} would store {value.script()}, "
                                f"not {own.script()}: the padding would change the result; pad "
                                f"{iv.var.name!r} by 1, or pad a sum of products of reads that "
                                f"all depend on it")


def _leaves(value, own: BufferLoad) -> bool:
    """Whether storing `value` leaves `own`'s element as it was: `value` is `own`, or `own`
    plus a zero (in floating point a -0.0 element may become 0.0)."""
    if value == own:
        return True
    return isinstance(value, BinaryOp) and value.op == "add" and (
        (value.a == own and _is_zero(value.b)) or (value.b == own and _is_zero(value.a)))


def _is_zero(expr) -> bool:
    """Whether `expr` is +0 whatever its loads hold: a zero constant, a cast of one, a sum
    or a product of zeros, an integer product with a zero factor, a float product of a zero
    and a finite constant (`0 * T.exp(0)`: audit helper-165; the simplifier folds no
    float16 or bfloat16 arithmetic, and no float `0 * x`: x may be inf)."""
    if isinstance(expr, IntImm | FloatImm):
        return expr.value == 0 and math.copysign(1.0, expr.value) > 0
    if isinstance(expr, Cast):
        return _is_zero(expr.value)
    if isinstance(expr, BinaryOp) and expr.op in ("add", "mul"):
        a, b = _is_zero(expr.a), _is_zero(expr.b)
        if expr.op == "mul" and (a and _nonnegative_finite(expr.b) or
                                 b and _nonnegative_finite(expr.a)):
            return True
        return (a and b) or (expr.op == "mul" and is_int(expr.dtype) and (a or b))
    return False


# the math functions whose value at a constant `_nonnegative_finite` computes
_CONSTANT_MATH = {"exp": math.exp, "log": math.log, "sqrt": math.sqrt, "tanh": math.tanh,
                  "erf": math.erf, "abs": abs, "sin": math.sin, "cos": math.cos,
                  "rsqrt": lambda x: 1 / math.sqrt(x),
                  "sigmoid": lambda x: 1 / (1 + math.exp(-x))}


def _nonnegative_finite(expr) -> bool:
    """Whether `expr` reads nothing and is a finite number of at least +0 in its type
    (multiplied by +0, it gives +0)."""
    try:
        value = _constant_value(expr)
    except (ArithmeticError, ValueError, KeyError):
        return False
    return value is not None and math.isfinite(value) and value >= 0 and \
        math.copysign(1.0, value) > 0 and abs(value) <= _largest(expr.dtype)


def _constant_value(expr) -> float | None:
    """The value of `expr` when it is built from constants, casts, sums, products and the
    math functions of _CONSTANT_MATH (computed in double precision), else None."""
    if isinstance(expr, IntImm | FloatImm):
        return float(expr.value)
    if isinstance(expr, Cast):
        return _constant_value(expr.value)
    if isinstance(expr, BinaryOp) and expr.op in ("add", "sub", "mul"):
        a, b = _constant_value(expr.a), _constant_value(expr.b)
        if a is None or b is None:
            return None
        return a + b if expr.op == "add" else a - b if expr.op == "sub" else a * b
    if isinstance(expr, Call) and len(expr.args) == 1:
        arg = _constant_value(expr.args[0])
        return None if arg is None else float(_CONSTANT_MATH[expr.op](arg))
    return None


def _largest(dtype: str) -> float:
    """The largest finite value of the float type `dtype` (any value fits an integer one
    here: integer constants come from the program)."""
    return {"float16": 65504.0, "bfloat16": 3.3895e38, "float32": 3.4028234e38}.get(
        dtype, math.inf if is_int(dtype) else 1.7976931348623157e308)


def _zero_loads(expr, zeros: dict):
    """`expr` with the loads of the buffers named in `zeros` replaced by those constants."""

    class Zero(IRMutator):
        def visit_BufferLoad(self, load: BufferLoad):
            return zeros.get(load.buffer.name, load)
    return Zero().visit(expr)


def padded_nest(func: PrimFunc, realize: BlockRealize, growing: set) -> list[For]:
    """The loops from the outermost one binding a growing variable down to the block: each the
    only statement of the one before, each growing variable bound to one of them (its loop
    var, from 0 over the variable's extent), no predicate."""
    loops = enclosing_loops(func, realize)
    loop_vars = {lp.loop_var for lp in loops}
    for lp in loops:
        # the padded block runs each variable over its whole (padded) domain: a loop whose
        # bounds follow another (`for k in range(i + 1)`) would lose them (audit helper-79:
        # a triangular sum padded along i summed the whole rows)
        moving = (set(free_vars(lp.min)) | set(free_vars(lp.extent))) & loop_vars
        if moving:
            raise ScheduleError(PRIMITIVE, f"loop {lp.loop_var.name!r} around block "
                                f"{realize.block.name!r} runs from {lp.min.script()} over "
                                f"{lp.extent.script()}, which moves with loop "
                                f"{sorted(v.name for v in moving)[0]!r}: pad_einsum pads "
                                f"rectangular nests only")
    binding = dict(zip((iv.var for iv in realize.block.iter_vars), realize.iter_values))
    own = []
    for iv in realize.block.iter_vars:
        if iv.var not in growing:
            continue
        value = binding[iv.var]
        loop = next((lp for lp in loops if lp.loop_var is value or lp.loop_var == value), None)
        if loop is None or loop.min != IntImm(0, loop.min.dtype) or \
                loop.extent != iv.dom.extent:
            raise ScheduleError(PRIMITIVE, f"iteration variable {iv.var.name!r} of block "
                                f"{realize.block.name!r} is bound to {value.script()}, not to "
                                f"one loop over its extent: pad the block before splitting or "
                                f"fusing its loops")
        others = [o.name for o, v in binding.items() if o is not iv.var and
                  loop.loop_var in free_vars(v)]
        if others:
            raise ScheduleError(PRIMITIVE, f"loop {loop.loop_var.name!r} binds "
                                f"{iv.var.name!r} and {', '.join(repr(o) for o in others)} of "
                                f"block {realize.block.name!r}: growing it for "
                                f"{iv.var.name!r} would take the others out of their domains; "
                                f"pad a block whose variables have loops of their own")
        own.append(loop)
    if not (isinstance(realize.predicate, IntImm) and realize.predicate.value == 1):
        raise ScheduleError(PRIMITIVE, f"block {realize.block.name!r} runs under "
                            f"T.where({realize.predicate.script()}); pad the block before "
                            f"the steps that made it")
    first = min(loops.index(lp) for lp in own)
    chain = loops[first:]
    for outer, inner in zip(chain, [*chain[1:], realize]):
        if outer.body is not inner:
            raise ScheduleError(PRIMITIVE, f"loop {outer.loop_var.name!r} holds more than the "
                                f"nest of block {realize.block.name!r}; pad the block where its "
                                f"loops hold it alone")
    return chain


def check_neighbours(top, block: Block, padded: dict[str, Access], output: Buffer) -> None:
    """The copies run before and after `top` (the statement of the scope that holds the block):
    nothing else in it may write a padded input or access the output."""
    for name, access in padded.items():
        for other in blocks_accessing(top, access.buffer, "write"):
            if other.name != block.name:
                raise ScheduleError(PRIMITIVE, f"block {other.name!r} writes {name!r} in the "
                                    f"same nest as block {block.name!r}: its padded copy, made "
                                    f"before the nest, would miss that write")
    for kind in ("read", "write"):
        for other in blocks_accessing(top, output, kind):
            if other.name != block.name:
                raise ScheduleError(PRIMITIVE, f"block {other.name!r} {kind}s the output "
                                    f"{output.name!r} in the same nest as block "
                                    f"{block.name!r}: the output is copied back after the nest")

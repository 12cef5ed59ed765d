"""pad_einsum: a block's iteration domain padded up to multiples of given factors, through
padded copies of the buffers it accesses, so that tiles (tensor-core fragments, vector lanes)
divide its loops.

    for i, j, k in T.grid(127, 127, 127):         A_pad[i, k] = if i < 127 and k < 127: A[i, k]
        C[i, j] += A[i, k] * B[k, j]      ->                     else 0      (128 x 128)
                                                  B_pad likewise
                                                  for i, j, k in T.grid(128, 128, 128):
                                                      C_pad[i, j] += A_pad[i, k] * B_pad[k, j]
                                                  for i, j in T.grid(127, 127):
                                                      C[i, j] = C_pad[i, j]

The block is an einsum: one store, every index of every access an iteration variable or a
constant, each buffer accessed at one index tuple. Each buffer indexed by a variable whose
extent grows gets a padded copy (`<name>_pad`, one dimension per index: the variable's padded
extent, or 1 at a constant index): a block before the block's nest fills an input's copy (the
pad value 0 outside the old extents), a block after it copies the output's back over the old
extents.

Why the numbers stay: inside the old extents every access reads and writes the same values,
through the copies. An instance at a padded spatial position writes only the output's padding,
which is never copied back (so every spatial variable that grows must index the output). An
instance at a padded reduction position (its spatial position inside) must leave the output as
it was: its update, with every read at a padded index taken as 0, must simplify to the output's
own value (`C + 0 * 0` is `C`; `max(C, 0)` is not, nor `C + 0 * D[i]` in floating point, where
`D[i]` may be inf), asked for each growing reduction variable alone, so also for several at once
(a read at one padded index is 0 whatever the others are). A float sum of zeros keeps its value
but may turn -0.0 into 0.0. The copies run next to the statement of the block's scope that holds
it, so nothing else in that statement may write an input or touch the output.
"""

from __future__ import annotations

import dataclasses
import math

from sched.errors import ScheduleError
from sched.ir.dtype import is_int
from sched.ir.functor import collect, free_vars
from sched.ir.names import fresh
from sched.ir.nodes import (
    BinaryOp,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Cast,
    Expr,
    FloatImm,
    For,
    IntImm,
    IterVar,
    PrimFunc,
    Range,
    Select,
    Var,
    const,
    is_constant,
    logical_and,
)
from sched.ir.regions import infer_block_regions
from sched.ir.simplify import simplify
from sched.schedule.base import BlockRV, ScheduleBase
from sched.schedule.loops import _as_ints
from sched.schedule.scope import (
    add_allocation,
    blocks_accessing,
    scope_of,
    splice,
    taken_names,
)
from sched.schedule.state import enclosing_loops, find_block, refuse_other_views, replace

PRIMITIVE = "pad_einsum"


@dataclasses.dataclass(frozen=True)
class _Access:
    """A buffer the block accesses, at one index tuple (iteration variables and constants)."""

    buffer: Buffer
    indices: tuple


def pad_einsum(func: PrimFunc, block_name: str, padding) -> PrimFunc:
    """`func` with block `block_name`'s iteration domain padded to multiples of `padding` (one
    factor per iteration variable; see Schedule.pad_einsum)."""
    realize = find_block(func, block_name, PRIMITIVE)
    block = realize.block
    factors = _factors(block, padding)
    old = {iv.var: _extent(iv, block_name) for iv in block.iter_vars}
    new = {iv.var: _padded(old[iv.var], f) for iv, f in zip(block.iter_vars, factors)}
    growing = {v for v in old if new[v] != old[v]}      # the variables whose extent grows
    if not growing:
        return func
    store = _store(block)
    accesses = _accesses(block, store)
    output = accesses[store.buffer.name]
    _check_spatial(block, growing, output)
    _check_reads_of_output(block, store)
    padded = {name: a for name, a in sorted(accesses.items(), key=lambda item: item[1] is output)
              if any(isinstance(i, Var) and i in growing for i in a.indices)}   # inputs first
    _check_reductions(block, store, growing, accesses)
    loops = _nest(func, realize, growing)
    scope = scope_of(func, realize, PRIMITIVE)
    _check_neighbours(scope.top, block, padded, store.buffer)
    for access in padded.values():
        refuse_other_views(func, access.buffer, PRIMITIVE, "copying it to a padded buffer")
    taken = taken_names(func)
    copies = {name: Buffer(fresh(f"{name}_pad", taken),
                           tuple(new[i] if isinstance(i, Var) else IntImm(1) for i in a.indices),
                           a.buffer.dtype, a.buffer.scope) for name, a in padded.items()}
    body = _padded_block(realize, loops, padded, copies, new)
    before = [_fill(a, copies[name], old, new, taken) for name, a in padded.items()
              if name != store.buffer.name]
    after = [_copy_back(output, copies[store.buffer.name], old, taken)] \
        if store.buffer.name in padded else []
    new_func = replace(func, loops[0], body)
    top = scope_of(new_func, find_block(new_func, block_name, PRIMITIVE), PRIMITIVE).top
    new_func = splice(new_func, top, [*before, top, *after])
    scope = scope_of(new_func, find_block(new_func, block_name, PRIMITIVE), PRIMITIVE)
    return add_allocation(new_func, scope.realize, *copies.values())


def _factors(block: Block, padding) -> list[int]:
    factors = list(_as_ints(padding)) if isinstance(padding, list | tuple) else None
    if factors is None or len(factors) != len(block.iter_vars) or not all(
            isinstance(f, int) and not isinstance(f, bool) and f >= 1 for f in factors):
        raise ScheduleError(PRIMITIVE, f"padding must be a list of {len(block.iter_vars)} "
                            f"positive integers, one per iteration variable of block "
                            f"{block.name!r} ({', '.join(iv.var.name for iv in block.iter_vars)})"
                            f", not {padding!r}; 1 leaves a variable as it is")
    return factors


def _padded(extent: Expr, factor: int) -> Expr:
    """`extent` rounded up to a multiple of `factor` (a symbolic one as `(n + 31) // 32 *
    32`: padded whatever n is)."""
    if factor == 1:
        return extent
    if isinstance(extent, IntImm):
        return IntImm(-(-extent.value // factor) * factor, extent.dtype)
    step = IntImm(factor, extent.dtype)
    return simplify((extent + IntImm(factor - 1, extent.dtype)) // step * step)


def _extent(iv: IterVar, block_name: str) -> Expr:
    if not is_constant(iv.dom.min, 0):
        raise ScheduleError(PRIMITIVE, f"iteration variable {iv.var.name!r} of block "
                            f"{block_name!r} ranges over {iv.dom.min.script()}:"
                            f"{(iv.dom.min + iv.dom.extent).script()}; pad_einsum pads "
                            f"extents starting at 0")
    if iv.kind not in ("spatial", "reduce"):
        raise ScheduleError(PRIMITIVE, f"iteration variable {iv.var.name!r} of block "
                            f"{block_name!r} is {iv.kind}; pad_einsum pads spatial and reduce "
                            f"variables only")
    return iv.dom.extent


def _store(block: Block) -> BufferStore:
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


def _accesses(block: Block, store: BufferStore) -> dict[str, _Access]:
    """Each buffer's one index tuple; refuses an index that is neither an iteration variable
    nor a constant, and a buffer accessed at two index tuples."""
    own = {iv.var for iv in block.iter_vars}
    found: dict[str, _Access] = {}
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
        access = _Access(node.buffer, tuple(node.indices))
        known = found.setdefault(node.buffer.name, access)
        if known != access:
            raise ScheduleError(PRIMITIVE, f"block {block.name!r} accesses {node.buffer.name!r} "
                                f"at two index tuples; an einsum accesses each buffer at one")
    return found


def _check_spatial(block: Block, growing: set, output: _Access) -> None:
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


def _check_reads_of_output(block: Block, store: BufferStore) -> None:
    """A block that reads its output without an init would read, through the output's copy,
    values the copy never held."""
    if block.init is None and any(load.buffer == store.buffer
                                  for load in collect(store.value, BufferLoad)):
        raise ScheduleError(PRIMITIVE, f"block {block.name!r} reads its output "
                            f"{store.buffer.name!r} and has no T.init: its padded copy would "
                            f"not hold the values read; pad the block before "
                            f"decompose_reduction (or before the step that made it)")


def _check_reductions(block: Block, store: BufferStore, growing: set,
                      accesses: dict[str, _Access]) -> None:
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
    or a product of zeros, an integer product with a zero factor (the simplifier folds no
    float16 or bfloat16 arithmetic, and no float `0 * x`: x may be inf)."""
    if isinstance(expr, IntImm | FloatImm):
        return expr.value == 0 and math.copysign(1.0, expr.value) > 0
    if isinstance(expr, Cast):
        return _is_zero(expr.value)
    if isinstance(expr, BinaryOp) and expr.op in ("add", "mul"):
        a, b = _is_zero(expr.a), _is_zero(expr.b)
        return (a and b) or (expr.op == "mul" and is_int(expr.dtype) and (a or b))
    return False


def _zero_loads(expr, zeros: dict):
    """`expr` with the loads of the buffers named in `zeros` replaced by those constants."""
    from sched.ir.functor import IRMutator

    class Zero(IRMutator):
        def visit_BufferLoad(self, load: BufferLoad):
            return zeros.get(load.buffer.name, load)
    return Zero().visit(expr)


def _nest(func: PrimFunc, realize: BlockRealize, growing: set) -> list[For]:
    """The loops from the outermost one binding a growing variable down to the block: each the
    only statement of the one before, each growing variable bound to one of them (its loop
    var, from 0 over the variable's extent), no predicate."""
    loops = enclosing_loops(func, realize)
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


def _check_neighbours(top, block: Block, padded: dict[str, _Access], output: Buffer) -> None:
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


def _padded_block(realize: BlockRealize, loops: list[For], padded: dict[str, _Access],
                  copies: dict[str, Buffer], new: dict) -> For:
    """The block's nest over the padded extents, accessing the copies."""
    block = realize.block
    iter_vars = tuple(dataclasses.replace(iv, dom=Range(iv.dom.min, new[iv.var]))
                      for iv in block.iter_vars)
    body, init = block.body, block.init
    for name, access in padded.items():
        body = _to_copy(body, access, copies[name])
        init = _to_copy(init, access, copies[name]) if init is not None else None
    reads, writes = infer_block_regions(body, init, iter_vars, block.alloc_buffers)
    stmt = dataclasses.replace(realize, block=dataclasses.replace(
        block, iter_vars=iter_vars, body=body, init=init, reads=reads, writes=writes))
    extents = {}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if isinstance(value, Var):
            extents[value] = new[iv.var]
    for loop in reversed(loops):
        extent = extents.get(loop.loop_var)
        stmt = dataclasses.replace(loop, body=stmt, extent=loop.extent if extent is None else
                                   extent)
    return stmt


def _to_copy(stmt, access: _Access, copy: Buffer):
    """`stmt` accessing `copy` where it accessed `access.buffer` (a constant index is 0 in
    the copy, whose dimension there is 1)."""
    indices = tuple(i if isinstance(i, Var) else IntImm(0, i.dtype) for i in access.indices)
    from sched.ir.functor import IRMutator

    class ToCopy(IRMutator):
        def visit_BufferLoad(self, load: BufferLoad):
            if load.buffer == access.buffer:
                return BufferLoad(copy, indices)
            return load

        def visit_BufferStore(self, store: BufferStore):
            value = self.visit(store.value)
            if store.buffer == access.buffer:
                return BufferStore(copy, value, indices)
            return dataclasses.replace(store, value=value)
    return ToCopy().visit(stmt)


def _copy_nest(name: str, access: _Access, extents: list[int], taken: set[str], store_of):
    """A nest over `extents` (one loop per dimension of the copy) around a block `name` whose
    body is `store_of(variables)`."""
    loops = [Var(fresh(f"ax{d}", taken), _index_dtype(i)) for d, i in enumerate(access.indices)]
    vars_ = [Var(fresh(f"v{d}", taken), lp.dtype) for d, lp in enumerate(loops)]
    iter_vars = tuple(IterVar(v, Range(const(0, v.dtype), e)) for v, e in zip(vars_, extents))
    body = store_of(vars_)
    reads, writes = infer_block_regions(body, None, iter_vars)
    stmt = BlockRealize(tuple(loops), IntImm(1, "bool"), Block(name, iter_vars, reads, writes,
                                                                 body))
    for loop, extent in reversed(list(zip(loops, extents))):
        stmt = For(loop, const(0, loop.dtype), extent, "serial", stmt)
    return stmt


def _index_dtype(index) -> str:
    return index.dtype if isinstance(index, Var) else "int32"


def _source(access: _Access, vars_) -> tuple:
    """The original buffer's indices for the copy's `vars_` (a constant index stays)."""
    return tuple(v if isinstance(i, Var) else i for i, v in zip(access.indices, vars_))


def _fill(access: _Access, copy: Buffer, old: dict, new: dict, taken: set[str]):
    """The block filling `copy` from `access.buffer`: the value inside the old extents, 0
    outside."""
    extents = [new[i] if isinstance(i, Var) else IntImm(1) for i in access.indices]

    def store_of(vars_):
        inside = [v < old[i] for i, v in zip(access.indices, vars_)
                  if isinstance(i, Var) and new[i] != old[i]]
        value = Select(logical_and(*inside), BufferLoad(access.buffer, _source(access, vars_)),
                       const(0, access.buffer.dtype))
        return BufferStore(copy, value, tuple(vars_))
    return _copy_nest(copy.name, access, extents, taken, store_of)


def _copy_back(access: _Access, copy: Buffer, old: dict, taken: set[str]):
    """The block copying `copy` back into `access.buffer` over the old extents."""
    extents = [old[i] if isinstance(i, Var) else IntImm(1) for i in access.indices]

    def store_of(vars_):
        return BufferStore(access.buffer, BufferLoad(copy, tuple(vars_)),
                           _source(access, vars_))
    return _copy_nest(fresh(f"{access.buffer.name}_unpad", taken), access, extents, taken,
                      store_of)


class PadEinsumPrimitives(ScheduleBase):
    """pad_einsum."""

    def pad_einsum(self, block: BlockRV | str, padding: list[int]) -> None:
        """Pad the iteration domain of an einsum block to multiples of `padding` (one factor
        per iteration variable, 1 for none), through padded copies of the buffers it accesses:
        a block before its nest fills each input's copy (0 outside the old extents), a block
        after copies the output's back.

        Requires: the block is one store (and an init to the same element), every index an
        iteration variable or a constant, each buffer at one index tuple, the output's
        variables distinct; each growing variable bound to a loop of its own over its extent,
        those loops holding the block alone; every growing spatial variable indexes the
        output; at a padded reduction index the
        update, its reads there taken as 0, leaves the output as it was (a sum of products of
        reads that depend on the variable); nothing else in the block's nest writes an input
        or touches the output.

        Arguments: `block` a block handle or name; `padding` the factors.
        Handles: the block and its loops stay valid (their extents grow); the new blocks are
        named after their buffers (`A_pad`, `C_unpad`).
        Also known as: `pad_einsum` in TVM (which names the copy-back block `C_pad` too).

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((6, 5), name="A")
        >>> k = te.reduce_axis((0, 5), name="k")
        >>> S = te.compute((6,), lambda i: te.sum(A[i, k] * A[i, k], axis=k), name="S")
        >>> sch = sched.Schedule(te.create_prim_func([A, S]))
        >>> sch.pad_einsum("S", [8, 8])
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((6, 5), "float32"), S: T.Buffer((6,), "float32")):
            with T.block("root"):
                A_pad = T.alloc_buffer((8, 8), "float32")
                S_pad = T.alloc_buffer((8,), "float32")
                for ax0, ax1 in T.grid(8, 8):
                    with T.block("A_pad"):
                        v0, v1 = T.axis.remap("SS", [ax0, ax1])
                        T.reads(A[v0, v1])
                        T.writes(A_pad[v0, v1])
                        A_pad[v0, v1] = T.if_then_else(v0 < 6 and v1 < 5, A[v0, v1], T.float32(0.0))
                for i, k in T.grid(8, 8):
                    with T.block("S"):
                        v_i, v_k = T.axis.remap("SR", [i, k])
                        T.reads(A_pad[v_i, v_k], S_pad[v_i])
                        T.writes(S_pad[v_i])
                        with T.init():
                            S_pad[v_i] = T.float32(0.0)
                        S_pad[v_i] = S_pad[v_i] + A_pad[v_i, v_k] * A_pad[v_i, v_k]
                for ax0_1 in range(6):
                    with T.block("S_unpad"):
                        v0_1 = T.axis.remap("S", [ax0_1])
                        T.reads(S_pad[v0_1])
                        T.writes(S[v0_1])
                        S[v0_1] = S_pad[v0_1]
        """
        name = self._block(block, PRIMITIVE)
        new_func = pad_einsum(self._func, name, padding)
        self._record(PRIMITIVE, new_func, (block,), (("padding", tuple(_as_ints(padding))),))

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

Which blocks may be padded, and why the numbers stay: einsum_padding.py.
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.names import fresh
from sched.ir.nodes import (
    TRUE,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
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
from sched.schedule.einsum_padding import (
    PRIMITIVE,
    Access,
    check_neighbours,
    check_reads_of_output,
    check_reductions,
    check_spatial,
    einsum_accesses,
    einsum_store,
    padded_nest,
)
from sched.schedule.loops import _as_ints
from sched.schedule.scope import (
    add_allocation,
    scope_of,
    splice,
    taken_names,
)
from sched.schedule.state import find_block, refuse_other_views, replace


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
    store = einsum_store(block)
    accesses = einsum_accesses(block, store)
    output = accesses[store.buffer.name]
    check_spatial(block, growing, output)
    check_reads_of_output(block, store)
    padded = {name: a for name, a in sorted(accesses.items(), key=lambda item: item[1] is output)
              if any(isinstance(i, Var) and i in growing for i in a.indices)}   # inputs first
    check_reductions(block, store, growing, accesses)
    loops = padded_nest(func, realize, growing)
    scope = scope_of(func, realize, PRIMITIVE)
    check_neighbours(scope.top, block, padded, store.buffer)
    for access in padded.values():
        refuse_other_views(func, access.buffer, PRIMITIVE, "copying it to a padded buffer")
    taken = taken_names(func)
    copies = {name: Buffer(fresh(f"{name}_pad", taken),
                           tuple(new[i] if isinstance(i, Var) else IntImm(1) for i in a.indices),
                           a.buffer.dtype, a.buffer.scope) for name, a in padded.items()}
    body = _padded_block(realize, loops, padded, copies, new)
    before = [_fill(a, copies[name], old, new, taken) for name, a in padded.items()
              if name != store.buffer.name]
    # the padded reduction runs no instance where a reduce range is empty (`range(m - 1)`
    # at m = 1), so it leaves its copy uninitialized there; the original keeps the caller's
    # values (README, "Reductions"): the copy back runs only where every range has a point
    # (audit helper-122: garbage copied into C)
    runs = [old[iv.var] >= const(1, old[iv.var].dtype) for iv in block.iter_vars
            if iv.kind == "reduce" and not (isinstance(old[iv.var], IntImm)
                                            and old[iv.var].value >= 1)]
    after = [_copy_back(output, copies[store.buffer.name], old, taken,
                        logical_and(*runs) if runs else TRUE)] \
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


def _padded_block(realize: BlockRealize, loops: list[For], padded: dict[str, Access],
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


def _to_copy(stmt, access: Access, copy: Buffer):
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


def _copypadded_nest(name: str, access: Access, extents: list[int], taken: set[str], store_of,
                     predicate: Expr = TRUE):
    """A nest over `extents` (one loop per dimension of the copy) around a block `name` whose
    body is `store_of(variables)`, run where `predicate` (on the symbolic dims) holds."""
    loops = [Var(fresh(f"ax{d}", taken), _index_dtype(i)) for d, i in enumerate(access.indices)]
    vars_ = [Var(fresh(f"v{d}", taken), lp.dtype) for d, lp in enumerate(loops)]
    iter_vars = tuple(IterVar(v, Range(const(0, v.dtype), e)) for v, e in zip(vars_, extents))
    body = store_of(vars_)
    reads, writes = infer_block_regions(body, None, iter_vars)
    stmt = BlockRealize(tuple(loops), predicate, Block(name, iter_vars, reads, writes, body))
    for loop, extent in reversed(list(zip(loops, extents))):
        stmt = For(loop, const(0, loop.dtype), extent, "serial", stmt)
    return stmt


def _index_dtype(index) -> str:
    return index.dtype if isinstance(index, Var) else "int32"


def _source(access: Access, vars_) -> tuple:
    """The original buffer's indices for the copy's `vars_` (a constant index stays)."""
    return tuple(v if isinstance(i, Var) else i for i, v in zip(access.indices, vars_))


def _fill(access: Access, copy: Buffer, old: dict, new: dict, taken: set[str]):
    """The block filling `copy` from `access.buffer`: the value inside the old extents, 0
    outside."""
    extents = [new[i] if isinstance(i, Var) else IntImm(1) for i in access.indices]

    def store_of(vars_):
        inside = [v < old[i] for i, v in zip(access.indices, vars_)
                  if isinstance(i, Var) and new[i] != old[i]]
        value = Select(logical_and(*inside), BufferLoad(access.buffer, _source(access, vars_)),
                       const(0, access.buffer.dtype))
        return BufferStore(copy, value, tuple(vars_))
    return _copypadded_nest(copy.name, access, extents, taken, store_of)


def _copy_back(access: Access, copy: Buffer, old: dict, taken: set[str], predicate: Expr):
    """The block copying `copy` back into `access.buffer` over the old extents, where
    `predicate` holds."""
    extents = [old[i] if isinstance(i, Var) else IntImm(1) for i in access.indices]

    def store_of(vars_):
        return BufferStore(access.buffer, BufferLoad(copy, tuple(vars_)),
                           _source(access, vars_))
    return _copypadded_nest(fresh(f"{access.buffer.name}_unpad", taken), access, extents, taken,
                            store_of, predicate)


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

"""tensorize: the computation of a block (or of the subtree under a loop, blockized first) is
replaced by a registered intrinsic's implementation.

Legality. `blockize` runs nothing in another order (see blockize.py). Tensorize then replaces,
inside each instance of that block, the loop nest by the intrinsic's implementation, which
computes what its description computes (the intrinsic's contract, checked for the built-in ones
by tests/schedule/test_tensorize.py), and the description was matched to the loop nest access
for access (tensorize_match.py): the same elements are read and written with the same values,
up to the order of a reduction's terms, which sched treats as associative (as for reorder).
Instances of the block keep their order, so no dependence outside the block can change; the
block keeps its regions (widened where the implementation touches a bound buffer the block
only wrote or only read) and the dependence analysis sees the implementation's own accesses.
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.functor import IRMutator, collect, free_vars, substitute
from sched.ir.names import fresh
from sched.ir.nodes import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    For,
    IterVar,
    PrimFunc,
    Range,
    Var,
    const,
)
from sched.ir.simplify import simplify
from sched.schedule.base import BlockRV, LoopRV, ScheduleBase
from sched.schedule.blockize import blockize
from sched.schedule.scope import block_names, refusal, taken_names
from sched.schedule.state import find_block, replace
from sched.schedule.tensor_intrin import TensorIntrin, function_body
from sched.schedule.tensorize_match import Binding, Mismatch, match

PRIMITIVE = "tensorize"


def tensorize(func: PrimFunc, target: str, is_loop: bool, intrin_name: str,
              render: bool = True) -> PrimFunc:
    """`func` with block `target` (or the loop `target`, blockized) computed by the intrinsic
    `intrin_name` (see Schedule.tensorize)."""
    try:
        forms = TensorIntrin.forms(intrin_name)
    except ValueError as error:
        raise ScheduleError(PRIMITIVE, str(error)) from None
    given = func
    func, block_name = blockize(func, target) if is_loop else (func, target)
    realize = find_block(func, block_name, PRIMITIVE)
    what = f"loop {target!r}" if is_loop else f"block {target!r}"
    mismatches = []
    for intrin in forms:            # the registered form, then its other layouts
        try:
            bindings = _bind(intrin, realize.block)
            break
        except Mismatch as mismatch:
            mismatches.append(mismatch)
    else:
        first = mismatches[0]
        others = "".join(f" (its form over {_layout(form)}: {m.reason})"
                         for form, m in zip(forms[1:], mismatches[1:]))
        raise refusal(PRIMITIVE, f"cannot tensorize {what} with {intrin_name!r}: "
                      f"{first.reason}{others}", given,
                      first.loop or (target if is_loop else None), render) from None
    places = {impl: bindings[desc] for desc, impl in zip(intrin.desc.params, intrin.impl.params)}
    block = _instantiate(func, realize.block, intrin.impl, places)
    return replace(func, realize, dataclasses.replace(realize, block=block))


def _bind(intrin: TensorIntrin, block: Block) -> dict:
    """Where the description's buffers lie in `block` (raises Mismatch)."""
    bindings = match(intrin.pattern, block)
    missing = [b.name for b in intrin.desc.params if b not in bindings]
    if missing:
        raise Mismatch(f"the intrinsic's description never accesses {', '.join(missing)}, "
                       f"so there is nothing to bind it to")
    return bindings


def _layout(intrin: TensorIntrin) -> str:
    """The shapes of a form's buffers, for a refusal: `32x8 warp, 16x16 global`."""
    return ", ".join("x".join(str(d) for d in b.shape) + f" {b.scope}"
                     for b in intrin.desc.params)


def _instantiate(func: PrimFunc, block: Block, impl: PrimFunc,
                 places: dict[Buffer, Binding]) -> Block:
    """`block` with its body replaced by `impl`'s, fresh names for impl's loops, blocks and
    buffers, and impl's parameters placed where they were bound."""
    body, allocated = function_body(impl)
    taken, blocks = taken_names(func), block_names(func)
    renames: dict[object, object] = {}
    for node in collect(body, IterVar):
        renames[node.var] = Var(fresh(node.var.name, taken), node.var.dtype)
    for inner in collect(body, Block):
        for buffer in inner.alloc_buffers:
            renames[buffer] = dataclasses.replace(buffer, name=fresh(buffer.name, taken))
    for buffer in allocated:
        renames[buffer] = dataclasses.replace(buffer, name=fresh(buffer.name, taken))
    placer = _Place(places, renames, taken, (block.name, blocks))
    new_body = _Isolate({iv.var: iv for iv in block.iter_vars}, taken).visit(placer.visit(body))
    reads, writes = _widened(block.reads, placer.read), _widened(block.writes, placer.written)
    allocations = block.alloc_buffers + tuple(renames[b] for b in allocated)
    return dataclasses.replace(block, body=new_body, reads=reads, writes=writes,
                               alloc_buffers=allocations)


def _widened(regions: tuple[BufferRegion, ...], touched: dict[str, BufferRegion]):
    """`regions` with the bound regions the implementation touches added where missing."""
    have = {r.buffer.name for r in regions}
    return regions + tuple(r for name, r in touched.items() if name not in have)


class _Place(IRMutator):
    """Renames impl's own variables, blocks and buffers; places its parameters: element `idx`
    of a parameter is element `corner + idx` of the buffer it is bound to."""

    def __init__(self, places: dict[Buffer, Binding], renames: dict, taken: set[str],
                 block_names: tuple[str, set[str]]) -> None:
        self.places, self.renames, self.taken = places, renames, taken
        self.prefix, self.block_names = block_names     # blocks become <prefix>_<name>
        self.read: dict[str, BufferRegion] = {}
        self.written: dict[str, BufferRegion] = {}

    def visit_Var(self, var: Var):
        return self.renames.get(var, var)

    def visit_Buffer(self, buffer: Buffer):
        return self.renames.get(buffer, buffer)

    def visit_For(self, loop: For):
        # loop names are unique in a function: each loop of impl gets its own
        new = Var(fresh(loop.loop_var.name, self.taken), loop.loop_var.dtype)
        body = self.visit(substitute(loop.body, {loop.loop_var: new}))
        return dataclasses.replace(loop, loop_var=new, min=self.visit(loop.min),
                                   extent=self.visit(loop.extent), body=body)

    def visit_Block(self, block: Block):
        block = self.visit_children(block)
        return dataclasses.replace(block, name=fresh(f"{self.prefix}_{block.name}",
                                                     self.block_names))

    def visit_BufferLoad(self, load: BufferLoad):
        indices = tuple(self.visit(i) for i in load.indices)
        if load.buffer not in self.places:
            return BufferLoad(self.visit(load.buffer), indices)
        self._note(self.read, load.buffer)
        binding = self.places[load.buffer]
        return BufferLoad(binding.buffer, _shifted(binding, indices))

    def visit_BufferStore(self, store: BufferStore):
        indices = tuple(self.visit(i) for i in store.indices)
        value = self.visit(store.value)
        if store.buffer not in self.places:
            return BufferStore(self.visit(store.buffer), value, indices)
        self._note(self.written, store.buffer)
        binding = self.places[store.buffer]
        return BufferStore(binding.buffer, value, _shifted(binding, indices))

    def visit_BufferRegion(self, region: BufferRegion):
        ranges = tuple(Range(self.visit(r.min), self.visit(r.extent)) for r in region.region)
        if region.buffer not in self.places:
            return BufferRegion(self.visit(region.buffer), ranges)
        binding = self.places[region.buffer]
        lead = len(binding.corner) - len(ranges)
        fixed = tuple(Range(c, const(1, c.dtype)) for c in binding.corner[:lead])
        moved = tuple(Range(simplify(c + r.min), r.extent)
                      for c, r in zip(binding.corner[lead:], ranges))
        return BufferRegion(binding.buffer, fixed + moved)

    def _note(self, touched: dict[str, BufferRegion], param: Buffer) -> None:
        binding = self.places[param]
        whole = tuple(Range(const(0, d.dtype), d) for d in param.shape)
        touched.setdefault(binding.buffer.name, self.visit_BufferRegion(BufferRegion(param,
                                                                                      whole)))


class _Isolate(IRMutator):
    """Keeps the implementation's blocks isolated: a block that now uses an iteration
    variable of the tensorized block (through a corner) gets its own iteration variable of the
    same domain, bound to it (to its parent's copy, for a block nested deeper)."""

    def __init__(self, outer: dict[Var, IterVar], taken: set[str]) -> None:
        self.outer, self.taken = outer, taken
        self.visible = {var: var for var in outer}

    def visit_BlockRealize(self, realize: BlockRealize):
        used = [v for v in free_vars(realize.block) if v in self.outer]
        if not used:
            return realize
        copies = {v: Var(fresh(v.name, self.taken), v.dtype) for v in used}
        saved, self.visible = self.visible, copies
        block = substitute(realize.block, copies)
        block = dataclasses.replace(block, body=self.visit(block.body))
        self.visible = saved
        added = tuple(IterVar(copies[v], self.outer[v].dom, _copied_kind(self.outer[v]))
                      for v in used)
        block = dataclasses.replace(block, iter_vars=block.iter_vars + added)
        values = realize.iter_values + tuple(self.visible[v] for v in used)
        return dataclasses.replace(realize, iter_values=values, block=block)


def _copied_kind(outer: IterVar) -> str:
    """The kind of an implementation block's copy of the tensorized block's variable: spatial
    stays spatial; any other becomes opaque (its order kept under every later step), since
    the implementation's blocks are no reduction updates of their own over it (a block that
    fills a scratch buffer is not), and a reduce kind would let the analysis reorder it."""
    return "spatial" if outer.kind == "spatial" else "opaque"


def _shifted(binding: Binding, indices: tuple) -> tuple:
    lead = len(binding.corner) - len(indices)
    return binding.corner[:lead] + tuple(simplify(c + i) for c, i in
                                         zip(binding.corner[lead:], indices))


class TensorizePrimitives(ScheduleBase):
    """tensorize."""

    def tensorize(self, block_or_loop: BlockRV | LoopRV, tensor_intrin: str) -> None:
        """Compute a block, or the loops under `loop` (blockized first, as
        `sch.blockize(loop)`), with the registered intrinsic `tensor_intrin`: the loop nest
        in the block is replaced by the intrinsic's implementation, its buffers bound to the
        sub-regions the block accesses.

        Requires: `tensor_intrin` registered (`TensorIntrin.register(name, desc, impl)`;
        `TensorIntrin.names()` lists them). The block holds a loop nest around one block that
        matches the description: same loop extents in the same order, each loop feeding the
        same kind (spatial/reduce) of iteration variables, no predicate (loops split evenly),
        init in both or neither (`decompose_reduction` first for an update-only intrinsic),
        the same body up to renaming, buffers of the same dtypes and scopes, and every access
        at the same offset from the corner of the block's region, whose extents are the
        description buffers' shape. An intrinsic with several forms
        (`TensorIntrin.register_form`: the mma intrinsics over sched's 16x16 warp tiles and
        over TVM's 32x8 layout) is matched form by form. The first difference is refused,
        named (for each form).

        Arguments: `block_or_loop` a block or loop handle; `tensor_intrin` a registered name.
        Returns: None, as in TVM. Handles to the loops and blocks under the tensorized ones
        become stale; with a loop, the new block is `<block>_o` (sch.get_block).
        Also known as: `tensorize` in TVM.

        >>> import sched
        >>> from sched import compute as te
        >>> from sched.schedule.state import find_block, find_loop
        >>> A = te.placeholder((8, 8), name="A")
        >>> B = te.placeholder((8, 8), name="B")
        >>> k = te.reduce_axis((0, 8), name="k")
        >>> D = te.compute((8,), lambda i: te.sum(A[i, k] * B[i, k], axis=k), name="D")
        >>> sch = sched.Schedule(te.create_prim_func([A, B, D]))
        >>> i, k = sch.get_loops(sch.get_block("D"))
        >>> _ = sch.decompose_reduction(sch.get_block("D"), k)
        >>> print(find_loop(sch.func, "k", "").script())
        for k in range(8):
            with T.block("D_update"):
                v_i = T.axis.spatial(8, i)
                v_k = T.axis.reduce(8, k)
                T.reads(A[v_i, v_k], B[v_i, v_k], D[v_i])
                T.writes(D[v_i])
                D[v_i] = D[v_i] + A[v_i, v_k] * B[v_i, v_k]
        >>> sch.tensorize(k, "dot_product_8_f32")
        >>> print(find_block(sch.func, "D_update_o").script())
        with T.block("D_update_o"):
            v_i_1 = T.axis.spatial(8, i)
            T.reads(A[v_i_1, 0:8], B[v_i_1, 0:8], D[v_i_1])
            T.writes(D[v_i_1])
            products = T.alloc_buffer((8,), "float32", scope="local")
            for k_1 in T.vectorized(8):
                with T.block("D_update_o_multiply"):
                    vk_1 = T.axis.spatial(8, k_1)
                    v_i_1_1 = T.axis.spatial(8, v_i_1)
                    T.reads(A[v_i_1_1, vk_1], B[v_i_1_1, vk_1])
                    T.writes(products[vk_1])
                    products[vk_1] = A[v_i_1_1, vk_1] * B[v_i_1_1, vk_1]
            for k_1_1 in range(8):
                with T.block("D_update_o_sum"):
                    vk_1 = T.axis.reduce(8, k_1_1)
                    v_i_1_2 = T.axis.spatial(8, v_i_1)
                    T.reads(products[vk_1], D[v_i_1_2])
                    T.writes(D[v_i_1_2])
                    D[v_i_1_2] = D[v_i_1_2] + products[vk_1]
        """
        if isinstance(block_or_loop, LoopRV):
            target, is_loop = self._loop(block_or_loop, PRIMITIVE, "block_or_loop"), True
        else:
            target, is_loop = self._block(block_or_loop, PRIMITIVE, "block_or_loop"), False
        if not isinstance(tensor_intrin, str):
            raise ScheduleError(PRIMITIVE, f"argument 'tensor_intrin': expected the name of a "
                                f"registered intrinsic, got {type(tensor_intrin).__name__}")
        new_func = tensorize(self._func, target, is_loop, tensor_intrin, self.render_errors)
        self._record(PRIMITIVE, new_func, (block_or_loop, tensor_intrin))

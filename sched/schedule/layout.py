"""transform_layout: store a buffer in another layout, given by an index map.

    sch.transform_layout(block, "B", lambda i, j: (i // 4, j, i % 4))

Every access `B[i, j]` becomes `B[i // 4, j, i % 4]` and the buffer gets the shape of the
map's image (its bounding box). The invariant: the map is injective on the buffer's elements
(checked with isl), so distinct elements stay distinct and every load still reads what the
matching store wrote; no order changes, so no dependence can break. Where the image does not
fill the new shape (a map that pads, such as `i // 4` of 10 rows), the extra elements are
never read; `pad_value=` fills them first with a block `<B>_pad`, as TVM does, so that later
steps that read whole rows see a defined value. The regions of the blocks that access the
buffer are inferred again from their accesses (over-approximated where not affine).
"""

from __future__ import annotations

import dataclasses

import islpy as isl
import numpy as np

from sched.errors import ScheduleError
from sched.ir.builders import literal
from sched.ir.dtype import is_int, max_value
from sched.ir.functor import IRMutator, collect, free_vars, substitute
from sched.ir.names import fresh
from sched.ir.nodes import (
    TRUE,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Expr,
    FloatImm,
    For,
    IntImm,
    IterVar,
    PrimFunc,
    Range,
    Var,
    const,
    convert,
    seq,
)
from sched.ir.paths import path_to
from sched.ir.regions import infer_block_regions
from sched.polyhedral.isl_expr import isl_name, pw_aff_to_expr, to_isl, to_isl_comparison
from sched.polyhedral.isl_text import read_map, read_set
from sched.schedule.base import BlockRV, ScheduleBase
from sched.schedule.index_map import IndexMap
from sched.schedule.scope import block_names, taken_names
from sched.schedule.state import find_block, refuse_other_views, replace
from sched.schedule.storage_align import dim_align_requests

PRIMITIVE = "transform_layout"


def transform_layout(func: PrimFunc, block_name: str, buffer_ref, index_map,
                     pad_value=None) -> PrimFunc:
    """`func` with the buffer `buffer_ref` of block `block_name` stored through `index_map`
    (see Schedule.transform_layout)."""
    realize = find_block(func, block_name, PRIMITIVE)
    buffer = _buffer(realize.block, buffer_ref)
    if buffer in func.buffers:
        raise ScheduleError(PRIMITIVE, f"{buffer.name!r} is a parameter of the function: its "
                            f"layout is the caller's; transform the layout of a cache of it "
                            f"(cache_read / cache_write) instead")
    refuse_other_views(func, buffer, PRIMITIVE, "changing its layout")
    _refuse_aligned(func, buffer)
    symbolic = {v for d in buffer.shape for v in free_vars(d)}
    if not symbolic <= set(func.symbolic_vars) or any(to_isl(d) is None for d in buffer.shape):
        raise ScheduleError(PRIMITIVE, f"{buffer.name!r} has the shape "
                            f"({', '.join(d.script() for d in buffer.shape)}); the image of the "
                            f"index map is computed for shapes affine in the symbolic dims")
    dtype = buffer.shape[0].dtype if buffer.shape else "int32"
    mapping = IndexMap.from_callable(index_map, buffer.ndim, dtype)
    if len(mapping.params) != buffer.ndim:
        raise ScheduleError(PRIMITIVE, f"the index map takes {len(mapping.params)} indices; "
                            f"{buffer.name!r} has {buffer.ndim}")
    shape, padded = _image_shape(buffer, mapping)
    new = Buffer(buffer.name, shape, buffer.dtype, buffer.scope)
    new_func = dataclasses.replace(func, body=_Relayout(buffer, new, mapping).visit(func.body))
    if pad_value is not None and padded:
        new_func = _fill_padding(new_func, new, pad_value)
    return new_func


def _buffer(block: Block, ref, primitive: str = PRIMITIVE) -> Buffer:
    """The buffer named by `ref`: a name, a Buffer, or ("read" | "write", index); refused
    as step `primitive`'s argument."""
    regions = {"read": block.reads, "write": block.writes}
    if isinstance(ref, tuple | list) and len(ref) == 2 and ref[0] in regions:
        kind, index = ref
        if not isinstance(index, int) or not 0 <= index < len(regions[kind]):
            raise ScheduleError(primitive, f"argument 'buffer': block {block.name!r} has "
                                f"{len(regions[kind])} {kind} regions, got index {index!r}")
        return regions[kind][index].buffer
    name = ref.name if isinstance(ref, Buffer) else ref
    for region in (*block.reads, *block.writes):
        if region.buffer.name == name:
            return region.buffer
    listed = ", ".join(dict.fromkeys(r.buffer.name for r in (*block.reads, *block.writes)))
    raise ScheduleError(primitive, f"argument 'buffer': block {block.name!r} accesses no "
                        f"buffer {name!r} (it accesses {listed or 'none'}); give a name, a "
                        f"Buffer or (\"read\" | \"write\", index)")


def _image_shape(buffer: Buffer, mapping: IndexMap) -> tuple[tuple[Expr, ...], bool]:
    """The new shape (the bounding box of the map's image) and whether the image leaves part
    of it empty; refuses a map that is not affine, not injective or reaches below 0."""
    stray = {v.name for r in mapping.results for v in free_vars(r)} - \
        {p.name for p in mapping.params}
    bad = [r for r in mapping.results if not is_int(r.dtype) or to_isl(r) is None]
    if stray or bad:
        what = f"uses {', '.join(sorted(stray))}" if stray else \
            f"has the non-affine index {bad[0].script()}"
        raise ScheduleError(PRIMITIVE, f"the index map {mapping!r} {what}: it must be an "
                            f"affine function of the indices (+, -, * and // or % by "
                            f"constants)")
    dims = sorted({isl_name(v) for d in buffer.shape for v in free_vars(d)})
    # the map's parameters under names of their own (`lambda n: ...` over a shape (n,) names
    # an index like the dim)
    taken = set(dims)
    indices = {p: Var(fresh(f"i{d}", taken), p.dtype) for d, p in enumerate(mapping.params)}
    names = [isl_name(v) for v in indices.values()]
    results = [substitute(r, indices) for r in mapping.results]
    space = f"[{', '.join(dims)}] -> "
    domain = " and ".join([f"0 <= {n} < {to_isl(d)}" for n, d in zip(names, buffer.shape)] +
                          [f"{d} >= 1" for d in dims])
    outputs = [fresh(f"o{d}", taken) for d in range(len(mapping.results))]
    equalities = " and ".join(f"{o} = {to_isl(r)}" for o, r in zip(outputs, results))
    relation = read_map(f"{space}{{ [{', '.join(names)}] -> [{', '.join(outputs)}] : "
                       f"{domain or 'true'} and {equalities or 'true'} }}")
    if not relation.is_injective():
        raise ScheduleError(PRIMITIVE, f"the index map {mapping!r} sends two elements of "
                            f"{buffer.name!r} to one place: it must be injective on the shape "
                            f"({', '.join(d.script() for d in buffer.shape)})")
    image = relation.range()
    if dims:
        return _symbolic_image_shape(image, buffer, mapping, outputs)
    shape, box = [], isl.Set("{ [" + ", ".join(outputs) + "] : " +
                             " and ".join(f"0 <= {o}" for o in outputs) + " }")
    for d, name in enumerate(outputs):
        low = image.dim_min_val(d).to_python()
        high = image.dim_max_val(d).to_python()
        if low < 0:
            raise ScheduleError(PRIMITIVE, f"the index map {mapping!r} gives index {name} the "
                                f"value {low}: indices start at 0")
        dtype = buffer.shape[0].dtype if buffer.shape else "int32"     # (a 0-d buffer)
        if high + 1 > max_value(dtype):     # (a raw TypeError: audit helper-129)
            raise ScheduleError(PRIMITIVE, f"the index map {mapping!r} gives index {name} the "
                                f"value {high}, past {dtype}: declare the buffer's dimensions "
                                f"as T.int64 to map it so")
        shape.append(const(high + 1, dtype))
        box = box.intersect(read_set(f"{{ [{', '.join(outputs)}] : {name} <= {high} }}"))
    return tuple(shape), not image.is_equal(box)


def _symbolic_image_shape(image: isl.Set, buffer: Buffer, mapping: IndexMap,
                          outputs: list[str]) -> tuple[tuple[Expr, ...], bool]:
    """`_image_shape` of a buffer of a symbolic shape: per new dimension, one more than the
    largest index, an expression of the symbolic dims (isl's, for every value of them)."""
    dtype = buffer.shape[0].dtype
    variables = {isl_name(v): v for d in buffer.shape for v in free_vars(d)}
    space = f"[{', '.join(variables)}] -> "
    points = f"[{', '.join(outputs)}]"
    shape, bounds = [], []
    for d, name in enumerate(outputs):
        below = read_set(f"{space}{{ {points} : {name} < 0 }}")
        if not image.intersect(below).is_empty():
            raise ScheduleError(PRIMITIVE, f"the index map {mapping!r} gives index {name} a "
                                f"value below 0: indices start at 0")
        high = image.dim_max(d)
        extent = pw_aff_to_expr(high.add_constant_val(isl.Val.one(high.get_ctx())),
                                image.params(), variables, dtype)
        extent = IntImm(extent.value, dtype) if isinstance(extent, IntImm) else extent
        shape.append(extent)
        bound = to_isl_comparison(name, "<", extent)
        if bound is None:
            raise ScheduleError(PRIMITIVE, f"the image of the index map {mapping!r} on "
                                f"{buffer.name!r} has no extent isl can write in dimension {d}")
        bounds.append(f"0 <= {name} and ({bound})")
    box = read_set(f"{space}{{ {points} : {' and '.join(bounds) or 'true'} }}")
    return tuple(shape), not image.is_equal(box)




class _Relayout(IRMutator):
    """Accesses of the old buffer through the map; regions of the blocks that access it
    inferred again; the allocation replaced."""

    def __init__(self, old: Buffer, new: Buffer, mapping: IndexMap) -> None:
        self.old, self.new, self.mapping = old, new, mapping

    def visit_BufferLoad(self, node: BufferLoad):
        node = self.visit_children(node)
        if node.buffer == self.old:
            return BufferLoad(self.new, self.mapping(*node.indices))
        return node

    def visit_BufferStore(self, node: BufferStore):
        node = self.visit_children(node)
        if node.buffer == self.old:
            return BufferStore(self.new, node.value, self.mapping(*node.indices))
        return node

    def visit_Block(self, block: Block):
        body = self.visit(block.body)
        init = None if block.init is None else self.visit(block.init)
        allocs = tuple(self.new if b == self.old else b for b in block.alloc_buffers)
        touched = any(r.buffer == self.old for r in (*block.reads, *block.writes))
        # another buffer's region may index through the old one (`Y[S[i] % n]`, S relaid)
        reads, writes = (tuple(self._region(r) for r in regions)
                         for regions in (block.reads, block.writes))
        if touched:
            reads_new, writes_new = infer_block_regions(body, init, block.iter_vars, allocs)
            reads = _swap(reads, self.old, reads_new, self.new)
            writes = _swap(writes, self.old, writes_new, self.new)
        return dataclasses.replace(block, body=body, init=init, alloc_buffers=allocs,
                                   reads=reads, writes=writes)


    def _region(self, region: BufferRegion) -> BufferRegion:
        """`region` with the loads of the old buffer in its bounds through the map."""
        if region.buffer == self.old:
            return region                    # replaced by the inferred region (_swap)
        ranges = tuple(Range(self.visit(r.min), self.visit(r.extent)) for r in region.region)
        return region if ranges == region.region else BufferRegion(region.buffer, ranges)


def _swap(regions, old: Buffer, inferred, new: Buffer) -> tuple[BufferRegion, ...]:
    """`regions` with those of `old` replaced by the inferred ones of `new` (the whole new
    buffer when the block declared `old` without accessing it in its own body)."""
    ours = [r for r in inferred if r.buffer == new] or \
        [BufferRegion(new, tuple(Range(const(0, d.dtype), d) for d in new.shape))]
    out, placed = [], False
    for region in regions:
        if region.buffer != old:
            out.append(region)
        elif not placed:
            out.extend(ours)
            placed = True
    return tuple(out)


def _refuse_aligned(func: PrimFunc, buffer: Buffer) -> None:
    """A storage_align request on the buffer names an axis of its old layout, which the
    lowering would no longer find (it was dropped silently: audit helper-50)."""
    for realize in collect(func.body, BlockRealize):
        block = realize.block
        for index, axis, *_ in dim_align_requests(block):
            if index < len(block.writes) and block.writes[index].buffer.name == buffer.name:
                raise ScheduleError(PRIMITIVE, f"storage_align asked block {block.name!r} for "
                                    f"the stride of axis {axis} of {buffer.name!r}, an axis of "
                                    f"the layout this step replaces: transform the layout "
                                    f"first, then storage_align the new axes")


def _fill_padding(func: PrimFunc, buffer: Buffer, pad_value) -> PrimFunc:
    """`func` with a block `<buffer>_pad` storing `pad_value` in every element of `buffer`,
    first in the body of the block that allocates it (the program's stores then overwrite the
    elements of the image)."""
    owner = next(r for r in collect(func.body, BlockRealize)
                 if buffer in r.block.alloc_buffers)
    around = [n for n in path_to(func.body, owner) or () if isinstance(n, For)]
    if buffer.scope not in ("", "global") and any(
            loop.kind == "thread_binding" for loop in collect(func.body, For)) and not any(
            loop.kind == "thread_binding" for loop in around):
        # the padding nest would run where the buffer is allocated, outside the kernel's
        # thread loops, and no step could move it in (audit helper-144: the build refused it,
        # naming the copy that writes the cache)
        raise ScheduleError(PRIMITIVE, f"pad_value for {buffer.name!r} in {buffer.scope!r} "
                            f"memory of a GPU function: the padding would be written before "
                            f"the kernel, outside its thread loops, where {buffer.scope} "
                            f"memory does not exist; transform the layout without pad_value, "
                            f"or pad the buffer the cache copies (its global producer)")
    taken = taken_names(func)
    loops = [Var(fresh(f"ax{d}", taken), d_.dtype) for d, d_ in enumerate(buffer.shape)]
    taken |= {v.name for v in loops}
    iter_vars = tuple(IterVar(Var(fresh(f"v{d}", taken), dim.dtype),
                              Range(const(0, dim.dtype), dim))
                      for d, dim in enumerate(buffer.shape))
    indices = tuple(iv.var for iv in iter_vars)
    try:
        # (a number past a float type's range is refused as a script's literal is: it
        # printed T.float32(1e+40), which the parser refuses; audit helper-129)
        value = pad_value(*indices)[0] if isinstance(pad_value, IndexMap) else \
            literal(pad_value, buffer.dtype) if isinstance(pad_value, int | float) else \
            convert(pad_value, buffer.dtype)
    except TypeError as error:      # a number beyond the buffer's dtype
        raise ScheduleError(PRIMITIVE, f"pad_value={pad_value!r}: {error}") from None
    if collect(value, BufferLoad):
        raise ScheduleError(PRIMITIVE, f"pad_value={pad_value!r} reads a buffer; give a "
                            f"number or a function of the new indices alone")
    if value.dtype != buffer.dtype:
        raise ScheduleError(PRIMITIVE, f"pad_value={pad_value!r} is {value.dtype}; "
                            f"{buffer.name!r} holds {buffer.dtype}")
    whole = BufferRegion(buffer, tuple(Range(v, const(1, v.dtype)) for v in indices))
    block = Block(fresh(f"{buffer.name}_pad", block_names(func)), iter_vars, (), (whole,),
                  BufferStore(buffer, value, indices))
    nest = BlockRealize(tuple(loops), TRUE, block)
    for var, dim in reversed(list(zip(loops, buffer.shape))):
        nest = For(var, const(0, dim.dtype), dim, "serial", nest)
    new_block = dataclasses.replace(owner.block, body=seq(nest, owner.block.body))
    return replace(func, owner, dataclasses.replace(owner, block=new_block))


def _pad_value(pad_value, ndim: int, index_dtype: str, dtype: str):
    """`pad_value` as transform_layout takes it: None, a number, an expression, or a function
    of the new indices (TVM's callable form, kept as an IndexMap of one result so that it
    prints back in a trace)."""
    if isinstance(pad_value, IntImm | FloatImm):
        return pad_value.value          # `T.float32(-5)`: a number, as the trace prints it
    if isinstance(pad_value, np.generic):
        return pad_value.item()         # `np.float32(2.5)`
    if isinstance(pad_value, Expr):     # a constant expression: a function of no index
        if free_vars(pad_value):
            raise ScheduleError(PRIMITIVE, f"pad_value={pad_value.script()}: an expression of "
                                f"variables; give a function of the new indices instead "
                                f"(lambda i, j: ...)")
        return IndexMap.from_callable(lambda *_: pad_value, ndim, index_dtype, dtype,
                                      "pad_value")
    if pad_value is None or isinstance(pad_value, int | float | IndexMap):
        return pad_value
    if callable(pad_value):
        found = IndexMap.from_callable(pad_value, ndim, index_dtype, dtype, "pad_value")
        if len(found.results) != 1:
            raise ScheduleError(PRIMITIVE, f"pad_value: the function gives "
                                f"{len(found.results)} values; give one (the value of the "
                                f"padding element at the new indices)")
        return found
    raise ScheduleError(PRIMITIVE, f"pad_value={pad_value!r}: expected a number, an "
                        f"expression, or a function of the new indices (lambda i, j, k: 0.0)")


class LayoutPrimitives(ScheduleBase):
    """transform_layout."""

    def transform_layout(self, block: BlockRV, buffer, index_map, pad_value=None) -> None:
        """Store a buffer the block accesses in another layout: element `idx` goes to
        `index_map(*idx)`, in a buffer of the shape of the map's image.

        Requires: the buffer is allocated by the function (not a parameter) and has a constant
        shape; the map is affine (`+ - *`, `//` and `%` by constants) and injective on the
        shape, with no negative index. Nothing runs in another order, so no dependence check
        is needed; the accessing blocks' regions are inferred again.

        Arguments: `block` a block handle; `buffer` the buffer's name, ("read" | "write",
        index) into the block's regions, or the Buffer; `index_map` a function of the old
        indices (`lambda i, j: (i // 4, j, i % 4)`, also through `T.index_map`);
        `pad_value` stored first in the whole buffer, so that the elements no old index maps
        to (the map pads: the image is not the whole new shape) hold it: a number, or a
        function of the new indices (`lambda i, j, k: 0.0`, as TVM takes it).
        Returns: nothing. Handles stay valid.
        Also known as: `transform_layout` in TVM; Halide's `storage_folding`/`reorder_storage`
        cover its permutations.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((6, 4), name="A")
        >>> B = te.compute((6, 4), lambda i, j: A[i, j] * 2.0, name="B")
        >>> C = te.compute((6, 4), lambda i, j: B[i, j] + 1.0, name="C")
        >>> sch = sched.Schedule(te.create_prim_func([A, C]))
        >>> sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (j, i))
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((6, 4), "float32"), C: T.Buffer((6, 4), "float32")):
            with T.block("root"):
                B = T.alloc_buffer((4, 6), "float32")
                for i, j in T.grid(6, 4):
                    with T.block("B"):
                        v_i, v_j = T.axis.remap("SS", [i, j])
                        T.reads(A[v_i, v_j])
                        T.writes(B[v_j, v_i])
                        B[v_j, v_i] = A[v_i, v_j] * T.float32(2.0)
                for i_1, j_1 in T.grid(6, 4):
                    with T.block("C"):
                        v_i, v_j = T.axis.remap("SS", [i_1, j_1])
                        T.reads(B[v_j, v_i])
                        T.writes(C[v_i, v_j])
                        C[v_i, v_j] = B[v_j, v_i] + T.float32(1.0)
        """
        name = self._block(block, PRIMITIVE)
        realize = find_block(self._func, name, PRIMITIVE)
        target = _buffer(realize.block, buffer)
        dtype = target.shape[0].dtype if target.shape else "int32"
        mapping = IndexMap.from_callable(index_map, target.ndim, dtype)
        pad_value = _pad_value(pad_value, len(mapping.results), dtype, target.dtype)
        new_func = transform_layout(self._func, name, buffer, mapping, pad_value)
        attrs = (("pad_value", pad_value),) if pad_value is not None else ()
        # an injective map relabels elements: the same instances touch one element, in the
        # same order (a padding block is a new statement: the loops are checked again)
        self._record(PRIMITIVE, new_func, (block, buffer, mapping), attrs,
                     loops_kept=pad_value is None)

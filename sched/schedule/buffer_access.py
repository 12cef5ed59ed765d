"""annotate_buffer_access: a block's declared read or write region of one buffer replaced by
the one a function of its iteration variables gives, marked `explicit_read_region` /
`explicit_write_region` (the indices of the regions set so), as TVM does.

    with T.block("B"):                            with T.block("B"):
        vi, vj = T.axis.remap("SS", [i, j])   ->      vi, vj = T.axis.remap("SS", [i, j])
        B[vi, vj] = A[vi, vj] * 2.0                   T.reads(A[vi - 1:vi + 1, vj - 1:vj + 1])
                                                      T.block_attr({"explicit_read_region": [0]})
                                                      B[vi, vj] = A[vi, vj] * 2.0

TVM trusts the region (its later steps compute what a producer must cover from it). sched
checks it: isl must prove that every element the block (its body and its init) reads (or
writes) of the buffer, at every instance, lies in the new region at that instance; a smaller
region is refused, naming an instance and an element outside it. A larger one is sound: a
declared read region reads as "may read"; sched's analyses of a block with no opaque call
take its accesses from its body, never from its declared regions (only an opaque block's
regions are its accesses, and those are refused here: they are its contract with the call).
Where isl cannot bound an access (an index that is not affine: a float computation, a load),
the region cannot be proven and is refused too; that is the price of not trusting it.
"""

from __future__ import annotations

import dataclasses

import islpy as isl

from sched.errors import ScheduleError
from sched.ir.extern import is_opaque
from sched.ir.functor import collect, substitute
from sched.ir.nodes import BlockRealize, BufferRegion, PrimFunc, Range, Var, convert
from sched.ir.simplify import simplify
from sched.polyhedral import build_model
from sched.polyhedral.isl_expr import (
    NotAffine,
    isl_name,
    pw_aff_to_expr,
    to_isl,
    to_isl_comparison,
)
from sched.schedule.base import BlockRV, ScheduleBase
from sched.schedule.index_map import read_lambda
from sched.schedule.state import find_block, replace
from sched.schedule.trace import JSON_READERS

PRIMITIVE = "annotate_buffer_access"
KEYS = {"read": "explicit_read_region", "write": "explicit_write_region"}


class RangeMap:
    """`gen_new_ranges` as IR: a function of the block's iteration variables giving, per
    dimension, an index (one element) or a pair (start, end) (`[start, end)`), kept so that
    it prints back as that lambda in a trace."""

    json_key = "range_map"

    def __init__(self, params: tuple[Var, ...], ranges: tuple) -> None:
        self.params, self.ranges = params, ranges

    @classmethod
    def from_callable(cls, function, params: tuple[Var, ...]) -> RangeMap:
        if isinstance(function, RangeMap):
            return function
        if not callable(function):
            raise ScheduleError(PRIMITIVE, f"argument 4, 'gen_new_ranges' to {PRIMITIVE}: "
                                f"expected a function of the block's iteration variables, got "
                                f"{function!r}")
        try:
            results = function(*params)
        except TypeError as exc:
            raise ScheduleError(PRIMITIVE, f"argument 4, 'gen_new_ranges' to {PRIMITIVE}: "
                                f"calling it with the block's {len(params)} iteration "
                                f"variables failed: {exc}") from None
        dtype = params[0].dtype if params else "int32"
        ranges = tuple(tuple(convert(x, dtype) for x in r) if isinstance(r, tuple | list)
                       else convert(r, dtype) for r in results)
        if any(isinstance(r, tuple) and len(r) != 2 for r in ranges):
            raise ScheduleError(PRIMITIVE, f"argument 4, 'gen_new_ranges' to {PRIMITIVE}: "
                                f"each dimension takes an index or a pair (start, end), got "
                                f"{results!r}")
        return cls(params, ranges)

    def __call__(self, variables) -> tuple[Range, ...]:
        mapping = dict(zip(self.params, variables, strict=True))
        out = []
        for r in self.ranges:
            if isinstance(r, tuple):
                start, end = (substitute(x, mapping) for x in r)
                out.append(Range(simplify(start), _difference(end, start, variables)))
            else:
                out.append(Range(simplify(substitute(r, mapping)), convert(1, r.dtype)))
        return tuple(out)

    def __repr__(self) -> str:
        parts = [f"({r[0].script()}, {r[1].script()})" if isinstance(r, tuple) else r.script()
                 for r in self.ranges]
        comma = "," if len(parts) == 1 else ""
        return f"lambda {', '.join(p.name for p in self.params)}: ({', '.join(parts)}{comma})"

    def to_json(self) -> dict:
        return {"lambda": repr(self), "dtype": self.params[0].dtype if self.params else "int32"}

    @classmethod
    def from_json(cls, value: dict) -> RangeMap:
        import ast

        params, body, read = read_lambda(value)
        return cls(params, tuple(tuple(read(x) for x in e.elts) if isinstance(e, ast.Tuple)
                                 else read(e) for e in body))


JSON_READERS[RangeMap.json_key] = RangeMap.from_json


def _difference(end, start, variables):
    """`end - start`, simplified by isl where it is affine (`vi + 1 - (vi - 1)` is 2)."""
    text = to_isl(end - start)
    if text is None:
        return simplify(end - start)
    names = ", ".join(isl_name(v) for v in variables)
    pw = isl.PwAff(f"[{names}] -> {{ [({text})] }}")
    try:
        return pw_aff_to_expr(pw, isl.Set(f"[{names}] -> {{ : }}"),
                              {isl_name(v): v for v in variables})
    except NotAffine:            # (constants past int64: audit helper-169, a raw NotAffine)
        return simplify(end - start)


def annotate_buffer_access(func: PrimFunc, block_name: str, buffer_index, buf_type,
                           gen_new_ranges) -> PrimFunc:
    """`func` with the region `buffer_index` of block `block_name`'s reads (`buf_type`
    "read") or writes ("write") replaced by `gen_new_ranges`' (see
    Schedule.annotate_buffer_access)."""
    if buf_type not in KEYS:
        raise ScheduleError(PRIMITIVE, f"argument 3, 'buf_type' to {PRIMITIVE}: expected "
                            f"\"read\" or \"write\", got {buf_type!r}")
    realize = find_block(func, block_name, PRIMITIVE)
    block = realize.block
    regions = block.reads if buf_type == "read" else block.writes
    kind = "reads" if buf_type == "read" else "writes"
    if not isinstance(buffer_index, int) or isinstance(buffer_index, bool) or \
            not 0 <= buffer_index < len(regions):
        listing = ", ".join(f"{i}: {r.buffer.name}" for i, r in enumerate(regions)) or "none"
        raise ScheduleError(PRIMITIVE, f"argument 2, 'buffer_index' to {PRIMITIVE}: expected "
                            f"an index in [0, {len(regions)}) into the {kind} of block "
                            f"{block_name!r} ({listing}), got {buffer_index!r}")
    if is_opaque(block):
        raise ScheduleError(PRIMITIVE, f"block {block_name!r} makes an opaque call: its "
                            f"declared regions are what the call may touch, which "
                            f"{PRIMITIVE} cannot check; declare them in the script")
    buffer = regions[buffer_index].buffer
    variables = tuple(iv.var for iv in block.iter_vars)
    mapping = RangeMap.from_callable(gen_new_ranges, variables)
    ranges = mapping(variables)
    if len(ranges) != len(buffer.shape):
        raise ScheduleError(PRIMITIVE, f"argument 4, 'gen_new_ranges' to {PRIMITIVE}: it "
                            f"gives {len(ranges)} ranges, but {buffer.name!r} has "
                            f"{len(buffer.shape)} dimensions")
    region = BufferRegion(buffer, ranges)
    _check_covers(func, block_name, region, buf_type)
    new = list(regions)
    new[buffer_index] = region
    marked = dict(block.annotations).get(KEYS[buf_type], ())
    marked = tuple(marked) + (() if buffer_index in tuple(marked) else (buffer_index,))
    annotations = tuple((k, marked if k == KEYS[buf_type] else v) for k, v in block.annotations)
    if KEYS[buf_type] not in dict(block.annotations):
        annotations += ((KEYS[buf_type], marked),)
    new_block = dataclasses.replace(block, annotations=annotations, **{kind: tuple(new)})
    return replace(func, realize, dataclasses.replace(realize, block=new_block))


def _check_covers(func: PrimFunc, block_name: str, region: BufferRegion, buf_type: str
                  ) -> None:
    """Refuse `region` unless isl proves it holds every element the block accesses so."""
    shown = ", ".join(f"{r.min.script()}:{(r.min + r.extent).script()}" for r in region.region)
    names = [f"e{d}" for d in range(len(region.region))]
    # each bound may hold selects (`T.min(vi + 1, 128)` less vi is one): read as pieces
    texts = [(to_isl_comparison(n, ">=", r.min), to_isl_comparison(n, "<", r.min + r.extent))
             for n, r in zip(names, region.region)]
    if any(t is None for pair in texts for t in pair):
        raise ScheduleError(PRIMITIVE, f"the region {region.buffer.name}[{shown}] is not "
                            f"affine in the block's iteration variables, so {PRIMITIVE} cannot "
                            f"check that it holds what the block accesses")
    model = build_model(func)
    statements = model.statements_of_block(block_name)
    if not statements or collect(find_block(func, block_name, PRIMITIVE).block.body,
                                 BlockRealize):
        raise ScheduleError(PRIMITIVE, f"block {block_name!r} holds blocks and has no accesses "
                            f"of its own, so {PRIMITIVE} cannot check that "
                            f"{region.buffer.name}[{shown}] holds what they access; annotate "
                            f"the blocks inside it")
    for statement in statements:
        accessed = statement.accesses_of(region.buffer.name, buf_type)
        if accessed is None:
            continue
        if any(not (v.access.is_affine and v.access.guards_exact)
               for v in statement.accesses if v.buffer.name == region.buffer.name
               and v.is_write == (buf_type == "write")):
            raise ScheduleError(PRIMITIVE, f"isl cannot bound what block {block_name!r} "
                                f"{buf_type}s of {region.buffer.name!r} (an index that is not "
                                f"affine: a load, a float computation), so {PRIMITIVE} cannot "
                                f"check {region.buffer.name}[{shown}] holds it; sched does not "
                                f"trust a declared region it cannot check")
        bounds = " and ".join(f"({lo}) and ({hi})" for lo, hi in texts)
        params = model.params
        declared = isl.Map(f"[{', '.join(params)}] -> {{ {statement.instance()} -> "
                           f"{accessed.get_tuple_name(isl.dim_type.out)}[{', '.join(names)}]"
                           f" : {bounds} }}")
        outside = accessed.subtract(declared)
        if not outside.is_empty():
            point = outside.wrap().sample_point()
            n_in = accessed.dim(isl.dim_type.in_)
            coordinates = [point.get_coordinate_val(isl.dim_type.set, d).to_python()
                           for d in range(n_in + accessed.dim(isl.dim_type.out))]
            values, element = coordinates[:n_in], coordinates[n_in:]
            instance = ", ".join(f"{iv.var.name}={v}"
                                 for iv, v in zip(statement.block.iter_vars, values))
            raise ScheduleError(PRIMITIVE, f"block {block_name!r} {buf_type}s "
                                f"{region.buffer.name}[{', '.join(map(str, element))}] at "
                                f"{instance}, outside the region "
                                f"{region.buffer.name}[{shown}] given for it: a declared "
                                f"region must hold every element the block {buf_type}s; give "
                                f"a larger one")


class BufferAccessPrimitives(ScheduleBase):
    """annotate_buffer_access."""

    def annotate_buffer_access(self, block: BlockRV | str, buffer_index: int, buf_type: str,
                               gen_new_ranges) -> None:
        """Replace the declared read (or write) region `buffer_index` of `block` with the one
        `gen_new_ranges` gives, and mark it in the block's annotations
        (`explicit_read_region` or `explicit_write_region`: the indices so set).

        Requires: the block makes no opaque call; the new region, affine in the block's
        iteration variables, holds every element the block reads (writes) of the buffer at
        every instance, which isl proves (a smaller region is refused, not trusted).

        Arguments: `block` a block handle or name; `buffer_index` an index into its reads
        (`buf_type` "read") or writes ("write"); `gen_new_ranges` a function of the block's
        iteration variables giving, per dimension, an index or a pair (start, end) for
        `[start, end)`.
        Handles: all stay valid.
        Also known as: `annotate_buffer_access` in TVM, which trusts the region.

        >>> import sched
        >>> from sched.script import T
        >>> @T.prim_func
        ... def double(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
        ...     for i, j in T.grid(8, 8):
        ...         with T.block("B"):
        ...             vi, vj = T.axis.remap("SS", [i, j])
        ...             B[vi, vj] = A[vi, vj] * 2.0
        >>> sch = sched.Schedule(double)
        >>> sch.annotate_buffer_access("B", 0, "read",
        ...                            lambda vi, vj: ((vi - 1, vi + 1), (vj - 1, vj + 1)))
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def double(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
            with T.block("root"):
                for i, j in T.grid(8, 8):
                    with T.block("B"):
                        vi, vj = T.axis.remap("SS", [i, j])
                        T.reads(A[vi - 1:vi + 1, vj - 1:vj + 1])
                        T.writes(B[vi, vj])
                        T.block_attr({"explicit_read_region": [0]})
                        B[vi, vj] = A[vi, vj] * T.float32(2.0)
        """
        name = self._block(block, PRIMITIVE)
        realize = find_block(self._func, name, PRIMITIVE)
        mapping = RangeMap.from_callable(gen_new_ranges,
                                         tuple(iv.var for iv in realize.block.iter_vars))
        new_func = annotate_buffer_access(self._func, name, buffer_index, buf_type, mapping)
        self._record(PRIMITIVE, new_func, (block, buffer_index, buf_type, mapping),
                     loops_kept=True)


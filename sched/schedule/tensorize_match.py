"""Matching an intrinsic's description against a block, for `tensorize`.

The block (the one `blockize` makes) must hold a loop nest around one block, as the
description does. They match when, with the description's loops renamed to the block's loops
in order:

1. the loops have the same count, bounds and roles (spatial or reduce, from the iteration
   variables their bindings feed);
2. the inner blocks have no predicate, and both have an init or neither;
3. the bodies (and inits) are equal up to renaming, with the iteration variables replaced by
   their bindings: same operations, constants and dtypes; each buffer of the description stands
   for one buffer of the block, of the same dtype and scope;
4. every access, relative to the region of the block that holds it (its lowest corner), is the
   description's access: `C[v_i_0 * 4 + i_1, ...]` in the region `C[v_i_0 * 4:v_i_0 * 4 + 4,
   ...]` is `C[i, ...]`, compared as affine forms of the loops, or, where either side is only
   quasi-affine (`W[4 * (i % 8) + j % 8 // 2, ...]`, a warp-register layout), by isl as
   functions equal at every point of the loops' and the block's variables' ranges; the
   region's extents are the description buffer's shape (leading dimensions of extent 1
   dropped). A variable of the block over a single value counts as that value.

Then each instance of the block computes, loop for loop, what the description computes on the
sub-regions at those corners; `Binding` records where each description buffer lies. The first
mismatch found is raised as `Mismatch` with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from sched.ir.functor import collect, field_names, substitute
from sched.ir.nodes import (
    TRUE,
    BinaryOp,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    IntImm,
    Node,
    Range,
    Var,
)
from sched.ir.simplify import simplify
from sched.polyhedral.expr_equality import equal_on_box
from sched.schedule.scope import loop_roles
from sched.schedule.tensor_intrin import IntrinPattern, loop_nest


class Mismatch(Exception):
    """Why a block does not match an intrinsic's description; `loop` names the block's loop
    concerned, if any."""

    def __init__(self, reason: str, loop: str | None = None) -> None:
        super().__init__(reason)
        self.reason, self.loop = reason, loop


@dataclass(frozen=True)
class Binding:
    """Where a description buffer lies in the block: `buffer[corner...]` is its element 0 (its
    dimensions are the last ones of `buffer`; the leading ones are fixed at the corner)."""

    buffer: Buffer
    corner: tuple[Expr, ...]


def match(pattern: IntrinPattern, block: Block) -> dict[Buffer, Binding]:
    """How the description buffers bind to `block`'s buffers; raises Mismatch."""
    loops, inner = loop_nest(block.body)
    if not isinstance(inner, BlockRealize):
        raise Mismatch(f"block {block.name!r} does not hold a loop nest around one block; "
                       f"tensorize the loop above the block (sch.tensorize(loop, ...))")
    _match_loops(pattern, loops, inner)
    if inner.predicate != TRUE:
        raise Mismatch(f"block {inner.block.name!r} has the predicate {inner.predicate} (a "
                       f"loop that does not divide evenly); the intrinsic covers whole tiles")
    renamed = {d.loop_var: w.loop_var for d, w in zip(pattern.loops, loops, strict=True)}
    desc_inner = pattern.realize
    ours, theirs = _bound_body(desc_inner, renamed), _bound_body(inner, {})
    if (ours[1] is None) != (theirs[1] is None):
        has = "has" if theirs[1] is not None else "has no"
        raise Mismatch(f"block {inner.block.name!r} {has} init, the intrinsic's block "
                       f"{'does not' if ours[1] is None else 'does'}"
                       + ("; sch.decompose_reduction(block, loop) first" if ours[1] is None
                          else ""))
    comparator = _Comparator(block, {lp.loop_var: Range(lp.min, lp.extent) for lp in loops})
    if theirs[1] is not None:
        _same_init_points(inner, loops, comparator.fixed, f"block {inner.block.name!r}")
        _same_init_points(desc_inner, pattern.loops, {}, "the intrinsic's block")
    for desc_part, block_part in zip(ours, theirs):
        if desc_part is not None:
            comparator.same(desc_part, block_part)
    return comparator.bindings


def _same_init_points(inner: BlockRealize, loops: tuple[For, ...], fixed: dict[Var, Expr],
                      who: str) -> None:
    """Refuse a block with an init (the intrinsic's has one too) whose init does not run at
    the first iteration of the tile's loops and only there: each reduce variable must be
    bound to those loops alone (a reduction that goes on outside the tile, `v_k_0 * 8 + k_1`
    under a split K, inits once; the intrinsic would init on every tile) and at their first
    iteration be at its domain's first value."""
    tile = {lp.loop_var for lp in loops}
    first = {lp.loop_var: lp.min for lp in loops}
    for iv, value in zip(inner.block.iter_vars, inner.iter_values):
        if iv.kind != "reduce":
            continue
        value = simplify(substitute(value, fixed))
        outside = sorted({v.name for v in collect(value, Var)} - {v.name for v in tile})
        if outside:
            raise Mismatch(
                f"the reduction of {who} goes on outside the tensorized loops (its reduce "
                f"variable {iv.var.name} = {value} uses {', '.join(outside)}): its init runs "
                f"once for the whole reduction, the intrinsic's init would run on every tile; "
                f"tensorize a loop holding the whole reduction, or "
                f"sch.decompose_reduction(block, loop) first and use an intrinsic without "
                f"an init")
        start = simplify(substitute(value, first))
        if simplify(start - iv.dom.min) != IntImm(0, start.dtype):
            raise Mismatch(f"the init of {who} runs where {iv.var.name} = {iv.dom.min}, but the "
                           f"tensorized loops start at {iv.var.name} = {start}: the intrinsic "
                           f"would init there")


def _match_loops(pattern: IntrinPattern, loops: tuple[For, ...], inner: BlockRealize) -> None:
    def extents(nest):
        return "(" + ", ".join(str(lp.extent) for lp in nest) + ")"
    if len(loops) != len(pattern.loops):
        raise Mismatch(f"the intrinsic has {len(pattern.loops)} loops {extents(pattern.loops)}, "
                       f"the block {len(loops)} {extents(loops)}")
    desc_roles = loop_roles(pattern.realize, pattern.loops)
    roles = loop_roles(inner, loops)
    for position, (ours, theirs) in enumerate(zip(pattern.loops, loops)):
        name = theirs.loop_var.name
        if simplify(theirs.extent) != simplify(ours.extent):
            raise Mismatch(f"loop {position} ({name!r}) has extent {theirs.extent}, the "
                           f"intrinsic's loop {ours.loop_var.name!r} has extent {ours.extent}; "
                           f"split the loops to the intrinsic's shape {extents(pattern.loops)}",
                           loop=name)
        if simplify(theirs.min) != simplify(ours.min):
            raise Mismatch(f"loop {position} ({name!r}) starts at {theirs.min}, the "
                           f"intrinsic's loop {ours.loop_var.name!r} at {ours.min}; split it "
                           f"so that the tensorized loop starts there", loop=name)
        if roles[theirs.loop_var] != desc_roles[ours.loop_var]:
            raise Mismatch(f"loop {position} ({name!r}) feeds {_roles(roles[theirs.loop_var])} "
                           f"iteration variables, the intrinsic's loop {ours.loop_var.name!r} "
                           f"feeds {_roles(desc_roles[ours.loop_var])} ones; reorder the loops "
                           f"as the intrinsic orders them", loop=name)


def _roles(kinds: set[str]) -> str:
    return " and ".join(sorted(kinds)) or "no"


def _bound_body(realize: BlockRealize, renamed: dict[Var, Var]):
    """The body and init of the block with its iteration variables replaced by their bindings
    (then the loops renamed)."""
    values = {iv.var: substitute(value, renamed)
              for iv, value in zip(realize.block.iter_vars, realize.iter_values)}
    block = realize.block
    return substitute(block.body, values), (substitute(block.init, values)
                                           if block.init is not None else None)


class _Comparator:
    """Structural equality of a description's body with a block's, binding buffers."""

    def __init__(self, block: Block, loops: dict[Var, Range]) -> None:
        self.block, self.loops = block, loops
        # a variable of the block over one value is that value (the region's corner, found by
        # polyhedral/, already says 0 where the access says v_i_0 * 4)
        self.fixed = {iv.var: iv.dom.min for iv in block.iter_vars
                      if isinstance(simplify(iv.dom.extent), IntImm)
                      and simplify(iv.dom.extent).value == 1}
        self.bindings: dict[Buffer, Binding] = {}
        self._taken: dict[Buffer, Buffer] = {}

    def same(self, ours, theirs) -> None:
        if type(ours) is not type(theirs):
            raise Mismatch(f"the intrinsic computes {ours}, block {self.block.name!r} "
                           f"computes {theirs}{_dtype_hint(ours, theirs)}")
        if isinstance(ours, BufferLoad | BufferStore):
            self._same_access(ours, theirs)
            if isinstance(ours, BufferStore):
                self.same(ours.value, theirs.value)
            return
        if isinstance(ours, Var):
            if ours != theirs:
                raise Mismatch(f"the intrinsic uses {ours}, block {self.block.name!r} uses "
                               f"{theirs}")
            return
        if isinstance(ours, Node) and not isinstance(ours, Buffer):
            for name in field_names(type(ours)):
                self._same_field(getattr(ours, name), getattr(theirs, name), ours, theirs)
            return
        if ours != theirs:
            raise Mismatch(f"the intrinsic has {ours!r}, block {self.block.name!r} has "
                           f"{theirs!r}")

    def _same_field(self, a, b, ours, theirs) -> None:
        if isinstance(a, tuple):
            if not isinstance(b, tuple) or len(a) != len(b):
                raise Mismatch(f"the intrinsic computes {ours}, block {self.block.name!r} "
                               f"computes {theirs}")
            for x, y in zip(a, b):
                self._same_field(x, y, ours, theirs)
        elif isinstance(a, Node):
            self.same(a, b)
        elif a != b:
            raise Mismatch(f"the intrinsic computes {ours}, block {self.block.name!r} "
                           f"computes {theirs}")

    def _same_access(self, ours, theirs) -> None:
        binding = self._bind(ours.buffer, theirs.buffer)
        lead = len(theirs.indices) - len(ours.indices)
        for dim, (corner, index) in enumerate(zip(binding.corner, theirs.indices)):
            index, corner = substitute(index, self.fixed), substitute(corner, self.fixed)
            relative = _difference(index, corner)
            expected = _linear(ours.indices[dim - lead]) if dim >= lead else {}
            if relative is None or expected is None:
                # quasi-affine (a warp-register layout's `4 * (i % 8) + j % 8 // 2`): the two
                # must agree at every instance, which isl decides on the loops' and the
                # block's variables' ranges
                wanted = ours.indices[dim - lead] if dim >= lead else IntImm(0, index.dtype)
                same = equal_on_box(index - corner, wanted, self._box())
            else:
                same = relative == expected
            if not same:
                raise Mismatch(f"block {self.block.name!r} accesses {theirs.buffer.name}"
                               f"[{_list(theirs.indices)}] in its region from "
                               f"[{_list(binding.corner)}], not as the intrinsic accesses "
                               f"{ours.buffer.name}[{_list(ours.indices)}]")

    def _box(self) -> dict[Var, Range]:
        """The ranges of the nest's loops and of the block's iteration variables."""
        return {**{iv.var: iv.dom for iv in self.block.iter_vars}, **self.loops}

    def _bind(self, ours: Buffer, theirs: Buffer) -> Binding:
        found = self.bindings.get(ours)
        if found is not None:
            if found.buffer != theirs:
                raise Mismatch(f"the intrinsic's buffer {ours.name} stands for both "
                               f"{found.buffer.name} and {theirs.name} in block "
                               f"{self.block.name!r}")
            return found
        other = self._taken.get(theirs)
        if other is not None:
            raise Mismatch(f"{theirs.name} of block {self.block.name!r} would be both "
                           f"{other.name} and {ours.name} of the intrinsic")
        for what in ("dtype", "scope"):
            if getattr(ours, what) != getattr(theirs, what):
                raise Mismatch(f"{theirs.name} of block {self.block.name!r} has {what} "
                               f"{getattr(theirs, what)!r}, the intrinsic's {ours.name} has "
                               f"{what} {getattr(ours, what)!r}")
        region = _region(self.block, theirs)
        if region is None:
            raise Mismatch(f"{theirs.name} is allocated inside block {self.block.name!r}; the "
                           f"intrinsic's {ours.name} must be a region the block reads or writes")
        lead = len(region) - ours.ndim
        extents = [simplify(r.extent) for r in region]
        wanted = [IntImm(1, "int32")] * max(lead, 0) + [simplify(d) for d in ours.shape]
        if lead < 0 or [_constant(e) for e in extents] != [_constant(e) for e in wanted] or \
                any(_constant(e) is None for e in extents):
            across = sorted(map(str, extents)) == sorted(map(str, wanted)) and lead >= 0
            hint = (f" (the same size along other dimensions: the intrinsic reads the last "
                    f"ones contiguously; lay {theirs.name} out so that the tile runs along "
                    f"them, as sch.transform_layout or a cache_read and its layout do)"
                    if across else "")
            raise Mismatch(f"the region of {theirs.name} in block {self.block.name!r} is "
                           f"{_shape(extents)}, the intrinsic's {ours.name} is "
                           f"{_shape(ours.shape)}{hint}")
        binding = Binding(theirs, tuple(simplify(r.min) for r in region))
        self.bindings[ours], self._taken[theirs] = binding, ours
        return binding


def _dtype_hint(ours, theirs) -> str:
    """Where the two sides read buffers of other dtypes (fp32 data against an fp16
    intrinsic, whose body casts what it reads), that, as the likely cause."""
    from sched.ir.functor import collect

    read = [sorted({load.buffer.dtype for load in collect(side, BufferLoad)})
            for side in (ours, theirs)]
    if not all(read) or read[0] == read[1]:
        return ""
    return (f" (the intrinsic reads {', '.join(read[0])}, the block {', '.join(read[1])}: "
            f"choose the intrinsic of the block's dtypes)")


def _region(block: Block, buffer: Buffer) -> tuple[Range, ...] | None:
    """The region of `buffer` that `block` reads or writes (their hull when both); None when
    the block declares neither (a buffer allocated inside it)."""
    from sched.schedule.memory import _hull

    boxes = [r.region for r in block.reads + block.writes if r.buffer == buffer]
    if not boxes:
        return None
    box = boxes[0]
    for other in boxes[1:]:
        if other != box:
            box = _hull(box, other)
    return box


def _constant(expr: Expr) -> int | None:
    return expr.value if isinstance(expr, IntImm) else None


def _shape(dims) -> str:
    return "x".join(str(d) for d in dims)


def _list(exprs) -> str:
    return ", ".join(str(e) for e in exprs)


def _difference(index: Expr, corner: Expr) -> dict | None:
    a, b = _linear(index), _linear(corner)
    if a is None or b is None:
        return None
    return _add(a, {k: -v for k, v in b.items()})


def _add(a: dict, b: dict) -> dict:
    total = dict(a)
    for key, value in b.items():
        total[key] = total.get(key, 0) + value
    return {k: v for k, v in total.items() if v != 0}


def _linear(expr: Expr) -> dict | None:
    """`expr` as {variable name: coefficient, None: constant} when affine, else None."""
    if isinstance(expr, IntImm):
        return {None: expr.value} if expr.value else {}
    if isinstance(expr, Var):
        return {expr.name: 1}
    if isinstance(expr, BinaryOp) and expr.op in ("add", "sub", "mul"):
        a, b = _linear(expr.a), _linear(expr.b)
        if a is None or b is None:
            return None
        if expr.op == "add":
            return _add(a, b)
        if expr.op == "sub":
            return _add(a, {k: -v for k, v in b.items()})
        for scale, form in ((a, b), (b, a)):
            if set(scale) <= {None}:
                factor = scale.get(None, 0)
                return {k: v * factor for k, v in form.items() if v * factor}
    return None


__all__ = ["Binding", "Mismatch", "match"]

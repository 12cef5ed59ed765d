"""Loop transformations: split and fuse (reorder, tile and add_unit_loop: loop_order.py).

Each is a pure function `(func, loop names, arguments) -> (new func, new loop names)`;
`LoopPrimitives` at the end wraps them as Schedule methods with handles, docs and the trace.
Split and fuse keep the execution order (a split with a guard too).
"""

from __future__ import annotations

import dataclasses
import math
import numbers

from sched.errors import ScheduleError
from sched.ir.builders import cast_to
from sched.ir.dtype import bits, is_int, max_value
from sched.ir.functor import collect, free_vars, substitute
from sched.ir.intervals import interval, parameter_ranges
from sched.ir.nodes import (
    BinaryOp,
    BlockRealize,
    Expr,
    For,
    IntImm,
    PrimFunc,
    Stmt,
    Var,
    binary,
    const,
    is_constant,
)
from sched.ir.simplify import simplify
from sched.polyhedral.isl_expr import isl_name, to_isl
from sched.polyhedral.isl_text import read_set
from sched.schedule.base import LoopRV, ScheduleBase
from sched.schedule.state import (
    and_predicate,
    blocks_under,
    find_loop,
    fresh_name,
    replace,
    replace_in,
)


def _guard_blocks(stmt: Stmt, condition: Expr) -> Stmt:
    """`stmt` with `condition` added to the predicate of every outermost block in it."""
    for realize in blocks_under(stmt):
        stmt = replace_in(stmt, realize, and_predicate(realize, condition))
    return stmt


def _as_ints(factors):
    """Split factors as TVM users also write them, `T.int64(32)` (an IntImm) or numpy
    integers, as Python ints (a sampled factor, an int the trace names, is kept)."""
    if not isinstance(factors, list | tuple):
        return factors
    return [f.value if isinstance(f, IntImm) and is_int(f.dtype) else
            int(f) if isinstance(f, numbers.Integral) and not isinstance(f, int) else f
            for f in factors]


def arithmetic_dtype(dtype: str) -> str:
    """The dtype the loops that split or fuse make from loops of `dtype` count in: int32 for
    8- and 16-bit loops, int64 for uint32, the loop's own otherwise. An int8 loop of 120
    split by 16 had the extent `(120 + 15) // 16` in int8, which wrapped to -121, and fusing
    int8 loops of 16 and 8 the extent 128, -128 (audit helper-185): no iteration ran."""
    if dtype in ("int32", "int64") or not is_int(dtype):
        return dtype
    return "int64" if bits(dtype) >= 32 else "int32"


def _check_factors(factors, extent: Expr, loop: str) -> list[int | None]:
    if not isinstance(factors, list | tuple) or len(factors) < 2:
        raise ScheduleError("split", f"argument 'factors': expected a list of at least two "
                            f"factors (ints, one may be None), got {factors!r}")
    for factor in factors:
        if factor is not None and (not isinstance(factor, int) or isinstance(factor, bool)
                                   or factor <= 0):
            shown = factor.script() if isinstance(factor, Expr) else repr(factor)
            symbolic = "; a symbolic factor is not supported (split by None and a constant, " \
                "or by constants alone)" if isinstance(factor, Expr) else ""
            raise ScheduleError("split", f"cannot split loop {loop!r} by {shown}: every factor "
                                f"must be a positive integer (or one None){symbolic}")
        if factor is not None and factor > max_value(extent.dtype):
            raise ScheduleError("split", f"cannot split loop {loop!r} by {factor}: a factor "
                                f"must fit the loop's {extent.dtype} extent (at most "
                                f"{max_value(extent.dtype)})")
    if sum(f is None for f in factors) > 1:
        raise ScheduleError("split", f"argument 'factors' {list(factors)}: at most one factor "
                            f"may be None (it is inferred from the extent)")
    known = math.prod(f for f in factors if f is not None)
    if None not in factors and isinstance(extent, IntImm) and known < extent.value:
        raise ScheduleError("split", f"argument 'factors' {list(factors)}: their product "
                            f"{known} is less than the extent {extent.value} of loop {loop!r}; "
                            f"use None for one factor to infer it")
    if None not in factors and not isinstance(extent, IntImm):
        raise ScheduleError("split", f"loop {loop!r} has the symbolic extent "
                            f"{extent.script()}: give one factor as None")
    return list(factors)


def _divides(func: PrimFunc, factor: int, extent: Expr) -> bool:
    """Whether `factor` divides the symbolic `extent` for every value of the function's
    symbolic dims (isl: `(n + 31) // 32 * 32`, what pad_einsum makes, is a multiple of 32;
    a split of it needs no guard). A constant extent is left to the caller."""
    if isinstance(extent, IntImm) or factor == 1:
        return False
    text = to_isl(extent)
    names = {isl_name(v) for v in free_vars(extent)}
    dims = {isl_name(v) for v in func.symbolic_vars}
    if text is None or not names <= dims:
        return False
    positive = " and ".join(f"{d} >= 1" for d in sorted(names)) or "true"
    return read_set(f"[{', '.join(sorted(names))}] -> {{ : {positive} and "
                    f"({text}) mod {factor} != 0 }}").is_empty()


def _quotient(extent: Expr, factor: int) -> Expr:
    """`extent // factor` for an extent `factor` divides: `x * c` with `factor` dividing `c`
    is `x * (c // factor)` (`(n + 31) // 32 * 32` by 32 is `(n + 31) // 32`), and so is
    `c * x` (`4 * k` by 4 is k, which the bounds of a binding `f // k` need: audit
    helper-185)."""
    if isinstance(extent, BinaryOp) and extent.op == "mul":
        for constant, x in ((extent.b, extent.a), (extent.a, extent.b)):
            if isinstance(constant, IntImm) and constant.value % factor == 0:
                return simplify(x * const(constant.value // factor, extent.dtype))
    return simplify(extent // const(factor, extent.dtype))


def split(func: PrimFunc, loop_name: str, factors) -> tuple[PrimFunc, list[str]]:
    """Split loop `loop_name` into len(factors) nested loops (see Schedule.split)."""
    loop = find_loop(func, loop_name, "split")
    _check_plain(loop, "split")
    whole = cast_to(loop.extent, arithmetic_dtype(loop.extent.dtype))
    factors = _check_factors(factors, whole, loop_name)
    known = math.prod(f for f in factors if f is not None)
    divides = _divides(func, known, whole)
    extents: list[Expr] = [
        const(f, whole.dtype) if f is not None
        else _quotient(whole, known) if divides
        else simplify((whole + (known - 1)) // known) for f in factors]
    taken: set[str] = set()
    names = [fresh_name(func, f"{loop_name}_{i}", taken) for i in range(len(factors))]
    new_vars = [Var(n, extent.dtype) for n, extent in zip(names, extents)]   # (a loop's
    # variable has its extent's dtype: `(n + 2**32 - 1) // 2**32` is int64)
    # in the widest dtype of the extents from the start: factors whose product passes int32
    # make an int64 extent, and `T.Cast("int64", i_0 * 65536 + i_1) * ...` wrapped in int32
    # before the cast (audit helper-104: split [65536, 65536, None] stored far outside C)
    wide = max((e.dtype for e in extents), key=bits)
    fused: Expr = cast_to(new_vars[0], wide)
    for var, extent in zip(new_vars[1:], extents[1:]):
        fused = fused * extent + cast_to(var, wide)
    original = simplify(fused + cast_to(loop.min, wide)) if not is_constant(loop.min, 0) \
        else fused
    # (an 8- or 16-bit or unsigned loop's variable gets its own type back, which its uses
    # compute in; a wider split of an int32 loop keeps the int64 value)
    narrow = loop.loop_var.dtype not in ("int32", "int64")
    body = substitute(loop.body, {loop.loop_var: cast_to(original, loop.loop_var.dtype)
                                  if narrow else original})
    covered = extents[0]
    for extent in extents[1:]:
        covered = simplify(covered * extent)
    if covered != whole and not divides:
        body = _guard_blocks(body, fused < cast_to(whole, wide))
    for var, extent in reversed(list(zip(new_vars, extents))):
        body = For(var, const(0, var.dtype), extent, "serial", body)
    return replace(func, loop, body), names


def _added_guard(old: PrimFunc, new: PrimFunc) -> bool:
    """Whether a split of `old` into `new` added a guard predicate to a block."""
    predicates = {r.block.name: r.predicate for r in collect(old.body, BlockRealize)}
    return any(r.predicate != predicates.get(r.block.name)
               for r in collect(new.body, BlockRealize))


def _check_plain(loop: For, primitive: str) -> None:
    """Refuse to split or fuse a loop whose kind or annotations the new loops could not keep
    (which of them would inherit a thread binding or a pragma is the user's choice)."""
    name = loop.loop_var.name
    if loop.kind != "serial":
        shown = loop.thread_tag if loop.kind == "thread_binding" else loop.kind
        raise ScheduleError(primitive, f"loop {name!r} is {shown}; {primitive} makes serial "
                            f"loops and would drop that: {primitive} it first, then give the "
                            f"loop you mean its kind")
    if loop.annotations:
        keys = ", ".join(repr(key) for key, _ in loop.annotations)
        raise ScheduleError(primitive, f"loop {name!r} carries the annotations {keys}, which "
                            f"{primitive} would drop: {primitive} it first, then annotate the "
                            f"loop you mean (sch.annotate)")


def _perfect_chain(outer: For, inner_names: set[str], primitive: str) -> list[For]:
    """The loops from `outer` down to the last of `inner_names`, each the only statement in
    the body of the one before."""
    chain = [outer]
    remaining = set(inner_names) - {outer.loop_var.name}
    while remaining:
        body = chain[-1].body
        if not isinstance(body, For):
            missing = ", ".join(sorted(remaining))
            raise ScheduleError(primitive, f"loop(s) {missing} are not perfectly nested under "
                                f"loop {chain[-1].loop_var.name!r}: only directly nested loops, "
                                f"with no statement or block between them, can be given to "
                                f"{primitive}")
        chain.append(body)
        remaining.discard(body.loop_var.name)
    return chain


def _outermost(func: PrimFunc, names: list[str], primitive: str) -> For:
    loops = [find_loop(func, name, primitive) for name in names]
    from sched.schedule.state import enclosing_loops

    depth = {loop.loop_var.name: len(enclosing_loops(func, loop)) for loop in loops}
    return min(loops, key=lambda lp: depth[lp.loop_var.name])


def fuse(func: PrimFunc, loop_names: list[str]) -> tuple[PrimFunc, str]:
    """Fuse perfectly nested loops, outermost first, into one (see Schedule.fuse)."""
    if not loop_names:
        raise ScheduleError("fuse", "expected at least one loop, got none")
    outer = find_loop(func, loop_names[0], "fuse")
    chain = _perfect_chain(outer, set(loop_names), "fuse")
    if [lp.loop_var.name for lp in chain] != list(loop_names):
        order = ", ".join(lp.loop_var.name for lp in chain)
        raise ScheduleError("fuse", f"loops {', '.join(loop_names)} must be consecutive and "
                            f"given outermost first; the nest is {order}")
    for lp in chain:
        _check_plain(lp, "fuse")
    for lp in chain[1:]:
        used = {v.name for v in (*free_vars(lp.extent), *free_vars(lp.min))}
        if used & set(loop_names):
            raise ScheduleError("fuse", f"the bounds of loop {lp.loop_var.name!r} depend on "
                                f"an outer loop being fused")
    name = fresh_name(func, "_".join(loop_names) + "_fused")
    # the widest of the loops' dtypes, as TVM's fuse (an int32 loop of a symbolic extent
    # fused with an int64 one failed verifying: audit helper-173)
    wide = "int64" if any(arithmetic_dtype(lp.loop_var.dtype) == "int64" for lp in chain) \
        else arithmetic_dtype(outer.loop_var.dtype)
    fused = Var(name, wide)
    mapping: dict[Var, Expr] = {}
    stride: Expr = const(1, fused.dtype)
    extent: Expr = const(1, fused.dtype)
    ranges = parameter_ranges(func)
    counted = [dataclasses.replace(lp, min=cast_to(lp.min, wide),
                                   extent=cast_to(lp.extent, wide)) for lp in chain]
    for position in reversed(range(len(chain))):
        lp = counted[position]
        index = _fused_index(fused, stride, lp, counted[:position])
        mapping[lp.loop_var] = cast_to(index, lp.loop_var.dtype)
        stride = simplify(stride * lp.extent)
        # an extent that may be negative runs no iteration, and counts as none: the product
        # of two, (n - 2) * (m - 2) at n = m = 1, ran one (audit helper-159)
        found = interval(lp.extent, ranges)
        extent = simplify(extent * (lp.extent if found is not None and found[0][0] >= 0 else
                                    binary("max", lp.extent, const(0, lp.extent.dtype))))
    body = substitute(chain[-1].body, mapping)
    new_loop = For(fused, const(0, fused.dtype), extent, "serial", body)
    return replace(func, outer, new_loop), name


def _fused_index(fused: Var, stride: Expr, loop: For, outer: list[For]) -> Expr:
    """The value of `loop` in the fused loop `fused`, where the loops inside it span `stride`
    iterations and `outer` are the fused loops around it: `fused // stride % extent`, without
    the parts the bounds make redundant (as TVM's simplifier leaves them): 0 for a loop of one
    iteration, no `% extent` when every loop around it has one iteration (the quotient is
    below the extent then), no division by 1. Fewer divisions also make the polyhedral
    model's relations simpler for isl."""
    if is_constant(loop.extent, 1):
        index: Expr = const(0, fused.dtype)
    else:
        index = fused // stride if not is_constant(stride, 1) else fused
        if any(not is_constant(lp.extent, 1) for lp in outer):
            index = index % loop.extent
    return simplify(index + loop.min) if not is_constant(loop.min, 0) else index


class LoopPrimitives(ScheduleBase):
    """split, fuse."""

    def split(self, loop: LoopRV, factors: list[int | None], *,
              preserve_unit_iters: bool = True,
              disable_predication: bool = False) -> list[LoopRV]:
        """Split a loop into nested loops whose extents are `factors`, outermost first.

        Requires: the loop's extent is known or one factor is None. At most one factor is
        None: it is inferred (the extent divided by the others, rounded up). When the factors
        do not divide the extent, the blocks under the loop get a guard predicate, so no
        iteration runs twice or out of range; a symbolic extent that isl proves a multiple of
        them (`(n + 31) // 32 * 32` by 32) gets none.

        Arguments: `loop` a loop handle; `factors` positive ints and at most one None;
        `disable_predication` (TVM's flag) promises that no guard is needed: the split is
        refused when the factors do not divide the extent (a guard would be);
        `preserve_unit_iters` (TVM's, in MetaSchedule traces) is accepted and changes nothing:
        sched keeps bindings as they are (TVM's True; False only folds unit bindings).
        Returns: handles to the new loops, outermost first. Invalidates `loop`.
        Also known as: `split` in Halide and TVM, `divide_loop` in Exo.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((10,), name="A")
        >>> B = te.compute((10,), lambda i: A[i] * 2.0, name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]))
        >>> (i,) = sch.get_loops(sch.get_block("B"))
        >>> io, ii = sch.split(i, factors=[None, 4])
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
            with T.block("root"):
                for i_0, i_1 in T.grid(3, 4):
                    with T.block("B"):
                        v_i = T.axis.spatial(10, i_0 * 4 + i_1)
                        T.where(i_0 * 4 + i_1 < 10)
                        T.reads(A[v_i])
                        T.writes(B[v_i])
                        B[v_i] = A[v_i] * T.float32(2.0)
        """
        name = self._loop(loop, "split")
        factors = _as_ints(factors)
        new_func, names = split(self._func, name, factors)
        if disable_predication and _added_guard(self._func, new_func):
            raise ScheduleError("split", f"disable_predication=True: the factors {factors} do "
                                f"not divide the extent of loop {name!r}, so without the guard "
                                f"iterations past the end would run; use factors that divide "
                                f"it, or keep the guard (the default)")
        handles = [LoopRV(n, self._new_rv("l")) for n in names]
        attrs = (("factors", list(factors)),)
        if disable_predication:
            attrs += (("disable_predication", True),)
        self._record("split", new_func, (loop,), attrs, tuple(handles))
        self._note_replaced("loop", name, f"split replaced it by {', '.join(names)}")
        return handles

    def fuse(self, *loops_to_fuse: LoopRV, preserve_unit_iters: bool = True) -> LoopRV:
        """Fuse perfectly nested loops into one loop over the product of their extents.

        Requires: the loops are consecutive in one nest, given outermost first, with nothing
        between them; no extent depends on another of them. One loop is renamed
        `<name>_fused`, as TVM does. A loop of one iteration (`T.int64(1)` too) adds nothing
        to the fused index. An extent that may be negative (`n - 2`) counts as
        `T.max(n - 2, 0)` in the product: two negative ones would make iterations.

        Arguments: the loop handles, outermost first; `preserve_unit_iters` (TVM's) is
        accepted and changes nothing, as for split.
        Returns: a handle to the fused loop. Invalidates the given handles.
        Also known as: `fuse` in Halide and TVM.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((4, 6), name="A")
        >>> B = te.compute((4, 6), lambda i, j: A[i, j] + 1.0, name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]))
        >>> i, j = sch.get_loops(sch.get_block("B"))
        >>> ij = sch.fuse(i, j)
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((4, 6), "float32"), B: T.Buffer((4, 6), "float32")):
            with T.block("root"):
                for i_j_fused in range(24):
                    with T.block("B"):
                        v_i = T.axis.spatial(4, i_j_fused // 6)
                        v_j = T.axis.spatial(6, i_j_fused % 6)
                        T.reads(A[v_i, v_j])
                        T.writes(B[v_i, v_j])
                        B[v_i, v_j] = A[v_i, v_j] + T.float32(1.0)
        """
        names = [self._loop(lp, "fuse", f"loop {i + 1}") for i, lp in enumerate(loops_to_fuse)]
        new_func, fused = fuse(self._func, names)
        handle = LoopRV(fused, self._new_rv("l"))
        self._record("fuse", new_func, tuple(loops_to_fuse), outputs=(handle,))
        for name in names:
            self._note_replaced("loop", name, f"fuse replaced it by {fused}")
        return handle

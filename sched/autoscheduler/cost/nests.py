"""The loop nests of a scheduled function, as the cost models see them: each block with the
loops around it and its accesses written in those loops' variables, and the boxes of buffer
elements the accesses touch while some of the loops run.

    nests = loop_nests(sch.func)
    nest = nests[0]                       # block "C" under loops i_0, j_0, k, ...
    nest.box(access, varying=range(3, 5)) # per dimension: elements touched by loops 3 and 4

Footprints are boxes computed by interval arithmetic on the accesses' index expressions, the
loops outside the varying ones at their first iteration (a tile's footprint does not depend
on which tile it is, for the rectangular nests schedules make). For an affine index over a
rectangular nest this is the box hull isl gives (`sched.polyhedral.buffer_region`; the tests
compare the two at every block, buffer and loop of the hand schedules), at a fraction of the
cost: isl's box of every buffer at every loop level of a 256^3 GPU matmul (`dim_min`/`dim_max`
of the access relation with the outer loops as parameters; islpy 2026.2 does not expose
`isl_fixed_box`'s size) takes 110-130 ms, these boxes about 1 ms, and the search scores
thousands of candidates.
`floordiv`/`floormod` by constants (split and fuse) are followed exactly where a tile does not
straddle a period; an index that is not piecewise affine (a load, a product of loops) covers
its whole dimension, which is the conservative answer (everything comes from memory).

Two things the lowering and the C compiler do are applied here, because they change what the
machine runs: a buffer the function allocates takes the shape the lowering compacts it to
(the box its blocks touch inside the loops they share), and inner serial loops of at most 16
iterations in all count as unrolled (gcc -O3 unrolls them completely).
"""

from __future__ import annotations

import dataclasses
import functools
import math

from sched.ir.functor import substitute
from sched.ir.nodes import (
    Allocate,
    BinaryOp,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    Expr,
    For,
    IfThenElse,
    IntImm,
    LetStmt,
    Not,
    PrimFunc,
    Select,
    SeqStmt,
    Stmt,
    Var,
)
from sched.polyhedral.software_pipeline import read_plan

SYMBOLIC_EXTENT = 128        # the extent assumed for a loop whose extent is not a constant


@dataclasses.dataclass(frozen=True)
class Loop:
    var: Var
    extent: int
    kind: str                  # serial, parallel, vectorized, unrolled, thread_binding
    thread_tag: str | None
    stages: int = 1            # software-pipeline stages of the loop's body (1: none)


@dataclasses.dataclass(frozen=True)
class Access:
    buffer: Buffer
    is_write: bool
    indices: tuple[Expr, ...]  # in the variables of the nest's loops (bindings substituted)
    extents: tuple[int, ...] | None = None     # the compacted shape of an allocated buffer

    @functools.cached_property
    def shape(self) -> tuple[int, ...]:
        if self.extents is not None:
            return self.extents
        return tuple(d.value if isinstance(d, IntImm) else SYMBOLIC_EXTENT
                     for d in self.buffer.shape)


@dataclasses.dataclass
class LoopNest:
    """One block (its body; an init counts as the first reduction step, not separately) with
    its enclosing loops, outermost first."""

    name: str
    loops: tuple[Loop, ...]
    accesses: tuple[Access, ...]
    operations: int            # arithmetic operations per iteration (0 for a copy)
    reduce_depth: int | None   # position of the innermost loop that carries a reduction
    has_init: bool = False     # the reduction's init runs in the same nest, under a test
    # the conditions of the selects in the values (padding), in the loops' variables, with
    # the operations each takes (its own and the select's; counted in `operations` too)
    guards: tuple[tuple[Expr, int], ...] = ()
    _boxes: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def iterations(self) -> int:
        return math.prod(loop.extent for loop in self.loops)

    def trips(self, level: int) -> int:
        """How many times the loops from `level` inward are entered (the iterations of the
        loops outside them)."""
        return math.prod(loop.extent for loop in self.loops[:level])

    def box(self, access: Access, varying) -> tuple[int, ...]:
        """Per dimension of the buffer, how many distinct indices `access` touches while the
        loops at positions `varying` run (the others fixed): the span of the index, but no
        more than the loops that move it can reach (a strided index spans more than it
        touches)."""
        varying = tuple(varying)
        key = (id(access), varying)
        if key not in self._boxes:
            self._boxes[key] = self._box(access, varying)
        return self._boxes[key]

    def spans(self, access: Access, varying) -> tuple[int, ...]:
        """Per dimension, the distance from the first to the last index touched, plus one
        (more than `box` where the indices are strided)."""
        varying = tuple(varying)
        key = ("spans", id(access), varying)
        if key not in self._boxes:
            self._box(access, varying)
        return self._boxes[key]

    def _box(self, access: Access, varying: tuple[int, ...]) -> tuple[int, ...]:
        ranges = {loop.var: (0, 0) for loop in self.loops}
        for position in varying:
            ranges[self.loops[position].var] = (0, self.loops[position].extent - 1)
        sizes, spans = [], []
        for index, dim in zip(access.indices, access.shape):
            span = interval(index, ranges)
            if span is None:
                sizes.append(dim)
                spans.append(dim)
                continue
            reach = math.prod(self.loops[p].extent for p in varying
                              if self._moves(index, p))
            spans.append(max(1, min(span[1] - span[0] + 1, dim)))
            sizes.append(max(1, min(spans[-1], reach)))
        self._boxes[("spans", id(access), varying)] = tuple(spans)
        return tuple(sizes)

    def _moves(self, index: Expr, position: int) -> bool:
        """Whether loop `position` changes `index` (the other loops at their first value)."""
        loop = self.loops[position]
        if loop.extent <= 1:
            return False
        key = ("moves", id(index), position)
        if key not in self._boxes:
            form = _linear_form(index)
            if form is not None:
                moves = any(var == loop.var for var, _ in form[1])
            else:
                span = interval(index, {loop.var: (0, loop.extent - 1)})
                moves = span is None or span[1] > span[0]
            self._boxes[key] = moves
        return self._boxes[key]

    def stride(self, access: Access, position: int) -> int | None:
        """Elements between the addresses `access` touches in consecutive iterations of loop
        `position` (row-major offsets, other loops at 0), or None where unknown."""
        values = {loop.var: (0, 0) for loop in self.loops}
        offsets = []
        for step in (0, 1):
            values[self.loops[position].var] = (step, step)
            offset, scale = 0, 1
            for index, dim in reversed(tuple(zip(access.indices, access.shape))):
                value = interval(index, values)
                if value is None:
                    return None
                offset += value[0] * scale
                scale *= dim
            offsets.append(offset)
        return abs(offsets[1] - offsets[0])


def interval(expr: Expr, ranges: dict) -> tuple[int, int] | None:
    """The [lo, hi] an integer expression takes with each variable in its range (a variable
    not in `ranges` is 0: an outer loop at its first iteration), or None when the expression
    is not piecewise affine."""
    form = _linear_form(expr)
    if form is None:
        return _interval(expr, ranges)
    lo, terms = form
    hi = lo
    for var, coefficient in terms:
        low, high = ranges.get(var, (0, 0))
        if coefficient > 0:
            lo, hi = lo + coefficient * low, hi + coefficient * high
        else:
            lo, hi = lo + coefficient * high, hi + coefficient * low
    return (lo, hi)


_FORMS: dict[int, tuple] = {}      # id(expr) -> (expr, its linear form or None)


def _linear_form(expr: Expr):
    """`(constant, ((var, coefficient), ...))` when `expr` is a sum of variables times
    constants, else None; remembered by identity (the entry keeps the expression alive)."""
    entry = _FORMS.get(id(expr))
    if entry is not None and entry[0] is expr:
        return entry[1]
    terms: dict = {}
    constant = _collect_linear(expr, 1, terms)
    form = None if constant is None else (constant, tuple((v, c) for v, c in terms.items()
                                                          if c))
    if len(_FORMS) > 1 << 16:
        _FORMS.clear()
    _FORMS[id(expr)] = (expr, form)
    return form


def _collect_linear(expr: Expr, scale: int, terms: dict) -> int | None:
    if isinstance(expr, IntImm):
        return scale * expr.value
    if isinstance(expr, Var):
        terms[expr] = terms.get(expr, 0) + scale
        return 0
    if isinstance(expr, Cast):
        return _collect_linear(expr.value, scale, terms)
    if isinstance(expr, BinaryOp) and expr.b == IntImm(1, expr.b.dtype):
        if expr.op == "floormod":              # x % 1 -> 0 (fused loops of extent 1)
            return 0
        if expr.op == "floordiv":              # x // 1 -> x
            return _collect_linear(expr.a, scale, terms)
    if not isinstance(expr, BinaryOp) or expr.op not in ("add", "sub", "mul"):
        return None
    if expr.op == "mul":
        for factor, other in ((expr.a, expr.b), (expr.b, expr.a)):
            if isinstance(factor, IntImm):
                return _collect_linear(other, scale * factor.value, terms)
        return None
    a = _collect_linear(expr.a, scale, terms)
    b = None if a is None else _collect_linear(expr.b, scale if expr.op == "add" else -scale,
                                               terms)
    return None if b is None else a + b


def _interval(expr: Expr, ranges: dict) -> tuple[int, int] | None:
    if isinstance(expr, IntImm):
        return (expr.value, expr.value)
    if isinstance(expr, Var):
        return ranges.get(expr, (0, 0))
    if isinstance(expr, Cast):
        return interval(expr.value, ranges)
    if not isinstance(expr, BinaryOp):
        return None
    a, b = interval(expr.a, ranges), interval(expr.b, ranges)
    if a is None or b is None:
        return None
    op = expr.op
    if op == "add":
        return (a[0] + b[0], a[1] + b[1])
    if op == "sub":
        return (a[0] - b[1], a[1] - b[0])
    if op == "mul" and (a[0] == a[1] or b[0] == b[1]):
        products = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
        return (min(products), max(products))
    if op in ("min", "max"):
        pick = min if op == "min" else max
        return (pick(a[0], b[0]), pick(a[1], b[1]))
    if op in ("floordiv", "floormod") and b[0] == b[1] and b[0] > 0:
        c = b[0]
        if op == "floordiv":
            return (a[0] // c, a[1] // c)
        if a[0] // c == a[1] // c:
            return (a[0] % c, a[1] % c)
        return (0, c - 1)
    return None


# -- collecting the nests ----------------------------------------------------------------------


def loop_nests(func: PrimFunc, compact: bool = True) -> list[LoopNest]:
    """Every block of `func` that does work (a body without nested blocks), in program order,
    with its loops and accesses. A buffer the function allocates has the shape the lowering
    compacts it to (`_compact`), not the shape it was declared with (with `compact`)."""
    found: list[LoopNest] = []
    _walk(func.body, [], {}, found)
    return _compact(found, {b.storage_name for b in func.buffers}) if compact else found


def _compact(nests: list[LoopNest], parameters: set[str]) -> list[LoopNest]:
    """The nests with each allocated buffer given the box its blocks touch inside the loops
    they all share (where the lowering allocates it: a cache stage's tile, a packed panel):
    its rows are that box's rows apart, which is what strides and cache sets depend on."""
    users: dict[str, list[LoopNest]] = {}
    for nest in nests:
        for access in nest.accesses:
            if access.buffer.storage_name not in parameters:
                users.setdefault(access.buffer.storage_name, [])
                if nest not in users[access.buffer.storage_name]:
                    users[access.buffer.storage_name].append(nest)
    shapes: dict[str, tuple[int, ...]] = {}
    for storage, using in users.items():
        common = set.intersection(*({lp.var for lp in n.loops} for n in using))
        boxes = []
        for nest in using:
            inner = [p for p, lp in enumerate(nest.loops) if lp.var not in common]
            boxes += [nest.box(a, inner) for a in nest.accesses
                      if a.buffer.storage_name == storage]
        shapes[storage] = tuple(max(sizes) for sizes in zip(*boxes))
    for nest in nests:
        if any(a.buffer.storage_name in shapes for a in nest.accesses):
            nest.accesses = tuple(
                dataclasses.replace(a, extents=shapes[a.buffer.storage_name])
                if a.buffer.storage_name in shapes else a for a in nest.accesses)
            nest._boxes.clear()
    return nests


def _walk(stmt: Stmt, loops: list[Loop], env: dict, found: list[LoopNest]) -> None:
    if isinstance(stmt, SeqStmt):
        for child in stmt.stmts:
            _walk(child, loops, env, found)
    elif isinstance(stmt, For):
        extent = substitute(stmt.extent, env)
        value = extent.value if isinstance(extent, IntImm) else SYMBOLIC_EXTENT
        _walk(stmt.body, loops + [Loop(stmt.loop_var, max(1, value), stmt.kind,
                                       stmt.thread_tag, _stages(stmt))], env, found)
    elif isinstance(stmt, IfThenElse):
        _walk(stmt.then_body, loops, env, found)
        if stmt.else_body is not None:
            _walk(stmt.else_body, loops, env, found)
    elif isinstance(stmt, LetStmt | Allocate):
        _walk(stmt.body, loops, env, found)
    elif isinstance(stmt, BlockRealize):
        _block(stmt, loops, env, found)


def _stages(loop: For) -> int:
    """How many stages the loop's body is software-pipelined over (1: not pipelined)."""
    plan = read_plan(loop, require_stage=False)
    return plan.max_stage + 1 if plan is not None else 1


def _block(realize: BlockRealize, loops: list[Loop], env: dict, found: list) -> None:
    block = realize.block
    inner_env = {**env, **{iv.var: substitute(value, env)
                           for iv, value in zip(block.iter_vars, realize.iter_values)}}
    if _has_blocks(block.body):
        _walk(block.body, loops, inner_env, found)
        return
    accesses, operations, guards = [], 0, []
    for node in _statements(block.body):
        if isinstance(node, BufferStore):
            accesses.append(Access(node.buffer, True, tuple(substitute(i, inner_env)
                                                            for i in node.indices)))
            operations += _operations(node.value)
            guards += [(substitute(select.condition, inner_env),
                        1 + _operations(select.condition)) for select in _selects(node.value)]
            accesses += [Access(load.buffer, False, tuple(substitute(i, inner_env)
                                                          for i in load.indices))
                         for load in _loads(node.value)]
    reduce_vars = {iv.var for iv in block.iter_vars if iv.kind == "reduce"}
    reduce_depth = None
    for position, loop in enumerate(loops):
        if any(uses(inner_env.get(v), loop.var) for v in reduce_vars):
            reduce_depth = position
    found.append(LoopNest(block.name, _compiler_unrolled(loops), tuple(accesses), operations,
                          reduce_depth, block.init is not None, tuple(guards)))


COMPLETE_UNROLL = 16     # gcc -O3 (and nvcc) unroll inner loops of up to 16 iterations


def _compiler_unrolled(loops: list[Loop]) -> tuple[Loop, ...]:
    """The loops with the innermost serial ones the compiler unrolls completely (a constant
    trip count, 16 iterations of the innermost body at most, gcc's
    max-completely-peel-times) marked "unrolled": the code is straight-line there, whatever
    the schedule said."""
    result, body = list(loops), 1
    for position in range(len(result) - 1, -1, -1):
        loop = result[position]
        if loop.kind == "vectorized":
            body *= max(1, loop.extent // 8)
        elif loop.kind == "unrolled" or (loop.kind == "serial"
                                         and body * loop.extent <= COMPLETE_UNROLL):
            body *= loop.extent
            if loop.kind == "serial":
                result[position] = dataclasses.replace(loop, kind="unrolled")
        else:
            break
    return tuple(result)


def _has_blocks(stmt: Stmt) -> bool:
    if isinstance(stmt, BlockRealize):
        return True
    if isinstance(stmt, SeqStmt):
        return any(_has_blocks(s) for s in stmt.stmts)
    if isinstance(stmt, For | LetStmt | Allocate):
        return _has_blocks(stmt.body)
    if isinstance(stmt, IfThenElse):
        return _has_blocks(stmt.then_body) or (stmt.else_body is not None
                                               and _has_blocks(stmt.else_body))
    return False


def _statements(stmt: Stmt):
    """The stores of a block body (loops inside a block body are rare: counted once)."""
    if isinstance(stmt, BufferStore):
        yield stmt
    elif isinstance(stmt, SeqStmt):
        for child in stmt.stmts:
            yield from _statements(child)
    elif isinstance(stmt, For | LetStmt | Allocate):
        yield from _statements(stmt.body)
    elif isinstance(stmt, IfThenElse):
        yield from _statements(stmt.then_body)
        if stmt.else_body is not None:
            yield from _statements(stmt.else_body)


def _loads(expr: Expr) -> list[BufferLoad]:
    if isinstance(expr, BufferLoad):
        return [expr]
    found = []
    for child in _children(expr):
        found += _loads(child)
    return found


def _selects(expr: Expr) -> list[Select]:
    found = [expr] if isinstance(expr, Select) else []
    if not isinstance(expr, BufferLoad):
        for child in _children(expr):
            found += _selects(child)
    return found


def _operations(expr: Expr) -> int:
    """Arithmetic and math calls in a value, not counting index arithmetic."""
    if isinstance(expr, BufferLoad):
        return 0
    own = 1 if isinstance(expr, BinaryOp | Call | Select) else 0
    return own + sum(_operations(child) for child in _children(expr))


def _children(expr: Expr) -> list[Expr]:
    if isinstance(expr, BinaryOp):
        return [expr.a, expr.b]
    if isinstance(expr, Cast):
        return [expr.value]
    if isinstance(expr, Select):
        return [expr.condition, expr.true_value, expr.false_value]
    if isinstance(expr, Call):
        return list(expr.args)
    if isinstance(expr, Not):
        return [expr.a]
    return []


def uses(expr: Expr | None, var: Var) -> bool:
    """Whether `var` occurs in `expr` (indices of loads included)."""
    if expr is None:
        return False
    if isinstance(expr, Var):
        return expr == var
    if isinstance(expr, BufferLoad):
        return any(uses(i, var) for i in expr.indices)
    return any(uses(child, var) for child in _children(expr))

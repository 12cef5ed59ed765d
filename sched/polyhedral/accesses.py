"""The buffer accesses of one statement (a block body or init), as constraints for isl text.

Loops inside the block are existentially quantified with their bounds, so an access under them
is the exact set of elements touched. An access under a condition inside the block (an `if`,
the branches of `T.if_then_else`) happens only where the condition holds; a condition isl cannot
represent is dropped (the access is assumed to happen: conservative). Blocks nested inside are
statements of their own and are not visited. An index isl cannot represent covers the whole
dimension, and the model's notes say so. An opaque block (a call to C or CUDA code, see
`sched/ir/extern.py`) accesses its declared regions (`region_accesses`).

The model turns an `Access` into a relation in two spaces (`element_constraints`): the view's
own dimensions (bounds checks, regions) and its storage (dependences: every view of one
storage must land on the same elements, see `model.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sched.ir.functor import IRVisitor, collect, substitute
from sched.ir.intervals import loop_ranges
from sched.ir.memo import identity_cache
from sched.ir.nodes import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Evaluate,
    Expr,
    For,
    IfThenElse,
    IntImm,
    LetStmt,
    Select,
    Stmt,
    Var,
    While,
)
from sched.polyhedral import names
from sched.polyhedral.data_wrap import wrapping_int32
from sched.polyhedral.isl_expr import (
    isl_name,
    piecewise_form,
    to_isl,
    to_isl_comparison,
    to_isl_condition,
)


def buffer_tuple(buffer: Buffer | str) -> str:
    """The isl tuple name of a buffer's storage (a Buffer, or a storage name)."""
    return names.buffer_tuple(buffer if isinstance(buffer, str) else buffer.storage_name)


@dataclass(frozen=True)
class Access:
    """One load or store: its buffer, its indices (with the lets inside the block substituted)
    and the loops and conditions inside the block it sits under."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    bound_loops: tuple[str, ...]          # isl names of the loops inside the block
    loop_bounds: tuple[str, ...]          # their bounds, isl constraints
    guards: tuple[str, ...]               # affine conditions it happens under
    is_write: bool
    guards_exact: bool = True             # False under a condition isl cannot represent

    @property
    def index_texts(self) -> tuple[str | None, ...]:
        """Each index in isl syntax, None where it is not affine."""
        return tuple(to_isl(index) for index in self.indices)

    @property
    def is_affine(self) -> bool:
        """Whether each index is affine or piecewise affine (`element_constraints` exact)."""
        return all(_index_constraint("_e", index) is not None for index in self.indices)

    def element_constraints(self, element_names: list[str]) -> list[str]:
        """Constraints tying `element_names` (one per dimension of the buffer) to the element
        accessed: `_a0 = vi + 1`, one disjunct per piece of a piecewise affine index
        (`T.if_then_else(vi < 8, vi, vi + 1)`, `T.abs(vi - 8)`, `T.truncdiv(vi, 2)`), or the
        whole dimension where the index is neither."""
        constraints = []
        for name, index, dim in zip(element_names, self.indices, self.buffer.shape):
            constraint = _index_constraint(name, index)
            if constraint is not None:
                constraints.append(constraint)
            else:
                extent = to_isl(dim)
                constraints.append(f"0 <= {name}" + (f" < {extent}" if extent else ""))
        return constraints

    def offset_constraint(self, offset_name: str) -> str | None:
        """`_o = vi * 4 + vj`: the row-major offset of the element in its storage, or None when
        the offset is not affine (an index that is not, or a symbolic stride)."""
        offset = row_major_offset(self.index_texts, self.buffer.shape)
        return None if offset is None else f"{offset_name} = {offset}"


def _index_constraint(name: str, index: Expr) -> str | None:
    """`name = index` in isl syntax, index affine or piecewise affine; None otherwise."""
    text = to_isl(index)
    if text is not None:
        return f"{name} = {text}"
    return to_isl_comparison(name, "=", piecewise_form(index))


def row_major_offset(indices, shape) -> str | None:
    """`(i) * 4 + (j) * 1`: the row-major offset of element `indices` (isl texts) in an array of
    `shape`, or None when an index is None or a stride is not a constant."""
    terms, stride = [], 1
    for index, dim in reversed(list(zip(indices, shape))):
        if index is None or stride is None:
            return None
        terms.append(f"({index}) * {stride}")
        stride = stride * dim.value if isinstance(dim, IntImm) else None
    return " + ".join(reversed(terms)) or "0"


class _AccessCollector(IRVisitor):
    def __init__(self, note: Callable[[str], None], env: dict,
                 ranges: Callable[[], dict] | None = None) -> None:
        self.note = note
        self.ranges = ranges              # the values of the variables (see _as_computed)
        self.in_data = False              # in what a store writes (not in an index of it)
        self.inner_loops: list[tuple] = []   # (variable, start, extent) of loops in the body
        self.loops: list[str] = []
        self.bounds: list[str] = []
        self.guards: list[str] = []
        self.dropped = 0                  # conditions left out around the current node
        self.env: dict = dict(env)
        self.accesses: list[Access] = []

    def _record(self, buffer: Buffer, indices: tuple[Expr, ...], is_write: bool) -> None:
        substituted = tuple(substitute(index, self.env) for index in indices)
        for index, original in zip(substituted, indices):
            if _index_constraint("_e", index) is None:
                self.note(f"an index of '{buffer.name}' ({original.script()}) is not affine; "
                          f"the whole dimension is assumed to be accessed")
        self.accesses.append(Access(buffer, substituted, tuple(self.loops), tuple(self.bounds),
                                    tuple(self.guards), is_write, self.dropped == 0))

    def _condition(self, condition: Expr) -> str | None:
        condition = substitute(condition, self.env)
        if self.in_data:
            ranges = loop_ranges(self.inner_loops, self.ranges() if self.ranges else {})
            condition = wrapping_int32(condition, ranges)
        return to_isl_condition(condition)

    def _guarded(self, text: str | None, visit: Callable[[], None]) -> None:
        """Visit under the condition `text` (None: a condition isl cannot represent, dropped)."""
        if text is not None:
            self.guards.append(text)
        else:
            self.dropped += 1
        visit()
        if text is not None:
            self.guards.pop()
        else:
            self.dropped -= 1

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self._record(node.buffer, node.indices, False)
        in_data, self.in_data = self.in_data, False     # its indices are index arithmetic
        self.visit_children(node)
        self.in_data = in_data

    def visit_BufferStore(self, node: BufferStore) -> None:
        self._record(node.buffer, node.indices, True)
        self._in_data(node.value)
        for index in node.indices:
            self.visit(index)

    def visit_Evaluate(self, node: Evaluate) -> None:
        self._in_data(node.value)             # what an opaque call is passed is data

    def _in_data(self, value: Expr) -> None:
        in_data, self.in_data = self.in_data, True
        self.visit(value)
        self.in_data = in_data

    def visit_Select(self, node: Select) -> None:
        self.visit(node.condition)
        text = self._condition(node.condition)
        self._guarded(text, lambda: self.visit(node.true_value))
        self._guarded(None if text is None else f"not ({text})",
                      lambda: self.visit(node.false_value))

    def visit_IfThenElse(self, node: IfThenElse) -> None:
        self.visit(node.condition)
        text = self._condition(node.condition)
        self._guarded(text, lambda: self.visit(node.then_body))
        if node.else_body is not None:
            self._guarded(None if text is None else f"not ({text})",
                          lambda: self.visit(node.else_body))

    def visit_For(self, node: For) -> None:
        self.visit(node.min)            # loads in the bounds are reads, before the loop
        self.visit(node.extent)         # (`for j in range(L[vi + 4])`: audit helper-51)
        name = isl_name(node.loop_var)
        lo = to_isl(substitute(node.min, self.env))
        extent = to_isl(substitute(node.extent, self.env))
        bounds = []
        if lo is not None:
            bounds.append(f"{name} >= {lo}")
            if extent is not None:
                bounds.append(f"{name} < {lo} + {extent}")
        self.loops.append(name)
        self.inner_loops.append((node.loop_var, substitute(node.min, self.env),
                                 substitute(node.extent, self.env)))
        self.bounds.extend(bounds)
        self.dropped += len(bounds) < 2           # a bound isl cannot represent is left out
        self.visit(node.body)
        self.dropped -= len(bounds) < 2
        self.loops.pop()
        self.inner_loops.pop()
        del self.bounds[len(self.bounds) - len(bounds):]

    def visit_While(self, node: While) -> None:
        self.visit(node.condition)
        # the body may run no time: its accesses are guarded by a condition isl cannot
        # represent (a store in it is no sure write)
        self._guarded(None, lambda: self.visit(node.body))

    def visit_LetStmt(self, node: LetStmt) -> None:
        self.visit(node.value)
        self.env[node.var] = substitute(node.value, self.env)
        self.visit(node.body)
        del self.env[node.var]

    def visit_BlockRealize(self, node: BlockRealize) -> None:
        pass  # a nested block is a statement of its own

    def visit_Buffer(self, node: Buffer) -> None:
        pass


def region_accesses(block: Block, note: Callable[[str], None],
                    env: dict | None = None) -> list[Access]:
    """The declared regions of an opaque block (`sched/ir/extern.py`) as accesses: every
    element of a read region may be read, every element of a write region may be written (a
    MAY-write: the model's writes are over-approximations, never kills; steps that need to
    know what is certainly written refuse opaque blocks). A region bound isl cannot represent
    covers its whole dimension."""
    env = env or {}
    found = []
    for regions, is_write in ((block.reads, False), (block.writes, True)):
        for region in regions:
            indices, loops, bounds = [], [], []
            exact = True
            for d, (r, dim) in enumerate(zip(region.region, region.buffer.shape)):
                var = Var(f"region.{d}")
                lo, extent = (to_isl(substitute(x, env)) for x in (r.min, r.extent))
                if lo is None or extent is None:
                    lo, extent, exact = "0", to_isl(dim), False
                    note(f"a region of '{region.buffer.name}' declared by opaque block "
                         f"'{block.name}' is not affine; the whole dimension is assumed")
                name = isl_name(var)
                indices.append(var)
                loops.append(name)
                bounds.append(f"{name} >= {lo}")
                if extent is not None:
                    bounds.append(f"{name} < {lo} + {extent}")
            found.append(Access(region.buffer, tuple(indices), tuple(loops), tuple(bounds),
                                (), is_write, exact))
    return found


def collect_accesses(body: Stmt, note: Callable[[str], None],
                     env: dict | None = None,
                     ranges: Callable[[], dict] | None = None) -> list[Access]:
    """Every load and store in `body`, outside nested blocks, in visiting order. `env` maps
    variables of enclosing blocks to their values (in loop variables); `ranges` gives the
    values of the block's and the loops' variables and the parameters (`interval`'s form),
    by which a condition in a stored value is read as exact where its int32 arithmetic
    cannot wrap (else modulo 2**32, as the kernel computes it)."""
    collector = _AccessCollector(note, env or {}, ranges)
    collector.visit(body)
    return collector.accesses


class _UnseenLoads(IRVisitor):
    """Loads the model's statements do not hold: in a loop bound, an `if` or `while`
    condition or a let outside leaf blocks, and in a block's predicate or bindings. One walk:
    the control loads inside a block's body count once the block proves to hold blocks."""

    def __init__(self) -> None:
        self.storages: set[str] = set()
        self.pending: list[tuple[set[str], list[bool]]] = []   # per open block: loads, nests?

    def loads(self, *exprs: Expr, own: bool = True) -> None:
        found = {load.buffer.storage_name for expr in exprs for load in collect(expr, BufferLoad)}
        (self.pending[-1][0] if own and self.pending else self.storages).update(found)

    def visit_For(self, node: For) -> None:
        self.loads(node.min, node.extent)
        self.visit(node.body)

    def visit_IfThenElse(self, node: IfThenElse) -> None:
        self.loads(node.condition)
        self.visit(node.then_body)
        if node.else_body is not None:
            self.visit(node.else_body)

    def visit_While(self, node: While) -> None:
        self.loads(node.condition)
        self.visit(node.body)

    def visit_LetStmt(self, node: LetStmt) -> None:
        self.loads(node.value)
        self.visit(node.body)

    def visit_BlockRealize(self, node: BlockRealize) -> None:
        if self.pending:
            self.pending[-1][1][0] = True          # the enclosing block holds blocks
        self.loads(node.predicate, *node.iter_values, own=False)
        self.pending.append((set(), [False]))
        for stmt in (node.block.init, node.block.body):
            if stmt is not None:
                self.visit(stmt)
        found, (nests,) = self.pending.pop()
        if nests:                                  # a leaf block's own loads are accesses
            self.storages.update(found)

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        pass                                       # a load in a store: an access

    def visit_BufferStore(self, node: BufferStore) -> None:
        pass


@identity_cache(maxsize=256)
def unseen_loads(stmt: Stmt) -> frozenset[str]:
    """The storages `stmt` loads where the model's statements do not see it (`_UnseenLoads`):
    a rule that needs every read of a storage must not rely on the model for these.
    Remembered per node (IR nodes are immutable)."""
    finder = _UnseenLoads()
    finder.visit(stmt)
    return frozenset(finder.storages)

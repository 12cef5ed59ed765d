"""The polyhedral model of a PrimFunc: statement instances, their order, and what they access.

A statement is a block's body (tuple `S_<block>`) or its init (`I_<block>`); every isl name
comes from `names.py`, and `PolyModel.statement_of_tuple` / `buffer_of_tuple` map isl names
back to the IR. Its instances are named by the block's iteration variables,
`S_C[vi, vj, vk]`, not by loop variables: a schedule primitive changes loops and bindings but
keeps iteration variables, so the instances, and the dependences between them, stay the same
across every step. Only the schedule (instance -> time) changes, and legality compares the
dependences with the new schedule.

- domain: the instances that run, `[n] -> { S_C[vi, vj, vk] : 0 <= vi < n and ... }`, from the
  loop bounds, the bindings, the iteration domains, `T.where` and `if` conditions; symbolic dims
  are isl parameters, at least 1.
- schedule: instance -> time vector (below). Lexicographic order of time vectors is execution
  order.
- reads / writes: instance -> storage element (`B_<storage>[...]`). All views of one storage
  (`A_flat = T.Buffer((16,), data=A.data)`) share its tuple: when they differ in shape, every
  access is mapped through its row-major offset to the element of the storage's own buffer
  (`A`, the buffer named like the storage) at that offset, or to the offset itself, `B_A[o]`,
  when that buffer is unknown; so a write through `A` and a read through `A_flat` meet.
  `Statement.accesses` keeps each access in its view's own dimensions too (bounds, regions:
  use `Statement.accesses_of`, not the tuple name, to find one buffer's accesses).

What isl cannot represent is over-approximated, never dropped, and `notes` says so; every answer
built on such a model is conservative:

- an index that is not affine (a load, a product of two variables) covers its whole dimension;
- a loop bound, `T.where` or `if` condition that is not affine is left out (more instances may
  run; for an `if`, both branches);
- a binding that is not affine (`vi = (i * m) % 8`, `vi = f // m` after fusing symbolic loops)
  leaves its iteration variable free in its domain, and the instance gets a key: the affine
  arguments of the binding (`i`, `f`) become extra instance dimensions, `S_C[vi, _k0]` with
  `_k0 = i`. Each run of the block (a point of its loops) is then still one instance at one
  time, so the schedule stays a function and every pair of runs that may touch one element is
  a dependence in its real order; a step keeps the instances when it keeps the value of the
  arguments (split rewrites `i` as `io * 4 + ii`: same key), and otherwise is refused as not
  running the same instances.

The time vector of an instance (`Statement.time`, one entry per level, padded with 0 to the
longest) is built from the root down:

- a loop adds its variable (the loop's value at that run);
- a sequence adds the position of the child (0, 1, ...);
- `if` adds 0 for the then branch and 1 for the else branch;
- a block adds one slot: 0 for its init, 1 for its body, 2 for the blocks nested in its body
  (the root block's slot is 2 too: every statement's time starts with 2). An init thus runs
  just before the body of the same instance, and a block's own accesses count before the
  blocks nested in it (blockize's output: a block whose body is loops around inner blocks);
- lets and allocations add nothing.

So `for i: for j: block C (init, body)` gives `C (init)` the time `[2, i, j, 0]` and `C` the
time `[2, i, j, 1]`; `for i: {B; C}` gives `[2, i, 0, 1]` and `[2, i, 1, 1]`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import islpy as isl

from sched.ir.extern import is_opaque
from sched.ir.functor import collect
from sched.ir.memo import BoundedCache, identity_cache, register
from sched.ir.nodes import (
    Buffer,
    PrimFunc,
    While,
)
from sched.polyhedral import names
from sched.polyhedral.accesses import (
    Access,
    collect_accesses,
    region_accesses,
    row_major_offset,
)
from sched.polyhedral.isl_expr import isl_name, to_isl
from sched.polyhedral.isl_text import maps, parse_union_map, parse_union_set, read_map
from sched.polyhedral.pairs import nest_domain
from sched.polyhedral.statements import (  # noqa: F401  (re-exported: the model's types)
    BODY_SLOT,
    INIT_SLOT,
    NESTED_SLOT,
    Loop,
    Statement,
    ViewAccess,
    _exists,
    _params,
    _Walker,
    statement_ranges,
)
from sched.polyhedral.storages import owners_of, views_of


@dataclass
class PolyModel:
    """Statements, schedule and accesses of a PrimFunc as isl objects (see the module doc)."""

    func: PrimFunc
    statements: dict[str, Statement]
    params: list[str]
    notes: list[str]
    storages: dict[str, str] = field(default_factory=dict)       # isl tuple -> storage name
    views: dict[str, tuple[Buffer, ...]] = field(default_factory=dict)   # storage -> views
    linearized: frozenset[str] = frozenset()          # storages accessed through views that
    #                                                   differ in shape (see the module doc)
    derived: dict = field(default_factory=dict)       # answers computed from the model, by key

    @property
    def schedule(self) -> isl.UnionMap:
        """Every statement's instances -> times (built when first asked: the order checks
        work pair by pair, see pairs.py)."""
        if "schedule" not in self.derived:
            union = parse_union_map(f"[{', '.join(self.params)}] -> {{ }}")
            for statement in self.statements.values():
                union = union.union(isl.UnionMap.from_map(statement.schedule))
            self.derived["schedule"] = union.coalesce()
        return self.derived["schedule"]

    def _union(self, name: str, of):
        """The union of `of(statement)` over the statements (kept in `derived`: built when
        first asked, as most steps ask only pair by pair)."""
        if name not in self.derived:
            empty = f"[{', '.join(self.params)}] -> {{ }}"
            if name == "domain":
                union = parse_union_set(empty)
                for statement in self.statements.values():
                    union = union.union(isl.UnionSet.from_set(of(statement)))
            else:
                union = parse_union_map(empty)
                for statement in self.statements.values():
                    union = union.union(of(statement))
                union = union.coalesce()
            self.derived[name] = union
        return self.derived[name]

    @property
    def domain(self) -> isl.UnionSet:
        """The instances of every statement."""
        return self._union("domain", lambda s: s.domain)

    @property
    def reads(self) -> isl.UnionMap:
        """Every statement's reads (instance -> storage element)."""
        return self._union("reads", lambda s: s.reads)

    @property
    def writes(self) -> isl.UnionMap:
        """Every statement's writes (instance -> storage element)."""
        return self._union("writes", lambda s: s.writes)

    @property
    def is_exact(self) -> bool:
        return not self.notes

    def statements_of_block(self, name: str) -> list[Statement]:
        return [s for s in self.statements.values() if s.block.name == name]

    def statement_of_tuple(self, tuple_name: str) -> Statement:
        """The statement whose isl tuple is `tuple_name`."""
        return self.statements[tuple_name]

    def storage_of_tuple(self, tuple_name: str) -> str:
        """The storage name (a buffer name) whose isl tuple is `tuple_name`."""
        return self.storages[tuple_name]

    def writers_of_storages(self, statements=None) -> dict[str, Statement]:
        """Storage name -> a statement (of `statements`, default all) that writes it."""
        return {self.storages[m.get_tuple_name(isl.dim_type.out)]: statement
                for statement in (self.statements.values() if statements is None
                                  else statements)
                for m in maps(statement.writes)}

    def buffer_of_tuple(self, tuple_name: str) -> Buffer:
        """The buffer whose storage has isl tuple `tuple_name` (the view named like the
        storage, or its first view)."""
        storage = self.storages[tuple_name]
        views = self.views[storage]
        return next((b for b in views if b.name == storage), views[0])

    def buffer_tuple(self, storage_name: str) -> str:
        """The isl tuple of a storage (see names.buffer_tuple)."""
        return names.buffer_tuple(storage_name)


def buffer_tuple(storage_name: str) -> str:
    """The isl tuple of the storage named `storage_name`: `B_A`, escaped where needed. Callers
    that wrote `"B_" + name` should call this."""
    return names.buffer_tuple(storage_name)


# `_Relations.of`'s answers by what they are made of (each keeps its block body alive)
_ACCESSES = BoundedCache(1 << 13)
# `_Relations.fill`'s answers by template and parameters (each keeps its template alive)
_FILLED = BoundedCache(1 << 11)


class _Relations:
    """Builds the access relations of statements, in storage and view dimensions."""

    def __init__(self, walker: _Walker, params: str, views: dict[str, tuple[Buffer, ...]],
                 owners: dict[str, Buffer]) -> None:
        self.walker, self.params = walker, params
        self.linearized = frozenset(s for s, vs in views.items()
                                    if len({tuple(b.shape) for b in vs}) > 1)
        self.owners = owners
        # the shapes of the storages accessed through offsets: what `of` depends on
        self.owner_shapes = tuple((s, owners[s].shape) for s in sorted(self.linearized)
                                  if s in owners)

    def fill(self, statement: Statement, param_text: str, positive_text: str) -> None:
        """Fill in the statement's domain, reads, writes and accesses (its time vector
        aside): a function of the statement the walk made (`statement.template`), the
        parameters and the storages accessed through offsets, so remembered by those (a
        step rebuilds the model of a function most of whose statements it did not touch,
        though it may shift their times)."""
        template = statement.template
        key = (id(template), param_text, positive_text, self.linearized, self.owner_shapes)
        entry = _FILLED.recall(key) if template is not None else None
        if entry is None or entry[0] is not template:
            statement.param_text = param_text
            statement.domain_texts = (f"{param_text} {{ {statement.instance()} : "
                                      f"{statement.condition()} }}", positive_text)
            statement.domain = nest_domain(statement.nest_text(), positive_text)
            (statement.reads, statement.writes), notes = self.of(statement)
            filled = (statement.domain_texts, statement.domain, statement.reads,
                      statement.writes, tuple(statement.accesses), notes)
            if template is not None:
                _FILLED.remember(key, (template, filled))
        else:
            filled = entry[1]
            statement.param_text = param_text
            (statement.domain_texts, statement.domain, statement.reads, statement.writes,
             accesses, notes) = filled
            statement.accesses = list(accesses)
        for message in notes:
            self.walker.note(message)

    def relation(self, statement: Statement, access: Access, tuple_name: str,
                 elements: list[str], constraints: list[str],
                 hidden: tuple[str, ...] = ()) -> isl.Map:
        """`S[...] -> tuple_name[elements]` under the statement's domain and the access's own
        loops and guards. An access in a nested block may use the enclosing loops (through
        the outer block's variables): then the statement's constraints are quantified here."""
        body = list(access.loop_bounds) + list(access.guards) + constraints
        quantified = list(access.bound_loops) + list(hidden)
        if statement.env:
            quantified += statement.loop_names()
            body = statement.constraints + body
        text = (f"{self.params} {{ {statement.instance()} -> {tuple_name}"
                f"[{', '.join(elements)}] : {_exists(quantified, body)} }}")
        return _on_domain(text, statement.nest_text(), statement.domain_texts[1])

    def of(self, statement: Statement) -> tuple[tuple[isl.UnionMap, isl.UnionMap],
                                                 tuple[str, ...]]:
        """The statement's reads and writes (instance -> storage element), its accesses
        appended to `statement.accesses`, and the notes they make. Remembered by what they
        are made of (the block's body, its enclosing blocks' variables, the statement's
        instance and domain texts, the views read through offsets)."""
        body = statement.block.init if statement.is_init else statement.block.body
        owners = self.owner_shapes
        regions = ((statement.block.reads, statement.block.writes)
                   if is_opaque(statement.block) else None)
        key = (id(body), regions, statement.is_init, tuple(statement.env.items()),
               statement.instance(), statement.domain_texts, self.params, self.linearized, owners)
        entry = _ACCESSES.recall(key)
        if entry is None or entry[0] is not body:
            notes: list[str] = []
            found = self._of(statement, body, notes)
            entry = _ACCESSES.remember(key, (body, found, tuple(notes)))
        _, (accesses, reads, writes), notes = entry
        statement.accesses.extend(accesses)
        return (reads, writes), notes

    def _of(self, statement: Statement, body, notes: list[str]):
        empty = isl.UnionMap(f"{self.params} {{ }}")
        reads = writes = empty
        accesses: list[ViewAccess] = []
        found = collect_accesses(body, notes.append, statement.env,
                                 lambda: statement_ranges(self.walker.func, statement))
        if is_opaque(statement.block):
            found += region_accesses(statement.block, notes.append, statement.env)
        for access in found:
            buffer = access.buffer
            elements = [names.local("a", d) for d in range(buffer.ndim)]
            view = self.relation(statement, access, names.buffer_tuple(buffer.name), elements,
                                 access.element_constraints(elements))
            accesses.append(ViewAccess(buffer, access.is_write, view, access))
            storage = names.buffer_tuple(buffer.storage_name)
            if buffer.storage_name in self.linearized:
                stored = self.through_offset(statement, access, storage, notes)
            elif storage != names.buffer_tuple(buffer.name):
                stored = view.set_tuple_name(isl.dim_type.out, storage)
            else:
                stored = view
            if access.is_write:
                writes = writes.union(isl.UnionMap.from_map(stored))
            else:
                reads = reads.union(isl.UnionMap.from_map(stored))
        return tuple(accesses), reads, writes

    def through_offset(self, statement: Statement, access: Access, storage: str,
                       notes: list[str]) -> isl.Map:
        """The access as elements of its storage's own buffer (or offsets in the storage)
        through the row-major offset: `A_flat[k]` -> `A[k // 4, k % 4]`."""
        buffer, offset = access.buffer, names.local("o", 0)
        linear = access.offset_constraint(offset)
        if linear is None:
            notes.append(f"an access to view '{buffer.name}' of '{buffer.storage_name}' has "
                         f"no affine offset; the whole storage is assumed to be accessed")
        owner = self.owners.get(buffer.storage_name)
        if owner is None:
            return self.relation(statement, access, storage, [offset],
                                 [linear or f"{offset} >= 0"])
        elements = [names.local("a", d) for d in range(owner.ndim)]
        decomposed = row_major_offset(elements, owner.shape)
        constraints = [f"0 <= {e} < {x}" for e, x in
                       zip(elements, (to_isl(d) for d in owner.shape)) if x is not None]
        if linear is not None and decomposed is not None:
            constraints += [linear, f"{offset} = {decomposed}"]
        return self.relation(statement, access, storage, elements, constraints, (offset,))


@register
@functools.lru_cache(maxsize=1 << 14)
def _on_domain(text: str, nest_text: str, params_text: str) -> isl.Map:
    """The map `text` restricted to the instances of the nest `nest_text` that run."""
    return read_map(text).intersect_domain(nest_domain(nest_text, params_text))


@identity_cache(maxsize=64)
def build_model(func: PrimFunc) -> PolyModel:
    """The polyhedral model of `func`. Blocks without iteration variables still count as
    statements (one instance each), except the root block. Cached per function (a step's
    check builds the new function's model, which the next step reads again): callers must
    not modify it; what they derive from it may go in `derived`. A function with a while
    loop has none: UnmodelledError (see `build_footprint_model`)."""
    return _build(func, _Walker(func))


@identity_cache(maxsize=16)
def build_footprint_model(func: PrimFunc) -> PolyModel:
    """The model of `func` for what its statements may access (bounds), also where it has a
    while loop, whose body is modelled as guarded by a condition that may hold: its accesses
    are right, its order is not (ask `build_model` for anything about order)."""
    if not collect(func.body, While):
        return build_model(func)
    return _build(func, _Walker(func, while_as_if=True))


def _build(func: PrimFunc, walker: _Walker) -> PolyModel:
    walker.walk(func.body, [], [], [], {})
    params = _params(func)
    param_text = f"[{', '.join(params)}] ->"
    width = max((len(s.time) for s in walker.statements), default=1)
    # a symbolic dim is a size: at least 1 (an empty tensor has nothing to order)
    dims = [isl_name(v) for v in func.symbolic_vars]
    positive_text = (f"{param_text} {{ : {' and '.join(f'{d} >= 1' for d in dims)} }}"
                     if dims else f"{param_text} {{ : }}")
    views = views_of(func)
    relations = _Relations(walker, param_text, views, owners_of(func))
    for statement in walker.statements:
        relations.fill(statement, param_text, positive_text)
        statement.time = statement.time + ["0"] * (width - len(statement.time))
    statements = {s.name: s for s in walker.statements}
    storages = {names.buffer_tuple(storage): storage for storage in views}
    return PolyModel(func, statements, params, walker.notes, storages, views,
                     relations.linearized)

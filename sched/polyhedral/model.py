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

import dataclasses
import functools
from dataclasses import dataclass, field

import islpy as isl

from sched.ir.functor import collect, free_vars, substitute
from sched.ir.nodes import (
    TRUE,
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    IfThenElse,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
)
from sched.polyhedral import names
from sched.polyhedral.accesses import Access, collect_accesses, row_major_offset
from sched.polyhedral.isl_expr import isl_name, to_isl, to_isl_condition

BODY_SLOT, INIT_SLOT, NESTED_SLOT = "1", "0", "2"


@dataclass(frozen=True)
class Loop:
    """A loop enclosing a statement and the position of its variable in the time vector."""

    var: Var
    min: Expr
    extent: Expr
    position: int
    kind: str
    thread_tag: str | None


@dataclass(frozen=True)
class ViewAccess:
    """One access of a statement in its view's own dimensions: `S_C[...] -> B_A_flat[o]`."""

    buffer: Buffer
    is_write: bool
    relation: isl.Map
    access: Access


@dataclass
class Statement:
    """One block body or block init, with its instances and accesses as isl objects."""

    name: str                   # isl tuple name: S_<block> or I_<block> (see names.py)
    block: Block
    is_init: bool
    loops: tuple[Loop, ...]     # enclosing loops, outermost first
    domain: isl.Set = None
    schedule: isl.Map = None
    reads: isl.UnionMap = None
    writes: isl.UnionMap = None
    constraints: list[str] = field(default_factory=list)   # in loop, instance dims and params
    time: list[str] = field(default_factory=list)          # the time vector's entries
    keys: list[str] = field(default_factory=list)          # affine arguments of non-affine
    #                                                        bindings (see the module doc)
    env: dict = field(default_factory=dict)                 # enclosing blocks' variables
    accesses: list[ViewAccess] = field(default_factory=list)
    exact: bool = True          # no condition or binding of it was over-approximated
    context: list[str] = field(default_factory=list)       # conditions on the loops alone
    bindings: list[tuple] = field(default_factory=list)    # (iter var, value, lo, extent) texts

    @property
    def iter_names(self) -> list[str]:
        """The isl names of the block's iteration variables (the first instance dims)."""
        return [isl_name(iv.var) for iv in self.block.iter_vars]

    @property
    def key_names(self) -> list[str]:
        return [names.local("k", k) for k in range(len(self.keys))]

    @property
    def dim_names(self) -> list[str]:
        """The instance dims: iteration variables, then keys."""
        return self.iter_names + self.key_names

    def instance(self) -> str:
        return f"{self.name}[{', '.join(self.dim_names)}]"

    def loop_names(self) -> list[str]:
        return [isl_name(loop.var) for loop in self.loops]

    def condition(self) -> str:
        """The constraints with the loops quantified: which instances run."""
        return _exists(self.loop_names(), self.constraints)

    def accesses_of(self, buffer_name: str, kind: str = "any") -> isl.Map | None:
        """The statement's accesses to the buffer (view) named `buffer_name`, in its own
        dimensions (`kind`: "read", "write" or "any"), or None if it has none. Use this, not a
        tuple name, to find one buffer's accesses."""
        found = None
        for view in self.accesses:
            if view.buffer.name != buffer_name or kind == ("read" if view.is_write else "write"):
                continue
            found = view.relation if found is None else found.union(view.relation)
        return found


class _Walker:
    """Collects statements, with their constraints and time vectors, from a function body."""

    def __init__(self, func: PrimFunc) -> None:
        self.func = func
        self.statements: list[Statement] = []
        self.notes: list[str] = []

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)

    def affine(self, expr: Expr, env: dict, what: str) -> str | None:
        text = to_isl(substitute(expr, env))
        if text is None:
            self.note(f"{what} is not affine; the model over-approximates it")
        return text

    def condition(self, expr: Expr, env: dict, what: str) -> str | None:
        text = to_isl_condition(substitute(expr, env))
        if text is None:
            self.note(f"{what} is not affine; the model assumes it may hold")
        return text

    def walk(self, stmt: Stmt, loops: list[Loop], conds: list[str], time: list[str],
             env: dict, exact: bool = True) -> None:
        """Statements of `stmt` under `loops` and the conditions `conds`, at `time`; `exact`
        is False under a condition or loop bound the model left out."""
        if isinstance(stmt, SeqStmt):
            for index, child in enumerate(stmt.stmts):
                self.walk(child, loops, conds, time + [str(index)], env, exact)
        elif isinstance(stmt, For):
            loop = Loop(stmt.loop_var, substitute(stmt.min, env), substitute(stmt.extent, env),
                        len(time), stmt.kind, stmt.thread_tag)
            name = isl_name(stmt.loop_var)
            lo = self.affine(stmt.min, env, f"the start of loop '{stmt.loop_var.name}'")
            extent = self.affine(stmt.extent, env, f"the extent of loop '{stmt.loop_var.name}'")
            bounds = [] if lo is None else [f"{name} >= {lo}"]
            if lo is not None and extent is not None:
                bounds.append(f"{name} < {lo} + {extent}")
            self.walk(stmt.body, loops + [loop], conds + bounds, time + [name], env,
                      exact and len(bounds) == 2)
        elif isinstance(stmt, IfThenElse):
            condition = self.condition(stmt.condition, env, "an if condition")
            then_conds = conds if condition is None else conds + [condition]
            else_conds = conds if condition is None else conds + [f"not ({condition})"]
            exact = exact and condition is not None
            self.walk(stmt.then_body, loops, then_conds, time + ["0"], env, exact)
            if stmt.else_body is not None:
                self.walk(stmt.else_body, loops, else_conds, time + ["1"], env, exact)
        elif isinstance(stmt, LetStmt):
            self.walk(stmt.body, loops, conds, time, {**env, stmt.var: stmt.value}, exact)
        elif isinstance(stmt, Allocate):
            self.walk(stmt.body, loops, conds, time, env, exact)
        elif isinstance(stmt, BlockRealize):
            self.block(stmt, loops, conds, time, env, exact)

    def block(self, realize: BlockRealize, loops, conds, time, env, exact=True) -> None:
        block = realize.block
        context = list(conds)        # conditions on the loops alone
        if realize.predicate != TRUE:
            predicate = self.condition(realize.predicate, env,
                                       f"the predicate of block '{block.name}'")
            context += [predicate] if predicate is not None else []
            exact = exact and predicate is not None
        bindings, own, in_domain, keys = self.bindings(realize, loops, env)
        exact = exact and not keys
        constraints = context + own + [f"{names.local('k', k)} = {key}"
                                       for k, key in enumerate(keys)]
        common = dict(keys=keys, env=env, exact=exact, context=context, bindings=bindings)
        if block.iter_vars or block.name != "root":
            if block.init is not None:
                first = [f"{isl_name(iv.var)} = {to_isl(iv.dom.min)}"
                         for iv in block.iter_vars if iv.kind == "reduce"]
                self.statements.append(Statement(
                    names.statement_tuple(block.name, True), block, True, tuple(loops),
                    constraints=constraints + first, time=time + [INIT_SLOT], **common))
            self.statements.append(Statement(
                names.statement_tuple(block.name), block, False, tuple(loops),
                constraints=constraints, time=time + [BODY_SLOT], **common))
        # blocks nested in this one are statements of their own, under this block's loops;
        # their constraints are in loop variables (this block's variables are substituted)
        if collect(block.body, BlockRealize):
            if block.name != "root" and _own_accesses(block.body):
                self.note(f"block '{block.name}' has accesses of its own beside nested blocks; "
                          f"the model orders them before the nested blocks")
            inner_env = {**env, **{iv.var: substitute(v, env)
                                   for iv, v in zip(block.iter_vars, realize.iter_values)}}
            self.walk(block.body, loops, context + in_domain, time + [NESTED_SLOT], inner_env,
                      exact)

    def bindings(self, realize: BlockRealize, loops, env):
        """(per iteration variable: (iter var, value, lo, extent) in isl text; constraints on
        the iteration variables; the same on the values, in loop variables; the instance keys
        of the non-affine bindings)."""
        block = realize.block
        bindings, own, in_domain, keys = [], [], [], []
        loop_vars = {loop.var for loop in loops}
        for iter_var, value in zip(block.iter_vars, realize.iter_values):
            name = isl_name(iter_var.var)
            lo, extent = to_isl(iter_var.dom.min), to_isl(iter_var.dom.extent)
            value = substitute(value, env)
            bound = to_isl(value)
            bindings.append((iter_var, bound, lo, extent))
            if lo is not None and extent is not None:
                own.append(f"{lo} <= {name} < {lo} + {extent}")
                if bound is not None:
                    in_domain.append(f"{lo} <= {bound} < {lo} + {extent}")
            if bound is not None:
                own.append(f"{name} = {bound}")
                continue
            arguments = _affine_arguments(value, loop_vars)
            self.note(f"the binding of '{iter_var.var.name}' in block '{block.name}' "
                      f"({value.script()}) is not affine; the model lets it take any value in "
                      f"its domain and tells the block's runs apart by "
                      f"{', '.join(arguments) or 'nothing'} (a step that changes those is "
                      f"refused)")
            keys += [a for a in arguments if a not in keys]
        return bindings, own, in_domain, keys


def _own_accesses(body: Stmt) -> bool:
    return bool(collect_accesses(body, lambda _: None))


def _expr_children(expr: Expr) -> list[Expr]:
    children = []
    for f in dataclasses.fields(expr):
        value = getattr(expr, f.name)
        values = value if isinstance(value, tuple) else (value,)
        children += [v for v in values if isinstance(v, Expr)]
    return children


def _affine_arguments(expr: Expr, loop_vars: set[Var]) -> list[str]:
    """The largest affine parts of `expr` that use a loop, in isl syntax: what a non-affine
    binding is a function of (`(i * m) % 8` -> `i`; `idx[i * 2]` -> `(i * 2)`)."""
    text = to_isl(expr)
    if text is not None:
        return [text] if set(free_vars(expr)) & loop_vars else []
    found: list[str] = []
    for child in _expr_children(expr):
        found += [a for a in _affine_arguments(child, loop_vars) if a not in found]
    return found


def _params(func: PrimFunc) -> list[str]:
    found = [isl_name(v) for v in func.symbolic_vars]
    found += [isl_name(p) for p in func.params if isinstance(p, Var)]
    return list(dict.fromkeys(found))


def _exists(variables: list[str], constraints: list[str]) -> str:
    body = " and ".join(constraints) if constraints else "true"
    if not variables:
        return body
    return f"exists ({', '.join(variables)} : {body})"


@dataclass
class PolyModel:
    """Statements, schedule and accesses of a PrimFunc as isl objects (see the module doc)."""

    func: PrimFunc
    statements: dict[str, Statement]
    params: list[str]
    domain: isl.UnionSet
    schedule: isl.UnionMap
    reads: isl.UnionMap
    writes: isl.UnionMap
    notes: list[str]
    storages: dict[str, str] = field(default_factory=dict)       # isl tuple -> storage name
    views: dict[str, tuple[Buffer, ...]] = field(default_factory=dict)   # storage -> views
    linearized: frozenset[str] = frozenset()          # storages accessed through views that
    #                                                   differ in shape (see the module doc)
    derived: dict = field(default_factory=dict)       # answers computed from the model, by key

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


def _views(func: PrimFunc) -> dict[str, tuple[Buffer, ...]]:
    """The buffers accessed in `func`, by storage name, in order of first access."""
    found: dict[str, dict[Buffer, None]] = {}
    for node in collect(func.body, BufferLoad) + collect(func.body, BufferStore):
        found.setdefault(node.buffer.storage_name, {})[node.buffer] = None
    return {storage: tuple(views) for storage, views in found.items()}


def _owners(func: PrimFunc) -> dict[str, Buffer]:
    """The buffer that owns each storage (a parameter or an allocation, not a view)."""
    buffers = list(func.buffers) + [b for block in collect(func.body, Block)
                                    for b in block.alloc_buffers]
    buffers += [a.buffer for a in collect(func.body, Allocate)]
    return {b.name: b for b in buffers if b.data is None}


class _Relations:
    """Builds the access relations of statements, in storage and view dimensions."""

    def __init__(self, walker: _Walker, params: str, views: dict[str, tuple[Buffer, ...]],
                 owners: dict[str, Buffer]) -> None:
        self.walker, self.params = walker, params
        self.linearized = frozenset(s for s, vs in views.items()
                                    if len({tuple(b.shape) for b in vs}) > 1)
        self.owners = owners

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
        return isl.Map(text).intersect_domain(statement.domain)

    def of(self, statement: Statement) -> tuple[isl.UnionMap, isl.UnionMap]:
        body = statement.block.init if statement.is_init else statement.block.body
        empty = isl.UnionMap(f"{self.params} {{ }}")
        reads = writes = empty
        for access in collect_accesses(body, self.walker.note, statement.env):
            buffer = access.buffer
            elements = [names.local("a", d) for d in range(buffer.ndim)]
            view = self.relation(statement, access, names.buffer_tuple(buffer.name), elements,
                                 access.element_constraints(elements))
            statement.accesses.append(ViewAccess(buffer, access.is_write, view, access))
            storage = names.buffer_tuple(buffer.storage_name)
            if buffer.storage_name in self.linearized:
                stored = self.through_offset(statement, access, storage)
            elif storage != names.buffer_tuple(buffer.name):
                stored = view.set_tuple_name(isl.dim_type.out, storage)
            else:
                stored = view
            if access.is_write:
                writes = writes.union(isl.UnionMap.from_map(stored))
            else:
                reads = reads.union(isl.UnionMap.from_map(stored))
        return reads, writes

    def through_offset(self, statement: Statement, access: Access, storage: str) -> isl.Map:
        """The access as elements of its storage's own buffer (or offsets in the storage)
        through the row-major offset: `A_flat[k]` -> `A[k // 4, k % 4]`."""
        buffer, offset = access.buffer, names.local("o", 0)
        linear = access.offset_constraint(offset)
        if linear is None:
            self.walker.note(f"an access to view '{buffer.name}' of '{buffer.storage_name}' has "
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


@functools.lru_cache(maxsize=64)
def build_model(func: PrimFunc) -> PolyModel:
    """The polyhedral model of `func`. Blocks without iteration variables still count as
    statements (one instance each), except the root block. Cached per function (a step's
    check builds the new function's model, which the next step reads again): callers must
    not modify it; what they derive from it may go in `derived`."""
    walker = _Walker(func)
    walker.walk(func.body, [], [], [], {})
    params = _params(func)
    param_text = f"[{', '.join(params)}] ->"
    width = max((len(s.time) for s in walker.statements), default=1)
    # a symbolic dim is a size: at least 1 (an empty tensor has nothing to order)
    dims = [isl_name(v) for v in func.symbolic_vars]
    positive_dims = isl.Set(f"{param_text} {{ : {' and '.join(f'{d} >= 1' for d in dims)} }}"
                            if dims else f"{param_text} {{ : }}")
    views = _views(func)
    relations = _Relations(walker, param_text, views, _owners(func))
    empty = isl.UnionMap(f"{param_text} {{ }}")
    domain, schedule, reads, writes = isl.UnionSet(f"{param_text} {{ }}"), empty, empty, empty
    for statement in walker.statements:
        statement.domain = isl.Set(f"{param_text} {{ {statement.instance()} : "
                                   f"{statement.condition()} }}").intersect_params(positive_dims)
        statement.time = statement.time + ["0"] * (width - len(statement.time))
        statement.schedule = _schedule(statement, param_text).intersect_params(positive_dims)
        statement.reads, statement.writes = relations.of(statement)
        domain = domain.union(isl.UnionSet.from_set(statement.domain))
        schedule = schedule.union(isl.UnionMap.from_map(statement.schedule))
        reads, writes = reads.union(statement.reads), writes.union(statement.writes)
    statements = {s.name: s for s in walker.statements}
    storages = {names.buffer_tuple(storage): storage for storage in views}
    return PolyModel(func, statements, params, domain, schedule.coalesce(), reads.coalesce(),
                     writes.coalesce(), walker.notes, storages, views, relations.linearized)


def _schedule(statement: Statement, param_text: str) -> isl.Map:
    """`{ S[...] -> [2, i, 1] : ... }`: each time entry a constant or a loop's value (the loops
    are the map's output dimensions, named as in the constraints)."""
    return isl.Map(f"{param_text} {{ {statement.instance()} -> [{', '.join(statement.time)}] : "
                   f"{' and '.join(statement.constraints) or 'true'} }}")

"""A PrimFunc's statements for the polyhedral model: each block body or init, with the loops
around it, its constraints (loop bounds, bindings, predicates, conditions) and its time vector,
collected by one walk of the IR (`_Walker`). model.py turns them into isl objects; the time
vector and the over-approximations are described there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

from sched.errors import UnmodelledError
from sched.ir.dtype import is_int, max_value, min_value
from sched.ir.functor import collect, substitute
from sched.ir.intervals import loop_ranges, loop_values, parameter_ranges
from sched.ir.memo import BoundedCache
from sched.ir.nodes import (
    TRUE,
    Allocate,
    Block,
    BlockRealize,
    Buffer,
    Expr,
    For,
    IfThenElse,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    While,
)
from sched.polyhedral import names
from sched.polyhedral.accesses import Access, collect_accesses
from sched.polyhedral.block_bindings import binding_equals, block_bindings
from sched.polyhedral.isl_expr import (
    isl_name,
    to_isl,
    to_isl_comparison,
    to_isl_condition,
)
from sched.polyhedral.isl_text import is_single_valued_map

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
    reads: isl.UnionMap = None
    writes: isl.UnionMap = None
    constraints: list[str] = field(default_factory=list)   # in loop, instance dims and params
    time: list[str] = field(default_factory=list)          # the time vector's entries
    keys: list[str] = field(default_factory=list)          # affine arguments of non-affine
    #                                                        bindings (see the module doc)
    # the positions of the iteration variables whose values give the keys back, with the
    # keys at `keys_given` (injective_bindings.py): runs equal on them and on those keys are
    # at one key; None where none do
    keys_determined_by: tuple[int, ...] | None = None
    keys_given: tuple[int, ...] = ()
    # each non-affine binding: (its iteration variable, whether its value reads memory, the
    # constraints the model knows of its value: binding_ranges.py's bounds, a predicate's
    # `value < e`), which in_bounds.py compares with the variable's domain
    loose_bindings: tuple = ()
    env: dict = field(default_factory=dict)                 # enclosing blocks' variables
    accesses: list[ViewAccess] = field(default_factory=list)
    exact: bool = True          # no condition or binding of it was over-approximated
    # the loop bounds, `if` conditions and block predicates of it the model left out (not
    # affine), as IR: where there are some, its domain may hold instances that do not run
    unseen: tuple = ()
    context: list[str] = field(default_factory=list)       # conditions on the loops alone
    bindings: list[tuple] = field(default_factory=list)    # (iter var, value, lo, extent) texts
    domain_texts: tuple[str, str] = ("", "")               # the isl text of `domain`, and
    #                                                        of its parameters' context
    param_text: str = ""                                    # `[n, m] ->`
    # texts asked again and again (instance, schedule at a time vector), made once; a copy
    # (dataclasses.replace) starts without them
    _texts: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    # the statement a walk remembered first, of which this one is a copy up to its time
    # vector (model.py fills in the isl objects once per template and parameters)
    template: Statement | None = field(default=None, repr=False, compare=False)

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
        key = ("instance", self.name, len(self.keys))
        if key not in self._texts:
            self._texts[key] = f"{self.name}[{', '.join(self.dim_names)}]"
        return self._texts[key]

    @property
    def schedule(self) -> isl.Map:
        """instance -> time (its runs: several where an instance runs more than once),
        built when first asked (pairs.schedule_map)."""
        from sched.polyhedral.pairs import schedule_key, schedule_map

        return schedule_map(*schedule_key(self, self.time), self.domain_texts[1])

    @property
    def runs_once(self) -> bool:
        """Whether each instance runs once (the schedule is single-valued). Asked of the
        nest map (`nest_text`): every loop of the statement is an entry of its time vector
        and the other entries are constants, so the schedule maps two runs of an instance to
        one time iff the nest map maps them to one point; the answer stays the same across
        steps that only move the statement's nest among others or reorder its loops."""
        return is_single_valued_map(self.nest_text(), self.domain_texts[1])

    def nest_text(self) -> str:
        """`{ S[...] -> [i, j, k] : ... }`: the statement's instances at the values of its
        loops, in a canonical form: the loops' isl names sorted (each once), the constraints
        sorted (each once). The constraints are a conjunction, so the order is no part of the
        set; the schedule at any time vector is this map relabelled (pairs.schedule_map), and
        a step that reorders loops or shifts the nest among others keeps the text."""
        return self.nest()[0]

    def nest_loops(self) -> tuple[str, ...]:
        """The output dims of `nest_text`: the loops' isl names, sorted, each once."""
        return self.nest()[1]

    def nest(self) -> tuple[str, tuple[str, ...]]:
        """(`nest_text`, `nest_loops`), made once (pairs.schedule_key asks for every pair)."""
        key = ("nest", self.param_text, len(self.constraints), len(self.loops))
        found = self._texts.get(key)
        if found is None:
            loops = tuple(sorted(set(self.loop_names())))
            constraints = " and ".join(sorted(set(self.constraints))) or "true"
            found = self._texts[key] = (f"{self.param_text} {{ {self.instance()} -> "
                                        f"[{', '.join(loops)}] : {constraints} }}", loops)
        return found

    def loop_names(self) -> list[str]:
        return [isl_name(loop.var) for loop in self.loops]

    def condition(self) -> str:
        """The constraints with the loops quantified: which instances run (canonical: loops
        and constraints sorted, each once, as in `nest_text`)."""
        return _exists(list(self.nest_loops()), sorted(set(self.constraints)))

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

    def __init__(self, func: PrimFunc, while_as_if: bool = False) -> None:
        self.func = func
        self.while_as_if = while_as_if      # footprints only (bounds): see `walk`
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

    def widest_bounds(self, loops: list[Loop], loop: Loop, name: str) -> list[str]:
        """`name`'s constant bounds over every value of the loops around it (interval
        arithmetic), where its own bounds are not affine: an over-approximation, like
        leaving them out, but bounded."""
        ranges = {v: (0, max_value(v.dtype)) for v in self.func.symbolic_vars}
        ranges |= {p: (min_value(p.dtype), max_value(p.dtype)) for p in self.func.params
                   if isinstance(p, Var) and is_int(p.dtype)}
        ranges = loop_ranges([(lp.var, lp.min, lp.extent) for lp in [*loops, loop]], ranges)
        if loop.var not in ranges:
            return []
        low, high = ranges[loop.var]
        # (a bound beyond int64, from products of symbolic dims, is no help and is more than
        # the fast text builder's constants take)
        return [text for text, value in ((f"{name} >= {low}", low), (f"{name} <= {high}", high))
                if abs(value) < 1 << 62]

    def condition(self, expr: Expr, env: dict, what: str) -> str | None:
        text = to_isl_condition(substitute(expr, env))
        if text is None:
            self.note(f"{what} is not affine; the model assumes it may hold")
        return text

    def walk(self, stmt: Stmt, loops: list[Loop], conds: list[str], time: list[str],
             env: dict, unseen: tuple = ()) -> None:
        """Statements of `stmt` under `loops` and the conditions `conds`, at `time`; `unseen`:
        the conditions and loop bounds above it the model left out (IR)."""
        if isinstance(stmt, SeqStmt):
            for index, child in enumerate(stmt.stmts):
                self.walk(child, loops, conds, time + [str(index)], env, unseen)
        elif isinstance(stmt, For):
            loop = Loop(stmt.loop_var, substitute(stmt.min, env), substitute(stmt.extent, env),
                        len(time), stmt.kind, stmt.thread_tag)
            name = isl_name(stmt.loop_var)
            lo = self.affine(stmt.min, env, f"the start of loop '{stmt.loop_var.name}'")
            bounds = [] if lo is None else [f"{name} >= {lo}"]
            below = None
            if lo is not None:      # an extent may be piecewise (a bound isl computed)
                below = to_isl_comparison(f"{name} - ({lo})", "<", loop.extent)
                if below is None:
                    self.note(f"the extent of loop '{stmt.loop_var.name}' is not affine; the "
                              f"model over-approximates it")
                else:
                    bounds.append(below)
            left_out = (() if lo is not None else (loop.min,)) + (
                () if below is not None else (loop.extent,))
            if left_out:
                # still bounded where interval arithmetic bounds it: isl's minima of an
                # unbounded set fail ("unbounded optimum": audit helper-72, a reduce loop
                # from `i_j_fused // n` after a fuse)
                bounds += self.widest_bounds(loops, loop, name)
            self.walk(stmt.body, loops + [loop], conds + bounds, time + [name], env,
                      unseen + left_out)
        elif isinstance(stmt, IfThenElse):
            condition = self.condition(stmt.condition, env, "an if condition")
            then_conds = conds if condition is None else conds + [condition]
            else_conds = conds if condition is None else conds + [f"not ({condition})"]
            if condition is None:
                unseen = unseen + (substitute(stmt.condition, env),)
            self.walk(stmt.then_body, loops, then_conds, time + ["0"], env, unseen)
            if stmt.else_body is not None:
                self.walk(stmt.else_body, loops, else_conds, time + ["1"], env, unseen)
        elif isinstance(stmt, LetStmt):
            # (its value in the lets around: a let of a let reached isl by name, audit
            # helper-173)
            self.walk(stmt.body, loops, conds, time, {**env, stmt.var: substitute(stmt.value, env)},
                      unseen)
        elif isinstance(stmt, Allocate):
            self.walk(stmt.body, loops, conds, time, env, unseen)
        elif isinstance(stmt, BlockRealize):
            if env:
                self.block(stmt, loops, conds, time, env, unseen)
            else:
                self.remembered_block(stmt, loops, conds, time, unseen)
        elif isinstance(stmt, While):
            self.while_loop(stmt, loops, conds, time, env)

    def while_loop(self, loop: While, loops, conds, time, env) -> None:
        """A while loop runs its body any number of times, with no variable to tell the runs
        apart: an order the model would give its statements is wrong (a run of the second
        statement comes before the next run of the first), so the model refuses it. For
        footprints alone (which elements may be accessed: bounds proofs), its body is what an
        `if` of unknown condition would guard, the same accesses in every run."""
        if not collect(loop.body, BlockRealize):
            return                      # no statement of the model (lowered-IR stores)
        if not self.while_as_if:
            raise UnmodelledError(
                f"the function has a while loop (`while {loop.condition.script()}:`), which "
                f"the polyhedral model cannot see: sched cannot prove a step legal that "
                f"depends on the order of the statements. Schedule the function before the "
                f"while loop is added, or write the loop as a for loop over a bound with an "
                f"if inside")
        self.note("a while loop's body is modelled as running under a condition that may "
                  "hold (its accesses only)")
        self.walk(loop.body, loops, conds, time + ["0"], env, (loop.condition,))

    def remembered_block(self, realize: BlockRealize, loops, conds, time, unseen) -> None:
        """`block` of a realize outside other blocks (no enclosing block's variables): its
        statements and notes are a function of the realize and of the loops (by their
        nodes), conditions, time vector and unseen conditions above it, so they are
        remembered (copies are handed out: the model fills in each statement's isl objects).
        Of the time vector only its length counts: the statements' times start with it, and
        the rest is the block's own (a step that inserts a statement before others shifts
        their times). A step rebuilds the model of a function most of whose blocks it did
        not move."""
        key = (id(realize), tuple((id(lp.var), id(lp.min), id(lp.extent), lp.position, lp.kind,
                                   lp.thread_tag) for lp in loops),
               tuple(conds), len(time), tuple(id(u) for u in unseen), self.while_as_if)
        entry = _BLOCK_STATEMENTS.recall(key)
        if entry is None or entry[0] is not realize:
            first, notes = len(self.statements), self.notes
            self.notes = []
            try:
                self.block(realize, loops, conds, time, {}, unseen)
                made = tuple(_template(s) for s in self.statements[first:])
                self.statements[first:] = [_unfilled(s, time) for s in made]
                entry = _BLOCK_STATEMENTS.remember(
                    key, (realize, tuple(loops), unseen, made, tuple(self.notes)))
            finally:
                self.notes, found = notes, self.notes
                for message in found:
                    self.note(message)
            return
        _, _, _, made, notes = entry
        self.statements += [_unfilled(s, time) for s in made]
        for message in notes:
            self.note(message)

    def block(self, realize: BlockRealize, loops, conds, time, env, unseen=()) -> None:
        block = realize.block
        context = list(conds)        # conditions on the loops alone
        if realize.predicate != TRUE:
            predicate = self.condition(realize.predicate, env,
                                       f"the predicate of block '{block.name}'")
            context += [predicate] if predicate is not None else []
            if predicate is None:
                unseen = unseen + (substitute(realize.predicate, env),)
        bindings, own, in_domain, keys, determined, loose = block_bindings(
            self.func, realize, loops, env, self.note)
        constraints = context + own + [f"{names.local('k', k)} = {key}"
                                       for k, key in enumerate(keys)]
        common = dict(keys=keys, keys_determined_by=determined and determined[0],
                      keys_given=determined[1] if determined else (), env=env,
                      loose_bindings=loose,
                      exact=not unseen and not keys, unseen=unseen, context=context,
                      bindings=bindings)
        if block.iter_vars or block.name != "root":
            if block.init is not None:
                first, moving = self.first_reduce_values(block, env)
                init_common = common if not moving else \
                    {**common, "exact": False, "unseen": unseen + moving}
                self.statements.append(Statement(
                    names.statement_tuple(block.name, True), block, True, tuple(loops),
                    constraints=constraints + first, time=time + [INIT_SLOT], **init_common))
            self.statements.append(Statement(
                names.statement_tuple(block.name), block, False, tuple(loops),
                constraints=constraints, time=time + [BODY_SLOT], **common))
        # blocks nested in this one are statements of their own, under this block's loops;
        # their constraints are in loop variables (this block's variables are substituted)
        inner_env = {**env, **{iv.var: substitute(v, env)
                               for iv, v in zip(block.iter_vars, realize.iter_values)}}
        # under a binding the model cannot see, which nested instances run is unseen too
        hidden = unseen + tuple(substitute(v, env) for (_, bound, _, _), v
                                in zip(bindings, realize.iter_values) if bound is None)
        if block.init is not None and collect(block.init, BlockRealize):
            self.init_blocks(block, bindings, loops, context + in_domain, time, inner_env,
                             hidden)
        if collect(block.body, BlockRealize):
            if block.name != "root" and _own_accesses(block.body):
                self.note(f"block '{block.name}' has accesses of its own beside nested blocks; "
                          f"the model orders them before the nested blocks")
            self.walk(block.body, loops, context + in_domain, time + [NESTED_SLOT], inner_env,
                      hidden)

    def first_reduce_values(self, block: Block, env) -> tuple[list[str], tuple]:
        """Where the init of `block` runs: each reduce variable at the first value of its
        domain (constraints in isl text), and the first values the model cannot write (a
        domain `(i // n, n)` after fusing the loop its first value moves with, symbolic n):
        there the model lets the init run at any value of that variable, as unseen."""
        first, moving = [], ()
        for iter_var in block.iter_vars:
            if iter_var.kind != "reduce":
                continue
            low = substitute(iter_var.dom.min, env)
            text = to_isl(low)
            if text is None:
                moving += (low,)
            else:
                first.append(f"{isl_name(iter_var.var)} = {text}")
        return first, moving

    def init_blocks(self, block: Block, bindings, loops, conds, time, env, unseen) -> None:
        """The blocks in the init of `block` (TVM's blockize moves a reduction's init there,
        as loops over blocks), as statements of their own: they run where the init runs, at
        the first value of each reduce iteration variable of `block`, after the init's own
        accesses (INIT_SLOT, then 1) and before the body's (BODY_SLOT)."""
        first, hidden = [], []
        for iter_var, bound, lo, _ in bindings:
            if iter_var.kind != "reduce":
                continue
            if bound is None or lo is None:
                hidden.append(iter_var.var)
            else:
                first.append(binding_equals(bound, lo))
        if hidden:
            self.note(f"the init of block '{block.name}' runs at the first value of reduce "
                      f"variables whose bindings are not affine; the model lets its blocks "
                      f"run at any value")
        self.walk(block.init, loops, conds + first,
                  time + [INIT_SLOT, "1"], env, unseen + tuple(hidden))

# (id(realize), its context) -> (realize, loops, unseen: kept alive, statements, notes)
_BLOCK_STATEMENTS = BoundedCache(1 << 11)


def statement_ranges(func: PrimFunc, statement: Statement) -> dict:
    """The values of `statement`'s loops and iteration variables and of `func`'s sizes and
    integer scalars, as `interval` takes them (a variable whose values interval arithmetic
    cannot bound is left out: any value of its type)."""
    loops = [(loop.var, loop.min, loop.extent) for loop in statement.loops]
    ranges = loop_ranges(loops, parameter_ranges(func))
    for iter_var in statement.block.iter_vars:
        found = loop_values(iter_var.dom.min, iter_var.dom.extent, ranges)
        if found is not None:
            ranges[iter_var.var] = found[0]
    return ranges


def _template(statement: Statement) -> Statement:
    """A copy of `statement` as the walk made it, to remember (never filled in)."""
    copy = _copy(statement)
    copy.accesses = []
    return copy


def _unfilled(template: Statement, time: list[str]) -> Statement:
    """A copy of `template` for a model to fill in (its isl objects, its accesses), its time
    vector starting with `time`. The texts the template made once are shared (they depend
    on what the walk set, not on the time vector), and so is what the model fills in: the
    copy's `template` is the first statement of the chain of copies it comes from (an outer
    block remembers copies of the statements its inner blocks remembered)."""
    copy = _copy(template)
    copy.accesses, copy.template = [], template.template or template
    copy.time = time + template.time[len(time):]
    return copy


def _copy(statement: Statement) -> Statement:
    """A shallow copy (`copy.copy` goes through the pickling protocol: ten times slower)."""
    copy = object.__new__(Statement)
    copy.__dict__.update(statement.__dict__)
    return copy


def _own_accesses(body: Stmt) -> bool:
    return bool(collect_accesses(body, lambda _: None))


def _params(func: PrimFunc) -> list[str]:
    found = [isl_name(v) for v in func.symbolic_vars]
    found += [isl_name(p) for p in func.params if isinstance(p, Var)]
    return list(dict.fromkeys(found))


def _exists(variables: list[str], constraints: list[str]) -> str:
    body = " and ".join(constraints) if constraints else "true"
    if not variables:
        return body
    return f"exists ({', '.join(variables)} : {body})"

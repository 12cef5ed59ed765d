"""The polyhedral model of a PrimFunc: statement instances, their order, and what they access.

A statement is a block's body (`S_<block>`) or its init (`I_<block>`). Its instances are named by
the block's iteration variables, `S_C[v_i, v_j, v_k]`, not by loop variables: a schedule
primitive changes loops and bindings but keeps iteration variables, so the instances, and the
dependences between them, stay the same across every step. Only the schedule (instance -> time)
changes, and legality compares the dependences with the new schedule.

- domain: the instances that run, `[n] -> { S_C[v_i, v_j, v_k] : 0 <= v_i < n and ... }`, from
  the loop bounds, the bindings, the iteration domains, `T.where` and `if` conditions; symbolic
  dims are isl parameters, at least 1.
- schedule: instance -> time vector. Each loop adds its variable, each sequence the position of
  the child, so lexicographic order of the vectors is execution order; an init runs just before
  the body of the same instance (a last entry 0 for the init, 1 for the body).
- reads / writes: instance -> buffer element (`B_<buffer>[...]`). An index that isl cannot
  represent (a load, a product of two variables) is over-approximated by the whole dimension, and
  `notes` says so; every answer built on such a model is conservative.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import islpy as isl

from sched.ir.functor import substitute
from sched.ir.nodes import (
    TRUE,
    Allocate,
    Block,
    BlockRealize,
    Expr,
    For,
    IfThenElse,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
)
from sched.polyhedral.isl_expr import isl_name, to_isl, to_isl_condition


def _tuple_name(prefix: str, name: str) -> str:
    return prefix + re.sub(r"\W", "_", name)


@dataclass(frozen=True)
class Loop:
    """A loop enclosing a statement and the position of its variable in the time vector."""

    var: Var
    min: Expr
    extent: Expr
    position: int
    kind: str
    thread_tag: str | None


@dataclass
class Statement:
    """One block body or block init, with its instances and accesses as isl objects."""

    name: str                   # isl tuple name: S_<block> or I_<block>
    block: Block
    is_init: bool
    loops: tuple[Loop, ...]     # enclosing loops, outermost first
    domain: isl.Set = None
    schedule: isl.Map = None
    reads: isl.UnionMap = None
    writes: isl.UnionMap = None
    constraints: list[str] = field(default_factory=list)   # in loop and iteration variables
    time: list[str] = field(default_factory=list)          # the time vector's entries

    @property
    def iter_names(self) -> list[str]:
        return [isl_name(iv.var) for iv in self.block.iter_vars]

    def instance(self) -> str:
        return f"{self.name}[{', '.join(self.iter_names)}]"

    def loop_names(self) -> list[str]:
        return [isl_name(loop.var) for loop in self.loops]


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

    def walk(self, stmt: Stmt, loops: list[Loop], conds: list[str], time: list[str],
             env: dict) -> None:
        if isinstance(stmt, SeqStmt):
            for index, child in enumerate(stmt.stmts):
                self.walk(child, loops, conds, time + [str(index)], env)
        elif isinstance(stmt, For):
            loop = Loop(stmt.loop_var, substitute(stmt.min, env), substitute(stmt.extent, env),
                        len(time), stmt.kind, stmt.thread_tag)
            name = isl_name(stmt.loop_var)
            lo = self.affine(stmt.min, env, f"the start of loop '{stmt.loop_var.name}'")
            extent = self.affine(stmt.extent, env, f"the extent of loop '{stmt.loop_var.name}'")
            bounds = [] if lo is None else [f"{name} >= {lo}"]
            if lo is not None and extent is not None:
                bounds.append(f"{name} < {lo} + {extent}")
            self.walk(stmt.body, loops + [loop], conds + bounds, time + [name], env)
        elif isinstance(stmt, IfThenElse):
            condition = to_isl_condition(substitute(stmt.condition, env))
            if condition is None:
                self.note("an if condition is not affine; both branches are assumed to run")
            then_conds = conds if condition is None else conds + [condition]
            else_conds = conds if condition is None else conds + [f"not ({condition})"]
            self.walk(stmt.then_body, loops, then_conds, time + ["0"], env)
            if stmt.else_body is not None:
                self.walk(stmt.else_body, loops, else_conds, time + ["1"], env)
        elif isinstance(stmt, LetStmt):
            self.walk(stmt.body, loops, conds, time, {**env, stmt.var: stmt.value})
        elif isinstance(stmt, Allocate):
            self.walk(stmt.body, loops, conds, time, env)
        elif isinstance(stmt, BlockRealize):
            self.block(stmt, loops, conds, time, env)

    def block(self, realize: BlockRealize, loops, conds, time, env) -> None:
        block = realize.block
        constraints = list(conds)
        for iter_var, value in zip(block.iter_vars, realize.iter_values):
            name = isl_name(iter_var.var)
            lo = to_isl(iter_var.dom.min)
            extent = to_isl(iter_var.dom.extent)
            if lo is not None and extent is not None:
                constraints.append(f"{lo} <= {name} < {lo} + {extent}")
            bound = self.affine(value, env, f"the binding of '{iter_var.var.name}' in block "
                                f"'{block.name}'")
            if bound is not None:
                constraints.append(f"{name} = {bound}")
        if realize.predicate != TRUE:
            predicate = to_isl_condition(substitute(realize.predicate, env))
            if predicate is None:
                self.note(f"the predicate of block '{block.name}' is not affine")
            else:
                constraints.append(predicate)
        inner_env = {**env, **{iv.var: substitute(v, env)
                               for iv, v in zip(block.iter_vars, realize.iter_values)}}
        if block.iter_vars or block.name != "root":
            if block.init is not None:
                init_constraints = constraints + [
                    f"{isl_name(iv.var)} = {to_isl(iv.dom.min)}"
                    for iv in block.iter_vars if iv.kind == "reduce"]
                self.statements.append(Statement(
                    _tuple_name("I_", block.name), block, True, tuple(loops),
                    constraints=init_constraints, time=time + ["0"]))
            self.statements.append(Statement(
                _tuple_name("S_", block.name), block, False, tuple(loops),
                constraints=constraints, time=time + ["1"]))
        # blocks nested in this one are statements of their own, under this block's loops
        self._nested_blocks(block.body, loops, constraints, time + ["2"], inner_env)

    def _nested_blocks(self, stmt: Stmt, loops, conds, time, env) -> None:
        from sched.ir.functor import collect

        if not collect(stmt, BlockRealize):
            return
        self.walk(stmt, loops, conds, time, env)


def _params(func: PrimFunc) -> list[str]:
    names = [isl_name(v) for v in func.symbolic_vars]
    names += [isl_name(p) for p in func.params if isinstance(p, Var)]
    return names


def _exists(names: list[str], constraints: list[str]) -> str:
    body = " and ".join(constraints) if constraints else "true"
    if not names:
        return body
    return f"exists ({', '.join(names)} : {body})"


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

    @property
    def is_exact(self) -> bool:
        return not self.notes

    def statements_of_block(self, name: str) -> list[Statement]:
        return [s for s in self.statements.values() if s.block.name == name]


def _access_relations(walker: _Walker, statement: Statement, params: str) -> tuple:
    """The reads and writes of one statement as union maps to `B_<buffer>[...]`."""
    from sched.polyhedral.accesses import collect_accesses

    body = statement.block.init if statement.is_init else statement.block.body
    reads = writes = isl.UnionMap(f"{params} {{ }}")
    for access in collect_accesses(body, walker.note):
        text = f"{params} {{ {statement.instance()} -> {access.to_isl()} }}"
        relation = isl.UnionMap(text).intersect_domain(isl.UnionSet.from_set(statement.domain))
        if access.is_write:
            writes = writes.union(relation)
        else:
            reads = reads.union(relation)
    return reads, writes


def build_model(func: PrimFunc) -> PolyModel:
    """The polyhedral model of `func`. Blocks without iteration variables still count as
    statements (one instance each), except the root block."""
    walker = _Walker(func)
    walker.walk(func.body, [], [], [], {})
    params = _params(func)
    param_text = f"[{', '.join(params)}] ->"
    width = max((len(s.time) for s in walker.statements), default=1)
    # a symbolic dim is a size: at least 1 (an empty tensor has nothing to order)
    dims = [isl_name(v) for v in func.symbolic_vars]
    positive_dims = isl.Set(f"{param_text} {{ : {' and '.join(f'{d} >= 1' for d in dims)} }}"
                            if dims else f"{param_text} {{ : }}")
    empty = isl.UnionMap(f"{param_text} {{ }}")
    domain, schedule, reads, writes = isl.UnionSet(f"{param_text} {{ }}"), empty, empty, empty
    for statement in walker.statements:
        loops = statement.loop_names()
        statement.domain = isl.Set(f"{param_text} {{ {statement.instance()} : "
                                   f"{_exists(loops, statement.constraints)} }}") \
            .intersect_params(positive_dims)
        statement.time = statement.time + ["0"] * (width - len(statement.time))
        statement.schedule = isl.Map(
            f"{param_text} {{ {statement.instance()} -> [{', '.join(statement.time)}] : "
            f"{' and '.join(statement.constraints) or 'true'} }}")
        statement.reads, statement.writes = _access_relations(walker, statement, param_text)
        domain = domain.union(isl.UnionSet.from_set(statement.domain))
        schedule = schedule.union(isl.UnionMap.from_map(statement.schedule))
        reads, writes = reads.union(statement.reads), writes.union(statement.writes)
    statements = {s.name: s for s in walker.statements}
    return PolyModel(func, statements, params, domain, schedule.coalesce(), reads.coalesce(),
                     writes.coalesce(), walker.notes)


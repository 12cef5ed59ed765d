"""transform_block_layout: give a block new iteration variables, a function of the old ones,
and loops over them.

    sch.transform_block_layout(block, lambda i, j: (j, i))        # loops interchanged
    sch.transform_block_layout(block, lambda i: (15 - i,))        # stores at its variable again

The new variables are `w = index_map(v)`; the body uses `v = index_map⁻¹(w)`, the inverse isl
computes; the loops that held only the block are replaced by loops over the image of the map.
Requires the loops to run each instance of the block once (the new loops run each once), and
the map to be affine and injective on the instances the block runs, with an image that is a
box. The new order is checked like any reorder:
the block's new schedule, read back on its old instances through the map, must keep every
dependence of the function.
"""

from __future__ import annotations

import dataclasses

import islpy as isl

from sched.errors import ScheduleError
from sched.ir.dtype import max_value, min_value
from sched.ir.functor import IRMutator, free_vars, substitute
from sched.ir.names import fresh
from sched.ir.nodes import (
    TRUE,
    BlockRealize,
    BufferLoad,
    BufferStore,
    Expr,
    For,
    IntImm,
    IterVar,
    PrimFunc,
    Range,
    Var,
    const,
    is_constant,
)
from sched.ir.simplify import simplify
from sched.polyhedral import build_model
from sched.polyhedral.dependences import first_runs
from sched.polyhedral.isl_expr import (
    NotAffine,
    isl_name,
    pw_aff_to_expr,
    to_isl,
    to_isl_comparison,
)
from sched.polyhedral.isl_text import read_map, read_set
from sched.polyhedral.legality import check_schedule, schedule_error
from sched.schedule.base import BlockRV, ScheduleBase
from sched.schedule.layout import IndexMap
from sched.schedule.scope import taken_names
from sched.schedule.state import find_block, path_to, replace

PRIMITIVE = "transform_block_layout"


def transform_block_layout(func: PrimFunc, block_name: str, index_map,
                           render: bool = True) -> PrimFunc:
    """`func` with block `block_name` iterating over `index_map` of its variables (see
    Schedule.transform_block_layout)."""
    realize = find_block(func, block_name, PRIMITIVE)
    block = realize.block
    if block.iter_vars and _is_identity(index_map, block):
        return func          # nothing changes (TVM's normalize_prim_func maps every block)
    kinds = _new_kinds(index_map, block)
    if kinds is None:
        raise ScheduleError(PRIMITIVE, f"block {block_name!r} has reduce, scan or opaque "
                            f"variables: transform_block_layout changes spatial blocks, and "
                            f"of the others only reorders their variables or drops those of "
                            f"one iteration (`lambda b, i, k: (i, k)` where b has extent 1, "
                            f"as TVM's normalize_prim_func does)")
    if realize.predicate != TRUE or not block.iter_vars:
        raise ScheduleError(PRIMITIVE, f"block {block_name!r} runs under a predicate or has "
                            f"no iteration variable: its instances are not its loops' box")
    chain = _loops_holding_only(func, realize)
    loop_vars = {lp.loop_var for lp in chain}
    used = {v for value in realize.iter_values for v in free_vars(value)}
    if not chain or not loop_vars <= used or used & _outer_loop_vars(func, chain) - loop_vars:
        marked = _marked_loop_around(func, realize, chain)
        if marked is not None:         # (audit helper-133: the message named the bindings)
            raise ScheduleError(PRIMITIVE, f"loop {marked.loop_var.name!r} around block "
                                f"{block_name!r} is {_kind_text(marked)}: "
                                f"transform_block_layout rebuilds serial loops only; "
                                f"transform the block first, then mark the new loops")
        raise ScheduleError(PRIMITIVE, f"block {block_name!r} must be bound by the loops that "
                            f"hold it alone (each used, no other loop in its bindings)")
    mapping = _index_map(index_map, block)
    mapping = IndexMap(tuple(iv.var for iv in block.iter_vars),
                       mapping(*[iv.var for iv in block.iter_vars]))
    # each new variable in its expression's dtype (an int64 one beside int32 ones keeps its
    # width; all took the first old variable's dtype: audit helper-117)
    dtypes = [result.dtype for result in mapping.results]
    domain = _domain(func, block_name)
    taken = taken_names(func)
    new_vars = [Var(fresh(f"v{k}", taken), dtype) for k, dtype in enumerate(dtypes)]
    loops = [Var(fresh(f"ax{k}", taken), dtype) for k, dtype in enumerate(dtypes)]
    sizes = {isl_name(v): v for v in func.symbolic_vars}
    sizes |= {isl_name(p): p for p in func.params if isinstance(p, Var)}
    relation, box, ranges = _relation(mapping, domain, block_name,
                                      [isl_name(v) for v in new_vars], sizes, dtypes)
    inverse = relation.reverse().as_pw_multi_aff()
    names = sizes | {isl_name(var): var for var in new_vars}
    old_of_new = {iv.var: pw_aff_to_expr(inverse.get_pw_aff(k), box, names, iv.var.dtype)
                  for k, iv in enumerate(block.iter_vars)}
    iter_vars = tuple(IterVar(v, Range(low, extent), kind)
                      for v, (low, extent), kind in zip(new_vars, ranges, kinds))
    rewrite = _Rewrite(old_of_new, box, names)
    new_block = dataclasses.replace(
        block, iter_vars=iter_vars, body=rewrite.visit(block.body),
        init=rewrite.visit(block.init) if block.init is not None else None,
        reads=tuple(rewrite.visit(r) for r in block.reads),
        writes=tuple(rewrite.visit(r) for r in block.writes))
    values = tuple(var if is_constant(low, 0) else var + low
                   for var, (low, _) in zip(loops, ranges))
    stmt = BlockRealize(values, TRUE, new_block)
    for var, (_, extent) in reversed(list(zip(loops, ranges))):
        stmt = For(var, const(0, var.dtype), extent, "serial", stmt)
    new_func = replace(func, chain[0], stmt)
    violation = _check(func, new_func, block_name, relation)
    if violation is not None:
        raise schedule_error(PRIMITIVE, violation, func, render=render)
    return new_func


def _new_kinds(index_map, block) -> list[str] | None:
    """The kinds of the new iteration variables: all spatial for a spatial block; for another
    (a reduction), those of the old variables the map selects, where it only reorders them or
    drops some of extent 1 (the instances and each one's reduction then stay as they are);
    None for any other map of a block that is not spatial."""
    if not block.iter_vars:
        return []                     # refused below: no instance to relay
    if block.init is None and all(iv.kind == "spatial" for iv in block.iter_vars):
        return ["spatial"] * _arity(index_map, block)
    own = [iv.var for iv in block.iter_vars]
    try:
        results = _index_map(index_map, block)(*own)
    except (ScheduleError, ValueError):
        return None
    if len(set(results)) != len(results) or not all(r in own for r in results):
        return None
    kept = {own.index(r) for r in results}
    if any(not (isinstance(iv.dom.extent, IntImm) and iv.dom.extent.value == 1)
           for k, iv in enumerate(block.iter_vars) if k not in kept):
        return None
    return [block.iter_vars[own.index(r)].kind for r in results]


def _arity(index_map, block) -> int:
    """How many indices `index_map` gives for the block's variables."""
    return len(_index_map(index_map, block).results)


def _index_map(index_map, block) -> IndexMap:
    """`index_map` (a function of the block's iteration variables) as an IndexMap."""
    return IndexMap.from_callable(index_map, len(block.iter_vars),
                                  block.iter_vars[0].var.dtype, primitive=PRIMITIVE, of="block")


def _is_identity(index_map, block) -> bool:
    """Whether `index_map` gives the block's iteration variables back, in their order."""
    own = tuple(iv.var for iv in block.iter_vars)
    try:
        return tuple(simplify(r) for r in _index_map(index_map, block)(*own)) == own
    except (ScheduleError, ValueError):
        return False                      # another arity: the general path says why


def _loops_holding_only(func: PrimFunc, realize: BlockRealize) -> list[For]:
    """The perfectly nested serial loops right around `realize`, outermost first."""
    path = path_to(func.body, realize) or []
    chain: list[For] = []
    child = realize
    for node in reversed(path):
        if not (isinstance(node, For) and node.body is child and node.kind == "serial"
                and not node.annotations):
            break
        chain.insert(0, node)
        child = node
    return chain


def _marked_loop_around(func: PrimFunc, realize: BlockRealize, chain: list[For]
                        ) -> For | None:
    """The loop right around the serial `chain` (around `realize`), holding only it, that is
    not serial or carries annotations, or None."""
    path = path_to(func.body, chain[0] if chain else realize) or []
    child = chain[0] if chain else realize
    loop = path[-1] if path else None
    if isinstance(loop, For) and loop.body is child and \
            (loop.kind != "serial" or loop.annotations):
        return loop
    return None


def _kind_text(loop: For) -> str:
    if loop.kind == "thread_binding":
        return f"bound to {loop.thread_tag}"
    return loop.kind if loop.kind != "serial" else "annotated"


def _outer_loop_vars(func: PrimFunc, chain: list[For]) -> set[Var]:
    path = path_to(func.body, chain[0]) or []
    return {node.loop_var for node in path if isinstance(node, For)}


def _domain(func: PrimFunc, block_name: str) -> isl.Set:
    statements = [s for s in build_model(func).statements_of_block(block_name)
                  if not s.is_init]
    if len(statements) != 1 or not statements[0].exact:
        raise ScheduleError(PRIMITIVE, f"the instances of block {block_name!r} are not known "
                            f"exactly (a non-affine binding)")
    if not statements[0].runs_once:
        raise ScheduleError(PRIMITIVE, f"the loops of block {block_name!r} run some of its "
                            f"instances more than once (several loop points bind one "
                            f"instance), and the new loops would run each once, changing the "
                            f"result; bind the block's variables one to one to its loops first")
    return statements[0].domain


def _relation(mapping: IndexMap, domain: isl.Set, block_name: str, outputs: list[str],
              sizes: dict[str, Var], dtypes: list[str]):
    """{ S[v] -> [w] : w = index_map(v) } on the block's instances, the box of its image (dims
    named `outputs`) and the box's (start, extent) per dim, expressions of the symbolic dims
    `sizes` where the image is (`lambda i, j: (j, i)` over `(n, 6)` runs `ax1 < n`); refuses
    a map that is not affine, injective or onto a box."""
    names = domain.get_var_names(isl.dim_type.set)
    renamed = {var: Var(name, var.dtype) for var, name in zip(mapping.params, names)}
    texts = [to_isl(substitute(r, renamed)) for r in mapping.results]
    if any(t is None for t in texts):
        raise ScheduleError(PRIMITIVE, f"the index map {mapping!r} is not affine")
    params = ", ".join(domain.get_space().get_var_names(isl.dim_type.param))
    relation = read_map(f"[{params}] -> {{ {domain.get_tuple_name()}[{', '.join(names)}] -> "
                       f"[{', '.join(outputs)}] : "
                       f"{' and '.join(f'{o} = {t}' for o, t in zip(outputs, texts))} }}"
                       ).intersect_domain(domain)
    if not relation.is_injective():
        raise ScheduleError(PRIMITIVE, f"the index map {mapping!r} sends two instances of "
                            f"block {block_name!r} to one: it must be injective")
    image = relation.range()
    context = image.params()
    bounds, ranges = [], []
    for k, name in enumerate(outputs):
        low, high = (_bound(image, k, context, sizes, dtypes[k], end)
                     for end in (False, True))
        texts = (to_isl_comparison(name, ">=", low), to_isl_comparison(name, "<=", high))
        if low is None or high is None or None in texts:
            raise ScheduleError(PRIMITIVE, f"the image of the index map {mapping!r} has no "
                                f"affine bounds ({image})")
        bounds += texts
        ranges.append((low, simplify(high - low + 1)))
    box = read_set(f"[{params}] -> {{ [{', '.join(outputs)}] : {' and '.join(bounds)} }}")
    if not image.is_equal(box):
        raise ScheduleError(PRIMITIVE, f"the image of the index map {mapping!r} is {image}, "
                            f"not a box: loops over it would run points that are no instance "
                            f"of block {block_name!r}")
    return relation, box, ranges


def _bound(image: isl.Set, k: int, context: isl.Set, sizes: dict[str, Var], dtype: str,
           end: bool) -> Expr | None:
    """The least (greatest, `end`) value of dim `k` of `image`: a constant, or an expression
    of the symbolic dims `sizes` where the image is not empty; None where isl finds none."""
    found = image.dim_max(k) if end else image.dim_min(k)
    if found.is_cst() and found.n_piece() == 1:
        value = (image.dim_max_val(k) if end else image.dim_min_val(k))
        if value.is_int() and not min_value(dtype) <= value.to_python() <= max_value(dtype):
            raise ScheduleError(PRIMITIVE, f"the new iteration variable {k} takes the value "
                                f"{value.to_python()}, past {dtype}: map int64 variables "
                                f"(T.int64 domains) to build one so")   # (helper-129)
        return const(value.to_python(), dtype) if value.is_int() else None
    try:
        return simplify(pw_aff_to_expr(found, context, sizes, dtype))
    except NotAffine:
        return None


def _check(func: PrimFunc, new_func: PrimFunc, block_name: str, relation: isl.Map):
    """The new order, with the block's new instances read back as its old ones."""
    new_model = build_model(new_func)
    schedule = None
    for statement in new_model.statements.values():
        own = statement.schedule
        if statement.block.name == block_name:
            # old instances (of the update, or of the init: the same variables) -> new ones
            tuple_name = statement.domain.get_tuple_name()
            named = relation.set_tuple_name(isl.dim_type.out, tuple_name) \
                .set_tuple_name(isl.dim_type.in_, tuple_name)
            own = named.apply_range(own)
        own = isl.UnionMap.from_map(own)
        schedule = own if schedule is None else schedule.union(own)
    return check_schedule(func, first_runs(schedule))


class _Rewrite(IRMutator):
    """The old variables replaced by their values in the new ones; buffer indices and region
    bounds simplified by isl over the new domain (`7 - (7 - v0)` is `v0`)."""

    def __init__(self, values: dict[Var, Expr], box: isl.Set, names: dict[str, Var]) -> None:
        self.values, self.box, self.names = values, box, names
        params = box.get_space().get_var_names(isl.dim_type.param)
        self.params = ", ".join(params)
        self.dims = ", ".join(box.get_var_names(isl.dim_type.set))
        self.known = set(params) | set(box.get_var_names(isl.dim_type.set))

    def index(self, expr: Expr) -> Expr:
        expr = substitute(expr, self.values)
        text = to_isl(expr)
        # an index that also uses the loops or the nested blocks' variables inside the block
        # is not a function on the box: simplified without it
        if text is None or any(isl_name(v) not in self.known for v in free_vars(expr)):
            return simplify(expr)
        aff = isl.PwAff(f"[{self.params}] -> {{ [{self.dims}] -> [({text})] }}")
        return pw_aff_to_expr(aff, self.box, self.names)

    def visit_Var(self, var: Var):
        return self.values.get(var, var)

    def visit_BufferLoad(self, node: BufferLoad):
        return BufferLoad(node.buffer, tuple(self.index(i) for i in node.indices))

    def visit_BufferStore(self, node: BufferStore):
        return BufferStore(node.buffer, self.visit(node.value),
                           tuple(self.index(i) for i in node.indices))

    def visit_Range(self, node: Range):
        return Range(self.index(node.min), simplify(substitute(node.extent, self.values)))


class BlockLayoutPrimitives(ScheduleBase):
    """transform_block_layout."""

    def transform_block_layout(self, block: BlockRV, index_map) -> None:
        """Give a spatial block the iteration variables `index_map(v)` of its old ones `v`,
        with new loops (`ax0`, `ax1`...) over them in place of the loops that held it alone.

        Requires: the block is spatial, without predicate, bound by the perfectly nested serial
        loops that hold it alone, each instance by one loop point (the new loops run each
        once); the map is affine and injective on its instances, onto a box; the new order
        keeps every dependence (polyhedral/ checks).

        Arguments: `block` a block handle; `index_map` a function of the block's iteration
        variables (`lambda i, j: (j, i)`), as for transform_layout.
        Returns: nothing. Handles: `block` stays valid; its old loops go.
        Also known as: `transform_block_layout` in TVM.

        >>> import sched
        >>> from sched.script import T
        >>> @T.prim_func
        ... def flip(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        ...     for i in range(8):
        ...         with T.block("B"):
        ...             vi = T.axis.spatial(8, i)
        ...             B[7 - vi] = A[vi]
        >>> sch = sched.Schedule(flip)
        >>> sch.transform_block_layout(sch.get_block("B"), lambda vi: (7 - vi,))
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def flip(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
            with T.block("root"):
                for ax0 in range(8):
                    with T.block("B"):
                        v0 = T.axis.remap("S", [ax0])
                        T.reads(A[7 - v0])
                        T.writes(B[v0])
                        B[v0] = A[7 - v0]
        """
        name = self._block(block, PRIMITIVE)
        new_func = transform_block_layout(self._func, name, index_map, self.render_errors)
        realize = find_block(self._func, name, PRIMITIVE)
        self._record(PRIMITIVE, new_func, (block, _index_map(index_map, realize.block)))

"""Reduction primitives: decompose_reduction (here) and rfactor (its pure functions in
rfactor.py).

Each is a pure function `(func, names, arguments) -> (new func, new block name)`;
`ReductionPrimitives` at the end wraps them as Schedule methods with handles, docs and the trace.

decompose_reduction moves a block's init into a block of its own before a loop; polyhedral/
checks that the moved init still runs before every access that followed it and after every one
that preceded it. rfactor splits an associative reduction in two: partial results indexed by one
reduce loop, which becomes spatial (so it can run in parallel), then their combination.
"""

from __future__ import annotations

import dataclasses

import islpy as isl

from sched.ir.functor import collect, free_vars
from sched.ir.names import fresh
from sched.ir.nodes import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    PrimFunc,
    Var,
)
from sched.ir.regions import infer_block_regions
from sched.polyhedral import build_model
from sched.polyhedral.dependences import dependences_where
from sched.polyhedral.first_run_flows import first_runs_stand_for_runs
from sched.polyhedral.legality import (
    Violation,
    check_new_order,
    check_schedules,
    schedule_error,
    unmodelled_domain_change,
)
from sched.polyhedral.pairs import nest_domain
from sched.polyhedral.runs import repeated_instance, runs_are_idempotent
from sched.schedule.base import BlockRV, LoopRV, ScheduleBase
from sched.schedule.blockized_init import hoist_nested_init, init_copy_nest, nested_init
from sched.schedule.reduction_runs import check_init_of_spatial_variables, check_reduction_runs_once
from sched.schedule.rfactor import rfactor
from sched.schedule.scope import (
    block_names,
    loop_roles,
    refusal,
    scope_of,
    splice,
    taken_names,
)
from sched.schedule.state import find_block, find_loop, replace, replace_in


def decompose_reduction(func: PrimFunc, block_name: str, loop_name: str,
                        render: bool = True) -> tuple[PrimFunc, str, str]:
    """Hoist the init of block `block_name` before loop `loop_name` (see
    Schedule.decompose_reduction). Returns the new function, the init block's name and the
    update block's (`<name>_init`, `<name>_update`, as TVM names them)."""
    primitive = "decompose_reduction"
    realize = find_block(func, block_name, primitive)
    loop = find_loop(func, loop_name, primitive)
    block = realize.block
    scope = scope_of(func, realize, primitive)
    names = [lp.loop_var.name for lp in scope.loops]
    if not any(lp is loop for lp in scope.loops):
        raise refusal(primitive, f"loop {loop_name!r} is not around block {block_name!r}; the "
                      f"loops around it are {', '.join(names) or 'none'}", func, loop_name, render)
    if not any(iv.kind == "reduce" for iv in block.iter_vars):
        raise refusal(primitive, f"block {block_name!r} is not a reduction: it has no reduce "
                      f"iteration variable", func, None, render)
    nested = nested_init(block) if block.init is None else None
    if block.init is None and nested is None:
        raise refusal(primitive, f"block {block_name!r} has no init (T.init) to decompose; was "
                      f"it decomposed already?", func, None, render)
    # the init's own block: the nested one of a blockized reduction (helper-97)
    check_init_of_spatial_variables(func, block if block.init is not None else nested.block,
                                    primitive, render)
    position = names.index(loop_name)
    roles = loop_roles(realize, scope.loops)
    outer = [n for n, lp in zip(names[:position], scope.loops) if "reduce" in roles[lp.loop_var]]
    if outer:
        legal = names[:names.index(outer[0]) + 1]
        raise refusal(primitive, f"loop {loop_name!r} is inside the reduce loop(s) "
                      f"{', '.join(outer)} of block {block_name!r}: the init would run again in "
                      f"every iteration of them", func, loop_name, render,
                      tuple(f"sch.decompose_reduction({block_name}, {n})" for n in legal))
    # the loops outside `loop` (none of them a reduce loop) hold the init too: the question
    # is asked of one iteration of them, where their variables are fixed (a loop that binds
    # no variable, or a tile loop, repeats the whole reduction where compute_at recomputed
    # it: each run starts at the init, as the undecomposed block does; audit helper-134)
    check_reduction_runs_once(func, realize, scope.loops, primitive, render,
                              every_point=False, fixed=position)
    if nested is not None:       # a blockized reduction: its nested block's init (TVM's form)
        new_func, init_name, inner_init = hoist_nested_init(func, realize, nested, loop,
                                                            scope.loops[position:])
        violation = _check_init_moved(func, new_func, nested.block.name, inner_init,
                                      wrappers=(init_name,))
        moved = (inner_init, block_name)
    else:
        new_func, init_name = _hoist_init(func, realize, loop, scope.loops[position:])
        violation = _check_init_moved(func, new_func, block_name, init_name)
        moved = (init_name, block_name)
    violation = violation or _reruns_unproven(new_func, moved)
    if violation is not None:
        raise schedule_error(primitive, violation, func, loop=loop_name, render=render)
    # checked with the update under its old name (the dependences are by block name); then
    # renamed as TVM names it
    update_name = fresh(f"{block_name}_update", block_names(new_func))
    update = find_block(new_func, block_name, primitive)
    renamed = dataclasses.replace(update, block=dataclasses.replace(update.block,
                                                                    name=update_name))
    return replace(new_func, update, renamed), init_name, update_name


def _hoist_init(func: PrimFunc, realize: BlockRealize, loop: For,
                inner_loops) -> tuple[PrimFunc, str]:
    """The init block, under copies of the loops of `inner_loops` that its spatial bindings
    use, spliced in before `loop`; the block keeps its update (TVM's DecomposeReduction,
    steps 1 to 6; the caller renames it)."""
    block = realize.block
    spatial = [(iv, value) for iv, value in zip(block.iter_vars, realize.iter_values)
               if iv.kind == "spatial"]
    init_name = fresh(f"{block.name}_init", block_names(func))
    iter_vars = tuple(iv for iv, _ in spatial)
    reads, writes = infer_block_regions(block.init, None, iter_vars)
    outside = {iv.var for iv in iter_vars} | set(func.symbolic_vars) | {
        p for p in func.params if isinstance(p, Var)}
    if collect(block.init, BlockRealize) and _in_variables(block.writes, outside):
        # an init holding blocks (TVM's blockize): the inferred regions relax the nested
        # blocks' variables over their whole domains; the block's declared writes of the
        # buffers the init stores to cover theirs
        stored = {store.buffer.name for store in collect(block.init, BufferStore)}
        writes = tuple(r for r in block.writes if r.buffer.name in stored)
    init_block = Block(init_name, iter_vars, reads, writes, block.init,
                       annotations=block.annotations)
    nest = init_copy_nest(init_block, spatial, realize.predicate, list(inner_loops), set(),
                          taken_names(func))
    update = dataclasses.replace(realize, block=dataclasses.replace(block, init=None))
    return splice(func, loop, [nest, replace_in(loop, realize, update)]), init_name


def _in_variables(regions, allowed: set) -> bool:
    """Whether `regions` name no variable outside `allowed`."""
    return all(set(free_vars(r.min)) | set(free_vars(r.extent)) <= allowed
               for region in regions for r in region.region)


def _same_other_domains(old_model, new_model, old_left_out: set, new_left_out: set) -> bool:
    """Whether the statements of the two models other than those left out are the same, with
    the same instances: compared statement by statement, by their domains' text first (the
    equality of the whole functions' domains took 6 s where a cooperative fetch's domain keeps
    divisions as existentials)."""
    old = {n: s for n, s in old_model.statements.items() if n not in old_left_out}
    new = {n: s for n, s in new_model.statements.items() if n not in new_left_out}
    return old.keys() == new.keys() and all(
        old[n].domain_texts == new[n].domain_texts or old[n].domain.is_equal(new[n].domain)
        for n in old)


def _reruns_unproven(func: PrimFunc, names: tuple[str, ...]) -> Violation | None:
    """Where the init or the update block of a decomposed reduction runs some instance more
    than once (the reduction was recomputed), whether the first runs stand for the others
    (RUNS_RULE: runs.py, first_run_flows.py), which the order checks assume."""
    model = build_model(func)
    for name in names:
        for statement in model.statements_of_block(name):
            if not (statement.runs_once or runs_are_idempotent(model, statement)
                    or first_runs_stand_for_runs(model, name)):
                return Violation(f"block {name!r} would run some instances more than once "
                                 f"({repeated_instance(statement)} among them), and a later "
                                 f"run may not compute what the first did")
    return None


def _check_init_moved(func: PrimFunc, new_func: PrimFunc, block_name: str,
                      init_name: str, wrappers: tuple[str, ...] = ()) -> Violation | None:
    """Whether the init block of `new_func` runs the instances of `func`'s init (one per
    element) in an order that keeps every dependence of `func`. `wrappers`: new blocks with
    no accesses of their own around the init block (left out of the comparison)."""
    old_model = build_model(func)
    new_model = build_model(new_func)
    unseen = unmodelled_domain_change(old_model, new_model)
    if unseen is not None:
        return Violation(unseen)
    wrapped = set()
    for wrapper in wrappers:
        for statement in new_model.statements_of_block(wrapper):
            assert not statement.accesses, "a wrapper block has no accesses of its own"
            wrapped.add(statement.name)
    (old_init,) = [s for s in old_model.statements_of_block(block_name) if s.is_init]
    (new_init,) = new_model.statements_of_block(init_name)
    params = f"[{', '.join(old_model.params)}] -> "
    moved = isl.UnionMap(f"{params}{{ {old_init.instance()} -> {new_init.instance()} }}")
    old_domain = isl.UnionSet.from_set(old_init.domain)
    if not (_same_other_domains(old_model, new_model, {old_init.name},
                                {new_init.name} | wrapped)
            and old_domain.apply(moved).is_equal(isl.UnionSet.from_set(new_init.domain))):
        return Violation(f"the init block would not run once for each element the init of "
                         f"{block_name!r} initializes: {new_init.domain} instead of "
                         f"{old_domain.apply(moved)}")
    if old_init.dim_names == new_init.dim_names:
        # the new init's runs stand for the old init's instances (the same dims): pair by pair
        statements = {name: s for name, s in new_model.statements.items()
                      if name != new_init.name}
        statements[old_init.name] = dataclasses.replace(new_init, name=old_init.name)
        return check_new_order(func, statements)
    # the old init's instances (one per reduce value too) run when the new init runs their
    # element: the dependences of the init on that schedule, the others pair by pair
    def touches_init(source, sink) -> bool:
        return old_init.name in (source.name, sink.name)
    of_init = dependences_where(func, touches_init, old_model)
    violation = check_new_order(func, new_model.statements,
                                keep=lambda source, sink: not touches_init(source, sink))
    if violation is not None:
        return violation
    # every instance has a time (the domains were compared above): each statement's own
    # instances stand for its schedule's domain (as boxes where counted, pairs.nest_domain)
    moved_schedule = isl.Map.from_union_map(moved).apply_range(new_init.schedule)
    schedules = {old_init.name: (moved_schedule, tuple(new_init.time), _instances(old_init))}
    for name in {n for d in of_init for n in (d.source.name, d.sink.name)} - {old_init.name}:
        statement = new_model.statements[name]
        schedules[name] = (statement.schedule, tuple(statement.time), _instances(statement))
    return check_schedules(schedules, of_init)


def _instances(statement) -> isl.Set:
    return nest_domain(statement.nest_text(), statement.domain_texts[1])


class ReductionPrimitives(ScheduleBase):
    """decompose_reduction, rfactor."""

    def decompose_reduction(self, block: BlockRV, loop: LoopRV) -> BlockRV:
        """Move the init of a reduction block into a block of its own, `<name>_init`, right
        before `loop`; the reduction block keeps only its update and is renamed
        `<name>_update` (TVM's names; a fresh suffix if the name is taken).

        Requires: `block` is a reduction with an init (`T.init`); `loop` is around it and not
        inside any loop that binds a reduce iteration variable (the init must run once per
        output element); the moved init keeps every dependence (polyhedral/ checks). The init
        block gets copies (`<loop>_init`) of the loops at or inside `loop` that its spatial
        bindings use; the others are dropped with the parts of the predicate that use them.
        A blockized reduction (`blockize` keeps the init in the nested block) decomposes as
        TVM's blockize + decompose_reduction do: `<outer>_init`, holding copies of the inner
        loops and `<inner>_init` (sched/schedule/blockized_init.py).

        Arguments: `block` a block handle; `loop` a loop handle around it.
        Returns: a handle to the init block. Handles stay valid: a handle to the reduction
        block now names `<name>_update` (`sch.get_block("<name>")` no longer finds it).
        Also known as: `decompose_reduction` in TVM; Halide writes the init as the pure
        definition and the update as an update definition from the start.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((4, 6), name="A")
        >>> k = te.reduce_axis((0, 6), name="k")
        >>> B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]))
        >>> i, k = sch.get_loops(sch.get_block("B"))
        >>> init = sch.decompose_reduction(sch.get_block("B"), i)
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((4, 6), "float32"), B: T.Buffer((4,), "float32")):
            with T.block("root"):
                for i_init in range(4):
                    with T.block("B_init"):
                        v_i = T.axis.remap("S", [i_init])
                        T.reads()
                        T.writes(B[v_i])
                        B[v_i] = T.float32(0.0)
                for i, k in T.grid(4, 6):
                    with T.block("B_update"):
                        v_i, v_k = T.axis.remap("SR", [i, k])
                        T.reads(A[v_i, v_k], B[v_i])
                        T.writes(B[v_i])
                        B[v_i] = B[v_i] + A[v_i, v_k]
        """
        block_name = self._block(block, "decompose_reduction")
        loop_name = self._loop(loop, "decompose_reduction")
        new_func, init_name, update_name = decompose_reduction(self._func, block_name, loop_name,
                                                               self.render_errors)
        handle = BlockRV(init_name, self._new_rv("b"))
        generation = self._current_generation("block", block_name)
        self._record("decompose_reduction", new_func, (block, loop), outputs=(handle,))
        self._note_renamed("block", block_name, generation, update_name)
        return handle

    def rfactor(self, loop: LoopRV, factor_axis: int) -> BlockRV:
        """Factor a reduction over reduce loop `loop`: a block `<name>_rf` computes partial
        results into a new buffer `<buffer>_rf`, indexed by `loop`, which becomes a spatial loop
        (it can then be parallelized, vectorized or bound to threads); the original block,
        under copies of the spatial loops and of `loop`, combines them.

        Requires: `loop` holds one block, a reduction whose body is an associative update
        `X[i] = X[i] op value` (op one of +, *, min, max; `value` does not read X), or an
        argmax/argmin over two buffers (index, value) as TVM writes it (tuple_reducers.py;
        one `<buffer>_rf` per buffer; a first-wins `>=`/`<=` form only over the outermost
        reduce loop, a smallest-index-on-ties form over any; over floats only the first-wins
        form that keeps a NaN it holds, `val >= v or val != val`: a NaN takes the others out
        of order); `loop` binds reduce iteration
        variables only, and no loop binds both kinds. The partial results start from op's
        identity (a float sum's is -0.0, so that a sum of -0.0 stays -0.0; argmax/argmin:
        from the block's init); the combining block keeps the
        original init, and a predicate where the partial results of a non-dividing split do
        not all exist.

        Arguments: `loop` a reduce loop handle (typically the inner or outer part of a split
        reduce loop); `factor_axis` where the new dimension goes in `<buffer>_rf`, in
        [-(ndim + 1), ndim] (negative counts from the end).
        Returns: a handle to the `<name>_rf` block. The handle of the original block now
        names the combining block; loop handles stay valid (they are the `_rf` block's loops).
        Also known as: `rfactor` in TVM and Halide.

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((4, 6), name="A")
        >>> k = te.reduce_axis((0, 6), name="k")
        >>> B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]))
        >>> i, k = sch.get_loops(sch.get_block("B"))
        >>> ko, ki = sch.split(k, factors=[None, 2])
        >>> rf = sch.rfactor(ki, factor_axis=0)
        >>> print(sch.func.script())  # doctest: +NORMALIZE_WHITESPACE
        # from sched.script import T
        <BLANKLINE>
        @T.prim_func
        def main(A: T.Buffer((4, 6), "float32"), B: T.Buffer((4,), "float32")):
            with T.block("root"):
                B_rf = T.alloc_buffer((2, 4), "float32")
                for i, k_0, k_1 in T.grid(4, 3, 2):
                    with T.block("B_rf"):
                        v_k_1, v_i, v_k_0 = T.axis.remap("SSR", [k_1, i, k_0])
                        T.reads(A[v_i, v_k_0 * 2 + v_k_1], B_rf[v_k_1, v_i])
                        T.writes(B_rf[v_k_1, v_i])
                        with T.init():
                            B_rf[v_k_1, v_i] = T.float32(-0.0)
                        B_rf[v_k_1, v_i] = B_rf[v_k_1, v_i] + A[v_i, v_k_0 * 2 + v_k_1]
                for i_1, k_1_1 in T.grid(4, 2):
                    with T.block("B"):
                        v_k_1, v_i = T.axis.remap("RS", [k_1_1, i_1])
                        T.reads(B_rf[v_k_1, v_i], B[v_i])
                        T.writes(B[v_i])
                        with T.init():
                            B[v_i] = T.float32(0.0)
                        B[v_i] = B[v_i] + B_rf[v_k_1, v_i]
        """
        loop_name = self._loop(loop, "rfactor")
        new_func, rf_name = rfactor(self._func, loop_name, factor_axis, self.render_errors)
        handle = BlockRV(rf_name, self._new_rv("b"))
        self._record("rfactor", new_func, (loop,), (("factor_axis", factor_axis),), (handle,))
        return handle

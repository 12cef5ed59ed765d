"""Reduction primitives: decompose_reduction and rfactor.

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

from sched.errors import ScheduleError
from sched.ir.dtype import max_value, min_value
from sched.ir.functor import collect, free_vars, substitute
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
    IterVar,
    PrimFunc,
    Range,
    Var,
    binary,
    const,
    logical_and,
)
from sched.ir.regions import infer_block_regions
from sched.ir.simplify import simplify
from sched.polyhedral import build_model, model_and_dependences
from sched.polyhedral.dependences import ASSOCIATIVE_OPS
from sched.polyhedral.isl_expr import isl_name, to_isl, to_isl_condition
from sched.polyhedral.legality import Violation, check_schedule, mark_loop, schedule_error
from sched.schedule.base import BlockRV, LoopRV, ScheduleBase
from sched.schedule.scope import (
    add_allocation,
    block_names,
    fresh,
    replace_in,
    scope_of,
    splice,
    taken_names,
)
from sched.schedule.state import blocks_under, find_block, find_loop

OPERATORS = {"add": "+", "mul": "*", "min": "min", "max": "max"}


def _conjuncts(predicate: Expr) -> list[Expr]:
    if isinstance(predicate, BinaryOp) and predicate.op == "and":
        return _conjuncts(predicate.a) + _conjuncts(predicate.b)
    return [] if predicate == TRUE else [predicate]


def _roles(realize: BlockRealize, loops) -> dict[Var, set[str]]:
    """For each loop: the kinds of the iteration variables whose bindings use it."""
    roles: dict[Var, set[str]] = {lp.loop_var: set() for lp in loops}
    for iter_var, value in zip(realize.block.iter_vars, realize.iter_values):
        for var in free_vars(value):
            if var in roles:
                roles[var].add(iter_var.kind)
    return roles


def _error(primitive: str, reason: str, func: PrimFunc, loop: str | None, render: bool,
           alternatives: tuple[str, ...] = ()) -> ScheduleError:
    script = None
    if render:
        script = func.script() if loop is None else mark_loop(func.script(), loop)
    return ScheduleError(primitive, reason, ir=script, alternatives=alternatives, render=render)


# --------------------------------------------------------------------------------------------
# decompose_reduction


def decompose_reduction(func: PrimFunc, block_name: str, loop_name: str,
                        render: bool = True) -> tuple[PrimFunc, str]:
    """Hoist the init of block `block_name` before loop `loop_name` (see
    Schedule.decompose_reduction). Returns the new function and the init block's name."""
    primitive = "decompose_reduction"
    realize = find_block(func, block_name, primitive)
    loop = find_loop(func, loop_name, primitive)
    block = realize.block
    scope = scope_of(func, realize, primitive)
    names = [lp.loop_var.name for lp in scope.loops]
    if not any(lp is loop for lp in scope.loops):
        raise _error(primitive, f"loop {loop_name!r} is not around block {block_name!r}; the "
                     f"loops around it are {', '.join(names) or 'none'}", func, loop_name, render)
    if not any(iv.kind == "reduce" for iv in block.iter_vars):
        raise _error(primitive, f"block {block_name!r} is not a reduction: it has no reduce "
                     f"iteration variable", func, None, render)
    if block.init is None:
        raise _error(primitive, f"block {block_name!r} has no init (T.init) to decompose; was "
                     f"it decomposed already?", func, None, render)
    position = names.index(loop_name)
    roles = _roles(realize, scope.loops)
    outer = [n for n, lp in zip(names[:position], scope.loops) if "reduce" in roles[lp.loop_var]]
    if outer:
        legal = names[:names.index(outer[0]) + 1]
        raise _error(primitive, f"loop {loop_name!r} is inside the reduce loop(s) "
                     f"{', '.join(outer)} of block {block_name!r}: the init would run again in "
                     f"every iteration of them", func, loop_name, render,
                     tuple(f"sch.decompose_reduction({block_name}, {n})" for n in legal))
    new_func, init_name = _hoist_init(func, realize, loop, scope.loops[position:])
    violation = _check_init_moved(func, new_func, block_name, init_name)
    if violation is not None:
        raise schedule_error(primitive, violation, func, loop=loop_name, render=render)
    return new_func, init_name


def _hoist_init(func: PrimFunc, realize: BlockRealize, loop: For,
                inner_loops) -> tuple[PrimFunc, str]:
    """The init block, under copies of the loops of `inner_loops` that its spatial bindings
    use, spliced in before `loop` (TVM's DecomposeReduction, steps 1 to 6)."""
    block = realize.block
    spatial = [(iv, value) for iv, value in zip(block.iter_vars, realize.iter_values)
               if iv.kind == "spatial"]
    used = {var for _, value in spatial for var in free_vars(value)}
    chosen = [lp for lp in inner_loops if lp.loop_var in used]
    dropped = {lp.loop_var for lp in inner_loops} - used
    taken = taken_names(func)
    init_name = fresh(f"{block.name}_init", block_names(func))
    copies = {lp.loop_var: Var(fresh(f"{lp.loop_var.name}_init", taken), lp.loop_var.dtype)
              for lp in chosen}
    iter_vars = tuple(iv for iv, _ in spatial)
    reads, writes = infer_block_regions(block.init, None, iter_vars)
    init_block = Block(init_name, iter_vars, reads, writes, block.init,
                       annotations=block.annotations)
    predicate = logical_and(*[c for c in _conjuncts(realize.predicate)
                              if not set(free_vars(c)) & dropped])
    nest = BlockRealize(tuple(substitute(v, copies) for _, v in spatial),
                        substitute(predicate, copies), init_block)
    for lp in reversed(chosen):
        nest = For(copies[lp.loop_var], substitute(lp.min, copies), substitute(lp.extent, copies),
                   lp.kind, nest, lp.thread_tag)
    update = dataclasses.replace(realize, block=dataclasses.replace(block, init=None))
    return splice(func, loop, [nest, replace_in(loop, realize, update)]), init_name


def _check_init_moved(func: PrimFunc, new_func: PrimFunc, block_name: str,
                      init_name: str) -> Violation | None:
    """Whether the init block of `new_func` runs the instances of `func`'s init (one per
    element) in an order that keeps every dependence of `func`."""
    old_model, _ = model_and_dependences(func)
    new_model = build_model(new_func)
    (old_init,) = [s for s in old_model.statements_of_block(block_name) if s.is_init]
    (new_init,) = new_model.statements_of_block(init_name)
    params = f"[{', '.join(old_model.params)}] -> "
    moved = isl.UnionMap(f"{params}{{ {old_init.instance()} -> {new_init.instance()} }}")
    old_domain = isl.UnionSet.from_set(old_init.domain)
    expected = old_model.domain.subtract(old_domain).union(old_domain.apply(moved))
    if not expected.is_equal(new_model.domain):
        return Violation(f"the init block would not run once for each element the init of "
                         f"{block_name!r} initializes: {new_init.domain} instead of "
                         f"{old_domain.apply(moved)}")
    new_domain = isl.UnionSet.from_set(new_init.domain)
    schedule = new_model.schedule.subtract_domain(new_domain).union(
        moved.apply_range(isl.UnionMap.from_map(new_init.schedule)))
    return check_schedule(func, schedule)


# --------------------------------------------------------------------------------------------
# rfactor


def _associative_update(func: PrimFunc, block: Block, render: bool):
    """(store, op, value, whether the accumulator is the first operand) of `X[idx] = X[idx] op
    value`, or a ScheduleError."""
    store = block.body
    spatial = {iv.var for iv in block.iter_vars if iv.kind == "spatial"}
    if isinstance(store, BufferStore) and isinstance(store.value, BinaryOp) \
            and store.value.op in ASSOCIATIVE_OPS:
        own = BufferLoad(store.buffer, store.indices)
        a, b = store.value.a, store.value.b
        value = b if a == own else a if b == own else None
        if value is not None and all(load.buffer != store.buffer
                                     for load in collect(value, BufferLoad)) \
                and {v for i in store.indices for v in free_vars(i)} <= spatial | \
                set(func.symbolic_vars) and all(r.buffer == store.buffer for r in block.writes):
            init = block.init
            if init is None or (isinstance(init, BufferStore) and init.buffer == store.buffer
                                and init.indices == store.indices):
                return store, store.value.op, value, a == own
    body = block.body.script().strip().splitlines()[0]
    raise _error("rfactor", f"block {block.name!r} is not an associative update "
                 f"`X[i] = X[i] op value` (op one of +, *, min, max; value not reading X; "
                 f"X[i] indexed by spatial variables and initialized there): its body is "
                 f"`{body}`", func, None, render)


def _identity(op: str, dtype: str) -> Expr:
    value = {"add": 0, "mul": 1, "max": min_value(dtype), "min": max_value(dtype)}[op]
    return const(value, dtype)


def _rfactor_loops(func: PrimFunc, realize: BlockRealize, loop: For, render: bool):
    """(scope, outermost loop holding only the block, loops kept by the write-back, reduce
    loops other than `loop`), or a ScheduleError."""
    name, block_name = loop.loop_var.name, realize.block.name
    scope = scope_of(func, realize, "rfactor")
    roles = _roles(realize, scope.loops)
    reduce_loops = [lp.loop_var.name for lp in scope.loops if "reduce" in roles[lp.loop_var]]
    mixed = [lp.loop_var.name for lp in scope.loops if len(roles[lp.loop_var]) == 2]
    if not any(iv.kind == "reduce" for iv in realize.block.iter_vars):
        reason = f"block {block_name!r} is not a reduction: it has no reduce iteration variable"
    elif "reduce" not in roles[loop.loop_var]:
        reason = (f"loop {name!r} is not a reduce loop of block {block_name!r} (it binds no "
                  f"reduce iteration variable); its reduce loops are {', '.join(reduce_loops)}")
    elif mixed:
        reason = (f"loop(s) {', '.join(mixed)} bind both spatial and reduce iteration variables "
                  f"of block {block_name!r}; rfactor needs each loop to be one or the other")
    else:
        reason = None
    if reason is not None:
        alternatives = tuple(f"sch.rfactor({n}, factor_axis=0)" for n in reduce_loops
                             if not mixed)
        raise _error("rfactor", reason, func, name, render, alternatives)
    top = next(i for i, lp in enumerate(scope.loops)
               if [r.block.name for r in blocks_under(lp)] == [block_name])
    shared = [lp.loop_var.name for lp in scope.loops[:top] if "reduce" in roles[lp.loop_var]]
    if shared:
        others = [r.block.name for r in blocks_under(scope.loops[top - 1])
                  if r.block.name != block_name]
        raise _error("rfactor", f"reduce loop(s) {', '.join(shared)} of block {block_name!r} "
                     f"also hold block(s) {', '.join(others)}: the partial results could not "
                     f"be combined inside them", func, shared[0], render)
    kept = [lp for lp in scope.loops[top:] if lp is loop or "spatial" in roles[lp.loop_var]]
    removed = [lp for lp in scope.loops[top:] if lp is not loop and "reduce" in roles[lp.loop_var]]
    loop_vars = {lp.loop_var for lp in scope.loops}
    for lp in [loop, *removed]:
        if set(free_vars(lp.min)) & loop_vars or set(free_vars(lp.extent)) & loop_vars:
            raise _error("rfactor", f"the bounds of reduce loop {lp.loop_var.name!r} depend on "
                         f"another loop", func, lp.loop_var.name, render)
    return scope, scope.loops[top], kept, removed


def _check_factor_axis(factor_axis, buffer: Buffer) -> int:
    ndim = buffer.ndim
    if not isinstance(factor_axis, int) or isinstance(factor_axis, bool) \
            or not -(ndim + 1) <= factor_axis <= ndim:
        raise ScheduleError("rfactor", f"argument 2, 'factor_axis' to rfactor: expected an int "
                            f"in [{-(ndim + 1)}, {ndim}] (where the new dimension goes in the "
                            f"{ndim}-dimensional {buffer.name!r}), got {factor_axis!r}")
    return factor_axis if factor_axis >= 0 else factor_axis + ndim + 1


def rfactor(func: PrimFunc, loop_name: str, factor_axis: int,
            render: bool = True) -> tuple[PrimFunc, str]:
    """Factor the reduction under reduce loop `loop_name` (see Schedule.rfactor). Returns the
    new function and the name of the block computing the partial results."""
    loop = find_loop(func, loop_name, "rfactor")
    blocks = blocks_under(loop)
    if len(blocks) != 1:
        raise _error("rfactor", f"loop {loop_name!r} holds {len(blocks)} blocks "
                     f"({', '.join(r.block.name for r in blocks) or 'none'}); rfactor needs a "
                     f"loop over one reduction block", func, loop_name, render)
    realize = blocks[0]
    scope, top, kept, removed = _rfactor_loops(func, realize, loop, render)
    store, op, value, accumulator_first = _associative_update(func, realize.block, render)
    axis = _check_factor_axis(factor_axis, store.buffer)
    taken = taken_names(func)
    rf_var = Var(fresh(f"v_{loop_name}", taken))
    reduce_vars = {lp.loop_var: Var(fresh(f"v_{lp.loop_var.name}", taken)) for lp in removed}

    def rf_indices(indices):
        return (*indices[:axis], simplify(rf_var - loop.min), *indices[axis:])

    shape = store.buffer.shape
    rf_buffer = Buffer(fresh(f"{store.buffer.name}_rf", taken),
                       (*shape[:axis], loop.extent, *shape[axis:]), store.buffer.dtype)
    rf_realize = _partial_block(realize, loop, removed, rf_var, reduce_vars, rf_buffer,
                                rf_indices, fresh(f"{realize.block.name}_rf", block_names(func)),
                                op, value, accumulator_first)
    copies = {lp.loop_var: Var(fresh(lp.loop_var.name, taken), lp.loop_var.dtype)
              for lp in kept}
    partial = BufferLoad(rf_buffer, rf_indices(store.indices))
    accumulator = BufferLoad(store.buffer, store.indices)
    combined = binary(op, accumulator, partial) if accumulator_first \
        else binary(op, partial, accumulator)
    spatial = [(iv, v) for iv, v in zip(realize.block.iter_vars, realize.iter_values)
               if iv.kind == "spatial"]
    iter_vars = (IterVar(rf_var, Range(loop.min, loop.extent), "reduce"),
                 *[iv for iv, _ in spatial])
    body = BufferStore(store.buffer, combined, store.indices)
    reads, writes = infer_block_regions(body, realize.block.init, iter_vars)
    write_back = BlockRealize(
        (copies[loop.loop_var], *[substitute(v, copies) for _, v in spatial]),
        substitute(_write_back_predicate(func, realize, scope.loops, removed, render), copies),
        Block(realize.block.name, iter_vars, reads, writes, body, realize.block.init))
    for lp in reversed(kept):
        is_rf = lp is loop
        write_back = For(copies[lp.loop_var], substitute(lp.min, copies),
                         substitute(lp.extent, copies), "serial" if is_rf else lp.kind,
                         write_back, None if is_rf else lp.thread_tag)
    new_func = add_allocation(func, scope.realize, rf_buffer)
    new_top = replace_in(top, realize, rf_realize)
    return splice(new_func, top, [new_top, write_back]), rf_realize.block.name


def _partial_block(realize, loop, removed, rf_var, reduce_vars, rf_buffer, rf_indices, name,
                   op, value, accumulator_first) -> BlockRealize:
    """The block `<name>_rf`: `X_rf[.., v_rf, ..] op= value`, with `loop` bound to the spatial
    `v_rf` and every other reduce loop to a reduce variable of its own."""
    block = realize.block
    to_iter = {loop.loop_var: rf_var, **reduce_vars}
    reduce_values = {iv.var: substitute(v, to_iter)
                     for iv, v in zip(block.iter_vars, realize.iter_values) if iv.kind == "reduce"}
    indices = rf_indices(tuple(substitute(i, reduce_values) for i in block.body.indices))
    accumulator = BufferLoad(rf_buffer, indices)
    value = substitute(value, reduce_values)
    combined = binary(op, accumulator, value) if accumulator_first \
        else binary(op, value, accumulator)
    body = BufferStore(rf_buffer, combined, indices)
    init = BufferStore(rf_buffer, _identity(op, rf_buffer.dtype), indices)
    spatial = [(iv, v) for iv, v in zip(block.iter_vars, realize.iter_values)
               if iv.kind == "spatial"]
    iter_vars = (IterVar(rf_var, Range(loop.min, loop.extent), "spatial"),
                 *[iv for iv, _ in spatial],
                 *[IterVar(reduce_vars[lp.loop_var], Range(lp.min, lp.extent), "reduce")
                   for lp in removed])
    values = (loop.loop_var, *[v for _, v in spatial], *[lp.loop_var for lp in removed])
    reads, writes = infer_block_regions(body, init, iter_vars, block.alloc_buffers)
    return BlockRealize(values, realize.predicate,
                        Block(name, iter_vars, reads, writes, body, init, block.alloc_buffers,
                              block.annotations))


def _write_back_predicate(func: PrimFunc, realize: BlockRealize, loops, removed,
                          render: bool) -> Expr:
    """Where the write-back runs: the conjuncts of the predicate free of the reduce loops it
    drops, and, for the others, isl's projection of them onto the loops kept (a partial
    result exists only where some iteration of the dropped loops ran)."""
    dropped = {lp.loop_var for lp in removed}
    keep, project = [], []
    for condition in _conjuncts(realize.predicate):
        (project if set(free_vars(condition)) & dropped else keep).append(condition)
    if not project:
        return logical_and(*keep)
    others = [lp for lp in loops if lp.loop_var not in dropped]
    outer = [*func.symbolic_vars, *[p for p in func.params if isinstance(p, Var)]]
    variables = {isl_name(v): v for v in [*outer, *[lp.loop_var for lp in others]]}

    def bounds(lps) -> list[str | None]:
        return [f"{to_isl(lp.min)} <= {isl_name(lp.loop_var)} < {to_isl(lp.min)} + "
                f"{to_isl(lp.extent)}" if to_isl(lp.min) and to_isl(lp.extent) else None
                for lp in lps]
    texts = [to_isl_condition(c) for c in project] + bounds(removed)
    context = bounds(others)
    if None in texts or None in context:
        raise _error("rfactor", f"the predicate of block {realize.block.name!r} or its loop "
                     f"bounds are not affine; rfactor cannot tell which partial results exist",
                     func, None, render)
    space = f"[{', '.join(variables)}] -> "
    names = ", ".join(isl_name(lp.loop_var) for lp in removed)
    found = isl.Set(f"{space}{{ : exists ({names} : {' and '.join(texts)}) }}")
    found = found.gist(isl.Set(f"{space}{{ : {' and '.join(context) or 'true'} }}")).coalesce()
    pieces = found.get_basic_sets()
    if len(pieces) != 1 or pieces[0].dim(isl.dim_type.div):
        raise _error("rfactor", f"the partial results of block {realize.block.name!r} exist on "
                     f"a set that is not a conjunction of affine conditions ({found})",
                     func, None, render)
    return logical_and(*keep, *[_condition(c, variables) for c in pieces[0].get_constraints()])


def _condition(constraint: isl.Constraint, variables: dict[str, Var]) -> Expr:
    """An isl constraint over parameters as a comparison: `a - b + 3 >= 0` -> `b < a + 4`."""
    positive: Expr = IntImm(0)
    negative: Expr = IntImm(0)
    for i in range(constraint.dim(isl.dim_type.param)):
        coefficient = constraint.get_coefficient_val(isl.dim_type.param, i).to_python()
        if coefficient:
            var = variables[constraint.get_dim_name(isl.dim_type.param, i)]
            term = var * abs(coefficient) if abs(coefficient) != 1 else var
            if coefficient > 0:
                positive = simplify(positive + term)
            else:
                negative = simplify(negative + term)
    constant = constraint.get_constant_val().to_python()
    if constraint.is_equality():
        return binary("eq", negative, simplify(positive + constant))
    if negative == IntImm(0):
        return binary("ge", positive, IntImm(-constant))
    return binary("lt", negative, simplify(positive + (constant + 1)))


class ReductionPrimitives(ScheduleBase):
    """decompose_reduction, rfactor."""

    def decompose_reduction(self, block: BlockRV, loop: LoopRV) -> BlockRV:
        """Move the init of a reduction block into a block of its own, `<name>_init`, right
        before `loop`; the reduction block keeps only its update.

        Requires: `block` is a reduction with an init (`T.init`); `loop` is around it and not
        inside any loop that binds a reduce iteration variable (the init must run once per
        output element); the moved init keeps every dependence (polyhedral/ checks). The init
        block gets copies (`<loop>_init`) of the loops at or inside `loop` that its spatial
        bindings use; the others are dropped with the parts of the predicate that use them.

        Arguments: `block` a block handle; `loop` a loop handle around it.
        Returns: a handle to the init block. Handles stay valid.
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
                    with T.block("B"):
                        v_i, v_k = T.axis.remap("SR", [i, k])
                        T.reads(B[v_i], A[v_i, v_k])
                        T.writes(B[v_i])
                        B[v_i] = B[v_i] + A[v_i, v_k]
        """
        block_name = self._block(block, "decompose_reduction")
        loop_name = self._loop(loop, "decompose_reduction")
        new_func, init_name = decompose_reduction(self._func, block_name, loop_name,
                                                  self.render_errors)
        handle = BlockRV(init_name, self._new_rv("b"))
        self._record("decompose_reduction", new_func, (block, loop), outputs=(handle,))
        return handle

    def rfactor(self, loop: LoopRV, factor_axis: int) -> BlockRV:
        """Factor a reduction over reduce loop `loop`: a block `<name>_rf` computes partial
        results into a new buffer `<buffer>_rf`, indexed by `loop`, which becomes a spatial loop
        (it can then be parallelized, vectorized or bound to threads); the original block,
        under copies of the spatial loops and of `loop`, combines them.

        Requires: `loop` holds one block, a reduction whose body is an associative update
        `X[i] = X[i] op value` (op one of +, *, min, max; `value` does not read X); `loop`
        binds reduce iteration variables only, and no loop binds both kinds. The partial
        results start from op's identity; the combining block keeps the original init, and a
        predicate where the partial results of a non-dividing split do not all exist.

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
                        T.reads(B_rf[v_k_1, v_i], A[v_i, v_k_0 * 2 + v_k_1])
                        T.writes(B_rf[v_k_1, v_i])
                        with T.init():
                            B_rf[v_k_1, v_i] = T.float32(0.0)
                        B_rf[v_k_1, v_i] = B_rf[v_k_1, v_i] + A[v_i, v_k_0 * 2 + v_k_1]
                for i_1, k_1_1 in T.grid(4, 2):
                    with T.block("B"):
                        v_k_1, v_i = T.axis.remap("RS", [k_1_1, i_1])
                        T.reads(B[v_i], B_rf[v_k_1, v_i])
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

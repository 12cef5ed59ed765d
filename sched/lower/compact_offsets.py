"""Where a compacted buffer's box starts, for each block that accesses it (compact_buffers.py):
the smallest index touched in the current iteration of the loops around the allocation, as an
expression of the block's iteration variables (`i - i % 4` for a tile, isl's own expression
otherwise), or, where a block's instance runs in several iterations (a producer recomputed in
overlapping tiles), of the loops themselves, which `compact_buffers._Rebase` binds to new
iteration variables of the block.
"""

from __future__ import annotations

import islpy as isl

from sched.ir.functor import collect, free_vars
from sched.ir.nodes import Block, BlockRealize, Buffer, Expr, For, PrimFunc, Var
from sched.ir.paths import path_to
from sched.polyhedral.isl_build import integer_val
from sched.polyhedral.isl_expr import NotAffine, isl_name, pw_aff_to_expr


def thread_loop(loop) -> bool:
    """Whether a loop of the model (statements.Loop) is bound to threadIdx."""
    return loop.kind == "thread_binding" and (loop.thread_tag or "").startswith("threadIdx")


def box_offsets(model, buffer: Buffer, outer: list, touched: isl.Map, dim: int,
             extent: int, loops: list[For]) -> dict[str, Expr] | None:
    """The smallest index of `dim` touched in the current iteration of the outer loops, as an
    expression of each accessing block's iteration variables (by block name), or None. An
    expression may use the variables of `loops` (`_loop_offset`): `_Rebase` binds them."""
    ndim = touched.dim(isl.dim_type.out)
    one = touched.project_out(isl.dim_type.out, dim + 1, ndim - dim - 1) \
        .project_out(isl.dim_type.out, 0, dim)
    lowest = isl.Map.from_pw_multi_aff(one.lexmin_pw_multi_aff())
    found: dict[str, Expr] = {}
    for statement, to_loops in sorted(outer, key=lambda item: item[0].is_init):
        offset = to_loops.apply_range(lowest)           # instance -> the box's offset
        if not offset.is_single_valued():
            # an instance run in several iterations (a producer recomputed in each tile of
            # an overlapping stencil): the offset is the loops', given to the block as
            # iteration variables bound to them (`_loop_offset`)
            by_loops = _loop_offset(model, statement, lowest, loops,
                                    buffer.scope == "shared")
            if by_loops is None:
                return None
            found.setdefault(statement.block.name, by_loops)
            continue
        n_params, n_iters = offset.dim(isl.dim_type.param), offset.dim(isl.dim_type.in_)
        context = statement.domain.move_dims(isl.dim_type.param, n_params,
                                             isl.dim_type.set, 0, n_iters).params()
        variables = {isl_name(iv.var): iv.var for iv in statement.block.iter_vars}
        variables |= {isl_name(v): v for v in model.func.symbolic_vars}
        variables |= {isl_name(p): p for p in model.func.params if isinstance(p, Var)}
        aligned = _aligned_offset(statement, buffer, dim, extent, offset)
        if aligned is not None:
            smallest = aligned.move_dims(isl.dim_type.param, n_params, isl.dim_type.in_, 0,
                                         n_iters).project_domain_on_params()
        else:
            values = offset.move_dims(isl.dim_type.param, n_params, isl.dim_type.in_, 0,
                                      n_iters)
            smallest = values.range().dim_min(0)
        try:
            expr = pw_aff_to_expr(smallest, context, variables)
        except (NotAffine, KeyError, isl.Error):
            return None
        found.setdefault(statement.block.name, expr)   # the body's, valid for the init too
    return found


def _loop_offset(model, statement, lowest: isl.Map, loops: list[For],
                 relax_threads: bool) -> Expr | None:
    """The box's offset `lowest` (values of the outer loops -> the smallest index) as an
    expression of those loops' variables, where the block of `statement` may be given
    iteration variables bound to them: it sits under them with no other block in between,
    and their bounds use no other loop (the new variables' domains). TVM rebases such a
    buffer by the loops too (its compaction runs where blocks are opaque)."""
    picked = [lp for lp in statement.loops[:len(loops)]
              if not (relax_threads and thread_loop(lp))]
    by_var = {lp.loop_var: lp for lp in loops}
    used = [by_var.get(lp.var) for lp in picked]
    if None in used or not _directly_under(model.func, statement.block, loops):
        return None
    inner = {lp.loop_var for lp in loops}
    if any(set(free_vars(lp.min)) & inner or set(free_vars(lp.extent)) & inner
           for lp in used):
        return None
    pw_multi = lowest.lexmin_pw_multi_aff()
    if pw_multi.dim(isl.dim_type.in_) != len(used):
        return None
    low = pw_multi.get_pw_aff(0)
    variables = {isl_name(v): v for v in model.func.symbolic_vars}
    variables |= {isl_name(p): p for p in model.func.params if isinstance(p, Var)}
    for k, lp in enumerate(used):
        low = low.set_dim_id(isl.dim_type.in_, k,
                             isl.Id(isl_name(lp.loop_var), context=low.get_ctx()))
        variables[isl_name(lp.loop_var)] = lp.loop_var
    low = low.move_dims(isl.dim_type.param, low.dim(isl.dim_type.param), isl.dim_type.in_,
                        0, len(used))
    try:
        return pw_aff_to_expr(low, low.domain(), variables)
    except (NotAffine, KeyError, isl.Error):
        return None


def _directly_under(func: PrimFunc, block: Block, loops: list[For]) -> bool:
    """Whether `block` is under `loops` with no other block between them and it."""
    realize = next(r for r in collect(func.body, BlockRealize) if r.block is block)
    path = path_to(func.body, realize) or []
    first = next((k for k, node in enumerate(path) if node is loops[0]), None) \
        if loops else 0
    return first is not None and not any(isinstance(node, BlockRealize)
                                         for node in path[first:])


def _aligned_offset(statement, buffer: Buffer, dim: int, extent: int,
                    offset: isl.Map) -> isl.PwAff | None:
    """`i - i % extent` (a function of the statement's instance), where `i` is the
    statement's own smallest index of `dim` in each of its instances, when isl proves it
    equal to `offset` (instance -> the box's offset) on every instance of the statement,
    else None.

    A split's tile starts at a multiple of its extent, and this form says so. Where the loops
    around the allocation are fused, isl's own expression of the offset as a function of the
    instance is a select over many pieces: 2,000 characters of C per access in a conv2d
    tile's innermost loop (the autoscheduler's candidates of that kind ran 20-33 ms with it,
    1.2-2.5 ms with this offset), and computing it (a parametric minimum) took seconds per
    statement where proving this form equal to the offset's graph takes milliseconds."""
    access = statement.accesses_of(buffer.name)
    if access is None:
        return None
    try:
        index = _one_index(statement, buffer, dim)
        if index is None:
            ndim = access.dim(isl.dim_type.out)
            one = access.project_out(isl.dim_type.out, dim + 1, ndim - dim - 1) \
                .project_out(isl.dim_type.out, 0, dim)
            index = one.lexmin_pw_multi_aff().get_pw_aff(0)
        candidate = index.sub(index.mod_val(integer_val(extent, index.get_ctx())))
        if (statement.domain.is_subset(offset.domain())
                and offset.is_subset(isl.Map.from_pw_aff(candidate))):
            return candidate
    except isl.Error:
        pass
    return None


def _one_index(statement, buffer: Buffer, dim: int) -> isl.PwAff | None:
    """The index of `dim` as a function of the statement's instance, where every access of
    the statement to `buffer` is one element per instance at the same affine index of `dim`
    (a copy into a cache, or an update): written from that index, with no question to isl.
    The lexmin of the access took 32 s for a cooperative fetch whose instances' domain keeps
    divisions as existentials; `_aligned_offset` checks the candidate it makes either way."""
    accesses = [view.access for view in statement.accesses if view.buffer.name == buffer.name]
    texts = {access.index_texts[dim] for access in accesses}
    if len(texts) != 1 or None in texts or any(access.bound_loops for access in accesses):
        return None
    (text,) = texts
    return isl.PwAff(f"{statement.param_text} {{ {statement.instance()} -> [({text})] }}")

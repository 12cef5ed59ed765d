"""`create_prim_func`: from DSL tensors to a PrimFunc with one block per compute.

    A = te.placeholder((128, 64), name="A")
    B = te.compute((128, 64), lambda i, j: A[i, j] * 2.0, name="B")
    func = te.create_prim_func([A, B])

gives

    @T.prim_func
    def main(A: T.Buffer((128, 64), "float32"), B: T.Buffer((128, 64), "float32")):
        with T.block("root"):
            for i, j in T.grid(128, 64):
                with T.block("B"):
                    v_i, v_j = T.axis.remap("SS", [i, j])
                    T.reads(A[v_i, v_j])
                    T.writes(B[v_i, v_j])
                    B[v_i, v_j] = A[v_i, v_j] * T.float32(2.0)

Computes run in the order they were defined (a producer is always defined before its consumers).
Each gets a loop nest over its spatial axes, then its reduce axes, named after the lambda's
arguments and the reduce axes (with a suffix where a name is taken: loop names are unique in the
function, so that a schedule can name every loop); its block's iteration variables are those
names prefixed `v_`.
Computes that are not arguments become buffers allocated by the root block.
"""

from __future__ import annotations

import keyword

from sched.compute.comm_reducer import TupleReduce
from sched.compute.reduction import Reduce
from sched.compute.tensor import Tensor
from sched.errors import DSLError
from sched.ir.functor import free_vars, substitute
from sched.ir.names import fresh
from sched.ir.nodes import (
    TRUE,
    Block,
    BlockRealize,
    BufferStore,
    For,
    IterVar,
    LetStmt,
    PrimFunc,
    Range,
    Select,
    Stmt,
    Var,
    convert,
    seq,
)
from sched.ir.regions import infer_block_regions


def _reachable(outputs: list[Tensor]) -> list[Tensor]:
    """Every tensor the outputs depend on (themselves included), producers first."""
    seen: dict[int, Tensor] = {}
    stack = list(outputs)
    while stack:
        tensor = stack.pop()
        if id(tensor) in seen:
            continue
        seen[id(tensor)] = tensor
        if tensor.op is not None:
            stack.extend(tensor.op.inputs)
    return sorted(seen.values(), key=lambda t: t.order)


def _check_names(tensors: list[Tensor]) -> None:
    names: dict[str, Tensor] = {}
    for tensor in tensors:
        if not tensor.name.isidentifier() or keyword.iskeyword(tensor.name):
            # the script names the buffer so: `A.b`, `lambda` did not parse back (audit
            # helper-115)
            raise DSLError(f"create_prim_func: tensor name {tensor.name!r} is not a Python "
                           f"identifier, which the function's script names its buffer by; "
                           f"give a name of letters, digits and '_' (name=...)")
        other = names.setdefault(tensor.name, tensor)
        if other is not tensor:
            raise DSLError(f"create_prim_func: two tensors are named '{tensor.name}'; give each "
                           f"tensor its own name= (names become buffer names)")


def _check_listed_once(args: list) -> None:
    """Each argument is one parameter: one listed twice would make two parameters of one
    name, which the C compiler refuses (and the printed script cannot be parsed back)."""
    positions: dict = {}
    for position, arg in enumerate(args):
        key = id(arg) if isinstance(arg, Tensor) else arg      # equal te.vars are one
        first = positions.setdefault(key, position)
        if first != position:
            what = "tensor" if isinstance(arg, Tensor) else "te.var"
            raise DSLError(f"create_prim_func: {what} '{arg.name}' is listed twice among the "
                           f"arguments (positions {first} and {position}); list each "
                           f"{what} once")


def _compute_nest(tensor: Tensor, taken_names: set[str]) -> Stmt:
    """The loop nest and block computing `tensor`."""
    op = tensor.op
    assert op is not None
    body = op.body
    reduce_axes = body.axes if isinstance(body, Reduce | TupleReduce) else ()
    axis_vars = list(op.axes) + [axis.var for axis in reduce_axes]
    doms = [Range(convert(0), dim) for dim in tensor.shape] + [a.dom for a in reduce_axes]
    kinds = ["spatial"] * len(op.axes) + ["reduce"] * len(reduce_axes)
    loop_vars = [Var(fresh(v.name, taken_names), v.dtype)      # unique in the function
                 for v in axis_vars]
    local_names = set(taken_names)
    iter_vars = [IterVar(Var(fresh("v_" + v.name, local_names), v.dtype), dom, kind)
                 for v, dom, kind in zip(axis_vars, doms, kinds)]
    to_iter = {v: iv.var for v, iv in zip(axis_vars, iter_vars)}
    spatial = tuple(iv.var for iv in iter_vars[:len(op.axes)])

    init = None
    if isinstance(body, TupleReduce):
        outputs = op.outputs or (tensor.buffer,)
        stmt, init = _tuple_reduction(body, outputs, spatial, to_iter, local_names)
    elif isinstance(body, tuple):           # several values, one output each
        stmt = seq(*[BufferStore(b, substitute(value, to_iter), spatial)
                     for b, value in zip(op.outputs, body, strict=True)])
    elif isinstance(body, Reduce):
        output = tensor.buffer[spatial]
        source = substitute(body.source, to_iter)
        if body.condition is not None:      # a term left out adds nothing (not the init)
            source = Select(substitute(body.condition, to_iter), source, body.neutral())
        init = BufferStore(tensor.buffer, substitute(body.identity(), to_iter), spatial)
        stmt: Stmt = BufferStore(tensor.buffer, body.combine(output, source), spatial)
    else:
        stmt = BufferStore(tensor.buffer, substitute(body, to_iter), spatial)

    reads, writes = infer_block_regions(stmt, init, tuple(iter_vars))
    block = Block(op.name or tensor.name, tuple(iter_vars), reads, writes, stmt, init)
    nest: Stmt = BlockRealize(tuple(loop_vars), TRUE, block)
    for loop_var, dom in reversed(list(zip(loop_vars, doms))):
        nest = For(loop_var, dom.min, dom.extent, "serial", nest)
    return nest


def _tuple_reduction(body: TupleReduce, outputs, spatial, to_iter, names: set[str]):
    """(update, init) of a te.comm_reducer's block: the init stores the identity (or the
    reduction's `init=`) in each output; the update binds each new value (`v_<output>:
    dtype = ...`, from the old values) and then stores them all, as TVM writes it."""
    reducer = body.reducer
    dtypes = [b.dtype for b in outputs]
    identity = reducer.identity(dtypes)
    incoming = [substitute(s, to_iter) for s in body.sources]
    if body.condition is not None:
        condition = substitute(body.condition, to_iter)
        incoming = [Select(condition, v, e) for v, e in zip(incoming, identity)]
    accumulated = tuple(b[spatial] for b in outputs)
    new_values = reducer.combine(accumulated, tuple(incoming))
    starts = identity if body.init is None else \
        [substitute(convert(v, d), to_iter) for v, d in zip(body.init, dtypes)]
    init = seq(*[BufferStore(b, e, spatial) for b, e in zip(outputs, starts)])
    if len(outputs) == 1:
        return BufferStore(outputs[0], new_values[0], spatial), init
    temps = [Var(fresh(f"v_{b.name}", names), b.dtype) for b in outputs]
    stmt: Stmt = seq(*[BufferStore(b, t, spatial) for b, t in zip(outputs, temps)])
    for temp, value in reversed(list(zip(temps, new_values))):
        stmt = LetStmt(temp, value, stmt)
    return stmt, init


def create_prim_func(args: list, name: str = "main") -> PrimFunc:
    """A PrimFunc computing the compute tensors among `args` from the placeholders among them.

    `args` lists the function's parameters in order: tensors (inputs and outputs) and,
    optionally, symbolic dims (`te.var`) to pass explicitly as scalars. Every placeholder an
    output depends on must be in `args`; computes that are not become intermediate buffers.
    """
    tensors = [a for a in args if isinstance(a, Tensor)]
    scalars = [a for a in args if isinstance(a, Var)]
    bad = [a for a in args if not isinstance(a, Tensor | Var)]
    if bad:
        raise DSLError(f"create_prim_func: arguments must be tensors or te.var dims, got "
                       f"{bad[0]!r}")
    if not tensors:
        raise DSLError("create_prim_func: no tensor among the arguments")
    _check_listed_once(args)
    everything = _reachable(tensors)
    _check_names(everything)
    in_args = {id(t) for t in tensors}
    for tensor in everything:
        if tensor.op is None and id(tensor) not in in_args:
            users = [t.name for t in everything if t.op and tensor in t.op.inputs]
            raise DSLError(f"create_prim_func: placeholder '{tensor.name}' is used by "
                           f"{', '.join(repr(u) for u in users)} but is not among the "
                           f"arguments; add it to the list")
    computes = [t for t in everything if t.op is not None]
    if not computes:
        raise DSLError("create_prim_func: nothing to compute; pass the output tensors too")

    taken = {t.name for t in everything}
    variables = {v for t in tensors for dim in t.shape for v in free_vars(dim)} | set(scalars)
    # a te.var named like a tensor is renamed (`A_1`): the script named both `A`, and did
    # not parse back (audit helper-146)
    clashing = sorted((v for v in variables if v.name in taken), key=lambda v: v.name)
    taken |= {v.name for v in variables}
    renamed = {v: Var(fresh(v.name, taken), v.dtype) for v in clashing}
    ops: dict[int, Tensor] = {}            # one nest per compute (several outputs: one op)
    for tensor in computes:
        ops.setdefault(id(tensor.op), tensor)
    nests = [_compute_nest(t, taken) for t in ops.values()]
    params = {a.buffer for a in tensors}
    written = [b for t in ops.values() for b in (t.op.outputs or (t.buffer,))]
    intermediates = tuple(b for b in written if b not in params)
    root = Block("root", (), (), (), seq(*nests), None, intermediates)
    params = tuple(a.buffer if isinstance(a, Tensor) else a for a in args)
    func = PrimFunc(name, params, BlockRealize((), TRUE, root))
    known = set(func.symbolic_vars) | set(scalars)
    unknown = [v for v in free_vars(func.body) if v not in known]
    if unknown:
        raise DSLError(f"create_prim_func: te.var '{unknown[0].name}' is used by the computes "
                       f"but is neither a dim of an argument's shape nor among the arguments; "
                       f"add it to the list (a scalar parameter) or use it in a shape")
    return substitute(func, renamed) if renamed else func

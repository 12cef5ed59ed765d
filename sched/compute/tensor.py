"""Tensors of the compute DSL: placeholders, computes, symbolic dims and reduce axes.

A tensor stands for a buffer; indexing it (`A[i, k]`) gives a load of that buffer, so a compute's
body is ordinary IR. Each compute records the tensors its body indexes, which is how
`create_prim_func` finds every producer of its arguments.

    n = te.var("n")
    A = te.placeholder((n, 64), "float32", name="A")
    k = te.reduce_axis((0, 64), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
"""

from __future__ import annotations

import inspect
import itertools
from dataclasses import dataclass

from sched.errors import DSLError
from sched.ir.dtype import INDEX_DTYPE, check_dtype, is_int
from sched.ir.functor import collect, free_vars
from sched.ir.nodes import Buffer, BufferLoad, Expr, Range, Var, convert
from sched.ir.simplify import simplify

_creation_order = itertools.count()
_default_names: dict[str, itertools.count] = {}
_recording: list[list[Tensor]] = []   # one list per compute whose body is being evaluated
# the variables of every reduce axis made so far, by identity (a symbolic dim or an axis of
# another compute may have the same name), kept alive so that no id is reused
_reduce_axis_vars: dict[int, Var] = {}


def _unique_default(prefix: str) -> str:
    counter = _default_names.setdefault(prefix, itertools.count())
    index = next(counter)
    return prefix if index == 0 else f"{prefix}_{index}"


def var(name: str = "n", dtype: str = INDEX_DTYPE) -> Var:
    """A symbolic (dynamic) dim: its value is bound from argument shapes at each call."""
    return Var(name, check_dtype(dtype))


class ReduceAxis:
    """A reduction axis over [lo, hi), made by `reduce_axis`. Used in expressions like a
    variable (`A[i, k]`, `k + 1`) and named in a reducer (`te.sum(..., axis=k)`)."""

    def __init__(self, dom: Range, name: str) -> None:
        self.var = Var(name, _index_dtype(dom.extent))
        self.dom = dom
        _reduce_axis_vars[id(self.var)] = self.var

    def as_expr(self) -> Var:
        return self.var

    def __repr__(self) -> str:
        return f"reduce_axis({self.var.name})"


def _forward(name: str):
    return lambda self, *args: getattr(self.var, name)(*args)


for _op in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
            "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
            "__rmod__", "__neg__", "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__or__",
            "__invert__", "__lshift__", "__rlshift__", "__rshift__", "__rrshift__"):
    setattr(ReduceAxis, _op, _forward(_op))


def _compare(op: str):
    """`k == 0`, `k != j`: the comparison of the axis's variable (sched/ir/equality.py); two
    axes are equal only when they are one axis (hashed by identity)."""
    def compare(self, other):
        if isinstance(other, ReduceAxis):
            return (self is other) == (op == "__eq__")
        return getattr(self.var, op)(other)
    return compare


ReduceAxis.__eq__, ReduceAxis.__ne__ = _compare("__eq__"), _compare("__ne__")
ReduceAxis.__hash__ = object.__hash__


def _index_dtype(dim) -> str:
    """The integer type of an axis over `dim`: its own (int32 or int64), int32 otherwise."""
    dtype = getattr(dim, "dtype", INDEX_DTYPE)
    return dtype if dtype in ("int32", "int64") else INDEX_DTYPE


def reduce_axis(dom, name: str = "k") -> ReduceAxis:
    """A reduction axis over `dom`: `(lo, hi)` or an extent `n` for (0, n)."""
    if isinstance(dom, tuple | list):
        if len(dom) != 2:
            raise DSLError(f"reduce_axis: dom must be (lo, hi) or an extent, got {dom!r}")
        lo, hi = convert(dom[0]), convert(dom[1])
        return ReduceAxis(Range(lo, simplify(hi - lo)), name)
    return ReduceAxis(Range(convert(0), convert(dom)), name)


@dataclass(frozen=True, eq=False)
class Tensor:
    """A tensor of the DSL: a placeholder (op is None) or the output of a compute."""

    buffer: Buffer
    op: ComputeOp | None
    order: int

    @property
    def name(self) -> str:
        return self.buffer.name

    @property
    def shape(self) -> tuple[Expr, ...]:
        return self.buffer.shape

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    @property
    def ndim(self) -> int:
        return self.buffer.ndim

    def __getitem__(self, indices) -> BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise DSLError(f"tensor '{self.name}' has {self.ndim} dimensions but is indexed "
                           f"with {len(indices)} indices")
        converted = tuple(convert(i) for i in indices)
        for index in converted:
            if not is_int(index.dtype):
                raise DSLError(f"tensor '{self.name}' is indexed with {index} of dtype "
                               f"{index.dtype}: an index must be an integer (te.cast it to "
                               f"int32, or use te.floor and cast)")
        if _recording:
            _recording[-1].append(self)
        return BufferLoad(self.buffer, converted)

    def __call__(self, *indices) -> BufferLoad:
        """`A(i, j)`: TVM's call spelling of `A[i, j]`."""
        return self[indices]

    def __repr__(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        return f"Tensor({self.name}, ({dims}), {self.dtype})"


@dataclass(frozen=True)
class ComputeOp:
    """What a compute tensor is: `buffer[axes] = body` (body may be a `Reduce`, a
    `TupleReduce` whose values go to `outputs`, one buffer each, written by one block `name`,
    or a tuple of expressions, one per output, stored by one block `name`)."""

    axes: tuple[Var, ...]
    body: object                       # Expr, Reduce or TupleReduce
    inputs: tuple[Tensor, ...]
    attrs: tuple[tuple[str, object], ...] = ()
    outputs: tuple[Buffer, ...] = ()
    name: str = ""
    tag: str = ""                      # TVM's op tag (TOPI's "elemwise", "injective", ...)


def _shape(shape) -> tuple[Expr, ...]:
    if not isinstance(shape, tuple | list):
        shape = (shape,)
    return tuple(simplify(convert(dim)) for dim in shape)


def placeholder(shape, dtype: str = "float32", name: str | None = None) -> Tensor:
    """An input tensor of `shape` (ints or symbolic dims) and `dtype`."""
    buffer = Buffer(name or _unique_default("placeholder"), _shape(shape), check_dtype(dtype))
    return Tensor(buffer, None, next(_creation_order))


def _axis_names(fcompute, ndim: int, name: str, varargs_names=None) -> list[str]:
    """The lambda's parameter names, which name the loops; the arity must match the shape.
    A function of `*args` takes `varargs_names` (TVM's argument), else i0, i1, ..."""
    if varargs_names is not None:
        if len(varargs_names) != ndim:
            raise DSLError(f"compute '{name}': varargs_names has {len(varargs_names)} names "
                           f"for {ndim} dimensions")
        return list(varargs_names)
    try:
        parameters = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        return [f"i{d}" for d in range(ndim)]
    if any(p.kind == p.VAR_POSITIONAL for p in parameters):
        return [f"i{d}" for d in range(ndim)]
    if len(parameters) != ndim:
        names = ", ".join(p.name for p in parameters)
        raise DSLError(
            f"compute '{name}': the function takes {len(parameters)} arguments ({names}) but "
            f"the shape has {ndim} dimensions; write one argument per output dimension")
    return [p.name for p in parameters]


def compute(shape, fcompute, name: str | None = None, tag: str = "",
            attrs: dict | None = None, varargs_names=None):
    """A tensor of `shape` whose element at (i, j, ...) is `fcompute(i, j, ...)`; TVM's
    signature (`tag` is kept as the op's tag, `varargs_names` names the axes of a function
    of `*args`).

    The body is an expression of the axes, or a reducer (`te.sum/max/min(..., axis=k)`, or a
    `te.comm_reducer`'s) as the whole body. Its dtype is the dtype of the body. A reducer of
    several values gives a list of tensors, `<name>_v0`, `<name>_v1`..., one block writing all.
    """
    from sched.compute.comm_reducer import TupleReduce
    from sched.compute.reduction import Reduce

    name = name or _unique_default("compute")
    shape = _shape(shape)
    # an axis takes its dim's integer type (int64 over `te.var("n", "int64")`, as TVM)
    dtypes = [_index_dtype(dim) for dim in shape]
    axes = tuple(Var(n, t) for n, t in
                 zip(_axis_names(fcompute, len(shape), name, varargs_names), dtypes))
    # the names of the variables the body uses besides the axes, from axes no name can equal
    probes = tuple(Var(f"{_PROBE}{d}", t) for d, t in enumerate(dtypes))
    others = _variable_names(_evaluate(fcompute, probes)[0]) - {v.name for v in probes}
    body, inputs = _evaluate(fcompute, axes)
    symbolic = _symbolic_names(body, shape, inputs)
    # an axis named like a symbolic dim (`lambda n, ...` over a batch of te.var("n")), like a
    # reduce axis of the body (`lambda x: te.sum(C[k, x], axis=k)` with k named "x": audit
    # helper-94, C[k, x] became C[x, x]) or like a scalar the body reads (`lambda i: A[i + m]`
    # with m = te.var("i"): helper-97) would be that variable in the function, which knows its
    # variables by name (and equal names and dtypes make equal variables)
    clashing = symbolic | others | {axis.var.name for axis in _all_reduce_axes(body)}
    if any(axis.name in clashing for axis in axes):
        taken = clashing | {axis.name for axis in axes}
        axes = tuple(Var(_fresh(axis.name, taken), axis.dtype) if axis.name in clashing
                     else axis for axis in axes)
        body, inputs = _evaluate(fcompute, axes)
    _check_reduce_axis_names(name, body, symbolic)
    if isinstance(body, list | tuple):
        return _several_values(name, shape, axes, body, inputs, attrs, tag)
    if isinstance(body, TupleReduce):
        reduce_vars = {axis.var for axis in body.axes}
        for part in (*body.sources, body.condition):
            if part is not None:
                _check_no_foreign_reduce_axes(name, part, set(axes) | reduce_vars)
        inputs = tuple(dict.fromkeys(inputs))
        if body.several:
            outputs = tuple(Buffer(f"{name}_v{j}", shape, s.dtype)
                            for j, s in enumerate(body.sources))
            op = ComputeOp(axes, body, inputs, tuple((attrs or {}).items()), outputs, name,
                           tag)
            return [Tensor(b, op, next(_creation_order)) for b in outputs]
        op = ComputeOp(axes, body, inputs, tuple((attrs or {}).items()), tag=tag)
        return Tensor(Buffer(name, shape, body.sources[0].dtype), op, next(_creation_order))
    if isinstance(body, Reduce):
        reduce_vars = {axis.var for axis in body.axes}
        for part in (body.source, body.condition):
            if part is not None:
                _check_no_foreign_reduce_axes(name, part, set(axes) | reduce_vars)
        if body.init is not None:           # one value per element, before any term
            _check_no_foreign_reduce_axes(name, body.init, set(axes))
    else:
        body = convert(body)
        _check_no_foreign_reduce_axes(name, body, set(axes))
    dtype = body.dtype
    op = ComputeOp(axes, body, tuple(dict.fromkeys(inputs)), tuple((attrs or {}).items()),
                   tag=tag)
    return Tensor(Buffer(name, shape, dtype), op, next(_creation_order))


def _several_values(name, shape, axes, values, inputs, attrs, tag):
    """A compute whose function gives a list of values (TVM's several outputs of one op): one
    tensor per value, `<name>_v0`, `<name>_v1`..., one block storing all (a list of one value
    is one tensor, as in TVM)."""
    from sched.compute.comm_reducer import TupleReduce
    from sched.compute.reduction import Reduce

    if not values:
        raise DSLError(f"compute '{name}': the function gives an empty list of values")
    if any(isinstance(v, Reduce | TupleReduce) for v in values):
        raise DSLError(f"compute '{name}': a list of reductions is not supported; reduce "
                       f"several values at once with a te.comm_reducer (argmax-style), or "
                       f"write one compute per reduction")
    values = tuple(convert(v) for v in values)
    for value in values:
        _check_no_foreign_reduce_axes(name, value, set(axes))
    inputs, attrs = tuple(dict.fromkeys(inputs)), tuple((attrs or {}).items())
    if len(values) == 1:
        op = ComputeOp(axes, values[0], inputs, attrs, tag=tag)
        return Tensor(Buffer(name, shape, values[0].dtype), op, next(_creation_order))
    outputs = tuple(Buffer(f"{name}_v{j}", shape, v.dtype) for j, v in enumerate(values))
    op = ComputeOp(axes, values, inputs, attrs, outputs, name, tag)
    return [Tensor(b, op, next(_creation_order)) for b in outputs]


def _evaluate(fcompute, axes):
    """The body `fcompute` gives on `axes`, and the tensors it read."""
    _recording.append([])
    try:
        body = fcompute(*axes)
    finally:
        inputs = _recording.pop()
    return body, inputs


def _reduce_axes(body) -> tuple:
    from sched.compute.comm_reducer import TupleReduce
    from sched.compute.reduction import Reduce

    return body.axes if isinstance(body, Reduce | TupleReduce) else ()


_PROBE = "\x00axis"      # no variable a user makes has this name


def _variable_names(body) -> set[str]:
    """The names of the variables in a compute's body (`_variables`)."""
    return {v.name for v in _variables(body)}


def _variables(body) -> list[Var]:
    """Every occurrence of a variable in a compute's body: an expression, a reducer (its
    values, condition, init and axes' bounds), or a list of those."""
    from sched.compute.comm_reducer import TupleReduce
    from sched.compute.reduction import Reduce

    exprs = []
    for part in body if isinstance(body, list | tuple) else (body,):
        if isinstance(part, Reduce):
            exprs += [part.source, part.condition, part.init]
        elif isinstance(part, TupleReduce):
            exprs += [*part.sources, part.condition]
        else:
            exprs.append(part)
        exprs += [b for axis in _reduce_axes(part) for b in (axis.dom.min, axis.dom.extent)]
    return [v for e in exprs if e is not None for v in collect(convert(e), Var)]


def _all_reduce_axes(body) -> list:
    """The reduce axes of the body's reducers (several for a list of values)."""
    return [axis for part in (body if isinstance(body, list | tuple) else (body,))
            for axis in _reduce_axes(part)]


def _symbolic_names(body, shape, inputs) -> set[str]:
    """The names of the symbolic dims in the shapes a compute touches."""
    dims = [*shape, *(d for t in inputs for d in t.buffer.shape),
            *(b for axis in _reduce_axes(body) for b in (axis.dom.min, axis.dom.extent))]
    return {v.name for dim in dims for v in free_vars(convert(dim))}


def _fresh(name: str, taken: set[str]) -> str:
    index = 1
    while f"{name}_{index}" in taken:
        index += 1
    taken.add(f"{name}_{index}")
    return f"{name}_{index}"


def _check_reduce_axis_names(name: str, body, symbolic: set[str]) -> None:
    """A reduce axis named like a symbolic dim or like another variable the body reads would
    be that variable in the function, and two reduce axes of one name would be one variable
    (`A[i, k1, k2]` read as `A[i, k, k]`): refused, since the user named them (a compute's
    own axes are renamed instead); so is an axis listed twice in one reducer."""
    names = [axis.var.name for axis in _all_reduce_axes(body)]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated and len(set(map(id, _all_reduce_axes(body)))) > len(set(names)):
        raise DSLError(f"compute '{name}': two reduce axes are named '{repeated[0]}', and a "
                       f"function knows its variables by name: name them apart "
                       f"(te.reduce_axis(..., name=...))")
    for part in body if isinstance(body, list | tuple) else (body,):
        listed = [id(axis) for axis in _reduce_axes(part)]
        if len(listed) != len(set(listed)):
            raise DSLError(f"compute '{name}': a reduce axis is listed twice in one reducer's "
                           f"axis=: list each once")
    for axis in _reduce_axes(body):
        if axis.var.name in symbolic:
            raise DSLError(
                f"compute '{name}': reduce axis '{axis.var.name}' has the name of a symbolic "
                f"dim of a shape, and a function knows its variables by name: name the axis "
                f"otherwise (te.reduce_axis(..., name=...))")
    reduce_vars = {axis.var.name: axis.var for axis in _all_reduce_axes(body)}
    for variable in _variables(body):
        own = reduce_vars.get(variable.name)
        if own is not None and variable is not own:
            raise DSLError(f"compute '{name}': the body reads a variable named like its reduce "
                           f"axis '{variable.name}', and a function knows its variables by "
                           f"name: name one of them otherwise")


def _check_no_foreign_reduce_axes(name: str, expr: Expr, allowed: set[Var]) -> None:
    """A reduce axis in the body that is not reduced by this compute's reducer is an error."""
    for variable in free_vars(expr):
        if variable not in allowed and _reduce_axis_vars.get(id(variable)) is variable:
            raise DSLError(
                f"compute '{name}': reduce axis '{variable.name}' is used outside a reducer; "
                f"use it only inside te.sum/te.max/te.min(..., axis={variable.name}), and make "
                f"that reducer the whole body of the compute")

"""A reference interpreter: run a PrimFunc's block IR directly, with numpy, no compiler.

    import numpy as np
    import sched

    func = sched.parse('''
    @T.prim_func
    def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = A[vi] * T.float32(2)
    ''')
    a = np.arange(8, dtype=np.float32)
    b = np.zeros(8, dtype=np.float32)
    sched.interpret(func, a, b)                  # b is now 2 * a
    sched.interpret(func, a, b, thread_order="shuffle", seed=3)

It takes the arguments a built kernel takes (numpy arrays for buffers, written in place;
Python numbers for scalar parameters; symbolic dims bound from the shapes) and gives the
result the IR defines:

- loops of every kind; parallel, vectorized and thread-bound loops (blockIdx, threadIdx,
  vthread) run their iterations in `thread_order`: "forward", "reverse" or "shuffle" (a fresh
  permutation, from `seed`, each time the loop starts), or "snapshot" (forward, each
  iteration of a parallel or vectorized loop starting from the memory at the loop's entry,
  the iterations' changes applied in order at its end: a read-modify-write of one element in
  two iterations keeps one update, as racing threads may). A legal concurrent loop gives the
  same result in every order: running a schedule in all four is a cheap race detector. A
  thread-bound loop that a reduce iteration variable of a block with an `init` runs over (a
  reduction across threads, which TVM lowers to an allreduce) runs its first iteration first
  and the others in `thread_order`: the init, at the reduction's first iteration, lands before
  every other thread's update, so the element is the init combined with all of them;
- blocks: bindings evaluated and checked against each iteration variable's domain,
  `T.where` predicates, `init` run when every reduce iteration variable is at its domain's
  minimum (always, when the block has none), `alloc_buffers` fresh at each block instance and
  filled with NaN (integers: 0x5A5A...) so that a read before a write shows in the result,
  nested blocks;
- views (`T.Buffer(..., data=A.data)`): every buffer is a row-major view of its storage's flat
  memory; `T.decl_buffer`/`Allocate`, LetStmt, IfThenElse, Select (only the chosen side runs),
  while loops; `T.assume(c)` checked: a false one raises InterpretError (TVM leaves it
  undefined);
- a barrier (`T.tvm_storage_sync`, lowered GPU TIR) raises InterpretError: threads run one
  after another here, with no barrier semantics (the C target has them);
- index arithmetic (loop bounds, conditions of `if`/`while`, `T.where` predicates, bindings,
  indices, shapes) on index values (loop variables, sizes, constants) is exact, as the
  compiled code computes it (in int64) and the analyses read it (integers), and narrowed to
  its type where an index, a cast or a let takes it: `if i * 100000000 > 0` holds for every
  i > 0 (index_arithmetic.py);
- arithmetic in the dtype elsewhere (what a store writes): integers wrap (int32
  wraparound), `//` and `%` floor, `/` on integers truncates as in C, an integer division or
  modulo by 0 gives 0 (numpy's result; the C target's helpers agree), float32 rounds at
  every operation, float16 and bfloat16 compute in float32 and round when cast or stored (as
  the C target), float min/max propagate NaN (else `a` on ties, as the C target); a
  float cast to an integer type truncates toward zero, NaN gives 0 and a value beyond the
  type's range (inf included) its nearest end (CUDA's conversion, which the C target
  implements: C leaves it undefined);
  math intrinsics through numpy.

Any access outside its buffer raises `OutOfBoundsError` (an IndexError) naming the buffer, the
indices as written and as values, the block and the statement; a negative index is never
wrapped. A binding outside its domain raises `InterpretError`.

The interpreter shares no code with `sched.polyhedral`, the lowering or the C target: it is
the independent oracle the fuzzers compare schedules with. Each function is translated once to
a Python function (cached), so small programs run in milliseconds.
"""

from __future__ import annotations

import functools

import numpy as np

from sched.arguments import checked_scalar
from sched.interpreter.codegen import Emitter, Program
from sched.interpreter.runtime import (
    InterpretError,
    LoopOrder,
    OutOfBoundsError,
    numpy_dtype,
    to_dtype,
)
from sched.ir.nodes import Buffer, PrimFunc

__all__ = ["InterpretError", "OutOfBoundsError", "interpret", "python_source"]


@functools.lru_cache(maxsize=128)
def _compile(func: PrimFunc) -> tuple[Program, object]:
    program = Emitter(func).function()
    code = compile(program.source, f"<sched.interpret {func.name}>", "exec")
    namespace = dict(program.globals)
    sites = program.sites

    def out_of_bounds(site: int, values) -> None:
        raise OutOfBoundsError(sites[site].describe(values))

    def bad_binding(block, values) -> None:
        domains = ", ".join(f"{iv.var.name} in [{iv.dom.min}, {iv.dom.min} + {iv.dom.extent})"
                            for iv in block.iter_vars)
        raise InterpretError(f"block '{block.name}': a binding is outside its domain: "
                             f"values {tuple(values)} for {domains}")

    def bad_shape(k: int, d: int, dim: str) -> None:
        buffer = func.buffers[k]
        raise InterpretError(f"buffer {buffer.name}: dimension {d} must be {dim}, which the "
                             f"other arguments fix differently")

    namespace.update(_oob=out_of_bounds, _bad_binding=bad_binding, _bad_shape=bad_shape)
    exec(code, namespace)
    return program, namespace["_kernel"]


def python_source(func: PrimFunc) -> str:
    """The Python function `interpret` runs for `func` (for debugging the interpreter)."""
    return _compile(func)[0].source


def _flat_storage(position: int, buffer: Buffer, array) -> np.ndarray:
    if not isinstance(array, np.ndarray):
        raise TypeError(f"interpret: argument {position} '{buffer.name}' must be a numpy array, "
                        f"got {type(array).__name__}")
    expected = numpy_dtype(buffer.dtype)
    if array.dtype != expected:
        raise TypeError(f"interpret: argument {position} '{buffer.name}': expected dtype "
                        f"{expected}, got {array.dtype}")
    if array.ndim != len(buffer.shape):
        raise ValueError(f"interpret: argument {position} '{buffer.name}': expected "
                         f"{len(buffer.shape)} dimensions, got shape {array.shape}")
    if not array.flags.c_contiguous:
        raise ValueError(f"interpret: argument {position} '{buffer.name}' must be C-contiguous "
                         f"(np.ascontiguousarray)")
    return array.reshape(-1)


def interpret(func: PrimFunc, *args, thread_order: str = "forward", seed: int = 0) -> None:
    """Runs `func` on `args` (in parameter order), writing its output buffers in place.

    See the module docstring for the semantics. Raises OutOfBoundsError on an access outside a
    buffer, InterpretError on a binding outside its domain or inconsistent shapes.

    >>> import numpy as np
    >>> import sched
    >>> from sched import compute as te
    >>> A = te.placeholder((4,), name="A")
    >>> func = te.create_prim_func([A, te.compute((4,), lambda i: A[i] * 2.0, name="B")])
    >>> b = np.zeros(4, np.float32)
    >>> sched.interpret(func, np.arange(4, dtype=np.float32), b)
    >>> b
    array([0., 2., 4., 6.], dtype=float32)
    >>> shifted = te.create_prim_func([A, te.compute((4,), lambda i: A[i + 1], name="B")])
    >>> sched.interpret(shifted, np.zeros(4, np.float32), b)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sched.interpreter.runtime.OutOfBoundsError: ... buffer A ... index [v_i + 1] = [4] ...
    """
    order = LoopOrder(thread_order, seed)
    if len(args) != len(func.params):
        raise TypeError(f"interpret: {func.name} takes {len(func.params)} arguments "
                        f"({', '.join(p.name for p in func.params)}), got {len(args)}")
    program, kernel = _compile(func)
    arrays, scalars, shapes = [], [], []
    for position, (param, arg) in enumerate(zip(func.params, args)):
        if isinstance(param, Buffer):
            arrays.append(_flat_storage(position, param, arg))
            shapes.append(tuple(int(d) for d in arg.shape))
        else:
            # checked as a kernel checks it (a float for an int32, 2**33 + 1 or a str were
            # converted to another value: audit helper-156)
            scalars.append(to_dtype(checked_scalar(position, param, arg), param.dtype))
    with np.errstate(all="ignore"):
        try:
            kernel(arrays, scalars, shapes, order)
        except (OutOfBoundsError, InterpretError):
            raise
        except IndexError as error:       # a view reaching past its storage
            raise OutOfBoundsError(f"an access through a buffer view reaches past its "
                                   f"storage: {error}") from None


"""Block IR to the source of one Python function that runs it (see `sched.interpret`).

Each variable and buffer gets a fresh Python name per binding site (`v3_i`, `s1_A`), so user
names never reach Python text and shadowing follows the IR's scopes. Every buffer access checks
each index against its dimension (`0 <= i < n`, never numpy's negative wrap) and names the
access on failure. Shares nothing with the lowering or the polyhedral model: block semantics
(bindings, predicates, `init`, allocations, views) are implemented here from their definitions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sched.interpreter import runtime
from sched.interpreter.index_arithmetic import IndexArithmetic
from sched.interpreter.runtime import InterpretError
from sched.ir.dtype import bits, is_bool, is_float, is_int
from sched.ir.functor import collect, free_vars
from sched.ir.nodes import (
    EXTERN_CALLS,
    VTHREAD_TAGS,
    Allocate,
    Assume,
    Barrier,
    BinaryOp,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    Expr,
    FloatImm,
    For,
    IfThenElse,
    IntImm,
    LetStmt,
    Not,
    PrimFunc,
    Select,
    SeqStmt,
    Stmt,
    Var,
    While,
)

CONCURRENT_KINDS = ("parallel", "vectorized", "thread_binding")

_INT_OPS = {"add": "+", "sub": "-", "mul": "*"}
# the operations index arithmetic is made of (exact on int32 in an index; see Emitter.index)
_FLOAT_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_INT_CALLS = {"bitwise_and": "({} & {})", "bitwise_or": "({} | {})", "bitwise_xor": "({} ^ {})",
              "bitwise_not": "(~{})", "shift_left": "_rt.shift_left({}, {}, {bits})",
              "shift_right": "_rt.shift_right({}, {}, {bits})"}
_BIT_CALLS = {"popcount": "_rt.popcount({}, {source!r})", "clz": "_rt.clz({}, {source!r})",
              "reinterpret": "_rt.reinterpret({}, {source!r}, {target!r})",
              "ldexp": "_rt.ldexp({}, {})"}
_NUMPY_MATH = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "sin": "sin",
               "cos": "cos", "floor": "floor", "ceil": "ceil", "round": "rint", "pow": "power",
               "asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
               "acosh": "arccosh", "atanh": "arctanh", "atan2": "arctan2",
               **{name: name for name in ("exp2", "log2", "log10", "log1p", "tan", "sinh",
                                          "cosh", "fmod", "hypot", "copysign", "nextafter")}}


@dataclass
class Site:
    """One buffer access of the program, for error messages."""

    kind: str                 # "load" or "store"
    buffer: Buffer
    indices: tuple[Expr, ...]
    block: str
    statement: object         # the IR statement (or a description) the access belongs to

    def describe(self, values) -> str:
        shape = ", ".join(str(d) for d in self.buffer.shape)
        written = ", ".join(str(i) for i in self.indices)
        got = ", ".join(str(v) for v in values)
        statement = self.statement
        if not isinstance(statement, str):
            text = statement.script().strip().splitlines()
            statement = text[0] + (" ..." if len(text) > 1 else "")
        view = f" (a view of {self.buffer.data})" if self.buffer.data is not None else ""
        return (f"out-of-bounds {self.kind} of buffer {self.buffer.name}{view} with shape "
                f"({shape}): index [{written}] = [{got}] in block '{self.block}', "
                f"statement `{statement}`")


@dataclass
class Program:
    """The generated source, the globals it runs with and its access sites."""

    source: str
    globals: dict
    sites: list[Site] = field(default_factory=list)


def _reduces_across_threads(loop: For) -> bool:
    """Whether `loop` is thread-bound and a reduce iteration variable of a block with an init
    runs over it: a reduction across threads. Its first iteration runs before the others,
    so the init, which runs at the reduction's first iteration, comes before every other
    thread's update: the element is the init combined with every iteration, in some order (the
    meaning TVM gives a thread-bound reduce loop, an allreduce)."""
    if loop.kind != "thread_binding":
        return False
    for realize in collect(loop.body, BlockRealize):
        if realize.block.init is None:
            continue
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if iv.kind == "reduce" and loop.loop_var in free_vars(value):
                return True
    return False


def _may_leave_int32(loop: For) -> bool:
    """Whether an int32 loop's variable may take values beyond int32 (the compiled loop's is
    then int64): unless it starts at a constant >= 0 and ends at a constant within int32 or
    at an int32 size."""
    if loop.loop_var.dtype != "int32":
        return False
    start, extent = loop.min, loop.extent
    if not (isinstance(start, IntImm) and start.value >= 0):
        return True
    if isinstance(extent, IntImm):
        return start.value + extent.value - 1 > 2 ** 31 - 1
    return not (start.value == 0 and isinstance(extent, Var) and extent.dtype == "int32")


def _ident(prefix: str, number: int, name: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9_]", "", name.encode("ascii", "ignore").decode())[:20]
    return f"{prefix}{number}_{clean}"


class Emitter(IndexArithmetic):
    """Writes the Python function for one PrimFunc."""

    def __init__(self, func: PrimFunc) -> None:
        self.func = func
        self.lines: list[str] = []
        self.depth = 1
        self.counter = 0
        self.vars: dict[str, str] = {}         # IR variable name -> Python name
        self.storage: dict[str, str] = {}      # storage name -> Python name of its flat array
        self.sites: list[Site] = []
        self.block = "root"
        self.statement: object = "function entry"
        self.globals: dict = {"_np": runtime.np, "_rt": runtime}
        self.index_vars: set[str] = set()      # see index_arithmetic.py
        self.wide_vars: set[str] = set()       # loop and let variables that may leave int32
        self.wide_lets: set[str] = set()       # the lets among them

    # -- names --------------------------------------------------------------------------------

    def fresh(self, prefix: str, name: str = "") -> str:
        self.counter += 1
        return _ident(prefix, self.counter, name)

    def constant(self, value, hint: str = "c") -> str:
        name = self.fresh("_" + hint)
        self.globals[name] = value
        return name

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    # -- expressions --------------------------------------------------------------------------

    def expr(self, node: Expr) -> str:
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise NotImplementedError(f"interpret: no semantics for {type(node).__name__}")
        return method(node)

    def expr_Var(self, node: Var) -> str:
        if node.name not in self.vars:
            raise InterpretError(f"variable {node.name!r} is used where it is not defined "
                                 f"(block '{self.block}')")
        if not self.exact and node.name in self.wide_vars:
            return runtime.wrap_source("int32", self.vars[node.name])  # data takes it narrowed
        return self.vars[node.name]

    def narrowed_var(self, node: Expr, text: str) -> str:
        """`text` (the value of `node`) narrowed to int32 where `node` is a loop or let
        variable that may leave int32 (index_arithmetic.py)."""
        if isinstance(node, Var) and node.name in self.wide_vars:
            return runtime.wrap_source("int32", text)
        return text

    def expr_IntImm(self, node: IntImm) -> str:
        if is_bool(node.dtype):
            return "True" if node.value else "False"
        return f"({runtime.wrap_int(node.value, node.dtype)})"

    def expr_FloatImm(self, node: FloatImm) -> str:
        return self.constant(runtime.to_dtype(node.value, node.dtype))

    def expr_Cast(self, node: Cast) -> str:
        source, target = node.value.dtype, node.dtype
        if target == "int64" and isinstance(node.value, Var) and \
                node.value.name in self.wide_vars - self.wide_lets:
            return self.vars[node.value.name]    # an int64 view of a wide loop keeps it
        value = self.expr(node.value)
        if source == target:                    # (the compiled code drops it)
            return value
        # a wide variable is narrowed where a cast takes it (an int32 let is its int32 value
        # even under a cast to int64, as the model reads it: audit helper-117)
        value = self.narrowed_var(node.value, value)
        if is_bool(target):
            return f"({value} != 0)"
        if not is_float(target) and not is_float(source):
            return runtime.wrap_source(target, f"int({value})")
        return f"_rt.to_dtype({value}, {target!r})"

    def expr_Not(self, node: Not) -> str:
        return f"(not {self.expr(node.a)})"

    def expr_Select(self, node: Select) -> str:
        return (f"({self.expr(node.true_value)} if {self.expr(node.condition)} "
                f"else {self.expr(node.false_value)})")

    def expr_BinaryOp(self, node: BinaryOp) -> str:
        op, dtype = node.op, node.a.dtype
        if op in ("and", "or"):
            return f"({self.expr(node.a)} {op} {self.expr(node.b)})"
        if op in _COMPARE:          # index values compare exactly (index_arithmetic.py)
            return f"({self.compared(node.a)} {_COMPARE[op]} {self.compared(node.b)})"
        if self.is_exact(node):
            return self.narrowed_exact(node)
        a, b = self.expr(node.a), self.expr(node.b)
        if is_float(dtype):
            if op in _FLOAT_OPS:
                return f"({a} {_FLOAT_OPS[op]} {b})"
            return f"_rt.float_{op}({a}, {b})"
        if op in ("min", "max"):
            return f"{op}({a}, {b})"
        if op == "floormod":
            return f"_rt.floormod({a}, {b})"
        if op == "div":
            return runtime.wrap_source(dtype, f"_rt.truncated_div({a}, {b})")
        if op == "floordiv":
            return runtime.wrap_source(dtype, f"_rt.floordiv({a}, {b})")
        text = runtime.wrap_source(dtype, f"{a} {_INT_OPS[op]} {b}")
        return f"bool({text})" if is_bool(dtype) else text

    def expr_Call(self, node: Call) -> str:
        if node.op in EXTERN_CALLS or node.op == "address_of":
            raise NotImplementedError(
                f"interpret: T.{node.op} calls C or CUDA code the reference interpreter cannot "
                f"run; check an opaque block with sched.build(..., extern_c=...) instead")
        if self.is_exact(node):                    # a shift by a constant, exactly
            return self.narrowed_exact(node)
        args = [self.expr(arg) for arg in node.args]
        if node.op in _BIT_CALLS:     # sched/ir/bit_intrinsics.py
            return _BIT_CALLS[node.op].format(*args, source=node.args[0].dtype,
                                              target=node.dtype)
        if node.op in _INT_CALLS:     # Python ints are two's complement of unbounded width
            return runtime.wrap_source(node.dtype, _INT_CALLS[node.op].format(
                *args, bits=bits(node.dtype)))
        if node.op == "abs":
            if is_float(node.dtype):
                return f"_np.abs({args[0]})"
            return runtime.wrap_source(node.dtype, f"abs({args[0]})")
        if not is_float(node.dtype):
            raise NotImplementedError(f"interpret: T.{node.op} on {node.dtype}")
        if node.op in _NUMPY_MATH:
            return f"_np.{_NUMPY_MATH[node.op]}({', '.join(args)})"
        return f"_rt.{node.op}({', '.join(args)})"

    def expr_BufferLoad(self, node: BufferLoad) -> str:
        element = self.access("load", node.buffer, node.indices)
        dtype = node.buffer.dtype
        if is_bool(dtype):
            return f"bool({element})"
        if dtype == "float16":
            return f"_np.float32({element})"
        if dtype == "bfloat16":
            return f"_rt.bfloat16_to_float({element})"
        if is_float(dtype):
            return element
        return f"int({element})"

    def access(self, kind: str, buffer: Buffer, indices: tuple[Expr, ...]) -> str:
        """`storage[flat index]`, with every index checked against its dimension."""
        if buffer.storage_name not in self.storage:
            raise InterpretError(f"buffer {buffer.name!r} (storage {buffer.storage_name!r}) is "
                                 f"used where it is not allocated (block '{self.block}')")
        if len(indices) != len(buffer.shape):
            raise InterpretError(f"buffer {buffer.name} has {len(buffer.shape)} dimensions, "
                                 f"accessed with {len(indices)} indices")
        storage = self.storage[buffer.storage_name]
        if not indices:
            return f"{storage}[0]"
        site = len(self.sites)
        self.sites.append(Site(kind, buffer, indices, self.block, self.statement))
        codes = [self.index(i) for i in indices]
        temps = [self.fresh("_t") for _ in indices]
        dims = [self.index(d) for d in buffer.shape]
        checks = " and ".join(f"0 <= ({t} := {c}) < {d}" for t, c, d in zip(temps, codes, dims))
        flat = temps[0]
        for t, d in zip(temps[1:], dims[1:]):
            flat = f"({flat}) * {d} + {t}"
        return f"{storage}[{flat} if {checks} else _oob({site}, ({', '.join(codes)},))]"

    # -- statements ---------------------------------------------------------------------------

    def stmt_Evaluate(self, node) -> None:
        self.data(node.value)          # refused there (see expr_Call)

    def stmt(self, node: Stmt) -> None:
        method = getattr(self, "stmt_" + type(node).__name__, None)
        if method is None:
            raise NotImplementedError(f"interpret: no semantics for {type(node).__name__}")
        method(node)

    def body(self, node: Stmt | None) -> None:
        """`node` one level deeper (a `pass` when it emits nothing)."""
        self.depth += 1
        before = len(self.lines)
        if node is not None:
            self.stmt(node)
        if len(self.lines) == before:
            self.line("pass")
        self.depth -= 1

    def scoped(self, emit) -> None:
        saved = dict(self.vars), dict(self.storage), set(self.index_vars), set(self.wide_vars)
        emit()
        self.vars, self.storage, self.index_vars, self.wide_vars = saved

    def stmt_SeqStmt(self, node: SeqStmt) -> None:
        for stmt in node.stmts:
            self.stmt(stmt)

    def stmt_BufferStore(self, node: BufferStore) -> None:
        self.statement = node
        value = self.narrowed_var(node.value, self.data(node.value))
        if node.buffer.dtype == "bfloat16":
            value = f"_rt.float_to_bfloat16({value})"
        self.line(f"{self.access('store', node.buffer, node.indices)} = {value}")

    def stmt_For(self, node: For) -> None:
        start, extent = self.bound(node.min), self.bound(node.extent)
        var = self.fresh("v", node.loop_var.name)
        concurrent = node.kind in CONCURRENT_KINDS and node.thread_tag not in VTHREAD_TAGS
        order = "_order" if concurrent else "range"     # a virtual thread is a serial loop
        # a CPU concurrent loop's iterations may each start from the state at its entry
        # (LoopOrder "snapshot": a lost update shows); thread loops share memory at barriers
        snapshot = None
        if node.kind in ("parallel", "vectorized"):
            snapshot = self.fresh("snap", node.loop_var.name)
            storages = ", ".join(dict.fromkeys(self.storage.values()))
            self.line(f"{snapshot} = _order.enter(({storages}{',' if storages else ''}))")
        if order == "range":
            self.line(f"for {var} in range({start}, {start} + {extent}):")
        elif _reduces_across_threads(node):
            self.line(f"for {var} in _order({start}, {extent}, first=True):")
        else:
            self.line(f"for {var} in _order({start}, {extent}):")

        def emit():
            self.vars[node.loop_var.name] = var
            self.index_vars.add(node.loop_var.name)
            if _may_leave_int32(node):
                self.wide_vars.add(node.loop_var.name)
            else:
                self.wide_vars.discard(node.loop_var.name)
            if snapshot is None:
                self.body(node.body)
                return
            self.depth += 1
            self.line(f"_order.begin({snapshot})")
            self.depth -= 1
            self.body(node.body)
            self.depth += 1
            self.line(f"_order.end({snapshot})")
            self.depth -= 1
        self.scoped(emit)
        if snapshot is not None:
            self.line(f"_order.leave({snapshot})")

    def stmt_IfThenElse(self, node: IfThenElse) -> None:
        self.statement = f"if {node.condition}"
        self.line(f"if {self.index(node.condition)}:")
        self.scoped(lambda: self.body(node.then_body))
        if node.else_body is not None:
            self.line("else:")
            self.scoped(lambda: self.body(node.else_body))

    def stmt_While(self, node: While) -> None:
        self.statement = f"while {node.condition}"
        self.line(f"while {self.index(node.condition)}:")
        self.scoped(lambda: self.body(node.body))

    def stmt_Assume(self, node: Assume) -> None:
        """A false assumption makes the program undefined (TVM's definition): said here."""
        self.statement = f"T.assume({node.condition})"
        text = repr(f"T.assume({node.condition}) does not hold (block '{self.block}')")
        self.line(f"if not ({self.index(node.condition)}):")
        self.line(f"    raise _rt.InterpretError({text})")

    def stmt_LetStmt(self, node: LetStmt) -> None:
        self.statement = f"{node.var.name} = {node.value}"
        index_value = self.is_index_value(node.value)
        # an int32 let of an index value holds it exactly, as the compiled code's int64
        # variable does where it may leave int32 (lower/wide_integers.py), and is narrowed
        # where data or a cast takes it; any other let is narrowed to its type
        wide = index_value and node.var.dtype == "int32"
        value = self.exact_index(node.value) if wide else \
            self.narrowed_var(node.value, self.index(node.value))

        def emit():
            var = self.fresh("v", node.var.name)
            self.line(f"{var} = {value}")
            self.vars[node.var.name] = var
            if index_value:
                self.index_vars.add(node.var.name)
            else:
                self.index_vars.discard(node.var.name)
            if wide:
                self.wide_vars.add(node.var.name)
                self.wide_lets.add(node.var.name)
            else:
                self.wide_vars.discard(node.var.name)
            self.stmt(node.body)
        self.scoped(emit)

    def allocate(self, buffer: Buffer) -> None:
        size = " * ".join(f"({self.index(d)})" for d in buffer.shape) or "1"
        name = self.fresh("s", buffer.name)
        self.line(f"{name} = _rt.allocate({size}, {buffer.dtype!r})")
        self.storage[buffer.name] = name

    def stmt_Allocate(self, node: Allocate) -> None:
        def emit():
            self.allocate(node.buffer)
            self.stmt(node.body)
        self.scoped(emit)

    def stmt_Barrier(self, node: Barrier) -> None:
        # a barrier orders the threads of a block, which run here one after another: its
        # semantics would need the threads interleaved (lowered GPU TIR, T.tvm_storage_sync)
        raise InterpretError("interpret: T.tvm_storage_sync (a barrier between a block's "
                             "threads) has no semantics here, where threads run one after "
                             "another; run the function on the C target, which splits "
                             "thread loops at barriers")

    def stmt_BlockRealize(self, node: BlockRealize) -> None:
        block = node.block
        outer_block = self.block
        self.statement = f"T.where({node.predicate}) of block {block.name}"
        guarded = not (isinstance(node.predicate, IntImm) and node.predicate.value)
        if guarded:
            self.line(f"if {self.index(node.predicate)}:")
            self.depth += 1
        # an int64 variable bound to int32 index arithmetic takes its exact value
        values = [runtime.wrap_source(iv.var.dtype, self.exact_index(v))
                  if iv.var.dtype == "int64" and v.dtype == "int32" and self.is_index_value(v)
                  else self.index(v) for iv, v in zip(block.iter_vars, node.iter_values)]
        domains = [(self.index(iv.dom.min), self.index(iv.dom.extent)) for iv in block.iter_vars]
        indices = {iv.var.name for iv, v in zip(block.iter_vars, node.iter_values)
                   if self.is_index_value(v)}
        self.scoped(lambda: self.block_body(block, values, domains, indices))
        if guarded:
            self.depth -= 1
        self.block = outer_block

    def block_body(self, block: Block, values: list[str], domains, indices: set[str]) -> None:
        """`indices`: the iteration variables bound to index values."""
        self.block = block.name
        self.index_vars.difference_update(iv.var.name for iv in block.iter_vars)
        self.index_vars.update(indices)
        names = []
        for iv, value in zip(block.iter_vars, values):
            names.append(self.fresh("v", iv.var.name))
            self.line(f"{names[-1]} = {value}")
        if names:
            checks = " and ".join(f"{lo} <= {v} < {lo} + {ext}"
                                  for v, (lo, ext) in zip(names, domains))
            site = self.constant(block, "block")
            self.line(f"if not ({checks}): _bad_binding({site}, ({', '.join(names)},))")
        for iv, name in zip(block.iter_vars, names):
            self.vars[iv.var.name] = name
        for buffer in block.alloc_buffers:
            self.allocate(buffer)
        if block.init is not None:
            first = [f"{name} == {lo}" for iv, name, (lo, _) in zip(block.iter_vars, names, domains)
                     if iv.kind == "reduce"]
            if first:
                self.line(f"if {' and '.join(first)}:")
                self.scoped(lambda: self.body(block.init))
            else:
                self.scoped(lambda: self.stmt(block.init))
        self.stmt(block.body)

    # -- the function -------------------------------------------------------------------------

    def function(self) -> Program:
        func = self.func
        self.lines.append("def _kernel(_arrays, _scalars, _shapes, _order):")
        scalars = [p for p in func.params if isinstance(p, Var)]
        for k, var in enumerate(scalars):
            name = self.fresh("v", var.name)
            self.line(f"{name} = _scalars[{k}]")
            self.vars[var.name] = name
            if is_int(var.dtype):
                self.index_vars.add(var.name)
        buffers = func.buffers
        for k, buffer in enumerate(buffers):       # bind symbolic dims from shapes
            for d, dim in enumerate(buffer.shape):
                if isinstance(dim, Var) and dim.name not in self.vars:
                    name = self.fresh("v", dim.name)
                    self.line(f"{name} = _shapes[{k}][{d}]")
                    self.vars[dim.name] = name
                    self.index_vars.add(dim.name)
        for k, buffer in enumerate(buffers):
            for d, dim in enumerate(buffer.shape):
                self.line(f"if {self.index(dim)} != _shapes[{k}][{d}]: "
                          f"_bad_shape({k}, {d}, {self.constant(str(dim))})")
            name = self.fresh("s", buffer.name)
            self.line(f"{name} = _arrays[{k}]")
            self.storage[buffer.name] = name
        self.stmt(func.body)
        self.line("return None")
        return Program("\n".join(self.lines) + "\n", self.globals, self.sites)

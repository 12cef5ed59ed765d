"""The TVMScript printer: `to_script(node)` writes IR as the Python a TVM user reads.

    @T.prim_func
    def scale(A: T.Buffer((128,), "float32"), B: T.Buffer((128,), "float32")):
        with T.block("root"):
            for i in range(128):
                with T.block("B"):
                    v_i = T.axis.remap("S", [i])
                    T.reads(A[v_i])
                    T.writes(B[v_i])
                    B[v_i] = A[v_i] * T.float32(2.0)

What it prints, `parser.parse` reads back: `parse(to_script(f)) == f` for every PrimFunc whose
names are Python identifiers and whose operands agree in dtype (as `verify` requires). Where
two spellings would do, it picks the one the parser maps back to the same node: an int32
constant is `5`, any other is typed (`T.int64(5)`); a range `[lo, lo + e)` prints its upper
bound simplified when that still gives back `e` (see `parse_regions.extent_between`); a let or a
buffer declaration that is not last in its sequence uses the `with` form, so that its body
does not swallow the statements after it.
"""

from __future__ import annotations

import json
import math
from contextlib import contextmanager

from sched.ir.dtype import INDEX_DTYPE
from sched.ir.functor import collect, free_vars
from sched.ir.module import IRModule
from sched.ir.nodes import (
    REINTERPRET,
    Allocate,
    Assume,
    AsyncCommit,
    AsyncCopy,
    AsyncWait,
    Barrier,
    BinaryOp,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Call,
    Cast,
    Evaluate,
    Expr,
    FloatImm,
    For,
    IfThenElse,
    IntImm,
    IterVar,
    LetStmt,
    Not,
    PrimFunc,
    Range,
    Select,
    SeqStmt,
    Stmt,
    StringImm,
    Var,
    While,
    const,
)
from sched.ir.parse_regions import extent_between
from sched.ir.simplify import simplify

# Python's precedence levels, lowest first: or, and, not, comparisons, + -, * / // %, unary -
_OR, _AND, _NOT, _COMPARE, _ADD, _MUL, _UNARY, _ATOM = 1, 2, 3, 4, 6, 7, 8, 10
_OPERATORS = {
    "or": ("or", _OR), "and": ("and", _AND),
    "eq": ("==", _COMPARE), "ne": ("!=", _COMPARE), "lt": ("<", _COMPARE),
    "le": ("<=", _COMPARE), "gt": (">", _COMPARE), "ge": (">=", _COMPARE),
    "add": ("+", _ADD), "sub": ("-", _ADD),
    "mul": ("*", _MUL), "div": ("/", _MUL), "floordiv": ("//", _MUL), "floormod": ("%", _MUL),
}
_LOOP_FUNCTIONS = {"serial": "serial", "parallel": "parallel", "vectorized": "vectorized",
                   "unrolled": "unroll", "thread_binding": "thread_binding"}
_AXIS_LETTERS = {"spatial": "S", "reduce": "R"}


def to_script(node) -> str:
    """`node` as TVMScript-style Python: a PrimFunc as a whole `@T.prim_func` function, any
    other node (expression, statement, buffer, region...) alone."""
    if isinstance(node, PrimFunc):
        return _Printer().function(node)
    if isinstance(node, IRModule):
        return _module(node)
    if isinstance(node, Expr):
        return _text(node)
    if isinstance(node, Block):
        node = BlockRealize(tuple(iv.var for iv in node.iter_vars), const(True, "bool"), node)
    if isinstance(node, Stmt):
        printer = _Printer()
        printer.stmt(node)
        return "\n".join(printer.lines)
    if isinstance(node, Buffer):
        return f"{node.name} = T.Buffer({_buffer_args(node)})"
    if isinstance(node, BufferRegion):
        return _region(node)
    if isinstance(node, Range):
        return _slice(node)
    if isinstance(node, IterVar):
        return f"{node.var.name} = T.axis.{node.kind}({_dom(node.dom)})"
    raise TypeError(f"to_script: not an IR node: {node!r}")


def _module(mod: IRModule) -> str:
    """`@I.ir_module class Module:`, each function a `@T.prim_func` method."""
    lines = ["# from sched.script import I, T", "", "@I.ir_module", f"class {mod.name}:"]
    for index, func in enumerate(mod.values()):
        text = _Printer().function(func).split("\n")
        body = text[text.index("@T.prim_func"):]
        lines += ([""] if index else []) + ["    " + line if line else line for line in body]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Expressions


def _text(e: Expr) -> str:
    return _expr(e)[0]


def _expr(e: Expr) -> tuple[str, int]:
    """The text of `e` and the precedence of its outermost operator."""
    rule = _EXPRESSIONS.get(type(e))
    if rule is None:
        raise TypeError(f"to_script: no printing rule for {type(e).__name__}")
    return rule(e)


def _int(e: IntImm) -> tuple[str, int]:
    if e.dtype == "bool":
        return f"T.bool({bool(e.value)})", _ATOM            # T.bool(True)
    if e.dtype == INDEX_DTYPE:
        return str(e.value), _UNARY if e.value < 0 else _ATOM   # 5, -5
    return f"T.{e.dtype}({e.value})", _ATOM                 # T.int64(5)


def _float(e: FloatImm) -> tuple[str, int]:
    value = repr(e.value) if math.isfinite(e.value) else f'"{e.value}"'
    return f"T.{e.dtype}({value})", _ATOM                   # T.float32(0.5), T.float32("inf")


def _binary(e: BinaryOp) -> tuple[str, int]:
    if e.op in ("min", "max"):
        return f"T.{e.op}({_text(e.a)}, {_text(e.b)})", _ATOM
    symbol, level = _OPERATORS[e.op]
    left, left_level = _expr(e.a)
    right, right_level = _expr(e.b)
    # left-associative: (a + b) + c needs no parentheses, a - (b - c) does; comparisons chain
    # in Python, so a comparison operand of a comparison is always parenthesized
    if left_level < level or left_level == level == _COMPARE:
        left = f"({left})"
    if right_level <= level:
        right = f"({right})"
    return f"{left} {symbol} {right}", level


def _not(e: Not) -> tuple[str, int]:
    operand, level = _expr(e.a)
    return f"not {operand if level >= _NOT else f'({operand})'}", _NOT


def _call(e: Call) -> str:
    """`T.exp(x)`; an opaque call or a bit cast with its result dtype first, as TVM prints
    them: `T.call_extern("float32", "f", x)` (`T.call_packed("f", x)` has none),
    `T.reinterpret("int32", x)`."""
    args = [_text(a) for a in e.args]
    if e.op in ("call_extern", "call_pure_extern", REINTERPRET):
        args.insert(0, json.dumps(e.dtype))
    return f"T.{e.op}({', '.join(args)})"


def _indices(indices) -> str:
    return ", ".join(_text(i) for i in indices) if indices else "()"


_EXPRESSIONS = {
    Var: lambda e: (e.name, _ATOM),
    IntImm: _int,
    FloatImm: _float,
    BinaryOp: _binary,
    Not: _not,
    Cast: lambda e: (f'T.Cast("{e.dtype}", {_text(e.value)})', _ATOM),
    Select: lambda e: (f"T.if_then_else({_text(e.condition)}, {_text(e.true_value)}, "
                       f"{_text(e.false_value)})", _ATOM),
    Call: lambda e: (_call(e), _ATOM),
    StringImm: lambda e: (json.dumps(e.value), _ATOM),
    BufferLoad: lambda e: (f"{e.buffer.name}[{_indices(e.indices)}]", _ATOM),
}


# --------------------------------------------------------------------------------------------
# Ranges, regions, buffers, annotations


def _upper(lo: Expr, extent: Expr) -> Expr:
    """The upper bound to print for [lo, lo + extent): simplified (`0:128`, `vi:vi + 4`) when
    the parser gives back `extent` from it, else `lo + extent` as is."""
    written = BinaryOp("add", lo, extent)
    upper = simplify(written)
    try:
        return upper if extent_between(lo, upper) == extent else written
    except TypeError:                                        # operands of two dtypes
        return written


def _bounds(lo: Expr, extent: Expr) -> str:
    """`extent` when `lo` is 0, else `lo, hi`."""
    if lo == const(0, extent.dtype):
        return _text(extent)
    return f"{_text(lo)}, {_text(_upper(lo, extent))}"


def _dom(dom: Range) -> str:
    bounds = _bounds(dom.min, dom.extent)
    return bounds if dom.min == const(0, dom.extent.dtype) else f"({bounds})"


def _slice(r: Range) -> str:
    if r.extent == const(1, r.min.dtype):
        return _text(r.min)
    return f"{_text(r.min)}:{_text(_upper(r.min, r.extent))}"


def _region(region: BufferRegion) -> str:
    return f"{region.buffer.name}[{', '.join(map(_slice, region.region)) or '()'}]"


def _buffer_args(buffer: Buffer) -> str:
    """`(128, n), "float32"`, then `scope=` and `data=` when they are not the defaults."""
    dims = [_text(d) for d in buffer.shape]
    shape = f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"
    text = f'{shape}, "{buffer.dtype}"'
    if buffer.scope != "global":
        text += f', scope="{buffer.scope}"'
    if buffer.data is not None:
        text += f", data={buffer.data}.data"
    return text


def _literal(value) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, tuple):                    # a list-valued annotation
        return "[" + ", ".join(repr(v) for v in value) + "]"
    if isinstance(value, float) and not math.isfinite(value):
        return f'T.float64("{value}")'
    return repr(value)


def _annotations(pairs) -> str:
    return "{" + ", ".join(f"{json.dumps(k)}: {_literal(v)}" for k, v in pairs) + "}"


# --------------------------------------------------------------------------------------------
# Statements and functions


def _is_plain(loop: For) -> bool:
    """A serial loop from 0 with nothing else to say: `range(n)` or a level of `T.grid`."""
    return (loop.kind == "serial" and not loop.annotations and loop.thread_tag is None
            and loop.loop_var.dtype == loop.extent.dtype
            and loop.min == const(0, loop.extent.dtype))


class _Printer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.indent = 0
        self.loops: dict[Var, For] = {}                      # enclosing loops, by variable
        self.depth = 0                                       # enclosing loops and blocks

    def emit(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    @contextmanager
    def nested(self, loops: tuple[For, ...] = (), depth: int = 0):
        saved = dict(self.loops)
        self.loops.update({loop.loop_var: loop for loop in loops})
        self.indent += 1
        self.depth += depth
        try:
            yield
        finally:
            self.loops = saved
            self.indent -= 1
            self.depth -= depth

    def function(self, func: PrimFunc) -> str:
        params = []
        handles = _handle_names(func)
        for param in func.params:
            if isinstance(param, Var):
                params.append(f"{param.name}: T.{param.dtype}")
            elif all(isinstance(dim, IntImm) for dim in param.shape):
                params.append(f"{param.name}: T.Buffer({_buffer_args(param)})")
            else:
                params.append(f"{handles[param]}: T.handle")
        self.lines += ["# from sched.script import T", "", "@T.prim_func",
                       f"def {func.name}({', '.join(params)}):"]
        with self.nested():
            if func.attrs:
                self.emit(f"T.func_attr({_annotations(func.attrs)})")
            for var in func.symbolic_vars:
                self.emit(f"{var.name} = T.{var.dtype}()")
            for param in func.buffers:
                if not all(isinstance(dim, IntImm) for dim in param.shape):
                    self.emit(f"{param.name} = T.match_buffer({handles[param]}, "
                              f"{_buffer_args(param)})")
            for buffer in _undeclared_buffers(func):
                self.emit(f"{buffer.name} = T.Buffer({_buffer_args(buffer)})")
            self.stmt(func.body)
        return "\n".join(self.lines)

    def stmt(self, stmt: Stmt, last: bool = True) -> None:
        """Print `stmt`; `last` when no statement follows it in its sequence."""
        getattr(self, "_" + type(stmt).__name__)(stmt, last)

    def _SeqStmt(self, seq: SeqStmt, last: bool) -> None:
        if not seq.stmts:
            self.emit("pass")
        for index, stmt in enumerate(seq.stmts):
            self.stmt(stmt, last and index == len(seq.stmts) - 1)

    def _BufferStore(self, store: BufferStore, last: bool) -> None:
        self.emit(f"{store.buffer.name}[{_indices(store.indices)}] = {_text(store.value)}")

    def _Barrier(self, barrier: Barrier, last: bool) -> None:
        self.emit(f'T.tvm_storage_sync("{barrier.scope}")')

    def _Evaluate(self, evaluate: Evaluate, last: bool) -> None:
        self.emit(f"T.evaluate({_text(evaluate.value)})")

    def _Assume(self, node: Assume, last: bool) -> None:
        self.emit(f"T.assume({_text(node.condition)})")

    def _While(self, node: While, last: bool) -> None:
        self.emit(f"while {_text(node.condition)}:")
        with self.nested():
            self.stmt(node.body)

    def _AsyncCopy(self, node: AsyncCopy, last: bool) -> None:
        self.emit("with T.async_copy():")
        with self.nested():
            self.stmt(node.body)

    def _AsyncCommit(self, node: AsyncCommit, last: bool) -> None:
        self.emit("T.ptx_commit_group()")

    def _AsyncWait(self, node: AsyncWait, last: bool) -> None:
        self.emit(f"T.ptx_wait_group({node.pending})")

    def _LetStmt(self, let: LetStmt, last: bool) -> None:
        if last:                                 # x: T.int32 = value, then the body
            self.emit(f"{let.var.name}: T.{let.var.dtype} = {_text(let.value)}")
            self.stmt(let.body)
            return
        self.emit(f"with T.LetStmt({_text(let.value)}) as {let.var.name}:")
        with self.nested():
            self.stmt(let.body)

    def _Allocate(self, allocate: Allocate, last: bool) -> None:
        buffer = allocate.buffer
        if last:                                 # X = T.decl_buffer(...), then the body
            self.emit(f"{buffer.name} = T.decl_buffer({_buffer_args(buffer)})")
            self.stmt(allocate.body)
            return
        self.emit(f"with T.decl_buffer({_buffer_args(buffer)}) as {buffer.name}:")
        with self.nested():
            self.stmt(allocate.body)

    def _IfThenElse(self, branch: IfThenElse, last: bool) -> None:
        keyword = "if"
        while True:
            self.emit(f"{keyword} {_text(branch.condition)}:")
            with self.nested():
                self.stmt(branch.then_body)
            if not isinstance(branch.else_body, IfThenElse):
                break
            keyword, branch = "elif", branch.else_body
        if branch.else_body is not None:
            self.emit("else:")
            with self.nested():
                self.stmt(branch.else_body)

    def _For(self, loop: For, last: bool) -> None:
        chain = [loop]
        # a level joins the grid when its extent uses none of the grid's variables (a
        # triangular `for j in range(i + 1)` stays a loop of its own)
        while _is_plain(chain[-1]) and isinstance(chain[-1].body, For) \
                and _is_plain(chain[-1].body) and not {level.loop_var for level in chain} \
                & set(free_vars(chain[-1].body.extent)):
            chain.append(chain[-1].body)
        names = ", ".join(level.loop_var.name for level in chain)
        if len(chain) > 1:
            iterator = f"T.grid({', '.join(_text(level.extent) for level in chain)})"
        elif _is_plain(loop):
            iterator = f"range({_text(loop.extent)})"
        else:
            args = [_bounds(loop.min, loop.extent)]
            if loop.kind == "thread_binding":
                args.append(f'thread="{loop.thread_tag}"')
            if loop.annotations:
                args.append(f"annotations={_annotations(loop.annotations)}")
            iterator = f"T.{_LOOP_FUNCTIONS[loop.kind]}({', '.join(args)})"
        self.emit(f"for {names} in {iterator}:")
        with self.nested(tuple(chain), depth=1):
            self.stmt(chain[-1].body)

    def _BlockRealize(self, realize: BlockRealize, last: bool) -> None:
        block = realize.block
        is_root = self.depth == 0 and block.name == "root"  # its empty regions are implied
        self.emit(f"with T.block({json.dumps(block.name)}):")
        with self.nested(depth=1):
            self._axes(realize)
            if realize.predicate != const(True, "bool"):
                self.emit(f"T.where({_text(realize.predicate)})")
            if block.reads or not is_root:
                self.emit(f"T.reads({', '.join(map(_region, block.reads))})")
            if block.writes or not is_root:
                self.emit(f"T.writes({', '.join(map(_region, block.writes))})")
            if block.annotations:
                self.emit(f"T.block_attr({_annotations(block.annotations)})")
            for buffer in block.alloc_buffers:
                self.emit(f"{buffer.name} = T.alloc_buffer({_buffer_args(buffer)})")
            if block.init is not None:
                self.emit("with T.init():")
                with self.nested():
                    self.stmt(block.init)
            self.stmt(block.body)

    def _axes(self, realize: BlockRealize) -> None:
        """`v_i, v_k = T.axis.remap("SR", [i, k])` when every value is an enclosing loop's
        variable over the iteration variable's domain, else one `T.axis.*` line each."""
        pairs = list(zip(realize.block.iter_vars, realize.iter_values, strict=False))
        if pairs and all(self._remaps(iv, value) for iv, value in pairs):
            names = ", ".join(iv.var.name for iv, _ in pairs)
            kinds = "".join(_AXIS_LETTERS[iv.kind] for iv, _ in pairs)
            values = ", ".join(value.name for _, value in pairs)
            self.emit(f'{names} = T.axis.remap("{kinds}", [{values}])')
            return
        for iv, value in pairs:
            self.emit(f"{iv.var.name} = T.axis.{iv.kind}({_dom(iv.dom)}, {_text(value)})")

    def _remaps(self, iv: IterVar, value: Expr) -> bool:
        loop = self.loops.get(value) if isinstance(value, Var) else None
        return (loop is not None and iv.kind in _AXIS_LETTERS and iv.var.dtype == value.dtype
                and iv.dom == Range(loop.min, loop.extent))


def _undeclared_buffers(func: PrimFunc) -> list[Buffer]:
    """Buffers the body uses that no parameter, block or Allocate declares: flattened views
    (`data=`), declared at the top of the function."""
    declared = set(func.buffers)
    declared |= {allocate.buffer for allocate in collect(func.body, Allocate)}
    declared |= {b for block in collect(func.body, Block) for b in block.alloc_buffers}
    return list(dict.fromkeys(b for b in collect(func.body, Buffer) if b not in declared))


def _handle_names(func: PrimFunc) -> dict:
    """The `T.handle` parameter name of each buffer parameter with a symbolic shape:
    `var_<name>` (as TVM prints it), made unique where another name of the function is
    that (buffers named `var_A` and `A`: audit helper-146)."""
    from sched.ir.names import fresh

    taken = {v.name for v in collect(func, Var)} | {p.name for p in func.params}
    taken |= {node.buffer.name for node in (*collect(func.body, BufferLoad),
                                            *collect(func.body, BufferStore))}
    taken |= {b.name for block in collect(func.body, Block) for b in block.alloc_buffers}
    return {param: fresh(f"var_{param.name}", taken) for param in func.buffers
            if not all(isinstance(dim, IntImm) for dim in param.shape)}

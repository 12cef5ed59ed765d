"""The TVMScript parser: `parse(text)` and `parse_function(pyfunc)` give back a PrimFunc.

It reads the text with Python's `ast` (never executing it) and accepts both what `to_script`
prints, so that `parse(to_script(f)) == f`, and TensorIR scripts as TVM users write them:
`T.Buffer[...]` annotations, `T.handle` + `T.match_buffer`, no explicit root block, no
`T.reads`/`T.writes` (then inferred with `infer_block_regions`), unnamed `T.block()`.

Anything it does not know is a ScriptError naming the line and the construct
(`line 12: unknown construct 'T.blok'`); nothing is silently dropped. Expressions are read by
`parse_expr.py`, buffer declarations by `parse_buffer.py`, statements and blocks by
`parse_stmt.py`, what TVM's lowering leaves by `parse_lowered.py` (statements),
`parse_vector.py` (vectors) and `parse_intrin.py` (`T.call_intrin`), modules by
`parse_module.py`; Python tuples around the script are written into it by `parse_python.py`;
this module reads the function.

Read as TVM means them, in sched's terms (each prints back in a form this parser reads):
layout arguments (`strides=`, `elem_offset=`, `align=`, `offset_factor=`, `scope=""`) against
sched's dense layout; `T.match_buffer` of a region in a block, as a window on the region;
`T.allocate_const`, as an allocation and a block that stores the values; a block that uses
enclosing loop variables, with `T.axis.opaque` variables bound to them; repeated block names,
made unique with a ScriptWarning; `vthread` bindings, as serial loops; a block whose update
binds values (`v_idx: T.int32 = ...`) and then stores several buffers (TVM's argmax/argmin,
which rfactor factors); opaque calls (`T.evaluate(T.call_extern(...))`, `T.call_packed`,
`T.call_pure_extern`) with `T.address_of(A[i])`, `A.data` and `T.tvm_access_ptr` arguments
(`parse_extern.py`; a block making one is opaque, see `sched/ir/extern.py`); `buffer_type=` and
`axis_separators=` at TVM's defaults ("default", []).

Lowered TIR: `T.assume(c)` / `T.evaluate(T.assume(c))`, an `Assume` (a hint, no code);
`T.ramp(b, s, n)` / `T.broadcast(v, n)` (`T.Ramp`, `T.Broadcast`) in the indices and value of a
buffer store, as a vectorized loop over the lanes, refused where a vector and a loop could
differ; `x = T.launch_thread("blockIdx.x", n)`, `T.env_thread` + `T.launch_thread(x, n)` and
`T.attr(x, "thread_extent" | "virtual_thread", n)`, as thread-bound loops; `T.attr(_,
"pragma_*", v)` around a loop, as the loop's annotation; `T.attr(X, "storage_scope", s)` and
`X = T.allocate(extents, dtype, scope)`, as an allocation (`T.decl_buffer`); `while c:`, a
`While` (the polyhedral model refuses one around blocks: steps that need it say so);
`T.call_intrin(dtype, "tir.exp", x)` for the intrinsics sched knows, as `T.exp(x)`.
`@I.ir_module class Module:` with `@T.prim_func` methods, as an `IRModule` (`mod["main"]`;
`Schedule(mod)` takes "main" or the only function).

Not read (an error naming the line says so): layouts that are not dense (constant strides or
offsets other than the dense ones), storage scopes other than global/shared/local, the
wmma fragment scopes and "warp" ("shared.dyn" is read as "shared": ir/nodes.py
SCOPE_ALIASES), other `axis_separators=`/`buffer_type=`,
other `T.attr` keys, other intrinsics in `T.call_intrin`, vector-typed values outside a buffer
store (`x: T.float32x4`), functions of a module calling each other (`T.call_tir`, Relax), and
what TVM's lowering leaves for reductions (`T.comm_reducer` in a `T.attr`,
`T.tvm_thread_allreduce`: write the reduction as a block).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass, field

from sched.errors import ScriptError
from sched.ir.dtype import DTYPES, INT_DTYPES
from sched.ir.functor import IRVisitor, collect, free_vars
from sched.ir.module import IRModule
from sched.ir.nodes import (
    TRUE,
    Allocate,
    Annotations,
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    IntImm,
    PrimFunc,
    Range,
    Stmt,
    Var,
)
from sched.ir.parse_expr import Handle, OuterSymbol
from sched.ir.parse_module import is_module, parse_module
from sched.ir.parse_names import call_name, t_name
from sched.ir.parse_python import inline_python_values
from sched.ir.parse_stmt import StmtParser, one_arg, split_header, statement_kind

_FUNCTION_HEADER = {"func_attr", "match_buffer", "symbolic", "view", "alloc_buffer", "skip"}


def parse(text: str) -> PrimFunc | IRModule:
    """The PrimFunc of a TVMScript text holding one `@T.prim_func` function, or the IRModule
    of one holding an `@I.ir_module` class (imports and comments around it are allowed)."""
    return _parse_source(textwrap.dedent(text), 0, None)


def parse_function(pyfunc, defined_in: dict | None = None) -> PrimFunc:
    """The PrimFunc written as the Python function `pyfunc` (what `@T.prim_func` does).
    Errors name the line in the function's file. A name the script does not define is read
    from Python, as TVM's parser does: the local variables of the scope that defined the
    function (`defined_in`), its closure and its module's globals, where it holds a number or
    an IR expression (`M, N = 128, 64` at the top of the file, `T.Buffer((M, N), ...)`)."""
    try:
        lines, start = inspect.getsourcelines(pyfunc)
    except (OSError, TypeError) as exc:
        raise ScriptError(f"cannot read the source of {pyfunc!r}: {exc}") from None
    outer = dict(getattr(pyfunc, "__globals__", {}))
    outer.update(defined_in or {})
    code, cells = getattr(pyfunc, "__code__", None), getattr(pyfunc, "__closure__", None) or ()
    for name, cell in zip(code.co_freevars if code else (), cells):
        try:
            outer[name] = cell.cell_contents
        except ValueError:              # a cell not filled yet
            pass
    return _parse_source(textwrap.dedent("".join(lines)), start - 1,
                         inspect.getsourcefile(pyfunc), outer)


def _parse_source(source: str, line_offset: int, filename: str | None,
                  outer: dict | None = None) -> PrimFunc | IRModule:
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        line = None if exc.lineno is None else exc.lineno + line_offset
        raise ScriptError(f"invalid Python: {exc.msg}", line, filename) from None
    declarations = _outer_symbols(tree)
    outer = {**(outer or {}), **{name: OuterSymbol(dtype)
                                 for name, (dtype, _) in declarations.items()}}
    parser = _Parser(line_offset, filename, source, outer)
    tree.body = [inline_python_values(node, outer)
                 if isinstance(node, ast.FunctionDef | ast.ClassDef) else node
                 for node in tree.body]
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.ClassDef | ast.Import | ast.ImportFrom) \
                and statement_kind(node) != "skip" and \
                all(node is not statement for _, statement in declarations.values()):
            raise parser.error(node, "only imports and one @T.prim_func function or "
                                     "@I.ir_module class may appear at the top level")
    if len(functions) != 1:
        raise ScriptError(f"expected one @T.prim_func function or @I.ir_module class, found "
                          f"{len(functions)}", None, filename)
    try:
        if is_module(functions[0]):                       # parse_module.py
            return parse_module(functions[0],
                                lambda: _Parser(line_offset, filename, source, outer))
        return parser.function(functions[0])
    except ScriptError as exc:      # the user's line is what matters, not the parser's frames
        raise exc.with_traceback(None) from None


def _outer_symbols(tree: ast.Module) -> dict[str, tuple[str, ast.Assign]]:
    """The symbolic variables a script text declares at its top level (`n = T.int32()`, as
    TVM users write them above a function): name -> (dtype, the statement). The functions
    that read the name declare it (parse_expr.OuterSymbol), as when the decorator finds it
    in the module's globals (a text had them refused as top-level code: audit helper-177)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call) and \
                not node.value.args and not node.value.keywords and \
                t_name(node.value.func) in INT_DTYPES:
            found[node.targets[0].id] = (t_name(node.value.func), node)
    return found


def _is_buffer_annotation(node: ast.AST | None) -> bool:
    """`T.Buffer(...)` or `T.Buffer[...]`."""
    if isinstance(node, ast.Call):
        return t_name(node.func) == "Buffer"
    return isinstance(node, ast.Subscript) and t_name(node.value) == "Buffer"


@dataclass
class _FunctionParts:
    params: list
    attrs: Annotations | None = None
    alloc_buffers: list[Buffer] = field(default_factory=list)


def _outside_blocks_regions(body: Stmt, allocated: set) -> tuple[tuple, tuple]:
    """The whole-buffer regions the implicit root block declares: of the buffers `body`
    loads and stores outside its blocks (a loop bound `range(indptr[i], indptr[i + 1])` of
    TVM's sparse scripts was a VerifyError naming the root block: audit helper-140), but
    those the root allocates."""
    found: dict[str, dict] = {"read": {}, "write": {}}

    class Accesses(IRVisitor):
        def visit_BlockRealize(self, node) -> None:
            for value in (*node.iter_values, node.predicate):
                self.visit(value)

        def visit_BufferLoad(self, node) -> None:
            found["read"].setdefault(node.buffer.name, node.buffer)
            self.visit_children(node)

        def visit_BufferStore(self, node) -> None:
            found["write"].setdefault(node.buffer.name, node.buffer)
            self.visit_children(node)
    Accesses().visit(body)
    return tuple(tuple(BufferRegion(b, tuple(Range(IntImm(0, d.dtype), d) for d in b.shape))
                       for b in buffers.values() if b not in allocated)
                 for buffers in (found["read"], found["write"]))


class _Parser(StmtParser):
    """The function: its signature, its header (`T.func_attr`, `T.match_buffer`, symbolic dims,
    views, the root's `T.alloc_buffer`s) and its body, in the implicit root block if needed."""

    def function(self, node: ast.FunctionDef) -> PrimFunc:
        self._check_signature(node)
        self.block_names = {c.args[0].value for c in ast.walk(node) if call_name(c) == "block"
                            and c.args and isinstance(c.args[0], ast.Constant)}
        if any(call_name(c) == "block" for c in ast.walk(node)):
            self.loop_names = set()
            self.identifiers = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
                {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)}
        header, rest = split_header(node.body, _FUNCTION_HEADER)
        parts = _FunctionParts([None] * len(node.args.args))
        buffers = []
        for position, arg in enumerate(node.args.args):
            annotation = arg.annotation
            name = t_name(annotation) if annotation is not None else None
            if name == "handle":
                self.bind(arg.arg, Handle(arg.arg, position))
            elif name in DTYPES:
                parts.params[position] = Var(arg.arg, name)
                self.bind(arg.arg, parts.params[position])
            elif _is_buffer_annotation(annotation):
                buffers.append((position, arg))
            else:
                raise self.error(arg, f"parameter '{arg.arg}' needs an annotation "
                                      f"T.Buffer(shape, dtype), T.handle or a dtype (T.int32)")
        for item in header:                     # symbolic dims first: buffer shapes use them
            if statement_kind(item) == "symbolic":
                self._function_symbolic(item, parts)
        for position, arg in buffers:
            parts.params[position] = self.buffer(arg.arg, arg.annotation, "T.Buffer")
            self.bind(arg.arg, parts.params[position])
        for item in header:
            if statement_kind(item) != "symbolic":
                getattr(self, "_function_" + statement_kind(item))(item, parts)
        for name, value in self.scopes[-1].items():
            if isinstance(value, Handle) and not value.matched:
                raise self.error(node, f"parameter '{name}' is a T.handle that no "
                                       f"T.match_buffer matches")
        self.alloc_targets.append(parts.alloc_buffers)
        body = self._root(node, self.stmts(rest), parts.alloc_buffers)
        func = PrimFunc(node.name, tuple(parts.params), body, parts.attrs or ())
        self._refuse_unbound_symbols(node, func)
        return func

    def _refuse_unbound_symbols(self, node: ast.FunctionDef, func: PrimFunc) -> None:
        """A symbolic variable no parameter's shape holds gets no value from a call (audit
        helper-168: one read only in a loop extent or an allocation's shape printed
        without its declaration, and its build failed verifying the lowered code)."""
        bound = set(func.symbolic_vars) | {p for p in func.params if isinstance(p, Var)}
        used = set(free_vars(func.body)) | {v for b in collect(func.body, Allocate)
                                            for d in b.buffer.shape for v in free_vars(d)}
        for name, var in self.declared_symbols.items():
            if var not in bound and (var in used or any(
                    var in free_vars(d) for b in func.buffers for d in b.shape)):
                raise self.error(node, f"symbolic variable '{name}' is in no parameter's "
                                       f"shape, so no call gives it a value: use it in the "
                                       f"shape of a T.Buffer or T.match_buffer parameter, or "
                                       f"make it a scalar parameter ('{name}: T.int32')")

    def _check_signature(self, node: ast.FunctionDef) -> None:
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if t_name(target) != "prim_func":
                raise self.error(decorator, f"unknown decorator '@{ast.unparse(decorator)}'")
        args = node.args
        if args.posonlyargs or args.vararg or args.kwonlyargs or args.kwarg or args.defaults:
            raise self.error(node, f"function '{node.name}': parameters must be plain names "
                                   f"with annotations (no defaults, *args or **kwargs)")

    def _root(self, node: ast.AST, body: Stmt, alloc_buffers: list[Buffer]) -> Stmt:
        """The body in the implicit root block, where it has blocks and is not already a single
        root block; a body with no blocks allocates its T.alloc_buffer buffers around it."""
        if isinstance(body, BlockRealize) and body.block.name == "root":
            if alloc_buffers:
                raise self.error(node, "T.alloc_buffer before an explicit root block: move it "
                                       "into the root block")
            return body
        if not collect(body, BlockRealize):
            # no blocks (TVM's lowered form): a buffer is allocated over the body, not in a
            # root block, whose loads would need declared regions (audit helper-91)
            for buffer in reversed(alloc_buffers):
                body = Allocate(buffer, body)
            return body
        reads, writes = _outside_blocks_regions(body, set(alloc_buffers))
        return BlockRealize((), TRUE, Block("root", (), reads, writes, body,
                                            alloc_buffers=tuple(alloc_buffers)))

    def _function_symbolic(self, node: ast.Assign, parts: _FunctionParts) -> None:
        """`n = T.int32()` (or TVM's older `n = T.var("int32")`)."""
        call = node.value
        dtype = call_name(call)
        if dtype == "var":
            dtype = self.dtype(one_arg(self, call, "var"))
        var = self.declared_symbols[node.targets[0].id] = Var(node.targets[0].id, dtype)
        self.bind(node.targets[0].id, var)

    def _function_func_attr(self, node: ast.Expr, parts: _FunctionParts) -> None:
        if parts.attrs is not None:
            raise self.error(node, "T.func_attr given twice")
        parts.attrs = self.annotations(one_arg(self, node.value, "func_attr"))

    def _function_match_buffer(self, node: ast.Assign, parts: _FunctionParts) -> None:
        call = node.value
        if not call.args:
            raise self.error(node, "T.match_buffer needs a T.handle parameter")
        handle = self.lookup(call.args[0])
        if not isinstance(handle, Handle) or handle.matched:
            raise self.error(node, f"T.match_buffer: '{ast.unparse(call.args[0])}' is not an "
                                   f"unmatched T.handle parameter")
        handle.matched = True
        buffer = self.buffer(node.targets[0].id, call, "T.match_buffer")
        parts.params[handle.position] = buffer
        self.bind(buffer.name, buffer)

    def _function_view(self, node: ast.Assign, parts: _FunctionParts) -> None:
        self._bind_view(node)

    def _function_alloc_buffer(self, node: ast.Assign, parts: _FunctionParts) -> None:
        self._block_alloc_buffer(node, parts)

    def _function_skip(self, node: ast.stmt, parts) -> None:
        pass

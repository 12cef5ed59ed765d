"""What TVM's lowering leaves in TIR, read in sched's terms: thread launches, attributes,
allocations, while loops and assumptions (the statement parser's `StmtParser` mixes this in).

- `bx = T.launch_thread("blockIdx.x", 16)`, over the statements after it, and the older
  `tx = T.env_thread("threadIdx.x")` then `T.launch_thread(tx, 128)` (or `with
  T.launch_thread(tx, 128):`, or `T.attr(tx, "thread_extent", 128)`): a thread-bound loop,
  `for bx in T.thread_binding(16, thread="blockIdx.x"):`. `T.attr(vt, "virtual_thread", 2)`
  of a `T.env_thread("vthread")` likewise (a virtual thread: a serial loop once lowered).
- `T.attr(node, "pragma_<name>", value)` around one loop: the loop's annotation
  `"pragma_<name>": value` (TVM's `annotate` spelling; kept, printed with the loop).
- `T.attr(X, "storage_scope", "shared")`: the scope of the allocation `X` in its body (or a
  check of a buffer already declared).
- `X = T.allocate([n], "float32", "shared")`: an allocation over the statements after it, as
  `T.decl_buffer` (accessed through `T.Buffer(..., data=X)` views of the same shape).
- `while cond:` (TVM's `T.While`): a `While` statement.
- `T.assume(cond)`, `T.evaluate(T.assume(cond))`: an `Assume` statement (a hint, no code).

Any other attribute key is refused naming the key: sched does not guess what it means.
"""

from __future__ import annotations

import ast
import dataclasses

from sched.ir.nodes import (
    SCOPES,
    THREAD_TAGS,
    VTHREAD_TAGS,
    Allocate,
    Assume,
    Buffer,
    For,
    Stmt,
    Var,
    While,
    canonical_scope,
    const,
)
from sched.ir.parse_names import call_name

# constructs that scope over the statements after them (or over a `with` body)
SCOPING = ("launch_thread", "env_thread", "attr", "allocate")
_ATTR_KEYS = ("thread_extent", "virtual_thread", "storage_scope", "pragma_*")


class EnvThread:
    """`tx = T.env_thread("threadIdx.x")`: a thread variable waiting for its launch."""

    def __init__(self, name: str, tag: str) -> None:
        self.name, self.tag = name, tag


def is_scoping(node: ast.stmt) -> bool:
    """Whether `node` is `x = T.launch_thread(...)`, `T.attr(...)`, ... (see SCOPING)."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 \
            and isinstance(node.targets[0], ast.Name):
        return call_name(node.value) in SCOPING
    return isinstance(node, ast.Expr) and call_name(node.value) in ("launch_thread", "attr")


def is_assume(node: ast.Expr) -> bool:
    call = node.value
    if call_name(call) == "evaluate" and len(call.args) == 1:
        call = call.args[0]
    return call_name(call) == "assume"


class LoweredStmtParser:
    """The statements above; `self` is a `StmtParser`."""

    pending_scopes: dict[str, tuple[str, ast.AST]]

    def scoping(self, node: ast.stmt, rest: list[ast.stmt]) -> Stmt | None:
        """`node` over the statements `rest` after it (None for `T.env_thread`, which only
        declares a name: the caller goes on with `rest`)."""
        call = node.value
        name = call_name(call)
        target = node.targets[0].id if isinstance(node, ast.Assign) else None
        if name == "env_thread":
            tag = self._thread_tag(call, call.args[0] if len(call.args) == 1 else None)
            self.bind(target, EnvThread(target, tag))
            return None
        if name == "allocate":
            return self._allocate(node, target, call, lambda: self.stmts(rest))
        if name == "attr":
            return self._attr(node, call, lambda: self.stmts(rest))
        return self._launch(node, call, target, lambda: self.stmts(rest))

    def lowered_with(self, node: ast.With) -> Stmt:
        """`with T.launch_thread(...)`, `with T.attr(...)`, `with T.allocate(...) as X`."""
        call = node.items[0].context_expr
        name = call_name(call)
        target = node.items[0].optional_vars
        target = target.id if isinstance(target, ast.Name) else None

        def body():
            with self.scope():
                return self.stmts(node.body)
        if name == "allocate":
            if target is None:
                raise self.error(node, "with T.allocate(...): expected 'as name'")
            return self._allocate(node, target, call, body)
        if name == "attr":
            return self._attr(node, call, body)
        return self._launch(node, call, target, body)

    # ----------------------------------------------------------------------------------------
    # thread launches

    def _thread_tag(self, call: ast.Call, node: ast.AST | None) -> str:
        if not (isinstance(node, ast.Constant) and node.value in THREAD_TAGS):
            raise self.error(call, f"T.{call_name(call)}: the thread must be one of "
                                   f"{', '.join(THREAD_TAGS)}, got "
                                   f"{'nothing' if node is None else ast.unparse(node)}")
        return node.value

    def _launch(self, node, call: ast.Call, target: str | None, body) -> Stmt:
        """`x = T.launch_thread("tag", n)`, `T.launch_thread(x, n)` of an env thread `x`."""
        if len(call.args) != 2 or call.keywords:
            raise self.error(node, "T.launch_thread takes a thread (\"threadIdx.x\" or a "
                                   "T.env_thread variable) and an extent")
        thread, extent = call.args
        if isinstance(thread, ast.Constant):
            if target is None:
                raise self.error(node, f"T.launch_thread({ast.unparse(thread)}, ...) needs a "
                                       f"name: bx = T.launch_thread(...)")
            return self._thread_loop(node, target, self._thread_tag(call, thread), extent,
                                     body)
        env = self._env_thread(node, thread)
        if target is not None and target != env.name:
            raise self.error(node, f"T.launch_thread of '{env.name}' bound to another name "
                                   f"'{target}'")
        return self._thread_loop(node, env.name, env.tag, extent, body)

    def _env_thread(self, node: ast.AST, thread: ast.AST) -> EnvThread:
        found = self.lookup(thread) if isinstance(thread, ast.Name) else None
        if not isinstance(found, EnvThread):
            raise self.error(node, f"'{ast.unparse(thread)}' is not a T.env_thread variable "
                                   f"(declare it: {ast.unparse(thread)} = "
                                   f"T.env_thread(\"threadIdx.x\"))")
        return found

    def _thread_loop(self, node, name: str, tag: str, extent_node: ast.AST, body) -> For:
        extent = self.expr(extent_node, "int32")
        var = Var(name, extent.dtype)
        with self.scope(nested=True):
            self.bind(name, var)
            self.loops.append((var, const(0, var.dtype), extent))
            try:
                inner = body()
            finally:
                self.loops.pop()
        return For(var, const(0, var.dtype), extent, "thread_binding", inner, tag)

    # ----------------------------------------------------------------------------------------
    # attributes and allocations

    def _attr(self, node, call: ast.Call, body) -> Stmt:
        """`T.attr(node, key, value)` over `body` (see the module doc for the keys)."""
        if len(call.args) != 3 or call.keywords or not (
                isinstance(call.args[1], ast.Constant) and isinstance(call.args[1].value, str)):
            raise self.error(node, "T.attr takes (node, \"key\", value)")
        subject, key_node, value = call.args
        key = key_node.value
        if key in ("thread_extent", "virtual_thread"):
            env = self._env_thread(node, subject)
            if (key == "virtual_thread") != (env.tag in VTHREAD_TAGS):
                raise self.error(node, f"T.attr '{key}' of '{env.name}', a {env.tag} thread: "
                                       f"virtual_thread goes with vthread threads, "
                                       f"thread_extent with the others")
            return self._thread_loop(node, env.name, env.tag, value, body)
        if key.startswith("pragma_"):
            annotation = self._annotation_value(value)
            inner = body()
            if not isinstance(inner, For):
                raise self.error(node, f"T.attr '{key}' must enclose one loop (it becomes the "
                                       f"loop's annotation), got a {type(inner).__name__}")
            return dataclasses.replace(inner, annotations=((key, annotation),
                                                           *inner.annotations))
        if key == "storage_scope":
            return self._storage_scope(node, subject, value, body)
        raise self.error(node, f"unknown T.attr key '{key}': sched reads "
                               f"{', '.join(_ATTR_KEYS)}")

    def _storage_scope(self, node, subject: ast.AST, value: ast.AST, body) -> Stmt:
        if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
            raise self.error(node, "T.attr 'storage_scope' takes a scope string")
        scope = canonical_scope(value.value or "global")
        if not isinstance(subject, ast.Name):
            raise self.error(node, "T.attr 'storage_scope' takes the allocation's name")
        bound = next((s[subject.id] for s in reversed(self.scopes) if subject.id in s), None)
        if isinstance(bound, Buffer):
            if bound.scope != scope:
                raise self.error(node, f"T.attr 'storage_scope' says '{subject.id}' is "
                                       f"{scope!r}, but it was declared {bound.scope!r}")
            return body()
        self.pending_scopes[subject.id] = (scope, node)
        result = body()
        if subject.id in self.pending_scopes:
            raise self.error(node, f"T.attr 'storage_scope' of '{subject.id}': no "
                                   f"T.allocate of '{subject.id}' in its body")
        return result

    def _allocate(self, node, target: str, call: ast.Call, body) -> Stmt:
        """`X = T.allocate(extents, dtype, scope)` (scope "global" by default, or what a
        surrounding `T.attr(X, "storage_scope", ...)` says)."""
        args = list(call.args)
        keywords = {k.arg: k.value for k in call.keywords}
        if len(args) < 2 or len(args) > 3 or set(keywords) - {"scope"} \
                or (len(args) == 3 and "scope" in keywords):
            raise self.error(node, "T.allocate takes (extents, dtype, scope)")
        scope_node = args[2] if len(args) == 3 else keywords.get("scope")
        if scope_node is not None and not (isinstance(scope_node, ast.Constant)
                                           and isinstance(scope_node.value, str)):
            raise self.error(node, "T.allocate: the scope must be a string")
        scope = (scope_node.value or "global") if scope_node is not None else None
        pending, _ = self.pending_scopes.pop(target, (None, None))
        if scope is not None and pending is not None and scope != pending:
            raise self.error(node, f"T.allocate of '{target}' in scope {scope!r} under "
                                   f"T.attr 'storage_scope' {pending!r}")
        scope = canonical_scope(scope or pending or "global")
        if scope not in SCOPES:
            raise self.error(node, f"T.allocate: scope {scope!r} is not one of "
                                   f"{', '.join(SCOPES)}")
        buffer = self._guard(node, lambda: Buffer(target, self.shape(args[0]),
                                                  self.dtype(args[1]), scope))
        with self.scope():
            self.bind(target, buffer)
            return Allocate(buffer, body())

    # ----------------------------------------------------------------------------------------
    # while loops and assumptions

    def _stmt_While(self, node: ast.While) -> Stmt:
        if node.orelse:
            raise self.error(node, "a while loop cannot have an else")
        condition = self.expr(node.test)
        if condition.dtype != "bool":
            raise self.error(node, f"a while condition must be bool, got {condition.dtype}")
        with self.scope(nested=True):
            return While(condition, self.stmts(node.body))

    def assume(self, node: ast.Expr) -> Stmt:
        call = node.value
        if call_name(call) == "evaluate":
            call = call.args[0]
        if len(call.args) != 1 or call.keywords:
            raise self.error(node, "T.assume takes one condition")
        condition = self.expr(call.args[0])
        if condition.dtype != "bool":
            raise self.error(node, f"T.assume takes a bool condition, got {condition.dtype}")
        return Assume(condition)

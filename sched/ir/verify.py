"""The well-formedness checker: `verify(func)` raises VerifyError listing every problem found.

It checks what every pass and primitive relies on:
- scoping: each variable is defined once (names are identities, so shadowing is an error) and
  used only inside its scope; in block IR no two loops share a name, siblings included (the
  analyses and the schedule's loop handles know a loop by its name); each buffer is a
  parameter, allocated by an enclosing block or `Allocate`, or a view (`data=`) of one of
  those;
- block isolation: a block's body and init use only its iteration variables, the function's
  symbolic dims and scalars, and variables bound inside the block; they load only buffers in the
  block's reads, writes or allocations (its `T.alloc_buffer`s and the `T.decl_buffer`s in its
  body; its bindings and predicate too), and store only to its writes or allocations; the
  iteration values match the iteration variables one to one; block names are unique;
- types: operands of one dtype, integer indices and loop bounds, boolean conditions, stored values
  of the buffer's dtype, one index per dimension (a view is one-dimensional).

Lowered functions (no blocks, flattened buffers) are checked by the same rules.
"""

from __future__ import annotations

from collections import Counter

from sched.ir.bit_intrinsics import call_problem
from sched.ir.dtype import DTYPES, bits, is_int
from sched.ir.extern import ADDRESS_OF
from sched.ir.functor import IRVisitor, collect
from sched.ir.memo import BoundedCache
from sched.ir.nodes import (
    ARITH_OPS,
    BIT_FUNCTIONS,
    COMPARE_OPS,
    EXTERN_CALLS,
    FOR_KINDS,
    GPU_INTRINSICS,
    INT_FUNCTIONS,
    ITER_KINDS,
    LOGIC_OPS,
    MATH_FUNCTIONS,
    REINTERPRET,
    SCOPES,
    Allocate,
    Assume,
    BinaryOp,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Evaluate,
    For,
    IfThenElse,
    IntImm,
    LetStmt,
    PrimFunc,
    Select,
    StringImm,
    Var,
    While,
)

# (id(block realize), `_Verifier._context()`) -> (realize, its problems, its block names)
_VERIFIED = BoundedCache(1 << 11)


def _shared_loop_names(func: PrimFunc) -> list[str]:
    """A problem for each name two loops of a block-IR function share. Lowered functions may
    repeat a loop (a pipeline's prologue) in scopes of their own: only block IR, where the
    polyhedral model and the schedule's handles know loops by name, needs them unique."""
    if not collect(func.body, Block):
        return []
    counts = Counter(loop.loop_var.name for loop in collect(func.body, For))
    return [f"{count} loops are named '{name}'; names identify loops, so give each its own "
            f"(sched.parse renames repeated loop names of a TVMScript: '{name}_1', ...)"
            for name, count in counts.items() if count > 1]


class VerifyError(ValueError):
    """An ill-formed IR: the message lists each problem with the block it is in."""


class _Verifier(IRVisitor):
    def __init__(self, func: PrimFunc) -> None:
        self.problems: list[str] = []
        self.defined: set[Var] = set()
        self.scopes: list[set[Var]] = [set()]
        self.buffers: list[set[str]] = [set()]
        self.block_names: set[str] = set()
        self.undeclared_reads_allowed = 0      # inside a while condition of the root
        self.blocks: list[tuple[Block, set[Var]]] = []   # enclosing blocks, vars visible in each
        # buffers a T.decl_buffer (Allocate) declares inside the current block: its own
        self.local_buffers: list[set[str]] = [set()]
        self.visible_buffers: dict[str, int] = {}   # the union of `buffers`, with counts
        # block names in the order met, each with where it was met (for `_alone`)
        self.named: dict[str, str] = {}
        self._buffers_key = self._allocated_key = None      # parts of `_context`, kept
        for param in func.params:
            if isinstance(param, Var):
                self._define(param)
            else:
                self._define_buffer(param)
        for var in func.symbolic_vars:
            self._define(var)

    # -- helpers -------------------------------------------------------------------------------

    def fail(self, message: str) -> None:
        self.problems.append(message + self._where())

    def _where(self) -> str:
        return f" (in block '{self.blocks[-1][0].name}')" if self.blocks else ""

    def _push_block(self, block: Block, visible: set[Var]) -> None:
        self.blocks.append((block, visible))
        self._allocated_key = None

    def _pop_block(self) -> None:
        self.blocks.pop()
        self._allocated_key = None

    def _define(self, var: Var) -> None:
        if var in self.defined:
            self.fail(f"variable '{var.name}' is defined twice; names identify variables, "
                      f"so give the second one another name")
        self.defined.add(var)
        self.scopes[-1].add(var)
        for _, visible in self.blocks:
            visible.add(var)

    def _define_buffer(self, buffer: Buffer) -> None:
        if buffer.dtype not in DTYPES:
            self.fail(f"buffer '{buffer.name}' has unknown dtype {buffer.dtype!r}")
        if buffer.scope not in SCOPES:
            self.fail(f"buffer '{buffer.name}' has unknown scope {buffer.scope!r}")
        negative = [dim.value for dim in buffer.shape
                    if isinstance(dim, IntImm) and dim.value < 0]
        if negative:
            self.fail(f"buffer '{buffer.name}' has a negative size {negative[0]} in its shape")
        if buffer.name not in self.buffers[-1]:
            self.buffers[-1].add(buffer.name)
            self.visible_buffers[buffer.name] = self.visible_buffers.get(buffer.name, 0) + 1
            self._buffers_key = None

    def _scoped(self, visit) -> None:
        self.scopes.append(set())
        self.buffers.append(set())
        visit()
        for var in self.scopes.pop():
            self.defined.discard(var)
        for name in self.buffers.pop():
            self.visible_buffers[name] -= 1
            if not self.visible_buffers[name]:
                del self.visible_buffers[name]
                self._buffers_key = None

    def _check_buffer(self, buffer: Buffer, access: str) -> None:
        if buffer.storage_name not in self.visible_buffers:
            self.fail(f"buffer '{buffer.name}' is {access} but is neither a parameter nor "
                      f"allocated in an enclosing block")
        if self.blocks and buffer.data is None and access != "declared" \
                and not (access == "loaded" and self.undeclared_reads_allowed) \
                and not self._declared(buffer.name, access):
            kind = "T.reads" if access == "loaded" else "T.writes"
            self.fail(f"buffer '{buffer.name}' is {access} but not declared in the "
                      f"block's {kind}")

    def _declared(self, name: str, access: str) -> bool:
        """Whether the innermost block may access the buffer `name` so: in its writes (or
        reads, for a load), or allocated by it, an enclosing block or a T.decl_buffer."""
        block = self.blocks[-1][0]
        regions = (*block.writes, *block.reads) if access == "loaded" else block.writes
        return any(r.buffer.name == name for r in regions) \
            or name in self.local_buffers[-1] \
            or any(b.name == name for enclosing, _ in self.blocks
                   for b in enclosing.alloc_buffers)

    def _check_index(self, what: str, expr) -> None:
        if not is_int(expr.dtype):
            self.fail(f"{what} must be an integer, got {expr.dtype}")
        self.visit(expr)

    def _check_access(self, buffer: Buffer, indices, access: str) -> None:
        self._check_buffer(buffer, access)
        if len(indices) != buffer.ndim:
            self.fail(f"buffer '{buffer.name}' has {buffer.ndim} dimensions but is {access} "
                      f"with {len(indices)} indices")
        for index in indices:
            self._check_index(f"an index of '{buffer.name}'", index)

    # -- expressions ---------------------------------------------------------------------------

    def visit_Var(self, var: Var) -> None:
        if var not in self.defined:
            self.fail(f"variable '{var.name}' is used outside its scope")
        elif self.blocks and var not in self.blocks[-1][1]:
            self.fail(f"variable '{var.name}' of an enclosing loop is used inside the block; "
                      f"bind it to a block iteration variable instead")

    def visit_BinaryOp(self, node: BinaryOp) -> None:
        if node.op not in ARITH_OPS + COMPARE_OPS + LOGIC_OPS:
            self.fail(f"unknown operator {node.op!r}")
        elif node.op in LOGIC_OPS and (node.a.dtype, node.b.dtype) != ("bool", "bool"):
            self.fail(f"'{node.op}' needs bool operands, got {node.a.dtype}, {node.b.dtype}")
        elif node.op not in LOGIC_OPS and node.a.dtype != node.b.dtype:
            self.fail(f"'{node.op}' on {node.a.dtype} and {node.b.dtype}")
        self.visit_children(node)

    def visit_Select(self, node: Select) -> None:
        if node.condition.dtype != "bool":
            self.fail(f"a select condition must be bool, got {node.condition.dtype}")
        if node.true_value.dtype != node.false_value.dtype:
            self.fail(f"select branches differ: {node.true_value.dtype} and "
                      f"{node.false_value.dtype}")
        self.visit_children(node)

    def visit_Call(self, node: Call) -> None:
        if node.op in EXTERN_CALLS:
            if not node.args or not isinstance(node.args[0], StringImm):
                self.fail(f"T.{node.op} needs the function's name as its first argument")
            for arg in node.args[1:]:
                if isinstance(arg, StringImm):
                    self.fail(f"T.{node.op}: a string is only allowed as the function's name")
                self.visit(arg)
            return
        if node.op == ADDRESS_OF:
            if len(node.args) != 1 or not isinstance(node.args[0], BufferLoad):
                self.fail("T.address_of takes one buffer element")
            self.visit_children(node)
            return
        if node.op in INT_FUNCTIONS:
            if not is_int(node.dtype) or any(a.dtype != node.dtype for a in node.args):
                self.fail(f"T.{node.op} needs integer operands of its dtype {node.dtype}, got "
                          f"{', '.join(a.dtype for a in node.args)}")
        elif node.op in (*BIT_FUNCTIONS, REINTERPRET, "ldexp"):
            problem = call_problem(node)
            if problem is not None:
                self.fail(problem)
        elif node.op not in MATH_FUNCTIONS + GPU_INTRINSICS:
            self.fail(f"unknown intrinsic {node.op!r}: expected one of "
                      f"{MATH_FUNCTIONS + INT_FUNCTIONS + BIT_FUNCTIONS + (REINTERPRET,)}")
        self.visit_children(node)

    def visit_Evaluate(self, node: Evaluate) -> None:
        if not (isinstance(node.value, Call) and node.value.op in EXTERN_CALLS):
            self.fail(f"T.evaluate of {node.value.script()}: only an opaque call "
                      f"(T.call_extern...) may be evaluated for its effect")
        self.visit(node.value)

    def visit_StringImm(self, node: StringImm) -> None:
        self.fail(f"the string {node.value!r} is only allowed as the name of an opaque call")

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self._check_access(node.buffer, node.indices, "loaded")

    def visit_Buffer(self, node: Buffer) -> None:
        pass  # buffers are checked where they are accessed or declared

    # -- statements ----------------------------------------------------------------------------

    def visit_BufferStore(self, node: BufferStore) -> None:
        self._check_access(node.buffer, node.indices, "stored")
        if node.value.dtype != node.buffer.dtype:
            self.fail(f"a {node.value.dtype} value is stored to '{node.buffer.name}' of dtype "
                      f"{node.buffer.dtype}")
        self.visit(node.value)

    def visit_For(self, node: For) -> None:
        if node.kind not in FOR_KINDS:
            self.fail(f"loop '{node.loop_var.name}' has unknown kind {node.kind!r}")
        if (node.kind == "thread_binding") != (node.thread_tag is not None):
            self.fail(f"loop '{node.loop_var.name}': a thread tag goes with kind thread_binding")
        if node.kind == "thread_binding" and isinstance(node.extent, IntImm) and \
                node.extent.value < 1 and not (node.thread_tag or "").startswith("vthread"):
            self.fail(f"loop '{node.loop_var.name}' bound to {node.thread_tag} has extent "
                      f"{node.extent.value}: a launch has at least one thread block and "
                      f"thread along each axis")
        self._check_index(f"the start of loop '{node.loop_var.name}'", node.min)
        self._check_index(f"the extent of loop '{node.loop_var.name}'", node.extent)
        if is_int(node.extent.dtype) and is_int(node.loop_var.dtype) and \
                bits(node.extent.dtype) > bits(node.loop_var.dtype):      # (int16 is fine)
            self.fail(f"loop '{node.loop_var.name}' of dtype {node.loop_var.dtype} has an "
                      f"extent of dtype {node.extent.dtype}, whose values it cannot take")

        def body():
            self._define(node.loop_var)
            self.visit(node.body)
        self._scoped(body)

    def visit_IfThenElse(self, node: IfThenElse) -> None:
        if node.condition.dtype != "bool":
            self.fail(f"an if condition must be bool, got {node.condition.dtype}")
        self.visit_children(node)

    def visit_While(self, node: While) -> None:
        if node.condition.dtype != "bool":
            self.fail(f"a while condition must be bool, got {node.condition.dtype}")
        # the root declares no regions (as TVM's): what a while loop of it reads to decide
        # is the loop's, and a function holding such a loop around blocks is not analysed
        # (polyhedral/statements.py), so nothing relies on the root declaring it
        at_root = len(self.blocks) == 1 and self.blocks[0][0].name == "root" \
            and not self.blocks[0][0].iter_vars
        self.undeclared_reads_allowed += at_root
        self.visit(node.condition)
        self.undeclared_reads_allowed -= at_root
        self.visit(node.body)

    def visit_Assume(self, node: Assume) -> None:
        if node.condition.dtype != "bool":
            self.fail(f"T.assume takes a bool condition, got {node.condition.dtype}")
        self.visit_children(node)

    def visit_LetStmt(self, node: LetStmt) -> None:
        if node.var.dtype != node.value.dtype:
            self.fail(f"let '{node.var.name}' of {node.var.dtype} bound to {node.value.dtype}")
        self.visit(node.value)

        def body():
            self._define(node.var)
            self.visit(node.body)
        self._scoped(body)

    def visit_Allocate(self, node: Allocate) -> None:
        for dim in node.buffer.shape:
            self._check_index(f"a dimension of '{node.buffer.name}'", dim)

        def body():
            self._define_buffer(node.buffer)
            self.local_buffers[-1].add(node.buffer.name)
            self._allocated_key = None
            self.visit(node.body)
            self.local_buffers[-1].discard(node.buffer.name)
            self._allocated_key = None
        self._scoped(body)

    def visit_BlockRealize(self, node: BlockRealize) -> None:
        # a block's problems are a function of the block and of what is visible where it is
        # (`_context`): remembered, so a step that rebuilt the function around blocks it did
        # not touch pays only for those it did
        key = (id(node), self._context())
        entry = _VERIFIED.recall(key)
        if entry is None or entry[0] is not node:
            entry = _VERIFIED.remember(key, (node, *self._alone(node)))
        _, problems, named = entry
        self.problems += problems
        for name, where in named.items():
            if name in self.block_names:
                self.problems.append(f"two blocks are named '{name}'; block names must be "
                                     f"unique{where}")
            self.block_names.add(name)
            self.named.setdefault(name, where)

    def _context(self) -> tuple:
        """What the problems found in a block realize depend on besides the realize: the
        variables and buffers visible there, the enclosing blocks' allocations and names."""
        if self._buffers_key is None:
            self._buffers_key = frozenset(self.visible_buffers)
        if self._allocated_key is None:
            self._allocated_key = frozenset(
                [b.name for enclosing, _ in self.blocks for b in enclosing.alloc_buffers]
                + list(self.local_buffers[-1]))
        enclosing = (self.blocks[-1][0].name, frozenset(self.blocks[-1][1] & self.defined)) \
            if self.blocks else None
        return (frozenset(self.defined), enclosing, self._buffers_key, self._allocated_key,
                self.undeclared_reads_allowed, self._function_key)

    def _alone(self, node: BlockRealize) -> tuple[list[str], dict[str, str]]:
        """The problems of `node` and the names of its blocks (with where each is), found
        as if no block had been named before it."""
        saved = self.problems, self.block_names, self.named
        self.problems, self.block_names, self.named = [], set(), {}
        try:
            self._realize(node)
            return self.problems, self.named
        finally:
            self.problems, self.block_names, self.named = saved

    def _realize(self, node: BlockRealize) -> None:
        block = node.block
        if block.name in self.block_names:
            self.fail(f"two blocks are named '{block.name}'; block names must be unique")
        self.block_names.add(block.name)
        self.named.setdefault(block.name, self._where())
        if len(node.iter_values) != len(block.iter_vars):
            self.fail(f"block '{block.name}' has {len(block.iter_vars)} iteration variables "
                      f"but {len(node.iter_values)} values")
        if node.predicate.dtype != "bool":
            self.fail(f"the predicate of block '{block.name}' must be bool")
        # the bindings and predicate decide the block's instances: what they load, the block
        # declares in its reads (so the analyses see it), as its body would; the variables
        # they use are those visible in the enclosing block (isolation of that block: a loop
        # outside it is reached through its iteration variables)
        self._push_block(block, self.blocks[-1][1] & self.defined if self.blocks else
                         set(self.defined))
        for value in (*node.iter_values, node.predicate):
            self.visit(value)
        self._pop_block()
        self._scoped(lambda: self._visit_block(block))

    def _visit_block(self, block: Block) -> None:
        for iter_var in block.iter_vars:
            if iter_var.kind not in ITER_KINDS:
                self.fail(f"iteration variable '{iter_var.var.name}' has unknown kind "
                          f"{iter_var.kind!r}")
            self.visit(iter_var.dom.min)
            self.visit(iter_var.dom.extent)
        self._push_block(block, set(self._function_vars))
        self.local_buffers.append(set())
        for iter_var in block.iter_vars:
            self._define(iter_var.var)
        for buffer in block.alloc_buffers:
            self._define_buffer(buffer)
        for region in (*block.reads, *block.writes):
            self._check_buffer(region.buffer, "declared")
            for r in region.region:
                self.visit(r.min)
                self.visit(r.extent)
        if block.init is not None:
            self.visit(block.init)
        self.visit(block.body)
        self._pop_block()
        self.local_buffers.pop()

    def run(self, func: PrimFunc) -> list[str]:
        self._function_vars = set(self.defined)
        self._function_key = frozenset(self._function_vars)
        self.visit(func.body)
        return self.problems


def verify(func: PrimFunc) -> None:
    """Raise VerifyError if `func` is not well formed (see the module docstring)."""
    problems = _Verifier(func).run(func) + _shared_loop_names(func)
    if problems:
        listing = "\n".join(f"  - {p}" for p in dict.fromkeys(problems))
        raise VerifyError(f"function '{func.name}' is not well formed:\n{listing}")

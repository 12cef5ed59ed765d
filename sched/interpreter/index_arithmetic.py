"""Index arithmetic in the interpreter: exact where the compiled code computes it exactly.

The compiled code (sched/lower/wide_integers.py) computes int32 index arithmetic (loop bounds,
conditions of `if`/`while`, `T.where` predicates, indices, lets) in int64 wherever it may
leave int32, and the analyses read it as integers (isl); what a store writes is data and
wraps. The interpreter follows the same rule, written from its definition here:

- an *index value* is built from index variables (loop variables, sizes, integer scalar
  parameters, and the iteration variables and lets bound to index values) and constants by
  + - * / // % min max, shifts by a constant, a bitwise and with a constant 2**k - 1 (the
  floor remainder modulo 2**k, as the analyses read it), selects and integer casts: no
  load, no other call;
- in an index context, an int32 or int64 operation that is an index value is computed in
  int64 (wrapping beyond it, where C leaves the overflow undefined) and narrowed to its
  type where it is used: as an index, a let's value, a cast's operand (`T.Cast("int64",
  i * 10**9)` wraps first), a branch of a select; as an operand of a comparison it is
  compared in int64 (`if i * 100000000 > 0` holds for every i > 0);
- a loop variable whose values may leave int32 (the compiled loop's is int64) is narrowed
  where data or a cast to a narrower type takes it; an int32 let of an index value holds it
  exactly (the compiled let is int64 where it may leave int32), narrowed where data or any
  cast takes it (`T.Cast("int64", x)` is the int32 x widened), and an int64 iteration
  variable bound to int32 index arithmetic takes its exact value;
- anything else wraps at every operation, as data does. Arithmetic mixing a value read from
  memory into an index is int32 (the simplifier may still rearrange it as integers in the
  compiled code: an overflow there is undefined; keep such arithmetic within int32).
"""

from __future__ import annotations

from sched.interpreter import runtime
from sched.ir.dtype import is_int
from sched.ir.intervals import low_bits_mask
from sched.ir.nodes import BinaryOp, Call, Cast, Expr, IntImm, Select, Var

INDEX_OPS = ("add", "sub", "mul", "div", "floordiv", "floormod", "min", "max")
SHIFTS = ("shift_left", "shift_right")
EXACT_DTYPES = ("int32", "int64")
_EXACT_OPERATORS = {"add": "+", "sub": "-", "mul": "*"}
_EXACT_HELPERS = {"div": "truncated_div", "floordiv": "floordiv", "floormod": "floormod"}


class IndexArithmetic:
    """Mixed into the interpreter's Emitter (codegen.py), which provides `expr` and `vars`."""

    exact = False                  # whether the expression being written is an index
    index_vars: set[str]           # names of the variables holding index values

    def index(self, node: Expr) -> str:
        """`node` in an index context (module doc)."""
        saved, self.exact = self.exact, True
        try:
            return self.expr(node)
        finally:
            self.exact = saved

    def exact_index(self, node: Expr) -> str:
        """Index value `node` computed exactly (in int64), not narrowed: the value of an
        int32 let of it, and of an int64 variable bound to it."""
        saved, self.exact = self.exact, True
        try:
            return self.exact_value(node)
        finally:
            self.exact = saved

    def bound(self, node: Expr) -> str:
        """A loop bound: compared with the loop's variable, so exact where an index value
        (the compiled loop's variable is int64 where its values may leave int32)."""
        saved, self.exact = self.exact, True
        try:
            return self.compared(node)
        finally:
            self.exact = saved

    def data(self, node: Expr) -> str:
        """`node` as data: every integer operation wraps."""
        saved, self.exact = self.exact, False
        try:
            return self.expr(node)
        finally:
            self.exact = saved

    def is_index_value(self, node: Expr) -> bool:
        if isinstance(node, IntImm):
            return is_int(node.dtype)
        if isinstance(node, Var):
            return node.name in self.index_vars
        if isinstance(node, Cast):
            return is_int(node.dtype) and is_int(node.value.dtype) and \
                self.is_index_value(node.value)
        if isinstance(node, Select):
            return self.is_index_value(node.true_value) and \
                self.is_index_value(node.false_value)
        if isinstance(node, BinaryOp):
            return node.op in INDEX_OPS and is_int(node.dtype) and \
                self.is_index_value(node.a) and self.is_index_value(node.b)
        if isinstance(node, Call):
            return (_constant_shift(node) or low_bits_mask(node) is not None) and \
                self.is_index_value(node.args[0])
        return False

    def is_exact(self, node: Expr) -> bool:
        """Whether `node`, here, is an operation computed exactly (then narrowed)."""
        return self.exact and node.dtype in EXACT_DTYPES and \
            isinstance(node, BinaryOp | Call) and self.is_index_value(node)

    def narrowed_exact(self, node: Expr) -> str:
        """An exact operation narrowed to its type (where it is used)."""
        return runtime.wrap_source(node.dtype, self.exact_value(node))

    def compared(self, node: Expr) -> str:
        """An operand of a comparison: exact where it is an index value in an index."""
        if self.exact and node.dtype in EXACT_DTYPES and self.is_index_value(node):
            return self.exact_value(node)
        return self.expr(node)

    def exact_value(self, node: Expr) -> str:
        """Python source for the value of index value `node` computed in int64, as the
        compiled code computes it; each operation wraps at 64 bits (where C leaves the
        overflow undefined and the compiled result may be either; audit helper-87)."""
        if isinstance(node, BinaryOp) and node.dtype in EXACT_DTYPES:
            a, b = self.exact_value(node.a), self.exact_value(node.b)
            if node.op in _EXACT_OPERATORS:
                return runtime.wrap_source("int64", f"{a} {_EXACT_OPERATORS[node.op]} {b}")
            if node.op in ("min", "max"):
                return f"{node.op}({a}, {b})"
            return runtime.wrap_source("int64", f"_rt.{_EXACT_HELPERS[node.op]}({a}, {b})")
        if isinstance(node, Call) and node.dtype in EXACT_DTYPES:
            value, constant = self.exact_value(node.args[0]), node.args[1].value
            if node.op == "bitwise_and":          # the floor remainder modulo 2**k
                return f"({value} & {constant})"
            return runtime.wrap_source("int64", f"{value} << {constant}") \
                if node.op == "shift_left" else f"({value} >> {constant})"
        if isinstance(node, Select):
            return (f"({self.exact_value(node.true_value)} if {self.expr(node.condition)} "
                    f"else {self.exact_value(node.false_value)})")
        if isinstance(node, Cast) and node.dtype == node.value.dtype:
            return self.exact_value(node.value)  # no cast (the compiled code drops it)
        return self.expr(node)         # a variable, a constant, a cast (as it is), a narrow op


def _constant_shift(node: Call) -> bool:
    return node.op in SHIFTS and is_int(node.dtype) and isinstance(node.args[1], IntImm) \
        and 0 <= node.args[1].value < 63

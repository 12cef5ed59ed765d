"""sched's IR: nodes, walking and rewriting, simplification, regions, printing and parsing."""

from sched.ir.dtype import DTYPES, INDEX_DTYPE
from sched.ir.functor import IRMutator, IRVisitor, collect, free_vars, substitute
from sched.ir.module import IRModule
from sched.ir.nodes import (
    TRUE,
    Allocate,
    Assume,
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
    Expr,
    FloatImm,
    For,
    IfThenElse,
    IntImm,
    IterVar,
    LetStmt,
    Node,
    Not,
    PrimFunc,
    Range,
    Select,
    SeqStmt,
    Stmt,
    Var,
    While,
    binary,
    const,
    convert,
    equal,
    logical_and,
    logical_or,
    not_equal,
    seq,
)
from sched.ir.parser import parse
from sched.ir.printer import to_script
from sched.ir.regions import infer_block_regions
from sched.ir.simplify import simplify

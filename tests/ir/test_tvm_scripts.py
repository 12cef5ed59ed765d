"""TensorIR scripts written as TVM users write them parse into the expected IR; what the parser
does not know is an error naming the line and the construct.

No `from __future__ import annotations` here: Python evaluates the signatures of the
`@T.prim_func` functions below when defining them, as it does in users' files.
"""

import math
from pathlib import Path

import pytest

from sched.errors import ScriptError
from sched.ir import (
    TRUE,
    Allocate,
    BinaryOp,
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    Call,
    Cast,
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
    Var,
    equal,
)
from sched.ir.functor import collect
from sched.ir.parser import parse
from sched.ir.printer import to_script
from sched.script import T


def point(buffer: Buffer, *indices) -> BufferRegion:
    return BufferRegion(buffer, tuple(Range(i, IntImm(1)) for i in indices))


def implicit_root(body, *alloc_buffers) -> BlockRealize:
    return BlockRealize((), TRUE, Block("root", (), (), (), body, alloc_buffers=alloc_buffers))


def axis(name: str, extent, kind: str = "spatial", lo=0) -> IterVar:
    extent = IntImm(extent) if isinstance(extent, int) else extent
    return IterVar(Var(name), Range(IntImm(lo), extent), kind)


def loop(var: Var, extent, body, kind: str = "serial", lo=0, **kwargs) -> For:
    extent = IntImm(extent) if isinstance(extent, int) else extent
    return For(var, IntImm(lo), extent, kind, body, **kwargs)


i, j, k = Var("i"), Var("j"), Var("k")
vi, vj, vk = Var("vi"), Var("vj"), Var("vk")


# The matmul of TVM's TensorIR tutorial, as written there.
@T.prim_func
def tutorial_matmul(a: T.handle, b: T.handle, c: T.handle):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    A = T.match_buffer(a, (128, 128), "float32")
    B = T.match_buffer(b, (128, 128), "float32")
    C = T.match_buffer(c, (128, 128), "float32")
    for i, j, k in T.grid(128, 128, 128):
        with T.block("update"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(A[vi, vk], B[vj, vk])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]


def test_matmul_with_remap_init_and_regions():
    A, B, C = (Buffer(name, (IntImm(128), IntImm(128))) for name in "ABC")
    block = Block("update", (axis("vi", 128), axis("vj", 128), axis("vk", 128, "reduce")),
                  (point(A, vi, vk), point(B, vj, vk)), (point(C, vi, vj),),
                  BufferStore(C, C[vi, vj] + A[vi, vk] * B[vj, vk], (vi, vj)),
                  init=BufferStore(C, FloatImm(0.0), (vi, vj)))
    nest = loop(i, 128, loop(j, 128, loop(k, 128, BlockRealize((i, j, k), TRUE, block))))
    expected = PrimFunc("tutorial_matmul", (A, B, C), implicit_root(nest),
                        (("global_symbol", "main"), ("tir.noalias", True)))
    assert tutorial_matmul == expected
    assert parse(to_script(tutorial_matmul)) == tutorial_matmul


@T.prim_func
def stencil(A: T.Buffer((130,), "float32"), B: T.Buffer((128,), "float32"),
            S: T.Buffer((128,), "float32")):
    for i in range(128):
        with T.block("B"):
            vi = T.axis.spatial(128, i)
            B[vi] = A[vi] + A[vi + 1] + A[vi + 2]
    for i, k in T.grid(128, 4):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                S[vi] = 0.0
            S[vi] = S[vi] + B[vi] * A[vk]


def test_regions_left_out_are_inferred():
    A, B, S = stencil.params
    nests = stencil.body.block.body.stmts
    first, second = nests[0].body.block, nests[1].body.body.block
    assert first.reads == (BufferRegion(A, (Range(vi, IntImm(3)),)),)    # A[vi:vi + 3]
    assert first.writes == (point(B, vi),)
    # the update reads its own output, listed after its inputs (as TVM numbers the reads);
    # a literal 0.0 takes the stored buffer's dtype
    assert second.reads == (point(B, vi), point(A, vk), point(S, vi))
    assert second.writes == (point(S, vi),)
    assert second.init == BufferStore(S, FloatImm(0.0), (vi,))


@T.prim_func
# ruff reads the dtype strings of the old T.Buffer[...] syntax as forward references
def max_then_exp(A: T.Buffer[(64, 64), "float32"], B: T.Buffer[(64,), "float32"]):  # noqa: F821
    T.func_attr({"global_symbol": "max_then_exp"})
    M = T.alloc_buffer((64,), "float32")
    for i, k in T.grid(64, 64):
        with T.block("row_max"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.reads(A[vi, 0:64])
            T.writes(M[vi])
            with T.init():
                M[vi] = T.float32(-3.0e38)
            M[vi] = T.max(M[vi], A[vi, vk])
    for i in range(64):
        with T.block("out"):
            vi = T.axis.spatial(64, i)
            B[vi] = T.if_then_else(M[vi] > T.float32(0), T.exp(M[vi]), T.float32(0))


def test_two_blocks_with_an_intermediate_buffer():
    A, B = max_then_exp.params
    M = Buffer("M", (IntImm(64),))
    row_max = Block("row_max", (axis("vi", 64), axis("vk", 64, "reduce")),
                    (BufferRegion(A, (Range(vi, IntImm(1)), Range(IntImm(0), IntImm(64)))),),
                    (point(M, vi),),
                    BufferStore(M, BinaryOp("max", M[vi], A[vi, vk]), (vi,)),
                    init=BufferStore(M, FloatImm(-3.0e38), (vi,)))
    value = Select(M[vi] > FloatImm(0.0), Call("exp", (M[vi],), "float32"), FloatImm(0.0))
    out = Block("out", (axis("vi", 64),), (point(M, vi),), (point(B, vi),),
                BufferStore(B, value, (vi,)))
    # the script names both nests' loop `i`: names identify loops, so the second is `i_1`
    second = Var("i_1")
    body = SeqStmt((loop(i, 64, loop(k, 64, BlockRealize((i, k), TRUE, row_max))),
                    loop(second, 64, BlockRealize((second,), TRUE, out))))
    assert A == Buffer("A", (IntImm(64), IntImm(64))) and B == Buffer("B", (IntImm(64),))
    assert max_then_exp == PrimFunc("max_then_exp", (A, B), implicit_root(body, M),
                                    (("global_symbol", "max_then_exp"),))


@T.prim_func(private=True)
def symbolic_scale(a: T.handle, b: T.handle, alpha: T.float16):
    n = T.int32()
    A = T.match_buffer(a, (n, 128))
    B = T.match_buffer(b, [n, 128], dtype="float16")
    for i, j in T.grid(n, 128):
        with T.block():
            vi = T.axis.S(n, i)
            vj = T.axis.S(128, j)
            B[vi, vj] = T.Cast("float16", A[vi, vj] * 2.0) * alpha


def test_handles_symbolic_dims_and_unnamed_blocks():
    n, alpha = Var("n"), Var("alpha", "float16")
    A = Buffer("A", (n, IntImm(128)))
    B = Buffer("B", (n, IntImm(128)), "float16")
    assert symbolic_scale.params == (A, B, alpha)
    realize = symbolic_scale.body.block.body.body.body
    assert realize.block.name == "b0"
    assert realize.block.iter_vars == (axis("vi", n), axis("vj", 128))
    assert realize.block.body.value == \
        Cast("float16", A[vi, vj] * FloatImm(2.0)) * alpha
    assert parse(to_script(symbolic_scale)) == symbolic_scale


@T.prim_func
def gpu_loops(A: T.Buffer((1000,), "float32"), B: T.Buffer((1000,), "float32")):
    for bx in T.thread_binding(8, thread="blockIdx.x"):
        for tx in T.thread_binding(0, 128, "threadIdx.x"):
            with T.block("B"):
                vi = T.axis.spatial((0, 1000), bx * 128 + tx)
                T.where(bx * 128 + tx < 1000)
                T.block_attr({"note": "tail", "stage": -1})
                B[vi] = A[vi] + T.float32(1)
    for i in T.serial(4, 8, annotations={"pragma_unroll": 1}):
        for j in T.parallel(2):
            for k in T.vectorized(4):
                for u in T.unroll(2):
                    for w in range(3, 5):
                        with T.block("C"):
                            vi = T.axis.R((4, 8), i)
                            B[vi] = B[vi] + A[j * 8 + k * 2 + u + w]


def test_every_loop_kind_of_a_tvm_script():
    bx, tx, u, w = Var("bx"), Var("tx"), Var("u"), Var("w")
    first, second = gpu_loops.body.block.body.stmts
    assert (first.kind, first.thread_tag, first.extent) == ("thread_binding", "blockIdx.x",
                                                             IntImm(8))
    assert (first.body.thread_tag, first.body.loop_var) == ("threadIdx.x", tx)
    block = first.body.body
    assert block.predicate == (bx * 128 + tx < 1000)
    assert block.block.annotations == (("note", "tail"), ("stage", -1))
    assert [(f.loop_var, f.min, f.extent, f.kind, f.annotations) for f in
            (second, second.body, second.body.body, second.body.body.body,
             second.body.body.body.body)] == [
        (i, IntImm(4), IntImm(4), "serial", (("pragma_unroll", 1),)),
        (j, IntImm(0), IntImm(2), "parallel", ()),
        (k, IntImm(0), IntImm(4), "vectorized", ()),
        (u, IntImm(0), IntImm(2), "unrolled", ()),
        (w, IntImm(3), IntImm(2), "serial", ())]
    # the loops the block uses without binding them become opaque iteration variables
    assert second.body.body.body.body.body.block.iter_vars == (
        axis("vi", 4, "reduce", lo=4), axis("v_j", 2, "opaque"), axis("v_k", 4, "opaque"),
        axis("v_u", 2, "opaque"), axis("v_w", 2, "opaque", lo=3))
    assert parse(to_script(gpu_loops)) == gpu_loops


def test_lowered_script_with_views_allocations_and_lets():
    func = parse('''
        from tvm.script import tir as T

        @T.prim_func
        def lowered(A: T.Buffer((8, 8), "float32")):
            A_flat = T.Buffer((64,), "float32", data=A.data)
            acc = T.decl_buffer((1,), "float32", scope="local")
            for i in range(8):
                base = i * 8
                acc[0] = T.float32(0)
                for j in range(8):
                    acc[0] += A_flat[base + j]
                if acc[0] > T.float32(0):
                    T.evaluate(0)
                    x: T.float32 = acc[0]
                    A_flat[base] = x
                else:
                    pass
    ''')
    A = func.params[0]
    flat, acc = Buffer("A_flat", (IntImm(64),), data="A"), Buffer("acc", (IntImm(1),),
                                                                   scope="local")
    base, x = Var("base"), Var("x", "float32")
    branch = IfThenElse(acc[0] > FloatImm(0.0),
                        LetStmt(x, acc[0], BufferStore(flat, x, (base,))), SeqStmt(()))
    body = LetStmt(base, i * 8, SeqStmt((
        BufferStore(acc, FloatImm(0.0), (IntImm(0),)),
        loop(j, 8, BufferStore(acc, acc[0] + flat[base + j], (IntImm(0),))),
        branch)))
    assert func == PrimFunc("lowered", (A,), Allocate(acc, loop(i, 8, body)))


def test_regions_as_lists_and_whole_buffers_and_older_spellings():
    func = parse('''
        @T.prim_func
        def row_sum(a: T.handle, b: T.handle):
            n = T.var("int32")
            A = T.match_buffer(a, (n, 8), "float32")
            B = T.match_buffer(b, (n,), "float32")
            for i in range(n):
                for k in range(8):
                    with T.block("sum"):
                        vi = T.axis.S(n, i)
                        vk = T.axis.R(8, k)
                        T.reads([B[vi], A[vi, :]])
                        T.writes(B)
                        B[vi] = B[vi] + A[vi, vk]
    ''')
    n = Var("n")
    A, B = Buffer("A", (n, IntImm(8))), Buffer("B", (n,))
    block = func.body.block.body.body.body.block
    assert block.iter_vars == (axis("vi", n), axis("vk", 8, "reduce"))
    assert block.reads == (point(B, vi), BufferRegion(A, (Range(vi, IntImm(1)),
                                                          Range(IntImm(0), IntImm(8)))))
    assert block.writes == (BufferRegion(B, (Range(IntImm(0), n),)),)


def value(text: str, dtype: str = "float32"):
    """The expression `text` stored to a buffer of `dtype`, with A, H, i, j, x, p in scope."""
    func = parse(f'''
        @T.prim_func
        def f(A: T.Buffer((16,), "float32"), H: T.Buffer((16,), "float16"), i: T.int32,
              j: T.int32, x: T.float32, p: T.bool, O: T.Buffer((1,), "{dtype}")):
            O[0] = {text}
    ''')
    return func.body.value


x, p = Var("x", "float32"), Var("p", "bool")
H = Buffer("H", (IntImm(16),), "float16")


@pytest.mark.parametrize("text, dtype, expected", [
    ("H[i] * 2.0", "float16", H[i] * FloatImm(2.0, "float16")),
    ("2 * i + 1", "int32", IntImm(2) * i + 1),
    ("-i", "int32", IntImm(0) - i),
    ("-3 + i", "int32", IntImm(-3) + i),
    ("0 <= i < j", "bool", (IntImm(0) <= i) & (i < j)),
    ("i == j and not p", "bool", equal(i, j) & Not(p)),
    ("T.likely(i < 4)", "bool", i < 4),
    ("T.floordiv(i, 4) + T.floormod(i, 4)", "int32", i // 4 + i % 4),
    ("T.Select(p, x, 1.5)", "float32", Select(p, x, FloatImm(1.5))),
    ("x if p else 0.0", "float32", Select(p, x, FloatImm(0.0))),
    ("T.float32(i)", "float32", Cast("float32", i)),
    ("T.float32(1)", "float32", FloatImm(1.0)),
    ('T.float16("-inf")', "float16", FloatImm(-math.inf, "float16")),
    ("T.bfloat16(0.25)", "bfloat16", FloatImm(0.25, "bfloat16")),
    ("T.int8(-3)", "int8", IntImm(-3, "int8")),
    ("T.bool(False)", "bool", IntImm(0, "bool")),
    ("True", "bool", IntImm(1, "bool")),
    ("T.min(i, 3) // 2", "int32", BinaryOp("min", i, IntImm(3)) // 2),
    ("T.pow(x, 2.0) + T.sqrt(x) / T.rsqrt(x)", "float32",
     Call("pow", (x, FloatImm(2.0)), "float32") + Call("sqrt", (x,), "float32")
     / Call("rsqrt", (x,), "float32")),
])
def test_expressions(text, dtype, expected):
    assert value(text, dtype) == expected


# --------------------------------------------------------------------------------------------
# Errors


BLOCK_TEMPLATE = '''
@T.prim_func
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16, 16), "float32"), x: T.float32):
    for i in range(16):
        with T.block("b"):
            vi = T.axis.spatial(16, i)
            {line}
'''


@pytest.mark.parametrize("line, message", [
    ("A[vi] = A[vi] + foo", "line 7: unknown name 'foo'"),
    ('T.blok("x")', "line 7: unknown construct 'T.blok'"),
    ("A[vi] = T.exp(x, x)", "line 7: T.exp takes 1 argument, got 2"),
    ("A[vi] = B[vi]", r"line 7: buffer 'B' has 2 dimensions but 'B\[vi\]' gives 1 indices"),
    ("B[vi] = x", r"line 7: buffer 'B' has 2 dimensions but 'B\[vi\]' gives 1 indices"),
    ("A[vi] = T.Cast('flaot32', x)", "line 7: unknown dtype 'flaot32'"),
    ("A[vi + 0.5] = x", r"line 7: 'A\[vi \+ 0.5\]': the index 'vi \+ 0.5' is float32; an "
                        r"index must be an integer"),
    ("A[vi] = T.Cast('float16', x) + T.Cast('bfloat16', x)",
     "line 7: 'add' on float16 and bfloat16: cast one operand first"),
    ("A[vi] = max(x, x)", "line 7: unknown function 'max'"),
    ("A[vi] = A[vi:vi + 1]", "line 7: .* a slice is only allowed in T.reads/T.writes"),
    ("T.evaluate(x)", "line 7: T.evaluate takes one opaque call"),
    ("try:\n                pass\n            except Exception:\n                pass",
     "line 7: unsupported statement .try:."),
    ("with T.init():\n                pass\n            A[vi] = x\n            T.reads(A[vi])",
     r"line 10: 'T.reads' is only allowed at the start of a T.block"),
    ("D = T.alloc_buffer((4,), scope='texture')", "line 7: unknown storage scope"),
    ("vj, vk = T.axis.remap('SSR', [i, i])",
     "line 7: T.axis.remap: kinds 'SSR' has 3 letters for 2 loop variables"),
    ("vj = T.axis.remap('S', [vi])", "line 7: T.axis.remap: 'vi' is not the variable of an "
                                     "enclosing loop"),
    ("for t in T.grid(2, 2):\n                pass", "line 7: 't': expected 2 loop variable"),
    ("for t in T.thread_binding(2, thread='warp.x'):\n                pass",
     "line 7: T.thread_binding: thread= must be one of"),
    ("with T.blok('x'):\n                pass", "line 7: unknown construct 'T.blok'"),
    ("T.where(vi < 8)\n            A[vi] = x",      # (a VerifyError at build: helper-186)
     r"line 7: T.where\(vi < 8\) uses the block's own axis 'vi'.* the loop variables"),
])
def test_errors_name_the_line_and_the_construct(line, message):
    with pytest.raises(ScriptError, match=message):
        parse(BLOCK_TEMPLATE.format(line=line))


@pytest.mark.parametrize("text, message", [
    ("def f(a: T.handle):\n    pass", "line 1: parameter 'a' is a T.handle that no "
                                       "T.match_buffer matches"),
    ("def f(a):\n    pass", "line 1: parameter 'a' needs an annotation"),
    ("@tvm.jit\ndef f():\n    pass", r"line 1: unknown decorator '@tvm.jit'"),
    ("def f(A: T.Buffer((4,), 'flaot32')):\n    pass", "line 1: unknown dtype 'flaot32'"),
    ("def f(A: T.Buffer((n,), 'float32')):\n    pass", "line 1: unknown name 'n'"),
    ("def f():\n    pass\n\n\ndef g():\n    pass",
     "expected one @T.prim_func function or @I.ir_module class, found 2"),
    ("def f(:\n    pass", "line 1: invalid Python"),
    ("def f(A: T.Buffer((4,), 'float32')):\n    A[0] = 1.0\n    T.func_attr({})",
     "line 3: 'T.func_attr' is only allowed at the start of the function"),
    ("def f(A: T.Buffer((4,), 'float32')):\n    T.reads(A[0])",
     "line 2: 'T.reads' is only allowed at the start of a T.block"),
])
def test_function_level_errors(text, message):
    with pytest.raises(ScriptError, match=message):
        parse(text)


def test_error_in_a_decorated_function_names_the_line_in_its_file():
    with pytest.raises(ScriptError) as info:
        @T.prim_func
        def bad(A: T.Buffer((4,), "float32")):
            for _i in range(4):
                T.blok("x")  # the line the error names
    lines = Path(__file__).read_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if "# the line the error names" in text)
    assert str(info.value).startswith(f"line {line}: unknown construct 'T.blok'")
    assert info.value.lineno == line and info.value.filename == __file__
    assert 'T.blok("x")' in info.value.text          # Python's traceback shows the line


NARROW_RANGE = '''
@T.prim_func
def f(A: T.Buffer((256,), "float32")):
    n = T.uint8()
    for i in T.serial({start}, {stop}):
        with T.block("b"):
            vi = T.axis.spatial(256, T.Cast("int32", i) + 100)
            A[vi] = T.float32(1)
'''


@pytest.mark.parametrize("start, stop, message", [
    ("T.int8(-100)", "T.int8(100)", r"the range \[-100, 100\) in int8: its count \(200\) or "
                                    r"its end must fit int8"),
    ("T.uint8(10)", "n", r"the range \[T.uint8\(10\), n\) in uint8: its extent .* may wrap"),
    # the end 256 wrapped to 0 in the C loop's bound: no iteration ran (helper-191)
    ("T.uint8(156)", "T.uint8(156) + T.uint8(100)", r"the range \[156, 256\) in uint8: its "
                                                    r"count \(100\) or its end must fit"),
    ("n", "n + T.uint8(100)", r"the range \[n, n \+ T.uint8\(100\)\) in uint8"),
    ("T.uint8(1)", "256", r"the constant 256 is outside uint8")])
def test_a_narrow_range_whose_extent_wraps_is_refused(start, stop, message):
    # its extent, `stop - start` in the loop's type, wrapped: -56 for the first, 251 for the
    # second at n = 5, and split then ran them (audit helper-189)
    with pytest.raises(ScriptError, match=message):
        parse(NARROW_RANGE.format(start=start, stop=stop))


def test_an_empty_constant_narrow_range_has_extent_zero():
    func = parse(NARROW_RANGE.format(start="T.uint8(10)", stop="T.uint8(5)"))
    (loop,) = collect(func.body, For)
    assert loop.extent == IntImm(0, "uint8")
    assert parse(func.script()) == func

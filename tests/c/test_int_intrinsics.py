"""The integer intrinsics (T.bitwise_*, T.shift_*) compute on the C target what numpy and the
reference interpreter compute, for narrow, wide and unsigned integers."""

import numpy as np
import pytest

import sched
from sched.ir import nodes as ir
from sched.ir.nodes import BlockRealize, Buffer, BufferStore, Call, For, IntImm, PrimFunc, Var

N = 64


def elementwise(op: str, dtype: str) -> PrimFunc:
    """C[i] = op(A[i], B[i]) (op(A[i]) for bitwise_not)."""
    A, B, C = (Buffer(name, (IntImm(N),), dtype) for name in "ABC")
    vi, i = Var("vi"), Var("i")
    args = (A[vi],) if op == "bitwise_not" else (A[vi], B[vi])
    store = BufferStore(C, Call(op, args, dtype), (vi,))
    regions = tuple(ir.BufferRegion(b, (ir.Range(vi, IntImm(1)),)) for b in (A, B))
    block = ir.Block("C", (ir.IterVar(vi, ir.Range(IntImm(0), IntImm(N))),), regions,
                     (ir.BufferRegion(C, (ir.Range(vi, IntImm(1)),)),), store)
    body = For(i, IntImm(0), IntImm(N), "serial", BlockRealize((i,), ir.TRUE, block))
    root = BlockRealize((), ir.TRUE, ir.Block("root", (), (), (), body))
    return PrimFunc("f", (A, B, C), root)


NUMPY = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
         "bitwise_xor": np.bitwise_xor, "shift_left": np.left_shift,
         "shift_right": np.right_shift}


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint32"])
@pytest.mark.parametrize("op", [*NUMPY, "bitwise_not"])
def test_integer_intrinsic_matches_numpy_and_the_interpreter(op, dtype):
    rng = np.random.default_rng(0)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True)
    if op.startswith("shift"):
        b = rng.integers(0, info.bits, N).astype(dtype)      # shifts within the width
    else:
        b = rng.integers(info.min, info.max, N, dtype=dtype, endpoint=True)
    expected = np.invert(a) if op == "bitwise_not" else NUMPY[op](a, b).astype(dtype)
    func = elementwise(op, dtype)
    c = np.zeros(N, dtype)
    sched.build(func, target="c")(a, b, c)
    np.testing.assert_array_equal(c, expected)
    c2 = np.zeros(N, dtype)
    sched.interpret(func, a, b, c2)
    np.testing.assert_array_equal(c2, expected)
    assert sched.parse(func.script()) == func

"""TVMScript parity on the CUDA target: a loop bound to a virtual thread is a serial loop inside
the kernel, and the integer intrinsics compile (NVRTC, no GPU needed). Numbers on a GPU are
checked in the test marked gpu."""

import numpy as np
import pytest

import sched
from sched.errors import BuildError
from sched.ir.parser import parse

SOURCE = '''
@T.prim_func
def f(A: T.Buffer((256,), "int32"), B: T.Buffer((256,), "int32")):
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for vt in T.thread_binding(2, thread="vthread.x"):
            for tx in T.thread_binding(64, thread="threadIdx.x"):
                with T.block("B"):
                    vi = T.axis.spatial(256, bx * 128 + vt * 64 + tx)
                    B[vi] = (T.shift_left(A[vi], 3) ^ (A[vi] >> 1)) & 1023
'''


def expected(a):
    return ((a << 3) ^ (a >> 1)) & 1023


def test_vthread_is_a_serial_loop_and_integer_intrinsics_compile(tmp_path, monkeypatch):
    monkeypatch.setenv("SCHED_CACHE_DIR", str(tmp_path))
    kernel = sched.build(parse(SOURCE), target="cuda", arch="sm_80")
    assert "for (int32_t vt = 0; vt < 2; ++vt) {" in kernel.source
    assert "vthread" not in kernel.source
    assert "<< (3)" in kernel.source and ">> (1)" in kernel.source
    # the same schedule on the C target computes what numpy does
    a = np.arange(-128, 128, dtype=np.int32) * 7
    b = np.zeros(256, np.int32)
    sched.build(parse(SOURCE), target="c")(a, b)
    np.testing.assert_array_equal(b, expected(a))


@pytest.mark.gpu
def test_vthread_and_integer_intrinsics_on_the_gpu():
    torch = pytest.importorskip("torch")
    a = torch.arange(-128, 128, dtype=torch.int32, device="cuda") * 7
    b = torch.zeros(256, dtype=torch.int32, device="cuda")
    sched.build(parse(SOURCE), target="cuda")(a, b)
    np.testing.assert_array_equal(b.cpu().numpy(), expected(a.cpu().numpy()))


# a TVM script names the loops of sibling nests alike: each `tx` below is its own loop
SIBLING_THREAD_LOOPS = '''
@T.prim_func
def main(A: T.Buffer((4, 32), "float32"), B: T.Buffer((4, 32), "float32")):
    S = T.alloc_buffer((4, 32), "float32", scope="shared")
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("S"):
                vi, vj = T.axis.remap("SS", [bx, tx])
                S[vi, vj] = A[vi, vj]
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [bx, tx])
                B[vi, vj] = S[vi, 31 - vj] * T.float32(2)
'''


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_sibling_thread_loops_of_one_name_are_two_loops(target):
    func = parse(SIBLING_THREAD_LOOPS)
    assert "for tx_1 in T.thread_binding(32, thread=\"threadIdx.x\"):" in func.script()
    a = np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32)
    out = np.full((4, 32), np.nan, np.float32)
    sched.build(func, target=target)(a, out)
    np.testing.assert_array_equal(out, a[:, ::-1] * 2)


# two grids in one kernel exchanging values through global memory: nothing orders one grid's
# thread blocks before the other's (the C target, running the blocks in turn, would hide it)
EXCHANGE_ACROSS_BLOCKS = '''
@T.prim_func
def main(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for t in range(3):
        for bx in T.thread_binding(4, thread="blockIdx.x"):
            for tx in T.thread_binding(16, thread="threadIdx.x"):
                with T.block("P"):
                    vt = T.axis.remap("S", [t])
                    vi = T.axis.spatial(64, bx * 16 + tx)
                    B[vi] = A[(vi + 17) % 64] + T.float32(1)
        for bx in T.thread_binding(4, thread="blockIdx.x"):
            for tx in T.thread_binding(16, thread="threadIdx.x"):
                with T.block("Q"):
                    vt = T.axis.remap("S", [t])
                    vi = T.axis.spatial(64, bx * 16 + tx)
                    A[vi] = B[(vi + 33) % 64] * T.float32(0.5)
'''


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_grids_of_one_loop_name_exchanging_values_across_blocks_are_refused(target):
    with pytest.raises(BuildError, match="loop .bx. .* run at the same time but "
                                                  "depend on each other"):
        sched.build(parse(EXCHANGE_ACROSS_BLOCKS), target=target)

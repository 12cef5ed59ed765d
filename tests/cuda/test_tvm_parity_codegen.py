"""TVMScript parity on the CUDA target: a loop bound to a virtual thread is a serial loop inside
the kernel, and the integer intrinsics compile (NVRTC, no GPU needed). Numbers on a GPU are
checked in the test marked gpu."""

import numpy as np
import pytest

import sched
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

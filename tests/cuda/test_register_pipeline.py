"""Software pipelining of register double buffers: the inner k loop of a tensor-core matmul
annotated with TVM's `software_pipeline_stage` [0, 0, 1] loads the warp operands (ldmatrix)
of step k + 1 while multiplying those of step k: the warp buffers get two copies, the loop a
prologue and an epilogue; the stages are checked against the dependences; the numbers match
numpy on the C target and on cuda-emu, with sched's 16x16 warp layout and with TVM's 32x8
one, alone and under the shared-memory (cp.async) pipeline of the outer loop; the kernels
compile for sm_80/sm_90 with no spills."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.hand_schedules.gpu import gpu_matmul_mma
from sched.lower.pipeline import lower
from tests.cuda.test_mma_tvm_layout import tvm_mma_schedule
from tests.schedule.test_tensorize_wmma import fp16_inputs

M, N, K = 64, 64, 128


def pipelined(sch, inner_stages=(0, 0, 1), outer=False):
    """`sch` with the loop over the 16s of k (ldmatrix A, ldmatrix B, mma) pipelined, and,
    with `outer`, the loop over the shared tiles too (copies asynchronous)."""
    k_outer, k_inner = sch.get_loops(sch.get_block("A_shared_warp_o"))[4:6]
    sch.annotate(k_inner, "software_pipeline_stage", list(inner_stages))
    sch.annotate(k_inner, "software_pipeline_order", [0, 1, 2])
    if outer:
        sch.annotate(k_outer, "software_pipeline_stage", [0, 0, 1])
        sch.annotate(k_outer, "software_pipeline_order", [0, 1, 2])
        sch.annotate(k_outer, "software_pipeline_async_stages", [0])
    return sch


def check_numbers(sch, target):
    a, b, expected = fp16_inputs(M, N, K)
    c = np.zeros((M, N), np.float32)
    sched.build(sch.func, target=target)(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)


@pytest.fixture(scope="module")
def sched_layout():
    return pipelined(gpu_matmul_mma(M, N, K, k_tiles=4))


@pytest.fixture(scope="module")
def tvm_layout():
    return pipelined(tvm_mma_schedule(M, N, K, fragments=(1, 2), k_tiles=2), outer=True)


def test_the_warp_buffers_are_doubled_with_a_prologue_and_an_epilogue(sched_layout):
    script = lower(sched_layout.func, target="cuda").script()
    # two copies of each warp operand (2 x 2 tiles of A, 2 x 2 of B per warp)
    assert 'A_shared_warp = T.decl_buffer((1024,), "float16", scope="warp")' in script
    assert "for k_1 in T.serial(1, 4):" in script          # steady state after the prologue
    assert "A_shared_warp[k_1 % 2 * 512 + " in script      # step k_1 loads into copy k_1 % 2
    source = sched.build(sched_layout.func, target="cuda", arch="sm_80").source
    assert "uint32_t A_shared_warp[16];" in source           # 2 copies x 2 tiles x 4 registers
    # A's and B's loads in the prologue and the steady state; the mma (two m16n8k16) in the
    # steady state and the epilogue
    assert source.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 2
    assert source.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 2
    assert source.count("mma.sync.aligned.m16n8k16") == 4


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_register_pipeline_numbers(target, sched_layout):
    check_numbers(sched_layout, target)


@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_register_and_shared_pipelines_in_tvms_layout(target, tvm_layout):
    check_numbers(tvm_layout, target)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_pipelined_kernels_compile_without_spills(arch, sched_layout, tvm_layout):
    for sch in (sched_layout, tvm_layout):
        kernel = sched.build(sch.func, target="cuda", arch=arch)
        resources = kernel.resources
        assert (resources.spill_stores, resources.spill_loads, resources.local_bytes) == \
            (0, 0, 0)
        assert resources.registers <= 128
    assert "cp.async" in kernel.source                       # the outer, shared-memory stage


def test_multiplying_before_the_load_of_its_operand_is_refused():
    # B's load a stage behind the mma that reads it: the mma of step k would read the B of
    # step k - 1
    sch = gpu_matmul_mma(32, 32, 64, fragments=(1, 1), warps=(1, 1), k_tiles=2)
    with pytest.raises(ScheduleError, match=r"stages \[0, 1, 0\], order \[0, 1, 2\] of loop "
                                            r"'k_1' would run C_update_o_C before "
                                            r"B_shared_warp_o_shared_warp, which it depends on "
                                            r"\(flow dependence on 'B_shared_warp'\)"):
        pipelined(sch, inner_stages=(0, 1, 0))

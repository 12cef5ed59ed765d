"""Resources: the ptxas -v log parsed, occupancy estimated per arch, the report printed."""

from __future__ import annotations

import pytest
from rich.table import Table

from sched.cuda.resources import Resources

# NVRTC's log for two kernels, the second spilling (compiled with --maxrregcount=24)
NVRTC_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'matmul' for 'sm_90'
ptxas info    : Function properties for matmul
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 8192 bytes smem, 380 bytes cmem[0]
ptxas info    : Compile time = 11.761 ms
ptxas info    : Compiling entry function 'spilly' for 'sm_90'
ptxas info    : Function properties for spilly
ptxas         .     472 bytes stack frame, 592 bytes spill stores, 764 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers, 472 bytes cumulative stack size
"""

# nvcc prints the properties line without the 'ptxas .' prefix
NVCC_LOG = """\
ptxas info    : Compiling entry function 'add' for 'sm_80'
ptxas info    : Function properties for add
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers, 376 bytes cmem[0]
"""


def test_parses_registers_shared_memory_and_barriers():
    r = Resources.from_log(NVRTC_LOG, "matmul", "sm_90")
    assert (r.registers, r.static_shared_bytes, r.barriers, r.constant_bytes) == (32, 8192, 1, 380)
    assert (r.spill_stores, r.spill_loads, r.local_bytes) == (0, 0, 0)


def test_parses_spills_and_local_memory_of_the_named_kernel():
    r = Resources.from_log(NVRTC_LOG, "spilly", "sm_90")
    assert (r.registers, r.spill_stores, r.spill_loads, r.local_bytes) == (24, 592, 764, 472)
    assert r.static_shared_bytes == 0


def test_parses_nvcc_style_logs():
    r = Resources.from_log(NVCC_LOG, "add", "sm_80")
    assert (r.registers, r.spill_stores, r.static_shared_bytes) == (12, 0, 0)


def test_unknown_kernel_lists_the_entry_functions():
    with pytest.raises(ValueError, match=r"no entry function 'gemm' \(it names matmul, spilly\)"):
        Resources.from_log(NVRTC_LOG, "gemm", "sm_90")


def resources(registers=32, static=0, dynamic=0, threads=256, arch="sm_90") -> Resources:
    return Resources("k", arch, registers, 0, 0, 0, static, 0, 0, dynamic, threads)


def test_occupancy_limited_by_threads():
    # 32 registers: 1024 per warp, 64 warps' worth per SM; threads allow 2048 / 256 = 8 blocks
    occupancy = resources().occupancy
    assert (occupancy.blocks_per_sm, occupancy.warps_per_sm, occupancy.limited_by) == \
        (8, 64, "threads")
    assert occupancy.fraction == 1.0


def test_occupancy_limited_by_registers():
    # 128 registers: 4096 per warp, 4 warps per sub-partition, 16 per SM: 2 blocks of 8 warps
    occupancy = resources(registers=128).occupancy
    assert (occupancy.blocks_per_sm, occupancy.warps_per_sm, occupancy.limited_by) == \
        (2, 16, "registers")


@pytest.mark.parametrize("arch, blocks", [("sm_80", 3), ("sm_86", 2), ("sm_89", 2),
                                          ("sm_90", 4)])
def test_occupancy_limited_by_shared_memory(arch, blocks):
    # 48 KB + 1 KB reserved per block: 164 KB, 100 KB, 100 KB and 228 KB per SM
    occupancy = resources(static=16 * 1024, dynamic=32 * 1024, arch=arch).occupancy
    assert (occupancy.blocks_per_sm, occupancy.limited_by) == (blocks, "shared memory")


def test_sm_86_has_fewer_threads_per_sm():
    assert resources(arch="sm_86").occupancy.warps_per_sm == 48


def test_max_threads_per_block_follows_registers():
    assert resources(registers=32).max_threads_per_block == 1024
    assert resources(registers=80).max_threads_per_block == 768
    assert resources(registers=255).max_threads_per_block == 256


def test_launch_problems_say_what_to_change():
    # 80 registers per thread leave room for 768 threads, not 1024
    (problem,) = resources(registers=80, threads=1024).launch_problems()
    assert "at most 768 threads fit; bind fewer threads" in problem
    (problem,) = resources(static=100 * 1024, arch="sm_86").launch_problems()
    assert "102400 bytes of shared memory per block" in problem
    assert "exceed sm_86's 101376: use smaller shared tiles" in problem
    assert resources(static=100 * 1024, arch="sm_90").launch_problems() == []
    # stop 39 on an H200: a register tile of 2048 x 128 values per thread (1 MB of local
    # memory) compiled and failed at cuLaunchKernel with CUDA_ERROR_INVALID_VALUE
    huge = Resources("k", "sm_90", 255, 0, 0, 1 << 20, 0, 0, 0, 0, 32)
    (problem,) = huge.launch_problems()
    assert "1048576 bytes of local memory per thread exceed the 524288" in problem


def test_unknown_arch_has_no_occupancy_but_still_reports():
    r = resources(arch="sm_75")
    assert r.occupancy is None and r.launch_problems() == []
    assert "no table of limits for sm_75" in str(r)


def test_report_prints_as_text_and_as_a_rich_table():
    r = Resources.from_log(NVRTC_LOG, "matmul", "sm_90", threads_per_block=1024)
    text = str(r)
    assert "registers per thread     32" in text
    assert "8192 of 232448 bytes (8192 static + 0 dynamic)" in text
    assert "2 blocks/SM, 64 of 64 warps (100%), limited by threads" in text
    table = r.table()
    assert isinstance(table, Table) and table.row_count == len(r.rows())


def test_too_much_shared_memory_is_refused_before_compiling(monkeypatch):
    # the tuner's 4096^3 run on an H200 compiled three candidates (seconds each) that the
    # resource check then refused for their shared tiles; known before compiling
    import sched
    import sched.cuda.runtime as runtime
    from sched import compute as te
    from sched.errors import BuildError

    A = te.placeholder((65536,), name="A")
    sch = sched.Schedule(te.create_prim_func([A, te.compute((65536,), lambda i: A[i] * 2,
                                                            name="B")]))
    block = sch.get_block("B")
    grid, threads, _ = sch.split(sch.get_loops(block)[0], factors=[1, 256, 256])
    sch.bind(grid, "blockIdx.x")
    sch.bind(threads, "threadIdx.x")
    cache = sch.cache_read(block, 0, "shared")        # all of A: 256 KB
    sch.compute_at(cache, grid)
    _, fetch = sch.split(sch.get_loops(cache)[-1], factors=[None, 256])
    sch.bind(fetch, "threadIdx.x")

    def compile_cuda(*args, **kwargs):
        raise AssertionError("compiled")

    monkeypatch.setattr(runtime, "compile_cuda", compile_cuda)
    with pytest.raises(BuildError, match="262144 bytes of shared memory per block exceed "
                                         "sm_90's 232448: use smaller shared tiles"):
        sched.build(sch.func, target="cuda", arch="sm_90")

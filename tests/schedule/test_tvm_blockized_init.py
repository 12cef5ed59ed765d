"""A reduction as TVM's blockize prints it: the outer block's `T.init()` holds loops over an init
block that uses the outer block's variables. sched parses it (the init's blocks get the outer
variables bound, as the body's do), builds it, and its polyhedral model makes statements of the
init's blocks (they run at the first value of the outer block's reduce variables), so steps on
it are checked against the init's writes too."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.polyhedral import build_model, dependences

TEMPLATE = '''
@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"),
         C: T.Buffer((64, 64), "float32")):
    for i_0, j_0, k_0 in T.grid(4, 4, 4):
        with T.block("C_o"):
            vi_o = T.axis.spatial(4, i_0)
            vj_o = T.axis.spatial(4, j_0)
            vk_o = T.axis.reduce(4, {k_binding})
            T.reads(A[vi_o * 16:vi_o * 16 + 16, vk_o * 16:vk_o * 16 + 16],
                    B[vk_o * 16:vk_o * 16 + 16, vj_o * 16:vj_o * 16 + 16])
            T.writes(C[vi_o * 16:vi_o * 16 + 16, vj_o * 16:vj_o * 16 + 16])
            with T.init():
                for i_1, j_1 in T.grid(16, 16):
                    with T.block("C_init"):
                        vi_i_init, vj_i_init = T.axis.remap("SS", [i_1, j_1])
                        T.reads()
                        T.writes(C[vi_o * 16 + vi_i_init, vj_o * 16 + vj_i_init])
                        C[vi_o * 16 + vi_i_init, vj_o * 16 + vj_i_init] = T.float32(0)
            for i_1, j_1, k_1 in T.grid(16, 16, 16):
                with T.block("C"):
                    vi_i, vj_i, vk_i = T.axis.remap("SSR", [i_1, j_1, k_1])
                    T.reads(C[vi_o * 16 + vi_i, vj_o * 16 + vj_i],
                            A[vi_o * 16 + vi_i, vk_o * 16 + vk_i],
                            B[vk_o * 16 + vk_i, vj_o * 16 + vj_i])
                    T.writes(C[vi_o * 16 + vi_i, vj_o * 16 + vj_i])
                    C[vi_o * 16 + vi_i, vj_o * 16 + vj_i] = (
                        C[vi_o * 16 + vi_i, vj_o * 16 + vj_i]
                        + A[vi_o * 16 + vi_i, vk_o * 16 + vk_i]
                        * B[vk_o * 16 + vk_i, vj_o * 16 + vj_i])
'''


def tvm_blockized(k_binding: str = "k_0"):
    return sched.parse(TEMPLATE.format(k_binding=k_binding))


def operands():
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    return a, b, np.full((64, 64), np.nan, np.float32)


def run(func, target="c"):
    a, b, c = operands()
    sched.build(func, target=target)(a, b, c)
    return a, b, c


# on cuda-emu the function, which binds no threads, gets the cost model's default schedule
@pytest.mark.filterwarnings("ignore:build. 'main' has no thread bindings")
@pytest.mark.parametrize("target", ["c", "cuda-emu"])
def test_tvm_printed_blockized_reduction_builds_and_computes_the_matmul(target):
    a, b, c = run(tvm_blockized(), target)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_the_init_blocks_are_statements_that_run_at_the_first_reduce_value():
    func = tvm_blockized()
    model = build_model(func)
    init = model.statements_of_block("C_init")
    assert len(init) == 1
    # at k_0 = 0 only: the time entry of k_0 is fixed to 0
    assert "0, 0, 1, vi_i_init, vj_i_init" in str(init[0].schedule)
    flows = [d for d in dependences(func) if d.kind == "flow" and d.source.block.name == "C_init"]
    assert [d.sink.block.name for d in flows] == ["C"]


def test_decompose_reduction_hoists_tvms_init_blocks():
    # checked against the init block's own statement: where the model saw no init block, the
    # hoisted one looked like new instances, and the step was refused
    func = tvm_blockized()
    sch = sched.Schedule(func)
    i_0, j_0, k_0 = sch.get_loops(sch.get_block("C_o"))
    sch.decompose_reduction(sch.get_block("C_o"), k_0)
    script = sch.func.script()
    assert 'with T.block("C_o_init"):' in script and "T.init()" not in script
    # the init block declares the tile its blocks write (the outer block's write region)
    init_header = script.split('with T.block("C_o_init"):')[1].split("for ")[0]
    assert "T.writes(C[vi_o * 16:vi_o * 16 + 16, vj_o * 16:vj_o * 16 + 16])" in init_header
    a, b, c = run(sch.func)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_an_init_that_runs_after_updates_is_not_hoisted_before_them():
    # vk_o = 3 - k_0: the init runs at k_0 = 3, after three tiles were accumulated, and
    # resets them; hoisted before the k_0 loop it would keep them
    func = tvm_blockized("3 - k_0")
    a, b, c = run(func)
    np.testing.assert_allclose(c, a[:, :16] @ b[:16, :], rtol=1e-4, atol=1e-4)
    sch = sched.Schedule(func)
    i_0, j_0, k_0 = sch.get_loops(sch.get_block("C_o"))
    before = sch.func
    with pytest.raises(ScheduleError, match="decompose_reduction"):
        sch.decompose_reduction(sch.get_block("C_o"), k_0)
    assert sch.func is before


def test_steps_inside_the_init_keep_the_numbers():
    func = tvm_blockized()
    sch = sched.Schedule(func)
    i_1, j_1 = sch.get_loops(sch.get_block("C_init"))[-2:]
    sch.reorder(j_1, i_1)
    sch.vectorize(sch.split(i_1, [None, 8])[1])
    a, b, c = run(sch.func)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)

"""Random steps on reductions as TVM's blockize prints them (the outer block's `T.init()`
holding loops over an init block; programs.py does not make them): every step taken keeps the
interpreted result and the C build's, as in test_fuzz_schedules. The outer reduce variable is
bound forward or reversed (then the init runs after some updates and resets them), the
reduction is a sum or a max, the tiles of any size."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

import sched
from tests.fuzz.check import check_c, check_interpreted, oracle
from tests.fuzz.profile import fuzz_settings
from tests.fuzz.programs import Program
from tests.fuzz.test_fuzz_schedules import schedule

TEMPLATE = '''
@T.prim_func
def main(A: T.Buffer(({m}, {k}), "float32"), B: T.Buffer(({k}, {n}), "float32"),
         C: T.Buffer(({m}, {n}), "float32")):
    for i_0, j_0, k_0 in T.grid({mo}, {no}, {ko}):
        with T.block("C_o"):
            vi_o = T.axis.spatial({mo}, i_0)
            vj_o = T.axis.spatial({no}, j_0)
            vk_o = T.axis.reduce({ko}, {k_binding})
            T.reads(A[vi_o * {mi}:vi_o * {mi} + {mi}, vk_o * {ki}:vk_o * {ki} + {ki}],
                    B[vk_o * {ki}:vk_o * {ki} + {ki}, vj_o * {ni}:vj_o * {ni} + {ni}])
            T.writes(C[vi_o * {mi}:vi_o * {mi} + {mi}, vj_o * {ni}:vj_o * {ni} + {ni}])
            with T.init():
                for i_1, j_1 in T.grid({mi}, {ni}):
                    with T.block("C_init"):
                        vi_i_init, vj_i_init = T.axis.remap("SS", [i_1, j_1])
                        T.reads()
                        T.writes(C[vi_o * {mi} + vi_i_init, vj_o * {ni} + vj_i_init])
                        C[vi_o * {mi} + vi_i_init, vj_o * {ni} + vj_i_init] = T.float32({init})
            for i_1, j_1, k_1 in T.grid({mi}, {ni}, {ki}):
                with T.block("C"):
                    vi_i, vj_i, vk_i = T.axis.remap("SSR", [i_1, j_1, k_1])
                    T.reads(C[vi_o * {mi} + vi_i, vj_o * {ni} + vj_i],
                            A[vi_o * {mi} + vi_i, vk_o * {ki} + vk_i],
                            B[vk_o * {ki} + vk_i, vj_o * {ni} + vj_i])
                    T.writes(C[vi_o * {mi} + vi_i, vj_o * {ni} + vj_i])
                    C[vi_o * {mi} + vi_i, vj_o * {ni} + vj_i] = {combine}
'''


@st.composite
def tvm_blockized_programs(draw) -> Program:
    mo, no, ko = (draw(st.integers(1, 3)) for _ in range(3))
    mi, ni, ki = (draw(st.integers(1, 4)) for _ in range(3))
    acc = f"C[vi_o * {mi} + vi_i, vj_o * {ni} + vj_i]"
    term = f"A[vi_o * {mi} + vi_i, vk_o * {ki} + vk_i] * B[vk_o * {ki} + vk_i, vj_o * {ni} + vj_i]"
    combine = draw(st.sampled_from([f"{acc} + {term}", f"T.max({acc}, {term})"]))
    k_binding = draw(st.sampled_from(["k_0", f"{ko - 1} - k_0"]))
    init = draw(st.sampled_from(["0", "-9"]))
    func = sched.parse(TEMPLATE.format(m=mo * mi, n=no * ni, k=ko * ki, mo=mo, no=no, ko=ko,
                                       mi=mi, ni=ni, ki=ki, k_binding=k_binding, init=init,
                                       combine=combine))
    return Program(func, {})


@fuzz_settings(0.3)
@given(program=tvm_blockized_programs(), data=st.data())
def test_random_steps_on_tvm_blockized_reductions_keep_the_result(program, data):
    expected = oracle(program)
    assume(expected is not None)
    log: list[str] = []
    sch = schedule(program, data, log)
    if sch is not None:
        check_interpreted(program, sch.func, expected, log)
        check_c(program, sch.func, expected, log)

"""Read indices agree with TVM: a reduction block lists its inputs first and the accumulated
output (a buffer it writes) last, so `cache_read(block, 0)` caches A of `C += A * B` on a
`te` matmul, as in TVM, whose te.create_prim_func lists the inputs only. A TVMScript block
with TVM's own `T.reads(A, B)` keeps what it declares."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import ScheduleError


def matmul(n=32):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


TVM_READS = '''
@T.prim_func
def main(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32"),
         C: T.Buffer((32, 32), "float32")):
    for i, j, k in T.grid(32, 32, 32):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            T.reads(A[vi, vk], B[vk, vj])
            T.writes(C[vi, vj])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''

INFERRED_READS = TVM_READS.replace("            T.reads(A[vi, vk], B[vk, vj])\n", "") \
    .replace("            T.writes(C[vi, vj])\n", "")


def tvm_style_schedule(func):
    """TVM's habit: tile, stage read 0 and read 1 in shared memory per step of k."""
    sch = sched.Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, [None, 8])
    jo, ji = sch.split(j, [None, 8])
    ko, ki = sch.split(k, [None, 4])
    sch.reorder(io, jo, ko, ii, ji, ki)
    a_shared = sch.cache_read(block, 0, "shared")
    b_shared = sch.cache_read(block, 1, "shared")
    sch.compute_at(a_shared, ko)
    sch.compute_at(b_shared, ko)
    return sch, a_shared, b_shared


def run(func, n=32):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    c = np.zeros((n, n), np.float32)
    sched.build(func, target="c")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_te_reduction_lists_its_inputs_first_and_its_output_last():
    script = matmul().script()
    assert "T.reads(A[v_i, v_k], B[v_k, v_j], C[v_i, v_j])" in script


@pytest.mark.parametrize("source", ["te", "tvm_reads", "inferred"])
def test_cache_read_0_and_1_cache_a_and_b_as_in_tvm(source):
    func = {"te": matmul(), "tvm_reads": sched.parse(TVM_READS),
            "inferred": sched.parse(INFERRED_READS)}[source]
    sch, a_shared, b_shared = tvm_style_schedule(func)
    assert (a_shared.name, b_shared.name) == ("A_shared", "B_shared")
    run(sch.func)


def test_a_parsed_block_without_reads_infers_the_accumulator_last():
    assert "T.reads(A[vi, vk], B[vk, vj], C[vi, vj])" in sched.parse(INFERRED_READS).script()


def test_reindex_takes_tvms_read_indices():
    sch = sched.Schedule(matmul())
    block = sch.get_block("C")
    assert sch.reindex(block, ("read", 0)).name == "A_reindex"
    assert sch.reindex(block, ("read", 1)).name == "B_reindex"
    run(sch.func)


# the accumulated output is read and written: a read cache would miss the block's writes
def test_cache_read_of_the_accumulator_is_refused_at_its_new_index():
    sch = sched.Schedule(matmul())
    with pytest.raises(ScheduleError, match=r"into the reads of block 'C' \(0: A, 1: B, 2: C\)"):
        sch.cache_read(sch.get_block("C"), 3, "shared")
    with pytest.raises(ScheduleError, match="block 'C' writes 'C' as well as reading it"):
        sch.cache_read(sch.get_block("C"), 2, "shared")

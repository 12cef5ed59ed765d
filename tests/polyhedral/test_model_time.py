"""The model's time vectors, as model.py documents them: a loop adds its value, a sequence the
child's position, `if` 0 / `else` 1, a block 0 for its init, 1 for its body and 2 for the blocks
nested in it (the root's 2 starts every vector); vectors are padded with 0 to one length, and
their lexicographic order is the execution order."""

from __future__ import annotations

import islpy as isl

from sched.polyhedral import build_model
from sched.script import T


@T.prim_func
def matmul(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"),
           C: T.Buffer((4, 4), "float32")):
    for i, j, k in T.grid(4, 4, 4):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.prim_func
def sequence_and_branches(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("P"):
            vi = T.axis.spatial(4, i)
            A[vi] = T.float32(1)
        if i < 2:
            with T.block("Q"):
                vi = T.axis.spatial(4, i)
                B[vi] = A[vi]
        else:
            with T.block("R"):
                vi = T.axis.spatial(4, i)
                B[vi] = A[vi] * T.float32(2)


@T.prim_func
def nested(A: T.Buffer((8,), "float32")):
    for io in range(2):
        with T.block("outer"):
            vio = T.axis.spatial(2, io)
            for ii in range(4):
                with T.block("inner"):
                    vi = T.axis.spatial(8, vio * 4 + ii)
                    A[vi] = T.float32(0)


def times(func) -> dict[str, list[str]]:
    return {s.name: s.time for s in build_model(func).statements.values()}


def test_an_init_runs_just_before_the_body_of_its_instance():
    assert times(matmul) == {"I_C": ["2", "i", "j", "k", "0"], "S_C": ["2", "i", "j", "k", "1"]}
    (init,) = [s for s in build_model(matmul).statements.values() if s.is_init]
    expected = isl.Map("{ I_C[vi, vj, vk] -> [2, vi, vj, vk, 0] : 0 <= vi < 4 and "
                       "0 <= vj < 4 and vk = 0 }")
    assert init.schedule.is_equal(expected)


def test_sequence_positions_and_branches():
    assert times(sequence_and_branches) == {
        "S_P": ["2", "i", "0", "1", "0"],
        "S_Q": ["2", "i", "1", "0", "1"],          # second child, then branch
        "S_R": ["2", "i", "1", "1", "1"],          # second child, else branch
    }


def test_nested_blocks_come_after_their_blocks_own_slot():
    assert times(nested) == {"S_outer": ["2", "io", "1", "0", "0"],
                             "S_inner": ["2", "io", "2", "ii", "1"]}


def test_lexicographic_order_of_times_is_execution_order():
    model = build_model(sequence_and_branches)
    before = model.schedule.lex_lt_union_map(model.schedule)
    p_then_q = isl.UnionMap("{ S_P[vi] -> S_Q[vi] : 0 <= vi < 2 }")
    q_then_next_p = isl.UnionMap("{ S_Q[vi] -> S_P[vi + 1] : 0 <= vi < 2 }")
    assert p_then_q.is_subset(before) and q_then_next_p.is_subset(before)
    assert p_then_q.reverse().intersect(before).is_empty()

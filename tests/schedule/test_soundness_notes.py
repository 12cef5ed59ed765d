"""A step accepted on an over-approximated analysis says so (issue 9, item 1): `sch.notes`
accumulates what the model could not represent in the functions steps were judged on, and each
new note is a ConservativeAnalysisWarning once (a step that asks no analysis, a split, adds
none)."""

from __future__ import annotations

import warnings

import pytest

import sched
from sched.errors import ConservativeAnalysisWarning
from sched.ir.parser import parse

NON_AFFINE_INDEX = '''
@T.prim_func
def main(A: T.Buffer((64,), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[(vi * vj) % 64] + T.float32(1)
'''

AFFINE = NON_AFFINE_INDEX.replace("A[(vi * vj) % 64]", "A[vi * 8 + vj]")


def test_a_step_accepted_on_an_over_approximation_warns_once_and_keeps_the_note():
    sch = sched.Schedule(parse(NON_AFFINE_INDEX))
    i, j = sch.get_loops(sch.get_block("B"))
    with pytest.warns(ConservativeAnalysisWarning, match="reorder: accepted on a conservative "
                      "analysis: an index of 'A'"):
        sch.reorder(j, i)
    assert sch.notes and all(isinstance(n, str) for n in sch.notes)
    before = list(sch.notes)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConservativeAnalysisWarning)
        sch.reorder(i, j)                       # the same notes: no second warning
    assert sch.notes == before
    assert sch.copy().notes == before


def test_an_exact_analysis_has_no_notes():
    sch = sched.Schedule(parse(AFFINE))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConservativeAnalysisWarning)
        sch.reorder(*reversed(sch.get_loops(sch.get_block("B"))))
    assert sch.notes == []

"""RUNS_RULE's rewrites (sched/polyhedral/runs.py): a block run more than once stays
idempotent when what it reads is written between its runs only by the later runs of an
idempotent block's instance that first ran before it (they store the value it read); a write
by a block that is not idempotent, or one whose first run comes after the reader's, is not
harmless and keeps the reader non-idempotent."""

from __future__ import annotations

import numpy as np
import pytest

import sched
from sched.polyhedral import build_model
from sched.polyhedral.runs import runs_are_idempotent
from sched.script import T


@T.prim_func
def copy_then_read_twice(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"),
                         D: T.Buffer((4,), "float32")):
    # X(vr) runs at p = vr and p = vr + 4, each run storing 3 * A[vr]; S(vr) right after it
    for p in range(8):
        with T.block("X"):
            vr = T.axis.spatial(4, p % 4)
            B[vr] = A[vr] * T.float32(3)
        with T.block("S"):
            vr = T.axis.spatial(4, p % 4)
            D[vr] = B[vr] * T.float32(2)


@T.prim_func
def read_before_the_first_copy(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"),
                               D: T.Buffer((4,), "float32")):
    # S(vr) first reads B[vr] before X(vr) ever wrote it: its second run reads 3 * A[vr]
    for p in range(8):
        with T.block("S"):
            vr = T.axis.spatial(4, p % 4)
            D[vr] = B[vr] * T.float32(2)
        with T.block("X"):
            vr = T.axis.spatial(4, p % 4)
            B[vr] = A[vr] * T.float32(3)


@T.prim_func
def read_an_accumulator_twice(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"),
                              D: T.Buffer((4,), "float32")):
    # X(vr) adds A[vr] to B[vr] in each run (not idempotent): S's two runs read two values
    for p in range(8):
        with T.block("X"):
            vr = T.axis.spatial(4, p % 4)
            B[vr] = B[vr] + A[vr]
        with T.block("S"):
            vr = T.axis.spatial(4, p % 4)
            D[vr] = B[vr] * T.float32(2)


def _idempotent(func, block: str) -> bool:
    model = build_model(func)
    (statement,) = model.statements_of_block(block)
    return runs_are_idempotent(model, statement)


def _run(func, a, b):
    d = np.zeros(4, np.float32)
    b = b.copy()
    sched.build(func, target="c")(a, b, d)
    return d


@pytest.mark.parametrize("func, idempotent", [
    (copy_then_read_twice, True),
    (read_before_the_first_copy, False),
    (read_an_accumulator_twice, False),
])
def test_a_reader_of_rewritten_values_is_idempotent_only_when_they_are_the_same(func,
                                                                              idempotent):
    assert _idempotent(func, "S") is idempotent
    # the claim, run: a second run of S stores what its first run stored exactly when
    # idempotent (the C target runs both; the first run alone is the model)
    a = np.arange(1, 5, dtype=np.float32)
    b = np.full(4, 10, np.float32)
    d = _run(func, a, b)
    first_run_value = 2 * (3 * a if func is not read_before_the_first_copy else b)
    if func is read_an_accumulator_twice:
        first_run_value = 2 * (b + a)
    assert np.array_equal(d, first_run_value) is idempotent


def test_the_writer_must_itself_be_idempotent():
    assert _idempotent(copy_then_read_twice, "X")
    assert not _idempotent(read_an_accumulator_twice, "X")

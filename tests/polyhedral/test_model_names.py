"""The isl naming layer (issue 9, items 7 and 24): user names never reach isl text as they are,
so names like isl's own (`a0`), isl keywords (`NAN`, `INFINITY`), non-ASCII names and names
that differ only in punctuation (`C.1`, `C-1`) neither break the model nor merge statements."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import sched
from sched.errors import ScheduleError
from sched.polyhedral import build_model, check_parallel, dependences
from sched.script import T
from tests.schedule.conftest import run_c


@T.prim_func
def scan_a0(A: T.Buffer((8,), "float32")):
    for i in range(1, 8):
        with T.block("S"):
            a0 = T.axis.spatial((1, 8), i)
            A[a0] = A[a0 - 1] + T.float32(1)


def test_an_iteration_variable_named_like_an_access_element_keeps_its_accesses():
    model = build_model(scan_a0)
    assert not model.reads.is_empty()
    kinds = {(d.kind, d.buffer) for d in dependences(scan_a0)}
    assert ("flow", "A") in kinds


def test_the_scan_with_a0_is_not_parallel():
    assert check_parallel(scan_a0, "S", "i") is not None
    sch = sched.Schedule(scan_a0)
    (i,) = sch.get_loops(sch.get_block("S"))
    with pytest.raises(ScheduleError, match="carries a flow dependence"):
        sch.parallel(i)


@T.prim_func
def odd_names(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for NAN in range(8):
        with T.block("C.1"):
            a0 = T.axis.spatial(8, NAN)
            B[a0] = A[a0] + T.float32(1)
    for INFINITY in range(8):
        with T.block("C-1"):
            vi = T.axis.spatial(8, INFINITY)
            A[vi] = B[(vi + 1) % 8]
    for i in range(8):
        with T.block("Grüße"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] * T.float32(2)


def test_keywords_punctuation_and_non_ascii_names_give_distinct_statements():
    model = build_model(odd_names)
    blocks = sorted(s.block.name for s in model.statements.values())
    assert blocks == ["C-1", "C.1", "Grüße"]
    assert len(model.statements) == 3
    for statement in model.statements.values():
        assert model.statement_of_tuple(statement.name) is statement
    pairs = {(d.kind, d.source.block.name, d.sink.block.name, d.buffer)
             for d in dependences(odd_names)}
    assert ("flow", "C.1", "C-1", "B") in pairs
    assert ("anti", "C.1", "C-1", "A") in pairs
    assert ("flow", "C-1", "Grüße", "A") in pairs
    assert model.storage_of_tuple(model.buffer_tuple("A")) == "A"


def test_steps_and_numbers_with_odd_names(rng):
    sch = sched.Schedule(odd_names)
    (loop,) = sch.get_loops(sch.get_block("C-1"))
    sch.parallel(loop)                      # C-1 reads B and writes A: independent iterations
    a = rng.standard_normal(8).astype(np.float32)
    b = np.zeros(8, np.float32)
    got_a, got_b = run_c(sch.func, a, b)
    want_a = np.roll(a + 1, -1)
    np.testing.assert_allclose(got_a, want_a, rtol=1e-6)
    np.testing.assert_allclose(got_b, want_a * 2, rtol=1e-6)


def test_the_naming_rules():
    from sched.polyhedral.names import buffer_tuple, escape, statement_tuple, variable

    assert variable("vi") == "vi"
    assert variable("a0") == "a0"                         # generated names start with "_"
    for keyword in ("NAN", "nan", "INFINITY", "infty", "And", "exists", "mod", "floor"):
        assert variable(keyword).startswith("_x")
    assert variable("_a0") != "_a0" and variable("_a0").startswith("_x")
    assert statement_tuple("C.1") != statement_tuple("C-1") != statement_tuple("C_1")
    assert statement_tuple("C") == "S_C" and statement_tuple("C", True) == "I_C"
    assert buffer_tuple("A") == "B_A"
    assert escape("a.b") != escape("a_b")


def _scan(block: str, loop: str, iter_var: str, buffer: str, param: str):
    """`for <loop> in [1, n): block <block> (<iter_var> = <loop>) { X[v] = X[v - 1] + 1 }`
    with a symbolic size named `param`, every name as given."""
    from sched.ir import (
        TRUE,
        Block,
        BlockRealize,
        Buffer,
        BufferStore,
        For,
        IntImm,
        IterVar,
        PrimFunc,
        Range,
        Var,
    )
    from sched.ir.regions import infer_block_regions

    n = Var(param)
    X = Buffer(buffer, (n,))
    v, i = Var(iter_var), Var(loop)
    body = BufferStore(X, X[v - 1] + 1.0, (v,))
    iv = IterVar(v, Range(IntImm(1), n - 1))
    reads, writes = infer_block_regions(body, None, (iv,))
    realize = BlockRealize((i,), TRUE, Block(block, (iv,), reads, writes, body))
    root = Block("root", (), (), (), For(i, IntImm(1), n - 1, "serial", realize))
    return PrimFunc("f", (X,), BlockRealize((), TRUE, root))


names_strategy = st.text(min_size=1, max_size=6).filter(lambda s: "\x00" not in s)


@settings(max_examples=60, deadline=None)
@given(block=names_strategy, loop=names_strategy, iter_var=names_strategy,
       buffer=names_strategy, param=names_strategy)
def test_any_names_give_the_same_model(block, loop, iter_var, buffer, param):
    assume(len({loop, iter_var, param}) == 3)
    func = _scan(block, loop, iter_var, buffer, param)
    (dep,) = [d for d in dependences(func) if d.kind == "flow"]
    assert dep.source.block.name == block and dep.buffer == buffer
    assert dep.distance == (1,)
    assert check_parallel(func, block, loop) is not None

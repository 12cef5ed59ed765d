"""A step whose result the model sees only in part is refused: a changed statement whose loop
bounds or conditions are not affine may have lost instances that its over-approximated domain
still holds. Found by the fuzzer: compute_at under a blockIdx loop gave the moved producer a
piecewise extent (`T.if_then_else(n == 4, 2, (n + 1) // 2)`) that the model left out, so the
"same instances" test compared two over-approximations and passed, and half the rows of an
output were never written. Piecewise extents are now modelled exactly (one disjunct per
piece), and what still cannot be is refused."""

from __future__ import annotations

import islpy as isl
import numpy as np
import pytest

import sched
from sched.errors import ScheduleError
from sched.ir.nodes import Select, Var, binary, const
from sched.polyhedral import check_order
from sched.polyhedral.isl_expr import to_isl_comparison

# the fuzzer's program, reduced: S overwrites every element of the output fmaxf (each twice),
# T reads only the first half of its rows
PROGRAM = """
@T.prim_func
def fuzz(var_Y: T.handle, var_a0: T.handle, var_fmaxf: T.handle, var_out: T.handle):
    n = T.int32()
    Y = T.match_buffer(var_Y, (n,), "float32")
    a0 = T.match_buffer(var_a0, (n, 4), "float32")
    fmaxf = T.match_buffer(var_fmaxf, (n, 4), "float32")
    out = T.match_buffer(var_out, (n,), "float32")
    for i, t in T.grid(n, 8):
        with T.block("S"):
            vx = T.axis.spatial(n, i)
            v0 = T.axis.spatial(4, t % 4)
            T.reads(Y[vx], a0[vx, v0])
            T.writes(fmaxf[vx, v0])
            fmaxf[vx, v0] = Y[vx] + a0[vx, v0]
    for j in range(n):
        with T.block("T"):
            vj = T.axis.spatial(n, j)
            T.reads(fmaxf[vj // 2, vj // 2 % 4])
            T.writes(out[vj])
            out[vj] = fmaxf[vj // 2, vj // 2 % 4] * 2.0
"""


def test_compute_at_that_would_drop_rows_of_an_output_is_refused():
    func = sched.parse(PROGRAM)
    sch = sched.Schedule(func)
    sch.split(sch.get_loops(sch.get_block("T"))[0], factors=[1, None, 2])
    sch.bind(sch.get_loops(sch.get_block("T"))[0], "blockIdx.x")
    with pytest.raises(ScheduleError, match=r"would run only what its consumers there read.*"
                                            r"missing: \[n\] -> \{ S_S\[vx, v0\]"):
        sch.compute_at(sch.get_block("S"), sch.get_loops(sch.get_block("T"))[0])
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((6,), (6, 4), (6, 4), (6,))]
    expected = [a.copy() for a in arrays]
    sched.interpret(func, *expected)
    sched.interpret(sch.func, *arrays)           # the schedule is unchanged
    for got, want in zip(arrays, expected):
        np.testing.assert_array_equal(got, want)


def test_a_piecewise_bound_becomes_one_disjunct_per_piece():
    n = Var("n", "int32")
    extent = Select(binary("eq", n, const(4, "int32")), const(2, "int32"),
                    binary("floordiv", binary("add", n, const(1, "int32")), const(2, "int32")))
    text = to_isl_comparison("x", "<", extent)
    got = isl.Set(f"[n] -> {{ [x] : 0 <= x and {text} }}")
    assert got.is_equal(isl.Set("[n] -> { [x] : 0 <= x and "
                                "((n = 4 and x < 2) or (n != 4 and 2x < n)) }"))
    assert to_isl_comparison("x", "<", binary("mul", n, n)) is None


def test_a_select_inside_min_reads_as_its_pieces():
    """The write-back loop of a cache_write of a partial region has the extent
    T.min(T.if_then_else(n >= m + 1, m, n), m) (isl's piecewise bound, then the buffer's):
    read as pieces, not over-approximated to m (audit, helper-38)."""
    n, m = Var("n", "int32"), Var("m", "int32")
    extent = binary("min", Select(binary("ge", n, binary("add", m, const(1, "int32"))), m, n), m)
    text = to_isl_comparison("x", "<", extent)
    got = isl.Set(f"[n, m] -> {{ [x] : 0 <= x and {text} }}")
    assert got.is_equal(isl.Set("[n, m] -> { [x] : 0 <= x < n and x < m }"))
    deeper = binary("add", binary("mul", extent, const(2, "int32")), const(1, "int32"))
    got = isl.Set(f"[n, m] -> {{ [x] : 0 <= x and {to_isl_comparison('x', '<', deeper)} }}")
    assert got.is_equal(isl.Set("[n, m] -> { [x] : 0 <= x < 2n + 1 and x < 2m + 1 }"))


def test_a_changed_statement_seen_only_in_part_is_refused():
    """A nest whose extent the model cannot see (n * n): its domain is over-approximated, so
    two such domains being equal proves nothing."""
    def nest(extent: str) -> sched.PrimFunc:
        return sched.parse(f"""
@T.prim_func
def f(var_A: T.handle, var_B: T.handle):
    n = T.int32()
    A = T.match_buffer(var_A, (n * n,), "float32")
    B = T.match_buffer(var_B, (n * n,), "float32")
    for i in range({extent}):
        with T.block("S"):
            vi = T.axis.spatial(n * n, i)
            B[vi] = A[vi] + 1.0
""")

    violation = check_order(nest("n * n"), nest("n * n - 1"))
    assert violation is not None
    assert "cannot see which instances of block 'S' run" in str(violation)
    assert check_order(nest("n * n"), nest("n * n")) is None        # unchanged: the same text

"""`sched demo`: labelled rows, several timings with median and min-max, the busy-machine
warning, no bare 0.00x, and output to a file or a pipe not wrapped (sched.demo, sched.timings)."""

from __future__ import annotations

import io

import numpy as np
import pytest

import sched
from sched import compute as te
from sched import demo
from sched.timings import Timing, busy_warning, measure, measure_alternating, ratio_text


def test_timing_text_is_median_and_min_max():
    timing = Timing((0.004, 0.0041, 0.0045, 0.00413))
    assert timing.text() == "4.12 (4-4.5)"
    assert timing.spread == pytest.approx(0.5 / 4.115, rel=1e-3)


@pytest.mark.parametrize("ratio, text", [(0.000304, "0.000304x"), (0.0305, "0.0305x"),
                                         (1.0, "1x"), (11.62, "11.6x"), (1234.0, "1234x")])
def test_ratios_keep_three_significant_digits(ratio, text):
    assert ratio_text(ratio) == text


def test_measure_runs_warmup_then_repeats():
    calls = []
    timing = measure(lambda: calls.append(1), repeats=5)
    assert len(calls) == 6 and len(timing.seconds) == 5
    with pytest.raises(ValueError, match="repeats must be at least 1"):
        measure(lambda: None, repeats=0)


def test_measure_alternating_interleaves_the_runs():
    order = []
    a, b = measure_alternating([lambda: order.append("a"), lambda: order.append("b")], 3)
    assert order == ["a", "b"] * 4 and len(a.seconds) == len(b.seconds) == 3


def test_busy_warning_names_the_wide_timings():
    steady, busy = Timing((1.0, 1.1, 1.05)), Timing((1.0, 3.0, 1.2))
    assert busy_warning({"steady": steady}) is None
    warning = busy_warning({"steady": steady, "noisy": busy})
    assert warning.startswith("warning: run times varied widely between runs (noisy (167%)")
    assert "busy" in warning and "steady" not in warning


def small_workloads(tune_trials=0):
    A = te.placeholder((64, 48), name="A")
    B = te.placeholder((48, 32), name="B")
    func = te.create_prim_func([A, B, te.ops.matmul(A, B)], name="matmul")
    works = [demo.Workload("matmul 64x48x32", "unscheduled", func, [(64, 48), (48, 32)],
                           lambda a, b: a @ b),
             demo.Workload("matmul 64x48x32", "scheduled",
                           sched.hand_schedules.cpu_matmul(64, 32, 48).func,
                           [(64, 48), (48, 32)], lambda a, b: a @ b)]
    if tune_trials:
        works.append(demo.Workload("matmul 64x48x32", "tuned", works[1].func,
                                   [(64, 48), (48, 32)], lambda a, b: a @ b))
    return works


def test_the_c_table_labels_rows_and_is_not_wrapped_in_a_pipe(monkeypatch):
    monkeypatch.setattr(demo, "_c_workloads", small_workloads)
    out = io.StringIO()
    assert demo._run_c(demo.make_console(out), np.random.default_rng(0), tune_trials=2)
    text = out.getvalue()
    rows = [line for line in text.splitlines() if line.startswith("│ matmul 64x48x32")]
    assert [row.split("│")[2].strip() for row in rows] == ["unscheduled", "scheduled", "tuned"]
    for row in rows:
        cells = [c.strip() for c in row.split("│")]
        assert cells[3] == "yes"
        for cell in cells[5:7]:                  # "median (min-max)"
            assert cell.count("(") == 1 and "-" in cell
        assert cells[7].endswith("x") and cells[7] != "0.00x"
    assert "== sched demo: the C target ==" in text
    assert max(len(line) for line in text.splitlines()) > 80       # long lines stay whole


def test_generated_code_is_printed_whole_to_a_pipe():
    out = io.StringIO()
    console = demo.make_console(out)
    line = "x = " + " + ".join(f"a{k}" for k in range(60))
    demo.print_code(console, line, "python")
    assert out.getvalue() == line + "\n"


def test_demo_tune_option_reaches_run_demo(monkeypatch):
    seen = []
    monkeypatch.setattr(demo, "run_demo", lambda tune_trials=0: seen.append(tune_trials) or True)
    from sched.cli import main

    assert main(["demo", "--tune", "8"]) == 0 and seen == [8]

"""The tuning display: live only on a terminal, a summary always, the results table, the curve
as a PNG with matplotlib and as a sparkline without. Time comes from a fake clock."""

from __future__ import annotations

import io
import math
import sys

import pytest
from rich.console import Console

from sched.autoscheduler.progress import (
    TuneProgress,
    format_duration,
    format_ms,
    results_table,
    sparkline,
    tuning_curve,
)

FLOPS = 2 * 64**3          # a 64^3 matmul


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _console(terminal: bool = False) -> Console:
    return Console(file=io.StringIO(), width=120, force_terminal=terminal or None,
                   color_system=None)


def _run(console, enabled=True, updates=((64, 1.2e-3, 2), (256, 0.95e-3, 3)), minutes=2.0):
    clock = Clock()
    with TuneProgress("matmul", trials=256, flops=FLOPS, enabled=enabled, console=console,
                      clock=clock) as progress:
        for done, best, errors in updates:
            clock.now += 60 * minutes / len(updates)
            progress.update(done, best, errors, note="round 1")
    return progress, console.file.getvalue()


def test_pipe_gets_only_the_summary():
    progress, text = _run(_console())
    assert text == ("matmul: 256 trials in 2m00s (128 trials/min), best 0.9500 ms "
                    "(0.55 GFLOP/s), 3 errors\n  best so far  █▁\n")
    assert progress.curve == [1.2e-3, 0.95e-3]


def test_disabled_display_prints_only_the_summary_on_a_terminal():
    _, text = _run(_console(terminal=True), enabled=False)
    assert text.startswith("matmul: 256 trials in 2m00s") and "━" not in text


def test_terminal_shows_the_bar_best_rate_and_errors():
    _, text = _run(_console(terminal=True))
    live, summary = text.rsplit("matmul: ", 1)
    assert "━" in live and "64/256" in live and "256/256" in live
    assert "best 1.200 ms (0.44 GFLOP/s)" in live and "2 errors" in live
    assert "round 1" in live and "64 trials/min" in live and "ETA 3m00s" in live
    assert summary.startswith("256 trials in 2m00s")


def test_eighty_columns_show_the_bar_the_count_and_the_best_time():
    """The rate, errors and ETA take a line of their own: in one line of 80 columns the bar
    and the count were cut away."""
    console = Console(file=io.StringIO(), width=80, force_terminal=True, color_system=None)
    with TuneProgress("conv2d_nchw_bias_relu", trials=256, flops=FLOPS, console=console,
                      time_budget=600, clock=Clock()) as progress:
        progress.update(64, 1.2345e-3, 12, note="round 4")
    live = console.file.getvalue().rsplit("conv2d_nchw_bias_relu: ", 1)[0]
    assert "━" in live and "64/256" in live and "best 1.234 ms (0.42 GFLOP/s)" in live
    assert "12 errors  ETA" in live and "round 4" in live and "…" not in live


def test_eta_is_the_rate_or_the_time_budget_left():
    clock = Clock()
    with TuneProgress("matmul", trials=100, flops=FLOPS, enabled=False, console=_console(),
                      time_budget=600, clock=clock) as progress:
        assert progress.eta() == 600
        clock.now += 60
        progress.update(10, 1e-3, 0)
        assert progress.eta() == 540                 # 90 trials at 10/min: 540 s
        clock.now += 60
        progress.update(10, 1e-3, 0)                 # stalled: the budget comes first
        assert progress.eta() == 480
    without_budget = TuneProgress("m", trials=8, flops=1.0, clock=Clock())
    assert without_budget.__enter__().eta() is None


def test_no_trial_ran_yet():
    progress, text = _run(_console(), updates=((3, None, 3),))
    assert "best -, 3 errors" in text and "best so far" not in text
    assert progress.curve == [math.inf]


def test_summary_says_the_run_stopped():
    console = _console()
    with pytest.raises(KeyboardInterrupt):
        with TuneProgress("softmax", trials=10, flops=1.0, console=console,
                          clock=Clock()) as progress:
            progress.update(4, 2e-3, 0)
            raise KeyboardInterrupt
    assert "softmax: 4 trials in 0.0s" in console.file.getvalue()
    assert "(stopped: KeyboardInterrupt)" in console.file.getvalue()


def test_sparkline_lower_time_is_lower_bar():
    assert sparkline([8.0, 4.0, 1.0, 1.0]) == "█▄▁▁"
    assert sparkline([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]) == "▁▂▃▄▅▆▇█"


def test_sparkline_of_nothing_inf_nan_and_constant():
    assert sparkline([]) == ""
    assert sparkline([math.inf, math.inf]) == "··"
    assert sparkline([math.inf, 3.0, math.nan, 1.0]) == "·█·▁"
    assert sparkline([2.0, 2.0]) == "▁▁"


def test_tuning_curve_text_is_resampled_to_sixty_points():
    best = [1.0 / (i + 1) for i in range(1000)]
    curve = tuning_curve(best)
    assert len(curve) == 60 and curve[0] == "█" and curve[-1] == "▁"
    assert tuning_curve([math.inf, 2e-3, 1e-3]) == "·█▁"


def test_tuning_curve_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "curve.png"
    assert tuning_curve([math.inf, 3e-3, 2e-3, 2e-3, 1e-3], str(path)) == str(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    empty = tmp_path / "empty.png"
    assert tuning_curve([math.inf], str(empty)) == str(empty) and empty.is_file()


def test_tuning_curve_without_matplotlib_is_a_sparkline(tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)       # import matplotlib fails
    path = tmp_path / "curve.png"
    assert tuning_curve([3e-3, 1e-3], str(path)) == "█▁"
    assert not path.exists()


def test_results_table():
    console = _console()
    console.print(results_table([
        {"workload": "matmul", "target": "c", "trials": 256, "errors": 2,
         "best_seconds": 0.5e-3, "flops": FLOPS, "baseline_seconds": 1.5e-3},
        {"workload": "softmax", "target": "cuda sm_90", "trials": 3, "errors": 3,
         "best_seconds": None},
    ]))
    lines = console.file.getvalue().splitlines()
    header = next(line for line in lines if "workload" in line)
    assert [c.strip() for c in header.strip("┃").split("┃")] == \
        ["workload", "target", "trials", "errors", "best ms", "GFLOP/s", "vs baseline"]
    matmul = next(line for line in lines if "matmul" in line)
    assert [c.strip() for c in matmul.strip("│").split("│")] == \
        ["matmul", "c", "256", "2", "0.5000", "1.05", "3.00x"]
    softmax = next(line for line in lines if "softmax" in line)
    assert [c.strip() for c in softmax.strip("│").split("│")] == \
        ["softmax", "cuda sm_90", "3", "3", "-", "-", "-"]


def test_formats():
    assert [format_ms(s) for s in (1.2345e-3, 0.95e-3, 4.512e-5, 1.2346)] == \
        ["1.234", "0.9500", "0.04512", "1235"]
    assert [format_duration(s) for s in (12.34, 158, 3840)] == ["12.3s", "2m38s", "1h04m"]


def test_results_table_prints_as_text():
    text = str(results_table([{"workload": "matmul", "target": "c", "trials": 4, "errors": 0,
                               "best_seconds": 1e-3}]))
    assert "tuning results" in text and "matmul" in text and "1.000" in text
    assert "\x1b[" not in text and "Table object" not in text

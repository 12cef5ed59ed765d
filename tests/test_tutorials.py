"""Every tutorial runs to the end as a script (on a CPU-only machine too)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
TUTORIALS = sorted((ROOT / "tutorials").glob("*.py"))


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_tutorial_runs(path, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}       # this checkout's sched
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                            cwd=tmp_path, timeout=600, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "T.prim_func" in result.stdout       # each prints the IR it teaches

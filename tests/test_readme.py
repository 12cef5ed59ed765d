"""The README, as a newcomer reads it: every Python snippet runs on its own (imports and
names included), and every file it names is in the repository (no links outside a clone)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SNIPPETS = re.findall(r"```python\n(.*?)```", README, re.S)
# the tuning snippet runs in tests/autoscheduler/test_tune.py (it tunes: slower)
RUN_HERE = [s for s in SNIPPETS if "sched.tune(" not in s]


def test_the_readme_has_snippets():
    assert len(RUN_HERE) >= 5 and len(SNIPPETS) == len(RUN_HERE) + 1


@pytest.mark.parametrize("snippet", RUN_HERE, ids=lambda s: s.strip().splitlines()[-1][:40])
def test_each_python_snippet_runs_on_its_own(snippet, tmp_path):
    (tmp_path / "snippet.py").write_text(snippet)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}      # this checkout's sched
    done = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]


def test_the_readme_links_only_to_files_in_the_repository():
    assert "../" not in README
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        assert target.startswith("http") or (ROOT / target).exists(), target
    named = re.findall(r"`((?:sched|tutorials|benchmarks|tests)/[\w./]*)`", README)
    assert named
    for path in named:
        assert (ROOT / path).exists(), f"the README names {path}, which is not in the repository"

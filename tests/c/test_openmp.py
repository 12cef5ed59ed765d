"""The C target's OpenMP wait policy: passive unless the user chose, set for the load of the
first kernel library only (libgomp reads it once)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from sched import env

SCRIPT = textwrap.dedent("""
    import os, numpy as np, sched
    from sched import compute as te
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    sch.parallel(sch.get_loops(sch.get_block("B"))[0])
    a = np.ones(64, np.float32); b = np.zeros(64, np.float32)
    sched.build(sch.func, target="c")(a, b)
    assert (b == 2).all()
    print("left in environ:", os.environ.get("OMP_WAIT_POLICY"))
""")


def _run(extra_env: dict) -> str:
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "SCHED_OMP_WAIT_POLICY")}
    environment.update(extra_env, OMP_DISPLAY_ENV="true")
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                            env=environment, timeout=300, check=True)
    return result.stdout + result.stderr


@pytest.mark.parametrize("extra, shown", [
    ({}, "OMP_WAIT_POLICY = 'PASSIVE'"),
    ({"SCHED_OMP_WAIT_POLICY": "active"}, "OMP_WAIT_POLICY = 'ACTIVE'"),
    ({"OMP_WAIT_POLICY": "active"}, "OMP_WAIT_POLICY = 'ACTIVE'"),      # the user's wins
])
def test_the_wait_policy_libgomp_starts_with(extra, shown):
    output = _run(extra)
    assert shown in output, output
    expected_left = extra.get("OMP_WAIT_POLICY", "None")
    assert f"left in environ: {expected_left}" in output     # set for the load only


def test_the_setting_is_checked(monkeypatch):
    monkeypatch.setenv("SCHED_OMP_WAIT_POLICY", "sometimes")
    with pytest.raises(ValueError, match="passive, active or default"):
        env.OMP_WAIT_POLICY.value()

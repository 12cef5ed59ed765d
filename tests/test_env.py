"""sched.env: each environment variable read in one place, typed, with its default."""

from __future__ import annotations

from pathlib import Path

from sched import env


def test_cache_dir_default_and_override(monkeypatch):
    monkeypatch.delenv("SCHED_CACHE_DIR", raising=False)
    assert env.CACHE_DIR.value() == Path("~/.cache/sched").expanduser()
    monkeypatch.setenv("SCHED_CACHE_DIR", "~/elsewhere")
    assert env.CACHE_DIR.value() == Path("~/elsewhere").expanduser()
    monkeypatch.setenv("SCHED_CACHE_DIR", "")
    assert env.CACHE_DIR.value() == Path("~/.cache/sched").expanduser()


def test_every_variable_is_declared_once():
    names = [variable.name for variable in env.ALL]
    assert len(names) == len(set(names))
    assert all(name.startswith("SCHED_") for name in names)


def test_emulator_settings(monkeypatch):
    import pytest

    monkeypatch.delenv("SCHED_EMU_TIMEOUT", raising=False)
    monkeypatch.delenv("SCHED_EMU_SANITIZE", raising=False)
    assert env.EMU_TIMEOUT.value() == 60.0 and env.EMU_SANITIZE.value() is None
    monkeypatch.setenv("SCHED_EMU_TIMEOUT", "2.5")
    monkeypatch.setenv("SCHED_EMU_SANITIZE", "thread")
    assert env.EMU_TIMEOUT.value() == 2.5 and env.EMU_SANITIZE.value() == "thread"
    monkeypatch.setenv("SCHED_EMU_TIMEOUT", "-1")
    with pytest.raises(ValueError, match=r"SCHED_EMU_TIMEOUT='-1': expected a positive number"):
        env.EMU_TIMEOUT.value()
    monkeypatch.setenv("SCHED_EMU_SANITIZE", "address")
    with pytest.raises(ValueError, match=r"SCHED_EMU_SANITIZE='address': expected thread"):
        env.EMU_SANITIZE.value()

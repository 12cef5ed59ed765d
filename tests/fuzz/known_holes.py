"""Program features and schedule steps the fuzzers leave out while a known hole is being fixed.

Each entry maps a feature (see programs.py) or a step (see steps.py) to the issue item whose
fix will make it sound. Remove an entry when its fix lands: the fuzzers then cover it again.
An empty map is the goal. `SCHED_FUZZ_ALL=1` ignores the map (a run that looks for holes).
"""

from __future__ import annotations

import os

KNOWN_HOLES: dict[str, str] = {}


# Refusals at build after accepted steps (a step should have refused): message part -> item.
KNOWN_BUILD_REFUSALS: dict[str, str] = {}


def known_build_refusal(message: str) -> bool:
    """Whether a BuildError after accepted steps is a known hole (see KNOWN_BUILD_REFUSALS)."""
    return os.environ.get("SCHED_FUZZ_ALL", "") in ("", "0") and any(
        part in message for part in KNOWN_BUILD_REFUSALS)


def allowed(feature: str) -> bool:
    """Whether the fuzzers may use `feature` (a program feature, a step, or "step+feature":
    that step on programs with that feature)."""
    return feature not in KNOWN_HOLES or os.environ.get("SCHED_FUZZ_ALL", "") not in ("", "0")

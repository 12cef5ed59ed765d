"""Program features and schedule steps the fuzzers leave out while a known hole is being fixed.

Each entry maps a feature (see programs.py) or a step (see steps.py) to the issue item whose
fix will make it sound. Remove an entry when its fix lands: the fuzzers then cover it again.
An empty map is the goal. `SCHED_FUZZ_ALL=1` ignores the map (a run that looks for holes).
"""

from __future__ import annotations

import os

KNOWN_HOLES: dict[str, str] = {
    # A reduce loop of a block with an init, bound to threadIdx (a cross-thread reduction,
    # issue 12 item 2): the lowering runs the init once, before every thread's part (TVM's
    # meaning), so the C and CUDA kernels give the unscheduled result in every thread order;
    # the interpreter runs the init when the reduce variables are at their minimum, in
    # whatever order the thread loop runs, so in reverse the init lands last and the oracle
    # disagrees. One semantics must be chosen for both (or the rule must ask for
    # decompose_reduction first). Found by the hunt after the merge, 5 reproducers.
    "bind_reduce_init": "issue 12 item 2: init semantics under a cross-thread reduction",
}


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

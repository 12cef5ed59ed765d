"""How much the fuzzers run, read from the environment (tests only; sched/env.py declares the
library's own variables).

    SCHED_FUZZ_EXAMPLES=5000 python -m pytest tests/fuzz       # a long run (default 30)
    SCHED_FUZZ_RANDOM=1 ...        # fresh random examples (default: derandomized, so CI is
                                   # stable; a long run should set it)
    SCHED_FUZZ_ALL=1 ...           # include the known holes (known_holes.py)

The C-target tests run a fifth as many examples (each builds with gcc, about 0.5 s).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

EXAMPLES_VARIABLE = "SCHED_FUZZ_EXAMPLES"
DEFAULT_EXAMPLES = 30


def examples() -> int:
    text = os.environ.get(EXAMPLES_VARIABLE, "")
    if text == "":
        return DEFAULT_EXAMPLES
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"environment variable {EXAMPLES_VARIABLE}={text!r}: expected a "
                         "number of examples") from None
    if value < 1:
        raise ValueError(f"environment variable {EXAMPLES_VARIABLE}={text!r}: must be >= 1")
    return value


def fuzz_settings(fraction: float = 1.0) -> settings:
    """Hypothesis settings for a fuzz test running `fraction` of the examples."""
    return settings(max_examples=max(2, int(examples() * fraction)), deadline=None,
                    derandomize=os.environ.get("SCHED_FUZZ_RANDOM", "") in ("", "0"),
                    suppress_health_check=list(HealthCheck), print_blob=True)

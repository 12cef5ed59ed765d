"""The targets sched builds for, and TVM's target strings ("cuda -arch=sm_90") read into
(name, arch). Shared by `sched.build`, `sched.tune` and the command line.

    parse_target("cuda -arch=sm_90", None)   # ("cuda", "sm_90")
    parse_target("c", None)                  # ("c", None)

"cuda-emu" (the CUDA C of the "cuda" target run on the CPU by sched.cuda.emu) is a target of
`sched.build` only (`BUILD_TARGETS`): tuning measures speed, which an emulator does not have.
"""

from __future__ import annotations

TARGETS = ("c", "cuda")
BUILD_TARGETS = (*TARGETS, "cuda-emu")


def parse_target(target: str, arch: str | None,
                 targets: tuple[str, ...] = TARGETS) -> tuple[str, str | None]:
    """("cuda", "sm_90") from "cuda -arch=sm_90" (TVM's target string) or ("cuda", arch); an
    unknown target (not in `targets`) or option is a ValueError listing what is valid."""
    if not isinstance(target, str):
        raise TypeError(f"build: target must be a string, got {type(target).__name__}")
    name, *options = target.split() or [""]
    for option in options:
        key, _, value = option.lstrip("-").partition("=")
        if key != "arch" or not value:
            raise ValueError(f"build: unknown target option {option!r} in {target!r}: "
                             f"expected '-arch=sm_XX'")
        if arch is not None and arch != value:
            raise ValueError(f"build: arch given twice ({arch!r} and {value!r})")
        arch = value
    if name not in targets:
        raise ValueError(f"build: unknown target {name!r}: expected one of "
                         f"{', '.join(repr(t) for t in targets)}")
    return name, arch

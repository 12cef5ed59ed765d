"""What the CUDA source sched emits needs of the GPU, checked before it is compiled.

A kernel that uses an instruction its target architecture lacks fails in ptxas or NVRTC with
a message about PTX (`Feature 'cp.async' requires .target sm_80 or higher`), or with an
incomplete type deep in a header (bf16 wmma fragments before sm_80). `check_arch_features`
refuses it first, naming the feature, the schedule step that brings it and the lowest arch
that has it, on the first source line that uses it (marked as a compiler would mark it, so
that `sched.build(sch, ...)` names the step that made that line):

    check_arch_features(source, "sm_75")
    # BuildError: arch sm_75 lacks what this kernel uses compiling kernel.cu
    # kernel.cu(41): error: asynchronous copies (cp.async) need sm_80 or newer ...

`check_nvrtc_arch` refuses an arch that the NVRTC in use does not compile for (CUDA 13
dropped sm_70 and older), with the archs it does.
"""

from __future__ import annotations

import re

from sched.cuda.device import parse_arch
from sched.errors import BuildError

# (pattern in the source, what it is, what in a schedule makes it, the steps that do (a
# pattern of their Python text), lowest compute capability)
FEATURES = (
    (re.compile(r"\bcp\.async\b"), "asynchronous copies (cp.async)",
     "a loop annotated software_pipeline_async_stages",
     re.compile(r"software_pipeline_async_stages"), (8, 0)),
    (re.compile(r"mma\.sync\.aligned\.m16n8k16"), "mma.sync m16n8k16 (tensor cores)",
     "tensorize with an mma_* intrinsic", re.compile(r"tensorize\(.*'mma_(?!ldmatrix)"),
     (8, 0)),
    (re.compile(r"wmma::fragment<[^;]*__nv_bfloat16"), "bfloat16 wmma fragments",
     "tensorize with a wmma *_bf16* intrinsic", re.compile(r"tensorize\(.*'wmma_\w*bf16"),
     (8, 0)),
    (re.compile(r"\bldmatrix\.sync"), "ldmatrix", "tensorize with an mma_ldmatrix_* intrinsic",
     re.compile(r"tensorize\(.*'mma_ldmatrix"), (7, 5)),
    (re.compile(r"\bnvcuda::wmma::"), "wmma (tensor cores)", "tensorize with a wmma_* intrinsic",
     re.compile(r"tensorize\(.*'wmma_"), (7, 0)),
)


class ArchFeatureError(BuildError):
    """A kernel uses what its arch lacks; `steps` are the patterns of the schedule steps that
    bring it (`blame`)."""

    def __init__(self, message: str, steps: tuple[re.Pattern, ...] = ()) -> None:
        super().__init__(message)
        self.steps = steps

    def blame(self, trace) -> str | None:
        """The steps of `trace` that brought the features, as a paragraph (None: none)."""
        steps = trace.instructions
        found = [(n, step.to_python()) for n, step in enumerate(steps)
                 if any(p.search(step.to_python()) for p in self.steps)]
        if not found:
            return None
        return "the steps that brought what the arch lacks:\n" + "\n".join(
            f"    step {n + 1} of {len(steps)}: {text}" for n, text in found)


def check_arch_features(source: str, arch: str) -> None:
    """Raise BuildError when `source` uses an instruction that `arch` lacks (see module doc)."""
    from sched.cuda.compile import SOURCE_NAME, failure_message

    major, minor, _ = parse_arch(arch)
    lines = source.splitlines()
    log, steps = [], []
    for pattern, what, made_by, step, (need_major, need_minor) in FEATURES:
        if (major, minor) >= (need_major, need_minor):
            continue
        number = next((n for n, text in enumerate(lines, 1)
                       if pattern.search(text) and not text.lstrip().startswith("//")), None)
        if number is not None:
            steps.append(step)
            log.append(f"{SOURCE_NAME}({number}): error: {what} need "
                       f"sm_{need_major}{need_minor} or newer, the kernel is built for {arch} "
                       f"(made by {made_by}): build for an arch that has it (arch="
                       f"'sm_{need_major}{need_minor}' or newer), or schedule without it")
    if log:
        raise ArchFeatureError(failure_message(f"arch {arch} lacks what this kernel uses",
                                               source, "\n".join(log),
                                               "(none: checked before compiling)"), tuple(steps))


def check_nvrtc_arch(arch: str, supported: list[int], version: str) -> None:
    """Raise BuildError when NVRTC `version` (which compiles for compute capabilities
    `supported`, as 75, 80, ...) cannot compile for `arch`."""
    major, minor, _ = parse_arch(arch)
    if major * 10 + minor not in supported:
        archs = ", ".join(f"sm_{number}" for number in supported)
        raise BuildError(f"NVRTC {version} does not compile for {arch}: it compiles for "
                         f"{archs} (CUDA 13 dropped sm_70 and older); build for one of those, "
                         f"or with compiler='nvcc' from a toolkit that has {arch}")

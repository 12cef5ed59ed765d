"""sched: a schedule-language compiler for tensor kernels.

`import sched` never touches CUDA: the CUDA modules load when first used.
"""

from sched.build import build

__all__ = ["build"]

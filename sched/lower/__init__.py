"""Lowering: from a scheduled PrimFunc (block IR) to loop IR, one pass a module.

`lower(func)` runs them all, in the order `pipeline.py` lists.
"""

from sched.lower.convert_blocks import convert_blocks_to_loops
from sched.lower.flatten_buffers import flatten_buffers
from sched.lower.lower_init import lower_reduction_init
from sched.lower.pipeline import lower
from sched.lower.simplify_indices import simplify_indices

__all__ = ["convert_blocks_to_loops", "flatten_buffers", "lower", "lower_reduction_init",
           "simplify_indices"]

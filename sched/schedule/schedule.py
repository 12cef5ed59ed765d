"""`Schedule`: every primitive, family by family, on the state of `ScheduleBase`.

    sch = sched.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, factors=[None, 32])
    print(sch.func.script())
    print(sch.trace)

Each family module holds its pure functions (function in, function out, legality checked by
polyhedral/) and a mixin with the methods that take handles and record the trace:
loops.py (split, fuse, reorder, add_unit_loop, tile), loop_kinds.py (parallel, vectorize,
unroll, annotate), mapping.py (bind), sampling.py (sample_perfect_tile, sample_categorical),
placement.py (compute_at, reverse_compute_at, compute_inline, reverse_compute_inline; their pure
functions are in compute_at.py and inlining.py), reduction.py (decompose_reduction, rfactor;
rfactor_tuple.py and tuple_reducers.py for argmax/argmin over two buffers),
memory.py (cache_read, cache_write, set_scope, storage_align; cache_consumers.py for
cache_read with consumer_blocks), layout.py (transform_layout), block_layout.py
(transform_block_layout), blockize.py (blockize), reindex.py (reindex), reindex_cache.py
(reindex_cache_read, reindex_cache_write), tensorize.py (tensorize; the intrinsic registry in
tensor_intrin.py, the matching in tensorize_match.py), annotations.py (unannotate),
compute_location.py (sample_compute_location, and compute_at at its inline and root marks),
introspection.py (mod, work_on, show, fork_seed, get_output_blocks), buffer_properties.py
(set_axis_separator, unsafe_set_dtype), block_iters.py (reorder_block_iter_var), loop_merge.py
(merge), padding.py (decompose_padding, can_decompose_padding), pad_einsum.py
(pad_einsum; what it may pad in einsum_padding.py), deferred_checks.py
(concurrency_checked_at_end), loop_partition.py (loop_partition), partitioned_tile.py
(sample_partitioned_tile), cache_inplace.py (cache_inplace), rolling_buffer.py
(rolling_buffer; its proof in rolling_buffer_proof.py on
polyhedral/instance_flows.py), cache_index.py (cache_index),
buffer_access.py (annotate_buffer_access). ordered_axes.py holds the rule
for scan and opaque iteration variables that several families apply.
"""

from __future__ import annotations

from sched.schedule.annotations import AnnotationPrimitives
from sched.schedule.base import BlockRV, LoopRV, ScheduleBase
from sched.schedule.block_iters import BlockIterPrimitives
from sched.schedule.block_layout import BlockLayoutPrimitives
from sched.schedule.blockize import BlockizePrimitives
from sched.schedule.buffer_access import BufferAccessPrimitives
from sched.schedule.buffer_properties import BufferPropertyPrimitives
from sched.schedule.cache_index import CacheIndexPrimitives
from sched.schedule.cache_inplace import CacheInplacePrimitives
from sched.schedule.compute_location import ComputeLocationPrimitives
from sched.schedule.deferred_checks import DeferredCheckPrimitives
from sched.schedule.introspection import IntrospectionPrimitives
from sched.schedule.layout import LayoutPrimitives
from sched.schedule.loop_kinds import LoopKindPrimitives
from sched.schedule.loop_merge import LoopMergePrimitives
from sched.schedule.loop_order import LoopOrderPrimitives
from sched.schedule.loop_partition import LoopPartitionPrimitives
from sched.schedule.loops import LoopPrimitives
from sched.schedule.mapping import MappingPrimitives
from sched.schedule.memory import MemoryPrimitives
from sched.schedule.pad_einsum import PadEinsumPrimitives
from sched.schedule.padding import PaddingPrimitives
from sched.schedule.partitioned_tile import PartitionedTileSampling
from sched.schedule.placement import PlacementPrimitives
from sched.schedule.reduction import ReductionPrimitives
from sched.schedule.reindex import ReindexPrimitives
from sched.schedule.reindex_cache import ReindexCachePrimitives
from sched.schedule.rolling_buffer import RollingBufferPrimitives
from sched.schedule.sampling import SamplingPrimitives
from sched.schedule.storage_align import StorageAlignPrimitives
from sched.schedule.tensorize import TensorizePrimitives
from sched.schedule.unmodelled import refuse_unmodelled


@refuse_unmodelled
class Schedule(LoopPrimitives, LoopOrderPrimitives, LoopKindPrimitives, PlacementPrimitives,
               MappingPrimitives,
               SamplingPrimitives, ReductionPrimitives, MemoryPrimitives, StorageAlignPrimitives,
               LayoutPrimitives,
               BlockizePrimitives, BlockLayoutPrimitives, ReindexPrimitives,
               ReindexCachePrimitives, TensorizePrimitives, AnnotationPrimitives,
               ComputeLocationPrimitives, IntrospectionPrimitives, BufferPropertyPrimitives,
               BlockIterPrimitives, LoopMergePrimitives,
               PaddingPrimitives, PadEinsumPrimitives, DeferredCheckPrimitives,
               LoopPartitionPrimitives, PartitionedTileSampling, CacheInplacePrimitives,
               RollingBufferPrimitives, CacheIndexPrimitives, BufferAccessPrimitives,
               ScheduleBase):
    """A schedule of `func`: `sch = sched.Schedule(func)`, then primitives, then `sch.func`.

    `render_errors=False` keeps ScheduleError messages to one line (no IR): the
    autoscheduler's cheap mode. `verify_steps` runs the IR verifier after every step.
    """


__all__ = ["BlockRV", "LoopRV", "Schedule"]

"""The tensor intrinsics sched ships, registered in `TensorIntrin` when `sched` is imported
(TVM's `tvm.tir.tensor_intrin`): `cpu.py` holds the CPU micro-kernels, `cuda.py` the
tensor-core ones (TVM's names), `tvm_names.py` the names TVM's current registry gives them and
its `get_wmma_intrin_group` / `get_mma_intrin_group`.

Each intrinsic is a description PrimFunc and an implementation PrimFunc written in
TVMScript (sched/schedule/tensor_intrin.py says what each is for).
"""

from sched.tensor_intrin import cpu, cuda, tvm_names  # noqa: F401  (registers on import)
from sched.tensor_intrin.tvm_names import get_mma_intrin_group, get_wmma_intrin_group

__all__ = ["get_mma_intrin_group", "get_wmma_intrin_group"]

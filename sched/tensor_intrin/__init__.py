"""The tensor intrinsics sched ships, registered in `TensorIntrin` when `sched` is imported
(TVM's `tvm.tir.tensor_intrin`): `cpu.py` holds the CPU micro-kernels, `cuda.py` the
tensor-core ones (TVM's names).

Each intrinsic is a description PrimFunc and an implementation PrimFunc written in
TVMScript (sched/schedule/tensor_intrin.py says what each is for).
"""

from sched.tensor_intrin import cpu, cuda  # noqa: F401  (registers on import)

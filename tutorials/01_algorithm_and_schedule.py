"""Tutorial 1: the algorithm, then the schedule.

sched separates *what* to compute from *how*. The algorithm is a compute definition; it becomes
a PrimFunc, printed as TVMScript-style Python. The schedule rewrites the loops of that function
step by step, and every step is checked. Run: `python tutorials/01_algorithm_and_schedule.py`.
"""

import numpy as np

import sched
from sched import compute as te

# 1. The algorithm: C = A @ B, written once, with no loops in sight.
M, N, K = 96, 80, 64
A = te.placeholder((M, K), "float32", name="A")
B = te.placeholder((K, N), "float32", name="B")
k = te.reduce_axis((0, K), name="k")
C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
func = te.create_prim_func([A, B, C], name="matmul")

print("== the algorithm as a PrimFunc: one block, named after the compute ==")
print(func.script())

# The text is Python that sched reads back to the same IR.
assert sched.parse(func.script()) == func

# 2. Run it as it is: the C target compiles the loops with gcc.
a = np.random.default_rng(0).standard_normal((M, K)).astype("float32")
b = np.random.default_rng(1).standard_normal((K, N)).astype("float32")
c = np.zeros((M, N), "float32")
sched.build(func, target="c")(a, b, c)
np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
print("unscheduled kernel matches numpy")

# 3. The schedule: the same computation, other loops. Handles name blocks and loops.
sch = sched.Schedule(func)
block = sch.get_block("C")
i, j, kk = sch.get_loops(block)
io, ii = sch.split(i, factors=[None, 32])
sch.reorder(io, j, ii, kk)
print("== after split and reorder ==")
print(sch.func.script())

# 4. The schedule is recorded: a trace of Python that replays it.
print("== the trace ==")
print(sch.trace)
assert sch.trace.apply(func).func == sch.func

c2 = np.zeros((M, N), "float32")
sched.build(sch.func, target="c")(a, b, c2)
np.testing.assert_allclose(c2, a @ b, rtol=1e-4, atol=1e-4)
print("scheduled kernel matches numpy")

"""Tutorial 9: fast kernels on the CPU: the host's vector width, vector math, relaxed math,
the CPU hand schedules, and what a call costs.

Run: `python tutorials/09_cpu_speed.py`. Timings are of this machine, in this process.
"""

import time

import numpy as np

import sched
from sched import compute as te
from sched import hand_schedules
from sched.c.isa import host_isa


def best_ms(run, repeats=20):
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


# The C target emits vectors of the width gcc targets with -march=native: 16 fp32 lanes with
# AVX-512, 8 with AVX2, 4 with NEON. SCHED_VECTOR_BYTES=32 would force AVX2-sized vectors.
isa = host_isa()
print(f"vector ISA: {isa.name}, {isa.vector_bytes} bytes, {isa.lanes('float32')} fp32 lanes")

# A GELU-like elementwise kernel: tanh, max and a comparison in a vectorized loop become vector
# code (a polynomial for tanh, about 1-2 ulp), not a libm call per element.
rows, cols = 300, 203                     # 203 columns: the last vector of a row is partial
X = te.placeholder((rows, cols), name="X")
Y = te.compute((rows, cols), lambda i, j: te.max(
    0.5 * X[i, j] * (1.0 + te.tanh(0.79788456 * X[i, j])), X[i, j] * 0.01), name="Y")
func = te.create_prim_func([X, Y], name="gelu_ish")

sch = sched.Schedule(func)
i, j = sch.get_loops(sch.get_block("Y"))
jo, ji = sch.split(j, [None, isa.lanes("float32")])
sch.parallel(i)
sch.vectorize(ji)
exact = sched.build(sch.func, target="c")
relaxed = sched.build(sch.func, target="c", fast_math=True)   # cheaper tanh (stated error)
print("== the schedule ==")
print(sch.func.script())
print("== the vectorized loop ==")
start = exact.source.index("vectorized")
print(exact.source[exact.source.rfind("\n", 0, start) + 1:][:400])

x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
expected = np.maximum(0.5 * x * (1 + np.tanh(0.79788456 * x)), x * 0.01)
for name, kernel in (("exact", exact), ("fast_math", relaxed)):
    y = np.empty_like(x)
    kernel(x, y)
    error = np.max(np.abs(y - expected))
    assert error < 1e-5, error
    print(f"{name}: max error {error:.1e}, {best_ms(lambda k=kernel, y=y: k(x, y)):.3f} ms")
numpy_ms = best_ms(lambda: np.maximum(0.5 * x * (1 + np.tanh(0.79788456 * x)), x * 0.01))
print(f"numpy: {numpy_ms:.3f} ms")

# The CPU hand schedules take the register tile from the vector width. Shapes that the tile
# does not divide cost no guard: the lowering partitions the loops, so full tiles run
# unguarded and the last one runs only what is left. (A kernel this small also pays for waking
# the OpenMP threads: OMP_NUM_THREADS=1 shows the single-core time.)
a = np.random.default_rng(1).standard_normal((250, 96)).astype(np.float32)
b = np.random.default_rng(2).standard_normal((96, 130)).astype(np.float32)
c = np.empty((250, 130), np.float32)
matmul = sched.build(hand_schedules.cpu_matmul(250, 130, 96), target="c")
matmul(a, b, c)
np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
print(f"cpu_matmul 250x130x96: {best_ms(lambda: matmul(a, b, c)):.3f} ms, "
      f"numpy {best_ms(lambda: a @ b):.3f} ms")

r = np.random.default_rng(3).standard_normal((64, 333)).astype(np.float32)
s = np.empty_like(r)
softmax = sched.build(hand_schedules.cpu_softmax(64, 333), target="c")
softmax(r, s)
e = np.exp(r - r.max(axis=1, keepdims=True))
np.testing.assert_allclose(s, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
print("cpu_softmax 64x333 matches numpy")

# A call checks every argument (dtype, shape, layout, alignment, overlap, bounds) in a C entry
# point generated with the kernel: about a microsecond on numpy arrays.
small = np.ones((16, 16), np.float32)
A = te.placeholder((16, 16), name="A")
add = sched.build(te.create_prim_func([A, te.compute((16, 16), lambda i, j: A[i, j] + 1.0,
                                                     name="B")]), target="c")
out = np.empty_like(small)
calls = 10000
start = time.perf_counter()
for _ in range(calls):
    add(small, out)
print(f"one call of a 16x16 kernel: {(time.perf_counter() - start) / calls * 1e6:.2f} us")
try:
    add(small, np.empty((16, 15), np.float32))
except sched.KernelArgumentError as error:
    print(f"a wrong call is refused: {error}")

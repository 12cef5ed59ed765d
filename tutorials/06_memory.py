"""Tutorial 6: memory: cache_read, cache_write, set_scope, storage_align, transform_layout, and a
fast CPU matmul.

A cache stage copies the part of a buffer a block uses into a new buffer in a storage scope
("global", "shared" or "local"): cache_read before the block reads it, cache_write after the
block writes it. Placed with compute_at under a tile loop, a cache holds one tile, and the
lowering allocates only that (the buffer is compacted). On the C target the scopes are names
on the allocation; a GPU schedule puts "shared" and "local" in on-chip memory. The tutorial
ends with a schedule that makes a matmul fast on the CPU, timed against numpy.
Run: `python tutorials/06_memory.py`.
"""

import time

import numpy as np

import sched
from sched import compute as te

rng = np.random.default_rng(0)


def show(title, sch):
    print(f"== {title} ==")
    print(sch.func.script())


def function_of(source):
    """The generated C function, without the includes and helpers before it."""
    return source[source.index("\nvoid ") + 1:]


def lines_with(source, word):
    return "\n".join(line for line in source.splitlines() if word in line)


def matmul(m, n, k):
    A = te.placeholder((m, k), "float32", name="A")
    B = te.placeholder((k, n), "float32", name="B")
    return te.create_prim_func([A, B, te.ops.matmul(A, B)], name="matmul")


def inputs(m, n, k):
    a = rng.standard_normal((m, k)).astype("float32")
    b = rng.standard_normal((k, n)).astype("float32")
    return a, b, np.zeros((m, n), "float32")


# 1. A matmul in 16 x 16 tiles of C, k in steps of 8.
M, N, K = 64, 48, 32
sch = sched.Schedule(matmul(M, N, K))
block = sch.get_block("C")
i, j, k = sch.get_loops(block)
i_0, j_0, i_1, j_1 = sch.tile(i, j, 16, 16)
k_0, k_1 = sch.split(k, factors=[None, 8])
sch.reorder(k_0, i_1, j_1, k_1)
show("a tiled matmul", sch)

# 2. Caches. The block writes C (writes index 0) and reads A, B, C (reads 0, 1, 2: its inputs
# first, as in TVM, then C, which it reads to accumulate). Each cache starts at the root, over
# the whole box the block touches.
C_local = sch.cache_write(block, 0, "local")
A_shared = sch.cache_read(block, 0, "shared")
B_global = sch.cache_read(block, 1, "global")
show("cache_write C (local), cache_read A (shared), cache_read B (global)", sch)

# 3. Place them: the write-back of C after each tile of C (reverse_compute_at, as it consumes
# what the block produces), the copies of A and B at each step of k_0 (compute_at). Each now
# covers one tile: 16 x 16 of C, 16 x 8 of A, 8 x 16 of B.
sch.reverse_compute_at(C_local, j_0)
sch.compute_at(A_shared, k_0)
sch.compute_at(B_global, k_0)
show("the caches under the tile loops", sch)

# The IR still declares 64 x 48 caches; the lowering (compact_buffers) allocates each where
# it is used, at the size of one tile, and indexes it relative to the tile.
kernel = sched.build(sch.func, target="c")
print("== the C: compacted caches, allocated inside the tile loops ==")
print(function_of(kernel.source))
a, b, c = inputs(M, N, K)
kernel(a, b, c)
np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
print("matmul through caches matches numpy")

# 4. storage_align: pad the rows of the A tile so that its row stride is 16 * n + 1 (on a GPU,
# consecutive rows of a shared tile then start in different memory banks). The request is a
# block annotation; the lowering applies it to the compacted buffer: rows of 8 become rows of
# 17, and the tile 16 x 17 = 272 floats.
sch.storage_align(A_shared, 0, axis=0, factor=16, offset=1)
print("== storage_align(A_shared, 0, axis=0, factor=16, offset=1) ==")
print(lines_with(sch.func.script(), "buffer_dim_align"))
kernel = sched.build(sch.func, target="c")
print(lines_with(kernel.source, "A_shared"))
c = np.zeros((M, N), "float32")
kernel(a, b, c)
np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
print("padded A tile matches numpy")
print(sch.trace)

# 5. set_scope: an intermediate buffer the function allocates changes scope in place, with no
# copy. In relu(A @ B + bias) with the epilogue under the tile loop, the matmul's result C is
# only a tile's worth at a time: make it "local".
A = te.placeholder((M, K), "float32", name="A")
B = te.placeholder((K, N), "float32", name="B")
bias = te.placeholder((N,), "float32", name="bias")
sch = sched.Schedule(te.create_prim_func([A, B, bias, te.ops.matmul_bias_relu(A, B, bias)],
                                         name="dense"))
i, j, k = sch.get_loops(sch.get_block("C"))
i_0, j_0, i_1, j_1 = sch.tile(i, j, 16, 16)
sch.reverse_compute_at(sch.get_block("D"), j_0)
sch.set_scope(sch.get_block("C"), 0, "local")
print("== set_scope(C, 0, 'local') ==")
print(lines_with(sch.func.script(), "alloc_buffer"))
kernel = sched.build(sch.func, target="c")
print(lines_with(kernel.source, "// scope"))
bias_value = rng.standard_normal(N).astype("float32")
d = np.zeros((M, N), "float32")
kernel(a, b, bias_value, d)
np.testing.assert_allclose(d, np.maximum(a @ b + bias_value, 0), rtol=1e-4, atol=1e-4)
print("dense with a local C matches numpy")

# 6. A fast CPU matmul. For each panel of 16 columns (j_0, in parallel), B's panel is packed
# into a contiguous 256 x 16 array (cache_read "global" at j_0). For each 4-row tile (i_0),
# a 4 x 16 block of C is accumulated in a "local" array, zeroed once (decompose_reduction)
# and written back after the k loop (cache_write, reverse_compute_at at i_0). In the k loop,
# the 4 rows are unrolled and the 16 columns are two 8-lane vectors: 8 accumulators.
S = 256
TILE_M, TILE_N = 4, 16
sch = sched.Schedule(matmul(S, S, S))
block = sch.get_block("C")
i, j, k = sch.get_loops(block)
i_0, i_1 = sch.split(i, factors=[None, TILE_M])
j_0, j_1 = sch.split(j, factors=[None, TILE_N])
sch.reorder(j_0, i_0, k, i_1, j_1)
C_local = sch.cache_write(block, 0, "local")
sch.reverse_compute_at(C_local, i_0)
B_packed = sch.cache_read(block, 1, "global")
sch.compute_at(B_packed, j_0)
init = sch.decompose_reduction(block, k)
sch.unroll(i_1)
sch.vectorize(j_1)
for stage in (init, C_local, B_packed):
    sch.vectorize(sch.get_loops(stage)[-1])
sch.parallel(j_0)
show("the fast schedule", sch)
fast = sched.build(sch.func, target="c")
print("== its C ==")
print(function_of(fast.source))
print(sch.trace)

a, b, c = inputs(S, S, S)
fast(a, b, c)
np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3)
print("fast matmul matches numpy")


# Layouts, as TVM users write them. transform_layout stores a buffer through an index map (a
# lambda, or T.index_map): here B's rows go in blocks of 4, the row within the block innermost.
# The map must be affine and injective (isl checks it); 10 rows make a 3 x 8 x 4 buffer whose
# last block has 2 rows no index reaches, filled with pad_value first. One cache_read can serve
# several consumers (consumer_blocks=[...]), and buffers may be given by name.
A = te.placeholder((10, 8), "float32", name="A")
B = te.compute((10, 8), lambda i, j: A[i, j] * 2, name="B")
C = te.compute((10, 8), lambda i, j: B[i, j] + 1, name="C")
D = te.compute((10, 8), lambda i, j: B[i, j] - 1, name="D")
layout_func = te.create_prim_func([A, C, D])
sch = sched.Schedule(layout_func)
sch.transform_layout(sch.get_block("B"), "B", lambda i, j: (i // 4, j, i % 4), pad_value=0.0)
c_block, d_block = sch.get_block("C"), sch.get_block("D")
sch.cache_read(c_block, "B", "local", consumer_blocks=[c_block, d_block])
show("B in blocks of 4 rows, read by C and D through one cache", sch)
x = rng.random((10, 8), dtype=np.float32)
y_c, y_d = np.zeros_like(x), np.zeros_like(x)
sched.build(sch.func, target="c")(x, y_c, y_d)
np.testing.assert_allclose(y_c, x * 2 + 1, rtol=1e-6)
np.testing.assert_allclose(y_d, x * 2 - 1, rtol=1e-6)
print("the new layout computes what the old one did")

# cache_write takes consumer_blocks too: the listed consumers read the cache directly (isl
# checks that they read only what the cached block wrote before them).
sch = sched.Schedule(layout_func)
sch.cache_write(sch.get_block("B"), "B", "local", consumer_blocks=[sch.get_block("C")])
sched.build(sch.func, target="c")(x, y_c, y_d)
np.testing.assert_allclose(y_c, x * 2 + 1, rtol=1e-6)
np.testing.assert_allclose(y_d, x * 2 - 1, rtol=1e-6)
print("C reads B_local, D reads B")

# reindex_cache_read (TVM's): a cache whose layout is a map of the block's iteration variables.
# Here C reads A[i, k] through A_shared[k, i], filled before C's loop nest; reindex_cache_write
# does the same for a written buffer, copied back after the nest.
sch = sched.Schedule(matmul(16, 8, 12))
sch.reindex_cache_read(sch.get_block("C"), "A", "shared", lambda vi, vj, vk: (vk, vi))
show("reindex_cache_read(C, 'A', 'shared', lambda vi, vj, vk: (vk, vi))", sch)
a_small, b_small, c_small = inputs(16, 8, 12)
sched.build(sch.func, target="c")(a_small, b_small, c_small)
np.testing.assert_allclose(c_small, a_small @ b_small, rtol=1e-4, atol=1e-4)
print("reindex_cache_read matches numpy")

# pad_einsum (TVM's): a matmul of sizes no tile divides is padded to multiples of the tile
# through padded copies of A, B and C (zeros outside, the result copied back), so the tiles
# that follow need no guard. It refuses where the zeros could change a result (a max, or a
# float factor that does not depend on the padded index: 0 * inf is NaN).
sch = sched.Schedule(matmul(13, 10, 7))
sch.pad_einsum(sch.get_block("C"), [16, 16, 8])
show("pad_einsum(C, [16, 16, 8])", sch)
a_odd, b_odd, c_odd = inputs(13, 10, 7)
sched.build(sch.func, target="c")(a_odd, b_odd, c_odd)
np.testing.assert_allclose(c_odd, a_odd @ b_odd, rtol=1e-4, atol=1e-4)
print("pad_einsum matches numpy")

naive = sched.build(matmul(S, S, S), target="c")


def median_seconds(run, repeats=7):
    run()                                   # warm up: caches, OpenMP threads
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


t_naive = median_seconds(lambda: naive(a, b, c), repeats=3)
t_fast = median_seconds(lambda: fast(a, b, c))
t_numpy = median_seconds(lambda: np.matmul(a, b, out=c))
gflops = 2 * S**3 / 1e9
print(f"== {S} x {S} x {S} matmul, median times ==")
for name, seconds in (("unscheduled", t_naive), ("scheduled", t_fast), ("numpy", t_numpy)):
    print(f"{name:>12}: {seconds * 1e3:8.3f} ms  {gflops / seconds:6.1f} GFLOP/s")
print(f"scheduled / numpy time: {t_fast / t_numpy:.2f} (timings vary with the machine and "
      f"its load)")

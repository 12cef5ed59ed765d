"""Tutorial 4: reductions: decompose_reduction, rfactor and cross-thread reductions.

A reduction block carries its init (`with T.init():`), which runs at the first iteration of
its reduce loops. decompose_reduction hoists the init into a block of its own, before a loop,
so the reduce loops run without that test. rfactor splits a reduction in two: partial results
indexed by one reduce loop, which becomes a spatial loop (so it may run in parallel or
vectorized), then a small reduction that combines them. On the GPU a reduce loop may also be
bound to threadIdx.x itself: the threads combine their partial results (a cross-thread
reduction). A reduction as TVM's blockize prints it (its init holding blocks) runs as it is.
Run: `python tutorials/04_reductions.py`.
"""

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


# 1. decompose_reduction: a matmul in 16-row blocks, k split by 8.
M, N, K = 64, 48, 40
A = te.placeholder((M, K), "float32", name="A")
B = te.placeholder((K, N), "float32", name="B")
matmul = te.create_prim_func([A, B, te.ops.matmul(A, B)], name="matmul")
a = rng.standard_normal((M, K)).astype("float32")
b = rng.standard_normal((K, N)).astype("float32")

sch = sched.Schedule(matmul)
block = sch.get_block("C")
i, j, k = sch.get_loops(block)
i_0, i_1 = sch.split(i, factors=[None, 16])
k_0, k_1 = sch.split(k, factors=[None, 8])
sch.reorder(i_0, k_0, i_1, j, k_1)
show("the init inside the block: it runs where k_0 * 8 + k_1 == 0", sch)
print("== ...which the C tests in every iteration ==")
print(function_of(sched.build(sch.func, target="c").source))

# The init may go before a loop that is not inside a reduce loop: before k_0 here (before k_1
# it would run again for every k_0). It gets copies of the spatial loops inside (i_1, j). As in
# TVM, the init block is C_init and the reduction block, left with the update, is renamed
# C_update; the handle `block` follows it (sch.get_block("C") no longer finds it).
print("== decompose_reduction(C, k_1): refused, k_1 is inside the reduce loop k_0 ==")
try:
    sch.decompose_reduction(block, k_1)
except sched.ScheduleError as error:
    print(error)

init = sch.decompose_reduction(block, k_0)
show("decompose_reduction(C, k_0): C_init zeroes a 16-row block, then C_update", sch)
kernel = sched.build(sch.func, target="c")
print("== the C: no test left in the reduce loops ==")
print(function_of(kernel.source))
c = np.zeros((M, N), "float32")
kernel(a, b, c)
np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
print("decompose_reduction matches numpy")

# 2. rfactor for parallelism: the sums of the rows of a wide matrix. There are only 8 rows,
# so the parallelism is in the reduction, and a reduce loop cannot run in parallel: every
# iteration adds to the same element.
rows, cols = 8, 1000
X = te.placeholder((rows, cols), "float32", name="X")
r = te.reduce_axis((0, cols), name="k")
row_sum = te.create_prim_func(
    [X, te.compute((rows,), lambda i: te.sum(X[i, r], axis=r), name="S")], name="row_sum")
x = rng.standard_normal((rows, cols)).astype("float32")

sch = sched.Schedule(row_sum)
i, k = sch.get_loops(sch.get_block("S"))
print("== parallel(k): refused, k carries the reduction ==")
try:
    sch.parallel(k)
except sched.ScheduleError as error:
    print(error)

# Split k into 4 chunks of 250 and move the chunk loop outermost (a reduce loop may move: the
# sum is associative). It still carries the reduction, so parallel is still refused.
k_0, k_1 = sch.split(k, factors=[4, None])
sch.reorder(k_0, i, k_1)
print("== parallel(k_0) on the split reduce loop: still refused ==")
try:
    sch.parallel(k_0)
except sched.ScheduleError as error:
    print(error)

# rfactor(k_0): S_rf[k_0, i] holds the sum of chunk k_0 of row i; k_0 is a spatial loop of the
# new block S_rf, and the block S adds the 4 partial sums of each row.
rf = sch.rfactor(k_0, factor_axis=0)
show("rfactor(k_0): partial sums S_rf, then their combination in S", sch)
sch.parallel(k_0)
show("parallel(k_0): legal now, each chunk writes its own partial sums", sch)

kernel = sched.build(sch.func, target="c")
print("== the C ==")
print(function_of(kernel.source))
s = np.zeros(rows, "float32")
kernel(x, s)
np.testing.assert_allclose(s, x.sum(axis=1), rtol=1e-4, atol=1e-3)
print("rfactor + parallel matches numpy")

# 3. rfactor for vectors: factor the inner part of the split instead, with the new dimension
# last (factor_axis=1), and each row accumulates 8 lanes side by side. decompose_reduction
# then hoists the init of the partial sums out of the k_0 loop.
sch = sched.Schedule(row_sum)
i, k = sch.get_loops(sch.get_block("S"))
k_0, k_1 = sch.split(k, factors=[None, 8])
rf = sch.rfactor(k_1, factor_axis=1)
sch.vectorize(k_1)
rf_init = sch.decompose_reduction(rf, k_0)
sch.vectorize(sch.get_loops(rf_init)[-1])
show("rfactor(k_1, factor_axis=1), vectorize k_1, decompose_reduction(S_rf, k_0)", sch)

kernel = sched.build(sch.func, target="c")
print("== the C: 8-lane vector sums ==")
print(function_of(kernel.source))
s = np.zeros(rows, "float32")
kernel(x, s)
np.testing.assert_allclose(s, x.sum(axis=1), rtol=1e-4, atol=1e-3)
print("rfactor + vectorize matches numpy")
print(sch.trace)

# 3b. argmax: a reducer of two values (index, value), written with te.comm_reducer; one block
# writes both outputs. `>=` keeps the first of equal values in iteration order (numpy's
# argmax): combining partial results is then correct only in the order of their chunks, so
# rfactor accepts the outer part of the split reduce loop and refuses the inner one. Over
# floats `>=` alone is no order once a NaN comes (`v >= NaN` and `NaN >= v` are both false:
# a NaN would reset the row, and partial results would change the answer), so rfactor asks
# for the form that keeps a NaN it holds, numpy's argmax (the first NaN of a row):
def fcombine(x, y):
    keep = te.any(x[1] >= y[1], te.not_equal(x[1], x[1]))
    return te.if_then_else(keep, x[0], y[0]), te.if_then_else(keep, x[1], y[1])


argmax = te.comm_reducer(fcombine, lambda t0, t1: (-1, te.min_value(t1)), name="argmax")
ka = te.reduce_axis((0, cols), name="k")
index, value = te.compute((rows,), lambda i: argmax((ka, X[i, ka]), axis=ka), name="M")
sch = sched.Schedule(te.create_prim_func([X, index, value]))
i, k = sch.get_loops(sch.get_block("M"))
k_0, k_1 = sch.split(k, factors=[8, None])
try:
    sch.rfactor(k_1, factor_axis=0)
except sched.ScheduleError as error:
    print("== rfactor(k_1) of argmax: refused ==")
    print(str(error).splitlines()[0])
sch.rfactor(k_0, factor_axis=0)
show("argmax: rfactor(k_0), partial (index, value) pairs per chunk of columns", sch)
ties = rng.integers(0, 5, (rows, cols)).astype("float32")
ties[1, cols // 2] = np.nan
found, best = np.zeros(rows, "int32"), np.zeros(rows, "float32")
sched.build(sch.func, target="c")(ties, found, best)
np.testing.assert_array_equal(found, ties.argmax(axis=1))
print("argmax with rfactor matches numpy's (the first maximum, the first NaN)")

# Other te.comm_reducer reducers rfactor can prove: accumulators each reduced by +, *, min
# or max (a (sum, sum of squares) pair) and logsumexp's (max, scaled sum), the online-softmax
# state. Their partial results start from the reducer's identity; any other user reducer is
# refused (its associativity is not proved).
def lse_combine(x, y):
    m = te.max(x[0], y[0])
    return m, x[1] * te.exp(x[0] - m) + y[1] * te.exp(y[0] - m)


logsumexp = te.comm_reducer(lse_combine, lambda t0, t1: (te.min_value(t0), te.cast(0, t1)),
                            name="logsumexp")
kl = te.reduce_axis((0, cols), name="k")
top, scaled = te.compute((rows,), lambda i: logsumexp((X[i, kl], te.cast(1.0, "float32")),
                                                       axis=kl), name="L")
sch = sched.Schedule(te.create_prim_func([X, top, scaled]))
i, k = sch.get_loops(sch.get_block("L"))
k_0, k_1 = sch.split(k, factors=[None, 8])
sch.rfactor(k_1, factor_axis=0)
m, s = np.zeros(rows, "float32"), np.zeros(rows, "float32")
sched.build(sch.func, target="c")(x, m, s)
np.testing.assert_allclose(m + np.log(s), np.log(np.exp(x.astype("float64")).sum(axis=1)),
                           rtol=1e-4)
print("logsumexp's (max, scaled sum) with rfactor(k_1) matches numpy")

# 4. Cross-thread reductions (GPU): bind the reduce loop itself to threadIdx.x. Each thread
# sums every 128th column of its row, then the threads of the block combine their partial
# sums: warp shuffles (__shfl_down_sync) then shared memory across warps in CUDA, a shared
# array combined by thread 0 on the C target, where the block's threads run as loops. Only
# one associative update block (sum, max, min, product) whose whole reduction runs under the
# thread loop (or under it and serial loops directly around it, such as k_0 without the
# reorder below: each thread then runs its k_0 iterations first) is accepted; anything else
# is refused with the advice to rfactor.
sch = sched.Schedule(row_sum)
i, k = sch.get_loops(sch.get_block("S"))
k_0, k_1 = sch.split(k, factors=[None, 128])
sch.reorder(k_1, k_0)
sch.bind(i, "blockIdx.x")
sch.bind(k_1, "threadIdx.x")
show("k_1 (a reduce loop) bound to threadIdx.x: a cross-thread reduction", sch)
cuda = sched.build(sch.func, target="cuda", arch="sm_90").source
print("== the CUDA: the first warp shuffle ==")
print(next(line.strip() for line in cuda.splitlines() if "__shfl_down_sync" in line))
s = np.zeros(rows, "float32")
sched.build(sch.func, target="c")(x, s)
np.testing.assert_allclose(s, x.sum(axis=1), rtol=1e-4, atol=1e-3)
print("cross-thread reduction (C target) matches numpy")

# 5. A reduction as TVM's blockize prints it: the outer block's T.init() holds loops over an
# init block that uses the outer block's variables. sched reads it as it is (the init's
# blocks are statements of the polyhedral model, at the first value of the outer reduce
# variable), and decompose_reduction hoists that init as TVM's does.
tvm_printed = sched.parse('''
@T.prim_func
def main(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32"),
         C: T.Buffer((32, 32), "float32")):
    for i_0, j_0, k_0 in T.grid(2, 2, 4):
        with T.block("C_o"):
            vi_o, vj_o, vk_o = T.axis.remap("SSR", [i_0, j_0, k_0])
            T.reads(A[vi_o * 16:vi_o * 16 + 16, vk_o * 8:vk_o * 8 + 8],
                    B[vk_o * 8:vk_o * 8 + 8, vj_o * 16:vj_o * 16 + 16])
            T.writes(C[vi_o * 16:vi_o * 16 + 16, vj_o * 16:vj_o * 16 + 16])
            with T.init():
                for i_1, j_1 in T.grid(16, 16):
                    with T.block("C_init"):
                        vi, vj = T.axis.remap("SS", [i_1, j_1])
                        C[vi_o * 16 + vi, vj_o * 16 + vj] = T.float32(0)
            for i_1, j_1, k_1 in T.grid(16, 16, 8):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i_1, j_1, k_1])
                    C[vi_o * 16 + vi, vj_o * 16 + vj] = C[vi_o * 16 + vi, vj_o * 16 + vj] \\
                        + A[vi_o * 16 + vi, vk_o * 8 + vk] * B[vk_o * 8 + vk, vj_o * 16 + vj]
''')
sch = sched.Schedule(tvm_printed)
i_0, j_0, k_0 = sch.get_loops(sch.get_block("C_o"))
sch.decompose_reduction(sch.get_block("C_o"), k_0)
show("TVM's blockized matmul, its init hoisted before k_0 (C_o_init holds C_init)", sch)
a, b = rng.standard_normal((32, 32), "float32"), rng.standard_normal((32, 32), "float32")
c = np.full((32, 32), np.nan, "float32")
sched.build(sch.func, target="c")(a, b, c)
np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
print("TVM-printed blockized reduction (C target) matches numpy")

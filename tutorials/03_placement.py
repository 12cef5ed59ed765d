"""Tutorial 3: placement: compute_at, reverse_compute_at, compute_inline, reverse_compute_inline.

A function of several stages starts as one loop nest per stage, each intermediate buffer written
in full before the next stage reads it. Placement moves a stage next to the one it feeds (or
feeds from): compute_at puts a producer under a loop of its consumer, reverse_compute_at puts a
consumer under a loop of its producer, and inlining computes a value where it is used. Each
move is checked; a refused one says which dependence it would break. A padding stage that stays
can be split into its zeros and a copy without a condition (decompose_padding). Run:
`python tutorials/03_placement.py`.
"""

import numpy as np

import sched
from sched import compute as te

rng = np.random.default_rng(0)


def show(title, sch):
    print(f"== {title} ==")
    print(sch.func.script())


# 1. compute_at: B = A * 2 feeds C = B + 1. Tile C by 8 x 8; 8 divides neither 30 nor 20, so
# the tiles at the edges are partial and C's block gets a guard (T.where).
A = te.placeholder((30, 20), "float32", name="A")
B = te.compute((30, 20), lambda i, j: A[i, j] * 2.0, name="B")
C = te.compute((30, 20), lambda y, x: B[y, x] + 1.0, name="C")   # its loops: y, x
two_stage = te.create_prim_func([A, C], name="two_stage")

sch = sched.Schedule(two_stage)
y, x = sch.get_loops(sch.get_block("C"))
y_0, x_0, y_1, x_1 = sch.tile(y, x, 8, 8)
show("C tiled 8 x 8 (the guard: 8 divides neither 30 nor 20)", sch)

# Compute B per tile of C: under x_0, B's new loops (ax0, ax1) cover the 8 x 8 box of B that
# the tile reads. At the edges the box leaves B's domain, so B gets the same kind of guard.
sch.compute_at(sch.get_block("B"), x_0)
show("compute_at(B, x_0): B computed per tile, guarded at the edges", sch)

# The lowering shrinks B to what one tile uses: an 8 x 8 array inside the tile loops.
kernel = sched.build(sch.func, target="c")
print("== the C: B is a 64-element array per tile ==")
print(kernel.source)
a = rng.standard_normal((30, 20)).astype("float32")
c = np.zeros_like(a)
kernel(a, c)
np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)
print("compute_at matches numpy")

# 2. reverse_compute_at: a matmul with an epilogue, D = relu(C + bias). Tile the matmul and
# move the epilogue under the tile loop: it then reads each tile of C right after it is done.
# (16 does not divide 40 either: the epilogue's new loops are guarded like the matmul's.)
M, N, K = 64, 40, 32
X = te.placeholder((M, K), "float32", name="X")
W = te.placeholder((K, N), "float32", name="W")
bias = te.placeholder((N,), "float32", name="bias")
dense = te.create_prim_func([X, W, bias, te.ops.matmul_bias_relu(X, W, bias)], name="dense")

sch = sched.Schedule(dense)
i, j, k = sch.get_loops(sch.get_block("C"))
i_0, j_0, i_1, j_1 = sch.tile(i, j, 16, 16)
sch.reverse_compute_at(sch.get_block("D"), j_0)
show("reverse_compute_at(D, j_0): the epilogue after each 16 x 16 tile of the matmul", sch)

x = rng.standard_normal((M, K)).astype("float32")
w = rng.standard_normal((K, N)).astype("float32")
b = rng.standard_normal(N).astype("float32")
d = np.zeros((M, N), "float32")
sched.build(sch.func, target="c")(x, w, b, d)
np.testing.assert_allclose(d, np.maximum(x @ w + b, 0), rtol=1e-4, atol=1e-4)
print("reverse_compute_at matches numpy")

# 3. compute_inline: an elementwise chain becomes one expression, and its buffers go.
P = te.placeholder((8, 4), "float32", name="P")
Q = te.compute((8, 4), lambda i, j: P[i, j] * 2.0, name="Q")
R = te.compute((8, 4), lambda i, j: Q[i, j] + 1.0, name="R")
S = te.compute((8, 4), lambda i, j: te.exp(R[i, j]) - 3.0, name="S")
chain = te.create_prim_func([P, S], name="chain")
sch = sched.Schedule(chain)
show("an elementwise chain: three blocks, two intermediate buffers", sch)
sch.compute_inline(sch.get_block("Q"))
sch.compute_inline(sch.get_block("R"))
show("compute_inline(Q), compute_inline(R): one block", sch)

p = rng.standard_normal((8, 4)).astype("float32")
s = np.zeros_like(p)
sched.build(sch.func, target="c")(p, s)
np.testing.assert_allclose(s, np.exp(p * 2 + 1) - 3, rtol=1e-5)
print("inlined chain matches numpy")

# The padding of a convolution is a stage of its own (conv2d_pad, a copy with zeros around
# it). Inlined, the convolution reads the data directly, under a T.if_then_else at the border.
data = te.placeholder((1, 3, 12, 12), "float32", name="data")
weight = te.placeholder((4, 3, 3, 3), "float32", name="weight")
conv = te.create_prim_func([data, weight, te.ops.conv2d_nchw(data, weight, padding=1)],
                           name="conv")
sch = sched.Schedule(conv)
show("conv2d with padding 1: a padding stage, then the convolution", sch)
sch.compute_inline(sch.get_block("conv2d_pad"))
show("compute_inline(conv2d_pad): no padded copy", sch)

dt = rng.standard_normal((1, 3, 12, 12)).astype("float32")
wt = rng.standard_normal((4, 3, 3, 3)).astype("float32")
out = np.zeros((1, 4, 12, 12), "float32")
sched.build(sch.func, target="c")(dt, wt, out)
padded = np.pad(dt, ((0, 0), (0, 0), (1, 1), (1, 1)))
expected = sum(np.einsum("nchw,kc->nkhw", padded[:, :, y:y + 12, x:x + 12], wt[:, :, y, x])
               for y in range(3) for x in range(3))
np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
print("conv2d with the padding inlined matches numpy")

# Or keep the padded copy and take the condition out of it: decompose_padding splits the
# padding stage into a block that fills the zeros (conv2d_pad_pad_const) and a copy of the
# inside only, over loops that isl shrinks to the 12 x 12 box where the condition holds.
sch = sched.Schedule(conv)
pad = sch.get_block("conv2d_pad")
sch.decompose_padding(pad, sch.get_loops(pad)[0])
show("decompose_padding(conv2d_pad, n): zeros first, then the copy without a condition", sch)
out = np.zeros((1, 4, 12, 12), "float32")
sched.build(sch.func, target="c")(dt, wt, out)
np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
print("conv2d with the padding decomposed matches numpy")

# 4. reverse_compute_inline: the other way round, a consumer folded into its producer. With
# bias_add and relu as two stages, relu goes into bias_add, which now writes the output. Inline
# before tiling: a consumer under a guard (T.where) is refused.
sch = sched.Schedule(te.create_prim_func(
    [X, W, bias, te.ops.relu(te.ops.bias_add(te.ops.matmul(X, W), bias))], name="dense2"))
sch.reverse_compute_inline(sch.get_block("relu"))
show("reverse_compute_inline(relu): bias_add stores max(C + bias, 0) into relu", sch)
d = np.zeros((M, N), "float32")
sched.build(sch.func, target="c")(x, w, b, d)
np.testing.assert_allclose(d, np.maximum(x @ w + b, 0), rtol=1e-4, atol=1e-4)
print("reverse_compute_inline matches numpy")

# 5. Softmax in one row loop. Four stages: the row maximum, exp(x - max), the row sum, the
# division. Each reads only its own row of the stage before, so all three consumers can go
# under the row loop of the first: the intermediates shrink to one row.
rows, cols = 16, 10
Xs = te.placeholder((rows, cols), "float32", name="X")
softmax = te.create_prim_func([Xs, te.ops.softmax(Xs)], name="softmax")
sch = sched.Schedule(softmax)
show("softmax: four loop nests", sch)

# A refused placement first: under the `k` loop of the maximum, exp would read the maximum of
# the row so far, not of the whole row. The error names the dependence and the legal loop.
max_i, max_k = sch.get_loops(sch.get_block("softmax_max"))
exp_block = sch.get_block("softmax_exp")
print("== reverse_compute_at(softmax_exp, k): refused ==")
try:
    sch.reverse_compute_at(exp_block, max_k)
except sched.ScheduleError as error:
    print(error)

# Under the row loop i instead, as the error suggests; the sum and the division follow.
sch.reverse_compute_at(exp_block, max_i)
for name in ("softmax_sum", "softmax"):
    sch.reverse_compute_at(sch.get_block(name), max_i)
show("softmax fused: every stage under the row loop i", sch)

kernel = sched.build(sch.func, target="c")
print("== the C: one row of each intermediate ==")
print(kernel.source)
xs = rng.standard_normal((rows, cols)).astype("float32")
ys = np.zeros_like(xs)
kernel(xs, ys)
e = np.exp(xs - xs.max(axis=1, keepdims=True))
np.testing.assert_allclose(ys, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
print("fused softmax matches numpy")
print(sch.trace)

"""Tutorial 2: loop primitives: split, fuse, reorder, tile, parallel, vectorize, unroll.

Each step prints the IR it makes. Run: `python tutorials/02_loop_primitives.py`.
"""

import numpy as np

import sched
from sched import compute as te

X = te.placeholder((100, 30), "float32", name="X")
Y = te.compute((100, 30), lambda i, j: X[i, j] * 2.0 + 1.0, name="Y")
func = te.create_prim_func([X, Y], name="scale")


def show(title, sch):
    print(f"== {title} ==")
    print(sch.func.script())


sch = sched.Schedule(func)
i, j = sch.get_loops(sch.get_block("Y"))

# split: one loop becomes two. 100 is not a multiple of 16, so the block gets a guard
# (T.where) instead of running past the end.
io, ii = sch.split(i, factors=[None, 16])
show("split i by 16 (a guard appears: 16 does not divide 100)", sch)

# reorder: loops of one nest in a new order (checked against the dependences).
sch.reorder(ii, io)
show("reorder to ii, io", sch)

# fuse: two nested loops become one over the product of their extents.
fused = sch.fuse(io, j)
show("fuse io and j", sch)

# parallel / vectorize / unroll: how a loop runs. Parallel and vectorize are checked: no
# dependence may be carried by the loop.
outer, inner = sch.split(fused, factors=[None, 8])
sch.parallel(ii)
sch.vectorize(inner)
show("parallel ii, vectorize the inner 8", sch)

kernel = sched.build(sch.func, target="c")
print("== the C the target compiles ==")
print(kernel.source)

x = np.random.default_rng(0).standard_normal((100, 30)).astype("float32")
y = np.zeros_like(x)
kernel(x, y)
np.testing.assert_allclose(y, x * 2 + 1, rtol=1e-6)
print("matches numpy")

# tile, Halide-style: split two loops and reorder them into a 2-D tile.
sch2 = sched.Schedule(func)
i, j = sch2.get_loops(sch2.get_block("Y"))
sch2.tile(i, j, 8, 8)
show("tile 8 x 8", sch2)
print(sch2.trace)

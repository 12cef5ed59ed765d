"""reverse_compute_at next to a nested block (as blockize makes) sizes the moved block in loop
variables, never in the nested block's outer iteration variables (fuzz finding F6: the moved
block was bound to `b0`, undefined where it went, and the model raised an isl syntax error)."""

import numpy as np

import sched

PREDICATED_OUTER_BLOCK = """
@T.prim_func
def main(A: T.Buffer((7,), "float32"), Y: T.Buffer((7,), "float32"),
         F: T.Buffer((7,), "float32")):
    for i, k in T.grid(3, 3):
        with T.block("o"):
            b0 = T.axis.spatial(7, i * 3 + k)
            T.where(i * 3 + k < 7)
            with T.block("main"):
                v0 = T.axis.spatial(7, b0)
                Y[v0] = A[v0] + T.float32(1)
    for x in range(7):
        with T.block("C"):
            a0 = T.axis.spatial(7, x)
            F[a0] = Y[a0] * T.float32(2)
"""


def test_reverse_compute_at_beside_a_nested_block_uses_loop_variables():
    func = sched.parse(PREDICATED_OUTER_BLOCK)
    sch = sched.Schedule(func)
    # get_loops of the nested block "main" is empty (as in TVM): the loops are the outer block's
    sch.reverse_compute_at(sch.get_block("C"), sch.get_loops(sch.get_block("o"))[0])
    script = sch.func.script()
    assert "a0 = T.axis.spatial(7, i * 3 + ax0)" in script
    assert "T.where(i * 3 + ax0 < 7)" in script
    a = np.arange(7, dtype="float32")
    outputs = {}
    for name, f, run in (("oracle", func, sched.interpret),
                         ("c", sch.func, sched.build(sch.func, target="c"))):
        y, out = np.zeros(7, "float32"), np.zeros(7, "float32")
        run(f, a, y, out) if name == "oracle" else run(a, y, out)
        outputs[name] = out
    np.testing.assert_array_equal(outputs["c"], outputs["oracle"])
    np.testing.assert_array_equal(outputs["c"], (a + 1) * 2)

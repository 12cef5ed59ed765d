"""cache_write of a block that may leave elements of its box unwritten (a store under a
condition) fills the cache from the buffer first, so the write-back copies those elements
back unchanged (found by the program fuzzer: the write-back copied uninitialised values)."""

import numpy as np

import sched

EVEN_ONLY = """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("T"):
            vi = T.axis.remap("S", [i])
            if vi % 2 == 0:
                B[vi] = A[vi] + T.float32(1)
"""

# the condition reads data: isl over-approximates it, so coverage cannot be proven either
DATA_DEPENDENT = """
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("T"):
            vi = T.axis.remap("S", [i])
            if A[vi] > T.float32(3):
                B[vi] = A[vi] * T.float32(2)
"""


def _check(text: str, scope: str) -> str:
    func = sched.parse(text)
    sch = sched.Schedule(func)
    sch.cache_write(sch.get_block("T"), 0, scope)
    a = np.arange(8, dtype="float32")
    expected, got = np.full(8, 7, "float32"), np.full(8, 7, "float32")
    sched.interpret(func, a, expected)
    sched.build(sch.func, target="c")(a, got)
    np.testing.assert_array_equal(got, expected)
    return sch.func.script()


def test_cache_write_of_a_conditional_store_fills_the_cache_first():
    for scope in ("global", "local"):
        assert f'with T.block("B_{scope}_fill")' in _check(EVEN_ONLY, scope)


def test_cache_write_of_a_data_dependent_store_fills_the_cache_first():
    assert 'with T.block("B_local_fill")' in _check(DATA_DEPENDENT, "local")


def test_cache_write_of_a_full_store_needs_no_fill():
    text = EVEN_ONLY.replace("            if vi % 2 == 0:\n", "").replace("        B[", "    B[")
    assert "_fill" not in _check(text, "local")

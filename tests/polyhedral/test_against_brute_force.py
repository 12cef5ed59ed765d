"""isl's dependences and legality answers equal brute force on hundreds of random programs."""

from __future__ import annotations

import islpy as isl
from hypothesis import event, given, settings
from hypothesis import strategies as st

from sched.ir.verify import verify
from sched.polyhedral import check_order, check_parallel, dependences
from tests.polyhedral import brute_force
from tests.polyhedral.random_programs import function, programs


def isl_dependence_tuples(func) -> set[tuple]:
    found = set()
    for dep in dependences(func):
        n_source = dep.relation.dim(isl.dim_type.in_)

        def add(point, dep=dep, n_source=n_source):
            values = [point.get_coordinate_val(isl.dim_type.set, d).to_python()
                      for d in range(dep.relation.dim(isl.dim_type.in_)
                                     + dep.relation.dim(isl.dim_type.out))]
            found.add((dep.kind, dep.buffer, dep.source.name, tuple(values[:n_source]),
                       dep.sink.name, tuple(values[n_source:])))
        dep.relation.wrap().foreach_point(add)
    return found


@settings(max_examples=150, deadline=None)
@given(nests=programs)
def test_dependences_equal_brute_force(nests):
    func = function(nests)
    verify(func)
    assert isl_dependence_tuples(func) == brute_force.dependences(brute_force.run(func))


@settings(max_examples=200, deadline=None)
@given(nests=programs, data=st.data())
def test_reordering_legality_equals_brute_force(nests, data):
    func = function(nests)
    per_nest = {}
    for i, (loops, _, _) in enumerate(nests):
        order = data.draw(st.permutations(range(len(loops))))
        reversed_loops = data.draw(st.sets(st.sampled_from(range(len(loops)))))
        per_nest[i] = {"order": list(order), "reversed_loops": tuple(reversed_loops)}
    nest_order = data.draw(st.permutations(range(len(nests))))
    new_func = function(nests, list(nest_order), per_nest)
    verify(new_func)
    expected = brute_force.order_is_legal(func, new_func)
    event("legal" if expected else "illegal")
    assert (check_order(func, new_func) is None) == expected


@settings(max_examples=200, deadline=None)
@given(nests=programs, data=st.data())
def test_parallel_legality_equals_brute_force(nests, data):
    func = function(nests)
    number = data.draw(st.integers(0, len(nests) - 1))
    loops, _, realize = nests[number]
    loop = data.draw(st.sampled_from(loops))
    expected = brute_force.loop_is_parallel(func, loop.name)
    event("parallel" if expected else "carries a dependence")
    assert (check_parallel(func, realize.block.name, loop.name) is None) == expected


ITEM_2 = """
@T.prim_func
def main(A: T.Buffer((4,), "float32"), C: T.Buffer((9,), "float32")):
    for i, k in T.grid(8, 4):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            C[vi + 1] = C[vi + 1] + C[vi] * A[vk]
"""


def test_brute_force_exempts_only_the_accumulator_chain():
    """The oracle's own semantics (issue 9, item 2): reordering a reduction is legal, unless
    its update also reads another element of its output."""
    import sched

    swap = ("for i, k in T.grid(8, 4):", "for k, i in T.grid(4, 8):")
    update = ("C[vi + 1] + C[vi] * A[vk]", "C[vi + 1] + A[vk]")
    reads_other = sched.parse(ITEM_2)
    assert not brute_force.order_is_legal(reads_other, sched.parse(ITEM_2.replace(*swap)))
    plain = ITEM_2.replace(*update)
    assert brute_force.order_is_legal(sched.parse(plain), sched.parse(plain.replace(*swap)))
    assert not brute_force.loop_is_parallel(sched.parse(plain), "k")

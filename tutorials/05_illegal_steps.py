"""Tutorial 5: when a step is illegal, sched says which dependence it would break.

Every primitive that changes the order asks isl (polyhedral/) whether all dependences are kept.
A refused step raises sched.ScheduleError and leaves the schedule unchanged. The message names
the dependence with a concrete pair of instances, marks the loop in the IR, and lists legal
alternatives where it can. Run: `python tutorials/05_illegal_steps.py`.
"""

import sched
from sched import compute as te
from sched.script import T


# A stencil that updates in place: each element reads its upper-right neighbour, computed in
# the previous row. Dependence distance (1, -1): the rows must stay in order.
@T.prim_func
def stencil(A: T.Buffer((10, 10), "float32")):
    for i, j in T.grid(9, 9):
        with T.block("S"):
            vi = T.axis.spatial((1, 10), i + 1)
            vj = T.axis.spatial(9, j)
            A[vi, vj] = A[vi - 1, vj + 1] + T.float32(1)


sch = sched.Schedule(stencil)
i, j = sch.get_loops(sch.get_block("S"))

print("== interchanging the loops would run a reader before its writer ==")
try:
    sch.reorder(j, i)
except sched.ScheduleError as error:
    print(error)

print("\n== the rows depend on each other: loop i cannot run in parallel ==")
try:
    sch.parallel(i)
except sched.ScheduleError as error:
    print(error)

print("\n== but within a row the columns are independent: parallel j is legal ==")
sch.parallel(j)
print(sch.func.script())

# A reduction: reordering its reduce loop is legal (the sum is associative), running it in
# parallel is not, unless rfactor splits it first.
A = te.placeholder((64, 48), name="A")
B = te.placeholder((48, 32), name="B")
sch = sched.Schedule(te.create_prim_func([A, B, te.ops.matmul(A, B)]))
i, j, k = sch.get_loops(sch.get_block("C"))
sch.reorder(k, i, j)
print("== the reduce loop k moved outermost: legal ==")
print(sch.func.script())
print("\n== k in parallel: refused ==")
try:
    sch.parallel(k)
except sched.ScheduleError as error:
    print(error)


# An opaque block calls C code (T.call_extern, its code given to sched.build(extern_c=...));
# what it reads and writes is only its declared regions, and only as a MAY: the loops around
# it can be split, reordered or made parallel where the regions prove it, but a step that needs
# to know what it certainly writes (compute_inline, cache_write) or that would change it is
# refused.
@T.prim_func
def scaled_rows(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8, 16), "float32")):
    for i in range(8):
        with T.block("E"):
            vi = T.axis.spatial(8, i)
            T.reads(A[vi, 0:16])
            T.writes(B[vi, 0:16])
            T.evaluate(T.call_extern("int32", "scale_row", T.address_of(A[vi, 0]),
                                     T.address_of(B[vi, 0]), 16))


sch = sched.Schedule(scaled_rows)
(i,) = sch.get_loops(sch.get_block("E"))
sch.parallel(i)            # each row's call touches its own row: legal
print("\n== an opaque block's loop made parallel (its regions are disjoint rows) ==")
print(sch.func.script())
print("\n== cache_write of the opaque block: refused ==")
try:
    sch.cache_write(sch.get_block("E"), 0, "local")
except sched.ScheduleError as error:
    print(str(error).splitlines()[0])

"""How long the polyhedral analysis takes: building the model and the dependences (uncached),
one order check (a loop reorder) and one parallel check, on matmul, conv2d NCHW and softmax.

Target (../shared/PERF.md): < 50 ms median per legality check on this machine's CPU.

    python benchmarks/legality.py      # writes benchmarks/results/<cpu>/legality.json
"""

from __future__ import annotations

import dataclasses
import sys

from rich.console import Console
from rich.table import Table

from sched import compute as te
from sched.ir import BlockRealize, For, IRMutator, SeqStmt, collect
from sched.polyhedral import check_order, check_parallel, dependences
from sched.polyhedral.dependences import _dependences

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
from benchmarks.common import cpu_name, measure, write_results  # noqa: E402


def matmul():
    A = te.placeholder((1024, 1024), name="A")
    B = te.placeholder((1024, 1024), name="B")
    return te.create_prim_func([A, B, te.ops.matmul(A, B)]), "C", ("i", "k")


def conv2d():
    data = te.placeholder((32, 256, 56, 56), name="data")
    weight = te.placeholder((256, 256, 3, 3), name="weight")
    out = te.ops.conv2d_nchw(data, weight, stride=1, padding=1)
    return te.create_prim_func([data, weight, out]), "conv2d", ("p", "rc")


def softmax():
    n = te.var("n")
    X = te.placeholder((n, 8192), name="X")
    return te.create_prim_func([X, te.ops.softmax(X)]), "softmax_exp", ("i_1", "j")


def swap_loops(func, block: str, first: str, second: str):
    """`func` with the loops named `first` and `second` around block `block` exchanged."""
    root_body = func.body.block.body
    nests = root_body.stmts if isinstance(root_body, SeqStmt) else (root_body,)
    nest = next(stmt for stmt in nests
                if any(r.block.name == block for r in collect(stmt, BlockRealize)))
    loops = {loop.loop_var.name: loop for loop in collect(nest, For)}
    partner = {first: loops[second], second: loops[first]}

    class Swap(IRMutator):
        def visit_For(self, loop: For):
            loop = self.visit_children(loop)
            other = partner.get(loop.loop_var.name)
            if other is None:
                return loop
            return dataclasses.replace(loop, loop_var=other.loop_var, min=other.min,
                                       extent=other.extent)

    class SwapInNest(IRMutator):
        def visit(self, node):
            return Swap().visit(node) if node is nest else super().visit(node)
    return SwapInNest().visit(func)


def main() -> None:
    device = cpu_name()
    rows = []
    for workload in (matmul, conv2d, softmax):
        func, block, (outer, inner) = workload()
        swapped = swap_loops(func, block, outer, inner)

        def analyse(func=func):
            _dependences.cache_clear()
            dependences(func)
        analysis = measure(analyse, repeats=10)
        dependences(func)
        order = measure(lambda f=func, s=swapped: check_order(f, s))
        parallel = measure(lambda f=func, b=block, o=outer: check_parallel(f, b, o))
        legal = check_order(func, swapped) is None
        rows.append({"workload": workload.__name__, "dependence_analysis": analysis,
                     "order_check": order, "order_check_legal": legal,
                     "parallel_check": parallel, "loops_swapped": [outer, inner]})
    path = write_results("legality", device, {
        "target_ms": 50, "unit": "seconds", "workloads": rows})
    table = Table(title=f"legality on {device}")
    for column in ("workload", "dependences (ms)", "order check (ms)", "parallel check (ms)"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["workload"], *(f"{row[k]['median_s'] * 1e3:.1f}" for k in
                                         ("dependence_analysis", "order_check",
                                          "parallel_check")))
    Console().print(table)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""How long the polyhedral analysis takes, on matmul, conv2d NCHW and softmax:

- dependences: building the model and the dependences of a function (uncached: every
  remembered analysis forgotten first, `sched.polyhedral.clear_caches`);
- order check: one `check_order` (a loop reorder) with the old function's dependences cached, as
  a schedule step after the first finds them, and uncached (the first step on a function, or a
  step on a function no step has seen: the analysis plus the check);
- parallel check: the one rule for concurrent loops (`check_parallel`), cached and uncached;
- conv2d only, a real `Schedule.reorder` step (the order check, the re-check of concurrent
  loops, the verifier), cached and uncached, with the share of the time of its parts.

Target (../shared/PERF.md and issue 9): < 50 ms median per legality check and per step on this
machine's CPU.

    python benchmarks/legality.py      # writes benchmarks/results/<cpu>/legality.json
"""

from __future__ import annotations

import dataclasses
import sys

from rich.console import Console
from rich.table import Table

import sched
from sched import compute as te
from sched.ir import BlockRealize, For, IRMutator, SeqStmt, collect
from sched.polyhedral import check_order, check_parallel, clear_caches, dependences

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


def _uncached(run):
    """`run` after forgetting every remembered analysis (models, dependences, parsed isl
    texts, pair relations: `sched.polyhedral.clear_caches`)."""
    def call():
        clear_caches()
        return run()
    return call


def reorder_step(func, block: str, outer: str, inner: str) -> dict:
    """A real reorder step (Schedule.reorder: order check, concurrent-loop re-check, verifier),
    cached and uncached, and where the uncached step spends its time."""
    import cProfile
    import pstats

    schedule = sched.Schedule(func)
    loops = {lp.name: lp for lp in schedule.get_loops(schedule.get_block(block))}

    def step():
        schedule.copy().reorder(loops[inner], loops[outer])
    cached = measure(step, repeats=10)
    uncached = measure(_uncached(step), repeats=5, warmup=1)
    profile = cProfile.Profile()
    profile.runcall(_uncached(step))
    stats = pstats.Stats(profile)
    parts = {"build_model": "model.py:build_model", "dependences": "dependences.py:_dependences",
             "check_new_order": "legality.py:check_new_order",
             "check_runs": "runs.py:check_runs",
             "concurrent_loops_recheck": "concurrency.py:check_concurrent_loops",
             "verify": "verify.py:verify"}
    shares = {}
    for name, suffix in parts.items():
        cumulative = sum(row[3] for (file, line, fn), row in stats.stats.items()
                         if f"{file.rsplit('/', 1)[-1]}:{fn}" == suffix)
        shares[name] = round(cumulative / stats.total_tt, 3) if stats.total_tt else 0.0
    return {"cached": cached, "uncached": uncached, "uncached_time_share": shares}


def main() -> None:
    device = cpu_name()
    rows = []
    for workload in (matmul, conv2d, softmax):
        func, block, (outer, inner) = workload()
        swapped = swap_loops(func, block, outer, inner)

        def analyse(func=func):
            clear_caches()
            dependences(func)
        analysis = measure(analyse, repeats=10)
        dependences(func)
        order = measure(lambda f=func, s=swapped: check_order(f, s))
        parallel = measure(lambda f=func, b=block, o=outer: check_parallel(f, b, o))
        order_uncached = measure(_uncached(lambda f=func, s=swapped: check_order(f, s)),
                                 repeats=10)
        parallel_uncached = measure(
            _uncached(lambda f=func, b=block, o=outer: check_parallel(f, b, o)), repeats=10)
        legal = check_order(func, swapped) is None
        row = {"workload": workload.__name__, "dependence_analysis": analysis,
               "order_check": order, "order_check_uncached": order_uncached,
               "order_check_legal": legal, "parallel_check": parallel,
               "parallel_check_uncached": parallel_uncached, "loops_swapped": [outer, inner]}
        if workload is conv2d:
            row["reorder_step"] = reorder_step(func, block, outer, inner)
        rows.append(row)
    path = write_results("legality", device, {
        "target_ms": 50, "unit": "seconds", "workloads": rows})
    table = Table(title=f"legality on {device} (median ms; uncached: every remembered analysis "
                        f"cleared first)")
    columns = {"dependences": "dependence_analysis", "order check": "order_check",
               "order check uncached": "order_check_uncached",
               "parallel check": "parallel_check",
               "parallel check uncached": "parallel_check_uncached"}
    table.add_column("workload")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(row["workload"], *(f"{row[k]['median_s'] * 1e3:.1f}"
                                         for k in columns.values()))
    Console().print(table)
    for row in rows:
        if "reorder_step" in row:
            step = row["reorder_step"]
            print(f"{row['workload']}: Schedule.reorder step {step['cached']['median_s'] * 1e3:.1f}"
                  f" ms cached, {step['uncached']['median_s'] * 1e3:.1f} ms uncached; share of "
                  f"the uncached step: {step['uncached_time_share']}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

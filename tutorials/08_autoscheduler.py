"""Tutorial 8: the autoscheduler. `sched.tune` writes the schedules you leave out: it samples
candidates from sketches (multi-level tiling, inlining, parallel + vectorize...), checks every
step for legality like any schedule, ranks them with cost models, measures the best in
isolated processes against the unscheduled function's numbers, and records every measurement
in a SQLite database that `sched.build(..., db=...)` reads.

Run: `python tutorials/08_autoscheduler.py` (about a minute on two cores).

A script that calls `sched.tune` keeps its top level under `if __name__ == "__main__":`: the
build processes import the main module, as with any Python multiprocessing pool.
"""

import pathlib
import tempfile

import numpy as np
from rich.console import Console

import sched
from sched import compute as te
from sched.autoscheduler.database import Database
from sched.autoscheduler.workload import Workload


def matmul_relu(n: int):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    C = te.ops.matmul(A, B)
    D = te.compute((n, n), lambda i, j: te.max(C[i, j], 0.0), name="D")
    return te.create_prim_func([A, B, D], name="matmul_relu")


def main():
    console = Console()
    func = matmul_relu(128)
    print(func.script())
    db = pathlib.Path(tempfile.mkdtemp()) / "tune.db"

    # 1. Tune: 24 measured candidates, in rounds of 8. Every candidate is checked against the
    #    unscheduled function's outputs before its time counts.
    result = sched.tune(func, target="c", trials=24, db=db, seed=0, per_round=8,
                        console=console)
    console.print(result.table())
    print("sketches tried:", result.sketches)
    print("the best schedule's steps (a trace that replays on the function):")
    print(result.trace)
    print(result.schedule.func.script())
    print(f"best {result.best_seconds * 1e3:.3f} ms in the search, "
          f"{result.retimed_seconds * 1e3:.3f} ms re-timed in a fresh process, "
          f"unscheduled {result.baseline_seconds * 1e3:.3f} ms")
    print("cost models' Spearman rank correlation with measured speed:", result.correlations)

    # 2. Read the database: every record, errors included, with its trace and decisions.
    with Database(db) as database:
        records = database.records(Workload.of(func))
        print(f"{len(records)} records; the five best:")
        for record in database.best(Workload.of(func), k=5):
            print(f"  {record.median * 1e3:8.3f} ms  {record.decisions[:70]}...")
        print(database.workloads())

    # 3. Build from the database: the best record's schedule, replayed (and so checked).
    kernel = sched.build(func, target="c", db=db)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((128, 128)).astype(np.float32) for _ in range(2))
    d = np.zeros((128, 128), np.float32)
    kernel(a, b, d)
    np.testing.assert_allclose(d, np.maximum(a.astype(np.float64) @ b, 0), rtol=1e-4,
                               atol=1e-4)
    print("the kernel built from the database matches numpy")

    # 4. Your steps are kept: schedule some blocks yourself, tune fills in the others. Here
    #    the ReLU is computed under the matmul's rows by hand; the search tiles the matmul.
    sch = sched.Schedule(matmul_relu(64))
    i, _ = sch.get_loops(sch.get_block("D"))
    sch.parallel(i)
    mine = sched.tune(sch, target="c", trials=8, seed=0, per_round=8, progress=False)
    print("with the user's step first:")
    print(mine.trace)

    # 5. No GPU schedule written? sched.build picks one with the cost model alone (no
    #    measurement); NVRTC compiles it without a GPU.
    try:
        gpu = sched.build(matmul_relu(128), target="cuda", arch="sm_90")
        print(gpu.source[gpu.source.index("extern"):][:400])
    except sched.BuildError as error:        # no NVRTC on this machine
        print("CUDA build skipped:", str(error).splitlines()[0])


if __name__ == "__main__":
    main()

"""How well the cost models rank real C-target times: random schedules of a fp32 matmul (split
factors, loop order, parallel outer loop, vectorized or unrolled inner loops), each built and
timed, against the memory-movement model's scores (Spearman rank correlation), and the learned
model's, cross-validated (trained on the other folds); then the register tiles of
hand_schedules.cpu_matmul at 512^3 (the family a tuner explores most) against the analytical
model; then 24 candidates drawn from the tuner's own search space (sched.autoscheduler.space)
at 512^3. Also the time each model's `predict` takes per candidate on a 256^3 matmul (CPU and
GPU schedules).

    python benchmarks/cost_model_rank.py [count] [size] [seed]
    # writes benchmarks/results/<cpu>/cost_model_rank.json
    python benchmarks/cost_model_rank.py --rescore [seed]
    # the same candidates (same seed), the times from that JSON, the models' scores again

The machine this ran on had other jobs on its two cores: times are noisy (up to 2x).
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from benchmarks.common import RESULTS, cpu_name, measure, slug, write_results  # noqa: E402


def matmul(n: int):
    from sched import compute as te

    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def random_schedule(func, rng):
    """A random legal schedule of the matmul, and its description; None if a step refused."""
    import sched
    from sched.errors import ScheduleError

    sch = sched.Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("C"))
    factors = {name: int(2 ** rng.integers(0, 7)) for name in "ijk"}
    loop_names = ["io", "ii", "jo", "ji", "ko", "ki"]
    loops = {}
    for name, loop in zip("ijk", (i, j, k)):
        outer, inner = sch.split(loop, [None, factors[name]])
        loops[name + "o"], loops[name + "i"] = outer, inner
    order = [loop_names[p] for p in rng.permutation(6)]
    steps = {"factors": factors, "order": order}
    try:
        sch.reorder(*(loops[name] for name in order))
        if order[0] in ("io", "jo") and rng.random() < 0.6:
            sch.parallel(loops[order[0]])
            steps["parallel"] = order[0]
        inner = order[-1]
        choice = rng.random()
        if inner in ("ii", "ji") and choice < 0.5:
            sch.vectorize(loops[inner])
            steps["vectorize"] = inner
        elif choice < 0.8 and factors[inner[0]] <= 16:
            sch.unroll(loops[inner])
            steps["unroll"] = inner
    except ScheduleError:
        return None
    return sch.func, steps


def time_kernel(func, n: int) -> float:
    import sched

    kernel = sched.build(func, target="c")
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    c = np.zeros((n, n), np.float32)
    kernel(a, b, c)
    if not np.allclose(c, a @ b, rtol=1e-3, atol=1e-3):
        raise AssertionError("a random schedule computed a wrong matmul")
    return measure(lambda: kernel(a, b, c), repeats=5, warmup=1)["median_s"]


def predict_seconds(model, workload, funcs, rounds: int = 3) -> float:
    """Seconds per candidate of `model.predict`, best of `rounds` (caches cold for each
    new function: the candidates are rebuilt)."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        model.predict(workload, funcs)
        best = min(best, (time.perf_counter() - start) / len(funcs))
    return best


def cross_validated(workload, funcs, seconds, folds: int = 4, seed: int = 0) -> list[float]:
    from sched.autoscheduler.cost import LearnedModel
    from sched.autoscheduler.measure.common import MeasureResult

    order = np.random.default_rng(seed).permutation(len(funcs))
    predictions = np.zeros(len(funcs))
    for fold in range(folds):
        held = order[fold::folds]
        model = LearnedModel(seed=seed, min_records=4)
        train = [i for i in order if i not in set(held)]
        model.update(workload, [funcs[i] for i in train],
                     [MeasureResult(seconds=(seconds[i],)) for i in train])
        predictions[held] = model.predict(workload, [funcs[i] for i in held])
    return list(predictions)


def main(count: int = 20, n: int = 256, seed: int = 0, rescore: bool = False) -> None:
    from sched import hand_schedules
    from sched.autoscheduler.cost import LearnedModel, MemoryMovementModel, spearman
    from sched.autoscheduler.measure.common import MeasureResult
    from sched.autoscheduler.workload import Workload

    previous = None
    if rescore:
        previous = json.loads((RESULTS / slug(cpu_name()) / f"{_name(seed)}.json").read_text())
        count, n, seed = previous["candidates"], previous["size"], previous.get("seed", 0)
    func = matmul(n)
    workload = Workload.of(func)
    rng = np.random.default_rng(seed)
    candidates = [(func, {"naive": True}),
                  (hand_schedules.cpu_matmul(n, n, n).func, {"hand": "cpu_matmul"})]
    while len(candidates) < count:
        found = random_schedule(func, rng)
        if found is not None:
            candidates.append(found)
    funcs = [f for f, _ in candidates]
    seconds = []
    if previous is not None:
        seconds = [row["measured_s"] for row in previous["rows"]]
    for index, f in enumerate(funcs[len(seconds):]):
        seconds.append(time_kernel(f, n))
        print(f"{index:3d} {seconds[-1] * 1e3:9.3f} ms  {candidates[index][1]}", flush=True)
    analytical = MemoryMovementModel("c")
    estimates = [analytical.estimate(workload, f)["seconds"] for f in funcs]
    speeds = [1 / s for s in seconds]
    rho = spearman([1 / e for e in estimates], speeds)
    learned_rho = spearman(cross_validated(workload, funcs, seconds), speeds)
    print(f"Spearman, memory-movement model vs measured speed: {rho:.3f}")
    print(f"Spearman, learned model (4-fold cross-validated): {learned_rho:.3f}")

    # predict cost per candidate, 256^3: the CPU hand schedule and the random ones; GPU
    timing_funcs = [hand_schedules.cpu_matmul(256, 256, 256).func for _ in range(5)]
    small = Workload.of(matmul(256))
    learned = LearnedModel(seed=0, min_records=4)
    learned.update(workload, funcs, [MeasureResult(seconds=(s,)) for s in seconds])
    gpu_funcs = [hand_schedules.gpu_matmul(256, 256, 256).func for _ in range(5)]
    gpu_workload = Workload.of(matmul(256), target="cuda")
    predict = {
        "memory_movement_cpu_matmul_s": predict_seconds(analytical, small, timing_funcs),
        "learned_cpu_matmul_s": predict_seconds(learned, small, timing_funcs),
        "memory_movement_gpu_matmul_s": predict_seconds(MemoryMovementModel("cuda"),
                                                        gpu_workload, gpu_funcs),
    }
    print({k: f"{v * 1e3:.2f} ms" for k, v in predict.items()})
    tiles = register_tiles(analytical, None if previous is None else previous.get("tiles"))
    sketches = sketch_samples(analytical, None if previous is None else previous.get("sketches"))
    rows = [{"steps": steps, "measured_s": s, "estimated_s": e}
            for (_, steps), s, e in zip(candidates, seconds, estimates)]
    path = write_results(_name(seed), cpu_name(), {
        "size": n, "seed": seed, "candidates": len(funcs), "spearman_memory_movement": rho,
        "spearman_learned_cross_validated": learned_rho, "predict_seconds_per_candidate":
        predict, "machine": repr(analytical.machine), "tiles": tiles, "sketches": sketches,
        "rows": rows})
    print(f"wrote {path}")


def register_tiles(model, previous: dict | None, n: int = 512) -> dict:
    """The family the tuner explores most: hand_schedules.cpu_matmul's register tile (rows x
    columns of C kept in registers), 16 sizes at n^3, timed (or the times of `previous`)."""
    from sched import hand_schedules
    from sched.autoscheduler.cost import spearman
    from sched.autoscheduler.workload import Workload

    n = previous["size"] if previous else n
    old = {(r["row_tile"], r["col_tile"]): r["measured_s"] for r in previous["rows"]} \
        if previous else {}
    rows = []
    for row_tile in (1, 2, 4, 8):
        for col_tile in (8, 16, 32, 64):
            sch = hand_schedules.cpu_matmul(n, n, n, row_tile=row_tile, col_tile=col_tile)
            measured = old.get((row_tile, col_tile)) or time_kernel(sch.func, n)
            estimated = model.estimate(Workload.of(sch.original_func), sch.func)["seconds"]
            rows.append({"row_tile": row_tile, "col_tile": col_tile, "measured_s": measured,
                         "estimated_s": estimated})
    rho = spearman([-r["estimated_s"] for r in rows], [-r["measured_s"] for r in rows])
    print(f"Spearman over cpu_matmul's register tiles at {n}^3: {rho:.3f}")
    return {"size": n, "spearman_memory_movement": rho, "rows": rows}


def sketch_samples(model, previous: dict | None, n: int = 512, count: int = 24) -> dict:
    """Candidates as the tuner draws them (sched.autoscheduler.space: the CPU multi-level
    tiling sketches, random decisions), timed (or the times of `previous`), against the
    analytical model."""
    import ast
    import random

    from sched.autoscheduler.cost import spearman
    from sched.autoscheduler.space.sampler import SketchRefused
    from sched.autoscheduler.space.sketch import SearchSpace, func_hash
    from sched.autoscheduler.workload import Workload
    from sched.errors import ScheduleError

    n = previous["size"] if previous else n
    workload = Workload.of(matmul(n))
    space = SearchSpace(workload)
    drawn = []
    if previous:
        drawn = [(space.sample(r["sketch"], ast.literal_eval(r["genome"]),
                               random.Random(0)).schedule.func, r["sketch"], r["genome"],
                  r["measured_s"]) for r in previous["rows"]]
    rng, seen = random.Random(1), set()
    while len(drawn) < count:
        sketch = rng.randrange(len(space.sketches))
        try:
            sample = space.sample(sketch, None, rng)
        except (SketchRefused, ScheduleError):
            continue
        if func_hash(sample.schedule.func) not in seen:
            seen.add(func_hash(sample.schedule.func))
            drawn.append((sample.schedule.func, sketch, str(sample.genome),
                          time_kernel(sample.schedule.func, n)))
    rows = [{"sketch": sketch, "genome": genome, "measured_s": measured,
             "estimated_s": model.estimate(workload, func)["seconds"]}
            for func, sketch, genome, measured in drawn]
    rho = spearman([-r["estimated_s"] for r in rows], [-r["measured_s"] for r in rows])
    print(f"Spearman over {len(rows)} sketch samples at {n}^3: {rho:.3f}")
    return {"size": n, "sketches": [s.name for s in space.sketches],
            "spearman_memory_movement": rho, "rows": rows}


def _name(seed: int) -> str:
    return "cost_model_rank" if seed == 0 else f"cost_model_rank_seed{seed}"


if __name__ == "__main__":
    if "--rescore" in sys.argv:
        main(seed=int(sys.argv[2]) if len(sys.argv) > 2 else 0, rescore=True)
    else:
        main(*(int(a) for a in sys.argv[1:4]))

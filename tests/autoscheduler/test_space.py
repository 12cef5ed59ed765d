"""Sketch rules and the search: every candidate they make is legal and computes what the
unscheduled function computes (numpy is the oracle), on the C target; GPU candidates too
(their thread blocks run as loops on the C target), and they compile for CUDA with NVRTC."""

import random
import re

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.autoscheduler.search import EvolutionarySearch, _mutate
from sched.autoscheduler.space.sketch import SearchSpace
from sched.autoscheduler.workload import Workload


def _matmul(m=16, n=12, k=8):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    return te.create_prim_func([A, B, te.ops.matmul(A, B)], name="matmul")


def _matmul_bias_relu():
    A = te.placeholder((16, 8), name="A")
    B = te.placeholder((8, 12), name="B")
    bias = te.placeholder((12,), name="bias")
    return te.create_prim_func([A, B, bias, te.ops.matmul_bias_relu(A, B, bias)], name="mbr")


def _conv2d():
    D = te.placeholder((1, 4, 8, 8), name="D")
    W = te.placeholder((8, 4, 3, 3), name="W")
    return te.create_prim_func([D, W, te.ops.conv2d_nchw(D, W, stride=1, padding=1)],
                               name="conv")


def _softmax(rows=8, cols=48):
    X = te.placeholder((rows, cols), name="X")
    return te.create_prim_func([X, te.ops.softmax(X)], name="softmax")


def _numpy(name, arrays):
    if name == "matmul":
        return arrays[0].astype(np.float64) @ arrays[1]
    if name == "mbr":
        return np.maximum(arrays[0].astype(np.float64) @ arrays[1] + arrays[2], 0)
    if name == "conv":
        d, w = arrays[0].astype(np.float64), arrays[1].astype(np.float64)
        padded = np.pad(d, ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((1, 8, 8, 8))
        for r in range(3):
            for s in range(3):
                out += np.einsum("nchw,kc->nkhw", padded[:, :, r:r + 8, s:s + 8], w[:, :, r, s])
        return out
    x = arrays[0].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


CASES = {"matmul": _matmul, "mbr": _matmul_bias_relu, "conv": _conv2d, "softmax": _softmax}


# GPU conv2d is left out: its samples take minutes of legality checks (staging the padded
# input under three reduction loops), too slow for the suite
@pytest.mark.parametrize("name, target", [(name, target) for name in sorted(CASES)
                                          for target in ("c", "cuda")
                                          if (name, target) != ("conv", "cuda")])
def test_every_sketch_sample_matches_numpy(name, target):
    func = CASES[name]()
    workload = Workload(func, target)
    space = SearchSpace(workload)
    assert space.sketches, "no sketch applies"
    rng = random.Random(0)
    arrays = workload.arrays(1)
    expected = _numpy(name, arrays)
    built = 0
    for attempt in range(8):
        try:
            sample = space.sample(attempt % len(space.sketches), None, rng)
        except sched.ScheduleError:
            continue                       # a refused genome is dropped, never built
        got = [a.copy() for a in arrays]
        sched.build(sample.schedule.func, target="c")(*got)
        np.testing.assert_allclose(got[-1], expected, rtol=1e-4, atol=1e-4)
        built += 1
        if built == 3:
            break
    assert built >= 2


def _layer_norm(rows=6, cols=40):
    X = te.placeholder((rows, cols), name="X")
    g, b = te.placeholder((cols,), name="g"), te.placeholder((cols,), name="b")
    return te.create_prim_func([X, g, b, te.ops.layer_norm(X, g, b)], name="layer_norm")


def _row_max_minus(rows=5, cols=70):
    """O[b, s, h] = A[b, s, h] - max_h A[b, s, h]: rows over two axes."""
    A = te.placeholder((3, rows, cols), name="A")
    h = te.reduce_axis((0, cols), name="h")
    M = te.compute((3, rows), lambda x, y: te.max(A[x, y, h], axis=h), name="M")
    return te.create_prim_func([A, te.compute((3, rows, cols), lambda x, y, z: A[x, y, z]
                                              - M[x, y], name="O")], name="row_max_minus")


def _column_max_minus():
    """The reduction runs down the columns: the anchor's row loop cannot take it."""
    X = te.placeholder((40, 6), name="X")
    k = te.reduce_axis((0, 40), name="k")
    M = te.compute((6,), lambda j: te.max(X[k, j], axis=k), name="M")
    return te.create_prim_func([X, te.compute((40, 6), lambda i, j: X[i, j] - M[j], name="O")],
                               name="column_max_minus")


def _row_sums():
    """Sums over two axes, written to the output: a reduction no block consumes."""
    A = te.placeholder((6, 8, 9), name="A")
    k, m = te.reduce_axis((0, 8), name="k"), te.reduce_axis((0, 9), name="m")
    return te.create_prim_func([A, te.compute((6,), lambda i: te.sum(A[i, k, m], axis=[k, m]),
                                              name="B")], name="row_sums")


def _max_and_minus():
    """The row max is an output as well as read by the anchor."""
    X = te.placeholder((6, 50), name="X")
    k = te.reduce_axis((0, 50), name="k")
    M = te.compute((6,), lambda i: te.max(X[i, k], axis=k), name="M")
    return te.create_prim_func([X, M, te.compute((6, 50), lambda i, j: X[i, j] - M[i],
                                                 name="O")], name="max_and_minus")


def _sum_read_after_the_anchor():
    """T reads the row sums after A, outside A's rows: the sums outlive A's kernel."""
    X = te.placeholder((6, 64), name="X")
    k = te.reduce_axis((0, 64), name="k")
    S = te.compute((6,), lambda i: te.sum(X[i, k], axis=k), name="S")
    A = te.compute((6, 64), lambda i, j: X[i, j] - S[i], name="A")
    return te.create_prim_func([X, A, te.compute((6,), lambda i: S[i] * 2.0, name="T")],
                               name="sum_read_after_the_anchor")


def _decomposed_sum():
    """The row sum written as TVM's decomposed form: an init block, an update block."""
    return sched.parse("""
@T.prim_func
def decomposed(X: T.Buffer((5, 48), "float32"), O: T.Buffer((5, 48), "float32")):
    S = T.alloc_buffer((5,), "float32")
    for i in range(5):
        with T.block("S_init"):
            vi = T.axis.spatial(5, i)
            S[vi] = T.float32(0)
    for i, k in T.grid(5, 48):
        with T.block("S_update"):
            vi, vk = T.axis.remap("SR", [i, k])
            S[vi] = S[vi] + X[vi, vk]
    for i, j in T.grid(5, 48):
        with T.block("O"):
            vi, vj = T.axis.remap("SS", [i, j])
            O[vi, vj] = X[vi, vj] - S[vi]
""")


def _rms_norm_then_matmul():
    """RMSNorm's scaling (it reads the row sums) feeding a matmul: inlined into the tile it
    made every sketch's staging refused, and every stage ran serially on one thread."""
    X, W = te.placeholder((8, 48), name="X"), te.placeholder((48, 24), name="W")
    k = te.reduce_axis((0, 48), name="k")
    S = te.compute((8,), lambda i: te.sum(X[i, k] * X[i, k], axis=k), name="S")
    N = te.compute((8, 48), lambda i, j: X[i, j] * te.rsqrt(S[i] / 48.0 + 1e-6), name="Nx")
    return te.create_prim_func([X, W, te.ops.matmul(N, W)], name="rms_norm_then_matmul")


def _matmul_softmax():
    A, B = te.placeholder((8, 16), name="A"), te.placeholder((16, 40), name="B")
    return te.create_prim_func([A, B, te.ops.softmax(te.ops.matmul(A, B))], name="attention")


@pytest.mark.parametrize("make, sketch, kernels", [
    (_softmax, "inline(softmax_exp) row_anchor(softmax) row_reduce(softmax_sum@softmax) "
               "row_reduce(softmax_max@softmax)", 1),
    (_layer_norm, "row_anchor(layer_norm) row_reduce(layer_norm_sqsum@layer_norm) "
                  "row_reduce(layer_norm_sum@layer_norm)", 1),
    (_row_max_minus, "row_anchor(O) row_reduce(M@O)", 1),
    (_row_sums, "row_reduce(B)", 1),
    (_column_max_minus, "row_anchor(O) row_reduce(M@O)", 2),
    # an output's reduction keeps a kernel of its own (its result would cross threads
    # through global memory under the anchor's rows)
    (_max_and_minus, "threads(O) row_reduce(M)", 2),
    # the matmul's tile leaves the anchor out of its fused epilogues
    (_matmul_softmax, "inline(softmax_exp) tile_gpu(C) row_anchor(softmax) "
                      "row_reduce(softmax_sum@softmax) row_reduce(softmax_max@softmax)", 2),
    # a reduction read outside the anchor's rows, or initialised by a block of its own,
    # keeps a kernel of its own (audit, helper-24: every sample was refused, or none built)
    (_sum_read_after_the_anchor, "threads(T) threads(A) row_reduce(S)", None),
    (_decomposed_sum, "threads(O) row_reduce(S_update) threads(S_init)", None),
    # (beside a sketch that inlines the normalization into the matmul's operand fetch)
    (_rms_norm_then_matmul, "tile_gpu(C) row_anchor(Nx) row_reduce(S@Nx)", 2),
    # rows shorter than a warp: one warp per row, some threads idle
    (lambda: _softmax(9, 7), "inline(softmax_exp) row_anchor(softmax) "
                             "row_reduce(softmax_sum@softmax) row_reduce(softmax_max@softmax)", 1),
])
def test_gpu_row_reductions_sketch_reduces_each_row_across_one_blocks_threads(make, sketch,
                                                                              kernels):
    func = make()
    workload = Workload(func, "cuda")
    space = SearchSpace(workload)
    names = [s.name for s in space.sketches]
    assert sketch in names, names
    arrays = workload.arrays(2)
    expected = [a.copy() for a in arrays]
    sched.build(func, target="c")(*expected)
    out = workload.outputs[-1]
    rng = random.Random(0)
    for _ in range(3):
        sample = space.sample(names.index(sketch), None, rng)
        text = sample.schedule.func.script()
        assert 'thread="blockIdx.x"' in text and 'thread="threadIdx.x"' in text
        for target in ("c", "cuda-emu"):
            got = [a.copy() for a in arrays]
            sched.build(sample.schedule.func, target=target)(*got)
            np.testing.assert_allclose(got[out], expected[out], rtol=1e-5, atol=1e-5)
    kernel = sched.build(sample.schedule.func, target="cuda", arch="sm_90")
    assert kernels is None or kernel.source.count("__global__") == kernels
    assert "__shfl_down_sync" in kernel.source       # the rows reduced across threads
    if kernels == 1 and make is not _row_sums:
        # the per-row results every thread reads live in shared memory
        assert 'scope="shared"' in text


@pytest.mark.parametrize("target", ["c", "cuda"])
def test_a_row_max_with_a_nan_is_nan_in_every_schedule(target):
    # rfactor'd vector partials, cross-thread shuffles and the plain loop reduce in other
    # orders: with a NaN dropped or kept by the order, each gave another number
    X = te.placeholder((4, 64), name="X")
    k = te.reduce_axis((0, 64), name="k")
    func = te.create_prim_func([X, te.compute((4,), lambda i: te.max(X[i, k], axis=k),
                                              name="M")], name="row_max")
    x = np.zeros((4, 64), np.float32)
    x[0, 5], x[0, 40], x[0, 50] = 9.0, np.nan, 2.0
    x[1, 63] = np.nan
    x[2, 0] = np.nan
    x[3, 7] = 3.0
    expected = x.max(axis=1)
    space = SearchSpace(Workload(func, target))
    runs = [("unscheduled", func, "c")]
    for index, sketch in enumerate(space.sketches):
        for seed in range(3):
            sample = space.sample(index, None, random.Random(seed))
            runs += [(sketch.name, sample.schedule.func, run_on)
                     for run_on in (("c", "cuda-emu") if target == "cuda" else ("c",))]
    for name, scheduled, run_on in runs:
        got = np.zeros(4, np.float32)
        sched.build(scheduled, target=run_on)(x, got)
        np.testing.assert_array_equal(got, expected, err_msg=f"{name} on {run_on}")


def test_cpu_matmul_then_softmax_has_sketches_that_run():
    # the division was taken for the matmul's epilogue (it reads the row sums too) and the
    # row reductions' vector partials divide no row of 40: no sketch applied, and sched.tune
    # stopped with "no schedule sketch applies" (audit, helper-24)
    func = _matmul_softmax()
    workload = Workload(func, "c")
    space = SearchSpace(workload)
    assert space.sketches
    assert not any("+softmax" in s.name for s in space.sketches)
    # (row reductions get vector partials, "+rf", where the host's lanes divide 40: with
    # AVX2's 8, not with AVX-512's 16)
    from sched.c.isa import host_isa

    has_rf = any("+rf" in s.name for s in space.sketches)
    assert has_rf == (40 % host_isa().lanes("float32") == 0)
    arrays = workload.arrays(3)
    a, b = arrays[0].astype(np.float64), arrays[1].astype(np.float64)
    logits = a @ b
    expected = np.exp(logits - logits.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    sample = space.sample(0, None, random.Random(0))
    got = [x.copy() for x in arrays]
    sched.build(sample.schedule.func, target="c")(*got)
    np.testing.assert_allclose(got[-1], expected, rtol=1e-4, atol=1e-5)


def test_gpu_row_threads_are_no_more_than_the_shortest_row():
    space = SearchSpace(Workload(_softmax(8, 100), "cuda"))
    seen = set()
    for seed in range(12):
        sample = space.sample(0, None, random.Random(seed))
        source = sched.build(sample.schedule.func, target="cuda", arch="sm_90").source
        seen.add(int(re.search(r"block \((\d+), 1, 1\)", source).group(1)))
    assert seen == {32, 64}          # 100 columns: 128 threads would leave some without one


def test_cpu_matmul_sketch_has_the_ssrsrs_structure():
    space = SearchSpace(Workload(_matmul(64, 64, 64), "c"))
    names = [s.name for s in space.sketches]
    assert "tile_cpu(C+local)" in names and "tile_cpu(C)" in names
    sample = space.sample(names.index("tile_cpu(C+local)"), None, random.Random(3))
    text = sample.schedule.func.script()
    assert "T.parallel(" in text and "T.vectorized(" in text
    assert 'scope="local"' in text and 'T.block("C_init")' in text
    trace = str(sample.schedule.trace)
    assert trace.count("sample_perfect_tile") == 3        # i, j in 4 levels, k in 2


def test_cpu_matmul_sketch_packs_b_in_a_contiguous_panel_outside_the_reduction():
    func = _matmul(48, 64, 32)
    space = SearchSpace(Workload(func, "c"))
    names = [s.name for s in space.sketches]
    assert "tile_cpu(C+local+pack(B))" in names and "tile_cpu(C+pack(B))" in names
    sketch = names.index("tile_cpu(C+local+pack(B))")
    for seed in range(4):
        sample = space.sample(sketch, None, random.Random(seed))
        text = sample.schedule.func.script()
        assert 'T.block("B_global")' in text and "B_global[v_k, v_j]" in text
        # the copy is placed before the reduction loop, not inside it
        assert text.index('T.block("B_global")') < text.index("for k_0")
        arrays = [np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
                  for shape in ((48, 32), (32, 64))]
        out = np.zeros((48, 64), np.float32)
        sched.build(sample.schedule.func, target="c")(*arrays, out)
        np.testing.assert_allclose(out, arrays[0].astype(np.float64) @ arrays[1], rtol=1e-4,
                                   atol=1e-4)


def test_gpu_matmul_sketch_stages_both_inputs_in_shared_memory_and_compiles():
    space = SearchSpace(Workload(_matmul(32, 32, 32), "cuda"))
    sample = space.sample(0, None, random.Random(1))
    text = sample.schedule.func.script()
    assert text.count('scope="shared"') == 2 and 'scope="local"' in text
    assert 'thread="blockIdx.x"' in text and 'thread="threadIdx.x"' in text
    kernel = sched.build(sample.schedule.func, target="cuda", arch="sm_90")
    assert "__shared__" in kernel.source


def _with_stages(space, sample, stages: int):
    """`sample` again with the GPU tile's last decision (its pipeline stages) set."""
    from sched.autoscheduler.space.tiling_gpu import PIPELINE_STAGES

    assert sample.kinds[-1] == f"choice:{len(PIPELINE_STAGES)}"
    genome = (*sample.genome[:-1], PIPELINE_STAGES.index(stages))
    return space.sample(sample.sketch, genome, random.Random(0))


@pytest.mark.parametrize("arch, asynchronous", [("sm_80", True), ("sm_75", False)])
def test_gpu_tile_pipelines_its_reduction_loop_over_the_sampled_stages(arch, asynchronous):
    workload = Workload(_matmul(32, 24, 64), "cuda", arch)
    space = SearchSpace(workload)
    arrays = workload.arrays(4)
    expected = arrays[0].astype(np.float64) @ arrays[1]
    seen = 0
    for seed in range(6):
        plain = space.sample(0, None, random.Random(seed))
        if _reduce_loops(plain)[0][1] < 3:
            continue            # a K step of the whole K: nothing to pipeline
        seen += 1
        if seen > 2:
            break               # two tilings are enough (the suite's time)
        for stages in (1, 2, 3):
            sample = _with_stages(space, plain, stages)
            text = sample.schedule.func.script()
            if stages == 1:
                assert "software_pipeline" not in text
                continue
            # the two fetches (A, B) in stage 0, the multiply `stages - 1` iterations behind
            assert f'"software_pipeline_stage": [0, 0, {stages - 1}]' in text
            assert ('"software_pipeline_async_stages": [0]' in text) == asynchronous
            for target in ("c", "cuda-emu"):
                got = [a.copy() for a in arrays]
                sched.build(sample.schedule.func, target=target)(*got)
                np.testing.assert_allclose(got[2], expected, rtol=1e-5, atol=1e-5)
            source = sched.build(sample.schedule.func, target="cuda", arch=arch).source
            assert ("cp.async" in source) == asynchronous
    assert seen


def _reduce_loops(sample):
    """(name, extent) of the outer K loops (around the shared-memory fetches)."""
    text = sample.schedule.func.script()
    return [(name, int(extent))
            for name, extent in re.findall(r"for (k_0\w*) in (?:range|T\.serial)\((\d+)", text)]


def test_gpu_tile_leaves_a_reduction_loop_of_fewer_iterations_than_stages_unpipelined():
    # K = 16 in steps of 8 (two iterations): three stages would never fill
    space = SearchSpace(Workload(_matmul(32, 32, 16), "cuda", "sm_80"))
    for seed in range(8):
        plain = space.sample(0, None, random.Random(seed))
        extents = [extent for _, extent in _reduce_loops(plain)]
        sample = _with_stages(space, plain, 3)
        pipelined = "software_pipeline_stage" in sample.schedule.func.script()
        assert pipelined == (extents[0] >= 3), (extents, pipelined)


def test_a_genome_replays_to_the_same_schedule_and_its_trace_replays_too():
    workload = Workload(_matmul(32, 32, 16), "c")
    space = SearchSpace(workload)
    first = space.sample(0, None, random.Random(5))
    again = space.sample(0, first.genome, random.Random(99))
    assert again.genome == first.genome
    assert again.schedule.func.script() == first.schedule.func.script()
    replayed = first.schedule.trace.apply(workload.func)
    assert replayed.func.script() == first.schedule.func.script()


def test_tile_sampling_finds_an_accepted_combination_random_draws_miss():
    # threads of an 8 x 24 tile in four levels: random draws rarely give 96 or more, and
    # a GPU sketch was refused ("8 threads per block") where 256 draws missed
    from sched.autoscheduler.space.sampler import Sampler

    def many_threads(decisions):
        return decisions[0][1] * decisions[1][1] >= 96

    for seed in range(10):
        sch = sched.Schedule(_matmul(8, 24, 8))
        i, j, _ = sch.get_loops(sch.get_block("C"))
        sampler = Sampler(sch, None, random.Random(seed))
        tiles = sampler.tiles([i, j], n=4, max_innermost_factor=8, accept=many_threads)
        assert many_threads(tiles), tiles
        assert [int(np.prod(t)) for t in tiles] == [8, 24] and max(t[-1] for t in tiles) <= 8
        assert str(sch.trace).count("sample_perfect_tile") == 2


def test_mutation_keeps_the_tile_product():
    rng = random.Random(0)
    genome = ((2, 4, 2, 4), (8, 2), 1)
    kinds = ("tile:64:4:16", "tile:16:2:64", "choice:2")
    for _ in range(50):
        child = _mutate(genome, kinds, rng)
        assert child != genome or child[0] is None
        for decision in child[:2]:
            if decision is not None:
                assert np.prod(decision) in (64, 16)
        assert child[2] in (0, 1)


def test_search_never_proposes_a_schedule_twice():
    space = SearchSpace(Workload(_matmul(16, 16, 16), "c"))
    search = EvolutionarySearch(space, seed=0)
    seen = set()
    for _ in range(3):
        batch = search.propose(6)
        search.tell(batch, [float(i + 1) for i in range(len(batch))])
        for sample in batch:
            assert sample.hash not in seen
            seen.add(sample.hash)
    assert len(seen) >= 12


def _unrolled_copies(func) -> int:
    """The most copies of a statement the unrolled loops around it make together."""
    import dataclasses

    from sched.ir.nodes import For, IntImm, Stmt

    def walk(node, copies):
        if isinstance(node, For) and node.kind == "unrolled":
            copies *= node.extent.value if isinstance(node.extent, IntImm) else 1
        found = copies
        for field in dataclasses.fields(node):
            value = getattr(node, field.name)
            for child in value if isinstance(value, tuple) else (value,):
                if isinstance(child, Stmt) or type(child).__name__ == "Block":
                    found = max(found, walk(child, copies))
        return found

    return walk(func.body, 1)


@pytest.mark.parametrize("target", ["c", "cuda"])
def test_unrolled_loops_stay_within_the_sampled_budget(target):
    """Each small loop unrolled on its own multiplied into tens of thousands of copies of a
    conv2d tile's body, which gcc compiled for minutes: the loops unrolled together make at
    most the sampled budget of copies (a CPU vector loop's vectors count too)."""
    from sched.autoscheduler.space.unroll import CPU_BUDGETS, GPU_BUDGETS

    D = te.placeholder((1, 16, 14, 14), name="D")
    W = te.placeholder((16, 16, 3, 3), name="W")
    func = te.create_prim_func([D, W, te.ops.conv2d_nchw(D, W, stride=1, padding=1)])
    func = func if target == "c" else _matmul(64, 64, 64)
    space = SearchSpace(Workload(func, target))
    largest = max(CPU_BUDGETS if target == "c" else GPU_BUDGETS)
    seen = 0
    for seed in range(6):
        try:
            sample = space.sample(seed % len(space.sketches), None, random.Random(seed))
        except sched.ScheduleError:
            continue
        assert _unrolled_copies(sample.schedule.func) <= largest
        seen += 1
    assert seen >= 3


def test_cpu_matmul_ssrs_sketch_puts_the_register_tile_under_the_whole_reduction():
    func = _matmul(48, 64, 32)
    space = SearchSpace(Workload(func, "c"))
    names = [s.name for s in space.sketches]
    assert "tile_cpu(C+local+pack(B)+SSRS)" in names and "tile_cpu(C+local+SSRS)" in names
    sketch = names.index("tile_cpu(C+local+pack(B)+SSRS)")
    for seed in range(3):
        sample = space.sample(sketch, None, random.Random(seed))
        text = sample.schedule.func.script()
        trace = str(sample.schedule.trace)
        # i and j in three levels, k not split: one reduction loop, inside the C_local tile
        assert trace.count("sample_perfect_tile") == 2 and "n=3" in trace
        update = sample.schedule.get_block("C_update")       # decompose_reduction renamed C
        loops = [loop.name for loop in sample.schedule.get_loops(update)]
        assert "k" in loops and not any(name.startswith("k_") for name in loops)
        # S0 (fused, parallel), S1 (two), the reduction, S3 (two): the tile right under k
        assert len(loops) == 6 and loops[3] == "k"
        assert text.index('T.block("C_init")') < text.index('T.block("C_update")')
        arrays = [np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
                  for shape in ((48, 32), (32, 64))]
        out = np.zeros((48, 64), np.float32)
        sched.build(sample.schedule.func, target="c")(*arrays, out)
        np.testing.assert_allclose(out, arrays[0].astype(np.float64) @ arrays[1], rtol=1e-4,
                                   atol=1e-4)


def test_cpu_row_reductions_keep_vector_partials_in_the_rf_sketch():
    """softmax's row max and sum: the "+rf" variant splits each row into vectors of partial
    results (rfactor), computed under the row loop and vectorized, as cpu_softmax does."""
    X = te.placeholder((8, 96), name="X")
    func = te.create_prim_func([X, te.ops.softmax(X)], name="softmax")
    workload = Workload(func, "c")
    space = SearchSpace(workload)
    names = [s.name for s in space.sketches]
    sketch = next(i for i, name in enumerate(names)
                  if "place(softmax_sum+rf)" in name and "parallel(softmax_max+rf)" in name)
    arrays = workload.arrays(1)
    expected = _numpy("softmax", arrays)
    built = 0
    for seed in range(12):
        try:
            sample = space.sample(sketch, None, random.Random(seed))
        except sched.ScheduleError:
            continue                       # a compute location inside the row: refused
        text = sample.schedule.func.script()
        assert 'T.block("softmax_max_rf' in text and 'T.block("softmax_sum_rf' in text
        assert text.count("T.vectorized(") >= 3
        got = [a.copy() for a in arrays]
        sched.build(sample.schedule.func, target="c")(*got)
        np.testing.assert_allclose(got[-1], expected, rtol=1e-5, atol=1e-6)
        built += 1
    assert built >= 2


def test_a_sum_over_two_trailing_axes_keeps_vector_partials_of_both():
    """The innermost reduce axis (13) holds no whole vector, the two reduce axes together
    (2 * lanes * 13) do: the "+rf" sketch fuses them and splits the fused loop."""
    from sched.c.isa import host_isa

    lanes = host_isa().lanes("float32")
    A = te.placeholder((3, 2 * lanes, 13), name="A")
    k1 = te.reduce_axis((0, 2 * lanes), name="k1")
    k2 = te.reduce_axis((0, 13), name="k2")
    S = te.compute((3,), lambda i: te.sum(A[i, k1, k2], axis=[k1, k2]), name="S")
    workload = Workload(te.create_prim_func([A, S], name="sum2"), "c")
    space = SearchSpace(workload)
    sketch = next(i for i, s in enumerate(space.sketches) if s.name == "parallel(S+rf)")
    sample = space.sample(sketch, None, random.Random(0))
    trace = str(sample.schedule.trace)
    assert "sch.fuse(" in trace and "sch.rfactor(" in trace
    arrays = workload.arrays(1)
    got = [a.copy() for a in arrays]
    sched.build(sample.schedule.func, target="c")(*got)
    np.testing.assert_allclose(got[-1], arrays[0].astype(np.float64).sum(axis=(1, 2)),
                               rtol=1e-4, atol=1e-4)


def test_cpu_conv2d_offers_the_vector_lanes_along_output_channels():
    """Output columns of 6 hold no whole vector; the output channels (a multiple of the
    vector) do: a sketch puts the lanes there, with the accumulator tile laid out channels
    innermost and the weights packed (k // lanes, c, r, s, k % lanes), as cpu_conv2d does."""
    from sched.c.isa import host_isa

    lanes = host_isa().lanes("float32")
    D = te.placeholder((1, 3, 6, 6), name="D")
    W = te.placeholder((2 * lanes, 3, 3, 3), name="W")
    func = te.create_prim_func([D, W, te.ops.conv2d_nchw(D, W, stride=1, padding=1)],
                               name="conv")
    workload = Workload(func, "c")
    space = SearchSpace(workload)
    names = [s.name for s in space.sketches]
    wanted = [i for i, name in enumerate(names) if "+lanes(axis 1)" in name]
    # with and without SSRS, each with the padding inlined and as a block of its own
    assert len(wanted) == 4, names
    arrays = workload.arrays(1)
    d, w = arrays[0].astype(np.float64), arrays[1].astype(np.float64)
    padded = np.pad(d, ((0, 0), (0, 0), (1, 1), (1, 1)))
    expected = sum(np.einsum("nchw,kc->nkhw", padded[:, :, r:r + 6, s:s + 6], w[:, :, r, s])
                   for r in range(3) for s in range(3))
    rng = random.Random(1)
    for index in wanted:
        sample = space.sample(index, None, rng)
        text = sample.schedule.func.script()
        assert f"W_global[v_k // {lanes}, v_rc, v_ry, v_rx, v_k % {lanes}]" in text
        # the vector loop is the channel's lanes loop (k_1), innermost in the update
        assert f"for k_1 in T.vectorized({lanes}):" in text
        assert re.search(rf"v_k = T.axis.spatial\({2 * lanes}, [^\n]*\+ k_1\)", text)
        assert "conv2d_local[v_n, v_p, v_q, v_k] = conv2d_local[v_n, v_p, v_q, v_k]" in text
        got = [a.copy() for a in arrays]
        sched.build(sample.schedule.func, target="c")(*got)
        np.testing.assert_allclose(got[-1], expected, rtol=1e-4, atol=1e-4)


def test_no_lanes_along_another_axis_where_the_last_holds_whole_vectors():
    names = [s.name for s in SearchSpace(Workload(_matmul(64, 64, 64), "c")).sketches]
    assert not any("+lanes(" in name for name in names)


def test_cpu_padding_is_inlined_in_some_sketches_and_a_block_of_its_own_in_others():
    """On the CPU the padding stays a block in half the sketches (MetaSchedule's CPU rule
    does not inline an if_then_else): inlined, a tile vectorized along the padded axis takes
    a mask per vector (measured 10x slower). Kept, it goes at a sampled loop of the tile,
    never under the reduction loops; the candidates match numpy. The GPU inlines it."""
    from sched.autoscheduler.space.sketch import _inline_variants

    assert len(_inline_variants(Workload(_conv2d(), "cuda"))) == 1
    workload = Workload(_conv2d(), "c")
    space = SearchSpace(workload)
    names = [s.name for s in space.sketches]
    kept = [i for i, name in enumerate(names) if "place(conv2d_pad)" in name]
    assert kept and len(kept) < len(names), names
    assert all("inline(conv2d_pad)" in name for i, name in enumerate(names) if i not in kept)
    arrays = workload.arrays(1)
    expected = _numpy("conv", arrays)
    rng = random.Random(3)
    for index in kept:
        sample = space.sample(index, None, rng)
        text = sample.schedule.func.script()
        assert 'with T.block("conv2d_pad")' in text
        pad_at = text.index('with T.block("conv2d_pad")')
        assert "rc" not in "".join(re.findall(r"for (\w+)", text[:pad_at]))
        got = [a.copy() for a in arrays]
        sched.build(sample.schedule.func, target="c")(*got)
        np.testing.assert_allclose(got[-1], expected, rtol=1e-4, atol=1e-4)


def _grid_extents(func) -> dict:
    """blockIdx axis -> the extents bound to it, from the printed IR."""
    found = {}
    for extent, axis in re.findall(r'T\.thread_binding\((\w+), thread="blockIdx\.(\w)"\)',
                                   func.script()):
        found.setdefault(axis, set()).add(extent)
    return found


def test_the_loop_with_the_most_thread_blocks_goes_to_blockidx_x():
    # CUDA launches at most 65535 thread blocks along y and z: 2^17 row tiles on y (the rules
    # put the innermost loop on x) were refused at launch
    from sched.autoscheduler.space.grid_axes import bind_grid
    from sched.autoscheduler.space.sampler import SketchRefused

    A = te.placeholder((1 << 18, 16), name="A")
    func = te.create_prim_func([A, te.compute(A.shape, lambda i, j: A[i, j] + 1, name="B")])
    sch = sched.Schedule(func)
    i, j = sch.get_loops(sch.get_block("B"))
    rows, _ = sch.split(i, factors=[None, 2])
    bind_grid(sch, [rows, j])
    assert _grid_extents(sch.func) == {"x": {"131072"}, "y": {"16"}}
    # small grids keep the innermost loop on x
    sch = sched.Schedule(func)
    i, j = sch.get_loops(sch.get_block("B"))
    rows, _ = sch.split(i, factors=[4096, None])
    bind_grid(sch, [rows, j])
    assert _grid_extents(sch.func) == {"x": {"16"}, "y": {"4096"}}
    # two loops over the limit cannot both be on x
    B = te.placeholder((1 << 17, 1 << 17), name="B")
    sch = sched.Schedule(te.create_prim_func(
        [B, te.compute(B.shape, lambda i, j: B[i, j] + 1, name="C")]))
    with pytest.raises(SketchRefused, match="131072 thread blocks along blockIdx.y"):
        bind_grid(sch, sch.get_loops(sch.get_block("C")))


def test_gpu_tiles_keep_at_most_256_values_per_thread():
    # stop 39's 4096^3 run on an H200 drew [1, 2, 1024, 2] x [2, 16, 32, 4]: 2048 x 128
    # accumulators per thread, 1 MB of local memory, refused at launch
    space = SearchSpace(Workload(_matmul(4096, 4096, 64), "cuda"))
    for seed in range(8):
        trace = str(space.sample(0, None, random.Random(seed)).schedule.trace)
        i_tile, j_tile = [list(map(int, found.split(", "))) for found in
                          re.findall(r"n=4, max_innermost_factor=8, decision=\[([^]]*)\]", trace)]
        assert i_tile[2] * i_tile[3] * j_tile[2] * j_tile[3] <= 256, trace

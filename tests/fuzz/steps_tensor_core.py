"""fp16 matmul programs of 16x16x16 multiples and a random tensor-core schedule of them (the
wmma or the mma intrinsics, sched/tensor_intrin/cuda.py), each step taken or refused.

The random programs (programs.py) are fp32 and never have a tensor-core intrinsic's shape, so
tensorize with wmma/mma is refused there. Here the recipe is the one people write
(sched/hand_schedules/gpu.py `_tensor_core_matmul`, TVM's tensor-core schedule): the loops
split into block, warp, fragment and 16-element tiles, bound to blockIdx and threadIdx, the
accumulator cached in the intrinsics' scope at the warp loop, A and B staged (through shared
memory, or straight from global) into fragments at the inner K loop, decompose_reduction at
the outer K loop, then tensorize of the loads, fill, multiply and store. Its parameters are
drawn (warps, fragments, K tiles, the shared staging), and now and then a move that must be
refused (a tile of 8, a tensorize at the wrong loop, a staging the intrinsic does not read):
a refused step is logged and the recipe goes on with what it has. `log` gets runnable Python.
"""

from __future__ import annotations

from hypothesis import strategies as st

import sched
from sched import compute as te
from sched.errors import ScheduleError
from tests.fuzz.programs import Program


def wmma_intrinsics(features) -> dict:
    """The wmma intrinsics for a program of `features` (tensor_core_programs)."""
    operand = "s8" if "int8" in features else "f16"
    out = "s32" if "int8" in features else "f16" if "acc_f16" in features else "f32"
    trans = "_trans" if "trans_b" in features else ""
    return {"scopes": ("wmma.accumulator", "wmma.matrix_a", "wmma.matrix_b"),
            "fill": f"wmma_fill_16x16x16_{out}", "load_a": f"wmma_load_16x16x16_{operand}_a",
            "load_b": f"wmma_load_16x16x16_{operand}_b{trans}",
            "compute": f"wmma_sync_16x16x16_{operand}{operand}{out}{trans}",
            "store": f"wmma_store_16x16x16_{out}_global", "k": 16}


def mma_intrinsics(features, transposed_loads: tuple[bool, bool] = (False, False)) -> dict:
    """The mma intrinsics for a program of `features`; the loads named `_trans` where
    `transposed_loads` says (a copy either way: TVM's `_trans` loads copy the tile as held)."""
    if "int8" in features:          # m16n8k32, B held n x k (tensor_core_programs)
        return {"scopes": ("warp", "warp", "warp"), "fill": "mma_fill_16x16_i32",
                "load_a": "mma_ldmatrix_i8_a", "load_b": "mma_ldmatrix_i8_b_trans",
                "compute": "mma_i8i8i32_trans_b", "store": "mma_store_16x16_i32_global",
                "k": 32}
    out = "f16" if "acc_f16" in features else "f32"
    trans_a = "_trans_a" if "trans_a" in features else ""
    trans_b = "_trans_b" if "trans_b" in features else ""
    load_a, load_b = ("_trans" if t else "" for t in transposed_loads)
    return {"scopes": ("warp", "warp", "warp"), "fill": f"mma_fill_16x16_{out}",
            "load_a": f"mma_ldmatrix_f16_a{load_a}", "load_b": f"mma_ldmatrix_f16_b{load_b}",
            "compute": f"mma_f16f16{out}{trans_a}{trans_b}",
            "store": f"mma_store_16x16_{out}_global", "k": 16}


@st.composite
def tensor_core_programs(draw) -> Program:
    """`C = A @ B` over fp16 A (M x K, or K x M: feature "trans_a") and B (K x N, or N x K:
    "trans_b"), accumulated in fp32 (`float32(A) * float32(B)`) or in fp16 (no casts:
    "acc_f16"), or over int8 A (M x K) and B (N x K) into int32 ("int8", K a multiple of
    32), M, N, K multiples of 16 (small: the C target runs the intrinsics' reference loops)."""
    M, N, K = (16 * draw(st.integers(1, 2)) for _ in range(3))
    trans_a, trans_b = draw(st.booleans()), draw(st.booleans())
    out = draw(st.sampled_from(["float32", "float32", "float16", "int32"]))
    operand = "int8" if out == "int32" else "float16"
    if operand == "int8":           # k along the rows of both (mma.sync's int8 loads), K by 32
        trans_a, trans_b, K = False, True, 32 * draw(st.integers(1, 2))
    A = te.placeholder((K, M) if trans_a else (M, K), operand, name="A")
    B = te.placeholder((N, K) if trans_b else (K, N), operand, name="B")
    k = te.reduce_axis((0, K), name="k")

    def c(i, j):
        a, b = (A[k, i] if trans_a else A[i, k]), (B[j, k] if trans_b else B[k, j])
        if out == "float16":
            return te.sum(a * b, axis=k)
        return te.sum(te.cast(a, out) * te.cast(b, out), axis=k)
    features = {"tensor_core"} | {name for name, on in (("trans_a", trans_a),
                                                        ("trans_b", trans_b),
                                                        ("acc_f16", out == "float16"),
                                                        ("int8", out == "int32")) if on}
    return Program(te.create_prim_func([A, B, te.compute((M, N), c, name="C")],
                                       name="matmul_fp16"), {}, features)


class _Recipe:
    def __init__(self, sch: sched.Schedule, data, log: list[str]) -> None:
        self.sch, self.data, self.log = sch, data, log

    def draw(self, strategy):
        return self.data.draw(strategy)

    def step(self, text: str, run):
        """Runs one step (logged as `text`, with the handles the recipe named): its result
        (True for a step that returns nothing), or None when refused. A refusal must leave
        the function as it was."""
        self.log.append(text)
        before = self.sch.func
        try:
            result = run()
            return True if result is None else result
        except ScheduleError:
            self.log[-1] = f"try:\n    {text}\nexcept ScheduleError:\n    pass   # refused"
            if self.sch.func is not before:
                raise AssertionError("a refused step changed the function") from None
            return None

    def tile(self) -> int:
        """The tile size of a fragment's axis: 16, now and then 8 (tensorize must refuse)."""
        return 8 if self.draw(st.integers(0, 19)) == 0 else 16

    def factor(self, extent: int, tile: int) -> int:
        """A factor of extent // tile: 1 or 2 where it divides."""
        count = extent // tile
        return self.draw(st.sampled_from([f for f in (1, 2) if count % f == 0]))


def apply_tensor_core_recipe(sch: sched.Schedule, data, log: list[str],
                             shape: tuple[int, int, int], features=frozenset()) -> None:
    """The tensor-core schedule of block "C" of `sch` (see the module doc) with drawn
    parameters, with the intrinsics for the program's `features` (wmma has no A held k x m).
    A crash (anything but a ScheduleError) propagates: a finding."""
    r = _Recipe(sch, data, log)
    M, N, K = shape
    mma = mma_intrinsics(features, (r.draw(st.booleans()), r.draw(st.booleans())))
    intrinsics = mma if "trans_a" in features else \
        r.draw(st.sampled_from([wmma_intrinsics(features), mma]))
    is_wmma = intrinsics["scopes"][0] == "wmma.accumulator"
    block = sch.get_block("C")
    s = sch
    i, j, k = s.get_loops(block)
    ti, tj, tk = r.tile(), r.tile(), r.tile() * intrinsics["k"] // 16
    wi = r.factor(M, ti)
    fi = r.factor(M // wi, ti)
    wj = r.factor(N, tj)
    fj = r.factor(N // wj, tj)
    kt = r.factor(K, tk)
    log.append("i, j, k = sch.get_loops(sch.get_block('C'))")
    parts_i = r.step(f"bi, wi, fi, ii = sch.split(i, [None, {wi}, {fi}, {ti}])",
                     lambda: s.split(i, [None, wi, fi, ti]))
    parts_j = r.step(f"bj, wj, fj, jj = sch.split(j, [None, {wj}, {fj}, {tj}])",
                     lambda: s.split(j, [None, wj, fj, tj]))
    parts_k = r.step(f"ko, ki, kk = sch.split(k, [None, {kt}, {tk}])",
                     lambda: s.split(k, [None, kt, tk]))
    if parts_i is None or parts_j is None or parts_k is None:
        return
    (bi, wi_, fi_, ii), (bj, wj_, fj_, jj), (ko, ki, kk) = parts_i, parts_j, parts_k
    r.step("sch.reorder(bi, bj, wi, wj, ko, ki, fi, fj, ii, jj, kk)",
           lambda: s.reorder(bi, bj, wi_, wj_, ko, ki, fi_, fj_, ii, jj, kk))
    for loop, name, axis in ((bi, "bi", "blockIdx.y"), (bj, "bj", "blockIdx.x"),
                             (wi_, "wi", "threadIdx.z"), (wj_, "wj", "threadIdx.y")):
        r.step(f"sch.bind({name}, {axis!r})", lambda loop=loop, axis=axis: s.bind(loop, axis))
    scope_c, scope_a, scope_b = intrinsics["scopes"]
    accumulator = r.step(f"accumulator = sch.cache_write(sch.get_block('C'), 0, {scope_c!r})",
                         lambda: s.cache_write(block, 0, scope_c))
    if accumulator is not None:
        r.step("sch.reverse_compute_at(accumulator, wj)",
               lambda: s.reverse_compute_at(accumulator, wj_))
    fragments = []
    # straight from global (wmma's _global loads; mma's ldmatrix reads shared only and must
    # refuse): no cooperative fetch binds the 32 lanes on threadIdx.x, so only the C target
    # builds it (the CUDA build refuses it, saying to bind them)
    staged = r.draw(st.sampled_from(["shared"] * 5 + ["global"]))
    for index, scope, name in ((0, scope_a, "a"), (1, scope_b, "b")):   # reads: A, B, C
        shared = None
        if staged == "shared":
            shared = r.step(f"shared_{name} = sch.cache_read(sch.get_block('C'), {index}, "
                            f"'shared')", lambda index=index: s.cache_read(block, index, "shared"))
        fragment = r.step(f"fragment_{name} = sch.cache_read(sch.get_block('C'), {index}, "
                          f"{scope!r})", lambda index=index, scope=scope:
                          s.cache_read(block, index, scope))
        if fragment is None:
            continue
        fragments.append((name, fragment))
        r.step(f"sch.compute_at(fragment_{name}, ki)",
               lambda fragment=fragment: s.compute_at(fragment, ki))
        if shared is not None and r.step(f"sch.compute_at(shared_{name}, ko)",
                                         lambda shared=shared: s.compute_at(shared, ko)):
            _fetch_cooperatively(r, shared, name, (wi, wj))
    init = None
    if r.draw(st.integers(0, 5)):
        init = r.step("init = sch.decompose_reduction(sch.get_block('C'), ko)",
                      lambda: s.decompose_reduction(block, ko))
    suffix = "_global" if staged == "global" and is_wmma else ""
    for name, fragment in fragments:
        # an operand tile's columns: k for A and for B held n x k
        columns = intrinsics["k"] if name == "a" or "trans_b" in features else 16
        rows = 16 if name == "a" or "trans_b" in features else intrinsics["k"]
        row = _fragment_loops(r, fragment, f"fragment_{name}", rows, columns)
        if row is not None:
            intrinsic = intrinsics[f"load_{name}"] + suffix
            r.step(f"sch.tensorize(row, {intrinsic!r})",
                   lambda row=row, intrinsic=intrinsic: s.tensorize(row, intrinsic))
    wrong = r.draw(st.integers(0, 9)) == 0       # a tensorize one loop off: refused
    if init is not None:
        loops = s.get_loops(init)
        at = -3 if wrong else -2
        r.step(f"sch.tensorize(sch.get_loops(init)[{at}], {intrinsics['fill']!r})",
               lambda: s.tensorize(loops[at], intrinsics["fill"]))
    loops = s.get_loops(block)
    at = -2 if wrong else -3
    r.step(f"sch.tensorize(sch.get_loops(sch.get_block('C'))[{at}], "
           f"{intrinsics['compute']!r})", lambda: s.tensorize(loops[at], intrinsics["compute"]))
    if accumulator is not None:
        row = _fragment_loops(r, accumulator, "accumulator")
        if row is not None:
            r.step(f"sch.tensorize(row, {intrinsics['store']!r})",
                   lambda: s.tensorize(row, intrinsics["store"]))


def _fetch_cooperatively(r: _Recipe, stage, name: str, warps: tuple[int, int]) -> None:
    """The copy of a shared tile spread over every thread of the block (warps on z and y, 32
    lanes on x)."""
    s = r.sch
    loops = s.get_loops(stage)[-2:]
    fused = r.step(f"fused = sch.fuse(*sch.get_loops(shared_{name})[-2:])",
                   lambda: s.fuse(*loops))
    if fused is None:
        return
    parts = r.step(f"_, tz, ty, tx = sch.split(fused, [None, {warps[0]}, {warps[1]}, 32])",
                   lambda: s.split(fused, [None, warps[0], warps[1], 32]))
    if parts is None:
        return
    for loop, text, axis in zip(parts[1:], ("tz", "ty", "tx"),
                                ("threadIdx.z", "threadIdx.y", "threadIdx.x")):
        r.step(f"sch.bind({text}, {axis!r})", lambda loop=loop, axis=axis: s.bind(loop, axis))


def _fragment_loops(r: _Recipe, stage, text: str, height: int = 16, width: int = 16):
    """The two innermost loops of `stage` split by `height` and `width` (16, and 32 along k
    for int8 mma operands), the tile loops innermost: the outer of them (to tensorize), or
    None."""
    s = r.sch
    rows, cols = s.get_loops(stage)[-2:]
    rp = r.step(f"row_tiles, row = sch.split(sch.get_loops({text})[-2], [None, {height}])",
                lambda: s.split(rows, [None, height]))
    cp = r.step(f"col_tiles, col = sch.split(sch.get_loops({text})[-1], [None, {width}])",
                lambda: s.split(cols, [None, width]))
    if rp is None or cp is None:
        return None
    r.step("sch.reorder(row_tiles, col_tiles, row, col)",
           lambda: s.reorder(rp[0], cp[0], rp[1], cp[1]))
    return rp[1]

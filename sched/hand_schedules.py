"""Hand-written schedules for the common kernels, used by the tests, tutorials, benchmarks and
the demo. Each function builds the algorithm with the DSL and returns the `Schedule` (so that
`sch.func` is the scheduled function and `print(sch.trace)` shows the steps).

CPU (the C target):
- `cpu_matmul`: column panels of B packed per thread (cache_read "global" at the panel loop),
  a register tile of C (cache_write "local") sized from the host's vector width, vectorized
  and unrolled, panels in parallel.
- `cpu_matmul_tensorized`: C in 4x16 tiles, each k step one `outer_product_4x16_f32`
  tensor intrinsic (tensorize: 4 rows of 16-lane FMAs), row panels in parallel.
- `cpu_conv2d`: a register tile of output channels x rows x columns (one vector along the
  columns), the weights of each channel tile packed, the padded input computed first.
- `cpu_softmax` / `cpu_layer_norm`: rows in parallel, row reductions into vectors of partial
  results (rfactor), every stage under the row loop, vectorized along the columns.

GPU (CUDA; on the C target each thread block runs as loops over its threads):
- `gpu_matmul`: a block tile of C, A and B tiles staged in shared memory by all threads of
  the block, a 2-D register tile per thread.
- `gpu_matmul_bias_relu`: the same, with the epilogue applied as the tile leaves registers.
- `gpu_softmax` / `gpu_layer_norm`: one block per row; row reductions spread over the threads
  with rfactor into shared memory.
- `gpu_softmax_rows` / `gpu_layer_norm_rows`: one block per row; each row reduction a
  cross-thread reduction (its reduce loop bound to threadIdx.x: warp shuffles, then shared
  memory across warps), its result in shared memory for every thread.
- `gpu_elementwise`: every loop fused, then blocks of threads.
- `gpu_conv2d`: output pixels over blocks and threads, padding inlined, the reduction in a
  register.
- `gpu_matmul_tensor_core`: fp16 in, fp32 out through the wmma m16n16k16 intrinsics
  (tensorize): each thread block a tile of 16x16 fragments, the fragments of A and B loaded
  from global memory per k step, the accumulators filled, multiplied and stored.
"""

from __future__ import annotations

from sched import compute as te
from sched.schedule import Schedule


def _matmul_func(M, N, K, dtype="float32", epilogue=False):
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    if not epilogue:
        return te.create_prim_func([A, B, te.ops.matmul(A, B)], name="matmul")
    bias = te.placeholder((N,), dtype, name="bias")
    D = te.ops.matmul_bias_relu(A, B, bias)
    return te.create_prim_func([A, B, bias, D], name="matmul_bias_relu")


# -- CPU ---------------------------------------------------------------------------------------


def _lanes(dtype: str = "float32") -> int:
    """fp32 lanes of one vector register of the host (8 with AVX2, 16 with AVX-512)."""
    from sched.c.isa import host_isa

    return host_isa().lanes(dtype)


def _widest_dividing(extent, lanes: int) -> int:
    """The widest power-of-two vector (at most `lanes` wide) dividing `extent`, so that no guard
    lands in the vector loop: `lanes` when the extent is symbolic, 1 when no width divides."""
    if not isinstance(extent, int):
        return lanes
    width = lanes
    while width > 1 and extent % width:
        width //= 2
    return width


def cpu_matmul(M: int, N: int, K: int, row_tile: int | None = None,
               col_tile: int | None = None) -> Schedule:
    """matmul for the C target: B packed in col_tile-wide panels (K x col_tile, contiguous) per
    panel loop, C in row_tile x col_tile register tiles accumulated over all of K (cache_write
    "local"), the panels in parallel.

    Defaults from the host's vector width: col_tile two vectors (16 fp32 with AVX2, 32 with
    AVX-512), row_tile 4 rows (8 with AVX-512's 32 registers): 8 (16) accumulators, two B
    vectors and one broadcast of A in registers. Splitting K so that a K-panel of B stays in L1
    was measured no faster on Zen 3 (the panel streams from L2 fast enough; the accumulators
    would have to leave registers between K-panels).

    gcc 12 tuning for Zen 3 (-march=native) reloads B's vectors from memory for every FMA
    instead of keeping them in registers; with -mtune=generic the same C runs 1.4x faster
    (benchmarks/cpu_gcc_flags.py)."""
    lanes = _lanes()
    col_tile = col_tile or 2 * lanes
    row_tile = row_tile or (8 if lanes >= 16 else 4)
    sch = Schedule(_matmul_func(M, N, K))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, [None, row_tile])
    jo, ji = sch.split(j, [None, col_tile])
    sch.reorder(jo, io, k, ii, ji)
    local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(local, io)
    packed = sch.cache_read(block, 2, "global")
    sch.compute_at(packed, jo)
    init = sch.decompose_reduction(block, k)
    sch.unroll(ii)
    sch.vectorize(ji)
    sch.parallel(jo)
    for stage in (init, local, packed):
        sch.vectorize(sch.get_loops(stage)[-1])
    return sch


def cpu_matmul_tensorized(M: int, N: int, K: int) -> Schedule:
    """matmul for the C target through the tensor intrinsic `outer_product_4x16_f32`
    (sched/tensor_intrin/cpu.py): C in 4x16 tiles, and for each k one rank-1 update of the
    tile (tensorize puts the intrinsic's 4 rows of 16-lane FMAs in place of the tile's
    loops); the zeroing of C split off first (decompose_reduction), row panels in parallel.
    M must be a multiple of 4 and N of 16: the intrinsic covers whole tiles only."""
    if M % 4 or N % 16:
        raise ValueError(f"cpu_matmul_tensorized: M must be a multiple of 4 and N of 16 (the "
                         f"intrinsic's 4x16 tile), got M={M}, N={N}")
    sch = Schedule(_matmul_func(M, N, K))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 16])
    ko, ki = sch.split(k, [None, 1])
    sch.reorder(io, jo, ko, ii, ji, ki)
    init = sch.decompose_reduction(block, ko)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.tensorize(ii, "outer_product_4x16_f32")
    sch.parallel(io)
    return sch


def cpu_conv2d(N: int, C: int, H: int, W: int, K: int, R: int = 3, stride: int = 1,
               padding: int = 1, channel_tile: int = 4, row_tile: int = 2,
               col_tile: int | None = None, inline_padding: bool = False) -> Schedule:
    """conv2d NCHW for the C target: a register tile of channel_tile output channels x row_tile
    output rows x col_tile output columns (one vector along the contiguous columns), the
    reduction (input channels, kernel rows and columns) outside it, the weights of each channel
    tile packed contiguously (cache_read at the channel-tile loop), the padded input computed
    once before (in parallel over the channels), the tiles in parallel."""
    data = te.placeholder((N, C, H, W), name="data")
    weight = te.placeholder((K, C, R, R), name="weight")
    out = te.ops.conv2d_nchw(data, weight, stride=stride, padding=padding)
    sch = Schedule(te.create_prim_func([data, weight, out], name="conv2d"))
    block = sch.get_block("conv2d")
    n, k, p, q, rc, ry, rx = sch.get_loops(block)
    Q = (W + 2 * padding - R) // stride + 1
    col_tile = col_tile or max(2, _widest_dividing(Q, _lanes()))
    ko, ki = sch.split(k, [None, channel_tile])
    po, pi = sch.split(p, [None, row_tile])
    qo, qi = sch.split(q, [None, col_tile])
    sch.reorder(n, ko, po, qo, rc, ry, rx, ki, pi, qi)
    tiles = sch.fuse(n, ko)
    sch.parallel(tiles)
    local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(local, qo)
    packed = sch.cache_read(block, 2, "global")     # reads: the output, the input, the weight
    sch.compute_at(packed, tiles)
    init = sch.decompose_reduction(block, rc)
    sch.unroll(ki)
    sch.unroll(pi)
    sch.vectorize(qi)
    for stage in (init, local):
        sch.vectorize(sch.get_loops(stage)[-1])
    if padding and inline_padding:
        sch.compute_inline(sch.get_block("conv2d_pad"))
    elif padding:
        pad_loops = sch.get_loops(sch.get_block("conv2d_pad"))
        sch.parallel(sch.fuse(pad_loops[0], pad_loops[1]))
    return sch


def _partial_count(cols, lanes: int) -> int:
    """How many partial results a row reduction keeps: up to 4 vectors of `lanes` (independent
    accumulators hide the latency of the add or max), as many as divide the row in at least
    two steps."""
    if not isinstance(cols, int):
        return lanes
    for vectors in (4, 2):
        if cols % (lanes * vectors) == 0 and cols // (lanes * vectors) >= 2:
            return lanes * vectors
    return lanes


def _vector_partials_fit(cols, lanes: int) -> bool:
    """Whether a row of `cols` splits into at least two vectors of `lanes` (for rfactor)."""
    return lanes > 1 and (not isinstance(cols, int) or cols // lanes >= 2)


def _vector_rfactor(sch: Schedule, block, lanes: int):
    """Split the reduction loop of `block` (its last loop) by `lanes` and rfactor the lanes:
    `lanes` partial results side by side, accumulated as one vector and combined after."""
    k = sch.get_loops(block)[-1]
    _, lane = sch.split(k, [None, lanes])
    return sch.rfactor(lane, 0)


def _vectorize_columns(sch: Schedule, loop, lanes: int) -> None:
    """Vectorize `loop` in vectors of `lanes` (of the host's width when `lanes` is 1: the
    last vector is then guarded)."""
    sch.vectorize(sch.split(loop, [None, lanes if lanes > 1 else _lanes()])[1])


def _vectorize_partials(sch: Schedule, partial) -> None:
    """Put the lanes of an rfactor block innermost, vectorize them and initialise the vector
    before the reduction loop."""
    loops = sch.get_loops(partial)
    sch.reorder(loops[-1], loops[-2])
    loops = sch.get_loops(partial)
    sch.vectorize(loops[-1])
    sch.decompose_reduction(partial, loops[-2])


def cpu_softmax(rows: int, cols: int, lanes: int | None = None, partials: int | None = None,
                store_exp: bool = True) -> Schedule:
    """Row softmax for the C target: rows in parallel, each row's max and sum of exps reduced
    into `partials` partial results (rfactor; by default up to 4 vectors of `lanes`, the widest
    vector dividing `cols`; no rfactor when none does), every stage computed under the row loop
    and vectorized along the columns. `store_exp` (the default) keeps exp(x - max) of the row
    in a buffer (4 KB for 1024 fp32 columns: in L1) for the final division; without it exp is
    computed a second time there (about 1.7x slower with 1024 columns on AVX2)."""
    lanes = lanes or _widest_dividing(cols, _lanes())
    partials = partials or _partial_count(cols, lanes)
    X = te.placeholder((rows, cols), name="X")
    sch = Schedule(te.create_prim_func([X, te.ops.softmax(X)], name="softmax"))
    if not store_exp:
        sch.compute_inline(sch.get_block("softmax_exp"))
    reductions = ("softmax_max", "softmax_sum")
    rfactored = {name: _vector_rfactor(sch, sch.get_block(name), partials)
                 for name in reductions if _vector_partials_fit(cols, partials)}
    row, col = sch.get_loops(sch.get_block("softmax"))
    sch.parallel(row)
    _vectorize_columns(sch, col, lanes)
    stages = ["softmax_max", *(["softmax_exp"] if store_exp else []), "softmax_sum"]
    for name in reversed(stages):       # consumers first: each producer goes under the row
        sch.compute_at(sch.get_block(name), row)
        if name in rfactored:
            sch.compute_at(rfactored[name], row)
    if store_exp:
        _vectorize_columns(sch, sch.get_loops(sch.get_block("softmax_exp"))[-1], lanes)
    for partial in rfactored.values():
        _vectorize_partials(sch, partial)
    return sch


def cpu_layer_norm(rows: int, cols: int, lanes: int | None = None,
                   partials: int | None = None) -> Schedule:
    """Layer norm for the C target: rows in parallel, the row's sum and sum of squares reduced
    into vectors of partial results (rfactor, as in `cpu_softmax`),
    computed under the row loop, the normalisation vectorized along the columns."""
    lanes = lanes or _widest_dividing(cols, _lanes())
    partials = partials or _partial_count(cols, lanes)
    X = te.placeholder((rows, cols), name="X")
    gamma = te.placeholder((cols,), name="gamma")
    beta = te.placeholder((cols,), name="beta")
    out = te.ops.layer_norm(X, gamma, beta)
    sch = Schedule(te.create_prim_func([X, gamma, beta, out], name="layer_norm"))
    reductions = ("layer_norm_sum", "layer_norm_sqsum")
    rfactored = {name: _vector_rfactor(sch, sch.get_block(name), partials)
                 for name in reductions if _vector_partials_fit(cols, partials)}
    row, col = sch.get_loops(sch.get_block("layer_norm"))
    sch.parallel(row)
    _vectorize_columns(sch, col, lanes)
    for name in reversed(reductions):
        sch.compute_at(sch.get_block(name), row)
        if name in rfactored:
            sch.compute_at(rfactored[name], row)
    for partial in rfactored.values():
        _vectorize_partials(sch, partial)
    return sch


# -- GPU ---------------------------------------------------------------------------------------


def _stage_in_shared(sch: Schedule, block, index: int, loop, threads: tuple[int, int],
                     tile_elements: int) -> None:
    """Cache input `index` of `block` in shared memory at `loop`, loaded by all threads, four
    floats at a time (float4) when the tile splits evenly that way."""
    cache = sch.cache_read(block, index, "shared")
    sch.compute_at(cache, loop)
    loops = sch.get_loops(cache)
    fused = sch.fuse(*loops[-2:])
    if tile_elements % (threads[0] * threads[1] * 4) == 0:
        _, ty, tx, lanes = sch.split(fused, [None, threads[0], threads[1], 4])
        sch.vectorize(lanes)
    else:
        _, ty, tx = sch.split(fused, [None, threads[0], threads[1]])
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")


def _tile_matmul(sch: Schedule, block, block_tile, thread_tile, k_tile):
    threads = (block_tile[0] // thread_tile[0], block_tile[1] // thread_tile[1])
    i, j, k = sch.get_loops(block)
    bi, ty, ii = sch.split(i, [None, threads[0], thread_tile[0]])
    bj, tx, ji = sch.split(j, [None, threads[1], thread_tile[1]])
    ko, ki = sch.split(k, [None, k_tile])
    sch.reorder(bi, bj, ty, tx, ko, ki, ii, ji)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(ty, "threadIdx.y")
    sch.bind(tx, "threadIdx.x")
    local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(local, tx)
    _stage_in_shared(sch, block, 1, ko, threads, block_tile[0] * k_tile)
    _stage_in_shared(sch, block, 2, ko, threads, k_tile * block_tile[1])
    init = sch.decompose_reduction(block, ko)
    for loop in (ki, ii, ji, *sch.get_loops(init)[-2:], *sch.get_loops(local)[-2:]):
        sch.unroll(loop)        # constant indices keep the register tile in registers
    return local


def gpu_matmul(M: int, N: int, K: int, block_tile=(64, 64), thread_tile=(4, 4),
               k_tile: int | None = None) -> Schedule:
    """fp32 matmul: block_tile of C per thread block, thread_tile per thread, K in k_tile
    steps through shared memory (default: 16 where K is a multiple of 16, so the tiles load
    as float4; else 8, where ptxas keeps the guarded tile in registers)."""
    if k_tile is None:
        k_tile = 16 if isinstance(K, int) and K % 16 == 0 else 8
    sch = Schedule(_matmul_func(M, N, K))
    _tile_matmul(sch, sch.get_block("C"), block_tile, thread_tile, k_tile)
    return sch


def gpu_matmul_bias_relu(M: int, N: int, K: int, block_tile=(64, 64), thread_tile=(4, 4),
                         k_tile: int = 8) -> Schedule:
    """relu(A @ B + bias) in one kernel: the epilogue runs on the register tile (K in steps of
    8: with 16, ptxas spills a few registers on sm_80)."""
    sch = Schedule(_matmul_func(M, N, K, epilogue=True))
    _tile_matmul(sch, sch.get_block("C"), block_tile, thread_tile, k_tile)
    sch.reverse_compute_inline(sch.get_block("D"))
    return sch


def _row_reduction(sch: Schedule, block, threads: int) -> None:
    """Spread a row reduction over `threads` threads: partial results per thread in shared
    memory (rfactor), then every thread combines them into its own register (no thread waits
    for another to finish the sum)."""
    _, k = sch.get_loops(block)[-2:]
    _, k_inner = sch.split(k, [None, threads])
    partial = sch.rfactor(k_inner, 0)
    sch.set_scope(partial, 0, "shared")
    sch.set_scope(block, 0, "local")
    loops = sch.get_loops(partial)
    sch.reorder(loops[-1], loops[-2])
    sch.bind(sch.get_loops(partial)[-2], "threadIdx.x")


def _spread_row(sch: Schedule, block, threads: int) -> None:
    j = sch.get_loops(block)[-1]
    _, tx = sch.split(j, [None, threads])
    sch.bind(tx, "threadIdx.x")


def gpu_softmax(rows: int, cols: int, threads: int = 128) -> Schedule:
    """Row softmax, one thread block per row."""
    return _gpu_softmax(rows, cols, threads, _row_reduction)


def gpu_layer_norm(rows: int, cols: int, threads: int = 128) -> Schedule:
    """Layer norm over rows, one thread block per row."""
    return _gpu_layer_norm(rows, cols, threads, _row_reduction)


def _cross_thread_row_reduction(sch: Schedule, block, threads: int) -> None:
    """Reduce the row over `threads` threads: thread t takes the columns t, t + threads, ...
    (consecutive threads read consecutive columns), and the block combines the threads'
    partial results (a cross-thread reduction) into a shared element every thread reads."""
    k = sch.get_loops(block)[-1]
    k_outer, k_thread = sch.split(k, [None, threads])
    sch.reorder(k_thread, k_outer)
    sch.set_scope(block, 0, "shared")
    sch.bind(k_thread, "threadIdx.x")


def gpu_softmax_rows(rows: int, cols: int, threads: int = 128) -> Schedule:
    """Row softmax, one thread block per row, the row max and sum cross-thread reductions."""
    return _gpu_softmax(rows, cols, threads, _cross_thread_row_reduction)


def gpu_layer_norm_rows(rows: int, cols: int, threads: int = 128) -> Schedule:
    """Layer norm over rows, one thread block per row, the row sums cross-thread
    reductions."""
    return _gpu_layer_norm(rows, cols, threads, _cross_thread_row_reduction)


def _gpu_softmax(rows: int, cols: int, threads: int, reduce_row) -> Schedule:
    """One thread block per row; `reduce_row(sch, block, threads)` schedules the row max and
    the row sum."""
    X = te.placeholder((rows, cols), name="X")
    sch = Schedule(te.create_prim_func([X, te.ops.softmax(X)], name="softmax"))
    sch.compute_inline(sch.get_block("softmax_exp"))
    row = sch.get_loops(sch.get_block("softmax_max"))[0]
    for name in ("softmax_sum", "softmax"):
        sch.reverse_compute_at(sch.get_block(name), row)
    sch.bind(row, "blockIdx.x")
    for name in ("softmax_max", "softmax_sum"):
        reduce_row(sch, sch.get_block(name), threads)
    _spread_row(sch, sch.get_block("softmax"), threads)
    return sch


def _gpu_layer_norm(rows: int, cols: int, threads: int, reduce_row) -> Schedule:
    """One thread block per row; `reduce_row(sch, block, threads)` schedules the row sums."""
    X = te.placeholder((rows, cols), name="X")
    gamma = te.placeholder((cols,), name="gamma")
    beta = te.placeholder((cols,), name="beta")
    out = te.ops.layer_norm(X, gamma, beta)
    sch = Schedule(te.create_prim_func([X, gamma, beta, out], name="layer_norm"))
    row = sch.get_loops(sch.get_block("layer_norm"))[0]
    for name in ("layer_norm_sum", "layer_norm_sqsum"):
        sch.compute_at(sch.get_block(name), row)
    sch.bind(row, "blockIdx.x")
    for name in ("layer_norm_sum", "layer_norm_sqsum"):
        reduce_row(sch, sch.get_block(name), threads)
    _spread_row(sch, sch.get_block("layer_norm"), threads)
    return sch


def gpu_elementwise(shape: tuple[int, ...], threads: int = 256) -> Schedule:
    """relu(X * 2 + Y): every loop fused, split into blocks of `threads` threads."""
    X = te.placeholder(shape, name="X")
    Y = te.placeholder(shape, name="Y")
    Z = te.compute(shape, lambda *i: te.max(X[i] * 2.0 + Y[i], 0.0), name="Z")
    sch = Schedule(te.create_prim_func([X, Y, Z], name="elementwise"))
    loops = sch.get_loops(sch.get_block("Z"))
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    bx, tx = sch.split(fused, [None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return sch


def gpu_conv2d(N: int, C: int, H: int, W: int, K: int, R: int = 3, stride: int = 1,
               padding: int = 1, threads: int = 128) -> Schedule:
    """conv2d NCHW: one output pixel per thread, the padding inlined, the sum in a register."""
    data = te.placeholder((N, C, H, W), name="data")
    weight = te.placeholder((K, C, R, R), name="weight")
    out = te.ops.conv2d_nchw(data, weight, stride=stride, padding=padding)
    sch = Schedule(te.create_prim_func([data, weight, out], name="conv2d"))
    if padding:
        sch.compute_inline(sch.get_block("conv2d_pad"))
    block = sch.get_block("conv2d")
    n, k, p, q, rc, ry, rx = sch.get_loops(block)
    fused = sch.fuse(n, k, p, q)
    bx, tx = sch.split(fused, [None, threads])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(local, tx)
    sch.decompose_reduction(block, rc)
    sch.unroll(ry)
    sch.unroll(rx)
    return sch


def gpu_matmul_tensor_core(M: int, N: int, K: int, fragments=(2, 2)) -> Schedule:
    """fp16 matmul accumulated in fp32 (`C = float32(A) @ float32(B)`) with tensor-core
    intrinsics, TVM's names (sched/tensor_intrin/cuda.py): a thread block per tile of
    `fragments` 16x16 fragments of C in "wmma.accumulator" (filled with
    wmma_fill_16x16x16_f32, stored with wmma_store_16x16x16_f32_global); for each k step of
    16 the A and B fragments ("wmma.matrix_a"/"wmma.matrix_b") loaded from global memory
    (wmma_load_16x16x16_f16_a_global/_b_global) and multiplied (wmma_sync_16x16x16_f16f16f32).

    The intrinsics run their reference semantics today on every target (each thread holds
    whole fragments); staging A and B through shared memory (TVM's wmma_load_..._a/_b) needs
    compute_at to accept the shared tile refilled per thread block under the fragments.
    M and N must be multiples of 16 times `fragments`, K of 16."""
    tile_m, tile_n = 16 * fragments[0], 16 * fragments[1]
    if M % tile_m or N % tile_n or K % 16:
        raise ValueError(f"gpu_matmul_tensor_core: M must be a multiple of {tile_m}, N of "
                         f"{tile_n} and K of 16 (whole fragments), got M={M}, N={N}, K={K}")
    A = te.placeholder((M, K), "float16", name="A")
    B = te.placeholder((K, N), "float16", name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(te.cast(A[i, k], "float32")
                                               * te.cast(B[k, j], "float32"), axis=k), name="C")
    sch = Schedule(te.create_prim_func([A, B, C], name="matmul_tensor_core"))
    block = sch.get_block("C")
    i, j, r = sch.get_loops(block)
    bi, fi, ii = sch.split(i, [None, fragments[0], 16])
    bj, fj, jj = sch.split(j, [None, fragments[1], 16])
    ko, kk = sch.split(r, [None, 16])
    sch.reorder(bi, bj, ko, fi, fj, ii, jj, kk)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    accumulator = sch.cache_write(block, 0, "wmma.accumulator")
    sch.reverse_compute_at(accumulator, bj)
    a_fragment = sch.cache_read(block, 1, "wmma.matrix_a")
    b_fragment = sch.cache_read(block, 2, "wmma.matrix_b")
    sch.compute_at(a_fragment, ko)
    sch.compute_at(b_fragment, ko)
    init = sch.decompose_reduction(block, ko)
    sch.tensorize(_fragment_loops(sch, a_fragment, (True, False)),
                  "wmma_load_16x16x16_f16_a_global")
    sch.tensorize(_fragment_loops(sch, b_fragment, (False, True)),
                  "wmma_load_16x16x16_f16_b_global")
    sch.tensorize(sch.get_loops(init)[-2], "wmma_fill_16x16x16_f32")
    sch.tensorize(sch.get_loops(block)[-3], "wmma_sync_16x16x16_f16f16f32")
    sch.tensorize(_fragment_loops(sch, accumulator, (True, True)),
                  "wmma_store_16x16x16_f32_global")
    return sch


def _fragment_loops(sch: Schedule, stage, split: tuple[bool, bool]):
    """The two innermost loops of `stage` split by 16 where `split` says, the 16-loops
    innermost: returns the outer of the 16x16 loops (to tensorize)."""
    outer, inner = [], []
    for loop, divide in zip(sch.get_loops(stage)[-2:], split):
        if divide:
            o, i = sch.split(loop, [None, 16])
            outer.append(o)
            inner.append(i)
        else:
            inner.append(loop)
    sch.reorder(*outer, *inner)
    return inner[0]

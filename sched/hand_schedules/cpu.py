"""CPU hand schedules (the C target): see the package docstring."""

from __future__ import annotations

from sched import compute as te
from sched.hand_schedules.common import _matmul_func
from sched.schedule import Schedule


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
    packed = sch.cache_read(block, 1, "global")
    sch.compute_at(packed, jo)
    init = sch.decompose_reduction(block, k)
    sch.unroll(ii)
    sch.vectorize(ji)
    sch.parallel(jo)
    for stage in (init, local, packed):
        innermost = _innermost_under(sch, stage, jo)
        if innermost is not None:
            sch.vectorize(innermost)
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
               padding: int = 1, channel_tile: int | None = None, row_tile: int | None = None,
               col_tile: int | None = None, inline_padding: bool = False) -> Schedule:
    """conv2d NCHW for the C target: a register tile of channel_tile output channels (one
    vector: the lanes are output channels) x row_tile output rows x col_tile output columns,
    the reduction (input channels, kernel rows and columns) outside it; the weights packed
    once with the channel tile innermost (cache_read + transform_layout (k, c, r, s) ->
    (k // channel_tile, c, r, s, k % channel_tile): one vector load per (c, r, s)), so each
    FMA multiplies that vector by one broadcast input pixel; the tile accumulated in a local
    buffer laid out (row, column, channel) and written back after the reduction; the padded
    input computed once before (in parallel over the channels), the tiles in parallel.

    Defaults from the host's vector width: channel_tile the widest vector dividing K,
    row_tile 2 (1 for an odd number of output rows), col_tile the largest divisor of the
    output width that keeps the accumulators within 16 vector registers (AVX-512 has 32; 12
    of AVX2's 16). On a Zen 5 (AVX-512) with N=1, C=K=64, 56x56, one thread, this took
    1.05 ms of CPU time where the earlier tile along the columns (8 lanes: 56 has no divisor
    16) took 2.2 ms.

    Before (one block `conv2d` over n, k, p, q, rc, ry, rx) and after (AVX-512, K=64, 56x56):

        weight_global[k // 16, c, r, s, k % 16] = weight[k, c, r, s]       # packed once
        for n_k_0_p_0 in T.parallel(112):
            for q_0 in range(7):
                conv2d_local[.., p, q, k] = 0.0                           # 2 x 8 x 16
                for rc, ry, rx in T.grid(64, 3, 3):
                    for p_1 in T.unroll(2):
                        for q_1 in T.unroll(8):
                            for k_1 in T.vectorized(16):
                                conv2d_local[.., p, q, k] += conv2d_pad[.., rc, p + ry, q + rx]
                                                           * weight_global[.., rc, ry, rx, k_1]
                conv2d[.., k, p, q] = conv2d_local[.., p, q, k]
    """
    lanes = _lanes()
    P = (H + 2 * padding - R) // stride + 1
    Q = (W + 2 * padding - R) // stride + 1
    channel_tile = channel_tile or _widest_dividing(K, lanes)
    row_tile = row_tile or (2 if P % 2 == 0 else 1)
    vectors = max(1, channel_tile // lanes)
    col_tile = col_tile or _largest_divisor(Q, max(1, (16 if lanes >= 16 else 12)
                                                // (row_tile * vectors)))
    data = te.placeholder((N, C, H, W), name="data")
    weight = te.placeholder((K, C, R, R), name="weight")
    out = te.ops.conv2d_nchw(data, weight, stride=stride, padding=padding)
    sch = Schedule(te.create_prim_func([data, weight, out], name="conv2d"))
    block = sch.get_block("conv2d")
    n, k, p, q, rc, ry, rx = sch.get_loops(block)
    ko, ki = sch.split(k, [None, channel_tile])
    po, pi = sch.split(p, [None, row_tile])
    qo, qi = sch.split(q, [None, col_tile])
    sch.reorder(n, ko, po, qo, rc, ry, rx, pi, qi, ki)
    tiles = sch.fuse(n, ko, po)
    local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(local, qo)
    sch.transform_layout(block, ("write", 0), lambda n_, k_, p_, q_: (n_, p_, q_, k_))
    sch.cache_read(block, 1, "global")     # reads: the input, the weight, the output
    sch.transform_layout(block, ("read", 1), lambda k_, c_, r_, s_:
                         (k_ // channel_tile, c_, r_, s_, k_ % channel_tile))
    init = sch.decompose_reduction(block, rc)
    sch.unroll(pi)
    sch.unroll(qi)
    sch.vectorize(ki)
    sch.vectorize(sch.get_loops(init)[-1])
    sch.parallel(tiles)         # loop kinds last: each step after one re-checks that loop
    if padding and inline_padding:
        sch.compute_inline(sch.get_block("conv2d_pad"))
    elif padding:
        pad_loops = sch.get_loops(sch.get_block("conv2d_pad"))
        sch.parallel(sch.fuse(pad_loops[0], pad_loops[1]))
    return sch


def _largest_divisor(extent: int, at_most: int) -> int:
    """The largest divisor of `extent` not above `at_most` (1 at least)."""
    return max(d for d in range(1, max(1, min(extent, at_most)) + 1) if extent % d == 0)


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


def _checked_partials(schedule: str, cols, partials: int | None) -> int | None:
    """`partials` as given, refused where the row reduction cannot keep that many: partial
    result p sums the columns p, p + partials, ..., so they must divide a row of constant
    width (the reduction's split would leave some partials short a column)."""
    if partials is not None and isinstance(cols, int) and _vector_partials_fit(cols, partials) \
            and cols % partials:
        divisors = [d for d in (32, 16, 8, 4, 2) if cols % d == 0 and cols // d >= 2]
        hint = f"pass a divisor of {cols}, e.g. partials={divisors[0]}" if divisors else \
            "leave partials out"
        raise ValueError(f"{schedule}: partials={partials} does not divide cols={cols}: each "
                         f"of the partial results takes every {partials}th column; {hint}")
    return partials


def _vector_partials_fit(cols, lanes: int) -> bool:
    """Whether a row of `cols` splits into at least two vectors of `lanes` (for rfactor): not
    a symbolic row, whose rfactored lanes under the row loop would be `T.min(n, lanes)` of
    them, no vector (audit helper-148: vectorize refused the schedule's own loop)."""
    return lanes > 1 and isinstance(cols, int) and cols // lanes >= 2


def _vector_rfactor(sch: Schedule, block, lanes: int):
    """Split the reduction loop of `block` (its last loop) by `lanes` and rfactor the lanes:
    `lanes` partial results side by side, accumulated as one vector and combined after."""
    k = sch.get_loops(block)[-1]
    _, lane = sch.split(k, [None, lanes])
    return sch.rfactor(lane, 0)


def _innermost_under(sch: Schedule, block, outer):
    """The innermost loop of `block` inside the loop `outer`, or None where it has none (a
    stage computed at `outer` over a single element: one column, a panel one wide)."""
    innermost = sch.get_loops(block)[-1]
    return None if str(innermost) == str(outer) else innermost


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
    partials = _checked_partials("cpu_softmax", cols, partials) or _partial_count(cols, lanes)
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
    column = _innermost_under(sch, sch.get_block("softmax_exp"), row) if store_exp else None
    if column is not None:
        _vectorize_columns(sch, column, lanes)
    for partial in rfactored.values():
        _vectorize_partials(sch, partial)
    return sch


def cpu_layer_norm(rows: int, cols: int, lanes: int | None = None,
                   partials: int | None = None) -> Schedule:
    """Layer norm for the C target: rows in parallel, the row's sum and sum of squares (of the
    row less its first element: te.ops.layer_norm) reduced
    into vectors of partial results (rfactor, as in `cpu_softmax`),
    computed under the row loop, the normalisation vectorized along the columns."""
    lanes = lanes or _widest_dividing(cols, _lanes())
    partials = _checked_partials("cpu_layer_norm", cols, partials) or \
        _partial_count(cols, lanes)
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



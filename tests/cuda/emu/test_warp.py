"""The emulation header's warp shuffles and votes against CUDA's documented semantics, written
here from the CUDA programming guide (independently of the header's PTX formulas)."""

from __future__ import annotations

import numpy as np

from tests.cuda.emu.kernels import SHUFFLE_COUNT, SHUFFLES, WARP_ROW_SUM, emulate


def shuffle_reference(values: np.ndarray) -> np.ndarray:
    """What each of SHUFFLES' operations gives each thread of a 64-thread block."""
    out = np.zeros((SHUFFLE_COUNT, 64), np.int64)
    for t in range(64):
        warp, lane = t // 32 * 32, t % 32

        def at(source_lane):
            return values[warp + source_lane]

        def idx(src, width=32):           # lane src % width of the thread's width-group
            return at(lane // width * width + src % width)

        def up(delta, width=32):          # lane - delta, unless it leaves the group
            return at(lane - delta) if lane % width >= delta else at(lane)

        def down(delta, width=32):        # lane + delta, unless it leaves the group
            return at(lane + delta) if lane % width + delta < width else at(lane)

        def xor(mask, width=32):          # later groups are out of reach: own value
            source = lane ^ mask
            return at(source) if source < (lane // width + 1) * width else at(lane)

        ballot = sum(1 << k for k in range(32) if values[warp + k] % 3 == 0)
        row = [idx((lane + 3) % 32), idx(37), idx(lane + 5, 8), up(3), up(3, 16), down(5),
               down(5, 8), xor(1), xor(19), xor(12, 8), np.int32(np.uint32(ballot)),
               int(any(values[warp:warp + 32] == 40)), int(all(values[warp:warp + 32] >= 0)),
               -1]
        out[:, t] = row
    return out


def test_shuffles_and_votes_follow_cuda_semantics():
    values = np.arange(64, dtype=np.int32) * 7 % 61
    out = np.zeros(SHUFFLE_COUNT * 64, np.int32)
    emulate(SHUFFLES, "shuffles", [(64,), (SHUFFLE_COUNT * 64,)], block=(64, 1, 1),
            dtypes=["int32", "int32"])(values, out)
    np.testing.assert_array_equal(out.reshape(SHUFFLE_COUNT, 64), shuffle_reference(values))


def test_warp_reduction_with_shuffle_down():
    x = np.random.default_rng(0).standard_normal((8, 100)).astype(np.float32)
    sums = np.zeros(8, np.float32)
    emulate(WARP_ROW_SUM, "warp_row_sum", [(8, 100), (8,)], block=(128, 1, 1),
            grid=(2, 1, 1))(x, sums)
    np.testing.assert_allclose(sums, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)

"""align_storage: buffers padded so that requested axes have a stride factor * n + offset."""

from __future__ import annotations

import pytest

from sched.ir import Buffer, IntImm
from sched.lower import lower
from sched.lower.align_storage import padded_shape
from sched.script import T


def shape_after(shape, requests):
    buffer = Buffer("X", tuple(IntImm(d) for d in shape))
    return [d.value for d in padded_shape(buffer, requests)]


def test_rows_are_padded_to_the_requested_stride():
    assert shape_after((4, 8), {0: (16, 1)}) == [4, 17]
    assert shape_after((4, 8), {0: (8, 0)}) == [4, 8]          # met already


def test_inner_requests_are_met_first():
    # axis 1: rows of 4 become 9 (9 % 8 == 1); axis 0: 9 * m % 32 == 0 needs m = 32
    assert shape_after((2, 8, 4), {1: (8, 1), 0: (32, 0)}) == [2, 32, 9]


def test_an_impossible_request_is_an_error():
    # the stride of axis 0 is a multiple of 4, never 1 modulo 8
    with pytest.raises(ValueError, match="no padding of dimension 1 gives axis 0 a stride"):
        shape_after((2, 8, 4), {0: (8, 1)})


@T.prim_func
def aligned_intermediate(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 8), "float32")):
    with T.block("root"):
        B = T.alloc_buffer((4, 8), "float32")
        for i, j in T.grid(4, 8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(A[vi, vj])
                T.writes(B[vi, vj])
                T.block_attr({"buffer_dim_align": "[[0, 0, 16, 1]]"})
                B[vi, vj] = A[vi, vj]
        for i2, j2 in T.grid(4, 8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i2, j2])
                C[vi, vj] = B[vi, vj]


def test_lowering_pads_the_annotated_buffer():
    text = lower(aligned_intermediate).script()
    assert 'B = T.decl_buffer((68,), "float32")' in text       # 4 rows of 17
    assert "B[i * 17 + j] = A_flat[i * 8 + j]" in text


def test_the_padded_length_is_computed_in_closed_form():
    # a factor of 2**40 was scanned one length at a time: sched.build did not end (audit
    # helper-129); the closed form agrees with the scan where the scan is short
    import itertools

    from sched.lower.align_storage import _smallest_length

    for length, stride, factor, offset in itertools.product((1, 7, 16), (1, 4, 6), (1, 8, 12),
                                                            (0, 1, 3)):
        offset %= factor
        scanned = next((m for m in range(length, length + factor)
                        if stride * m % factor == offset), None)
        assert _smallest_length(length, stride, factor, offset) == scanned
    assert _smallest_length(7, 1, 2**40, 1) == 2**40 + 1

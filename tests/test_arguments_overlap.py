"""A kernel's buffers do not alias (the generated C and CUDA declare them restrict): a call
passing overlapping memory for a buffer the kernel writes is refused, naming both arguments."""

import numpy as np
import pytest

import sched
from sched import compute as te
from sched.errors import KernelArgumentError


@pytest.fixture(scope="module")
def shift():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    return sched.build(te.create_prim_func([A, B]), target="c")


def test_the_same_array_as_input_and_output_is_refused(shift):
    a = np.arange(8, dtype="float32")
    with pytest.raises(KernelArgumentError, match="arguments 1 'A' and 2 'B' share memory, and "
                       "the kernel writes 'B'"):
        shift(a, a)


def test_overlapping_slices_are_refused_and_disjoint_ones_run(shift):
    storage = np.arange(16, dtype="float32")
    with pytest.raises(KernelArgumentError, match="share memory"):
        shift(storage[0:8], storage[4:12])
    shift(storage[0:8], storage[8:16])
    np.testing.assert_array_equal(storage[8:16], np.arange(8) + 1)


def test_thread_order_is_a_build_option():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 3.0, name="B")
    sch = sched.Schedule(te.create_prim_func([A, B]))
    bx, tx = sch.split(sch.get_loops(sch.get_block("B"))[0], [None, 16])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    a = np.arange(64, dtype="float32")
    for order in ("forward", "reverse", "shuffle:3"):
        b = np.zeros(64, "float32")
        sched.build(sch.func, target="c", thread_order=order)(a, b)
        np.testing.assert_array_equal(b, a * 3)
    with pytest.raises(ValueError, match="thread_order applies to the C target only"):
        sched.build(sch.func, target="cuda", arch="sm_80", thread_order="reverse")

"""Where CPython and numpy keep what a kernel call's checks read, for the C entry point.

The C entry point (`sched.c.entry`) receives the address of a call's argument tuple and reads
the tuple and its numpy arrays directly, without Python.h: a tuple's size and items, an
object's type, an array's data pointer, ndim, dims, dtype and flags. The offsets come from
the types themselves (`object.__basicsize__` is the size of the object header, hence the type
pointer is its last word; `tuple.__basicsize__` is where a tuple's items start; numpy's
`PyArrayObject_fields` follow the header: `data, nd, dimensions, strides, base, descr, flags`,
a layout numpy keeps for the binary compatibility of every compiled extension), and they are
passed to the entry point at each call, in the first words of its state array, so the C text
does not depend on the Python build.

Before any kernel uses its entry point, `verify_layout` runs the C probe on sample objects
(contiguous, transposed, read-only, misaligned arrays, a tuple) and compares what it reads
with what Python says; if anything differs (an unusual Python or numpy build), the entry
points are not used and calls take the checks in Python (`sched.arguments`), which are slower
but complete.
"""

from __future__ import annotations

import ctypes

import numpy as np

WORD = ctypes.sizeof(ctypes.c_void_p)

# the state array's first words (sched_entry_state in the C text); then one per buffer: the
# address of the numpy dtype its array must have
TUPLE_TYPE, NDARRAY_TYPE, TYPE_OFFSET, SIZE_OFFSET, ITEMS_OFFSET, FIELDS_OFFSET, \
    CHECK_BOUNDS, DTYPES = range(8)

# numpy's array flags (NPY_ARRAY_*), stable since numpy 1.7
C_CONTIGUOUS, ALIGNED, WRITEABLE = 0x0001, 0x0100, 0x0400

PROBE_WORDS = 16   # what sched_probe_layout writes: see _probe_reads


def layout_words() -> list[int]:
    """The state's first words for this process (types' addresses and the objects' offsets)."""
    header = object.__basicsize__
    return [id(tuple), id(np.ndarray), header - WORD, header, tuple.__basicsize__, header]


def _probe_reads(probe, state, obj) -> list[int]:
    out = (ctypes.c_int64 * PROBE_WORDS)()
    probe(state, id(obj), out)
    return list(out)


def _expected_array(array: np.ndarray) -> list[int]:
    flags = ((C_CONTIGUOUS if array.flags.c_contiguous else 0)
             | (ALIGNED if array.flags.aligned else 0)
             | (WRITEABLE if array.flags.writeable else 0))
    dims = [*array.shape, *[0] * (4 - array.ndim)]
    strides = [*array.strides, *[0] * (4 - array.ndim)]
    return [id(np.ndarray), array.__array_interface__["data"][0], array.ndim, flags,
            id(array.dtype), *dims, *strides, 0, 0, 0]


def _samples() -> list[np.ndarray]:
    base = np.arange(64, dtype=np.float32).reshape(4, 16)
    read_only = np.zeros((3, 5), np.float64)
    read_only.flags.writeable = False
    misaligned = np.frombuffer(bytearray(40), np.uint8)[1:33].view(np.float32)
    return [base, base.T, base[1:, ::2], read_only, misaligned, np.zeros(7, np.int64),
            np.zeros((2, 3, 4, 5), np.int8), np.ones(())]


_verified: dict[str, bool] = {}


def verify_layout(probe) -> bool:
    """Whether the C probe reads sample objects as Python sees them (once per process)."""
    if "ok" not in _verified:
        _verified["ok"] = _check(probe)
    return _verified["ok"]


def _check(probe) -> bool:
    probe.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    probe.restype = None
    words = (ctypes.c_int64 * DTYPES)(*layout_words(), 0)
    state = ctypes.addressof(words)
    for array in _samples():
        mask = C_CONTIGUOUS | ALIGNED | WRITEABLE
        reads = _probe_reads(probe, state, array)
        reads[3] &= mask
        if reads != _expected_array(array):
            return False
    first, second = object(), 3.5
    pair = (first, second)
    reads = _probe_reads(probe, state, pair)
    return reads[:4] == [id(tuple), 2, id(first), id(second)]

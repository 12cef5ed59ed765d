"""What the Python code `interpret` generates calls at run time: dtype conversions, integer
wraparound, out-of-bounds errors, fresh allocations and the order of concurrent loops.

Values while interpreting: integers (and indices) are Python ints, wrapped to their dtype after
every arithmetic step; booleans are Python bools; float32 and float64 are numpy scalars (numpy
rounds every operation to the dtype); float16 and bfloat16 are computed in float32 and rounded
when cast or stored, as the C target does.
"""

from __future__ import annotations

import math
import random

import numpy as np

from sched.ir.dtype import bits, is_bool, is_float


class InterpretError(RuntimeError):
    """A program that has no defined result: a binding outside its domain, a bad argument."""


class OutOfBoundsError(IndexError):
    """An access outside its buffer. The message names the buffer, its shape, the indices (as
    written and as values), the block and the statement."""


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of an array holding a buffer of `dtype` (bfloat16 as its uint16 bits)."""
    return np.dtype("uint16" if dtype == "bfloat16" else dtype)


def wrap_source(dtype: str, text: str) -> str:
    """Python source for `text` (a Python int) wrapped to the integer `dtype`."""
    n = bits(dtype)
    mask = (1 << n) - 1
    if dtype.startswith("uint"):
        return f"(({text}) & {mask})"
    half = 1 << (n - 1)
    return f"(((({text}) + {half}) & {mask}) - {half})"


def wrap_int(value: int, dtype: str) -> int:
    n = bits(dtype)
    mask = (1 << n) - 1
    if dtype.startswith("uint"):
        return value & mask
    half = 1 << (n - 1)
    return ((value + half) & mask) - half


def round_bfloat16(value) -> np.float32:
    """`value` rounded to bfloat16 (nearest even, NaN kept), returned as a float32."""
    return bfloat16_to_float(float_to_bfloat16(value))


def float_max(a, b):
    """The C target's max: NaN wins (an uninitialised read shows), else the larger, `a` on
    ties (max(0.0, -0.0) is 0.0, max(-0.0, 0.0) is -0.0; numpy's maximum gives `b`)."""
    return b if b != b or b > a else a


def float_min(a, b):
    """The C target's min: NaN wins, else the smaller, `a` on ties."""
    return b if b != b or b < a else a


def float_to_bfloat16(value) -> int:
    """The uint16 bits of `value` rounded to bfloat16 (nearest even)."""
    with np.errstate(over="ignore"):            # beyond float32: infinite
        u = int(np.array(value, dtype=np.float32).view(np.uint32))
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return ((u >> 16) | 0x40) & 0xFFFF
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def bfloat16_to_float(bits16) -> np.float32:
    return np.array(int(bits16) << 16, dtype=np.uint32).view(np.float32)[()]


def compute_scalar(dtype: str):
    """The numpy scalar type values of float `dtype` are computed in."""
    return np.float64 if dtype == "float64" else np.float32


def to_dtype(value, dtype: str):
    """`value` (an int, bool or numpy float) converted to `dtype`: float -> int truncates
    toward zero, NaN gives 0 and a value beyond the int's range its nearest end (CUDA's
    conversion; sched's C code does the same, where C leaves it undefined), int -> int
    wraps, anything -> bool is `!= 0`, float16/bfloat16 round to their precision (kept in
    float32)."""
    if is_bool(dtype):
        return bool(value != 0)
    if is_float(dtype):
        with np.errstate(over="ignore"):        # beyond the type: infinite, as in C
            if dtype == "float16":
                return np.float32(np.float16(value))
            if dtype == "bfloat16":
                return round_bfloat16(value)
            if isinstance(value, int | np.integer) and not isinstance(value, bool) and \
                    abs(int(value)) > 2**53:
                # rounded once, as C converts an int64 (through float64 it rounded twice:
                # 2**55 + 2**31 + 1 became 3.6028797e16, audit helper-167)
                wide = np.int64 if int(value) < 2**63 else np.uint64
                return np.array(int(value), wide).astype(compute_scalar(dtype))[()]
            return compute_scalar(dtype)(value)
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return wrap_int(0, dtype)
        info = np.iinfo(dtype)
        if math.isinf(value):
            return wrap_int(int(info.max) if value > 0 else int(info.min), dtype)
        value = min(max(math.trunc(float(value)), int(info.min)), int(info.max))
    return wrap_int(int(value), dtype)


def shift_left(a: int, b: int, bits: int) -> int:
    """numpy's `a << b` on `bits`-bit integers (before wrapping): 0 for a count outside [0,
    bits), which C leaves undefined."""
    return a << b if 0 <= b < bits else 0


def shift_right(a: int, b: int, bits: int) -> int:
    """numpy's `a >> b` (arithmetic for a negative a): for a count outside [0, bits), -1 for
    a negative a, else 0."""
    return a >> b if 0 <= b < bits else (-1 if a < 0 else 0)


def popcount(a: int, dtype: str) -> int:
    """The 1 bits of integer `a`'s two's complement pattern in `dtype`'s width."""
    return bin(a & ((1 << bits(dtype)) - 1)).count("1")


def clz(a: int, dtype: str) -> int:
    """The leading 0 bits of integer `a`'s pattern in `dtype`'s width: the width for 0."""
    return bits(dtype) - (a & ((1 << bits(dtype)) - 1)).bit_length()


def reinterpret(value, source: str, target: str):
    """The bits of a `source` value as a `target` value of the same width (a 16-bit float
    rounded to its dtype first, as a store rounds it)."""
    return from_bits(to_bits(value, source), target)


def to_bits(value, dtype: str) -> int:
    """The bit pattern of a `dtype` value, as an unsigned int."""
    if dtype == "bfloat16":
        return float_to_bfloat16(value)
    if is_float(dtype):
        stored = np.array(value, dtype=dtype)
        return int(stored.view(f"uint{bits(dtype)}"))
    return value & ((1 << bits(dtype)) - 1)


def from_bits(pattern: int, dtype: str):
    """The `dtype` value of bit pattern `pattern` (an unsigned int), as the interpreter holds
    values of `dtype` (a 16-bit float in float32)."""
    if dtype == "bfloat16":
        return bfloat16_to_float(pattern)
    if is_float(dtype):
        value = np.array(pattern, dtype=f"uint{bits(dtype)}").view(dtype)[()]
        return np.float32(value) if dtype == "float16" else value
    return wrap_int(pattern, dtype)


def ldexp(x, exponent: int):
    """`x * 2**exponent` in x's float type, rounded once (libm's ldexp): inf beyond the
    range, a subnormal or 0 below it."""
    with np.errstate(all="ignore"):
        return np.ldexp(x, np.int32(exponent))


def truncated_div(a: int, b: int) -> int:
    """C's integer `/`: the quotient rounded toward zero; 0 by 0 (numpy's result)."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def floordiv(a: int, b: int) -> int:
    """Integer `//`, rounded down; 0 by 0 (numpy's result)."""
    return a // b if b else 0


def floormod(a: int, b: int) -> int:
    """Integer `%` with the divisor's sign; 0 by 0 (numpy's result)."""
    return a % b if b else 0


def float_floordiv(a, b):
    """Float `//` as numpy's (np.floor_divide: from fmod, exact), in the operands' type."""
    with np.errstate(all="ignore"):
        return np.floor_divide(a, b)


def float_floormod(a, b):
    """Float `%` as numpy's (np.remainder: fmod moved to the divisor's sign)."""
    with np.errstate(all="ignore"):
        return np.remainder(a, b)


def sigmoid(x):
    """With e = exp(-|x|), as the C and CUDA code: 1 / (1 + exp(-x)) gave 0 below x = -88.7
    in float32 where they give the denormal (audit helper-167)."""
    one = type(x)(1)
    e = np.exp(-np.abs(x))
    return one / (one + e) if x >= 0 else e / (one + e)


def rsqrt(x):
    return type(x)(1) / np.sqrt(x)


def erf(x):
    return type(x)(math.erf(float(x)))


def garbage(dtype: str):
    """The fill of a fresh allocation: NaN for floats, an unlikely value for integers, so that a
    read before any write shows in the result."""
    if is_float(dtype):
        return float_to_bfloat16(float("nan")) if dtype == "bfloat16" else np.nan
    if is_bool(dtype):
        return True
    return wrap_int(0x5A5A5A5A5A5A5A5A, dtype)


def allocate(size: int, dtype: str) -> np.ndarray:
    """A fresh flat array of `size` elements of `dtype`, filled with `garbage(dtype)`."""
    if size < 0:
        raise InterpretError(f"allocation of {size} elements")
    return np.full(size, garbage(dtype), dtype=numpy_dtype(dtype))


class LoopOrder:
    """The order in which a concurrent loop (parallel, vectorized, thread-bound) runs its
    iterations: "forward", "reverse" or "shuffle" (a new permutation at every execution of the
    loop, from `seed`), or "snapshot": forward, each iteration of a parallel or vectorized
    loop starting from the memory at the loop's entry, their changes applied in order at its
    end. A legal concurrent loop reads nothing another iteration writes, so this changes
    nothing; a read-modify-write of one element in several iterations keeps one update, as
    threads racing on it may (`B = B * 2 + A` rerun per iteration of an unbound loop gives
    the same result in every order, so only this shows it)."""

    ORDERS = ("forward", "reverse", "shuffle", "snapshot")

    def __init__(self, order: str, seed: int) -> None:
        if order not in self.ORDERS:
            raise ValueError(f"thread_order must be one of {', '.join(self.ORDERS)}, "
                             f"got {order!r}")
        self.order = order
        self.rng = random.Random(seed)

    def enter(self, arrays: tuple) -> _Snapshot | None:
        """At a parallel or vectorized loop: the state its iterations start from."""
        return _Snapshot(arrays) if self.order == "snapshot" else None

    @staticmethod
    def begin(snapshot: _Snapshot | None) -> None:
        if snapshot is not None:
            snapshot.restore()

    @staticmethod
    def end(snapshot: _Snapshot | None) -> None:
        if snapshot is not None:
            snapshot.record()

    @staticmethod
    def leave(snapshot: _Snapshot | None) -> None:
        if snapshot is not None:
            snapshot.apply()

    def __call__(self, start: int, extent: int, first: bool = False):
        if first and extent > 0:     # the first iteration, then the others in the order
            yield start
            yield from self(start + 1, extent - 1)
            return
        values = range(start, start + extent)
        if self.order in ("forward", "snapshot"):
            yield from values
        elif self.order == "reverse":
            yield from reversed(values)
        else:
            values = list(values)
            self.rng.shuffle(values)
            yield from values


class _Snapshot:
    """The memory at a concurrent loop's entry (`arrays`, flat), and the elements each
    iteration changed, in iteration order."""

    def __init__(self, arrays: tuple) -> None:
        self.arrays = arrays
        self.entry = [a.copy() for a in arrays]
        self.changes: list[tuple[int, np.ndarray, np.ndarray]] = []

    def restore(self) -> None:
        for array, entry in zip(self.arrays, self.entry):
            array[...] = entry

    def record(self) -> None:
        for k, (array, entry) in enumerate(zip(self.arrays, self.entry)):
            changed = array != entry
            if array.dtype.kind == "f":
                changed &= ~(np.isnan(array) & np.isnan(entry))
            where = np.nonzero(changed)[0]
            if where.size:
                self.changes.append((k, where, array[where].copy()))

    def apply(self) -> None:
        self.restore()
        for k, where, values in self.changes:
            self.arrays[k][where] = values

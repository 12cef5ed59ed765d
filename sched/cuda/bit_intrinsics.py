"""TVM's bit intrinsics in CUDA C: the C emitter's (sched/c/bit_intrinsics.py) with CUDA's
intrinsics, which NVRTC has without headers: `__popc`/`__popcll`, `__clz`/`__clzll` (32 and
64 for 0, as sched defines clz), and the bit casts `__float_as_uint`, `__uint_as_float`,
`__double_as_longlong`, `__longlong_as_double`, `__half_as_ushort`, `__ushort_as_half` and
their bfloat16 versions (a 16-bit float is computed in float: rounded to its type first).
The emulator (cuda/emu/include) defines the same names on the host.
"""

from __future__ import annotations

from sched.c.bit_intrinsics import BitCallEmitter
from sched.ir.dtype import is_float

# 16-bit floats: (float -> the type, the type -> its pattern, the pattern -> the type,
# the type -> float)
_HALVES = {"float16": ("__float2half_rn", "__half_as_ushort", "__ushort_as_half",
                       "__half2float"),
           "bfloat16": ("__float2bfloat16_rn", "__bfloat16_as_ushort", "__ushort_as_bfloat16",
                        "__bfloat162float")}


class CudaBitCalls(BitCallEmitter):
    """The CUDA spelling of `BitCallEmitter`'s counts and bit casts."""

    def popcount(self, pattern: str, width: int) -> str:
        return f"__popc{'ll' if width == 64 else ''}({pattern})"

    def count_leading_zeros(self, pattern: str, width: int) -> str:
        if width == 64:
            return f"__clzll((long long)({pattern}))"
        counted = f"__clz((int)({pattern}))"
        return counted if width == 32 else f"({counted} - {32 - width})"

    def to_bits(self, value: str, dtype: str) -> str:
        if dtype in _HALVES:
            to_half, as_bits, _, _ = _HALVES[dtype]
            return f"{as_bits}({to_half}({value}))"
        if dtype == "float32":
            return f"__float_as_uint({value})"
        if dtype == "float64":
            return f"((uint64_t)__double_as_longlong({value}))"
        return super().to_bits(value, dtype)

    def from_bits(self, pattern: str, dtype: str) -> str:
        if dtype in _HALVES:
            _, _, from_bits, to_float = _HALVES[dtype]
            return f"{to_float}({from_bits}({pattern}))"
        if dtype == "float32":
            return f"__uint_as_float({pattern})"
        if dtype == "float64":
            return f"__longlong_as_double((long long)({pattern}))"
        assert not is_float(dtype), dtype
        return super().from_bits(pattern, dtype)

"""TVM's bit intrinsics in C (sched/ir/bit_intrinsics.py defines them).

`T.popcount` is GCC's `__builtin_popcount` of the value's unsigned pattern; `T.clz` goes
through a helper that gives the width for 0, where `__builtin_clz(0)` is undefined
(`sched_clz_u32`); a narrower type is counted as its pattern zero-extended to 32 bits, less
the bits it added. `T.reinterpret` takes the source's unsigned pattern of its width and makes
the target from it; a float's pattern is copied with `__builtin_memcpy` (no aliasing rule
broken), a 16-bit float's from the value rounded to its type (`_Float16`, or bfloat16 by
`sched_f32_to_bf16`), as a store rounds it. `T.ldexp` is libm's (dtypes.math_call).

`BitCallEmitter` is a part of the C emitter; the CUDA one overrides the spelling of the
counts and bit casts with CUDA's intrinsics (sched/cuda/bit_intrinsics.py).
"""

from __future__ import annotations

from sched.c import dtypes
from sched.ir.dtype import bits, is_float
from sched.ir.nodes import REINTERPRET, Call

# helper names: sched_<op>_<type>, the ops dtypes.helper_source hands to `helper_source`
HELPER_OPS = ("clz", "tobits", "frombits")
_FLOAT_TYPES = {"f16": ("_Float16", "float", "uint16_t"), "f32": ("float", "float", "uint32_t"),
                "f64": ("double", "double", "uint64_t")}


def unsigned_type(dtype: str) -> str:
    """The C unsigned type of `dtype`'s width: what its bit pattern is held in."""
    return f"uint{bits(dtype)}_t"


def _float_short(dtype: str) -> str:
    return f"f{bits(dtype)}"


class BitCallEmitter:
    """T.popcount, T.clz and T.reinterpret for the C emitter (`self`: a `_CEmitter`)."""

    def expr_bit_call(self, node: Call, args: list[str]) -> str:
        """The C text (an atom) of bit intrinsic `node` on its printed `args`."""
        source = node.args[0].dtype
        if node.op == REINTERPRET:
            return self.from_bits(self.to_bits(args[0], source), node.dtype)
        pattern = f"({unsigned_type(source)})({args[0]})"
        if node.op == "popcount":
            return f"(({dtypes.storage_type(node.dtype)}){self.popcount(pattern, bits(source))})"
        return self.count_leading_zeros(pattern, bits(source))

    def popcount(self, pattern: str, width: int) -> str:
        """The 1 bits of unsigned `pattern` of `width` bits."""
        return f"__builtin_popcount{'ll' if width == 64 else ''}({pattern})"

    def count_leading_zeros(self, pattern: str, width: int) -> str:
        """The leading 0 bits of unsigned `pattern` of `width` bits (the width for 0), int32."""
        if width == 64:
            return f"{self.helper('sched_clz_u64')}({pattern})"
        counted = f"{self.helper('sched_clz_u32')}({pattern})"
        return counted if width == 32 else f"({counted} - {32 - width})"

    def to_bits(self, value: str, dtype: str) -> str:
        """The unsigned pattern of `value`, a `dtype` value as C computes it."""
        if dtype == "bfloat16":
            return f"{self.helper('sched_f32_to_bf16')}({value})"
        if is_float(dtype):
            return f"{self.helper(f'sched_tobits_{_float_short(dtype)}')}({value})"
        return f"({unsigned_type(dtype)})({value})"

    def from_bits(self, pattern: str, dtype: str) -> str:
        """The `dtype` value (as C computes it) of unsigned `pattern` of its width."""
        if dtype == "bfloat16":
            return f"{self.helper('sched_bf16_to_f32')}({pattern})"
        if is_float(dtype):
            return f"{self.helper(f'sched_frombits_{_float_short(dtype)}')}({pattern})"
        return f"(({dtypes.storage_type(dtype)})({pattern}))"


def helper_source(op: str, short: str) -> str:
    """The C definition of helper `sched_<op>_<short>` (op one of HELPER_OPS)."""
    name = f"sched_{op}_{short}"
    if op == "clz":
        ctype, width = ("uint64_t", 64) if short == "u64" else ("uint32_t", 32)
        builtin = "__builtin_clzll" if width == 64 else "__builtin_clz"
        return (f"static inline int32_t {name}({ctype} a) {{  /* {builtin}(0) is undefined */\n"
                f"    return a == 0 ? {width} : {builtin}(a);\n}}")
    stored, computed, pattern = _FLOAT_TYPES[short]
    if op == "tobits":
        return (f"static inline {pattern} {name}({computed} a) {{\n"
                f"    {stored} value = ({stored})a;\n    {pattern} bits;\n"
                f"    __builtin_memcpy(&bits, &value, sizeof bits);\n    return bits;\n}}")
    return (f"static inline {computed} {name}({pattern} bits) {{\n"
            f"    {stored} value;\n    __builtin_memcpy(&value, &bits, sizeof value);\n"
            f"    return ({computed})value;\n}}")

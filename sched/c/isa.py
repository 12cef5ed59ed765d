"""The vector instruction set the C compiler targets on this machine, and its width.

The C target compiles with `-march=native`, so the width of a SIMD register is what gcc
predefines for this host: `__AVX512F__` (64 bytes: one zmm register holds 16 fp32 lanes),
`__AVX2__`/`__AVX__` (32 bytes), `__SSE2__` (16), `__ARM_NEON` (16), SVE with a fixed
`__ARM_FEATURE_SVE_BITS`. Hosts differ between machines (Zen 3 with AVX2, Zen 4 with AVX-512):
detect, never assume.

    >>> isa = host_isa()               # e.g. VectorISA(name='avx2', vector_bytes=32)
    >>> isa.lanes("float32") == isa.vector_bytes // 4
    True
"""

from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass

from sched import env
from sched.errors import BuildError

ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1,
                 "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
                 "uint64": 8}

# (macro gcc predefines, name, bytes per vector register), widest first
_X86 = (("__AVX512F__", "avx512", 64), ("__AVX2__", "avx2", 32), ("__AVX__", "avx", 32),
        ("__SSE2__", "sse2", 16))
_ARM = (("__ARM_NEON", "neon", 16),)


@dataclass(frozen=True)
class VectorISA:
    """A vector instruction set: its name and the bytes one vector register holds."""

    name: str
    vector_bytes: int

    def lanes(self, dtype: str) -> int:
        """How many elements of `dtype` one vector register holds (1: no vectors)."""
        return max(1, self.vector_bytes // ELEMENT_BYTES.get(dtype, self.vector_bytes))


def isa_from_macros(macros: dict[str, str]) -> VectorISA:
    """The widest vector ISA that gcc's predefined `macros` (name -> value) announce."""
    if "__ARM_FEATURE_SVE" in macros:
        bits = macros.get("__ARM_FEATURE_SVE_BITS", "0")
        if bits.isdigit() and int(bits) > 0:
            return VectorISA("sve", int(bits) // 8)
    for macro, name, size in (*_X86, *_ARM):
        if macro in macros:
            return VectorISA(name, size)
    return VectorISA("scalar", 8)


def compiler_macros(compiler: str = "gcc", flags: tuple[str, ...] = ("-march=native",)) -> dict:
    """The macros `compiler` predefines with `flags` (`gcc -dM -E`)."""
    try:
        text = subprocess.run([compiler, *flags, "-dM", "-E", "-x", "c", os.devnull],
                              capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        raise BuildError(f"cannot run the C compiler '{compiler}': {error}; the 'c' target "
                         f"needs gcc on the PATH") from None
    macros = {}
    for line in text.splitlines():
        parts = line.split(maxsplit=2)
        if len(parts) >= 2 and parts[0] == "#define":
            macros[parts[1]] = parts[2] if len(parts) == 3 else ""
    return macros


@functools.cache
def detected_isa() -> VectorISA:
    """The widest vector ISA gcc targets with `-march=native` on this machine."""
    return isa_from_macros(compiler_macros())


def host_isa() -> VectorISA:
    """The vector ISA of the C target on this machine. `SCHED_VECTOR_BYTES` (16, 32 or 64)
    overrides the width, e.g. to test AVX2 code on an AVX-512 host."""
    forced = env.VECTOR_BYTES.value()
    detected = detected_isa()
    if forced:
        return VectorISA(f"{detected.name} (forced {forced} bytes)", forced)
    return detected

"""sched.c.isa: the vector ISA and width the C target emits for, detected from gcc."""

from __future__ import annotations

import pytest

from sched.c.isa import VectorISA, host_isa, isa_from_macros


@pytest.mark.parametrize("macros, expected", [
    ({"__SSE2__": "1", "__AVX__": "1", "__AVX2__": "1", "__AVX512F__": "1"},
     VectorISA("avx512", 64)),
    ({"__SSE2__": "1", "__AVX__": "1", "__AVX2__": "1"}, VectorISA("avx2", 32)),
    ({"__SSE2__": "1"}, VectorISA("sse2", 16)),
    ({"__ARM_NEON": "1"}, VectorISA("neon", 16)),
    ({"__ARM_NEON": "1", "__ARM_FEATURE_SVE": "1", "__ARM_FEATURE_SVE_BITS": "512"},
     VectorISA("sve", 64)),
    ({"__ARM_NEON": "1", "__ARM_FEATURE_SVE": "1"}, VectorISA("neon", 16)),  # length unknown
    ({}, VectorISA("scalar", 8)),
])
def test_widest_isa_from_the_compiler_macros(macros, expected):
    assert isa_from_macros(macros) == expected


def test_lanes_per_dtype():
    avx512 = VectorISA("avx512", 64)
    assert avx512.lanes("float32") == 16
    assert avx512.lanes("float64") == 8
    assert avx512.lanes("int8") == 64
    assert VectorISA("scalar", 8).lanes("float32") == 2


def test_host_detection_and_override(monkeypatch):
    monkeypatch.delenv("SCHED_VECTOR_BYTES", raising=False)
    detected = host_isa()
    assert detected.vector_bytes in (8, 16, 32, 64)
    monkeypatch.setenv("SCHED_VECTOR_BYTES", "16")
    assert host_isa().vector_bytes == 16
    assert "forced" in host_isa().name
    monkeypatch.setenv("SCHED_VECTOR_BYTES", "24")
    with pytest.raises(ValueError, match="16, 32 or 64"):
        host_isa()

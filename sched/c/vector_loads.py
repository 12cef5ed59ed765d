"""Masked vector loads: the lanes a mask selects, zero elsewhere, never touching memory of the
unselected lanes (a padded border may lie outside the buffer).

x86 has them as instructions: AVX `vmaskmovps/pd` (AVX2 `vpmaskmovd/q` for integers) for 16-
and 32-byte vectors, AVX-512 masked `vmovups` for 64-byte ones; the source chooses with the
preprocessor, so it is the same text on every host. Elsewhere (a 64-byte vector on an AVX2
host, NEON) a full vector load when every lane is selected, else a loop over the lanes.
"""

from __future__ import annotations

# (vector bytes, element dtype) -> (ISA macro, builtin element type, load builtin)
_MASK_LOADS = {
    (16, "float32"): ("__AVX__", "float", "__builtin_ia32_maskloadps"),
    (16, "float64"): ("__AVX__", "double", "__builtin_ia32_maskloadpd"),
    (16, "int32"): ("__AVX2__", "int", "__builtin_ia32_maskloadd"),
    (16, "int64"): ("__AVX2__", "long long", "__builtin_ia32_maskloadq"),
    (32, "float32"): ("__AVX__", "float", "__builtin_ia32_maskloadps256"),
    (32, "float64"): ("__AVX__", "double", "__builtin_ia32_maskloadpd256"),
    (32, "int32"): ("__AVX2__", "int", "__builtin_ia32_maskloadd256"),
    (32, "int64"): ("__AVX2__", "long long", "__builtin_ia32_maskloadq256"),
}
# AVX-512: (element type, mask test builtin, masked load builtin)
_AVX512_LOADS = {
    "float32": ("float", "int", "__builtin_ia32_ptestmd512", "__builtin_ia32_loadups512_mask"),
    "float64": ("double", "long long", "__builtin_ia32_ptestmq512",
                "__builtin_ia32_loadupd512_mask"),
    "int32": ("int", "int", "__builtin_ia32_ptestmd512", "__builtin_ia32_loaddqusi512_mask"),
    "int64": ("long long", "long long", "__builtin_ia32_ptestmq512",
              "__builtin_ia32_loaddqudi512_mask"),
}
_BYTES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8}


def masked_load_source(name: str, vtype: str, ctype: str, mtype: str, dtype: str,
                       lanes: int) -> str:
    """The C definition of `vtype name(const ctype* p, int64_t i, mtype m)`: the elements
    p[i + l] for the lanes l where m is nonzero, 0 in the others."""
    size = lanes * _BYTES[dtype]
    generic = (f"    int all = 1;\n"
               f"    for (int l = 0; l < {lanes}; ++l) all &= m[l] != 0;\n"
               f"    if (all) return *(const {vtype}*)(p + i);\n"
               f"    {vtype} r = {{0}};\n"
               f"    for (int l = 0; l < {lanes}; ++l) if (m[l]) r[l] = p[i + l];\n"
               f"    return r;\n")
    head = f"static inline {vtype} {name}(const {ctype}* p, int64_t i, {mtype} m) {{\n"
    if (size, dtype) in _MASK_LOADS:
        macro, element, builtin = _MASK_LOADS[(size, dtype)]
        mask_element = "int" if _BYTES[dtype] == 4 else "long long"
        fast = (f"    typedef {element} v __attribute__((vector_size({size})));\n"
                f"    typedef {mask_element} vm __attribute__((vector_size({size})));\n"
                f"    return ({vtype}){builtin}((const v*)(p + i), (vm)m);\n")
    elif size == 64:
        macro = "__AVX512F__"
        element, mask_element, test, builtin = _AVX512_LOADS[dtype]
        mask_type = "unsigned short" if lanes == 16 else "unsigned char"
        fast = (f"    typedef {element} v __attribute__((vector_size(64)));\n"
                f"    typedef {mask_element} vm __attribute__((vector_size(64)));\n"
                f"    {mask_type} k = {test}((vm)m, (vm)m, ({mask_type})-1);\n"
                f"    return ({vtype}){builtin}((const {element}*)(p + i), (v){{0}}, k);\n")
    else:
        return head + generic + "}\n"
    return f"{head}#if defined({macro})\n{fast}#else\n{generic}#endif\n}}\n"

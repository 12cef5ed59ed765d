"""The names TVM's current registry (tvm.tir.tensor_intrin.cuda) gives the tensor-core
intrinsics of cuda.py, and its helpers that pick a group of them, so that a TVM schedule
written against either generation of names runs unchanged:

- the wmma loads and stores name the shared scope they read or write: `..._shared` and
  `..._shared_dyn` (TVM's "shared.dyn", which sched reads as "shared": ir/nodes.py
  SCOPE_ALIASES), e.g. `wmma_load_16x16x16_f16_a_shared`,
  `wmma_load_16x16x16_s8_b_trans_shared_dyn`, `wmma_store_16x16x16_f32_shared_dyn`;
- `wmma_load_16x16x16_f16_a_trans` (`_shared`, `_shared_dyn`; `s8`, `bf16` alike): TVM's
  description of it is the plain 16x16 copy of the `_a` load (the fragment, A, is m x k); TVM
  tells load_matrix_sync the tile is column-major. sched computes what the description says
  (the copy): the same intrinsic as `_a`, its fragment's layout sched's choice;
- the mma.sync loads and stores from "shared.dyn": `mma_ldmatrix_f16_a_dyn` (and `_b`,
  `_trans`), `mma_store_16x16_f32_shared_dyn_`, and the `_simple_` stores TVM's group helper
  names (its stores written as loops: the same description);
- `get_wmma_intrin_group(...)` and `get_mma_intrin_group(...)`, TVM's signatures, returning
  the names of the group ({"init", "load_a", "load_b", "compute", "store"}); a group with an
  intrinsic sched does not have (fp8 mma.sync, int8 with A held k x m) is refused naming it.

Each name is the intrinsic it stands for, every form of it (mma_layout.py) included.

    >>> from sched.tensor_intrin.tvm_names import get_wmma_intrin_group
    >>> get_wmma_intrin_group("shared.dyn", "global", "float16", "float32", trans_b=True)["load_b"]
    'wmma_load_16x16x16_f16_b_trans_shared_dyn'
"""

from __future__ import annotations

from sched.schedule.tensor_intrin import TensorIntrin
from sched.tensor_intrin import cuda  # noqa: F401  (the intrinsics named here, registered)

_WMMA_IN = {"float16": "f16", "int8": "s8", "bfloat16": "bf16"}
_WMMA_OUT = {"float16": "f16", "float32": "f32", "int32": "s32"}
_MMA_IN = {"float16": "f16", "int8": "i8", "e4m3_float8": "e4m3", "e5m2_float8": "e5m2"}
_MMA_OUT = {"float16": "f16", "float32": "f32", "int32": "i32"}
_LOAD_SCOPES = ("shared", "shared.dyn")
_STORE_SCOPES = ("global", "shared", "shared.dyn")


def _alias(name: str, existing: str) -> None:
    """Register `name` as the intrinsic `existing`, with every form of it."""
    first, *others = TensorIntrin.forms(existing)
    TensorIntrin.register(name, first.desc, first.impl)
    for form in others:
        TensorIntrin.register_form(name, form.desc, form.impl)


def _register_aliases() -> None:
    for short in _WMMA_IN.values():
        for which in ("a", "b"):
            plain = f"wmma_load_16x16x16_{short}_{which}"
            if which == "a":           # the description is the `_a` copy (module doc)
                _alias(f"{plain}_trans", plain)
            for trans in ("", "_trans"):
                for scope in ("shared", "shared_dyn"):
                    _alias(f"{plain}{trans}_{scope}", f"{plain}{trans}")
    for short in _WMMA_OUT.values():
        _alias(f"wmma_store_16x16x16_{short}_shared_dyn", f"wmma_store_16x16x16_{short}_shared")
    for which in ("a", "b"):
        for trans in ("", "_trans"):
            _alias(f"mma_ldmatrix_f16_{which}{trans}_dyn", f"mma_ldmatrix_f16_{which}{trans}")
    for load in ("mma_ldmatrix_i8_a", "mma_ldmatrix_i8_b", "mma_ldmatrix_i8_b_trans"):
        _alias(f"{load}_dyn", load)
    for out in ("f32", "f16", "i32"):
        for scope, existing in (("global", "global"), ("shared", "shared"),
                                ("shared_dyn", "shared")):
            for suffix in ("_", "_simple_"):
                name = f"mma_store_16x16_{out}_{scope}{suffix}"
                if TensorIntrin.get(name, allow_missing=True) is None:
                    _alias(name, f"mma_store_16x16_{out}_{existing}")


_register_aliases()


def _check(argument: str, value, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"argument {argument!r}: expected one of "
                         f"{', '.join(repr(a) for a in allowed)}, got {value!r}")


def _known(group: dict[str, str], helper: str) -> dict[str, str]:
    missing = [f"{role} {name!r}" for role, name in group.items()
               if TensorIntrin.get(name, allow_missing=True) is None]
    if missing:
        raise ValueError(f"{helper}: sched has no intrinsic {', '.join(missing)} (TVM's name "
                         f"for this group); the tensor-core intrinsics sched has: "
                         f"sched/tensor_intrin/cuda.py")
    return group


def get_wmma_intrin_group(load_scope: str, store_scope: str, in_dtype: str, out_dtype: str,
                          trans_b: bool) -> dict[str, str]:
    """The names of the wmma m16n16k16 intrinsics for operands of `in_dtype` ("float16",
    "int8"; sched's "bfloat16" too) read from `load_scope` ("shared", "shared.dyn"),
    accumulated in `out_dtype` ("float16", "float32", "int32") and stored to `store_scope`
    ("global", "shared", "shared.dyn"), B held n x k where `trans_b` (TVM's helper)."""
    _check("load_scope", load_scope, _LOAD_SCOPES)
    _check("store_scope", store_scope, _STORE_SCOPES)
    _check("in_dtype", in_dtype, tuple(_WMMA_IN))
    _check("out_dtype", out_dtype, tuple(_WMMA_OUT))
    operand, out = _WMMA_IN[in_dtype], _WMMA_OUT[out_dtype]
    trans = "_trans" if trans_b else ""
    load, store = load_scope.replace(".", "_"), store_scope.replace(".", "_")
    return _known({
        "init": f"wmma_fill_16x16x16_{out}",
        "load_a": f"wmma_load_16x16x16_{operand}_a_{load}",
        "load_b": f"wmma_load_16x16x16_{operand}_b{trans}_{load}",
        "compute": f"wmma_sync_16x16x16_{operand}{operand}{out}{trans}",
        "store": f"wmma_store_16x16x16_{out}_{store}",
    }, "get_wmma_intrin_group")


def get_mma_intrin_group(load_scope: str, store_scope: str, in_dtype: str, out_dtype: str,
                         trans_a: bool, trans_b: bool, not_use_mma_store_intrinic: bool = True,
                         store_to_smem_dtype: str | None = None) -> dict[str, str]:
    """The names of the mma.sync m16n8k16 intrinsics (ldmatrix loads from `load_scope`, the
    mma in `out_dtype`, the store to `store_scope`; A held k x m where `trans_a`, B held n x k
    where `trans_b`), TVM's helper and arguments (`not_use_mma_store_intrinic`: the
    `_simple_` store, the same description). sched has fp16 operands with an fp32 or fp16
    accumulator and int8 operands with an int32 one (on the GPU with B held n x k)."""
    _check("load_scope", load_scope, _LOAD_SCOPES)
    _check("store_scope", store_scope, _STORE_SCOPES)
    _check("in_dtype", in_dtype, tuple(_MMA_IN))
    _check("out_dtype", out_dtype, tuple(_MMA_OUT))
    operand, out = _MMA_IN[in_dtype], _MMA_OUT[out_dtype]
    stored = _MMA_OUT[store_to_smem_dtype] if store_to_smem_dtype else out
    dyn = "_dyn" if load_scope == "shared.dyn" else ""
    suffix = "simple_" if not_use_mma_store_intrinic else ""
    return _known({
        "init": f"mma_fill_16x16_{out}",
        "load_a": f"mma_ldmatrix_{operand}_a{'_trans' if trans_a else ''}{dyn}",
        "load_b": f"mma_ldmatrix_{operand}_b{'_trans' if trans_b else ''}{dyn}",
        "compute": f"mma_{operand}{operand}{out}{'_trans_a' if trans_a else ''}"
                   f"{'_trans_b' if trans_b else ''}",
        "store": f"mma_store_16x16_{stored}_{store_scope.replace('.', '_')}_{suffix}",
    }, "get_mma_intrin_group")

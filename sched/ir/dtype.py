"""Data types of the IR, spelled as strings the way TVM spells them.

Every expression has one of these dtypes. `index` is the dtype of loop variables, block
iteration variables, buffer indices and symbolic dims.
"""

from __future__ import annotations

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
DTYPES = (*FLOAT_DTYPES, *INT_DTYPES, "bool")

INDEX_DTYPE = "int32"


def check_dtype(dtype: str) -> str:
    """Return `dtype` if it is known, or raise a ValueError listing the known ones."""
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}: expected one of {', '.join(DTYPES)}")
    return dtype


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES


def is_bool(dtype: str) -> bool:
    return dtype == "bool"


def bits(dtype: str) -> int:
    if dtype == "bool":
        return 8
    return int("".join(c for c in dtype if c.isdigit()))


def min_value(dtype: str) -> int | float:
    """The smallest value of `dtype`: the identity of a `max` reduction."""
    if is_float(dtype):
        return float("-inf")
    if dtype.startswith("uint") or dtype == "bool":
        return 0
    return -(2 ** (bits(dtype) - 1))


# the largest finite value of each float dtype (T.max_value; T.min_value is its negation)
LARGEST_FINITE = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
                  "float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}


def max_value(dtype: str) -> int | float:
    """The largest value of `dtype`: the identity of a `min` reduction."""
    if is_float(dtype):
        return float("inf")
    if dtype == "bool":
        return 1
    if dtype.startswith("uint"):
        return 2 ** bits(dtype) - 1
    return 2 ** (bits(dtype) - 1) - 1

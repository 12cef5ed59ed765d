"""The names isl sees: every identifier in isl text that sched builds comes from this module.

User names (loops, iteration variables, symbolic dims, blocks, buffers) never go into isl text
as they are: a name may be an isl keyword in any case (`NAN`, `infinity`, `And`), hold
characters isl does not accept (`C.1`, `C-1`, `ü`), or collide with a name sched generates
(an iteration variable `a0` against an access's index names). The rules:

- a variable keeps its name when it is a plain identifier (an ASCII letter, then letters,
  digits, `_`) that isl reads back as that identifier; any other name is escaped to
  `_x<escaped>` (see `escape`). Both are pure functions of the name, so two models of two
  versions of a function (before and after a step) name the same variable alike, as isl
  needs to compare them.
- a statement is `S_<block>` (its init `I_<block>`) and a buffer's storage `B_<storage>` when
  the name is made of ASCII letters, digits and `_`; otherwise `SX_`, `IX_`, `BX_` followed by
  the escaped name. The two forms cannot meet (`S_...` against `SX...`), and the escape is
  one-to-one, so distinct blocks (`C.1`, `C-1`, `C_1`) never share a tuple.
- names sched makes for itself inside isl text (an access's element, a time entry, the key of
  an instance) are `local(kind, k)`: `_a0`, `_t3`, `_k1`. No variable name becomes one: a
  plain name starts with a letter and an escaped one with `_x`.

The model keeps maps from these names back to the IR (`PolyModel.statement_of_tuple`,
`PolyModel.buffer_of_tuple`) for messages; nothing parses a user name out of an isl name.
"""

from __future__ import annotations

import functools
import re

import islpy as isl

_PLAIN_VARIABLE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_PLAIN_TUPLE = re.compile(r"[A-Za-z0-9_]+")
_ESCAPE_KEEPS = re.compile(r"[A-Za-z0-9]")


def escape(name: str) -> str:
    """`name` as letters and digits only, one-to-one: letters and digits stay, every other
    character becomes `_<hex code>_` (`C.1` -> `C_2e_1`, `a_b` -> `a_5f_b`)."""
    return "".join(c if _ESCAPE_KEEPS.fullmatch(c) else f"_{ord(c):x}_" for c in name)


@functools.lru_cache(maxsize=4096)
def _isl_reads_back(name: str) -> bool:
    """Whether isl reads `name` as an identifier (not a keyword, in any case)."""
    try:
        found = isl.Set(f"[{name}] -> {{ [{name}_0] : {name}_0 >= {name} }}")
    except isl.Error:
        return False
    return found.get_dim_name(isl.dim_type.param, 0) == name \
        and found.get_dim_name(isl.dim_type.set, 0) == f"{name}_0"


@functools.lru_cache(maxsize=4096)
def variable(name: str) -> str:
    """The isl identifier of a variable named `name` (a loop, an iteration variable, a
    symbolic dim or scalar parameter)."""
    if _PLAIN_VARIABLE.fullmatch(name) and _isl_reads_back(name):
        return name
    return "_x" + escape(name)


def isl_name(var) -> str:
    """The isl identifier of IR variable `var` (see `variable`)."""
    return variable(var.name)


def _tuple(prefix: str, name: str) -> str:
    if _PLAIN_TUPLE.fullmatch(name):
        return f"{prefix}_{name}"
    return f"{prefix}X_{escape(name)}"


def statement_tuple(block_name: str, is_init: bool = False) -> str:
    """The isl tuple of a block's body (`S_C`) or init (`I_C`)."""
    return _tuple("I" if is_init else "S", block_name)


def buffer_tuple(storage_name: str) -> str:
    """The isl tuple of the storage named `storage_name` (`B_A`): every view of one storage
    shares it."""
    return _tuple("B", storage_name)


def local(kind: str, index: int) -> str:
    """A name sched makes for itself inside isl text: `_a0` (an access's element), `_t0` (a
    time entry), `_k0` (an instance key), `_o` ... never equal to a variable's name."""
    assert kind and kind[0] != "x" and kind.isalpha(), kind
    return f"_{kind}{index}"

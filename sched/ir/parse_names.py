"""The `T.` names of TVMScript calls, shared by the parser's modules."""

from __future__ import annotations

import ast

# newer TVM spellings of the same constructs (TVM main calls a TensorIR block an "sblock")
ALIASES = {"sblock": "block", "sblock_attr": "block_attr"}


def t_name(node: ast.AST) -> str | None:
    """`"axis.remap"` for the ast of `T.axis.remap`, None for anything not under `T.`."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id == "T" and parts:
        name = ".".join(reversed(parts))
        return ALIASES.get(name, name)
    return None


def call_name(node: ast.AST) -> str | None:
    """The `T.` name of a call (`"block"` for `T.block("C")`), None otherwise."""
    return t_name(node.func) if isinstance(node, ast.Call) else None

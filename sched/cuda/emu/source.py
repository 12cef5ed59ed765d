"""The CUDA source as the emulator compiles it: each `__shared__` declaration made a reference
to the running block's shared memory, every line where it was.

CUDA gives each thread block its own copy of a `__shared__` variable; C++ has no such storage.
A declaration `__shared__ [__align__(n)] T name[d1][d2]...;` (the form sched's code generator
writes, and the common hand-written one) becomes, on its line,

    static ::sched_emu::SharedSlot sched_emu_slot_name = {-1}; auto& name =
        ::sched_emu::shared_variable<T[d1][d2]>(sched_emu_slot_name, n, <line>);

(the slot holds the variable's offset, the same in every block; `shared_variable` adds the
running block's base), and `extern __shared__ T name[];` (dynamic shared memory) becomes a
pointer to the start of the block's shared memory. At namespace scope, where a reference
would be bound once for the whole program, the name becomes a macro for the same expression
(and a `#line` keeps the numbering). A declaration of another form (several names in one, a
type the pattern does not read) is left to the header's fallback: one static copy.
"""

from __future__ import annotations

import re

from sched.cuda.emu.ptx import rewrite_inline_ptx

_DECLARATION = re.compile(
    r"(?P<extern>\bextern\s+)?(?:\bstatic\s+)?\b__shared__\s+"
    r"(?:__align__\s*\(\s*(?P<align>\d+)\s*\)\s*)?"
    r"(?P<type>(?:(?:const|volatile|unsigned|signed|long|short)\s+)*[A-Za-z_][\w:]*"
    r"(?:\s*<[^;<>]*>)?(?:\s*\*)*)\s*"
    r"(?:__align__\s*\(\s*(?P<align_after>\d+)\s*\)\s*)?"
    r"(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\[\];]*\]\s*)*);")
_TOKENS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|[{}]',
                     re.S)


def emulated_source(source: str) -> str:
    """`source` with its `__shared__` declarations rewritten (see the module doc) and its
    inline PTX made calls (`sched.cuda.emu.ptx`)."""
    source = rewrite_inline_ptx(source)
    out, position, depth = [], 0, 0
    depths = _brace_depths(source)
    for match in _DECLARATION.finditer(source):
        if _inside_comment_or_string(source, match.start()):
            continue
        out.append(source[position:match.start()])
        depth = depths(match.start())
        out.append(_rewrite(match, depth == 0, source.count("\n", 0, match.end()) + 1))
        position = match.end()
    out.append(source[position:])
    return "".join(out)


def _rewrite(match: re.Match, namespace_scope: bool, line: int) -> str:
    name, ctype = match["name"], " ".join(match["type"].split())
    dims = "".join(match["dims"].split())
    align = match["align"] or match["align_after"] or "1"
    if match["extern"]:
        if dims != "[]":
            return match[0]                    # `extern __shared__ T x;`: not dynamic memory
        value = f"reinterpret_cast<{ctype}*>(::sched_emu::shared_base)"
        if namespace_scope:
            return f"\n#define {name} ({value})\n#line {line + 1}"
        return f"{ctype}* const {name} = {value};"
    slot = f"sched_emu_slot_{name}"
    value = f"::sched_emu::shared_variable<{ctype}{dims}>({slot}, {align}, {line})"
    if namespace_scope:
        return (f"static ::sched_emu::SharedSlot {slot} = {{-1}};\n#define {name} ({value})\n"
                f"#line {line + 1}")
    return f"static ::sched_emu::SharedSlot {slot} = {{-1}}; auto& {name} = {value};"


def _brace_depths(source: str):
    """A function from a position of `source` to the depth of braces around it (comments and
    literals skipped)."""
    marks: list[tuple[int, int]] = []            # (position, depth after it)
    depth = 0
    for token in _TOKENS.finditer(source):
        if token[0] == "{":
            depth += 1
        elif token[0] == "}":
            depth -= 1
        else:
            continue
        marks.append((token.start(), depth))

    def depth_at(position: int) -> int:
        current = 0
        for start, after in marks:
            if start >= position:
                break
            current = after
        return current
    return depth_at


def _inside_comment_or_string(source: str, position: int) -> bool:
    for token in _TOKENS.finditer(source):
        if token.start() > position:
            return False
        if token[0] not in "{}" and token.start() <= position < token.end():
            return True
    return False

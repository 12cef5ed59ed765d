"""Inline PTX in CUDA source, as calls of the emulator's reference functions (emu_ptx.h).

g++ cannot run `asm volatile("mma.sync...")`: each inline-assembly statement is read (GCC's
extended form: template strings, then outputs, inputs and clobbers after colons) and, when
its instruction is one the emulator knows, replaced by a call on its first line, the lines
it spanned kept (empty) so that the kernel's numbering does not move:

    mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 (and .f16.f16.f16.f16)
    mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32
    ldmatrix.sync.aligned.m8n8.{x1,x2,x4}[.trans].shared[::cta].b16
    cp.async.{ca,cg}.shared[::cta].global[.L2::128B] (with or without src-size)
    cp.async.commit_group, cp.async.wait_group N, cp.async.wait_all
    cvta.to.shared.u64 (with or without cvt.u32.u64): a shared memory address

Any other inline assembly is a BuildError naming it and listing these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sched.errors import BuildError

KNOWN = ("mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32",
         "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
         "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
         "ldmatrix.sync.aligned.m8n8.{x1,x2,x4}[.trans].shared.b16",
         "cp.async.{ca,cg}.shared.global", "cp.async.commit_group", "cp.async.wait_group",
         "cp.async.wait_all", "cvta.to.shared.u64")

_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\s*(?:volatile|__volatile__)?\s*\(")
_STRING = re.compile(r'"((?:\\.|[^"\\])*)"')
_OPERAND = re.compile(r'^\s*"(?P<constraint>[^"]*)"\s*\((?P<expr>.*)\)\s*$', re.S)


@dataclass(frozen=True)
class _Statement:
    template: str            # the instruction text, escapes decoded, whitespace collapsed
    outputs: list[str]       # C expressions
    inputs: list[str]


def rewrite_inline_ptx(source: str) -> str:
    """`source` with each inline PTX statement as a call (see the module doc)."""
    out, position = [], 0
    for match in _ASM.finditer(source):
        if match.start() < position:
            continue
        close = _closing_paren(source, match.end() - 1)
        end = close + 1
        semicolon = re.match(r"\s*;", source[end:])
        if semicolon:
            end += semicolon.end()
        line = source.count("\n", 0, match.start()) + 1
        statement = _parse(source[match.end():close], line)
        call = _call(statement, line)
        out += [source[position:match.start()], call, "\n" * source.count("\n", match.start(), end)]
        position = end
    out.append(source[position:])
    return "".join(out)


def _closing_paren(text: str, opening: int) -> int:
    depth, k = 0, opening
    while k < len(text):
        char = text[k]
        if char == '"':
            k = _STRING.match(text, k).end()
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return k
        k += 1
    raise BuildError("cuda-emu: an asm statement without its closing parenthesis")


def _split_top_level(text: str, separator: str) -> list[str]:
    parts, depth, start, k = [], 0, 0, 0
    while k < len(text):
        char = text[k]
        if char == '"':
            k = _STRING.match(text, k).end()
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[start:k])
            start = k + 1
        k += 1
    parts.append(text[start:])
    return parts


def _parse(body: str, line: int) -> _Statement:
    sections = _split_top_level(body, ":")
    template = "".join(bytes(s, "utf-8").decode("unicode_escape")
                       for s in _STRING.findall(sections[0]))
    operands = []
    for section in sections[1:3]:
        exprs = []
        for operand in _split_top_level(section, ","):
            if not operand.strip():
                continue
            match = _OPERAND.match(operand)
            if match is None:
                raise BuildError(f"cuda-emu: line {line}: cannot read the asm operand "
                                 f"{operand.strip()!r}")
            exprs.append(match["expr"].strip())
        operands.append(exprs)
    while len(operands) < 2:
        operands.append([])
    return _Statement(" ".join(template.split()), operands[0], operands[1])


def _operand(statement: _Statement, reference: str) -> tuple[str, bool]:
    """The C expression of `%k` and whether it is an output."""
    k = int(reference.lstrip("%"))
    if k < len(statement.outputs):
        return statement.outputs[k], True
    return statement.inputs[k - len(statement.outputs)], False


def _list(statement: _Statement, text: str, as_pointers: bool) -> str:
    items = []
    for reference in re.findall(r"%\d+", text):
        expr, output = _operand(statement, reference)
        items.append(f"&({expr})" if as_pointers and output else f"({expr})")
    return "{" + ", ".join(items) + "}"


_MMA = re.compile(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.(f16|bf16)\.\1\.f32 "
                  r"\{([^}]*)\} ?, ?\{([^}]*)\} ?, ?\{([^}]*)\} ?, ?\{([^}]*)\} ?;?$")
_MMA_F16 = re.compile(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f16\.f16\.f16\.f16 "
                      r"\{([^}]*)\} ?, ?\{([^}]*)\} ?, ?\{([^}]*)\} ?, ?\{([^}]*)\} ?;?$")
_MMA_S8 = re.compile(r"mma\.sync\.aligned\.m16n8k32\.row\.col\.s32\.s8\.s8\.s32 "
                     r"\{([^}]*)\} ?, ?\{([^}]*)\} ?, ?\{([^}]*)\} ?, ?\{([^}]*)\} ?;?$")
_LDMATRIX = re.compile(r"ldmatrix\.sync\.aligned\.m8n8\.x([124])(\.trans)?\.shared(?:::cta)?"
                       r"\.b16 ?\{([^}]*)\} ?, ?\[ ?(%\d+) ?\] ?;?$")
_CP_ASYNC = re.compile(r"cp\.async\.(?:ca|cg)\.shared(?:::cta)?\.global(?:\.L2::\d+B)? "
                       r"\[ ?(%\d+) ?\] ?, ?\[ ?(%\d+) ?\] ?, ?(\d+|%\d+)(?: ?, ?(\d+|%\d+))? ?;?$")
_WAIT_GROUP = re.compile(r"cp\.async\.wait_group (\d+|%\d+) ?;?$")
_CVTA = re.compile(r"\{? ?\.reg \.u64 (\w+) ?; ?cvta\.to\.shared\.u64 \1, (%\d+) ?; ?"
                   r"cvt\.u32\.u64 (%\d+), \1 ?; ?\}?$|cvta\.to\.shared\.u(?:32|64) (%\d+), "
                   r"(%\d+) ?;?$")


def _value(statement: _Statement, text: str) -> str:
    return f"({_operand(statement, text)[0]})" if text.startswith("%") else text


def _call(statement: _Statement, line: int) -> str:
    template = statement.template.strip()
    prefix = "::sched_emu::ptx::"
    if match := _MMA.match(template):
        d, a, b, c = (match[k] for k in range(2, 6))
        return (f"{prefix}mma_m16n8k16({line}, {'true' if match[1] == 'bf16' else 'false'}, "
                f"{_list(statement, d, True)}, {_list(statement, a, False)}, "
                f"{_list(statement, b, False)}, {_list(statement, c, False)});")
    if match := _MMA_F16.match(template):
        d, a, b, c = (match[k] for k in range(1, 5))
        return (f"{prefix}mma_m16n8k16_f16({line}, {_list(statement, d, True)}, "
                f"{_list(statement, a, False)}, {_list(statement, b, False)}, "
                f"{_list(statement, c, False)});")
    if match := _MMA_S8.match(template):
        d, a, b, c = (match[k] for k in range(1, 5))
        return (f"{prefix}mma_m16n8k32_s8({line}, {_list(statement, d, True)}, "
                f"{_list(statement, a, False)}, {_list(statement, b, False)}, "
                f"{_list(statement, c, False)});")
    if match := _LDMATRIX.match(template):
        return (f"{prefix}ldmatrix<{match[1]}>({line}, {'true' if match[2] else 'false'}, "
                f"{_list(statement, match[3], True)}, {_value(statement, match[4])});")
    if match := _CP_ASYNC.match(template):
        size = _value(statement, match[3])
        source_size = _value(statement, match[4]) if match[4] else size
        return (f"{prefix}cp_async({line}, {_value(statement, match[1])}, "
                f"{_value(statement, match[2])}, {size}, {source_size});")
    if re.fullmatch(r"cp\.async\.commit_group ?;?", template):
        return "::sched_emu::pipeline_commit();"
    if match := _WAIT_GROUP.match(template):
        return f"::sched_emu::pipeline_wait_prior({_value(statement, match[1])});"
    if re.fullmatch(r"cp\.async\.wait_all ?;?", template):
        return "::sched_emu::pipeline_commit(); ::sched_emu::pipeline_wait_prior(0);"
    if match := _CVTA.match(template):
        target, pointer = (match[3], match[2]) if match[3] else (match[4], match[5])
        return (f"({_operand(statement, target)[0]}) = "
                f"{prefix}shared_address({_value(statement, pointer)});")
    raise BuildError(f"cuda-emu: line {line}: inline PTX {template!r} is not emulated; the "
                     f"emulator knows {', '.join(KNOWN)}")

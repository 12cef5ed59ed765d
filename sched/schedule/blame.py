"""A compile error narrowed to the schedule step that made the offending lines.

A toolchain failure (NVRTC, nvcc, g++ for cuda-emu, gcc for the C target) is a BuildError
whose message marks each line the compiler named: `>   25 |     C[...] = ...;`. Each such line
is mapped back to the IR of the scheduled function: the loops whose variables it names, and
the blocks writing the buffer it stores to (or, for a line that stores nothing, the blocks
under the loops it names). The trace is replayed on the function the schedule started from,
and after each step every block and loop is compared with the step before: a block changes
when its body, regions or allocations change or it moves to other loops; a loop when its
kind, binding, bounds or annotations change, or it appears. The step that last changed one of
them made the offending lines.

    message = narrow_compile_error(str(error), sch.original_func, sch.trace, sch.func)
    # the offending lines come from block 'C' (line 25: loops 'i_1', 'k'); the step that
    # last changed them is step 6 of 7:
    #     sch.bind(l4, "threadIdx.x")        (it changed loop 'i_1')
"""

from __future__ import annotations

import re

from sched.ir.functor import IRVisitor
from sched.ir.nodes import BlockRealize, For, PrimFunc

_MARKED_LINE = re.compile(r"^>\s*(\d+) \| (.*)$", re.M)
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_STORED = re.compile(r"^\s*(?:\*\(\w+\*\)&)?([A-Za-z_]\w*)\s*\[[^=]*\]\s*=[^=]")


class _Signatures(IRVisitor):
    """What each block and loop of a function is: blocks by name (the block and the loops
    around it), loops by variable name (kind, binding, bounds, annotations), and the blocks
    under each loop."""

    def __init__(self) -> None:
        self.blocks: dict[str, tuple] = {}
        self.loops: dict[str, tuple] = {}
        self.blocks_under: dict[str, set[str]] = {}
        self.writers: dict[str, set[str]] = {}
        self.path: list[For] = []

    def visit_For(self, loop: For) -> None:
        self.loops[loop.loop_var.name] = (loop.kind, loop.thread_tag, loop.min, loop.extent,
                                          loop.annotations)
        self.path.append(loop)
        self.visit_children(loop)
        self.path.pop()

    def visit_BlockRealize(self, realize: BlockRealize) -> None:
        block = realize.block
        self.blocks[block.name] = (realize, tuple((lp.loop_var.name, lp.kind, lp.thread_tag)
                                                  for lp in self.path))
        for loop in self.path:
            self.blocks_under.setdefault(loop.loop_var.name, set()).add(block.name)
        for region in block.writes:
            self.writers.setdefault(region.buffer.storage_name, set()).add(block.name)
        self.visit_children(realize)


def _signatures(func: PrimFunc) -> _Signatures:
    found = _Signatures()
    found.visit(func.body)
    return found


def offending_entities(message: str, func: PrimFunc) -> list[tuple[int, set[str], set[str]]]:
    """For each line the message marks: (line number, blocks, loops) of `func` it comes from."""
    known = _signatures(func)
    found = []
    for number, text in _MARKED_LINE.findall(message):
        names = set(_IDENTIFIER.findall(text))
        loops = {n for n in names if n in known.loops}
        stored = _STORED.match(text)
        blocks = set(known.writers.get(stored[1], ())) if stored else set()
        if not blocks and not stored:
            for loop in loops:
                blocks |= known.blocks_under.get(loop, set())
        if blocks or loops:
            found.append((int(number), blocks, loops))
    return found


def _extern_functions_named(message: str, original: PrimFunc) -> list[str]:
    """The functions that the original function calls opaquely (T.call_extern) and that an
    error line of `message` names in quotes (`identifier "f" is undefined`)."""
    from sched.ir.extern import is_opaque_call
    from sched.ir.functor import collect
    from sched.ir.nodes import Call, StringImm

    called = {call.args[0].value for call in collect(original.body, Call)
              if is_opaque_call(call) and call.args and isinstance(call.args[0], StringImm)}
    named = set(re.findall(r'error[^\n]*?"([A-Za-z_]\w*)"', message))
    return sorted(called & named)


def narrow_compile_error(message: str, original: PrimFunc, trace, func: PrimFunc) -> str | None:
    """The paragraph naming the step of `trace` (a Schedule's, replayed on `original`; `func`
    is its result) that last changed the blocks and loops the compile error `message` marks,
    or None when the message marks no line that maps to them."""
    entities = offending_entities(message, func)
    if not entities:
        return None
    written = _extern_functions_named(message, original)
    if written:
        return (f"the offending lines call {', '.join(repr(n) for n in written)}, which the "
                f"function as written calls (T.call_extern): no schedule step made that call; "
                f"give its code to the build (sched.build(..., extern_c=...)) or fix its name")
    blocks = set().union(*(b for _, b, _ in entities))
    loops = set().union(*(lp for _, _, lp in entities))
    changed_by: dict[tuple[str, str], int] = {}
    states = [_signatures(original)]

    def record(index: int, schedule) -> None:
        now = _signatures(schedule.func)
        before = states[-1]
        for name in blocks:
            if now.blocks.get(name) != before.blocks.get(name):
                changed_by[("block", name)] = index
        for name in loops:
            if now.loops.get(name) != before.loops.get(name):
                changed_by[("loop", name)] = index
        states.append(now)

    from sched.schedule.schedule import Schedule

    try:
        trace.replay(Schedule(original), on_step=record)
    except Exception:                  # noqa: BLE001 - an explanation must not hide the error
        return None
    where = "; ".join(
        f"line {number}: " + ", ".join([*(f"block '{b}'" for b in sorted(bl)),
                                        *(f"loop '{lp}'" for lp in sorted(lo))])
        for number, bl, lo in entities)
    if not changed_by:
        return (f"the offending lines come from the function as written ({where}): no "
                f"schedule step changed those blocks or loops")
    last = max(changed_by.values())
    what = ", ".join(f"{kind} '{name}'" for (kind, name), index in sorted(changed_by.items())
                     if index == last)
    steps = trace.instructions
    earlier = sorted({i for i in changed_by.values() if i != last})
    lines = [f"the offending lines come from {where}; the step that last changed them is "
             f"step {last + 1} of {len(steps)}:",
             f"    {steps[last].to_python()}        (it changed {what})"]
    for index in reversed(earlier):
        others = ", ".join(f"{kind} '{name}'" for (kind, name), i in
                           sorted(changed_by.items()) if i == index)
        lines.append(f"  ({others} last changed by step {index + 1}: "
                     f"{steps[index].to_python()})")
    return "\n".join(lines)

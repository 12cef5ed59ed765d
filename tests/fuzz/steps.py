"""Random schedule steps from every primitive, each either taken or refused with ScheduleError
(the primitives beyond the loop and block families below are drawn by steps_more.py).

`apply_random_step(sch, data)` draws a block, then a primitive and its arguments among the
block's loops and the function's blocks, and applies it. Anything but a ScheduleError
propagates: a crash in a step is a finding.
"""

from __future__ import annotations

from hypothesis import strategies as st

import sched
from sched.schedule.state import block_names
from tests.fuzz.known_holes import allowed
from tests.fuzz.steps_more import EXTRA_STEPS, apply_extra_step

LOOP_STEPS = ("split", "fuse", "reorder", "tile", "parallel", "vectorize", "unroll", "bind")
BLOCK_STEPS = ("compute_at", "reverse_compute_at", "compute_inline", "reverse_compute_inline",
               "cache_read", "cache_write", "set_scope", "storage_align",
               "decompose_reduction", "rfactor")
STEPS = LOOP_STEPS + BLOCK_STEPS + EXTRA_STEPS
THREAD_AXES = ("blockIdx.x", "blockIdx.y", "threadIdx.x", "threadIdx.y")
SCOPES = ("global", "shared", "local")


def describe(step: str, *args) -> str:
    """A step as the Python a reproducer runs (`sch.split(l3, factors=[None, 2])`)."""
    return f"{step}({', '.join(args)})"


def apply_random_step(sch: sched.Schedule, data, log: list[str],
                      checkpoint: dict | None = None, features=()) -> None:
    """Draws and applies one step; appends what it ran to `log` (as Python text). A step made
    of two (a split before an rfactor) sets `checkpoint["func"]` to the function between
    them: a refusal of the second must leave that one. `features` are the program's (steps
    known to be unsound on some feature are left out, see known_holes.py)."""
    checkpoint = {} if checkpoint is None else checkpoint
    steps = [s for s in STEPS
             if allowed(s) and all(allowed(f"{s}+{feature}") for feature in features)]
    names = [b for b in block_names(sch.func) if b != "root"]
    if not names:
        return
    name = data.draw(st.sampled_from(names))
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    step = data.draw(st.sampled_from(steps))
    b = f"sch.get_block({name!r})"

    def loop_text(loop) -> str:
        return f"sch.get_loops({b})[{loops.index(loop)}]"

    if step in EXTRA_STEPS:
        apply_extra_step(sch, data, log, step, name, checkpoint)
        return
    if step in LOOP_STEPS and not loops:
        return
    if step == "split":
        loop = data.draw(st.sampled_from(loops))
        factor = data.draw(st.integers(1, 5))
        log.append(f"sch.split({loop_text(loop)}, factors=[None, {factor}])")
        sch.split(loop, factors=[None, factor])
    elif step == "fuse" and len(loops) >= 2:
        start = data.draw(st.integers(0, len(loops) - 2))
        log.append(f"sch.fuse({loop_text(loops[start])}, {loop_text(loops[start + 1])})")
        sch.fuse(loops[start], loops[start + 1])
    elif step == "reorder" and len(loops) >= 2:
        chosen = data.draw(st.lists(st.sampled_from(loops), min_size=2, max_size=len(loops),
                                    unique=True))
        log.append(f"sch.reorder({', '.join(loop_text(lp) for lp in chosen)})")
        sch.reorder(*chosen)
    elif step == "tile" and len(loops) >= 2:
        start = data.draw(st.integers(0, len(loops) - 2))
        x, y = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
        log.append(f"sch.tile({loop_text(loops[start])}, {loop_text(loops[start + 1])}, "
                   f"{x}, {y})")
        sch.tile(loops[start], loops[start + 1], x, y)
    elif step in ("parallel", "vectorize", "unroll"):
        loop = data.draw(st.sampled_from(loops))
        log.append(f"sch.{step}({loop_text(loop)})")
        getattr(sch, step)(loop)
    elif step == "bind":
        loop = data.draw(st.sampled_from(loops))
        axis = data.draw(st.sampled_from(THREAD_AXES))
        log.append(f"sch.bind({loop_text(loop)}, {axis!r})")
        sch.bind(loop, axis)
    elif step in ("compute_at", "reverse_compute_at"):
        related = (sch.get_consumers(block) if step == "compute_at"
                   else sch.get_producers(block))
        related_names = [r.name for r in related if r.name in names]
        other_name = data.draw(st.sampled_from(related_names or names))
        other_loops = sch.get_loops(sch.get_block(other_name))
        if not other_loops:
            return
        k = data.draw(st.integers(0, len(other_loops) - 1))
        log.append(f"sch.{step}({b}, sch.get_loops(sch.get_block({other_name!r}))[{k}])")
        getattr(sch, step)(block, other_loops[k])
    elif step in ("compute_inline", "reverse_compute_inline"):
        log.append(f"sch.{step}({b})")
        getattr(sch, step)(block)
    elif step == "cache_read":
        index, scope = data.draw(st.integers(0, 2)), data.draw(st.sampled_from(SCOPES))
        log.append(f"sch.cache_read({b}, {index}, {scope!r})")
        sch.cache_read(block, index, scope)
    elif step == "cache_write":
        scope = data.draw(st.sampled_from(SCOPES))
        log.append(f"sch.cache_write({b}, 0, {scope!r})")
        sch.cache_write(block, 0, scope)
    elif step == "set_scope":
        index, scope = data.draw(st.integers(0, 1)), data.draw(st.sampled_from(SCOPES))
        log.append(f"sch.set_scope({b}, {index}, {scope!r})")
        sch.set_scope(block, index, scope)
    elif step == "storage_align":
        axis, factor = data.draw(st.integers(0, 1)), data.draw(st.sampled_from([2, 4, 8]))
        offset = data.draw(st.integers(0, 1))
        log.append(f"sch.storage_align({b}, 0, {axis}, {factor}, {offset})")
        sch.storage_align(block, 0, axis, factor, offset)
    elif step == "decompose_reduction" and loops:
        loop = data.draw(st.sampled_from(loops))
        log.append(f"sch.decompose_reduction({b}, {loop_text(loop)})")
        sch.decompose_reduction(block, loop)
    elif step == "rfactor" and loops:
        if data.draw(st.booleans()):          # usually a split reduce loop
            factor = data.draw(st.integers(2, 3))
            log.append(f"sch.split({loop_text(loops[-1])}, factors=[None, {factor}])")
            sch.split(loops[-1], factors=[None, factor])
            checkpoint["func"] = sch.func
            loops = sch.get_loops(block)
        loop = data.draw(st.sampled_from(loops[-2:]))
        axis = data.draw(st.integers(0, 1))
        log.append(f"sch.rfactor({loop_text(loop)}, {axis})")
        sch.rfactor(loop, axis)

"""A random GPU schedule built the way people write one, each step taken or refused.

Random steps (steps.py) seldom reach the shapes GPU schedules are made of, and the
autoscheduler's sketches apply their GPU tiling to few random programs. This recipe goes block
by block, consumers first, and draws among the moves of a hand-written GPU schedule:

- a block of its own: its first loop split in three, the outer part bound to blockIdx.x, the
  inner to threadIdx.x (one block count and one thread count per function: one kernel); its
  output, when it is an intermediate, perhaps in shared memory (blocks that read what other
  thread blocks wrote are refused);
- a producer computed at a bound consumer's blockIdx loop, its output in shared memory (or
  kept global), then its own loop spread over threadIdx.x: two stages of one thread block,
  with a barrier between them where they share data;
- an input staged in shared memory (`cache_read`) at the block's blockIdx loop and fetched
  cooperatively; the output accumulated in a local buffer (`cache_write`) and written back
  under the thread loop.

Every step goes through the schedule's checks like any other: a refused step is logged and
skipped. `log` gets runnable Python for a reproducer.
"""

from __future__ import annotations

from hypothesis import strategies as st

import sched
from sched.errors import ScheduleError
from sched.schedule.state import block_names

THREADS = (2, 3, 4, 8)
BLOCKS = (1, 2, 3)


class _Recipe:
    def __init__(self, sch: sched.Schedule, data, log: list[str]) -> None:
        self.sch, self.data, self.log = sch, data, log
        self.threads = data.draw(st.sampled_from(THREADS))    # one kernel: one extent
        self.blocks = data.draw(st.sampled_from(BLOCKS))      # per thread axis

    def draw(self, strategy):
        return self.data.draw(strategy)

    def loops(self, name: str):
        return self.sch.get_loops(self.sch.get_block(name))

    def loop_text(self, name: str, loop) -> str:
        names = [lp.name for lp in self.loops(name)]
        return f"sch.get_loops(sch.get_block({name!r}))[{names.index(loop.name)}]"

    def step(self, text: str, run):
        """Runs one step (logged as `text`); its result, or None when refused."""
        self.log.append(text)
        try:
            return run()
        except ScheduleError:
            self.log[-1] = f"try:\n    {text}\nexcept ScheduleError:\n    pass   # refused"
            return None

    def spread(self, name: str, loop, axis: str | None):
        """Split `loop` of block `name` over the function's thread count (threadIdx.x, the
        inner part) and, with `axis`, its block count (the outer part, on `axis`): one kernel
        gives each axis one extent. The outer loop (or the rest, left serial), or None."""
        factors = [self.blocks, None, self.threads] if axis else [None, self.threads]
        text = self.loop_text(name, loop)
        parts = self.step(f"parts = sch.split({text}, factors={factors})",
                          lambda: self.sch.split(loop, factors=factors))
        if parts is None:
            return None
        outer, inner = parts[0], parts[-1]
        self.step(f"sch.bind({self.loop_text(name, inner)}, 'threadIdx.x')",
                  lambda: self.sch.bind(inner, "threadIdx.x"))
        if axis is not None and self.step(f"sch.bind({self.loop_text(name, outer)}, {axis!r})",
                                          lambda: self.sch.bind(outer, axis)) is None:
            return None
        return outer

    def free_loop(self, name: str):
        """The first loop of block `name` not bound to a thread axis and not under one bound
        to threadIdx (None if there is none)."""
        loops = self.loops(name)
        for k, loop in enumerate(loops):
            if any(self.kind(lp) == "threadIdx" for lp in loops[:k]):
                return None
            if self.kind(loop) is None:
                return loop
        return None

    def kind(self, loop) -> str | None:
        from sched.schedule.state import find_loop

        node = find_loop(self.sch.func, loop.name, "get_loops")
        if node.kind != "thread_binding":
            return None
        return "threadIdx" if node.thread_tag.startswith("threadIdx") else "blockIdx"

    def block_loop(self, name: str):
        loops = self.loops(name)
        return next((lp for lp in loops if self.kind(lp) == "blockIdx"), None)

    # -- the moves -------------------------------------------------------------------------

    def schedule_block(self, name: str) -> None:
        consumers = [c.name for c in self.sch.get_consumers(self.sch.get_block(name))
                     if self.block_loop(c.name) is not None]
        if consumers and self.draw(st.booleans()):
            self.into_consumer(name, self.draw(st.sampled_from(consumers)))
        elif self.block_loop(name) is None:
            loop = self.free_loop(name)
            if loop is not None:
                self.spread(name, loop, "blockIdx.x")
            if self.draw(st.booleans()):
                self.step(f"sch.set_scope(sch.get_block({name!r}), 0, 'shared')",
                          lambda: self.sch.set_scope(self.sch.get_block(name), 0, "shared"))
        if self.block_loop(name) is None:
            return
        if self.draw(st.integers(0, 2)) == 0:
            self.stage_input(name)
        if self.draw(st.integers(0, 3)) == 0:
            self.accumulate_locally(name)

    def into_consumer(self, name: str, consumer: str) -> None:
        anchor = self.block_loop(consumer)
        b = f"sch.get_block({name!r})"
        if self.step(f"sch.compute_at({b}, {self.loop_text(consumer, anchor)})",
                     lambda: self.sch.compute_at(self.sch.get_block(name), anchor)) is None:
            return
        scope = self.draw(st.sampled_from(("shared", "shared", "global")))
        if scope != "global":
            self.step(f"sch.set_scope({b}, 0, {scope!r})",
                      lambda: self.sch.set_scope(self.sch.get_block(name), 0, scope))
        loop = self.free_loop(name)
        if loop is not None:
            self.spread(name, loop, None)

    def stage_input(self, name: str) -> None:
        block = self.sch.get_block(name)
        index = self.draw(st.integers(0, 2))
        b = f"sch.get_block({name!r})"
        cache = self.step(f"cache = sch.cache_read({b}, {index}, 'shared')",
                          lambda: self.sch.cache_read(block, index, "shared"))
        if cache is None:
            return
        anchor = self.block_loop(name)
        if self.step(f"sch.compute_at(cache, {self.loop_text(name, anchor)})",
                     lambda: self.sch.compute_at(cache, anchor)) is None:
            return
        loop = self.free_loop(cache.name)
        if loop is not None:
            self.spread(cache.name, loop, None)

    def accumulate_locally(self, name: str) -> None:
        block = self.sch.get_block(name)
        b = f"sch.get_block({name!r})"
        local = self.step(f"local = sch.cache_write({b}, 0, 'local')",
                          lambda: self.sch.cache_write(block, 0, "local"))
        if local is None:
            return
        loops = self.loops(name)
        threads = [lp for lp in loops if self.kind(lp) == "threadIdx"]
        if threads:
            anchor = threads[-1]
            self.step(f"sch.reverse_compute_at(local, {self.loop_text(name, anchor)})",
                      lambda: self.sch.reverse_compute_at(local, anchor))


def apply_gpu_recipe(sch: sched.Schedule, data, log: list[str]) -> None:
    """Schedules every block of `sch` for the GPU with the recipe's drawn moves (see the module
    doc), consumers first. A crash (anything but a ScheduleError) propagates: a finding."""
    recipe = _Recipe(sch, data, log)
    for name in reversed([b for b in block_names(sch.func) if b != "root"]):
        if name in block_names(sch.func):
            recipe.schedule_block(name)

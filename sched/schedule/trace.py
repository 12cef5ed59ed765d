"""The trace: every schedule step, with its random decisions, replayable and printable.

    b0 = sch.get_block("C")
    l1, l2, l3 = sch.get_loops(b0)
    l4, l5 = sch.split(l1, factors=[None, 32])
    v6 = sch.sample_perfect_tile(l2, n=2, max_innermost_factor=16, decision=[4, 8])

`print(sch.trace)` prints that: runnable Python, given `sch = sched.Schedule(func)` (with
the import of `T` first where an argument is an expression, `T.float32(0)`).
`trace.apply(func)` replays it on a fresh function; `trace.to_json()` / `Trace.from_json(text)`
store it. A sampling step keeps its decision: `trace.with_decision(index, value)` gives a trace
that replays with another one, which is how the autoscheduler mutates schedules.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass, field

import numpy as np

from sched.errors import ScheduleError
from sched.ir.nodes import Expr

# Steps whose result is a list of handles (the others return one handle or nothing).
LIST_RESULTS = {"get_loops", "get_child_blocks", "get_producers", "get_consumers", "split",
                "sample_perfect_tile", "tile", "get_output_blocks", "loop_partition",
                "sample_partitioned_tile", "cache_inplace", "cache_index"}


@dataclass(frozen=True)
class RV:
    """A reference, inside a trace, to a handle made by an earlier step: `l4`, `b0`."""

    name: str


@dataclass(frozen=True)
class Instruction:
    """One schedule step: `outputs = sch.kind(*inputs, **attrs)`."""

    kind: str
    inputs: tuple          # RVs, numbers, strings, None, or lists of those
    attrs: tuple[tuple[str, object], ...] = ()
    outputs: tuple[str, ...] = ()
    decision: object = None

    def to_python(self) -> str:
        args = [_python(value) for value in self.inputs]
        args += [f"{key}={_python(value)}" for key, value in self.attrs]
        if self.decision is not None:
            args.append(f"decision={_python(self.decision)}")
        call = f"sch.{self.kind}({', '.join(args)})"
        if not self.outputs:
            return call
        trailing = "," if self.kind in LIST_RESULTS and len(self.outputs) == 1 else ""
        return f"{', '.join(self.outputs)}{trailing} = {call}"


def _python(value) -> str:
    if isinstance(value, RV):
        return value.name
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_python(v) for v in value) + "]"
    if isinstance(value, Expr):             # as T writes it (sched.script.T), not a repr
        return value.script()
    value = _plain(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'          # `nan` and `inf` are no Python names
    return repr(value)


def _plain(value):
    """A numpy number as the Python number it holds (`np.float32(0.2)` is no name a replay
    knows, nor JSON)."""
    return value.item() if isinstance(value, np.generic) else value


# arguments that are objects of their own (an index map): JSON key -> reader of the value;
# such an object has `json_key` and `to_json()`, and its class registers its reader here
JSON_READERS: dict = {}


def _to_json(value):
    if isinstance(value, RV):
        return {"rv": value.name}
    if isinstance(value, list | tuple):
        return [_to_json(v) for v in value]
    if hasattr(value, "json_key"):
        return {value.json_key: value.to_json()}
    return _plain(value)


def _from_json(value):
    if isinstance(value, dict) and set(value) == {"rv"}:
        return RV(value["rv"])
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in JSON_READERS:
        key = next(iter(value))
        return JSON_READERS[key](value[key])
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def _freeze(value):
    return tuple(_freeze(v) for v in value) if isinstance(value, list) else value


@dataclass
class Trace:
    """The steps of a schedule, in order."""

    instructions: list[Instruction] = field(default_factory=list)

    def append(self, instruction: Instruction) -> None:
        self.instructions.append(instruction)

    def show(self) -> None:
        """Print the steps as a script (TVM's `trace.show()`)."""
        print(self)

    def __str__(self) -> str:
        text = "\n".join(i.to_python() for i in self.instructions)
        # an expression argument (a pad value, a predicate) is written as scripts write it
        if re.search(r"\bT\.", text):
            text = f"from sched.script import T\n\n{text}"
        return text

    def __len__(self) -> int:
        return len(self.instructions)

    def __eq__(self, other) -> bool:
        return isinstance(other, Trace) and self.instructions == other.instructions

    def apply(self, func, schedule_class=None, concurrency_checked_at_end: bool = False):
        """Replay the steps on `func`; returns the new Schedule. With
        `concurrency_checked_at_end`, the rule of concurrent loops is asked once, of the
        function at the end (`Schedule.concurrency_checked_at_end`: as the autoscheduler
        applies its sketches), instead of after each step."""
        from sched.schedule.schedule import Schedule

        schedule = (schedule_class or Schedule)(func)
        if not concurrency_checked_at_end:
            return self.replay(schedule)
        with schedule.concurrency_checked_at_end():
            return self.replay(schedule)

    def replay(self, schedule, on_step=None, on_call=None):
        """Apply the steps to `schedule` (of the function the trace started from, with no
        step applied yet, or with steps that keep the trace's handles valid); returns it.
        `on_step(index, schedule)`, when given, is called after each step;
        `on_call(instruction, handles, func_before, schedule)` too, with the handles the step
        took and made (BlockRV, LoopRV) and the function before it."""
        handles: dict[str, object] = {}

        def resolve(value):
            if isinstance(value, RV):
                return handles[value.name]
            if isinstance(value, list | tuple):
                return [resolve(v) for v in value]
            return value
        for index, instruction in enumerate(self.instructions):
            method = getattr(schedule, instruction.kind)
            kwargs = {key: resolve(value) for key, value in instruction.attrs}
            if instruction.decision is not None:
                kwargs["decision"] = resolve(instruction.decision)
            inputs = [resolve(v) for v in instruction.inputs]
            before = schedule.func
            result = method(*inputs, **kwargs)
            outputs = list(result) if instruction.kind in LIST_RESULTS else [result]
            if instruction.outputs and len(outputs) != len(instruction.outputs):
                # another decision before it (a compute location) changed the nest: the
                # trace's later handles do not exist (the fuzzer: a KeyError on 'l66')
                raise ScheduleError(instruction.kind, f"replay: step {index} made "
                                    f"{len(outputs)} handles where the trace has "
                                    f"{len(instruction.outputs)}: a decision before it changed "
                                    f"the schedule this step sees")
            for name, handle in zip(instruction.outputs, outputs):
                handles[name] = handle
            if on_step is not None:
                on_step(index, schedule)
            if on_call is not None:
                on_call(instruction, [*_flat(inputs), *_flat(list(kwargs.values())),
                                      *outputs], before, schedule)
        return schedule

    def to_json(self) -> str:
        return json.dumps([{"kind": i.kind, "inputs": _to_json(list(i.inputs)),
                            "attrs": {k: _to_json(v) for k, v in i.attrs},
                            "outputs": list(i.outputs), "decision": _to_json(i.decision)}
                           for i in self.instructions], indent=1)

    @classmethod
    def from_json(cls, text: str) -> Trace:
        instructions = []
        for item in json.loads(text):
            instructions.append(Instruction(
                item["kind"], tuple(_freeze(_from_json(v)) for v in item["inputs"]),
                tuple((k, _freeze(_from_json(v))) for k, v in item["attrs"].items()),
                tuple(item["outputs"]), _freeze(_from_json(item["decision"]))))
        return cls(instructions)

    def with_decision(self, index: int, decision) -> Trace:
        """This trace with the decision of step `index` (a sampling step) replaced."""
        instruction = self.instructions[index]
        if instruction.decision is None:
            raise ValueError(f"step {index} ({instruction.kind}) makes no random decision")
        steps = list(self.instructions)
        steps[index] = dataclasses.replace(instruction, decision=_freeze(decision))
        return Trace(steps)


def _flat(values) -> list:
    """`values` with lists and tuples in it spread out."""
    found = []
    for value in values:
        found.extend(_flat(value) if isinstance(value, list | tuple) else [value])
    return found

"""A refused step's evidence: the violated dependence with one concrete pair of instances
(`C[v_i=3] reads A[2] written by C[v_i=2]`), and the ScheduleError that shows it with the IR and
the loop marked. Shared by the order checks (legality.py), the runs rule (runs.py) and the
concurrency rule (concurrency.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import islpy as isl

from sched.ir.nodes import PrimFunc
from sched.polyhedral.dependences import (
    Dependence,
)
from sched.polyhedral.isl_text import first_point
from sched.polyhedral.model import Statement


@dataclass(frozen=True)
class Violation:
    """A dependence a schedule would break, with one concrete pair of instances."""

    reason: str
    dependence: Dependence | None = None
    example: str = ""
    over_budget: bool = False   # isl ran out of operations: the step is unproven, not wrong

    def __str__(self) -> str:
        if self.dependence is None:
            return self.reason
        dep = self.dependence
        exact = "" if dep.exact else " (conservative: the model over-approximates an access)"
        return f"{dep.kind} dependence on '{dep.buffer}': {self.example}{exact}"


def _values(statement: Statement, point_set: isl.Set) -> str:
    point = point_set.sample_point()
    values = [point.get_coordinate_val(isl.dim_type.set, d).to_python()
              for d in range(point_set.dim(isl.dim_type.set))]
    names = [iv.var.name for iv in statement.block.iter_vars]
    inner = ", ".join(f"{n}={v}" for n, v in zip(names, values))
    # keys of non-affine bindings (statements.py): which run, where variables alone do not say
    keys = ", ".join(f"{key} = {v}" for key, v in zip(statement.keys, values[len(names):]))
    run = f" (the run at {keys})" if keys else ""
    return f"{statement.block.name}{' (init)' if statement.is_init else ''}[{inner}]{run}"


def describe_instance_pair(dep: Dependence, pair: isl.Map) -> str:
    """`C[v_i=3] reads A[2] written by C[v_i=2]` for one pair in `pair` (a sub-relation)."""
    point = first_point(pair.wrap())     # the first pair: the easiest to read
    single = isl.Set.from_point(point).unwrap()
    params = [f"{single.get_dim_name(isl.dim_type.param, i)} = "
              f"{point.get_coordinate_val(isl.dim_type.param, i).to_python()}"
              for i in range(single.dim(isl.dim_type.param))]
    source_set, sink_set = single.domain(), single.range()
    source_access = dep.source.writes if dep.kind in ("flow", "output") else dep.source.reads
    sink_access = dep.sink.reads if dep.kind == "flow" else dep.sink.writes
    elements = source_access.intersect_domain(isl.UnionSet.from_set(source_set)).range() \
        .intersect(sink_access.intersect_domain(isl.UnionSet.from_set(sink_set)).range())
    element = ""
    if not elements.is_empty():
        element_point = elements.sample_point()
        element_set = isl.Set.from_point(element_point)
        coords = [element_point.get_coordinate_val(isl.dim_type.set, d).to_python()
                  for d in range(element_set.dim(isl.dim_type.set))]
        element = f"{dep.buffer}[{', '.join(str(c) for c in coords)}]"
    source, sink = _values(dep.source, source_set), _values(dep.sink, sink_set)
    verb = {"flow": f"reads {element} written by",
            "anti": f"overwrites {element} read before by",
            "output": f"writes {element} written before by"}[dep.kind]
    where = f" (with {', '.join(params)})" if params else ""
    return f"{sink} {verb} {source}{where}"


def mark_loop(script: str, loop: str) -> str:
    """The printed IR with the line of loop `loop` marked."""
    lines = script.splitlines()
    for index, line in enumerate(lines):
        match = re.match(r"\s*for (.+?) in ", line)
        if match and loop in [name.strip() for name in match.group(1).split(",")]:
            lines[index] = f"{line}  # <-- loop '{loop}'"
            break
    return "\n".join(lines)


def schedule_error(primitive: str, violation: Violation, func: PrimFunc,
                   loop: str | None = None, alternatives: tuple[str, ...] = (),
                   render: bool = True):
    """The ScheduleError for a step refused because of `violation`: the reason, the dependence
    with its counterexample, the IR with `loop` marked, and the alternatives."""
    from sched.errors import ScheduleError

    script = None
    if render:
        script = func.script()
        if loop is not None:
            script = mark_loop(script, loop)
    return ScheduleError(primitive, violation.reason,
                         dependence=str(violation) if violation.dependence else None,
                         ir=script, alternatives=alternatives, render=render)



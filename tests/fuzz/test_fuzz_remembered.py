"""What a schedule step takes from the caches of earlier steps (the verifier's answer per block
realize, the model's statements per block, the index of blocks and loops per block realize)
must be what a fresh computation gives: after every step of random schedules of random
programs, each is computed with the caches the earlier steps filled and again after
`clear_caches()`, and the two must be equal."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import sched
from sched.errors import ScheduleError, UnmodelledError
from sched.ir.verify import _Verifier
from sched.polyhedral import clear_caches
from sched.polyhedral.model import build_model
from sched.schedule.state import index
from tests.fuzz.profile import fuzz_settings
from tests.fuzz.programs import programs
from tests.fuzz.steps import apply_random_step


class _Same:
    """An isl object compared as a set or relation (two texts of one set are equal)."""

    def __init__(self, value) -> None:
        self.value = value

    def __eq__(self, other) -> bool:
        return isinstance(other, _Same) and self.value.is_equal(other.value)

    def __repr__(self) -> str:
        return str(self.value)


def _model_summary(func) -> tuple | str:
    try:
        model = build_model(func)
    except UnmodelledError as error:
        return str(error)
    return (tuple((s.name, tuple(s.time), tuple(s.constraints), s.domain_texts,
                   _Same(s.domain), _Same(s.reads), _Same(s.writes),
                   tuple((lp.var.name, lp.position, lp.kind) for lp in s.loops),
                   tuple((a.buffer.name, a.is_write, _Same(a.relation)) for a in s.accesses),
                   s.exact, len(s.unseen))
                  for s in model.statements.values()),
            tuple(model.notes), tuple((storage, tuple(b.name for b in views))
                                      for storage, views in model.views.items()))


def _index_summary(func) -> tuple:
    found = index(func.body)
    return (tuple(found.block_order), tuple(found.loop_order),
            tuple((name, id(node)) for name, node in found.blocks.items()),
            tuple((name, id(node)) for name, node in found.loops.items()),
            tuple(sorted(found.parent.items(), key=lambda item: item[0])))


def _summary(func) -> tuple:
    return (_Verifier(func).run(func), _model_summary(func), _index_summary(func))


def _fresh_summary(func) -> tuple:
    clear_caches()             # (every remembered answer: the index's too)
    return _summary(func)


@fuzz_settings(fraction=0.5)
@given(programs(), st.data())
def test_steps_see_what_a_fresh_analysis_sees(program, data):
    try:
        sch = sched.Schedule(program.func, seed=0)
    except ScheduleError:
        return
    log: list[str] = []
    for _ in range(data.draw(st.integers(1, 6))):
        try:
            apply_random_step(sch, data, log, {}, program.features)
        except ScheduleError:
            continue
        remembered = _summary(sch.func)
        fresh = _fresh_summary(sch.func)
        assert remembered == fresh, f"{_first_difference(remembered, fresh)}\n" + "\n".join(log)


def _first_difference(a, b, path: str = "") -> str:
    if isinstance(a, tuple | list) and isinstance(b, tuple | list) and len(a) == len(b):
        for position, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _first_difference(x, y, f"{path}[{position}]")
    return f"at {path}: {a!r} (remembered) != {b!r} (fresh)"

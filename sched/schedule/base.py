"""The state every schedule primitive works on: the function, handles, the trace.

A Schedule holds the current PrimFunc (`sch.func`) and the trace of the steps that made it. Each
primitive method checks its arguments, calls the pure function of its family module (loops.py,
loop_kinds.py, placement.py, reduction.py, memory.py, sampling.py), which checks legality with
polyhedral/ and returns the new function, and then records the step. A step that raises changes
neither the function nor the trace.

Handles belong to the schedule that made them (and to its copies, for the handles made before
the copy, as in TVM): each Schedule has an identity, each handle the identity and serial number
of its maker, and a handle from another schedule is refused, never applied to a loop of the same
name.

Handles name what they point to: a `BlockRV` a block name, a `LoopRV` a loop variable name. Both
are unique in the function (the Schedule renames duplicate loop names when it starts), so a handle
stays valid across steps until a primitive replaces its loop (split and fuse do; the error then
says which handles replaced it). A step that renames a block (decompose_reduction: `C` becomes
`C_update`, as in TVM) records the rename, and the handles made before it follow to the new name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import itertools
import random
import sys
import warnings

import islpy as isl

from sched.errors import ConservativeAnalysisWarning, ScheduleError
from sched.ir.module import IRModule
from sched.ir.nodes import BlockRealize, For, PrimFunc
from sched.ir.verify import verify
from sched.schedule.opaque_blocks import check_block_not_opaque, check_opaque_blocks_kept
from sched.schedule.ordered_axes import check_block_keeps_order
from sched.schedule.outer_regions import outer_regions_refreshed
from sched.schedule.state import (
    find_block,
    find_loop,
    path_to,
    uniquify_loop_names,
)
from sched.schedule.trace import RV, Instruction, Trace

_IDENTITIES = itertools.count()      # one identity per Schedule (and per copy)
# steps that change only how loops run (kind, thread tag, annotations): the analysis of the
# function before carries over to the function after
_RELABEL_LOOPS = ("parallel", "vectorize", "bind", "unroll", "annotate", "unannotate")


def _analysis_calls() -> int | None:
    """How many times the dependence analysis was asked so far (None if it cannot say): a step
    that asked was judged on it."""
    module = importlib.import_module("sched.polyhedral.dependences")
    asked = getattr(module, "asked", None)
    return None if asked is None else asked()


def _callers_level() -> int:
    """The stacklevel of the first frame outside sched, for a warning at the user's call
    (however deep in sched, through `unmodelled.refuse_unmodelled` too, it was raised)."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_globals.get("__name__", "").startswith("sched."):
        frame, level = frame.f_back, level + 1
    return level


class BlockRV:
    """A handle to a block, by name."""

    __slots__ = ("name", "rv", "generation", "owner")

    def __init__(self, name: str, rv: str, generation: int = 0) -> None:
        self.name, self.rv, self.generation = name, rv, generation
        self.owner: tuple[int, int] | None = None    # (schedule identity, serial): see _owns

    def __repr__(self) -> str:
        return f"BlockRV({self.name!r})"


class LoopRV:
    """A handle to a loop, by the name of its variable."""

    __slots__ = ("name", "rv", "generation", "owner")

    def __init__(self, name: str, rv: str, generation: int = 0) -> None:
        self.name, self.rv, self.generation = name, rv, generation
        self.owner: tuple[int, int] | None = None    # (schedule identity, serial): see _owns

    def __repr__(self) -> str:
        return f"LoopRV({self.name!r})"


class IntRV(int):
    """An integer a sampling step chose: an int that the trace refers to by name, so that a
    replay with another decision feeds the new value to the steps that used it."""

    rv: str

    def __new__(cls, value: int, rv: str) -> IntRV:
        obj = super().__new__(cls, value)
        obj.rv = rv
        return obj


def _freeze(value):
    if isinstance(value, BlockRV | LoopRV | IntRV):
        return RV(value.rv)
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


class ScheduleBase:
    """The state of a schedule (`Schedule` adds the primitives, family by family).

    `render_errors=False` keeps ScheduleError messages to one line (no IR): the
    autoscheduler's cheap mode. `verify_steps` runs the IR verifier after every step. `seed`
    seeds the sampling primitives.

    TVM's keywords are accepted: `error_render_level` ("detail" renders the IR, "fast" and
    "none" do not), `debug_mask` and `enable_check`, which change nothing here: every step
    is checked whatever they say (the dependence analysis is what makes a step legal).
    """

    def __init__(self, func: PrimFunc, *, render_errors: bool = True,
                 verify_steps: bool = True, seed: int | None = None,
                 error_render_level: str | None = None, debug_mask=None,
                 enable_check: bool = True) -> None:
        if error_render_level is not None:
            if error_render_level not in ("detail", "fast", "none"):
                raise ValueError(f"Schedule: error_render_level must be 'detail', 'fast' or "
                                 f"'none' (TVM's), got {error_render_level!r}")
            render_errors = error_render_level == "detail"
        # the module's other functions, kept in `mod` as they are (a schedule holds one)
        self._module: IRModule | None = func if isinstance(func, IRModule) else None
        if isinstance(func, IRModule):         # "main" or the only function
            func = func.main_function("Schedule")
        if not isinstance(func, PrimFunc):
            raise TypeError(f"Schedule: expected a PrimFunc or an IRModule, got "
                            f"{type(func).__name__}")
        verify(func)
        self.original_func = func               # as given: what the trace replays on
        self._func = uniquify_loop_names(func)
        self.trace = Trace()
        self.render_errors = render_errors
        self.verify_steps = verify_steps
        self._counter = itertools.count()
        # "loop:i" -> how many times a loop named i was removed (a handle made before then is
        # stale even if a later step reuses the name), and why it was last removed
        self._generation: dict[str, int] = {}
        self._replaced: dict[str, str] = {}
        # ("block:C", generation) -> ("C_update", its generation): a step renamed the block
        self._renames: dict[tuple[str, int], tuple[str, int]] = {}
        self.rng = random.Random(seed)          # for the sampling primitives
        # whose handles this schedule accepts: {schedule identity: handles made before serial}
        self._identity = next(_IDENTITIES)
        self._serial = itertools.count()
        self._lineage: dict[int, float] = {self._identity: float("inf")}
        # what the analysis over-approximated in the functions steps were judged on (each
        # also a ConservativeAnalysisWarning when first met): accepted steps are sound, not
        # necessarily all the legal ones
        self.notes: list[str] = []
        self._analysis_calls = _analysis_calls()
        self._concurrency_deferred = 0      # depth of concurrency_checked_at_end contexts
        # a context left by an exception: its steps were never checked against the rule of
        # concurrent loops, so the next step asks it of the whole function, whatever it is
        self._concurrency_unchecked = False
        # the place for whole-function checks at the start (issue 9: bounds of every access)
        self._check_function(self._func)

    def _check_function(self, func: PrimFunc) -> None:
        """Checks of the function as given, before any step: beyond verify, every access must
        be in bounds for some value of the symbolic dims (with constant shapes: proven in
        bounds); what depends on the dims' values is checked at each kernel call."""
        from sched.polyhedral.in_bounds import check_in_bounds, out_of_bounds_error

        found = check_in_bounds(func)
        if found is not None:
            raise out_of_bounds_error(func, found, "Schedule")

    # -- state ---------------------------------------------------------------------------------

    @property
    def func(self) -> PrimFunc:
        """The function as scheduled so far."""
        return self._func

    def copy(self):
        """An independent schedule in the same state (same function, trace and handles)."""
        other = type(self).__new__(type(self))
        other._func, other.original_func = self._func, self.original_func
        other._module = self._module
        other.trace = Trace(list(self.trace.instructions))
        other.render_errors, other.verify_steps = self.render_errors, self.verify_steps
        other._counter = itertools.count(self._peek_counter())
        other._replaced = dict(self._replaced)
        other._generation = dict(self._generation)
        other._renames = dict(self._renames)
        other.rng = random.Random()
        other.rng.setstate(self.rng.getstate())
        other.notes = list(self.notes)
        other._analysis_calls = _analysis_calls()
        # never deferred (concurrency_checked_at_end belongs to this schedule); made inside
        # one, its next step asks the rule of the whole function (a build asks it too)
        other._concurrency_deferred = 0
        other._concurrency_unchecked = self._concurrency_unchecked or \
            self._concurrency_deferred > 0
        # the copy accepts the handles made so far (here or on a schedule this one accepts)
        other._identity = next(_IDENTITIES)
        other._serial = itertools.count()
        made = self._peek_serial()
        other._lineage = {key: min(limit, made) if key == self._identity else limit
                          for key, limit in self._lineage.items()}
        other._lineage[other._identity] = float("inf")
        return other

    @contextlib.contextmanager
    def _all_or_nothing(self):
        """Run a step made of several steps (tile) as one: if a part is refused, the function,
        the trace, the handles' generations and the notes are as before the first part."""
        saved = (self._func, len(self.trace.instructions), dict(self._generation),
                 dict(self._replaced), dict(self._renames), len(self.notes),
                 self._analysis_calls)
        try:
            yield
        except BaseException:
            func, steps, generation, replaced, renames, notes, calls = saved
            self._func = func
            del self.trace.instructions[steps:]
            self._generation, self._replaced, self._renames = generation, replaced, renames
            del self.notes[notes:]
            self._analysis_calls = calls
            raise

    def _peek_serial(self) -> int:
        value = next(self._serial)
        self._serial = itertools.chain([value], self._serial)
        return value

    def _check_owner(self, handle, kind: str, primitive: str) -> None:
        """Refuse a handle another Schedule made (a loop of the same name here is another
        loop, and the trace could not replay the step)."""
        if handle.owner is None:
            return
        identity, serial = handle.owner
        if serial >= self._lineage.get(identity, -1):
            getter = "sch.get_loops(...)" if kind == "loop" else "sch.get_block(...)"
            raise ScheduleError(primitive, f"this {kind} handle ({handle!r}) belongs to another "
                                f"Schedule; get handles from this schedule with {getter}")

    def _peek_counter(self) -> int:
        value = next(self._counter)
        self._counter = itertools.chain([value], self._counter)
        return value

    def _new_rv(self, prefix: str) -> str:
        return f"{prefix}{next(self._counter)}"

    def _block(self, handle, primitive: str, argument: str = "block") -> str:
        if isinstance(handle, str):
            handle = BlockRV(handle, "", self._generation.get(f"block:{handle}", 0))
        if not isinstance(handle, BlockRV):
            raise ScheduleError(primitive, f"argument {argument!r}: expected a block handle "
                                f"(sch.get_block), got {type(handle).__name__}")
        self._check_owner(handle, "block", primitive)
        name = self._check_current(handle, "block", primitive)
        block = find_block(self._func, name, primitive).block
        check_block_keeps_order(block, primitive)
        check_block_not_opaque(block, primitive)
        return name

    def _loop(self, handle, primitive: str, argument: str = "loop") -> str:
        if not isinstance(handle, LoopRV):
            raise ScheduleError(primitive, f"argument {argument!r}: expected a loop handle "
                                f"(sch.get_loops, split, fuse), got {type(handle).__name__}")
        self._check_owner(handle, "loop", primitive)
        self._check_current(handle, "loop", primitive)
        find_loop(self._func, handle.name, primitive)
        return handle.name

    def _check_current(self, handle, kind: str, primitive: str) -> str:
        """The name the handle's loop or block has now (following renames); refused if a
        step removed it."""
        name, generation = handle.name, handle.generation
        while (f"{kind}:{name}", generation) in self._renames:
            name, generation = self._renames[(f"{kind}:{name}", generation)]
        key = f"{kind}:{name}"
        if generation != self._generation.get(key, 0):
            reason = self._replaced.get(key, "a later step removed it")
            raise ScheduleError(primitive, f"{kind} {name!r} no longer exists: {reason}")
        return name

    def _current_generation(self, kind: str, name: str) -> int:
        return self._generation.get(f"{kind}:{name}", 0)

    def _note_renamed(self, kind: str, old: str, old_generation: int, new: str) -> None:
        """Say that the step just recorded renamed `old` (of `old_generation`, before the
        step) to `new`: handles to `old` follow to `new`."""
        self._renames[(f"{kind}:{old}", old_generation)] = (new,
                                                            self._current_generation(kind, new))
        self._replaced[f"{kind}:{old}"] = f"a step renamed it {new!r}"

    def _note_replaced(self, kind: str, name: str, reason: str) -> None:
        """Say why the loop or block `name`, just removed, is gone (for stale handles)."""
        self._replaced[f"{kind}:{name}"] = reason

    def _retire(self, old: PrimFunc, new: PrimFunc, step: str) -> None:
        """Make handles to the loops and blocks `step` removed stale."""
        from sched.schedule.state import block_names, loop_names

        for kind, names in (("loop", loop_names), ("block", block_names)):
            for name in set(names(old)) - set(names(new)):
                key = f"{kind}:{name}"
                self._generation[key] = self._generation.get(key, 0) + 1
                self._replaced[key] = f"{step} removed it"

    def _add_notes(self, kind: str, funcs) -> None:
        """Add to `notes` what the analysis over-approximated in `funcs` (the function a step
        was judged on), warning once per new note: the step was accepted on a conservative
        model."""
        from sched.polyhedral.model import build_model

        new = []
        for func in funcs:
            try:         # (the model the dependences are computed on: its notes are theirs)
                notes = build_model(func).notes
            except (ValueError, isl.Error):       # no model: the step's own checks decided
                continue
            for note in notes:
                if note not in self.notes and note not in new:
                    new.append(note)
        self.notes.extend(new)
        for note in new:
            warnings.warn(f"{kind}: accepted on a conservative analysis: {note}",
                          ConservativeAnalysisWarning, stacklevel=_callers_level())

    def _check_concurrent_loops(self, kind: str, new_func: PrimFunc, *,
                                deferred: bool | None = None, made: bool = False) -> None:
        """A step must not put a dependence under a loop that runs its iterations at once
        (asked at the end of `concurrency_checked_at_end` instead where `deferred`, by
        default whether the schedule is in that context; `made`: `kind` names the steps
        that made `new_func`)."""
        from sched.polyhedral.legality import check_concurrent_loops, schedule_error

        if self._concurrency_deferred if deferred is None else deferred:
            return

        found = check_concurrent_loops(new_func)
        if found is not None:
            loop, violation = found
            reason = violation.reason
            if violation.dependence is not None and violation.dependence.is_reduction:
                # why the reduction is no cross-thread one, as bind says (audit helper-49)
                from sched.schedule.loop_kinds import cross_thread_hint
                from sched.schedule.state import find_loop

                node = find_loop(new_func, loop, kind)
                why = cross_thread_hint(new_func, node, node.thread_tag) \
                    if node.kind == "thread_binding" else ""
                reason = f"{reason}: {why}" if why else reason
            violation = dataclasses.replace(
                violation, reason=f"{'they made' if made else 'it would make'} the "
                f"concurrent loop {loop!r} carry a dependence ({reason})")
            raise schedule_error(kind, violation, new_func, loop=loop,
                                 render=self.render_errors)

    def _check_nested_thread_axes(self, kind: str, new_func: PrimFunc) -> None:
        """A step must not nest a loop in a loop of its thread tag that cannot share its index
        (polyhedral/nested_threads.py: the build refuses it)."""
        from sched.polyhedral.nested_threads import nested_axis_problem

        problem = nested_axis_problem(new_func)
        if problem is not None:
            raise ScheduleError(kind, problem)

    def _record(self, kind: str, new_func: PrimFunc, inputs: tuple, attrs: tuple = (),
                outputs: tuple = (), decision=None, loops_kept: bool = False) -> None:
        """Check what every step must keep, then make `new_func` the schedule's function and
        append the step to the trace. `loops_kept`: the step changed no loop, no order and no
        scope, and relabelled elements one to one (transform_layout without padding): the
        same instances touch one element, so no loop can start carrying a dependence."""
        if new_func is not self._func:
            new_func = outer_regions_refreshed(new_func)
        if self.verify_steps and new_func is not self._func:
            verify(new_func)        # (a step that changed nothing leaves a verified function)
        if new_func is not self._func:
            check_opaque_blocks_kept(self._func, new_func, kind)
        # marking a loop asks the rule itself; unroll, annotate and storage_align change no
        # order and no storage scope, so no loop can start carrying a dependence (unless
        # steps before were never checked: an exception left concurrency_checked_at_end)
        if new_func is not self._func and (self._concurrency_unchecked or (
                not loops_kept and kind not in ("parallel", "vectorize", "bind", "unroll",
                                                "annotate", "unannotate", "storage_align"))):
            if self._concurrency_unchecked:
                self._check_concurrent_loops(
                    f"{kind} (the steps before it, in a concurrency_checked_at_end left by an "
                    f"exception, were never checked)", new_func, made=True)
            else:
                self._check_concurrent_loops(kind, new_func)
            if not self._concurrency_deferred:
                self._concurrency_unchecked = False
        if new_func is not self._func and not loops_kept and kind not in (
                "unroll", "annotate", "unannotate", "storage_align"):
            self._check_nested_thread_axes(kind, new_func)
        if new_func is not self._func and kind != "tensorize":
            from sched.schedule.tensorized import check_intrinsic_nests_kept

            check_intrinsic_nests_kept(self._func, new_func, kind)
        if new_func is not self._func and kind not in ("annotate", "unannotate"):
            from sched.schedule.software_pipeline import check_pipelines_kept

            check_pipelines_kept(self._func, new_func, kind)    # annotate checks its own
        if new_func is not self._func and kind != "storage_align":
            from sched.schedule.storage_align import check_storage_align

            check_storage_align(new_func, kind)       # a step may change a compacted shape
        if new_func is not self._func and kind in _RELABEL_LOOPS:
            from sched.polyhedral.dependences import carry_over_loop_kinds

            carry_over_loop_kinds(self._func, new_func)    # same instances, times, accesses
        if new_func is not self._func:
            self._retire(self._func, new_func, kind)
            # a step that consulted the analysis was judged on the model of the function
            # before it (cached by that check); the new function's notes come with the next
            calls = _analysis_calls()
            if calls is None or calls != self._analysis_calls:
                self._add_notes(kind, (self._func,))
        self._analysis_calls = _analysis_calls()
        self._func = new_func
        for handle in outputs:
            if isinstance(handle, LoopRV | BlockRV):
                prefix = "loop" if isinstance(handle, LoopRV) else "block"
                handle.generation = self._generation.get(f"{prefix}:{handle.name}", 0)
                handle.owner = (self._identity, next(self._serial))
        self.trace.append(Instruction(kind, _freeze(inputs),
                                      tuple((k, _freeze(v)) for k, v in attrs),
                                      tuple(h.rv for h in outputs), _freeze(decision)))

    def _check_func_name(self, func_name, primitive: str) -> None:
        """A schedule holds one function, named "main" in `sch.mod` (as TVM's does for a
        PrimFunc); another name is refused."""
        if func_name not in ("main", self._func.name):
            raise ScheduleError(primitive, f"argument 'func_name': this schedule holds one "
                                f"function, 'main' ({self._func.name!r}), not {func_name!r}; "
                                f"make a Schedule of the other function")

    # -- handles -------------------------------------------------------------------------------

    def get_block(self, name: str, func_name: str | None = None) -> BlockRV:
        """The block named `name` (in the function `func_name`: TVM's argument; a schedule
        holds one function, "main")."""
        if func_name is not None:
            self._check_func_name(func_name, "get_block")
        if not isinstance(name, str):
            raise ScheduleError("get_block", f"argument 'name': expected a string, got "
                                f"{type(name).__name__}")
        find_block(self._func, name, "get_block")
        handle = BlockRV(name, self._new_rv("b"))
        self._record("get_block", self._func, (name,), outputs=(handle,))
        return handle

    get_sblock = get_block      # TVM main's name (a TensorIR block is an "sblock" there)

    def get_loops(self, block: BlockRV) -> list[LoopRV]:
        """The loops around `block` up to the block that encloses it, outermost first (as
        TVM's: a block nested in another gets the loops between the two)."""
        name = self._block(block, "get_loops")
        realize = find_block(self._func, name)
        path = path_to(self._func.body, realize)
        inner = max((i for i, node in enumerate(path) if isinstance(node, BlockRealize)),
                    default=-1)
        handles = [LoopRV(lp.loop_var.name, self._new_rv("l"))
                   for lp in path[inner + 1:] if isinstance(lp, For)]
        self._record("get_loops", self._func, (block,), outputs=tuple(handles))
        return handles

    def get_child_blocks(self, parent: BlockRV | LoopRV) -> list[BlockRV]:
        """The blocks directly inside a block or a loop (not nested in another block)."""
        from sched.schedule.state import blocks_under

        if isinstance(parent, LoopRV):
            node = find_loop(self._func, self._loop(parent, "get_child_blocks"),
                             "get_child_blocks")
            body = node
        else:
            body = find_block(self._func, self._block(parent, "get_child_blocks")).block.body
        handles = [BlockRV(r.block.name, self._new_rv("b")) for r in blocks_under(body)
                   if r is not body]
        self._record("get_child_blocks", self._func, (parent,), outputs=tuple(handles))
        return handles

    def _neighbours(self, block: BlockRV, kind: str) -> list[BlockRV]:
        from sched.schedule.inlining import neighbours

        name = self._block(block, f"get_{kind}")
        handles = [BlockRV(n, self._new_rv("b")) for n in neighbours(self._func, name, kind)]
        self._record(f"get_{kind}", self._func, (block,), outputs=tuple(handles))
        return handles

    def get_producers(self, block: BlockRV) -> list[BlockRV]:
        """The blocks that write what `block` reads (flow dependences into it)."""
        return self._neighbours(block, "producers")

    def get_consumers(self, block: BlockRV) -> list[BlockRV]:
        """The blocks that read what `block` writes (flow dependences out of it)."""
        return self._neighbours(block, "consumers")

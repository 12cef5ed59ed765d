"""Steps checked against the rule of concurrent loops once, at the end of a context
(`Schedule.concurrency_checked_at_end`): the autoscheduler's way of applying a sketch rule.

The schedule's state for it lives in ScheduleBase (`_concurrency_deferred`, the depth of the
contexts; `_concurrency_unchecked`, steps never checked), which `_record` and `copy` read.
"""

from __future__ import annotations

import contextlib

from sched.schedule.base import ScheduleBase


class DeferredCheckPrimitives(ScheduleBase):
    """concurrency_checked_at_end."""

    @contextlib.contextmanager
    def concurrency_checked_at_end(self):
        """Steps in this context skip the rule for loops whose iterations run at the same
        time (parallel, vectorized, bound to blockIdx or threadIdx: no dependence carried,
        `sched.polyhedral.concurrency.CONCURRENT_RULE`), and the rule is asked once, of every
        such loop of the function, when the context ends; every other check of every step
        stays.

        Exactly as strict for the function at the end: the rule's answer for a function does
        not depend on the steps that made it, and each step's own checks keep the function's
        meaning as serial loops. What differs is where a refusal comes: at the end, naming
        the loop and the steps of the context, instead of at the step that broke the rule;
        and a function in between may break the rule if a later step in the context mends
        it. The autoscheduler applies its tiling rules this way (a replay asked the rule of
        every concurrent loop after every step: 0.30 s of a GPU matmul sample's 0.42 s).
        Left by an exception, or refused at its end, the context leaves its steps in place,
        and the schedule's next step asks the rule of the whole function, whatever step it
        is (so does the next step of a copy made inside; a build asks it too).

        >>> import sched
        >>> from sched import compute as te
        >>> A = te.placeholder((64,), name="A")
        >>> B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
        >>> sch = sched.Schedule(te.create_prim_func([A, B]))
        >>> with sch.concurrency_checked_at_end():
        ...     bx, tx = sch.split(sch.get_loops(sch.get_block("B"))[0], factors=[None, 32])
        ...     sch.bind(bx, "blockIdx.x")
        ...     sch.bind(tx, "threadIdx.x")
        >>> print(sch.func.script().splitlines()[5])
                for i_0 in T.thread_binding(2, thread="blockIdx.x"):
        """
        start, func = len(self.trace.instructions), self._func
        self._concurrency_deferred += 1
        try:
            yield self
        except BaseException:
            if self._func is not func:
                self._concurrency_unchecked = True
            raise
        finally:
            self._concurrency_deferred -= 1
        if not self._concurrency_deferred and (self._func is not func or
                                               self._concurrency_unchecked):
            steps = [i.kind for i in self.trace.instructions[start:]
                     if not i.kind.startswith("get_")]
            self._concurrency_unchecked = True          # until the check below passes
            self._check_concurrent_loops(
                f"{', '.join(steps) or 'no step'} (checked at the end of "
                f"concurrency_checked_at_end)", self._func, deferred=False, made=True)
            self._concurrency_unchecked = False

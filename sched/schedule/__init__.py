"""The schedule language: `Schedule`, its handles and its trace (see schedule.py)."""

from sched.schedule.schedule import BlockRV, LoopRV, Schedule
from sched.schedule.trace import Instruction, Trace

__all__ = ["BlockRV", "Instruction", "LoopRV", "Schedule", "Trace"]

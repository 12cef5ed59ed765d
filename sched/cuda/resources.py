"""What a compiled kernel uses (registers, spills, shared and local memory) and the occupancy
that follows on its arch, read from the ptxas -v log that `compile_cuda` keeps.

    ptxas info    : Compiling entry function 'matmul' for 'sm_90'
    ptxas info    : Function properties for matmul
    ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 32 registers, used 1 barriers, 8192 bytes smem, 380 bytes cmem[0]

The occupancy estimate follows the CUDA occupancy calculator (`cuda_occupancy.h`): registers
are allocated per warp in units of 256 across 4 sub-partitions, shared memory per block in units
of 128 bytes plus 1 KB reserved by the driver; blocks per SM are the least of what registers,
shared memory, threads and the block slots allow. It ignores the L1/shared carveout the driver
picks (it assumes the largest), so it is an upper bound.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sched.cuda.device import parse_arch

KB = 1024
REGISTER_UNIT = 256       # registers are allocated per warp in multiples of this
SUB_PARTITIONS = 4        # an SM's register file is split across 4 schedulers
SHARED_UNIT = 128         # shared memory is allocated per block in multiples of this
RESERVED_SHARED = 1 * KB  # shared memory the driver reserves per block (sm_80 and later)
WARP = 32
MAX_LOCAL_BYTES = 512 * KB  # local memory per thread (every arch since sm_20); the launch fails


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM limits of one compute capability (CUDA programming guide, table of technical
    specifications per compute capability)."""

    registers_per_sm: int
    max_registers_per_thread: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    shared_per_sm: int
    max_shared_per_block: int      # with the opt-in attribute; 48 KB without it
    max_threads_per_block: int = 1024


LIMITS = {
    (8, 0): ArchLimits(65536, 255, 2048, 32, 164 * KB, 163 * KB),
    (8, 6): ArchLimits(65536, 255, 1536, 16, 100 * KB, 99 * KB),
    (8, 9): ArchLimits(65536, 255, 1536, 24, 100 * KB, 99 * KB),
    (9, 0): ArchLimits(65536, 255, 2048, 32, 228 * KB, 227 * KB),
}


def arch_limits(arch: str) -> ArchLimits | None:
    """The limits of `arch` ("sm_90a" as "sm_90"), or None for an arch not in the table."""
    major, minor, _ = parse_arch(arch)
    return LIMITS.get((major, minor))


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


@dataclass(frozen=True)
class Occupancy:
    """How many blocks of one kernel fit on an SM at once, and what limits them."""

    blocks_per_sm: int
    warps_per_sm: int
    max_warps_per_sm: int
    limited_by: str                 # "registers", "shared memory", "threads" or "block slots"

    @property
    def fraction(self) -> float:
        return self.warps_per_sm / self.max_warps_per_sm

    def __str__(self) -> str:
        return (f"{self.blocks_per_sm} blocks/SM, {self.warps_per_sm} of "
                f"{self.max_warps_per_sm} warps ({self.fraction:.0%}), limited by "
                f"{self.limited_by}")


@dataclass(frozen=True)
class Resources:
    """One kernel's resource use on `arch`.

    From the log: `registers` (per thread), `spill_stores`/`spill_loads` (bytes per thread),
    `local_bytes` (the stack frame: local memory per thread), `static_shared_bytes`,
    `constant_bytes`, `barriers`. Given: `dynamic_shared_bytes` and `threads_per_block` (from
    the launch configuration; None when unknown, and then there is no occupancy).
    """

    kernel: str
    arch: str
    registers: int
    spill_stores: int
    spill_loads: int
    local_bytes: int
    static_shared_bytes: int
    constant_bytes: int
    barriers: int
    dynamic_shared_bytes: int = 0
    threads_per_block: int | None = None

    @classmethod
    def from_log(cls, log: str, kernel: str, arch: str, *, dynamic_shared_bytes: int = 0,
                 threads_per_block: int | None = None) -> Resources:
        """Parse the ptxas -v lines of entry function `kernel` from `log`.

        Raises ValueError when the log has no such entry function (listing those it has).
        """
        sections = _entry_sections(log)
        if kernel not in sections:
            found = ", ".join(sorted(sections)) or "none: was the kernel compiled with -v?"
            raise ValueError(f"the ptxas log names no entry function '{kernel}' (it names "
                             f"{found})")
        text = sections[kernel]

        def number(pattern: str) -> int:
            match = re.search(r"(\d+) " + pattern, text)
            return int(match[1]) if match else 0

        return cls(kernel, arch, registers=number(r"registers"),
                   spill_stores=number(r"bytes spill stores"),
                   spill_loads=number(r"bytes spill loads"),
                   local_bytes=max(number(r"bytes stack frame"), number(r"bytes lmem")),
                   static_shared_bytes=number(r"bytes smem"),
                   constant_bytes=number(r"bytes cmem\[0\]"), barriers=number(r"barriers"),
                   dynamic_shared_bytes=dynamic_shared_bytes,
                   threads_per_block=threads_per_block)

    @property
    def limits(self) -> ArchLimits | None:
        return arch_limits(self.arch)

    @property
    def shared_bytes(self) -> int:
        """Static plus dynamic shared memory per block."""
        return self.static_shared_bytes + self.dynamic_shared_bytes

    @property
    def registers_per_warp(self) -> int:
        return _round_up(max(self.registers, 1) * WARP, REGISTER_UNIT)

    @property
    def max_threads_per_block(self) -> int:
        """The largest block the registers allow (a multiple of 32, at most 1024); what the
        driver reports as CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK."""
        limits = self.limits or LIMITS[(9, 0)]
        for warps in range(limits.max_threads_per_block // WARP, 0, -1):
            if self._register_blocks(warps, limits) > 0:
                return warps * WARP
        return 0

    def _register_blocks(self, warps: int, limits: ArchLimits) -> int:
        """Blocks of `warps` warps that the register file holds (0: the block cannot run)."""
        per_warp = self.registers_per_warp
        if (self.registers > limits.max_registers_per_thread
                or per_warp * _round_up(warps, SUB_PARTITIONS) > limits.registers_per_sm):
            return 0
        per_partition = limits.registers_per_sm // SUB_PARTITIONS // per_warp
        return per_partition * SUB_PARTITIONS // warps

    @property
    def occupancy(self) -> Occupancy | None:
        """Blocks and warps per SM at `threads_per_block`; None when the block size or the
        arch's limits are unknown, or the block cannot run at all (see `launch_problems`)."""
        limits = self.limits
        if limits is None or not self.threads_per_block or self.launch_problems():
            return None
        warps = -(-self.threads_per_block // WARP)
        shared = _round_up(self.shared_bytes + RESERVED_SHARED, SHARED_UNIT)
        # on a tie, the first named limits: threads and block slots are the hardware's
        bounds = {"threads": limits.max_threads_per_sm // (warps * WARP),
                  "block slots": limits.max_blocks_per_sm,
                  "registers": self._register_blocks(warps, limits),
                  "shared memory": limits.shared_per_sm // shared}
        limited_by = min(bounds, key=bounds.__getitem__)
        blocks = bounds[limited_by]
        return Occupancy(blocks, blocks * warps, limits.max_threads_per_sm // WARP, limited_by)

    def launch_problems(self) -> list[str]:
        """Why a block of `threads_per_block` threads with this shared memory cannot run on
        `arch`, each reason saying what to change; empty when it can (or the arch is unknown)."""
        limits, problems = self.limits, []
        if limits is None:
            return problems
        if self.threads_per_block is not None:
            if self.threads_per_block > limits.max_threads_per_block:
                problems.append(f"{self.threads_per_block} threads per block exceed the limit "
                                f"of {limits.max_threads_per_block}: bind fewer threads")
            elif self.threads_per_block > self.max_threads_per_block:
                problems.append(
                    f"{self.threads_per_block} threads per block at {self.registers} registers "
                    f"per thread exceed the register file: at most {self.max_threads_per_block} "
                    f"threads fit; bind fewer threads or use fewer registers per thread")
        if self.local_bytes > MAX_LOCAL_BYTES:
            problems.append(f"{self.local_bytes} bytes of local memory per thread exceed the "
                            f"{MAX_LOCAL_BYTES} a thread may have: keep fewer values per "
                            f"thread (a smaller register tile)")
        if self.shared_bytes > limits.max_shared_per_block:
            problems.append(f"{self.shared_bytes} bytes of shared memory per block "
                            f"({self.static_shared_bytes} static + {self.dynamic_shared_bytes} "
                            f"dynamic) exceed {self.arch}'s {limits.max_shared_per_block}: "
                            f"use smaller shared tiles")
        return problems

    def rows(self) -> list[tuple[str, str]]:
        """The report as (what, value) pairs: what `table()` and `str()` show."""
        occupancy = self.occupancy
        limit = self.limits
        shared_limit = f" of {limit.max_shared_per_block}" if limit else ""
        return [
            ("kernel", f"{self.kernel} ({self.arch})"),
            ("registers per thread", str(self.registers)),
            ("spill stores / loads", f"{self.spill_stores} / {self.spill_loads} bytes"),
            ("local memory per thread", f"{self.local_bytes} bytes"),
            ("shared memory per block", f"{self.shared_bytes}{shared_limit} bytes "
                                        f"({self.static_shared_bytes} static + "
                                        f"{self.dynamic_shared_bytes} dynamic)"),
            ("barriers", str(self.barriers)),
            ("threads per block", "?" if self.threads_per_block is None
             else str(self.threads_per_block)),
            ("max threads per block", str(self.max_threads_per_block)),
            ("occupancy", str(occupancy) if occupancy else
             "; ".join(self.launch_problems()) or f"unknown (no block size, or no table "
                                                   f"of limits for {self.arch})"),
        ]

    def table(self):
        """The report as a rich Table (print it with `rich.print`)."""
        from rich.table import Table

        table = Table(title=f"resources of {self.kernel}", show_header=False)
        table.add_column("what", style="bold")
        table.add_column("value")
        for what, value in self.rows():
            table.add_row(what, value)
        return table

    def __str__(self) -> str:
        rows = self.rows()
        width = max(len(what) for what, _ in rows)
        return "\n".join(f"{what:<{width}}  {value}" for what, value in rows)


@dataclass(frozen=True)
class KernelsResources:
    """The resources of a function's kernels (cuda/kernel_sequence.py), each a `Resources`
    in `kernels`, launch order. A figure asked of them is the largest over the kernels (the
    one that limits: `resources.spill_stores == 0` holds for every kernel), the occupancy the
    lowest; the report and the table show every kernel."""

    kernels: tuple[Resources, ...]

    _LARGEST = ("registers", "spill_stores", "spill_loads", "local_bytes",
                "static_shared_bytes", "constant_bytes", "barriers", "dynamic_shared_bytes",
                "shared_bytes", "threads_per_block")

    def __getattr__(self, name: str):
        if name in self._LARGEST:
            values = [getattr(k, name) for k in self.kernels]
            return None if None in values else max(values)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def kernel(self) -> str:
        return ", ".join(k.kernel for k in self.kernels)

    @property
    def arch(self) -> str:
        return self.kernels[0].arch

    @property
    def occupancy(self) -> Occupancy | None:
        found = [k.occupancy for k in self.kernels]
        return None if None in found else min(found, key=lambda o: o.fraction)

    def launch_problems(self) -> list[str]:
        return [f"{k.kernel}: {p}" for k in self.kernels for p in k.launch_problems()]

    def table(self):
        """One column per kernel (print it with `rich.print`)."""
        from rich.table import Table

        table = Table(title=f"resources of {len(self.kernels)} kernels")
        table.add_column("what", style="bold")
        for kernel in self.kernels:
            table.add_column(kernel.kernel)
        rows = [kernel.rows() for kernel in self.kernels]
        for number, (what, _) in enumerate(rows[0]):
            table.add_row(what, *(r[number][1] if number < len(r) else "" for r in rows))
        return table

    def __str__(self) -> str:
        return "\n\n".join(str(kernel) for kernel in self.kernels)


def _entry_sections(log: str) -> dict[str, str]:
    """The log's text for each entry function, from its 'Compiling entry function' line to the
    next one. A device function's own properties lines, if any, are cut out."""
    sections: dict[str, str] = {}
    parts = re.split(r"Compiling entry function '([^']+)'", log)
    for name, text in zip(parts[1::2], parts[2::2]):
        own = re.search(rf"Function properties for {re.escape(name)}\n(.*)", text)
        used = re.search(r"Used \d+ registers.*", text)
        lines = ([own[1]] if own else []) + ([used[0]] if used else [])
        sections[name] = "\n".join(lines)
    return sections

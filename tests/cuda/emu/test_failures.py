"""How the emulator reports what is not a barrier or a race: a crash, a compile error, and a
kernel's printf (which reaches the caller's stdout)."""

from __future__ import annotations

import numpy as np
import pytest

from sched.errors import BuildError, EmulationError
from tests.cuda.emu.kernels import CRASH, PRINTS, emulate


def test_a_crash_is_an_error_not_the_callers_death():
    a, b = np.ones(32, np.float32), np.zeros(32, np.float32)
    with pytest.raises(EmulationError, match=r"kernel 'crash' \(cuda-emu\): crashed with "
                                             r"SIGSEGV \(an access out of bounds\?\)"):
        emulate(CRASH, "crash", [(32,), (32,)], block=(32, 1, 1))(a, b)


def test_a_compile_error_shows_the_kernel_line_and_the_command():
    with pytest.raises(BuildError, match=r"(?s)g\+\+ failed .* compiling kernel 'prints'.*"
                                         r"offending lines:.*>    4 \|     if \(threadIdx.x == 0\)"
                                         r".*command: g\+\+ "):
        emulate(PRINTS.replace("BROKEN", "oops"), "prints", [(8,), (8,)], block=(8, 1, 1))


def test_printf_reaches_stdout(capfd):
    a, b = np.full(8, 2.5, np.float32), np.zeros(8, np.float32)
    emulate(PRINTS.replace("BROKEN", ""), "prints", [(8,), (8,)], block=(8, 1, 1),
            grid=(2, 1, 1))(a, b)
    out = capfd.readouterr().out
    assert "block 0 says 2.5" in out and "block 1 says 2.5" in out

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


def test_a_saved_launch_runs_as_the_printed_command(tmp_path):
    import shlex
    import subprocess

    a, b = np.full(8, 2.5, np.float32), np.zeros(8, np.float32)
    kernel = emulate(PRINTS.replace("BROKEN", ""), "prints", [(8,), (8,)], block=(8, 1, 1))
    command = kernel.save_launch(tmp_path / "prints.launch", a, b)
    assert command.startswith(f"gdb --args {kernel.executable} ")
    assert (kernel.executable.parent / "kernel.cu").exists()      # the source gdb shows
    program = shlex.split(command)[2:]                            # without gdb
    result = subprocess.run(program, capture_output=True, text=True)
    assert result.returncode == 0 and "block 0 says 2.5" in result.stdout
    assert not b.any()                                            # only the file was written


def test_more_shared_memory_than_a_gpu_has_is_an_error():
    from tests.cuda.emu.kernels import TOO_MUCH_SHARED

    a, b = np.ones(64, np.float32), np.zeros(64, np.float32)
    with pytest.raises(EmulationError, match=r"the kernel's __shared__ variables need more than "
                                             r"256 KB \(line 3, thread \d+ of block \(0, 0, 0\)"):
        emulate(TOO_MUCH_SHARED, "hog", [(64,), (64,)], block=(64, 1, 1))(a, b)

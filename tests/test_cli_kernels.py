"""`sched show`, `sched build` and `sched export` on a FILE.py:NAME (sched.cli_kernels)."""

from __future__ import annotations

import textwrap

import pytest

from sched.cli import main

KERNELS = '''
import sched
from sched import compute as te
from sched import hand_schedules


def scale():
    n = te.var("n")
    A = te.placeholder((n, 16), "float32", name="A")
    B = te.compute((n, 16), lambda i, j: A[i, j] * 2, name="B")
    return te.create_prim_func([A, B], name="scale")


split = sched.Schedule(scale())
split.split(split.get_loops(split.get_block("B"))[1], [None, 4])


def gpu():
    return hand_schedules.gpu_matmul(64, 64, 32)
'''


@pytest.fixture
def kernels(tmp_path):
    path = tmp_path / "kernels.py"
    path.write_text(textwrap.dedent(KERNELS))
    return path


def test_help_lists_the_kernel_commands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command, line in [("show", "print a function's IR"), ("build", "resource report"),
                          ("export", "write C files that run a kernel without Python")]:
        assert any(text.split()[:1] == [command] and line in text
                   for text in out.splitlines()), out


def test_show_prints_the_ir_and_with_options_lowering_source_and_steps(kernels, capsys):
    assert main(["show", f"{kernels}:split"]) == 0
    out = capsys.readouterr().out
    assert "@T.prim_func" in out and "# ---- scale: the IR ----" in out
    assert "lowered" not in out and "void scale(" not in out
    assert main(["show", f"{kernels}:split", "--lowered", "--source", "c", "--trace"]) == 0
    out = capsys.readouterr().out
    assert "# ---- the schedule's steps ----" in out and "sch.split(" in out
    assert "# ---- the loop IR, lowered for c ----" in out and "B_flat" in out
    assert "void scale(const float* restrict A" in out


def test_show_of_a_prim_func_says_it_has_no_steps(kernels, capsys):
    assert main(["show", f"{kernels}:scale", "--trace"]) == 0
    assert "(no steps:" in capsys.readouterr().out


def test_show_cuda_source(kernels, capsys):
    assert main(["show", f"{kernels}:gpu", "--source", "cuda", "--arch", "sm_80"]) == 0
    assert 'extern "C" __global__' in capsys.readouterr().out


def test_show_lowered_for_cuda_is_the_lowering_of_the_built_kernel(kernels, capsys):
    # a function with no bindings is built with the default GPU schedule: its lowering, not
    # the function's as given, goes with the CUDA shown (audit helper-156)
    assert main(["show", f"{kernels}:scale", "--lowered", "--source", "cuda",
                 "--arch", "sm_80"]) == 0
    out = capsys.readouterr().out
    lowered = out.split("# ---- the loop IR, lowered for cuda ----")[1].split("# ----")[0]
    assert 'thread="blockIdx.x"' in lowered and 'thread="threadIdx.x"' in lowered


def test_build_prints_the_resource_report(kernels, capsys):
    assert main(["build", f"{kernels}:gpu", "--target", "cuda", "--arch", "sm_90"]) == 0
    out = capsys.readouterr().out
    assert "built 'matmul' for cuda sm_90" in out and "registers per thread" in out
    assert main(["build", f"{kernels}:scale"]) == 0
    out = capsys.readouterr().out
    assert "built 'scale' for c:" in out and "entry point: checks calls" in out


def test_build_without_arch_or_gpu_says_which_arch(kernels, capsys, monkeypatch):
    import sched.cuda.runtime as runtime

    monkeypatch.setattr(runtime, "gpu_available", lambda: False)
    assert main(["build", f"{kernels}:gpu", "--target", "cuda"]) == 0
    assert capsys.readouterr().err.startswith(
        "sched build: warning: kernel 'matmul': no arch named and no GPU here: compiled for "
        "sm_90")


@pytest.mark.parametrize("argv, message", [
    (["build", "{k}:scale", "--arch", "sm_90"], "sched build: error: --arch sm_90 is for "
                                                "--target cuda, not --target c"),
    (["build", "{k}:nope"], "sched build: error: {k} has no 'nope'"),
    (["build", "{k}:scale", "--db", "{k}.missing.db"], "sched build: error: no tuning "
                                                       "database '{k}.missing.db'"),
    (["show", "{k}:scale", "--arch", "sm_90"], "sched show: error: --arch sm_90 is for "
                                               "--source cuda"),
    (["export", "{k}:scale"], "sched export: error: the following arguments are required: "
                              "--out"),
    (["export", "{k}:scale", "--out", "{k}.d", "--name", "int"], "sched export: error: export: "
                                                                 "name 'int' is not a C"),
    (["build", "{k}:gpu", "--target", "cuda", "--arch", "sm_1"], "sched build: error: arch "
                                                                 "'sm_1': expected 'sm_'"),
    (["export", "{k}:gpu", "--target", "cuda", "--out", "{k}.d", "--shared-library"],
     "sched export: error: --shared-library is for --target c"),
])
def test_mistakes_are_one_line_with_status_1(kernels, capsys, argv, message):
    argv = [a.replace("{k}", str(kernels)) for a in argv]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(message.replace("{k}", str(kernels))) and err.count("\n") == 1, err


def test_debug_shows_the_traceback(kernels):
    with pytest.raises(ValueError, match="is not a C identifier"):
        main(["export", f"{kernels}:scale", "--out", str(kernels.parent / "o"), "--name",
              "int", "--debug"])


def test_export_writes_the_files(kernels, capsys, tmp_path):
    assert main(["export", f"{kernels}:scale", "--out", str(tmp_path / "c")]) == 0
    assert "exported 'scale' (c)" in capsys.readouterr().out
    assert (tmp_path / "c" / "scale.h").is_file() and (tmp_path / "c" / "scale.c").is_file()
    assert main(["export", f"{kernels}:scale", "--out", str(tmp_path / "so"),
                 "--shared-library"]) == 0
    assert (tmp_path / "so" / "libscale.so").is_file()
    assert main(["export", f"{kernels}:gpu", "--target", "cuda", "--arch", "sm_90", "--out",
                 str(tmp_path / "cu"), "--name", "mm"]) == 0
    assert sorted(p.name for p in (tmp_path / "cu").iterdir()) == \
        ["CMakeLists.txt", "mm.c", "mm.cu", "mm.h", "mm.sched.cmake"]


def test_every_command_has_a_one_line_description_at_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["--help"]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = next(k for k, line in enumerate(lines) if line.strip() == "COMMAND")
    described = lines[start + 1:lines.index("", start)]
    commands = [line.split()[0] for line in described]
    assert commands == ["demo", "tune", "db", "show", "build", "export"], described
    assert all(len(line.split()) > 1 for line in described)    # name and text on one line

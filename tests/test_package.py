"""Package-level rules: a light `import sched`, and imports that flow one way."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

SCHED = pathlib.Path(__file__).resolve().parent.parent / "sched"

# Each package may import only those before it in the pipeline (DESIGN.md, "The pipeline").
ALLOWED = {
    "ir": set(),
    "compute": {"ir"},
    "polyhedral": {"ir"},
    "schedule": {"ir", "polyhedral"},
    "lower": {"ir", "polyhedral"},
    "c": {"ir", "lower"},
    "cuda": {"ir", "lower", "c"},     # CUDA C extends the C emitter
    "autoscheduler": {"ir", "compute", "polyhedral", "schedule", "lower", "c", "cuda"},
}
SHARED = {"errors", "env", "arguments", "entry_condition", "targets"}   # top-level modules every
#   package may use (entry_condition: the part of arguments the C entry points write)
# Single files allowed one later package, each for a stated reason (keep this list short).
EXCEPTIONS = {
    # storage_align pads the buffer as the lowering compacts it: the step asks the lowering's
    # own passes whether the request can be met, so it is refused at the step, not at build
    ("schedule/storage_align.py", "lower"),
}


def _sched_imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "sched" and len(parts) > 1:
                found.add(parts[1])
    return found


def test_imports_flow_one_way():
    problems = []
    for package, allowed in ALLOWED.items():
        for path in (SCHED / package).glob("**/*.py"):
            relative = path.relative_to(SCHED).as_posix()
            for imported in _sched_imports(path) - {package} - allowed - SHARED:
                if (relative, imported) in EXCEPTIONS:
                    continue
                problems.append(f"{path.relative_to(SCHED.parent)} imports sched.{imported}")
    assert not problems, "imports against the pipeline order:\n" + "\n".join(problems)


def test_import_sched_loads_neither_torch_nor_cuda():
    code = ("import sys, sched, sched.compute, sched.ir, sched.cli_kernels; "
            "print(sorted(m for m in ('torch', 'cuda', 'cuda.bindings') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_import_sched_outside_the_repository_finds_this_package(tmp_path):
    # the standard library has a module named sched; the installed .pth puts ours first
    code = "import sched, sched.ir; print(sched.__path__[0])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=tmp_path)
    assert pathlib.Path(out.stdout.strip()) == SCHED

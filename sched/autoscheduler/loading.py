"""The function a command-line user names: `FILE.py:NAME`.

    func = load_function("kernels/matmul.py:matmul")     # a PrimFunc or a Schedule

The file is run as a module from its path (it need not be importable; its own directory is on
`sys.path` while it runs, as with `python FILE.py`). NAME may be a PrimFunc, a `sched.Schedule`
(its steps are kept), or a function of no arguments returning one of those: a `te` definition
wrapped in a function, or a `@T.prim_func` (which is already a PrimFunc). `FILE.py` alone names
the file's only such object. Every failure is one `LoadError` that says what the file holds.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import inspect
import sys
from pathlib import Path

FORM = "FILE.py:NAME"


class LoadError(ValueError):
    """The spec names no file, no object, or an object that is not a function to schedule."""


def load_function(spec: str):
    """The PrimFunc or Schedule that `spec` ("path/to/file.py:NAME") names."""
    path_text, _, name = spec.rpartition(":") if ":" in spec else (spec, "", "")
    path = Path(path_text).expanduser()
    if not path_text or path.suffix != ".py":
        raise LoadError(f"{spec!r}: expected {FORM}, e.g. kernels/matmul.py:matmul")
    if not path.is_file():
        raise LoadError(f"{spec!r}: no file {str(path)!r}"
                        + (" (it is a directory)" if path.is_dir() else ""))
    with _on_path(path.resolve().parent):
        module = _run_module(path)
        if not name:
            name = _only_candidate(module, path)
        if not hasattr(module, name):
            raise LoadError(f"{path} has no {name!r}{_suggestion(module, name)}; "
                            f"{_inventory(module)}")
        return _function(getattr(module, name), f"{path}:{name}")


def _run_module(path: Path):
    """Execute the file as a fresh module, registered in `sys.modules` while it runs (so that
    dataclasses, pickling and `inspect.getsource`, which `T.prim_func` uses, find it)."""
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
    module_name = f"sched_user_{_identifier(path.stem)}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[module_name]
        raise LoadError(f"{path}: running the file raised {type(error).__name__}: "
                        f"{error}") from error
    return module


def _function(value, where: str):
    """`value` if it is a PrimFunc or a Schedule, else what a call with no arguments gives."""
    from sched.compute.tensor import Tensor

    if _is_function(value):
        return value
    if isinstance(value, Tensor):
        raise LoadError(f"{where} is a te tensor: name a PrimFunc of it instead, e.g. "
                        f"func = te.create_prim_func([<its inputs>, {value.name}])")
    if not callable(value) or isinstance(value, type):
        raise LoadError(f"{where} is {_a(value)}: expected a PrimFunc, a sched.Schedule, or a "
                        f"function of no arguments returning one")
    required = _required_parameters(value)
    if required:
        raise LoadError(f"{where} takes arguments ({', '.join(required)}): give a function of "
                        f"no arguments that returns a PrimFunc or a sched.Schedule")
    try:
        result = value()
    except Exception as error:
        raise LoadError(f"{where}() raised {type(error).__name__}: {error}") from error
    if not _is_function(result):
        raise LoadError(f"{where}() returned {_a(result)}: expected a PrimFunc or a "
                        f"sched.Schedule (a te definition ends with te.create_prim_func([...]))")
    return result


def _is_function(value) -> bool:
    from sched.ir.nodes import PrimFunc
    from sched.schedule import Schedule

    return isinstance(value, PrimFunc | Schedule)


def _required_parameters(function) -> list[str]:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in parameters if p.default is p.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _candidates(module) -> dict[str, list[str]]:
    """The file's own PrimFuncs, Schedules and functions of no arguments, by kind."""
    from sched.ir.nodes import PrimFunc
    from sched.schedule import Schedule

    kinds: dict[str, list[str]] = {"PrimFuncs": [], "Schedules": [], "functions": []}
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        if isinstance(value, PrimFunc):
            kinds["PrimFuncs"].append(name)
        elif isinstance(value, Schedule):
            kinds["Schedules"].append(name)
        elif inspect.isfunction(value) and value.__module__ == module.__name__ \
                and not _required_parameters(value):
            kinds["functions"].append(f"{name}()")
    return kinds


def _inventory(module) -> str:
    kinds = _candidates(module)
    listed = [f"{kind}: {', '.join(names)}" for kind, names in kinds.items() if names]
    if not listed:
        return ("it defines no PrimFunc, Schedule or function of no arguments (write one, e.g. "
                "a @T.prim_func or a function that returns te.create_prim_func([...]))")
    return "it defines " + "; ".join(listed)


def _only_candidate(module, path: Path) -> str:
    names = [name.removesuffix("()") for names in _candidates(module).values()
             for name in names]
    if len(names) == 1:
        return names[0]
    raise LoadError(f"{path}: name the function as {path}:NAME; {_inventory(module)}")


def _suggestion(module, name: str) -> str:
    close = difflib.get_close_matches(name, [n for n in vars(module) if not n.startswith("_")],
                                      n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _a(value) -> str:
    kind = type(value).__name__
    return f"an {kind}" if kind[:1].lower() in "aeiou" else f"a {kind}"


def _identifier(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)


class _on_path:
    """`with`: `directory` first on `sys.path`, removed again afterwards."""

    def __init__(self, directory: Path):
        self.directory = str(directory)

    def __enter__(self) -> None:
        sys.path.insert(0, self.directory)

    def __exit__(self, *exc) -> None:
        if self.directory in sys.path:
            sys.path.remove(self.directory)

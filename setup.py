"""Packaging glue that pyproject.toml cannot express: install `sched_precedence.pth`.

The standard library has a module named `sched` (an event scheduler), found before anything in
site-packages. The .pth file, run at interpreter start, puts a finder first that resolves `sched`
to this package (a directory), for regular and editable installs alike; setuptools ships its
`distutils-precedence.pth` the same way.
"""

import os
import pathlib

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PTH = "sched_precedence.pth"

# The finder the .pth installs (a .pth runs one line: the code goes through exec).
FINDER_CODE = '''import importlib.machinery as m, sys, sysconfig
class SchedPrecedence:
    """sched shares its name with the standard library's event scheduler module: find the
    installed sched package (a directory with __init__.py) before that module."""
    stdlib = {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "sched":
            return None
        spec = m.PathFinder.find_spec(name, [p for p in sys.path if p not in cls.stdlib])
        if spec is not None and spec.submodule_search_locations is not None:
            return spec
        for finder in sys.meta_path:
            if type(finder).__name__ == "SchedPrecedence" or getattr(finder, "__name__", "") \\
                    == "SchedPrecedence" or finder is m.PathFinder:
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None and spec.submodule_search_locations is not None:
                return spec
        return None
if not any(getattr(f, "__name__", "") == "SchedPrecedence" for f in sys.meta_path):
    sys.meta_path.insert(0, SchedPrecedence)
'''
PTH_CONTENTS = "import sys; exec(" + repr(FINDER_CODE) + ", {})\n"


class BuildWithPth(build_py):
    """A regular wheel carries the .pth at its root (site-packages once installed)."""

    def run(self):
        super().run()
        pathlib.Path(self.build_lib, PTH).write_text(PTH_CONTENTS)

    def get_outputs(self, include_bytecode=True):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, PTH)]


class EditableWithPth(editable_wheel):
    """An editable wheel carries it too, beside setuptools' own editable .pth."""

    def _select_strategy(self, name, tag, build_lib):
        strategy = super()._select_strategy(name, tag, build_lib)
        class WithPth:
            def __enter__(self):
                strategy.__enter__()
                return self

            def __exit__(self, *exc):
                return strategy.__exit__(*exc)

            def __call__(self, wheel, files, mapping):
                strategy(wheel, files, mapping)
                wheel.writestr(PTH, PTH_CONTENTS)

        return WithPth()


setup(cmdclass={"build_py": BuildWithPth, "editable_wheel": EditableWithPth})

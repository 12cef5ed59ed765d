"""`IRModule`: several PrimFuncs by name, as TVM's `@I.ir_module class Module:` holds them.

    mod = sched.parse(text)          # a text holding `@I.ir_module class Module:`
    mod["main"]                       # a PrimFunc; `list(mod)` the names, in the text's order
    sch.mod                           # a Schedule's function as "main", as TVM's `sch.mod`
    sch = sched.Schedule(mod)         # schedules "main", or the only function
    print(mod.script())               # prints back as the class, `parse` reads it again

Printed: `@I.ir_module` / `class Module:`, then each function as a `@T.prim_func` method.
Functions do not call each other here (no `T.call_tir`): each is scheduled and built alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping

from sched.ir.nodes import PrimFunc


class IRModule(Mapping):
    """Functions by name (a read-only mapping); equal when the functions and names are."""

    __slots__ = ("_functions", "name")

    def __init__(self, functions: Mapping[str, PrimFunc], name: str = "Module") -> None:
        for key, func in functions.items():
            if not isinstance(func, PrimFunc):
                raise TypeError(f"IRModule: {key!r} is a {type(func).__name__}, not a PrimFunc")
        # each function is named by its key, as TVM names a module's function by its symbol
        self._functions = {key: func if func.name == key else dataclasses.replace(func, name=key)
                           for key, func in functions.items()}
        self.name = name

    def __getitem__(self, name) -> PrimFunc:
        name = getattr(name, "name_hint", name)         # TVM's GlobalVar names itself so
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(f"the module has no function {name!r}; it has "
                           f"{', '.join(map(repr, self._functions)) or 'none'}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    def __eq__(self, other) -> bool:
        return isinstance(other, IRModule) and self._functions == other._functions \
            and list(self._functions) == list(other._functions) and self.name == other.name

    def __hash__(self) -> int:
        return hash((self.name, tuple(self._functions.items())))

    def __repr__(self) -> str:
        return f"IRModule({self.name}: {', '.join(self._functions)})"

    @property
    def functions(self) -> dict[str, PrimFunc]:
        return dict(self._functions)

    def main_function(self, what: str = "Schedule") -> PrimFunc:
        """"main", or the only function: what `Schedule(mod)` and `build(mod)` take."""
        if "main" in self._functions:
            return self._functions["main"]
        if len(self._functions) == 1:
            return next(iter(self._functions.values()))
        raise ValueError(f"{what}: the module has no 'main' and {len(self)} functions "
                         f"({', '.join(self._functions)}): pass one, {what}(mod[\"name\"])")

    def script(self) -> str:
        """The module as TVMScript: `@I.ir_module class Module:` with one method a function."""
        from sched.ir.printer import to_script

        return to_script(self)

    def show(self, *args, **kwargs) -> None:
        """Print `script()` (TVM's style and formatting arguments are accepted and ignored)."""
        print(self.script())

    def __str__(self) -> str:
        return self.script()

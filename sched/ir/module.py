"""`IRModule`: functions by name, as TVM's `sch.mod` gives them (`sch.mod["main"]`).

A read-only view: sched schedules one PrimFunc at a time, which a module holds as "main" (as
TVM's `tir.Schedule(prim_func)` does).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from sched.ir.nodes import PrimFunc


class IRModule(Mapping):
    """Functions by name: `mod["main"]`, `mod.functions`, `mod.script()`, `mod.show()`."""

    def __init__(self, functions: Mapping[str, PrimFunc]) -> None:
        for name, func in functions.items():
            if not isinstance(name, str) or not isinstance(func, PrimFunc):
                raise TypeError(f"IRModule: expected names mapped to PrimFuncs, got "
                                f"{name!r}: {type(func).__name__}")
        self._functions = dict(functions)

    def __getitem__(self, name) -> PrimFunc:
        key = getattr(name, "name_hint", name)          # TVM's GlobalVar names itself so
        if key not in self._functions:
            raise KeyError(f"IRModule has no function {key!r}; it has "
                           f"{', '.join(map(repr, self._functions))}")
        return self._functions[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    def __eq__(self, other) -> bool:
        return isinstance(other, IRModule) and self._functions == other._functions

    __hash__ = None                                     # a mapping: compared by content

    @property
    def functions(self) -> dict[str, PrimFunc]:
        return dict(self._functions)

    def script(self) -> str:
        """Each function's script, one after the other."""
        return "\n\n".join(func.script() for func in self._functions.values())

    def show(self, *args, **kwargs) -> None:
        """Print `script()` (TVM's style and formatting arguments are accepted and ignored)."""
        print(self.script())

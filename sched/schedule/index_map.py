"""IndexMap: an index map given as a Python function of the old indices, the argument of
transform_layout, transform_block_layout and the reindex caches; kept as IR expressions so
that a trace prints it back as its lambda and reads it back from JSON (`read_lambda`).
"""

from __future__ import annotations

from sched.errors import ScheduleError
from sched.ir.functor import substitute
from sched.ir.nodes import Expr, Var, convert
from sched.ir.simplify import simplify
from sched.schedule.trace import JSON_READERS

PRIMITIVE = "transform_layout"

_ARGUMENTS = {"buffer": "indices", "block": "iteration variables"}


class IndexMap:
    """An index map given as a Python function of the old indices (`lambda i, j: (i // 4, j,
    i % 4)`), kept as IR expressions so that it prints back as that lambda in a trace."""

    def __init__(self, params: tuple[Var, ...], results: tuple[Expr, ...]) -> None:
        self.params, self.results = params, results

    @classmethod
    def from_callable(cls, function, ndim: int, dtype: str,
                      result_dtype: str | None = None, what: str = "index_map",
                      primitive: str = PRIMITIVE, of: str = "buffer") -> IndexMap:
        """The map of `function` over `ndim` indices of `dtype`; its results in
        `result_dtype` (default: `dtype`; a pad value's is the buffer's). `what`: the
        argument it was given as, `primitive` the step and `of` what it maps ("buffer" or
        "block"), for errors."""
        if isinstance(function, IndexMap):
            return function
        if not callable(function):
            raise ScheduleError(primitive, f"argument '{what}': expected a function of the "
                                f"{ndim} {_ARGUMENTS[of]} (lambda i, j: (i // 4, j, i % 4)), got "
                                f"{function!r}")
        names = getattr(getattr(function, "__code__", None), "co_varnames", ())[:ndim]
        params = tuple(Var(n if n else f"i{d}", dtype)
                       for d, n in enumerate(list(names) + [""] * (ndim - len(names))))
        try:
            results = function(*params)
            results = results if isinstance(results, tuple | list) else (results,)
            return cls(params, tuple(convert(r, result_dtype or dtype) for r in results))
        except TypeError as exc:
            raise ScheduleError(primitive, f"argument '{what}': calling it with the {ndim} "
                                f"{_ARGUMENTS[of]} of the {of} failed: {exc} (outside "
                                f"@T.prim_func, T.int32(4), T.float32(0.5), T.Cast, T.min, "
                                f"T.max, T.floordiv, T.truncdiv, the shifts, T.bitwise_and "
                                f"and T.if_then_else make expressions; any other T.<name> "
                                f"stands for nothing)") from None

    def __call__(self, *indices: Expr) -> tuple[Expr, ...]:
        mapping = dict(zip(self.params, indices, strict=True))
        return tuple(simplify(substitute(r, mapping)) for r in self.results)

    def __repr__(self) -> str:
        results = ", ".join(r.script() for r in self.results)
        comma = "," if len(self.results) == 1 else ""
        return f"lambda {', '.join(p.name for p in self.params)}: ({results}{comma})"

    json_key = "index_map"

    def to_json(self) -> dict:
        """The map in a trace's JSON: its lambda text and the dtype of its indices."""
        return {"lambda": repr(self), "dtype": self.params[0].dtype if self.params else "int32"}

    @classmethod
    def from_json(cls, value: dict) -> IndexMap:
        """The map `to_json` wrote, read back with the TVMScript expression parser."""
        params, body, read = read_lambda(value)
        return cls(params, tuple(read(e) for e in body))


def read_lambda(value: dict):
    """A map's lambda as `to_json` wrote it (its text and the dtype of its indices), read back
    with the TVMScript expression parser: (its parameters, the Python AST nodes of its
    results, a function reading one of them as IR)."""
    import ast

    from sched.ir.parse_expr import ExprParser

    node = ast.parse(value["lambda"], mode="eval").body
    parser = ExprParser()
    params = tuple(Var(a.arg, value["dtype"]) for a in node.args.args)
    for param in params:
        parser.bind(param.name, param)
    body = node.body.elts if isinstance(node.body, ast.Tuple) else [node.body]
    return params, body, lambda e: parser.expr(e, value["dtype"])


JSON_READERS[IndexMap.json_key] = IndexMap.from_json

"""Whether a block's iteration variables determine the keys of its non-affine bindings.

Fusing loops of symbolic extents binds `vi = f // m, vj = f % m`: not affine (m is a
parameter), so the model lets `vi` and `vj` take any value in their domains and tells the
block's runs apart by the key `f` (statements.py). Two runs at different keys then seem to
touch one element `B[vi, vj]`, and binding or parallelizing a loop over `f` is refused as
carrying an output dependence. But `f == (f // m) * m + f % m` for every `m != 0`: the
variables' values give the key back, so two runs at equal variables are one run. This module
proves that, for the dependence analysis to keep only pairs of runs at different variables or
at one key (pairs.pair_relation's `distinct`; `determining_variables` names the variables
that suffice):

    vi = (f0 * 64 + f1) // m,  vj = (f0 * 64 + f1) % m      key 64*f0 + f1: determined
    vi = f // (m * k),  vj = f // k % m,  vk = f % k         key f: determined (f // k first)
    vi = f // m,  vj = j                                     key f: not determined

A divisor must be positive on every run: a positive constant, a symbolic dim (at least 1),
or a product of those.
"""

from __future__ import annotations

import dataclasses

from sched.ir.dtype import bits, is_int
from sched.ir.functor import collect, free_vars
from sched.ir.nodes import BinaryOp, Cast, Expr, IntImm, Var
from sched.polyhedral.isl_expr import to_isl


def determining_variables(values: list[Expr], keys: list[str], dims: tuple[Var, ...]
                          ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(the positions of the iteration variables whose values (`values`: a block's bindings,
    in loop variables) determine every key of `keys` (isl texts of affine expressions), the
    positions of the keys taken as given), or None. The variables: those of the non-affine
    bindings where they suffice (`vx = f // n, vi = f % n` beside a reduction's `vk = k`:
    runs at equal vx and vi are at one f whatever vk), else all of them. The keys given:
    none where the variables suffice, else those no division of a binding divides, where
    they and the variables determine the others (`v0 = i_0 * 4 + f // k, v1 = f % k`: runs
    at equal v0, v1 and i_0 * 4 are at one f). `dims`: the function's symbolic dims, which
    are at least 1."""
    if not keys:
        return None
    keyed = tuple(p for p, v in enumerate(values) if to_isl(v) is None)
    divided = {to_isl(e.a) for v in values for e in collect(v, BinaryOp)
               if e.op in ("floordiv", "floormod")}
    plain = tuple(p for p, key in enumerate(keys) if key not in divided)
    for given in dict.fromkeys(((), plain)):
        if len(given) == len(keys):
            continue
        for positions in dict.fromkeys((keyed, tuple(range(len(values))))):
            if positions and keys_determined([values[p] for p in positions], keys, dims,
                                             [keys[g] for g in given]):
                return positions, given
    return None


def keys_determined(values: list[Expr], keys: list[str], dims: tuple[Var, ...],
                    given: list[str] = ()) -> bool:
    """Whether the expressions `values`, with the keys `given`, determine every key of
    `keys`: each key is one of them, or is recovered from a pair `x // d` and `x % d` among
    them (then `x` is one of them too, and so on), or from a sum `a + x` among them whose
    `a` is (then `x` is)."""
    if not keys:
        return False
    known = list(values)
    texts = {to_isl(e) for e in known} | set(given)
    recovered = True
    while recovered:
        recovered = False
        for x in [*_recoverable(known, dims), *_summands(known, texts)]:
            if x not in known:
                known.append(x)
                texts.add(to_isl(x))
                recovered = True
    return all(key in texts for key in keys)


def _summands(known: list[Expr], texts: set) -> list[Expr]:
    """The `x` of each sum `a + x` or `x + a` in `known` whose `a` is known (by isl text)."""
    found = []
    for v in known:
        if _is(v, "add"):
            if to_isl(v.a) is not None and to_isl(v.a) in texts:
                found.append(v.b)
            if to_isl(v.b) is not None and to_isl(v.b) in texts:
                found.append(v.a)
    return found


def _recoverable(known: list[Expr], dims: tuple[Var, ...]) -> list[Expr]:
    """The `x` of each pair `x // d`, `x % d` in `known` with a divisor `d` positive on every
    run (`x == (x // d) * d + x % d`); and `x // a` from `x // (a * b)` and `x // a % b`
    (for positive a and b, floor division by a then b is floor division by a * b)."""
    quotients = {(v.a, v.b): v for v in known
                 if _is(v, "floordiv") and positive_divisor(v.b, dims)}
    found = [v.a for v in known if _is(v, "floormod") and (v.a, v.b) in quotients]
    for v in known:       # x // a % b beside x // (a * b): x // a is recovered
        if _is(v, "floormod") and _is(v.a, "floordiv"):
            x, a, b = v.a.a, v.a.b, v.b
            if any(_is(d, "mul") and {d.a, d.b} == {a, b}
                   and positive_divisor(a, dims) and positive_divisor(b, dims)
                   for (y, d) in quotients
                   if y == x):
                found.append(v.a)
    return found


def _is(expr: Expr, op: str) -> bool:
    return isinstance(expr, BinaryOp) and expr.op == op


def positive_divisor(divisor: Expr, dims: tuple[Var, ...]) -> bool:
    """Whether `divisor` is positive on every run: a positive constant, a symbolic dim (at
    least 1; widened, as an int16 dim is in int32 arithmetic: audit helper-179) or a product
    of those."""
    if isinstance(divisor, IntImm):
        return divisor.value > 0
    if isinstance(divisor, Cast) and isinstance(divisor.value, Var) and \
            is_int(divisor.dtype) and is_int(divisor.value.dtype) and \
            not divisor.value.dtype.startswith("u") and \
            bits(divisor.dtype) >= bits(divisor.value.dtype):
        return divisor.value in dims
    if isinstance(divisor, Var):
        return divisor in dims
    return _is(divisor, "mul") and positive_divisor(divisor.a, dims) and \
        positive_divisor(divisor.b, dims)


def affine_arguments(expr: Expr, loop_vars: set[Var]) -> list[Expr]:
    """The largest affine parts of `expr` that use a loop: what a non-affine binding is a
    function of (`(i * m) % 8` -> `i`; `idx[i * 2]` -> `i * 2`), each once (the model's
    keys are their isl texts)."""
    if to_isl(expr) is not None:
        return [expr] if set(free_vars(expr)) & loop_vars else []
    found: list[Expr] = []
    for child in _expr_children(expr):
        found += [a for a in affine_arguments(child, loop_vars)
                  if to_isl(a) not in {to_isl(f) for f in found}]
    return found


def _expr_children(expr: Expr) -> list[Expr]:
    children = []
    for f in dataclasses.fields(expr):
        value = getattr(expr, f.name)
        values = value if isinstance(value, tuple) else (value,)
        children += [v for v in values if isinstance(v, Expr)]
    return children

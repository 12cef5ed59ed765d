"""isl maps and sets from their text, built with isl's API instead of its reader.

isl's text reader spends about 30 us per constraint and more with divisions: the nest of a
fused, split 8-loop conv2d statement takes it 1 to 3 ms, and a cold schedule step reads a dozen
such texts (a quarter of a cold conv2d trace replay went to isl's reader). The texts sched
writes (isl_expr.to_isl, the statements' nests and domains, the accesses) and the ones isl
prints and sched reads back use a small part of isl's syntax:

- parameters `[n, m] ->`, then one piece `{ S[i, j] -> B[a] : formula }` (a set has one tuple,
  or none: `{ : formula }` constrains the parameters only);
- tuple entries that are new names, names already given (an implicit equality: the entry is an
  unnamed dimension equal to it), `name = expression`, or expressions;
- a formula of comparison chains (`0 <= v < 0 + 64`) joined by `and` and `or`, with
  parentheses, `true` and `false`, optionally inside one `exists (e0, e1 : formula)`;
- expressions over integers and names: `+`, `-`, products with an integer (`2 * i`, `2i`),
  `floor(e / c)`, `e mod c` (c a positive integer).

`build(text)` reads that part and makes the same object through isl's API (affine expressions,
their comparisons, basic sets), three to five times faster; for anything else (`min`, `max`,
`!=`, `not`, `ceil`, several pieces, undeclared names, exists with definitions) it returns None
and the caller lets isl read the text. tests/polyhedral/test_isl_build.py compares the two on
every text the hand schedules, trace replays and the legality fuzzer's programs read.
"""

from __future__ import annotations

import itertools
import re

import islpy as isl

_TOKEN = re.compile(
    r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_']*)|(->|<=|>=|[-+*/()\[\]{}<>=,:;])|(\S))")
_COMPARISONS = ("<", "<=", "=", ">=", ">")
_KEYWORDS = frozenset({"and", "or", "not", "exists", "floor", "ceil", "mod", "min", "max",
                       "true", "false", "implies", "xor", "infty", "NaN", "rat"})
_MOST_DISJUNCTS = 64        # a formula's disjunctive normal form past this: isl reads it


class _Unsupported(Exception):
    """The text uses isl syntax the builder does not read."""


def _tokens(text: str) -> list[str | int | None]:
    """The text's tokens (integers, names, symbols), ending with None."""
    found: list[str | int | None] = []
    for number, name, symbol, other in _TOKEN.findall(text):
        if other:
            raise _Unsupported(other)
        found.append(int(number) if number else name or symbol)
    found.append(None)
    return found


def build(text: str, want_map: bool) -> isl.Map | isl.Set | None:
    """The isl map (`want_map`) or set that `text` denotes, built through isl's API, or None
    where the text uses syntax outside the part the module doc names."""
    try:
        return _Reader(_tokens(text)).read(want_map)
    except _Unsupported:
        return None


def _is_name(token) -> bool:
    return isinstance(token, str) and token not in _KEYWORDS and \
        (token[0].isalpha() or token[0] == "_")


class _Reader:
    """Recursive descent over the tokens of one text: the header (parameters, tuples) first,
    which fixes the space; then the tuples' expressions and the formula, as isl objects."""

    def __init__(self, tokens: list[str | int | None]) -> None:
        self.tokens, self.at = tokens, 0

    def peek(self):
        return self.tokens[self.at]

    def take(self, expected=None):
        token = self.tokens[self.at]
        if token is None or (expected is not None and token != expected):
            raise _Unsupported(f"expected {expected!r}, found {token!r}")
        self.at += 1
        return token

    # -- the header ------------------------------------------------------------------------

    def names(self, closing: str) -> list[str]:
        found: list[str] = []
        while self.peek() != closing:
            if found:
                self.take(",")
            name = self.take()
            if not _is_name(name):
                raise _Unsupported(f"a name expected, found {name!r}")
            found.append(name)
        self.take(closing)
        return found

    def skip_expression(self) -> tuple[int, int]:
        """The token span of the tuple entry's expression that starts here (to read once the
        space is known)."""
        start, depth = self.at, 0
        while not (depth == 0 and self.peek() in (",", "]")):
            token = self.take()
            depth += (token == "(") - (token == ")")
        if self.at == start:
            raise _Unsupported("an empty tuple entry")
        return start, self.at

    def tuple(self, declared: set[str]) -> tuple[str | None, list]:
        """A tuple's label and entries: (name, span) with the name None for an unnamed
        dimension and the span that of the expression it equals (or None)."""
        label = self.take() if _is_name(self.peek()) else None
        self.take("[")
        entries: list = []
        while self.peek() != "]":
            if entries:
                self.take(",")
            token, after = self.peek(), self.tokens[self.at + 1]
            if _is_name(token) and after in (",", "]") and token not in declared:
                self.take()
                entries.append((token, None))           # a new dimension
                declared.add(token)
            elif _is_name(token) and after == "=" and token not in declared:
                self.at += 2
                entries.append((token, self.skip_expression()))
                declared.add(token)
            else:
                entries.append((None, self.skip_expression()))
        self.take("]")
        return label, entries

    def read(self, want_map: bool):
        params: list[str] = []
        if self.peek() == "[":
            self.take("[")
            params = self.names("]")
            self.take("->")
        if len(set(params)) != len(params):
            raise _Unsupported("a repeated parameter")
        self.take("{")
        declared = set(params)
        tuples = []
        if self.peek() not in (":", "}"):
            tuples.append(self.tuple(declared))
            if self.peek() == "->":
                self.take("->")
                tuples.append(self.tuple(declared))
        if (len(tuples) == 2) != want_map:
            raise _Unsupported("a map where a set is wanted, or the other way round")
        quantified: list[str] = []
        formula = None
        if self.peek() == ":":
            self.take(":")
            if self.peek() == "exists":
                self.take()
                self.take("(")
                quantified = self.names(":")
                if declared & set(quantified) or len(set(quantified)) != len(quantified):
                    raise _Unsupported("an existential variable named like another")
            formula = self.at if self.peek() != "}" else None      # `{ [i] : }`: none
        after = self.at
        space = _space(params, tuples, len(quantified))
        local = isl.LocalSpace.from_space(space.wrap() if want_map else space)
        self.variables = {name: isl.Aff.var_on_domain(local, isl.dim_type.param, i)
                          for i, name in enumerate(params)}
        entries = [entry for _, tuple_entries in tuples for entry in tuple_entries]
        dims = [isl.Aff.var_on_domain(local, isl.dim_type.set, i)
                for i in range(len(entries) + len(quantified))]
        for (name, _), dim in zip(entries, dims):
            if name is not None:
                self.variables[name] = dim
        self.variables.update(zip(quantified, dims[len(entries):]))
        self.zero = isl.Aff.zero_on_domain(local)
        pieces = [isl.BasicSet.universe(local.get_space())]
        for (_, span), dim in zip(entries, dims):
            if span is not None:                        # the entry equals its expression
                pieces = [_constrained(p, dim, "=", self.expression_at(span)) for p in pieces]
        self.at = after
        if formula is not None:
            pieces = _and(pieces, self.disjunction())
            if quantified:
                self.take(")")
        self.take("}")
        if self.peek() is not None:
            raise _Unsupported("more than one piece")
        return _result(pieces, want_map, tuples, len(entries), len(quantified))

    def expression_at(self, span: tuple[int, int]) -> isl.Aff:
        self.at = span[0]
        value = self.expression()
        if self.at != span[1]:
            raise _Unsupported("a tuple entry that is not one expression")
        return value

    # -- formulas, as lists of basic sets (their disjunctive normal form) ------------------

    def disjunction(self) -> list[isl.BasicSet]:
        pieces = self.conjunction()
        while self.peek() == "or":
            self.take()
            pieces = pieces + self.conjunction()
            if len(pieces) > _MOST_DISJUNCTS:
                raise _Unsupported("too many disjuncts")
        return pieces

    def conjunction(self) -> list[isl.BasicSet]:
        pieces = self.conjunct()
        while self.peek() == "and":
            self.take()
            pieces = _and(pieces, self.conjunct())
        return pieces

    def conjunct(self) -> list[isl.BasicSet]:
        """One comparison chain, `true`, `false`, or a parenthesized formula."""
        universe = isl.BasicSet.universe(self.zero.get_domain_space())
        if self.peek() in ("true", "false"):
            return [universe] if self.take() == "true" else []
        if self.peek() == "(":
            start = self.at
            try:
                self.take("(")
                grouped = self.disjunction()
                self.take(")")
                return grouped
            except _Unsupported:
                self.at = start                 # an expression in parentheses
        left = self.expression()
        if self.peek() not in _COMPARISONS:
            raise _Unsupported(f"a constraint without comparison before {self.peek()!r}")
        points = universe
        while self.peek() in _COMPARISONS:
            op = self.take()
            right = self.expression()
            points = _constrained(points, left, op, right)
            left = right
        return [points]

    # -- expressions, as isl affine expressions --------------------------------------------

    def expression(self) -> isl.Aff:
        value = self.term()
        while self.peek() in ("+", "-"):
            value = value.add(self.term()) if self.take() == "+" else value.sub(self.term())
        return value

    def term(self) -> isl.Aff:
        value = self.unary()
        while True:
            token = self.peek()
            if token == "*":
                self.take()
                value = _product(value, self.unary())
            elif token == "mod":
                self.take()
                value = value.mod_val(_positive(self.take()))
            elif value.is_cst() and (_is_name(token) or token in ("(", "floor")):
                value = _product(value, self.atom())         # isl's `2i`, `3(i + 1)`
            else:
                return value

    def unary(self) -> isl.Aff:
        if self.peek() == "-":
            self.take()
            return self.unary().neg()
        return self.atom()

    def atom(self) -> isl.Aff:
        token = self.take()
        if isinstance(token, int):
            return self.zero.set_constant_val(integer_val(token, self.zero.get_ctx()))
        if token == "(":
            value = self.expression()
            self.take(")")
            return value
        if token == "floor":
            self.take("(")
            value = self.expression()
            self.take("/")
            divisor = _positive(self.take())
            self.take(")")
            return value.scale_down_val(divisor).floor()
        if token in self.variables:
            return self.variables[token]
        raise _Unsupported(f"name or symbol {token!r}")


def _and(first: list[isl.BasicSet], second: list[isl.BasicSet]) -> list[isl.BasicSet]:
    if len(first) * len(second) > _MOST_DISJUNCTS:
        raise _Unsupported("too many disjuncts")
    return [a.intersect(b) for a, b in itertools.product(first, second)]


def _positive(token) -> isl.Val:
    if not isinstance(token, int) or token <= 0:
        raise _Unsupported(f"divisor {token!r}")
    return integer_val(token)


_LONG = range(-2 ** 63, 2 ** 63)


def integer_val(value: int, ctx: isl.Context | None = None) -> isl.Val:
    """The isl value of a Python int of any size (isl's `int_from_si` takes a C long: 2**63,
    read as the negation of -2**63, did not fit)."""
    ctx = ctx or isl.DEFAULT_CONTEXT
    if value in _LONG:
        return isl.Val.int_from_si(ctx, value)
    return isl.Val.read_from_str(ctx, str(value))


def _product(a: isl.Aff, b: isl.Aff) -> isl.Aff:
    if b.is_cst():
        return a.scale_val(b.get_constant_val())
    if a.is_cst():
        return b.scale_val(a.get_constant_val())
    raise _Unsupported("a product of two variables")


def _constrained(points: isl.BasicSet, left: isl.Aff, op: str, right: isl.Aff
                 ) -> isl.BasicSet:
    """`points` where `left op right` holds: a constraint added where the two sides have no
    division, else an intersection with the comparison's set."""
    difference = left.sub(right) if op in ("<", "<=", "=") else right.sub(left)
    if difference.dim(isl.dim_type.div) == 0:           # difference op' 0, op' in < <= =
        if op == "=":
            return points.add_constraint(isl.Constraint.equality_from_aff(difference))
        if op in ("<", ">"):                            # d < 0: -d - 1 >= 0
            difference = difference.add_constant_val(isl.Val.one(difference.get_ctx()))
        return points.add_constraint(isl.Constraint.inequality_from_aff(difference.neg()))
    return points.intersect(getattr(left, _COMPARISON_SETS[op])(right))


_COMPARISON_SETS = {"<": "lt_basic_set", "<=": "le_basic_set", "=": "eq_basic_set",
                    ">=": "ge_basic_set", ">": "gt_basic_set"}


def _space(params: list[str], tuples: list, quantified: int) -> isl.Space:
    """The space of the text: its parameters and tuples, with their names, and `quantified`
    more dims at the end of the last tuple (existentially quantified: projected out)."""
    context = isl.DEFAULT_CONTEXT
    if not tuples:
        space = isl.Space.set_alloc(context, len(params), quantified)
        named = ()
    elif len(tuples) == 1:
        (label, entries), = tuples
        space = isl.Space.set_alloc(context, len(params), len(entries) + quantified)
        named = ((isl.dim_type.set, label, entries),)
    else:
        (first, ins), (second, outs) = tuples
        space = isl.Space.alloc(context, len(params), len(ins), len(outs) + quantified)
        named = ((isl.dim_type.in_, first, ins), (isl.dim_type.out, second, outs))
    for i, name in enumerate(params):
        space = space.set_dim_name(isl.dim_type.param, i, name)
    for kind, label, entries in named:
        for i, (name, _) in enumerate(entries):
            if name is not None:            # `vi'` names the dimension vi, as isl reads it
                space = space.set_dim_name(kind, i, name.rstrip("'"))
        if label is not None:
            space = space.set_tuple_name(kind, label)
    return space


def _result(pieces: list[isl.BasicSet], want_map: bool, tuples: list, dims: int,
            quantified: int) -> isl.Map | isl.Set:
    """The union of `pieces` as the map or set of the text, its existentially quantified
    dims (the last `quantified`) projected out."""
    if not pieces:
        raise _Unsupported("an empty formula")          # (`false`: rare, left to isl)
    found = None
    for piece in pieces:
        piece = isl.Map.from_basic_map(piece.unwrap()) if want_map else \
            isl.Set.from_basic_set(piece)
        found = piece if found is None else found.union(piece)
    if want_map:
        if quantified:
            found = found.project_out(isl.dim_type.out, len(tuples[1][1]), quantified)
            if tuples[1][0] is not None:
                found = found.set_tuple_name(isl.dim_type.out, tuples[1][0])
        return found
    if quantified:
        found = found.project_out(isl.dim_type.set, dims, quantified)
        if tuples and tuples[0][0] is not None:
            found = found.set_tuple_name(tuples[0][0])
    return found if tuples else found.params()

"""Buffer accesses, regions and declarations of TVMScript: `A[i, j]`, `T.reads(A[vi, 0:128])`,
a view's window (`RegionView`), dtypes, shapes and annotations.

`RegionParser` is a part of `ExprParser` (parse_expr.py), which gives it the scopes, the
errors and the expressions (`expr`, `value`, `lookup_buffer`, `_view_of`, `_guard`).
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass

from sched.ir.builders import is_constant
from sched.ir.dtype import INDEX_DTYPE, check_dtype, is_int, max_value
from sched.ir.nodes import (
    Annotations,
    BinaryOp,
    Buffer,
    BufferRegion,
    Expr,
    FloatImm,
    IntImm,
    Range,
    binary,
    const,
    convert,
)
from sched.ir.parse_names import t_name
from sched.ir.simplify import simplify

DIM_ALIGN = "buffer_dim_align"   # a block annotation (schedule/storage_align.py)

Literal = int | float | bool
Value = Expr | Literal


def extent_between(lo: Expr, hi: Expr) -> Expr:
    """The extent of [lo, hi): `e` when `hi` is `lo + e` as written, else `simplify(hi - lo)`.

    The printer writes `hi` so that this gives back the extent it had, exactly.
    """
    if isinstance(hi, BinaryOp) and hi.op == "add" and hi.a == lo:
        return hi.b
    return simplify(binary("sub", hi, lo))


def typed(*values: Value) -> str:
    """The dtype of the first expression among `values` (int32 when all are literals)."""
    return next((v.dtype for v in values if isinstance(v, Expr)), INDEX_DTYPE)


@dataclass(frozen=True)
class RegionView:
    """`X = T.match_buffer(A[lo:hi, ...], shape)` inside a block: `buffer` is X as declared,
    a window onto `region` of `source`. An access of X is read as one of `source` at the
    region's start plus its indices; `dims` says which dimension of the region each of X's
    dimensions is (the others have extent 1)."""

    buffer: Buffer
    source: Buffer
    region: tuple[Range, ...]
    dims: tuple[int, ...]

    def place(self, ranges: list[Range]) -> tuple[Range, ...]:
        """Ranges of the view as ranges of the source."""
        placed = [Range(r.min, const(1, r.min.dtype)) for r in self.region]
        for dim, r in zip(self.dims, ranges, strict=True):
            lo = self.region[dim].min
            placed[dim] = Range(r.min if _is_zero(lo) else simplify(lo + r.min), r.extent)
        return tuple(placed)


def dense_layout(found: Buffer | RegionView) -> tuple[tuple[Expr, ...], Expr]:
    """(strides, element offset) of a buffer (dense, row-major, from its first element) or of
    a view (its window's, in the buffer it views)."""
    if isinstance(found, Buffer):
        return dense_strides(found.shape), const(0, "int32")
    strides = dense_strides(found.source.shape)
    offset: Expr = const(0, "int32")
    for r, stride in zip(found.region, strides, strict=True):
        offset = simplify(offset + r.min * stride)
    return tuple(strides[d] for d in found.dims), offset


def dense_strides(shape: tuple[Expr, ...]) -> tuple[Expr, ...]:
    """Row-major strides of `shape`: `(n * m, m, 1)` for `(k, n, m)`."""
    strides: list[Expr] = []
    stride: Expr = const(1, shape[-1].dtype if shape else "int32")
    for dim in reversed(shape):
        strides.append(stride)
        stride = simplify(stride * dim)
    return tuple(reversed(strides))


def _is_zero(expr: Expr) -> bool:
    return isinstance(expr, IntImm) and expr.value == 0


def _is_zero(expr: Expr) -> bool:
    return isinstance(expr, IntImm) and expr.value == 0


class RegionParser:
    """Accesses, ranges, regions and declarations (a part of ExprParser)."""

    # ----------------------------------------------------------------------------------------
    # Buffer accesses, ranges and regions

    def access(self, node: ast.Subscript) -> tuple[Buffer, tuple[Expr, ...]]:
        """The buffer and indices of `A[i, j]` (a load or a store)."""
        view = self._view_of(node.value)
        buffer = view.buffer if view is not None else self.lookup_buffer(node.value)
        elements = subscript_elements(node)
        if any(isinstance(e, ast.Slice) for e in elements):
            raise self.error(node, f"'{ast.unparse(node)}': a slice is only allowed in "
                                   f"T.reads/T.writes")
        if len(elements) != buffer.ndim:
            raise self.error(node, f"buffer '{buffer.name}' has {buffer.ndim} dimension"
                                   f"{'' if buffer.ndim == 1 else 's'} but "
                                   f"'{ast.unparse(node)}' gives {len(elements)} indices")
        indices = tuple(self.expr(e) for e in elements)
        for element, index in zip(elements, indices):
            if not is_int(index.dtype):
                raise self.error(node, f"'{ast.unparse(node)}': the index "
                                       f"'{ast.unparse(element)}' is {index.dtype}; an index "
                                       f"must be an integer (T.Cast it, or floor it)")
        if view is not None:
            return view.source, tuple(r.min for r in view.place([Range(i, const(1, i.dtype))
                                                                   for i in indices]))
        return buffer, indices

    def bounds(self, lo_node: ast.AST | None, hi_node: ast.AST | None,
               default_hi: Expr | None = None, counted: bool = True) -> tuple[Expr, Expr]:
        """(min, extent) of the half-open range written `lo, hi` (see `extent_between`);
        `counted`: a loop's or an axis's, whose narrow extent and end must hold (a region's
        `X[A[vi] - T.uint8(200):A[vi] - T.uint8(200) + 1]` is not)."""
        lo = self.value(lo_node) if lo_node is not None else 0
        hi = self.value(hi_node) if hi_node is not None else default_hi
        node = hi_node or lo_node
        dtype = typed(lo, hi)
        lo, hi = self._guard(node, lambda: (convert(lo, dtype), convert(hi, dtype)))
        if counted and dtype not in ("int32", "int64") and not is_constant(lo, 0):
            return lo, self._narrow_extent(node, lo, hi)
        return lo, self._guard(node, lambda: extent_between(lo, hi))

    def _narrow_extent(self, node: ast.AST, lo: Expr, hi: Expr) -> Expr:
        """The extent of [lo, hi) in an 8- or 16-bit or unsigned type, which must count it
        and whose end `lo + extent` (the C loop's bound) must hold: `hi - lo` in the type
        wrapped (`T.serial(T.int8(-100), T.int8(100))` had the extent -56, and
        `T.serial(T.uint8(10), T.uint8(5))` 251, which split then ran: audit helper-189),
        and so did an end past the type (`T.serial(T.uint8(156), T.uint8(156) + 100)` ran
        no iteration on C: helper-191). Constant bounds give the exact count, 0 for an
        empty range; symbolic ones are refused."""
        written = hi.b if isinstance(hi, BinaryOp) and hi.op == "add" and hi.a == lo else None
        if isinstance(lo, IntImm) and isinstance(written, IntImm):
            hi = IntImm(lo.value + written.value, "int64")
        if isinstance(lo, IntImm) and isinstance(hi, IntImm):
            count = max(hi.value - lo.value, 0)
            if count > max_value(lo.dtype) or lo.value + count > max_value(lo.dtype):
                raise self.error(node, f"the range [{lo.value}, {hi.value}) in {lo.dtype}: "
                                       f"its count ({count}) or its end must fit {lo.dtype} "
                                       f"(at most {max_value(lo.dtype)}): write it in int32")
            return const(count, lo.dtype)
        raise self.error(node, f"the range [{lo.script()}, {hi.script()}) in {lo.dtype}: its "
                               f"extent and its end are computed in {lo.dtype} and may wrap; "
                               f"start it at 0, or write it in int32")

    def region(self, node: ast.AST) -> BufferRegion:
        """`A[vi, 0:128]` (a bare index is a range of extent 1), or `A` for all of it."""
        view = self._view_of(node.value if isinstance(node, ast.Subscript) else node)
        if view is not None:
            shown = view.buffer
            if isinstance(node, ast.Name):
                ranges = [Range(const(0, d.dtype), d) for d in shown.shape]
            else:
                ranges = list(self._ranges(node, shown))
            return BufferRegion(view.source, view.place(ranges))
        if isinstance(node, ast.Name):
            buffer = self.lookup_buffer(node)
            return BufferRegion(buffer, tuple(Range(const(0, d.dtype), d) for d in buffer.shape))
        if not isinstance(node, ast.Subscript):
            raise self.error(node, f"expected a buffer region such as A[vi, 0:128], got "
                                   f"'{ast.unparse(node)}'")
        buffer = self.lookup_buffer(node.value)
        return BufferRegion(buffer, self._ranges(node, buffer))

    def _ranges(self, node: ast.Subscript, buffer: Buffer) -> tuple[Range, ...]:
        elements = subscript_elements(node)
        if len(elements) != buffer.ndim:
            raise self.error(node, f"buffer '{buffer.name}' has {buffer.ndim} dimensions but "
                                   f"region '{ast.unparse(node)}' gives {len(elements)}")
        ranges = []
        for element, dim in zip(elements, buffer.shape, strict=True):
            if isinstance(element, ast.Slice):
                if element.step is not None:
                    raise self.error(node, "a region cannot have a step")
                ranges.append(Range(*self.bounds(element.lower, element.upper, dim,
                                                 counted=False)))
            else:
                index = self.expr(element)
                ranges.append(Range(index, const(1, index.dtype)))
        return tuple(ranges)

    # ----------------------------------------------------------------------------------------
    # Declarations: dtypes, shapes, buffers, annotations

    def dtype(self, node: ast.AST) -> str:
        """A dtype written `"float32"`, `T.float32`, or a name of the Python scope around the
        function holding such a string (`dtype = "float16"`)."""
        name = t_name(node)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value
        if isinstance(node, ast.Name) and isinstance(self.outer.get(node.id), str) and \
                not any(node.id in scope for scope in self.scopes):
            name = self.outer[node.id]
        if name is None:
            raise self.error(node, f"expected a dtype such as \"float32\", got "
                                   f"'{ast.unparse(node)}'")
        return self._guard(node, lambda: check_dtype(name))

    def shape(self, node: ast.AST) -> tuple[Expr, ...]:
        elements = node.elts if isinstance(node, ast.Tuple | ast.List) else [node]
        return tuple(self.expr(e) for e in elements)

    def annotations(self, node: ast.AST) -> Annotations:
        """`{"key": value, ...}` with number, string or bool values."""
        if not isinstance(node, ast.Dict):
            raise self.error(node, f"expected a dict of annotations, got '{ast.unparse(node)}'")
        pairs = []
        for key, value in zip(node.keys, node.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                raise self.error(node, "annotation keys must be strings")
            if key.value == DIM_ALIGN and isinstance(value, ast.List | ast.Tuple):
                pairs.append((key.value, self._dim_align(value)))
                continue
            pairs.append((key.value, self._annotation_value(value)))
        return tuple(pairs)

    def _dim_align(self, node: ast.AST) -> str:
        """TVM's printed `"buffer_dim_align": [[0, 0, 128, 1]]` as sched keeps it: the JSON
        text (schedule/storage_align.py)."""
        try:
            value = ast.literal_eval(node)
        except ValueError:
            value = None
        if not (isinstance(value, list | tuple) and all(
                isinstance(item, list | tuple) and len(item) == 4 and
                all(type(x) is int for x in item) for item in value)):
            raise self.error(node, f"annotation value '{ast.unparse(node)}': "
                                   f"{DIM_ALIGN} holds [buffer_index, axis, factor, offset] "
                                   f"lists of ints")
        return json.dumps([list(item) for item in value])

    def _annotation_value(self, node: ast.AST):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.List | ast.Tuple):      # `[0, 0, 1]`: a tuple of ints
            items = [self._annotation_value(item) for item in node.elts]
            if not all(type(item) is int for item in items):
                raise self.error(node, f"annotation value '{ast.unparse(node)}': a list "
                                       f"annotation holds ints only")
            return tuple(items)
        value = self.value(node) if isinstance(node, ast.Constant | ast.UnaryOp | ast.Call) \
            else None
        if isinstance(value, IntImm | FloatImm):
            value = bool(value.value) if value.dtype == "bool" else value.value
        if not isinstance(value, bool | int | float):
            raise self.error(node, f"annotation value '{ast.unparse(node)}' is not a number, "
                                   f"string or bool")
        return value


def subscript_elements(node: ast.Subscript) -> list[ast.AST]:
    """The comma-separated items of `A[...]` (none for `A[()]`)."""
    index = node.slice
    return list(index.elts) if isinstance(index, ast.Tuple) else [index]

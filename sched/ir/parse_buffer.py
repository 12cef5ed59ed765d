"""Buffer declarations of TVMScript: `T.Buffer`, `T.match_buffer`, `T.alloc_buffer`,
`T.decl_buffer`, and `T.match_buffer` of a region inside a block (a view).

sched's buffers are dense and row-major, starting at their first element. TVM's layout
arguments are read against that layout, never dropped:

- `strides=` and `elem_offset=` must describe it. A constant (or an expression of known
  variables) must equal the dense value; a variable of its own (`strides=[s0, s1]` with `s0`
  declared `s0 = T.int32()` at the top of the function or not declared at all, or a string
  `"s0"`) is bound to the dense value, in the rest of the scope too; a parameter, loop or block
  variable has a value of its own and is compared like an expression. That is sound because
  a kernel only ever receives dense arrays (the argument check refuses others:
  `np.ascontiguousarray` / `tensor.contiguous()`), so the variable can take no other value.
  Anything else is an error naming the argument and the dense value.
- `align=` and `offset_factor=` (non-negative integers) constrain where a buffer may start;
  a dense buffer passed at its first element meets any `offset_factor`, and sched's
  allocations are aligned for the widest vector it emits, so they change nothing and are
  checked and then not kept (`func.script()` does not print them).
- `scope=""` is TVM's spelling of the global scope.

A view `X = T.match_buffer(A[vi * 16:vi * 16 + 16, 0:16], (16, 16))` in a block is read as a
window: `X[i, j]` is `A[vi * 16 + i, j]` (see `parse_regions.RegionView`), so the IR holds no view
and printing gives the accesses of `A`. Its strides and offset are those of the window in `A`.
"""

from __future__ import annotations

import ast
import math
from collections import Counter
from collections.abc import Callable

from sched.ir.dtype import is_int
from sched.ir.functor import free_vars
from sched.ir.nodes import (
    SCOPES,
    TRUE,
    BinaryOp,
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    Cast,
    Expr,
    IntImm,
    Range,
    Stmt,
    Var,
    canonical_scope,
    const,
    seq,
)
from sched.ir.parse_expr import ExprParser, call_name
from sched.ir.parse_regions import RegionView, dense_layout, dense_strides, subscript_elements
from sched.ir.simplify import simplify

_LAYOUT_KEYWORDS = ("strides", "elem_offset", "align", "offset_factor")
# the dense layout of a declared shape: (strides, element offset)
Layout = tuple[tuple[Expr, ...], Expr]


def _flatten(node: ast.AST) -> list[ast.AST]:
    """The items of a (nested) list or tuple literal, in order."""
    if isinstance(node, ast.List | ast.Tuple):
        return [leaf for item in node.elts for leaf in _flatten(item)]
    return [node]


class BufferParser(ExprParser):
    """Buffer declarations, on top of expressions; `parse_stmt.StmtParser` builds on it."""

    def buffer(self, name: str, node: ast.Call | ast.Subscript, construct: str,
               layout: Callable[[tuple[Expr, ...]], Layout] | None = None) -> Buffer:
        """The buffer `name` declared by `T.Buffer((128, 64), "float32", scope=..., data=X.data)`,
        `T.Buffer[(128, 64), "float32"]`, `T.alloc_buffer(...)`, `T.decl_buffer(...)` or the
        arguments after the handle of `T.match_buffer(...)`. The dtype defaults to float32.
        `layout` gives the strides and offset the declaration may state (dense by default)."""
        if isinstance(node, ast.Subscript):
            items = subscript_elements(node)
            last = items[-1] if items else None
            if not (isinstance(last, ast.Constant) and isinstance(last.value, str)):
                items = [node.slice]
            args, keywords = items, []
        else:
            args, keywords = node.args, node.keywords
            if construct == "T.match_buffer":
                args = args[1:]
        if len(args) > 2:
            raise self.error(node, f"{construct}: expected (shape, dtype), got "
                                   f"{len(args)} positional arguments")
        given = dict(zip(("shape", "dtype"), args, strict=False))
        for keyword in keywords:
            known = ("shape", "dtype", "scope", "data", "buffer_type", "axis_separators",
                     *_LAYOUT_KEYWORDS)
            if keyword.arg not in known or keyword.arg in given:
                hint = "" if keyword.arg in known else f": expected one of {', '.join(known)}"
                raise self.error(node, f"{construct}: unsupported argument "
                                       f"'{keyword.arg}'{hint}")
            given[keyword.arg] = keyword.value
        self._check_default_only(node, construct, given)
        if "shape" not in given:
            raise self.error(node, f"{construct}: missing the shape")
        dtype = self.dtype(given["dtype"]) if "dtype" in given else "float32"
        scope = self._scope(given["scope"]) if "scope" in given else "global"
        data = self._data(given["data"]) if "data" in given else None
        shape = self.shape(given["shape"])
        strides, offset = (layout or (lambda s: (dense_strides(s), const(0, "int32"))))(shape)
        self._check_layout(node, f"{construct} '{name}'", given, strides, offset)
        if data is not None:
            self._check_view_fits(node, f"{construct} '{name}'", shape, dtype, data)
        return Buffer(name, shape, dtype, scope, data)

    def _check_view_fits(self, node: ast.AST, what: str, shape: tuple[Expr, ...], dtype: str,
                         storage: str) -> None:
        """A view (`data=`) has the element type of the storage it names and at most its
        elements: sched reads a view as the storage's elements in row-major order, so another
        dtype would convert values instead of reinterpreting bytes, and a larger view reads
        and writes past the storage's end (audit helper-102: `T.decl_buffer((16,),
        data=A.data)` of an A of 8 wrote 8 floats past the caller's array)."""
        # the storage's buffer, past names that shadow it (`for C in range(1)` around a view
        # of the parameter C: audit helper-108)
        owner = next((scope[storage] for scope in reversed(self.scopes)
                      if isinstance(scope.get(storage), Buffer)), None)
        if owner is None or owner.data is not None:
            return
        if dtype != owner.dtype:
            raise self.error(node, f"{what}: a view of '{storage}' ({owner.dtype}) must have "
                                   f"its dtype, got {dtype}; sched does not reinterpret "
                                   f"memory as another type (cast the values instead)")
        extra = simplify(_elements(shape) - _elements(owner.shape))
        if not (isinstance(extra, IntImm) and extra.value <= 0) and \
                not _fewer_by_factors(shape, owner.shape):
            shown = ", ".join(d.script() for d in shape)
            whole = ", ".join(d.script() for d in owner.shape)
            why = "has more elements" if isinstance(extra, IntImm) else \
                "may have more elements (sched cannot compare the symbolic sizes)"
            raise self.error(node, f"{what}: the view ({shown}) of '{storage}' ({whole}) "
                                   f"{why}: it would access past the storage's end; give "
                                   f"the view at most the storage's elements")

    def _check_default_only(self, node: ast.AST, construct: str, given: dict) -> None:
        """`buffer_type="default"` and `axis_separators=[]` are TVM's defaults, which sched's
        buffers have; any other value is refused."""
        kind = given.pop("buffer_type", None)
        if kind is not None and not (isinstance(kind, ast.Constant) and kind.value in
                                     ("", "default")):
            raise self.error(node, f"{construct}: buffer_type={ast.unparse(kind)} is not "
                                   f"supported: sched's buffers are dense arrays (TVM's "
                                   f"\"default\"); drop the argument")
        separators = given.pop("axis_separators", None)
        if separators is not None and not (isinstance(separators, ast.List | ast.Tuple)
                                           and not separators.elts):
            raise self.error(node, f"{construct}: axis_separators={ast.unparse(separators)} "
                                   f"is not supported: sched flattens every buffer to one "
                                   f"dimension (axis_separators=[]); drop the argument")

    def region_view(self, name: str, call: ast.Call) -> RegionView:
        """`X = T.match_buffer(A[lo:hi, ...], shape, ...)` in a block: the window of the
        region, whose shape must be the region's extents (extent-1 dimensions may be left
        out)."""
        region = self.region(call.args[0])
        source = region.buffer
        dims_of: list[tuple[int, ...]] = []

        def layout(shape: tuple[Expr, ...]) -> Layout:
            dims = self._view_dims(call, name, region.region, shape)
            dims_of.append(dims)
            return dense_layout(RegionView(None, source, region.region, dims))

        view = self.buffer(name, call, "T.match_buffer", layout)
        if view.dtype != source.dtype or view.scope != source.scope:
            raise self.error(call, f"T.match_buffer '{name}': a view of '{source.name}' has "
                                   f"its dtype {source.dtype} and scope {source.scope}, "
                                   f"got {view.dtype} and {view.scope}")
        return RegionView(view, source, region.region, dims_of[0])

    def _view_dims(self, node: ast.AST, name: str, region: tuple[Range, ...],
                   shape: tuple[Expr, ...]) -> tuple[int, ...]:
        extents = [simplify(r.extent) for r in region]
        if len(shape) == len(region):
            dims = tuple(range(len(shape)))
        else:
            dims = tuple(d for d, e in enumerate(extents)
                         if not (isinstance(e, IntImm) and e.value == 1))
        mismatch = len(dims) != len(shape) or any(
            simplify(extents[d]) != simplify(dim) for d, dim in zip(dims, shape, strict=False))
        if mismatch:
            shown = ", ".join(e.script() for e in extents)
            raise self.error(node, f"T.match_buffer '{name}': shape "
                                   f"({', '.join(d.script() for d in shape)}) is not the "
                                   f"region's extents ({shown}) (dimensions of extent 1 may "
                                   f"be left out)")
        return dims

    def _check_layout(self, node: ast.AST, what: str, given: dict, strides: tuple[Expr, ...],
                      offset: Expr) -> None:
        """`strides=`/`elem_offset=` must be the dense layout (a new variable is bound to it);
        `align=`/`offset_factor=` must be non-negative integers."""
        for key in ("align", "offset_factor"):
            if key in given and not (isinstance(given[key], ast.Constant)
                                     and type(given[key].value) is int
                                     and given[key].value >= -1):
                raise self.error(node, f"{what}: {key}= must be an integer, got "
                                       f"'{ast.unparse(given[key])}'")
        if "elem_offset" in given:
            self._match_layout(node, what, "elem_offset", given["elem_offset"], offset)
        if "strides" in given:
            items = given["strides"]
            items = items.elts if isinstance(items, ast.Tuple | ast.List) else [items]
            if len(items) not in (0, len(strides)):
                raise self.error(node, f"{what}: strides= has {len(items)} entries for "
                                       f"{len(strides)} dimensions")
            for item, stride in zip(items, strides, strict=False):
                self._match_layout(node, what, "strides", item, stride)

    def _match_layout(self, node: ast.AST, what: str, key: str, item: ast.AST,
                      dense: Expr) -> None:
        name = item.value if isinstance(item, ast.Constant) and isinstance(item.value, str) \
            else item.id if isinstance(item, ast.Name) else None
        if name is not None and self._is_free_layout_var(name):
            self.bind(name, dense.astype(self._declared_dtype(name)))
            return
        if _anonymous_variable(item):        # `T.int32()` in place: a variable of its own
            return
        value = self.expr(item)
        if simplify(value.astype(dense.dtype)) != simplify(dense):
            own = "" if name is None or not isinstance(self._found(name), Var) else (
                f" ('{name}' has a value of its own, a parameter's or a loop's, that the "
                f"layout cannot set; write the dense value, or a variable declared for the "
                f"layout, `s0 = T.int32()` at the top of the function)")
            raise self.error(node, f"{what}: {key}={ast.unparse(item)} is not sched's dense "
                                   f"row-major layout, whose {key} is {dense.script()}: sched "
                                   f"buffers are dense (copy a strided or offset array into a "
                                   f"dense one first){own}")

    def _is_free_layout_var(self, name: str) -> bool:
        """Whether `name` is undeclared (in the script and around it), or declared
        `name = T.int32()` at the top of the function for the layout alone (no buffer shape in
        scope uses it), so that binding it to the dense value is sound. A parameter, a loop or
        block variable, a let has a value of its own (audit helper-91: `strides=[lda, 1]` of a
        parameter lda replaced the caller's lda by the dense stride everywhere, `strides=[vj]`
        of a block variable made vj the constant 1)."""
        found = self._found(name)
        if found is None:
            return name not in self.outer
        if not isinstance(found, Var) or self.declared_symbols.get(name) is not found:
            return False
        for scope in self.scopes:
            for value in scope.values():
                if isinstance(value, Buffer) and any(found in free_vars(d) for d in value.shape):
                    return False
        return True

    def _found(self, name: str):
        return next((scope[name] for scope in reversed(self.scopes) if name in scope), None)

    def _declared_dtype(self, name: str) -> str:
        found = self._found(name)
        return found.dtype if isinstance(found, Var) else "int32"

    def _bind_view(self, node: ast.Assign) -> None:
        """`A_flat = T.Buffer((8192,), "float32", data=A.data)`: a name, no statement.
        `B_1 = T.Buffer((10,), data=B)` of a `T.allocate_const` B of that shape and dtype (as
        TVM prints it) is B itself."""
        name = node.targets[0].id
        data = next((k.value for k in node.value.keywords if k.arg == "data"), None)
        if isinstance(data, ast.Name):
            source = self.lookup_buffer(data)
            view = self.buffer(name, _without_keyword(node.value, "data"), "T.Buffer")
            if (view.shape, view.dtype) != (source.shape, source.dtype):
                raise self.error(node, f"T.Buffer '{name}' (data={data.id}) must have the "
                                       f"shape and dtype of '{data.id}'")
            self.bind(name, source)
            return
        self.bind(name, self.buffer(name, node.value, "T.Buffer"))

    def allocate_const(self, name: str, call: ast.Call, block_name: str) -> tuple[Buffer, Stmt]:
        """`X = T.allocate_const([1, 2, 3, 4], "int32", [2, 2])`: a buffer `X` of constants.

        Read as an allocation (the caller adds it to the enclosing block) and a block
        `block_name` that stores the values, row-major, where the statement stands, so that
        the IR needs no constant node and prints back as `T.alloc_buffer` and a block."""
        keywords = {k.arg for k in call.keywords} - {"annotations"}
        if len(call.args) != 3 or keywords:
            raise self.error(call, "T.allocate_const takes (values, dtype, shape), as in "
                                   "T.allocate_const([1, 2, 3, 4], \"int32\", [4])")
        values_node, dtype_node, shape_node = call.args
        dtype = self.dtype(dtype_node)
        shape = self.shape(shape_node)
        values = [self._constant(item) for item in _flatten(values_node)]
        if not all(isinstance(d, IntImm) for d in shape) \
                or math.prod(d.value for d in shape) != len(values):
            raise self.error(call, f"T.allocate_const '{name}': {len(values)} values for the "
                                   f"shape ({', '.join(d.script() for d in shape)}); the shape "
                                   f"must be constant and hold exactly the values")
        buffer = Buffer(name, shape, dtype)
        extents = [d.value for d in shape]
        stores = []
        for flat, value in enumerate(values):
            index = []
            for extent in reversed(extents):
                index.append(const(flat % extent, shape[0].dtype))
                flat //= extent
            stores.append(BufferStore(buffer, self._guard(call, lambda v=value: const(v, dtype)),
                                      tuple(reversed(index))))
        whole = BufferRegion(buffer, tuple(Range(const(0, d.dtype), d) for d in shape))
        fill = Block(block_name, (), (), (whole,), seq(*stores))
        return buffer, BlockRealize((), TRUE, fill)

    def _constant(self, node: ast.AST) -> int | float:
        value = self.value(node)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(node, f"T.allocate_const: '{ast.unparse(node)}' is not a number")
        return value

    def _scope(self, node: ast.AST) -> str:
        if isinstance(node, ast.Constant) and node.value == "":
            return "global"                    # TVM's default scope, written ""
        if not (isinstance(node, ast.Constant) and canonical_scope(node.value) in SCOPES):
            raise self.error(node, f"unknown storage scope '{ast.unparse(node)}': expected one "
                                   f"of {', '.join(SCOPES)}")
        return canonical_scope(node.value)

    def _data(self, node: ast.AST) -> str:
        """`data=X.data`, or `data=X` of an `X = T.allocate(...)` (TVM's lowered form, where X
        is the allocation's pointer): the storage shared, X's own where X shares another's
        (audit helper-94: `B2 = T.decl_buffer(..., data=B1)` of a B1 over `buf` named B1's
        storage 'B1', which nothing allocates: B1 never saw B2's stores)."""
        if isinstance(node, ast.Name) and isinstance(self._found(node.id), Buffer):
            return self._found(node.id).storage_name
        if not (isinstance(node, ast.Attribute) and node.attr == "data"
                and isinstance(node.value, ast.Name)):
            raise self.error(node, f"expected data=X.data, got '{ast.unparse(node)}'")
        found = self._found(node.value.id)
        if isinstance(found, RegionView):       # helper-97: a dangling 'Sub' at build
            raise self.error(node, f"data={ast.unparse(node)}: '{node.value.id}' is a view "
                                   f"of a region of '{found.source.name}' (T.match_buffer in "
                                   f"a block); declare the buffer over '{found.source.name}'")
        return found.storage_name if isinstance(found, Buffer) else node.value.id


def _fewer_by_factors(shape: tuple[Expr, ...], owner: tuple[Expr, ...]) -> bool:
    """Whether a buffer of `shape` has at most the elements of one of `owner`, both being
    products of the same symbolic dims (in any order) and constants: `(m * n,)` over
    `(n, m)` (audit helper-108: refused, the products differ in order only)."""
    def factors(dims) -> tuple[int, Counter] | None:
        constant, symbols = 1, Counter()
        pending = list(dims)
        while pending:
            dim = pending.pop()
            if isinstance(dim, Cast) and is_int(dim.dtype) and is_int(dim.value.dtype):
                pending.append(dim.value)
            elif isinstance(dim, BinaryOp) and dim.op == "mul":
                pending += [dim.a, dim.b]
            elif isinstance(dim, IntImm):
                constant *= dim.value
            elif isinstance(dim, Var):
                symbols[dim.name] += 1
            else:
                return None
        return constant, symbols
    mine, theirs = factors(shape), factors(owner)
    return mine is not None and theirs is not None and mine[1] == theirs[1] and \
        0 <= mine[0] <= theirs[0]


def _elements(shape: tuple[Expr, ...]) -> Expr:
    """The number of elements of a buffer of `shape`, as an expression."""
    count: Expr = const(1, shape[0].dtype if shape else "int32")
    for dim in shape:
        count = count * dim
    return count


def _without_keyword(call: ast.Call, name: str) -> ast.Call:
    return ast.Call(call.func, call.args, [k for k in call.keywords if k.arg != name],
                    lineno=call.lineno, col_offset=call.col_offset)


def _anonymous_variable(item: ast.AST) -> bool:
    """Whether a layout entry is a fresh variable written in place, `T.int32()` or
    `T.var("int32")` (TVM's tensor intrinsics' `strides=[T.int32(), T.int32()]`)."""
    if not isinstance(item, ast.Call) or item.keywords:
        return False
    name = call_name(item)
    if name in ("int32", "int64"):
        return not item.args
    return name == "var" and len(item.args) == 1 and isinstance(item.args[0], ast.Constant) \
        and item.args[0].value in ("int32", "int64")

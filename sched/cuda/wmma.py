"""`nvcuda::wmma` for the CUDA target: fragment declarations, and one call for each warp
intrinsic's loop nest (sched/lower/wmma_fragments.py says what those are).

A nest is emitted as its call only when the call computes what the loops do, which is
checked here on the lowered (flattened) code, and refused otherwise with the reason:

- shape: the loops are 16 x 16 (16 x 16 x 16 for mma_sync) from 0, around one store of the
  form the intrinsic's description has (a copy, a constant, `C = C + A * B`);
- places: each access is `base + stride * i + j` in the loop variables (i, j; k), with a
  fragment's base a multiple of 256 (its tile; wmma_fragments.py lays fragments out so) and
  its stride 16; a memory operand's stride is the call's `ldm`, and its base and stride keep
  the 32-byte alignment wmma requires (a multiple of 16 bytes for `ldm`, of 32 for the
  corner: shared arrays that a call reads or writes are declared 32-byte aligned; a global
  parameter is checked 32-byte aligned at each call (sched/cuda/alignment.py), and the
  tensors torch allocates are 256-byte aligned);
- the warp: every lane of a warp runs the call with the same operands (a warp collective).
  The block's threads must fill whole warps, and nothing that decides whether or how the call
  runs may differ between the lanes of a warp: the lanes differ in threadIdx.x, and in
  threadIdx.y (z) unless blockDim.x (x * y) is a multiple of 32. `check_warp_uniform` walks
  the kernel with the variables that are the same across a warp: thread indices that are,
  loop variables of loops whose bounds are, let-bound ones whose values are.
"""

from __future__ import annotations

import dataclasses

from sched.errors import ScheduleError
from sched.ir.functor import IRVisitor, collect, free_vars, substitute
from sched.ir.nodes import (
    FRAGMENT_SCOPES,
    Allocate,
    BinaryOp,
    Buffer,
    BufferLoad,
    BufferStore,
    Cast,
    Expr,
    FloatImm,
    For,
    IfThenElse,
    IntImm,
    LetStmt,
    PrimFunc,
    Var,
    const,
)
from sched.lower.launch import LaunchConfig
from sched.lower.simplify_indices import simplify_index
from sched.lower.wmma_fragments import TILE, warp_intrinsic

WARP = 32
TILE_ELEMENTS = TILE * TILE
_USE = {"wmma.matrix_a": "matrix_a", "wmma.matrix_b": "matrix_b",
        "wmma.accumulator": "accumulator"}
_ELEMENT_TYPES = {"float16": "half", "bfloat16": "__nv_bfloat16", "float32": "float",
                  "int8": "signed char", "int32": "int"}
_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "int8": 1, "int32": 4}
# the element types of m16n16k16 fragments: operands, and accumulators
_OPERANDS, _ACCUMULATORS = ("float16", "bfloat16", "int8"), ("float32", "float16", "int32")

LOAD, STORE = "nvcuda::wmma::load_matrix_sync", "nvcuda::wmma::store_matrix_sync"
FILL, MMA = "nvcuda::wmma::fill_fragment", "nvcuda::wmma::mma_sync"


def uses_wmma(func: PrimFunc) -> bool:
    return any(a.buffer.scope in FRAGMENT_SCOPES for a in collect(func.body, Allocate))


def fragment_declaration(buffer: Buffer, name: str, elements: int,
                         column_major: bool = False) -> str:
    """`nvcuda::wmma::fragment<...> name[count];` for a fragment-scope buffer of `elements`
    elements (whole 16x16 tiles, wmma_fragments.py); `column_major`: a matrix_b fragment an
    mma reads transposed (`transposed_b_fragments`)."""
    use = _USE[buffer.scope]
    if buffer.dtype not in (_ACCUMULATORS if use == "accumulator" else _OPERANDS):
        raise ScheduleError("build", f"fragment '{buffer.name}' ({buffer.scope}) holds "
                            f"{buffer.dtype}: the wmma intrinsics take float16, bfloat16 or "
                            f"int8 matrix_a/matrix_b fragments and float32, float16 or int32 "
                            f"accumulators")
    element = _ELEMENT_TYPES[buffer.dtype]
    layout = "" if use == "accumulator" else \
        f", nvcuda::wmma::{'col_major' if column_major else 'row_major'}"
    return (f"nvcuda::wmma::fragment<nvcuda::wmma::{use}, 16, 16, 16, {element}{layout}> "
            f"{name}[{elements // TILE_ELEMENTS}];  // {buffer.scope}: per warp")


def wmma_shared_buffers(func: PrimFunc) -> set[str]:
    """The shared buffers a wmma call reads or writes (declared 32-byte aligned)."""
    names = set()
    for loop in collect(func.body, For):
        if warp_intrinsic(loop) is not None:
            for access in collect(loop, BufferLoad) + collect(loop, BufferStore):
                if access.buffer.scope == "shared":
                    names.add(access.buffer.storage_name)
    return names


def product_nests(func: PrimFunc, call: str):
    """The nests of the warp intrinsic `call` in `func` that are three loops (i, j, k)
    around `C = C + A * B`: (the loop variables, (the A load, the B load)) of each. The other
    nests are left to the call's own checks, which name what is wrong."""
    for loop in collect(func.body, For):
        if warp_intrinsic(loop) != call:
            continue
        nest, body = [], loop
        while isinstance(body, For):
            nest.append(body.loop_var)
            body = body.body
        operands = _product_operands(body.value) if isinstance(body, BufferStore) else None
        if len(nest) == 3 and operands is not None:
            yield tuple(nest), operands


def transposed_b_fragments(func: PrimFunc) -> set[str]:
    """The matrix_b fragments an mma_sync nest reads as B[j, k] (TVM's `_trans` intrinsics:
    B held n x k), by storage name: declared column-major, so that the fragment's logical
    (k, n) element is the tile's (n, k) one, as its load copied it."""
    names = set()
    for (i, j, k), (_, b) in product_nests(func, MMA):
        try:
            place = _place(MMA, b.buffer, b.indices[0], (k, j, i), ())
        except ScheduleError:
            continue           # the call's own checks name the problem
        if _is(place.strides[0], 1, ()) and _is(place.strides[1], TILE, ()):
            names.add(b.buffer.storage_name)
    return names


def _refuse(call: str, reason: str, hint: str | None = None) -> ScheduleError:
    """The refusal to emit `call`; `hint` says what to do ("" where `reason` says it; the
    default suspects a step after tensorize)."""
    if hint is None:
        hint = "The loop nest is no longer the intrinsic's (a step after tensorize changed it?)"
    return ScheduleError("build", f"cannot emit {call}: {reason}{'. ' + hint if hint else ''}; "
                         f"the C target runs it as loops")


@dataclasses.dataclass(frozen=True)
class _Place:
    """An access `buffer[base + sum(stride * var)]` of the nest."""

    buffer: Buffer
    base: Expr
    strides: tuple[Expr, ...]


def _place(call: str, buffer: Buffer, index: Expr, nest: tuple[Var, ...], context) -> _Place:
    zero = {v: const(0, v.dtype) for v in nest}
    base = simplify_index(substitute(index, zero), context)
    strides = []
    rest = index - base
    for var in nest:
        stride = simplify_index(substitute(index, {**zero, var: const(1, var.dtype)}) - base,
                                context)
        if any(v in nest for v in free_vars(stride)):
            raise _refuse(call, f"the index {index.script()} of '{buffer.name}' is not linear "
                          f"in the loops")
        strides.append(stride)
        rest = rest - stride * var
    if simplify_index(rest, context) != const(0, rest.dtype):
        raise _refuse(call, f"the index {index.script()} of '{buffer.name}' is not linear in "
                      f"the loops")
    return _Place(buffer, base, tuple(strides))


def _is(e: Expr, value: int, context) -> bool:
    return simplify_index(e, context) == const(value, e.dtype) if isinstance(e, Expr) else False


class WmmaCall:
    """The call for a warp intrinsic's nest, written with the emitter's names and
    expressions (`emitter.expr`, `emitter.name`)."""

    EXTENTS = (TILE,)                 # what each loop of the nest may run to

    def __init__(self, emitter, loop: For, context) -> None:
        self.emitter, self.call = emitter, warp_intrinsic(loop)
        self.nest, self.extents, body = [], [], loop
        while isinstance(body, For):
            extent = next((e for e in self.EXTENTS if _is(body.extent, e, ())), None)
            if not _is(body.min, 0, ()) or extent is None:
                raise _refuse(self.call, f"loop '{body.loop_var.name}' does not run 0..15")
            self.nest.append(body.loop_var)
            self.extents.append(extent)
            context = (*context, (body.loop_var, body.min, body.extent))
            body = body.body
        self.context, self.store = context, body
        depth = self.depth()
        if len(self.nest) != depth or not isinstance(body, BufferStore):
            raise _refuse(self.call, f"expected {depth} loops around one store")

    def depth(self) -> int:
        """How many loops the nest has."""
        return 3 if self.call == MMA else 2

    def emit(self) -> str:
        handler = {LOAD: self._load, STORE: self._store, FILL: self._fill, MMA: self._mma}
        if self.call not in handler:
            raise ScheduleError("build", f"unknown warp intrinsic {self.call!r}; the CUDA "
                                f"target emits {', '.join(handler)}")
        return handler[self.call]()

    def _access(self, buffer: Buffer, index: Expr, nest: tuple[Var, ...]) -> _Place:
        return _place(self.call, buffer, index, nest, self.context)

    def _fragment(self, place: _Place, strides: tuple[int, ...]) -> str:
        """`name[tile]` of a fragment access whose strides must be `strides`."""
        if not all(_is(s, want, self.context) for s, want in zip(place.strides, strides)) \
                or not _is(place.base % TILE_ELEMENTS, 0, self.context):
            raise _refuse(self.call, f"fragment '{place.buffer.name}' is not accessed as one "
                          f"whole 16x16 tile")
        tile = simplify_index(place.base // TILE_ELEMENTS, self.context)
        return f"{self.emitter.name(place.buffer.storage_name)}[{self.emitter.expr(tile)}]"

    def _memory(self, place: _Place) -> tuple[str, str]:
        """(`&name[base]`, ldm) of a row-major 16x16 tile in memory."""
        ldm, unit = place.strides
        per_16_bytes = 16 // _BYTES[place.buffer.dtype]
        if not _is(unit, 1, self.context):
            raise _refuse(self.call, f"the tile of '{place.buffer.name}' is not row-major "
                          f"(consecutive columns {unit.script()} elements apart)")
        if any(v in self.nest for v in free_vars(ldm)) \
                or not _is(ldm % per_16_bytes, 0, self.context):
            raise _refuse(self.call, f"the rows of the tile of '{place.buffer.name}' are "
                          f"{ldm.script()} elements apart: wmma needs a multiple of 16 bytes",
                          f"The buffer's row length sets it (its shape, or the padding "
                          f"storage_align adds): make it a multiple of {per_16_bytes} "
                          f"{place.buffer.dtype} elements (pad rows by a multiple of "
                          f"{per_16_bytes}, e.g. storage_align(..., factor=32, "
                          f"offset={per_16_bytes}))")
        if not _is(place.base % (2 * per_16_bytes), 0, self.context):
            width = TILE * _BYTES[place.buffer.dtype]
            raise _refuse(self.call, f"the tile of '{place.buffer.name}' starts at element "
                          f"{place.base.script()}, which wmma needs 32-byte aligned (a "
                          f"multiple of {2 * per_16_bytes} {place.buffer.dtype} elements)",
                          f"A row of a 16x16 {place.buffer.dtype} tile is {width} bytes"
                          + (", so tiles side by side along a row start only 16 bytes "
                             "apart: keep one tile per row of the buffer (stage one 16-wide "
                             "K tile per shared tile), or lay the buffer out so each tile "
                             "starts on a 32-byte boundary" if width < 32 else
                             ": keep tile corners on 32-byte boundaries (the buffer's row "
                             "length and the tile offsets)"))
        if place.buffer.storage_name in {p.name for p in self.emitter.func.buffers}:
            verb = "loads" if self.call == LOAD else "stores"
            self.emitter.aligned_params.require(
                place.buffer.storage_name, 32, f"{verb} 16x16 tiles of it with {self.call} "
                f"(wmma needs 32-byte aligned tile pointers)")
        name = self.emitter.name(place.buffer.storage_name)
        return f"&{name}[{self.emitter.expr(place.base)}]", self.emitter.expr(ldm)

    def _copy_operands(self) -> tuple[_Place, _Place]:
        load = self.store.value
        if not isinstance(load, BufferLoad) or load.buffer.dtype != self.store.buffer.dtype:
            raise _refuse(self.call, "the store is not a copy")
        nest = tuple(self.nest)
        return (self._access(self.store.buffer, self.store.indices[0], nest),
                self._access(load.buffer, load.indices[0], nest))

    def _load(self) -> str:
        target, source = self._copy_operands()
        if target.buffer.scope not in ("wmma.matrix_a", "wmma.matrix_b") \
                or source.buffer.scope not in ("global", "shared"):
            raise _refuse(self.call, "it loads a matrix_a/matrix_b fragment from memory")
        pointer, ldm = self._memory(source)
        return f"{LOAD}({self._fragment(target, (TILE, 1))}, {pointer}, {ldm});"

    def _store(self) -> str:
        target, source = self._copy_operands()
        if source.buffer.scope != "wmma.accumulator" \
                or target.buffer.scope not in ("global", "shared"):
            raise _refuse(self.call, "it stores an accumulator fragment to memory")
        pointer, ldm = self._memory(target)
        return (f"{STORE}({pointer}, {self._fragment(source, (TILE, 1))}, {ldm}, "
                f"nvcuda::wmma::mem_row_major);")

    def _fill(self) -> str:
        value = self.store.value
        if not isinstance(value, (FloatImm, IntImm)) \
                or self.store.buffer.scope != "wmma.accumulator":
            raise _refuse(self.call, "it fills an accumulator with a constant")
        target = self._access(self.store.buffer, self.store.indices[0], tuple(self.nest))
        return f"{FILL}({self._fragment(target, (TILE, 1))}, {self.emitter.expr(value)});"

    def _mma(self) -> str:
        # C[i, j] = C[i, j] + float(A[i, k]) * float(B[k, j])
        store, value = self.store, self.store.value
        operands = _product_operands(value)
        if operands is None or not isinstance(value.a, BufferLoad) \
                or value.a.buffer != store.buffer or value.a.indices != store.indices:
            raise _refuse(self.call, "the store is not C = C + A * B")
        i, j, k = self.nest
        scopes = (store.buffer.scope, *(o.buffer.scope for o in operands))
        if scopes != ("wmma.accumulator", "wmma.matrix_a", "wmma.matrix_b"):
            raise _refuse(self.call, f"its operands are in {', '.join(scopes)}")
        c = self._fragment(self._access(store.buffer, store.indices[0], (i, j, k)),
                           (TILE, 1, 0))
        a = self._fragment(self._access(operands[0].buffer, operands[0].indices[0], (i, k, j)),
                           (TILE, 1, 0))
        transposed = operands[1].buffer.storage_name in self.emitter.wmma_column_major
        b = self._fragment(self._access(operands[1].buffer, operands[1].indices[0], (k, j, i)),
                           (1, TILE, 0) if transposed else (TILE, 1, 0))
        return f"{MMA}({c}, {a}, {b}, {c});"


def _product_operands(value: Expr) -> tuple[BufferLoad, BufferLoad] | None:
    """(A, B) of `C + float(A) * float(B)`, or None."""
    if not (isinstance(value, BinaryOp) and value.op == "add"
            and isinstance(value.b, BinaryOp) and value.b.op == "mul"):
        return None
    loads = []
    for factor in (value.b.a, value.b.b):
        while isinstance(factor, Cast):
            factor = factor.value
        if not isinstance(factor, BufferLoad):
            return None
        loads.append(factor)
    return loads[0], loads[1]


def check_warp_uniform(func: PrimFunc, launch: LaunchConfig) -> None:
    """Refuses (ScheduleError) a kernel where a warp intrinsic may run with different operands,
    or not at all, in the lanes of one warp (see the module doc)."""
    calls = [loop for loop in collect(func.body, For) if warp_intrinsic(loop) is not None]
    if not calls:
        return
    x, y, z = launch.block
    if (x * y * z) % WARP:
        raise ScheduleError("build", f"the kernel runs tensor-core intrinsics with a thread "
                            f"block of {x} x {y} x {z} threads, not whole warps of 32: a warp "
                            f"runs each wmma call together. Bind a loop of extent 32 to "
                            f"threadIdx.x (the cooperative fetch of a shared tile, or a "
                            f"split of the store), keeping the intrinsics outside it")
    uniform = {"threadIdx.x": x == 1, "threadIdx.y": x % WARP == 0 or y == 1,
               "threadIdx.z": (x * y) % WARP == 0 or z == 1}
    _Uniformity(uniform).visit(func.body)


class _Uniformity(IRVisitor):
    def __init__(self, uniform_tags: dict[str, bool]) -> None:
        self.uniform_tags = uniform_tags
        self.varying: dict[Var, str] = {}      # lane-varying variable -> why
        self.divergent: str | None = None     # why the code here may not run in every lane

    def _why(self, e: Expr) -> str | None:
        loads = collect(e, BufferLoad)
        if loads:        # a value read from memory may differ between lanes (a local buffer)
            return f"{loads[0].script()} is read from memory, which may differ in a warp"
        return next((self.varying[v] for v in free_vars(e) if v in self.varying), None)

    def visit_For(self, loop: For) -> None:
        call = warp_intrinsic(loop)
        if call is not None:
            self._check(call, loop)
            return
        why = None
        if loop.kind == "thread_binding" and loop.thread_tag in self.uniform_tags:
            if not self.uniform_tags[loop.thread_tag]:
                why = f"{loop.loop_var.name} is {loop.thread_tag}, which differs in a warp"
        bounds = self._why(loop.min) or self._why(loop.extent)
        why = why or bounds
        if why:
            self.varying[loop.loop_var] = why
        saved = self.divergent
        if bounds and not saved:       # lanes may run the body a different number of times
            self.divergent = (f"it runs in loop '{loop.loop_var.name}', whose bounds differ: "
                              f"{bounds}")
        self.visit(loop.body)
        self.divergent = saved

    def visit_LetStmt(self, node: LetStmt) -> None:
        why = self._why(node.value)
        if why:
            self.varying[node.var] = why
        self.visit(node.body)

    def visit_IfThenElse(self, node: IfThenElse) -> None:
        why = self._why(node.condition)
        saved = self.divergent
        if why and not saved:
            self.divergent = f"it runs under `if {node.condition.script()}`, and {why}"
        self.visit(node.then_body)
        if node.else_body is not None:
            self.visit(node.else_body)
        self.divergent = saved

    def _check(self, call: str, loop: For) -> None:
        why = self.divergent
        if why is None:
            for access in collect(loop, BufferLoad) + collect(loop, BufferStore):
                reason = next(filter(None, map(self._why, access.indices)), None)
                if reason:
                    why = (f"its operand {access.buffer.name}[{access.indices[0].script()}] "
                           f"differs: {reason}")
                    break
        if why:
            raise ScheduleError("build", f"{call} is a warp collective, run by the 32 lanes of "
                                f"a warp together with the same operands, but {why}. Keep "
                                f"the tensor-core intrinsics outside the loops bound to "
                                f"threadIdx.x (and, unless blockDim.x is a multiple of 32, "
                                f"threadIdx.y), and out of conditions on them")

"""Random block-IR programs, far beyond the operator library, in bounds by construction.

A program is a sequence of 1-4 stages over a few buffers (inputs, outputs, intermediates
allocated at the root). Each stage is one loop nest with one block, of a kind:

- `map`: `X[v] = f(reads)` into a fresh buffer; `inplace`: `X[v] = X[v] * 2 + f(reads)`
  over a buffer already written; `overwrite`: `X[v] = f(reads)` over one (two stages writing
  the same elements in another order: the threads of one may overwrite the other's);
  `scan`: `X[v] = X[v - 1] + f(reads)` (guarded at 0);
- `reduce`: `X[v] = X[v] + g(reads, vk)` with an init (sometimes one that reads the old value),
  an associative op (`+` or `max`); `reduce_other`: its update also reads another element of
  its own output (`X[v] = X[v] + X[(v + 1) % n] * ...`, an ordinary dependence);
- `pad`: `P[v] = T.if_then_else(cond, X[v - c], pad)` (a padded copy) followed by a `reduce`
  that reads P.

Reads index with `v`, `v +- c` (guarded with `T.if_then_else`), `(v + c) % n`, `v // 2`,
`n - 1 - v`, another iteration variable, an index loaded from an int buffer
(`A[Idx[v] % n]`), or, through a flat view `B_flat = T.Buffer((n * m,), data=B.data)`,
`B_flat[v * m + w]`. Bindings are the loop (`v = i`), reversed (`v = n - 1 - i`), a
permutation (`(i * 3) % n`), run twice (`v = i % n` over `2n`), predicated (`T.where(i < n)`
over a longer loop) or split (`v = io * 4 + ii`). A stage may be a block nested in an outer
block, dims may be symbolic (n, and m too: fused loops of two symbolic dims), names odd
(`a0`, `NAN`, `C.1`, `exp`), a map's body a let or an `if`; an int32 stage does floor `//`
and `%` on data of either sign. `features` records what a program uses, so that known holes
can be kept out while they are being fixed (known_holes.py).

Values are small integers held in float32, so every legal reordering gives the exact result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from sched.ir import (
    TRUE,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Cast,
    Expr,
    For,
    IfThenElse,
    IntImm,
    IterVar,
    LetStmt,
    PrimFunc,
    Range,
    Select,
    Stmt,
    Var,
    binary,
    const,
    equal,
    logical_and,
    seq,
)
from sched.ir.functor import substitute
from sched.ir.regions import infer_block_regions
from tests.fuzz.known_holes import allowed

_INT32_EXTREMES = (-2 ** 31, -2 ** 31 + 1, 2 ** 31 - 1, 2 ** 31 - 2, 2 ** 30, -2 ** 30)
LOOP_NAMES = ("i", "j", "k", "a0", "NAN", "INFINITY", "int32_t", "x", "y", "t")
BLOCK_NAMES = ("B", "C", "C.1", "C-1", "NAN", "bloc_é", "a0", "S", "T", "main")
BUFFER_NAMES = ("X", "Y", "Z", "exp", "exp_", "a0", "fmaxf", "W", "v0", "tmp")


@dataclass
class Program:
    """A generated function and what running it needs."""

    func: PrimFunc
    dims: dict[str, int]                        # symbolic dim -> its value in this run
    features: set[str] = field(default_factory=set)
    index_buffers: set[str] = field(default_factory=set)   # int32 buffers holding indices 0..3
    # int32 inputs whose arithmetic stays int32: near INT32_MIN and INT32_MAX at times (+, -,
    # * wrap; `//` and `%` of the minimum), where C leaves signed overflow undefined
    wrapping_buffers: set[str] = field(default_factory=set)

    def arrays(self, seed: int) -> list[np.ndarray]:
        """Arguments for a run: small integers in float32 (or the buffer's float dtype), int32
        data in -9..9 (with extremes in `wrapping_buffers`), index buffers 0..3."""
        rng = np.random.default_rng(seed)
        arrays = []
        for buffer in self.func.buffers:
            shape = tuple(self.dims[d.name] if isinstance(d, Var) else d.value
                          for d in buffer.shape)
            if buffer.dtype == "int32" and buffer.name in self.index_buffers:
                arrays.append(rng.integers(0, 4, shape).astype(np.int32))
            elif buffer.dtype == "int32":
                values = rng.integers(-9, 10, shape).astype(np.int32)
                if buffer.name in self.wrapping_buffers:
                    extremes = np.array(_INT32_EXTREMES, np.int32)[rng.integers(0, 6, shape)]
                    values = np.where(rng.random(shape) < 0.3, extremes, values)
                arrays.append(values)
            else:
                arrays.append(rng.integers(-3, 4, shape).astype(np.dtype(buffer.dtype)))
        return arrays


class _Names:
    def __init__(self, draw) -> None:
        self.draw = draw
        self.taken: set[str] = set()

    def pick(self, pool: tuple[str, ...], odd: bool) -> str:
        choices = [n for n in (pool if odd else pool[:2] + pool[-3:]) if n not in self.taken]
        name = self.draw(st.sampled_from(choices)) if choices else f"n{len(self.taken)}"
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name


def f32(value: float) -> Expr:
    return const(value, "float32")


class _Builder:
    """State while drawing one program."""

    def __init__(self, draw) -> None:
        self.draw = draw
        self.features: set[str] = set()
        self.strangeness = draw(st.sampled_from([0, 1, 1, 2]))
        self.odd = self.use("odd_names")
        self.names = _Names(draw)
        self.symbolic = self.use("symbolic")
        self.dims: dict[str, int] = {}
        self.n: Expr = IntImm(draw(st.integers(4, 9)))
        if self.symbolic:
            name = draw(st.sampled_from(["n", "v0", "a0"] if self.odd else ["n"]))
            self.names.taken.add(name)
            self.n = Var(name)
            self.dims[name] = draw(st.integers(3, 8))
        self.m: Expr = IntImm(draw(st.integers(2, 5)))
        if self.symbolic and self.use("symbolic_m"):    # fused loops of two symbolic dims
            self.names.taken.add("m")
            self.dims["m"] = self.m.value
            self.m = Var("m")
        self.inputs: list[Buffer] = []
        self.outputs: list[Buffer] = []
        self.allocs: list[Buffer] = []
        self.written: list[Buffer] = []             # buffers fully written or inputs
        self.index_buffer: Buffer | None = None
        self.wrapping_buffers: set[str] = set()     # int32 inputs of int stages (Program)
        self.views: dict[str, Buffer] = {}
        self.prefer: Buffer | None = None           # the buffer the next read loads

    def use(self, feature: str) -> bool:
        """Draws whether to use `feature` (never a known hole), more often the stranger the
        program is (`self.strangeness`: 0 plain, 1 some features, 2 many)."""
        if not allowed(feature) or self.strangeness == 0:
            return False
        if self.draw(st.integers(0, 9)) >= (2 if self.strangeness == 1 else 5):
            return False
        self.features.add(feature)
        return True

    def n_value(self) -> int:
        return self.dims[self.n.name] if isinstance(self.n, Var) else self.n.value

    def buffer(self, rank: int, role: str) -> Buffer:
        shape = (self.n,) if rank == 1 else (self.n, self.m)
        buffer = Buffer(self.names.pick(BUFFER_NAMES, self.odd), shape)
        {"input": self.inputs, "output": self.outputs, "alloc": self.allocs}[role].append(buffer)
        return buffer

    # -- indices --------------------------------------------------------------------------------

    def index(self, var: Var, extent: Expr, dim: Expr, others: list[Var]):
        """(index expression into a dimension of size `dim` from `var` over [0, extent),
        guard or None). Extents equal dims here, or are smaller."""
        forms = ["v"] * (8 if self.strangeness == 0 else 3) + ["shift", "mod", "div2", "flip"]
        if others:
            forms.append("other")
        if self.index_buffer is not None:
            forms.append("indirect")
        form = self.draw(st.sampled_from(forms))
        c = self.draw(st.sampled_from([1, 2, -1]))
        if form == "shift":
            self.features.add("stencil")
            index = var + c if c > 0 else var - (-c)
            guard = index < dim if c > 0 else index >= 0
            return index, guard
        if form == "mod":
            self.features.add("floormod_index")
            return (var + (c % 4 + 1)) % dim, None
        if form == "div2":
            self.features.add("floordiv_index")
            return var // 2, None
        if form == "flip":
            return dim - 1 - var, None
        if form == "other":
            other = self.draw(st.sampled_from(others))
            return other % dim, None
        if form == "indirect":
            self.features.add("indirect")
            return BufferLoad(self.index_buffer, (var % IntImm(16),)) % dim, None
        return var, None

    def read(self, iter_vars: list[IterVar], exclude: Buffer | None = None) -> Expr:
        """A guarded load of a written buffer (`self.prefer` first, once), indexed from
        `iter_vars`."""
        candidates = [b for b in self.written if b is not exclude] or self.inputs
        buffer = self.draw(st.sampled_from(candidates))
        if self.prefer is not None:
            buffer, self.prefer = self.prefer, None
        variables = [iv.var for iv in iter_vars]
        spatial = [iv for iv in iter_vars]
        view = self.views.get(buffer.name)
        if view is not None and len(spatial) >= 2 and self.draw(st.booleans()):
            self.features.add("view")
            v, w = spatial[0].var, spatial[1].var
            return BufferLoad(view, ((v % self.n) * self.m + w % self.m,))
        indices, guards = [], []
        for d, dim in enumerate(buffer.shape):
            iv = spatial[d] if d < len(spatial) else spatial[-1]
            index, guard = self.index(iv.var, iv.dom.extent, dim,
                                      [v for v in variables if v is not iv.var])
            if iv.dom.extent != dim:          # var's range differs from the dimension
                if guard is None:
                    index = index % dim
                else:
                    guard = logical_and(index >= 0, index < dim)
            indices.append(index)
            if guard is not None:
                guards.append(guard)
        load = BufferLoad(buffer, tuple(indices))
        if guards:
            return Select(logical_and(*guards), load, f32(0))
        return load

    def value(self, iter_vars: list[IterVar], exclude=None) -> Expr:
        value = self.read(iter_vars, exclude)
        for _ in range(self.draw(st.integers(0, 2))):
            op = self.draw(st.sampled_from(["add", "sub", "mul", "max", "min", "const"]))
            if op == "const":
                value = value + f32(self.draw(st.integers(1, 3)))
            else:
                value = binary(op, value, self.read(iter_vars, exclude))
        return value

    # -- loops and bindings ---------------------------------------------------------------------

    def nest(self, extents: list[Expr], kinds: list[str]):
        """Loops and bindings for iteration variables over `extents`: (loops as (var, extent),
        bindings, predicate conditions)."""
        loops, bindings, conditions = [], [], []
        for extent, kind in zip(extents, kinds):
            name = self.names.pick(LOOP_NAMES, self.odd)
            loop = Var(name)
            const_extent = extent.value if isinstance(extent, IntImm) else None
            forms = ["loop"] * (12 if self.strangeness == 0 else 8 // self.strangeness)
            forms += ["reverse"] if allowed("reverse_binding") else []
            forms += ["split"] if allowed("split_binding") else []
            if const_extent and allowed("predicate"):
                forms.append("predicate")
            if const_extent and allowed("nonaffine_binding"):
                forms.append("permute")
            if allowed("twice") and kind == "spatial":
                forms.append("twice")
            form = self.draw(st.sampled_from(forms))
            if form == "reverse":
                self.features.add("reverse_binding")
                loops.append((loop, extent))
                bindings.append(extent - 1 - loop)
            elif form == "predicate":
                self.features.add("predicate")
                loops.append((loop, IntImm(const_extent + self.draw(st.integers(1, 3)))))
                bindings.append(loop)
                conditions.append(loop < const_extent)
            elif form == "permute":
                self.features.add("nonaffine_binding")
                factor = next(f for f in (3, 5, 7) if math.gcd(f, const_extent) == 1)
                loops.append((loop, extent))
                bindings.append((loop * factor) % const_extent)
            elif form == "twice":
                self.features.add("twice")
                loops.append((loop, extent * 2))
                bindings.append(loop % extent)
            elif form == "split":
                self.features.add("split_binding")
                inner = Var(self.names.pick(LOOP_NAMES, self.odd))
                factor = self.draw(st.sampled_from([2, 3]))
                outer_extent = (extent + (factor - 1)) // factor
                loops.append((loop, outer_extent))
                loops.append((inner, IntImm(factor)))
                bindings.append(loop * factor + inner)
                conditions.append(loop * factor + inner < extent)
            else:
                loops.append((loop, extent))
                bindings.append(loop)
        return loops, bindings, conditions

    # -- stages ---------------------------------------------------------------------------------

    def stage(self, kind: str | None = None) -> Stmt:
        kinds = ["map", "map", "map", "reduce", "reduce"]
        if self.strangeness:
            if any(b not in self.inputs for b in self.written):
                kinds += ["inplace"] if allowed("inplace") else []
                kinds += ["overwrite"] if allowed("overwrite") else []
            kinds += ["scan"] if allowed("scan") else []
            kinds += ["reduce_other"] if allowed("reduce_other") else []
        kind = kind or self.draw(st.sampled_from(kinds))
        self.features.add(kind)
        name = self.names.pick(BLOCK_NAMES, self.odd)
        if kind in ("inplace", "overwrite"):
            out = self.draw(st.sampled_from([b for b in self.written if b not in self.inputs]))
        else:
            # a scan or a reduction reading other elements reads elements it has not written
            # yet: those start as the argument's values (an allocation would start as NaN)
            fresh = kind in ("map", "reduce") and allowed("alloc") and self.draw(st.booleans())
            out = self.buffer(self.draw(st.integers(1, 2)), "alloc" if fresh else "output")
        spatial = [IterVar(Var(self.names.pick(("vi", "vj", "v0", "a0", "vx"), self.odd)),
                           Range(IntImm(0), dim)) for dim in out.shape]
        iter_vars = list(spatial)
        reduce = kind in ("reduce", "reduce_other")
        if reduce:
            extent = IntImm(self.draw(st.integers(2, 5)))
            iter_vars.append(IterVar(Var(self.names.pick(("vk", "vr", "a0_"), self.odd)),
                                     Range(IntImm(0), extent), "reduce"))
        index = tuple(iv.var for iv in spatial)
        init = None
        if kind == "map":
            value = self.value(iter_vars)
        elif kind == "inplace":
            value = BufferLoad(out, index) * f32(2) + self.value(iter_vars, exclude=out)
        elif kind == "overwrite":
            value = self.value(iter_vars, exclude=out)
        elif kind == "scan":
            last = spatial[-1].var
            previous = index[:-1] + (last - 1,)
            value = Select(last > 0, BufferLoad(out, previous), f32(0)) + \
                self.value(iter_vars, exclude=out)
        else:
            op = self.draw(st.sampled_from(["add", "add", "max"]))
            init_value = f32(0) if op == "add" else f32(-100)
            init = BufferStore(out, init_value, index)
            term = self.value(iter_vars, exclude=out)
            if kind == "reduce_other":
                first = spatial[0].var
                other = ((first + 1) % out.shape[0],) + index[1:]
                term = BufferLoad(out, other) * f32(0.5) + term \
                    if op == "max" else BufferLoad(out, other) + term
            value = binary(op, BufferLoad(out, index), term)
        body: Stmt = BufferStore(out, value, index)
        if kind == "map" and self.use("let"):
            var = Var(self.names.pick(("x_", "a0__", "NAN__"), self.odd), "float32")
            body = LetStmt(var, value, BufferStore(out, var, index))
        if kind == "map" and out in self.outputs and self.use("if_stmt"):
            body = IfThenElse(equal(spatial[0].var % 2, 0), body)   # the rest keep their values
        reads, writes = infer_block_regions(body, init, tuple(iter_vars))
        block = Block(name, tuple(iter_vars), reads, writes, body, init)
        stmt = self.realize(block, iter_vars)
        if out not in self.written:
            self.written.append(out)
            if out.ndim == 2 and allowed("view") and self.draw(st.booleans()):
                self.views[out.name] = Buffer(out.name + "_flat", (self.n * self.m,),
                                              data=out.name)
        return stmt

    def pad_stage(self) -> Stmt:
        """`P[v] = T.if_then_else(cond, X[v - c], pad)`: a written buffer X shifted by c in each
        dimension (some c nonzero), the condition keeping its index inside X, the pad a
        constant or a function of the indices, into a fresh buffer P of X's shape (the shape
        decompose_padding takes, and compute_inline of a padding); the next read loads P (the
        caller makes the next stage a reduction: a padded convolution's shape)."""
        self.features.add("pad")
        source = self.draw(st.sampled_from(self.written))
        fresh = allowed("alloc") and self.draw(st.integers(0, 3)) > 0
        out = Buffer(self.names.pick(BUFFER_NAMES, self.odd), source.shape)
        (self.allocs if fresh else self.outputs).append(out)
        spatial = [IterVar(Var(self.names.pick(("vi", "vj", "v0", "a0", "vx"), self.odd)),
                           Range(IntImm(0), dim)) for dim in out.shape]
        shifts = [self.draw(st.sampled_from([0, 1, 2, -1])) for _ in spatial]
        if not any(shifts):
            shifts[0] = 1
        indices, conditions = [], []
        for iv, dim, c in zip(spatial, out.shape, shifts):
            v = iv.var
            if c > 0:
                indices.append(v - c)
                conditions.append(v >= c)
            elif c < 0:
                indices.append(v + (-c))
                conditions.append(v < dim - (-c))
            else:
                indices.append(v)
        pad = self.draw(st.sampled_from(["zero", "constant", "index"]))
        pad_value = f32(0) if pad == "zero" else f32(self.draw(st.sampled_from([-2, 7]))) \
            if pad == "constant" else Cast("float32", spatial[-1].var)
        value = Select(logical_and(*conditions), BufferLoad(source, tuple(indices)), pad_value)
        body: Stmt = BufferStore(out, value, tuple(iv.var for iv in spatial))
        reads, writes = infer_block_regions(body, None, tuple(spatial))
        block = Block(self.names.pick(BLOCK_NAMES, self.odd), tuple(spatial), reads, writes,
                      body)
        self.written.append(out)
        self.prefer = out
        return self.realize(block, spatial)

    def int_stage(self) -> Stmt:
        """`O[v] = int arithmetic on I` (floor `//` and `%` by constants of either sign, min,
        max, wrapping +,-,*), stored as int32 or cast to float32: an int32 input `I` (-9..9)
        and a fresh output."""
        data = Buffer(self.names.pick(("I", "int32_t_", "a0"), self.odd), (self.n,), "int32")
        self.inputs.append(data)
        as_float = self.draw(st.booleans())
        out = Buffer(self.names.pick(BUFFER_NAMES, self.odd), (self.n,),
                     "float32" if as_float else "int32")
        self.outputs.append(out)
        iv = IterVar(Var(self.names.pick(("vi", "v0"), self.odd)), Range(IntImm(0), self.n))
        v = iv.var
        value: Expr = BufferLoad(data, (v,))
        for _ in range(self.draw(st.integers(1, 3))):
            op = self.draw(st.sampled_from(["floordiv", "floormod", "add", "sub", "mul", "min",
                                            "max", "load"]))
            if op == "load":
                other = BufferLoad(data, ((v + self.draw(st.integers(1, 3))) % self.n,))
                value = binary(self.draw(st.sampled_from(["add", "sub", "max"])), value, other)
            else:
                c = self.draw(st.sampled_from([-3, -2, 2, 3, 5]))
                value = binary(op, value, IntImm(c))
        if as_float:
            value = Cast("float32", value)
        else:        # exact whatever the order of the steps: extreme values that wrap
            self.wrapping_buffers.add(data.name)
        body = BufferStore(out, value, (v,))
        reads, writes = infer_block_regions(body, None, (iv,))
        block = Block(self.names.pick(BLOCK_NAMES, self.odd), (iv,), reads, writes, body)
        return self.realize(block, [iv])

    def half_stages(self) -> list[Stmt]:
        """`H[v] = 16-bit float arithmetic on X` (constants the type cannot hold, sums near
        1000 where float16's spacing is 0.5 and bfloat16's 4), then `O[v] = float32(H[v] - c)`:
        a float16 or bfloat16 intermediate whose stores round, which compute_inline and
        reverse_compute_inline must keep (X holds small integers: the rounding shows)."""
        dtype = self.draw(st.sampled_from(["float16", "bfloat16"]))
        data = self.inputs[0]
        half = Buffer(self.names.pick(("H", "half", "a0_h"), self.odd), (self.n,), dtype)
        self.allocs.append(half)
        out = Buffer(self.names.pick(BUFFER_NAMES, self.odd), (self.n,), "float32")
        self.outputs.append(out)
        offset = const(self.draw(st.sampled_from([1000.0, 300.0, 7.0])), dtype)

        def block(target: Buffer, value: Expr) -> Stmt:
            iv = IterVar(Var(self.names.pick(("vi", "v0", "vh"), self.odd)),
                         Range(IntImm(0), self.n))
            value = substitute(value, {marker: iv.var})
            body = BufferStore(target, value, (iv.var,))
            reads, writes = infer_block_regions(body, None, (iv,))
            return self.realize(Block(self.names.pick(BLOCK_NAMES, self.odd), (iv,), reads,
                                      writes, body), [iv])

        marker = Var("marker")
        x = Cast(dtype, BufferLoad(data, (marker,) if data.ndim == 1 else (marker, IntImm(0))))
        computed = x * const(self.draw(st.sampled_from([3.3, 0.1, 1.7])), dtype) + offset
        if self.draw(st.booleans()):
            computed = binary("max", computed, offset) * const(1.01, dtype)
        consumed = Cast("float32", BufferLoad(half, (marker,)) - offset)
        return [block(half, computed), block(out, consumed)]

    def realize(self, block: Block, iter_vars: list[IterVar]) -> Stmt:
        extents = [iv.dom.extent for iv in iter_vars]
        loops, bindings, conditions = self.nest(extents, [iv.kind for iv in iter_vars])
        if len(iter_vars) >= 2 and self.use("nested"):
            return self.nested(block, iter_vars, loops, bindings, conditions)
        predicate = logical_and(*conditions) if conditions else TRUE
        stmt: Stmt = BlockRealize(tuple(bindings), predicate, block)
        for var, extent in reversed(loops):
            stmt = For(var, IntImm(0), extent, "serial", stmt)
        return stmt

    def nested(self, block, iter_vars, loops, bindings, conditions) -> Stmt:
        """An outer block over the first iteration variable (bound as the block's first
        binding was), holding the loops of the others and the block, whose first binding
        becomes the outer block's variable."""
        first = iter_vars[0]
        outer_var = Var(self.names.pick(("vo", "vo_", "b0"), self.odd))
        first_loops = [lp for lp in loops if _uses(bindings[0], lp[0])]
        inner_loops = [lp for lp in loops if lp not in first_loops]
        outer_conditions = [c for c in conditions
                            if any(_uses(c, lp[0]) for lp in first_loops)]
        inner_conditions = [c for c in conditions if c not in outer_conditions]
        inner: Stmt = BlockRealize(
            (outer_var,) + tuple(bindings[1:]),
            logical_and(*inner_conditions) if inner_conditions else TRUE, block)
        for var, extent in reversed(inner_loops):
            inner = For(var, IntImm(0), extent, "serial", inner)
        reads = tuple(BufferRegion(b, tuple(Range(IntImm(0), d) for d in b.shape))
                      for b in _unique(r.buffer for r in block.reads))
        writes = tuple(BufferRegion(b, tuple(Range(IntImm(0), d) for d in b.shape))
                       for b in _unique(w.buffer for w in block.writes))
        outer_block = Block(self.names.pick(("outer", "o.1", "NAN_"), self.odd),
                            (IterVar(outer_var, first.dom, first.kind),), reads, writes, inner)
        stmt: Stmt = BlockRealize(
            (bindings[0],), logical_and(*outer_conditions) if outer_conditions else TRUE,
            outer_block)
        for var, extent in reversed(first_loops):
            stmt = For(var, IntImm(0), extent, "serial", stmt)
        return stmt


def _uses(expr: Expr, var: Var) -> bool:
    from sched.ir import free_vars

    return var in free_vars(expr)


def _unique(buffers) -> list[Buffer]:
    seen: dict[str, Buffer] = {}
    for b in buffers:
        seen.setdefault(b.name, b)
    return list(seen.values())


@st.composite
def programs(draw) -> Program:
    """A random program (see the module docstring)."""
    builder = _Builder(draw)
    builder.buffer(1, "input")
    builder.buffer(2, "input")
    builder.written.extend(builder.inputs)
    if builder.use("indirect"):
        builder.index_buffer = Buffer(builder.names.pick(("Idx", "a0"), builder.odd), (IntImm(16),),
                                      "int32")
    stages = []
    for _ in range(draw(st.integers(1, 4))):
        if allowed("pad") and draw(st.integers(0, 6)) == 0:
            stages += [builder.pad_stage(), builder.stage("reduce")]
        else:
            stages.append(builder.stage())
    if builder.use("int_math"):
        stages.append(builder.int_stage())
    if builder.use("half_math"):
        stages += builder.half_stages()
    params = builder.inputs + ([builder.index_buffer] if builder.index_buffer else []) + \
        builder.outputs
    allocs = tuple(builder.allocs)
    root = BlockRealize((), TRUE, Block("root", (), (), (), seq(*stages), alloc_buffers=allocs))
    func = PrimFunc("fuzz", tuple(params), root)
    index_buffers = {builder.index_buffer.name} if builder.index_buffer else set()
    return Program(func, builder.dims, builder.features, index_buffers,
                   builder.wrapping_buffers)

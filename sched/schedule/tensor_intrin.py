"""The TensorIntrin registry: named hardware (or library) operations that `tensorize` can put in
place of a block.

An intrinsic is two PrimFuncs over the same buffers, TVM's pair:

- `desc`, what it computes: a loop nest around one block, over buffers declared with
  `T.match_buffer(..., scope=..., offset_factor=...)`. `tensorize` matches this structurally
  against the block it replaces (schedule/tensorize_match.py).
- `impl`, what to emit instead: any block IR over buffers of the same shapes, dtypes and scopes
  (parameter `i` of `impl` is bound where parameter `i` of `desc` matched). A CPU intrinsic's
  impl is the loop code a C compiler turns into the micro-kernel (vectorized loops, unrolled
  ones).

The impl is trusted to compute what the desc says, as in TVM; tests/schedule/test_tensorize.py
checks every registered intrinsic with the interpreter on random data.

    TensorIntrin.register("outer_product_4x16_f32", desc, impl)
    sch.tensorize(loop, "outer_product_4x16_f32")
"""

from __future__ import annotations

from dataclasses import dataclass

from sched.ir.functor import collect
from sched.ir.nodes import BlockRealize, Buffer, For, PrimFunc, Stmt


@dataclass(frozen=True)
class IntrinPattern:
    """The part of a desc PrimFunc that tensorize matches: its loops (outermost first) and the
    one block inside them."""

    loops: tuple[For, ...]
    realize: BlockRealize


def loop_nest(stmt: Stmt) -> tuple[tuple[For, ...], Stmt]:
    """The perfectly nested loops at the top of `stmt` and what they hold."""
    loops = []
    while isinstance(stmt, For):
        loops.append(stmt)
        stmt = stmt.body
    return tuple(loops), stmt


def function_body(func: PrimFunc) -> tuple[Stmt, tuple[Buffer, ...]]:
    """The body of `func` inside its root block (when it has one), and the buffers the root
    block allocates."""
    body = func.body
    if isinstance(body, BlockRealize) and body.block.name == "root" and not body.block.iter_vars:
        return body.block.body, body.block.alloc_buffers
    return body, ()


def pattern_of(desc: PrimFunc) -> IntrinPattern:
    """The loops and block of `desc`; ValueError if it is not a loop nest around one block."""
    body, allocated = function_body(desc)
    loops, inner = loop_nest(body)
    if allocated or not isinstance(inner, BlockRealize):
        raise ValueError(f"TensorIntrin: the description {desc.name!r} must be a nest of loops "
                         f"around one block (with no buffers allocated), as in TVM's tensor "
                         f"intrinsics")
    if collect(inner.block.body, BlockRealize):
        raise ValueError(f"TensorIntrin: the block {inner.block.name!r} of description "
                         f"{desc.name!r} must not hold other blocks")
    return IntrinPattern(loops, inner)


class TensorIntrin:
    """A tensor intrinsic: `desc` (what it computes) and `impl` (what replaces it), TVM's
    `tvm.tir.TensorIntrin`. Register with `TensorIntrin.register(name, desc, impl)`; look up
    with `TensorIntrin.get(name)`."""

    _registry: dict[str, TensorIntrin] = {}
    _forms: dict[str, list[TensorIntrin]] = {}      # name -> its other forms (register_form)

    def __init__(self, desc: PrimFunc, impl: PrimFunc) -> None:
        for role, func in (("desc", desc), ("impl", impl)):
            if not isinstance(func, PrimFunc):
                raise TypeError(f"TensorIntrin: argument {role!r}: expected a PrimFunc "
                                f"(@T.prim_func), got {type(func).__name__}")
        self.desc, self.impl = desc, impl
        self.pattern = pattern_of(desc)
        _check_same_parameters(desc, impl)

    @classmethod
    def register(cls, name: str, desc: PrimFunc, impl: PrimFunc, override: bool = False):
        """Register the intrinsic `name` (TVM's signature). Refused when `name` is taken,
        unless `override`."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"TensorIntrin.register: argument 'name': expected a non-empty "
                            f"string, got {name!r}")
        if name in cls._registry and not override:
            raise ValueError(f"TensorIntrin.register: {name!r} is already registered; pass "
                             f"override=True to replace it")
        cls._registry[name] = cls(desc, impl)
        cls._forms.pop(name, None)
        return cls._registry[name]

    @classmethod
    def register_form(cls, name: str, desc: PrimFunc, impl: PrimFunc) -> TensorIntrin:
        """Give the registered intrinsic `name` another form: the same operation described
        over another layout of its buffers (TVM's 32x8 warp-register layout of the mma
        intrinsics, beside sched's 16x16 tiles). `tensorize(loop, name)` tries the registered
        form, then each other form in turn, and uses the first that matches."""
        if name not in cls._registry:
            raise ValueError(f"TensorIntrin.register_form: {name!r} is not registered; "
                             f"register it first (TensorIntrin.register)")
        form = cls(desc, impl)
        cls._forms.setdefault(name, []).append(form)
        return form

    @classmethod
    def forms(cls, name: str) -> list[TensorIntrin]:
        """The forms of `name`: the registered one first (ValueError when missing)."""
        return [cls.get(name), *cls._forms.get(name, ())]

    @classmethod
    def get(cls, name: str, allow_missing: bool = False) -> TensorIntrin | None:
        """The intrinsic registered as `name` (None if missing and `allow_missing`)."""
        found = cls._registry.get(name)
        if found is None and not allow_missing:
            known = ", ".join(sorted(cls._registry)) or "none"
            raise ValueError(f"no tensor intrinsic named {name!r}; registered: {known}")
        return found

    @classmethod
    def names(cls) -> list[str]:
        """The registered names, sorted."""
        return sorted(cls._registry)


def _check_same_parameters(desc: PrimFunc, impl: PrimFunc) -> None:
    """Parameter `i` of impl is bound where parameter `i` of desc matched: both must be
    buffers of one shape, dtype and scope."""
    ours, theirs = desc.params, impl.params
    if len(ours) != len(theirs) or not all(isinstance(p, Buffer) for p in ours + theirs):
        raise ValueError(f"TensorIntrin: desc {desc.name!r} and impl {impl.name!r} must take "
                         f"the same number of buffer parameters, got {len(ours)} and "
                         f"{len(theirs)}")
    for position, (a, b) in enumerate(zip(ours, theirs)):
        if (a.shape, a.dtype, a.scope) != (b.shape, b.dtype, b.scope):
            raise ValueError(f"TensorIntrin: parameter {position} differs between desc "
                             f"({a.name}: {_describe(a)}) and impl ({b.name}: {_describe(b)})")


def _describe(buffer: Buffer) -> str:
    shape = "x".join(str(d) for d in buffer.shape)
    return f"{shape} {buffer.dtype} in {buffer.scope!r}"

"""Random steps from the primitives steps.py does not draw: add_unit_loop, annotate (the
software-pipeline keys and the pragma/unroll keys the lowering reads), blockize, tensorize,
decompose_padding, merge, reindex, reindex_cache_read/write, reorder_block_iter_var,
transform_block_layout, transform_layout (padding forms too), set_axis_separator,
unsafe_set_dtype, and the sampling steps (sample_perfect_tile, sample_categorical,
sample_compute_location) with the step that uses what they drew.

Arguments are drawn valid and invalid alike: an invalid one must be refused with a
ScheduleError, a valid one must keep the result (check.py). `index_map` arguments are drawn as
Python text (`lambda i, j: (j, i // 2, i % 2)`), so that the reproducer prints what ran.
`replay_with_other_decision` (used by test_fuzz_schedules.schedule) replays a schedule's trace
with one sampling decision changed (`trace.with_decision`).
"""

from __future__ import annotations

from hypothesis import strategies as st

import sched
from sched.ir import BlockRealize, BufferStore, IntImm, Select, SeqStmt, collect, free_vars
from sched.schedule.state import find_block, find_loop
from sched.schedule.tensor_intrin import TensorIntrin
from sched.script import T

EXTRA_LOOP_STEPS = ("add_unit_loop", "annotate", "pipeline", "blockize", "tensorize",
                    "merge", "sample_perfect_tile", "sample_categorical")
EXTRA_BLOCK_STEPS = ("decompose_padding", "reindex", "reindex_cache_read",
                     "reindex_cache_write", "reorder_block_iter_var", "transform_block_layout",
                     "transform_layout", "set_axis_separator", "unsafe_set_dtype",
                     "sample_compute_location")
EXTRA_STEPS = EXTRA_LOOP_STEPS + EXTRA_BLOCK_STEPS
SAMPLING_STEPS = ("sample_perfect_tile", "sample_categorical", "sample_compute_location")

# keys the lowering or the autoscheduler read, and one nobody reads
ANNOTATIONS = (("pragma_auto_unroll_max_step", st.sampled_from([0, 4, 16, 512])),
               ("pragma_unroll_explicit", st.sampled_from([0, 1])),
               ("meta_schedule.cooperative_fetch", st.sampled_from([1, 2, 4])),
               ("meta_schedule.unroll_explicit", st.sampled_from([0, 16])),
               ("software_pipeline_async_stages", st.sampled_from([[0], [1], []])),
               ("note", st.sampled_from(["rows", "", "a\"b"])))
DTYPES = ("float64", "float16", "float32", "int32", "int64", "int8")
WIDER = {"float16": ("float32", "float64"), "float32": ("float64",), "int8": ("int32", "int64"),
         "int32": ("int64",)}            # dtypes that hold every value of the key's
CPU_INTRINSICS = ("dot_product_8_f32", "outer_product_4x16_f32")


def _index_map_text(data, names: list[str], extents: list[int | None], valid: bool = False,
                    used: list[str] | None = None) -> str:
    """A random index map over `names` as lambda text: mostly permutations, splits and fusions
    of the variables (injective), sometimes not (a variable dropped or repeated, a shift that
    goes negative). `valid`: only the injective forms with no negative index (a permutation of
    the variables, each kept, split, flipped or fused with the next), over `used` only (the
    variables an access uses; default all)."""
    outputs: list[str] = []
    order = data.draw(st.permutations([n for n in names if used is None or n in used]))
    skip: set[str] = set()
    forms = ["v", "v", "split", "flip", "fuse"] if valid else \
        ["v", "v", "v", "split", "flip", "shift", "fuse", "drop", "repeat", "const", "scale"]
    for k, name in enumerate(order):
        if name in skip:
            continue
        form = data.draw(st.sampled_from(forms))
        extent = extents[names.index(name)]
        if form == "split":
            c = data.draw(st.sampled_from([2, 3, 4]))
            outputs += [f"{name} // {c}", f"{name} % {c}"]
        elif form == "flip" and extent:
            outputs.append(f"{extent - 1} - {name}")
        elif form == "shift":
            outputs.append(f"{name} + {data.draw(st.sampled_from([1, 2, -1]))}")
        elif form == "fuse" and k + 1 < len(order) and extents[names.index(order[k + 1])]:
            nxt = order[k + 1]
            outputs.append(f"{name} * {extents[names.index(nxt)]} + {nxt}")
            skip.add(nxt)
        elif form == "drop":
            continue
        elif form == "repeat":
            outputs += [name, name]
        elif form == "const":
            outputs += ["0", name]
        elif form == "scale":
            outputs.append(f"{name} * 2")
        else:
            outputs.append(name)
    if not outputs:
        outputs = ["0"]
    return f"lambda {', '.join(names) or '*_'}: ({', '.join(outputs)},)"


def _extent(loop_node) -> int | None:
    value = getattr(loop_node.extent, "value", None)
    return value if isinstance(value, int) else None


def _buffer_spec(data, realize) -> str:
    """A buffer argument: ("read", k), ("write", k), or a name (maybe one the block does not
    touch)."""
    block = realize.block
    form = data.draw(st.sampled_from(["read", "write", "name", "name"]))
    if form == "read":
        return repr(("read", data.draw(st.integers(0, max(0, len(block.reads))))))
    if form == "write":
        return repr(("write", data.draw(st.integers(0, 1))))
    names = [r.buffer.name for r in (*block.reads, *block.writes)] or ["nothing"]
    return repr(data.draw(st.sampled_from(names)))


def apply_extra_step(sch: sched.Schedule, data, log: list[str], step: str, name: str,
                     checkpoint: dict) -> None:
    """Draws the arguments of `step` (one of EXTRA_STEPS) for block `name` and applies it;
    appends the Python it ran to `log`. A step of two (a sample and its use) sets
    `checkpoint["func"]` between them."""
    fitting = _fitting_blocks(sch.func, step)
    if fitting and data.draw(st.integers(0, 3)):   # mostly a block the step can take
        name = data.draw(st.sampled_from(fitting))
    block = sch.get_block(name)
    loops = sch.get_loops(block)
    b = f"sch.get_block({name!r})"
    realize = find_block(sch.func, name)
    valid = data.draw(st.integers(0, 3)) > 0        # mostly valid arguments (see _fitting_blocks)

    def loop_text(loop) -> str:
        return f"sch.get_loops({b})[{loops.index(loop)}]"

    scope = {"sch": sch, "T": T}

    def run(text: str) -> None:
        log.append(text)
        exec(text, scope)          # noqa: S102 - the text is the reproducer's own line

    if step in EXTRA_LOOP_STEPS and not loops and step not in ("add_unit_loop",
                                                               "sample_categorical"):
        return
    if step == "add_unit_loop":
        target = b if not loops or data.draw(st.booleans()) else \
            loop_text(data.draw(st.sampled_from(loops)))
        run(f"sch.add_unit_loop({target})")
    elif step == "annotate":
        key, values = data.draw(st.sampled_from(ANNOTATIONS))
        value = data.draw(values)
        target = b if data.draw(st.integers(0, 3)) == 0 else \
            loop_text(data.draw(st.sampled_from(loops)))
        run(f"sch.annotate({target}, {key!r}, {value!r})")
    elif step == "pipeline":
        loop = data.draw(st.sampled_from(loops))
        body = find_loop(sch.func, loop.name, "annotate").body
        count = len(body.stmts) if isinstance(body, SeqStmt) else 1
        count = max(1, count + data.draw(st.sampled_from([0, 0, 0, 0, 1, -1])))
        stages = data.draw(st.lists(st.integers(0, 2), min_size=count, max_size=count))
        order = data.draw(st.permutations(list(range(count))))
        first = data.draw(st.booleans())
        lines = [f"sch.annotate({loop_text(loop)}, 'software_pipeline_stage', {stages!r})",
                 f"sch.annotate({loop_text(loop)}, 'software_pipeline_order', {order!r})"]
        if not first:
            lines.reverse()
        run(lines[0])
        checkpoint["func"] = sch.func
        run(lines[1])
    elif step == "blockize":
        run(f"sch.blockize({loop_text(data.draw(st.sampled_from(loops)))})")
    elif step == "tensorize":
        names = list(CPU_INTRINSICS) if data.draw(st.integers(0, 3)) else TensorIntrin.names()
        intrinsic = data.draw(st.sampled_from(names))
        target = b if data.draw(st.integers(0, 3)) == 0 else \
            loop_text(data.draw(st.sampled_from(loops)))
        run(f"sch.tensorize({target}, {intrinsic!r})")
    elif step == "merge":
        others = [o for o in _block_names(sch) if o != name]
        if not others:
            return
        other = data.draw(st.sampled_from(others))
        other_loops = sch.get_loops(sch.get_block(other))
        if not other_loops:
            return
        k = data.draw(st.integers(0, min(len(loops), len(other_loops)) - 1))
        run(f"sch.merge({loop_text(loops[k])}, "
            f"sch.get_loops(sch.get_block({other!r}))[{k}])")
    elif step == "sample_perfect_tile":
        loop = data.draw(st.sampled_from(loops))
        n = data.draw(st.integers(2, 3))
        extent = _extent(find_loop(sch.func, loop.name, "sample_perfect_tile"))
        decision = ""
        if extent and data.draw(st.booleans()):
            factors = [1] * n
            factors[data.draw(st.integers(0, n - 1))] = extent
            if data.draw(st.integers(0, 4)) == 0:
                factors[0] += 1                     # a decision that does not fit
            decision = f", decision={factors!r}"
        run(f"factors = sch.sample_perfect_tile({loop_text(loop)}, n={n}, "
            f"max_innermost_factor={data.draw(st.sampled_from([2, 4, 16]))}{decision})")
        checkpoint["func"] = sch.func
        run(f"sch.split({loop_text(loop)}, factors=factors)")
    elif step == "sample_categorical":
        decision = data.draw(st.sampled_from(["", "", ", decision=1", ", decision=5"]))
        run(f"depth = sch.sample_categorical([0, 16, 64], [0.25, 0.5, 0.25]{decision})")
        checkpoint["func"] = sch.func
        if loops:
            target = data.draw(st.sampled_from(loops))
            run(f"sch.annotate({loop_text(target)}, 'pragma_auto_unroll_max_step', depth)")
    elif step == "sample_compute_location":
        decision = data.draw(st.sampled_from([None, None, -2, -1, 0, 1, 2, 7]))
        extra = "" if decision is None else f", decision={decision}"
        run(f"location = sch.sample_compute_location({b}{extra})")
        checkpoint["func"] = sch.func
        run(f"sch.compute_at({b}, location)")
    elif step == "reindex":
        run(f"sch.reindex({b}, {_buffer_spec(data, realize)})")
    elif step in ("reindex_cache_read", "reindex_cache_write"):
        iter_vars = realize.block.iter_vars
        extents = [getattr(iv.dom.extent, "value", None) for iv in iter_vars]
        regions = realize.block.writes if step.endswith("write") else realize.block.reads
        if valid and regions:
            index = data.draw(st.integers(0, len(regions) - 1))
            accessed = {v for r in regions[index].region for v in free_vars(r.min)}
            used = [f"v{k}" for k, iv in enumerate(iter_vars) if iv.var in accessed]
        else:
            index, used = data.draw(st.integers(0, 1 if step.endswith("write") else 2)), None
        storage = data.draw(st.sampled_from(["global", "shared", "local"]))
        text = _index_map_text(data, [f"v{k}" for k in range(len(iter_vars))], extents,
                               valid, used)
        run(f"sch.{step}({b}, {index}, {storage!r}, {text})")
    elif step == "reorder_block_iter_var":
        n = len(realize.block.iter_vars)
        if data.draw(st.integers(0, 4)):
            order = data.draw(st.permutations(list(range(n))))
        else:
            order = data.draw(st.lists(st.integers(-1, n), max_size=n + 1))
        run(f"sch.reorder_block_iter_var({b}, {order!r})")
    elif step == "transform_block_layout":
        extents = [getattr(iv.dom.extent, "value", None) for iv in realize.block.iter_vars]
        text = _index_map_text(data, [f"v{k}" for k in range(len(extents))], extents)
        run(f"sch.transform_block_layout({b}, {text})")
    elif step == "transform_layout":
        spec = _buffer_spec(data, realize)
        buffers = {r.buffer.name: r.buffer for r in (*realize.block.reads,
                                                      *realize.block.writes)}
        allocated = [n for n, buf in buffers.items() if _allocated(sch.func, buf)]
        if valid and allocated:
            spec = repr(data.draw(st.sampled_from(allocated)))
        buffer = buffers.get(eval(spec)) if not spec.startswith("(") else None  # noqa: S307
        if buffer is None and buffers:
            buffer = next(iter(buffers.values()))
        rank = len(buffer.shape) if buffer is not None else 1
        extents = [getattr(d, "value", None) for d in buffer.shape] if buffer else [None]
        text = _index_map_text(data, [f"i{k}" for k in range(rank)], extents, valid)
        pad = data.draw(st.sampled_from(["", "", ", pad_value=0.0", ", pad_value=7.0"]))
        run(f"sch.transform_layout({b}, {spec}, {text}{pad})")
    elif step == "decompose_padding":
        if not loops:
            return
        run(f"sch.decompose_padding({b}, {loop_text(data.draw(st.sampled_from(loops)))})")
    elif step == "set_axis_separator":
        separators = data.draw(st.sampled_from(["[]", "None", "[1]"]))
        run(f"sch.set_axis_separator({b}, {_buffer_spec(data, realize)}, {separators})")
    elif step == "unsafe_set_dtype":
        written = realize.block.writes[0].buffer if realize.block.writes else None
        if valid and written is not None and written.dtype in WIDER:
            index, dtype = 0, data.draw(st.sampled_from(WIDER[written.dtype]))
        else:
            index, dtype = data.draw(st.integers(0, 1)), data.draw(st.sampled_from(DTYPES))
        run(f"sch.unsafe_set_dtype({b}, {index}, {dtype!r})")


def _allocated(func, buffer) -> bool:
    """Whether `buffer` is one the function allocates, of a constant shape."""
    return buffer not in func.buffers and all(isinstance(d, IntImm) for d in buffer.shape)


def _fitting_blocks(func, step: str) -> list[str]:
    """The blocks `step` can take (drawn mostly, so that the step is taken often enough to
    matter): for decompose_padding a block storing a T.if_then_else at its iteration
    variables, for unsafe_set_dtype one writing an allocated buffer, for transform_layout one
    accessing one; [] for the other steps (any block)."""
    if step not in ("decompose_padding", "unsafe_set_dtype", "transform_layout"):
        return []
    names = []
    for realize in collect(func.body, BlockRealize):
        block = realize.block
        if block.name == "root":
            continue
        if step == "decompose_padding":
            fits = isinstance(block.body, BufferStore) and isinstance(block.body.value, Select)
        elif step == "unsafe_set_dtype":
            fits = bool(block.writes) and block.writes[0].buffer not in func.buffers
        else:
            fits = any(_allocated(func, r.buffer) for r in (*block.reads, *block.writes))
        if fits:
            names.append(block.name)
    return names


def _block_names(sch) -> list[str]:
    from sched.schedule.state import block_names

    return [n for n in block_names(sch.func) if n != "root"]


def sampling_steps(trace) -> list[int]:
    """Positions of the steps of `trace` that made a random decision."""
    return [k for k, i in enumerate(trace.instructions) if i.decision is not None]

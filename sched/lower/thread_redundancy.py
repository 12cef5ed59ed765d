"""Updates that every thread of a block would run at once: refused before lowering.

Code of a kernel outside its threadIdx loops runs in every thread of a block: the GPU has no
other way to run it (`thread_phases.py` models that on the C target). A store there of a value
that does not depend on what it overwrites is the same store in each thread, and harmless. A
block there that reads what it writes in shared or global memory (a reduction's combine, an
in-place update) is not: one thread's `S[i] = 0` or partial sum lands between another
thread's read and write of `S[i]`, and the result depends on the interleaving. Each thread's
copy computes the right value alone, so the C target, which runs the copies one after
another, cannot show it; ThreadSanitizer on `cuda-emu` reports it.

    for i in T.thread_binding(8, thread="blockIdx.x"):
        for t in T.thread_binding(32, thread="threadIdx.x"):
            ... S_rf[t] = partial sums (shared) ...
        for t in range(32):                 # outside the thread loop: every thread runs it
            with T.block("S"):              # S[i] = S[i] + S_rf[t]: refused
"""

from __future__ import annotations

import dataclasses

from sched.ir.extern import is_opaque
from sched.ir.functor import IRMutator, collect, free_vars
from sched.ir.nodes import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    For,
    IntImm,
    PrimFunc,
    SeqStmt,
    Stmt,
    is_thread_private,
)
from sched.ir.regions import infer_block_regions

BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")


def redundant_update(func: PrimFunc) -> str | None:
    """Why a block of `func` would race with its copies in the other threads of its thread
    block (see the module doc), or None when none would. Each kernel of the function
    (lower/kernel_sequence.py) is asked on its own."""
    if not any(_tag(loop).startswith(("threadIdx", "blockIdx")) for loop in _loops(func.body)):
        return None                               # no kernel with threads or blocks
    for kernel in _kernels(func):
        reason = _redundant_in_kernel(kernel)
        if reason is not None:
            return reason
    return None


def _kernels(func: PrimFunc) -> list[PrimFunc]:
    from sched.errors import ScheduleError
    from sched.lower.kernel_sequence import split_kernels

    try:
        plan = split_kernels(func)
    except ScheduleError:          # refused at build with its own message: ask the whole
        return [func]
    return [func] if plan is None else list(plan.kernels)


def _redundant_in_blocks(func: PrimFunc) -> str | None:
    """The same one level up: code of a kernel outside one of its blockIdx loops runs in
    every thread block along that axis, and the copies run in any order, at once. They store
    the same values, harmlessly, where each copy reads the same values whenever it reads them
    (`X[y] = A[y]; B[y] = X[y] + 1`: each copy reads its own or another's equal X[y]).
    Judged element by element on the dependences of one copy's order: refused where a copied
    block reads an element another block may store after the read (another copy's store may
    land first: `X[y] = A[y]` before `A[y] = 0`, a read of X[i + 1] ahead of the loop's store
    to it), an element a block bound to the axis stores, or what it stores itself (an
    update); and where a copied block stores an element another block, or its own later
    instance, stores too (which store lands last depends on the order). Audit helper-120:
    an update under blockIdx.y, beside a nest bound to blockIdx.x, ran once per x block
    (A += 4); helper-121: the copy-then-read pair must stay accepted; helpers 122, 124, 126:
    the copy-then-overwrite pair and a read ahead were accepted, stores of disjoint elements
    and a read of the same iteration's store refused."""
    axes = {_tag(loop) for loop in _loops(func.body) if _tag(loop) in BLOCK_TAGS
            and not (isinstance(loop.extent, IntImm) and loop.extent.value == 1)}
    if not axes:
        return None
    leaves = [(realize.block, not axes <= {_tag(loop) for loop in loops})
              for realize, loops in _leaf_blocks(func.body, [])]
    copied = {block.name for block, is_copied in leaves if is_copied}
    if not copied:
        return None
    blocks = {block.name: block for block, _ in leaves}
    writers: dict[str, list[str]] = {}
    for block, _ in leaves:
        for storage in _global_storages(_accessed(block, write=True)):
            writers.setdefault(storage, []).append(block.name)
    kinds = _dependence_kinds(func, blocks, writers)

    def depends(kind: str, source: str, sink: str, storage: str) -> bool:
        return kind in kinds.get((source, sink, storage), ())
    for name in sorted(copied, key=list(blocks).index):
        block = blocks[name]
        written = _global_storages(_accessed(block, write=True))
        if is_opaque(block) and written:
            return (f"block {name!r} runs outside a blockIdx loop of its kernel, so every "
                    f"thread block along it runs it, and it makes an opaque call that may "
                    f"write {', '.join(sorted(written))}: the copies' calls could race. "
                    f"{_BLOCK_ADVICE}")
        for storage in sorted(_global_storages(_accessed(block, write=False))):
            changed = [w for w in writers.get(storage, []) if w == name
                       or depends("anti", name, w, storage)
                       or (w not in copied and depends("flow", w, name, storage))]
            if changed:
                return (f"block {name!r} runs outside a blockIdx loop of its kernel, so every "
                        f"thread block along it runs it, and it reads {storage}, which the "
                        f"kernel writes ({', '.join(changed)}): one thread block's copy would "
                        f"read what another thread block already changed. {_BLOCK_ADVICE}")
        for storage in sorted(written):
            others = [w for w in writers[storage] if depends("output", name, w, storage)
                      or depends("output", w, name, storage)]
            if others:
                names = ", ".join(repr(w) for w in dict.fromkeys([name, *others]))
                return (f"block {name!r} runs outside a blockIdx loop of its kernel, so every "
                        f"thread block along it runs it, and blocks {names} write the same "
                        f"elements of {storage}: which copy's store lands last depends on the "
                        f"order the thread blocks run in. "
                        f"{_BLOCK_ADVICE}")
    return None


_BLOCK_ADVICE = ("Bind one of its loops to that blockIdx axis, or move it under the block loop "
                 "(sch.compute_at / sch.reverse_compute_at)")


def _global_storages(buffers) -> set[str]:
    return {b.storage_name for b in buffers if b.scope == "global"}


def _accessed(block: Block, write: bool) -> list[Buffer]:
    """The buffers `block` writes (or reads): its declared regions and the stores (loads) in
    its body and init. A TVM script's `T.reads` leaves out a reduction's own accumulator
    (`S[vi] = S[vi] + A[vi, vk]` with `T.reads(A[vi, vk])`): judged by the declared regions
    alone, every thread of a block ran that update (audit helper-151)."""
    found = [r.buffer for r in (block.writes if write else block.reads)]
    for stmt in (block.init, block.body):
        if stmt is not None:
            # (a shared buffer the block allocates itself too: one per thread block, which
            # all its threads update, audit helper-154)
            found += [node.buffer for node in collect(stmt, BufferStore if write else BufferLoad)]
    return found


def _dependence_kinds(func: PrimFunc, blocks: dict, writers: dict[str, list[str]]
                      ) -> dict[tuple[str, str, str], set[str]]:
    """(source block, sink block, storage) -> the kinds of the dependences between them on
    global memory in one copy's order, from the polyhedral model; where the model cannot
    see the kernel, every kind between every two blocks that write and access one storage."""
    import islpy as isl

    from sched.errors import UnmodelledError
    from sched.polyhedral.dependences import dependences

    try:
        found: dict[tuple[str, str, str], set[str]] = {}
        for dep in dependences(func):
            key = (dep.source.block.name, dep.sink.block.name, dep.buffer)
            found.setdefault(key, set()).add(dep.kind)
        return found
    except (UnmodelledError, isl.Error):
        every: dict[tuple[str, str, str], set[str]] = {}
        for storage, names in writers.items():
            for writer in names:
                for other, block in blocks.items():
                    if storage in _global_storages(_accessed(block, write=False)) | \
                            _global_storages(_accessed(block, write=True)):
                        every[writer, other, storage] = every[other, writer, storage] = \
                            {"flow", "anti", "output"}
        return every


def _redundant_in_kernel(func: PrimFunc) -> str | None:
    reason = _redundant_in_blocks(func)
    if reason is not None:
        return reason
    # one kernel: its thread blocks have the threads of every threadIdx loop, whichever
    # nest holds it (a nest with no thread loop of its own runs in all of them)
    if not any(_tag(loop).startswith("threadIdx") for loop in _loops(func.body)):
        return None                               # a kernel of one thread per block
    reason = _private_read_by_every_thread(func)
    if reason is not None:
        return reason
    axes = {_tag(loop) for loop in _loops(func.body) if _tag(loop).startswith("threadIdx")
            and not (isinstance(loop.extent, IntImm) and loop.extent.value == 1)}
    for realize, loops in _leaf_blocks(func.body, []):
        kernel = next((loop for loop in loops if _tag(loop) in BLOCK_TAGS), None)
        # every thread along an axis the block has no loop of runs it (a block under
        # threadIdx.y alone runs in each thread along x of its row)
        if kernel is None or axes <= {_tag(loop) for loop in loops}:
            continue
        block = realize.block
        written = {b.storage_name for b in _accessed(block, write=True)
                   if not is_thread_private(b.scope)}
        updated = sorted(written & {b.storage_name for b in _accessed(block, write=False)})
        if written and is_opaque(block):
            return (f"block {block.name!r} runs outside the threadIdx loops of its kernel, so "
                    f"every thread of a block runs it at the same time, and it makes an "
                    f"opaque call that may write {', '.join(sorted(written))}: the threads' "
                    f"calls could race. Bind one of its loops to threadIdx, or move it "
                    f"under a thread loop (sch.reverse_compute_at / sch.compute_at)")
        if updated:
            return (f"block {block.name!r} runs outside the threadIdx loops of its kernel (or of "
                    f"some of its thread axes), so several threads of a block run it at the "
                    f"same time, and it reads what it writes ({', '.join(updated)}): the "
                    f"threads' copies would race. Bind one of its loops to threadIdx (or the "
                    f"missing thread axis; a cross-thread reduction may need "
                    f"sch.decompose_reduction first), or move it under a thread loop "
                    f"(sch.reverse_compute_at / sch.compute_at)")
    return None


def _private_read_by_every_thread(func: PrimFunc) -> str | None:
    """A block that runs in every thread along a thread axis (its loops bind none to it)
    reading a thread-private buffer ("local", fragments) that a block under a loop of that
    axis writes: each thread holds its own copy, so all threads but the writer read a copy
    nobody wrote (found by the fuzzer: a shared tile filled from a "local" cache that another
    nest's threads had written; the C target ran it with garbage; and by an audit: a reader
    under threadIdx.y alone of a buffer written under threadIdx.y and x)."""
    written_by_threads: dict[str, tuple[str, set]] = {}
    for realize, loops in _leaf_blocks(func.body, []):
        axes = _thread_axes(loops)
        if axes:
            reduced_across = _reduces_across_threads(realize, loops)
            for buffer in _accessed(realize.block, write=True):
                if is_thread_private(buffer.scope):
                    found = written_by_threads.setdefault(buffer.storage_name,
                                                          (realize.block.name, set()))
                    # a cross-thread reduction stores its total in every thread's own copy
                    # (lower/cross_thread_reduction.py): not one copy per threadIdx.x
                    found[1].update(axes - {"threadIdx.x"} if reduced_across else axes)
    for realize, loops in _leaf_blocks(func.body, []):
        if not any(_tag(loop) in BLOCK_TAGS for loop in loops):
            continue
        own = _thread_axes(loops)
        for buffer in _accessed(realize.block, write=False):
            writer, axes = written_by_threads.get(buffer.storage_name, (None, set()))
            if writer is not None and is_thread_private(buffer.scope) and axes - own:
                missing = ", ".join(sorted(axes - own))
                return (f"block {realize.block.name!r} runs in every thread along {missing} "
                        f"(no loop of it is bound there), and it reads "
                        f"{buffer.name!r} ({buffer.scope}: each thread's own "
                        f"copy), which block {writer!r} writes under a loop bound to "
                        f"{missing}: the other threads would read a copy nobody wrote. Bind "
                        f"its loops to the threads as the writer's are, or keep the buffer in "
                        f"shared memory (sch.set_scope(..., \"shared\"))")
    return None


def _reduces_across_threads(realize: BlockRealize, loops: list[For]) -> bool:
    """Whether the block reduces over a loop bound to threadIdx.x (a cross-thread
    reduction, whose lowering stores the result on thread 0 only)."""
    bound = {lp.loop_var for lp in loops if _tag(lp) == "threadIdx.x"}
    return any(iv.kind == "reduce" and bound & set(free_vars(value))
               for iv, value in zip(realize.block.iter_vars, realize.iter_values, strict=True))


def _thread_axes(loops) -> set:
    return {_tag(loop) for loop in loops if _tag(loop).startswith("threadIdx")}


def _tag(loop: For) -> str:
    """The loop's thread tag ("" unless it is bound)."""
    return (loop.thread_tag or "") if loop.kind == "thread_binding" else ""


def _leaf_blocks(node, loops: list[For]):
    """(block realize, enclosing loops) of each block with no block inside it, and of the
    own statements of each block with blocks inside it (a store or a call beside its inner
    blocks runs outside their thread loops: audit helper-130), as a block of the same name
    whose regions are those statements' accesses."""
    if isinstance(node, For):
        yield from _leaf_blocks(node.body, [*loops, node])
    elif isinstance(node, BlockRealize):
        inner = list(_leaf_blocks(node.block, loops))
        if not inner:
            yield node, loops
            return
        own = _own_statements(node)
        if own is not None:      # under the loops of the block that hold all of them
            yield own, [*loops, *_loops_around_all(own.block)]
        yield from inner
    elif isinstance(node, Block):
        for child in (node.init, node.body):
            if child is not None:
                yield from _leaf_blocks(child, loops)
    elif isinstance(node, Stmt):
        for child in _children(node):
            yield from _leaf_blocks(child, loops)


class _InnerBlocksDropped(IRMutator):
    def visit_BlockRealize(self, realize: BlockRealize):
        return SeqStmt(())


def _loops_around_all(block) -> list[For]:
    """The loops of `block`'s body (its inner blocks dropped) that hold every statement it
    has left: a store of its own under its own thread loop runs in that loop's threads only
    (audit helper-136). Where the statements lie under different loops, only those common to
    all: the rules then judge each as if it ran outside the others (stricter)."""
    found: list[For] = []
    node = block.body
    while isinstance(node, For):
        found.append(node)
        node = node.body
    return found if block.init is None else []


def _own_statements(realize: BlockRealize) -> BlockRealize | None:
    """`realize` with its inner blocks dropped and its regions inferred from what is left,
    or None where no store, load or call is left."""
    block = realize.block
    body, init = (None if part is None else _InnerBlocksDropped().visit(part)
                  for part in (block.body, block.init))
    if not any(collect(part, kind) for part in (body, init) if part is not None
               for kind in (BufferStore, BufferLoad, Call)):
        return None
    reads, writes = infer_block_regions(body, init, block.iter_vars, block.alloc_buffers,
                                        free_vars(realize))
    return dataclasses.replace(realize, block=dataclasses.replace(
        block, body=body, init=init, reads=reads, writes=writes))


def _children(node: Stmt):
    for field in dataclasses.fields(node):
        value = getattr(node, field.name)
        for child in value if isinstance(value, tuple) else (value,):
            if isinstance(child, Stmt):
                yield child


def _loops(node):
    if isinstance(node, For):
        yield node
        yield from _loops(node.body)
    elif isinstance(node, BlockRealize):
        yield from _loops(node.block)
    elif isinstance(node, Block):
        for child in (node.init, node.body):
            if child is not None:
                yield from _loops(child)
    elif isinstance(node, Stmt):
        for child in _children(node):
            yield from _loops(child)

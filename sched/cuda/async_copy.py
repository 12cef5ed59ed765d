"""Asynchronous copies to shared memory (sm_80+) in CUDA C, as inline PTX:

- `AsyncCopy` (lower/software_pipeline.py): inside it, a copy `shared[i] = global[j]` of one
  element of 4 or 8 bytes becomes `cp.async.ca.shared.global [dst], [src], size;`, and a
  vectorized copy loop that the emitter moves as float4 becomes one 16-byte
  `cp.async.cg.shared.global`; any other statement in it stays synchronous (it is complete
  before the wait anyway);
- `AsyncCommit` -> `cp.async.commit_group;`, `AsyncWait(n)` -> `cp.async.wait_group n;`.

The shared address of the destination is taken with `__cvta_generic_to_shared` (as CUTLASS
does; inline `cvta.to.shared` PTX per copy kept the compiler from folding the conversions into
offsets from the array's base); sched/cuda/emu emulates each of these instructions.
"""

from __future__ import annotations

from sched.ir.nodes import AsyncCommit, AsyncCopy, AsyncWait, BufferLoad, BufferStore

_SHARED_ADDRESS = "sched_dst = (unsigned)__cvta_generic_to_shared({pointer});"
_COPY = ('asm volatile("cp.async.{cache}.shared.global [%0], [%1], {size};\\n" '
         ':: "r"(sched_dst), "l"({source}));')


class AsyncCopyEmitter:
    """Statements of the CUDA emitter for asynchronous copies (mixed into _CudaEmitter, which
    asks `async_store` from stmt_BufferStore and `async_vector_copy` from vector_copy)."""

    in_async_copy = False

    def stmt_AsyncCopy(self, node: AsyncCopy) -> None:
        self.line("// asynchronous copy (cp.async): lands by the wait_group that covers it")
        self.in_async_copy = True
        try:
            self.stmt(node.body)
        finally:
            self.in_async_copy = False

    def stmt_AsyncCommit(self, node: AsyncCommit) -> None:
        self.line('asm volatile("cp.async.commit_group;\\n" ::);')

    def stmt_AsyncWait(self, node: AsyncWait) -> None:
        self.line(f'asm volatile("cp.async.wait_group %0;\\n" :: "n"({node.pending}));')

    def async_store(self, node: BufferStore) -> bool:
        """`node` as a cp.async of one element when in an AsyncCopy and it copies a global
        element of 4 or 8 bytes into shared memory; False to emit it as a plain store."""
        value = node.value
        size = _element_size(node.buffer.dtype)
        if not (self.in_async_copy and node.buffer.scope == "shared"
                and isinstance(value, BufferLoad) and value.buffer.scope == "global"
                and value.buffer.dtype == node.buffer.dtype and size in (4, 8)):
            return False
        self.emit_cp_async(node.buffer, node.indices[0], value.buffer, value.indices[0],
                           size, "ca")
        return True

    def async_vector_copy(self, store: BufferStore, load: BufferLoad, size: int = 16) -> bool:
        """A vector move of `size` bytes (both sides aligned to it) as one cp.async when in an
        AsyncCopy from global to shared memory: `.cg` for 16 bytes (float4, 8 halves),
        `.ca` for 4 and 8 (a half2 pair), the sizes cp.async copies."""
        if not (self.in_async_copy and store.buffer.scope == "shared"
                and load.buffer.scope == "global" and size in (4, 8, 16)):
            return False
        self.emit_cp_async(store.buffer, store.indices[0], load.buffer, load.indices[0], size,
                           "cg" if size == 16 else "ca")
        return True

    def emit_cp_async(self, target, target_index, source, source_index, size: int,
                      cache: str) -> None:
        pointer = f"{self.name(target.storage_name)} + {self.operand(target_index, 12)}"
        source_pointer = f"{self.name(source.storage_name)} + {self.operand(source_index, 12)}"
        self.line("{")
        self.depth += 1
        self.line("unsigned sched_dst;")
        self.line(_SHARED_ADDRESS.format(pointer=pointer))
        self.line(_COPY.format(cache=cache, size=size, source=source_pointer))
        self.depth -= 1
        self.line("}")


def _element_size(dtype: str) -> int:
    return 1 if dtype in ("bool", "int8", "uint8") else \
        int("".join(ch for ch in dtype if ch.isdigit())) // 8

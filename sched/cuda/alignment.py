"""Which buffer parameters a CUDA kernel needs aligned beyond their element size, and the check
of a call's pointers against that.

The code generator records, for each buffer parameter it reads or writes with a wider access
than one element, the bytes that access needs and why (`ParamAlignments.require`):

- a float4 move (16 bytes: 4 floats, 8 halves) or a `half2`/`__nv_bfloat162` move (4 bytes);
- `nvcuda::wmma::load_matrix_sync` / `store_matrix_sync` on a global tile (32 bytes: the
  CUDA programming guide asks a 256-bit aligned pointer).

Every runtime that launches the kernel checks the pointers with `check_pointer_alignment`
before the launch: the "cuda" target (`CudaKernel`, `CudaKernelSequence`), and the export
launcher writes the same checks in C (`alignment_bytes`, `alignment_reasons`). Tensors torch
allocates on the GPU are 256-byte aligned; a view with an offset may not be. Its emulation
("cuda-emu") checks the offset of each host array in its allocation
(`allocation_offsets`): the GPU would refuse the same view of a copied allocation, while the
host allocator's own alignment (numpy's: 16 bytes) says nothing about the GPU's.
"""

from __future__ import annotations

from dataclasses import dataclass

from sched.errors import KernelArgumentError


@dataclass(frozen=True)
class Alignment:
    """`bytes` a parameter's pointer must be a multiple of, and `why` (what the kernel does
    with it, e.g. "moves it as float4")."""

    bytes: int
    why: str


class ParamAlignments(dict):
    """Buffer name -> Alignment: the strictest need recorded for each parameter."""

    def require(self, name: str, size: int, why: str) -> None:
        if name not in self or self[name].bytes < size:
            self[name] = Alignment(size, why)

    def merge(self, other: dict) -> None:
        for name, alignment in other.items():
            self.require(name, alignment.bytes, alignment.why)

    def without(self, names) -> ParamAlignments:
        kept = ParamAlignments()
        kept.merge({n: a for n, a in self.items() if n not in set(names)})
        return kept


def parameter_alignments(func, aligned_params) -> list[tuple[int, Alignment]]:
    """(index in `func.buffers`, Alignment) of each buffer parameter `aligned_params` names.
    `aligned_params`: a dict name -> Alignment (or a set of names, each needing float4's 16
    bytes: the older form)."""
    if not isinstance(aligned_params, dict):
        aligned_params = {n: Alignment(16, "moves it as float4") for n in aligned_params}
    return [(i, aligned_params[b.name]) for i, b in enumerate(func.buffers)
            if b.name in aligned_params]


def check_pointer_alignment(func, needs: list[tuple[int, Alignment]], pointers,
                            what: str = "address") -> None:
    """Raise KernelArgumentError naming the first buffer argument whose pointer (an int) is not
    aligned as `needs` (from `parameter_alignments`) says. `what` the pointers are, for the
    message ("address", or "offset in its allocation" for `allocation_offsets`)."""
    for index, alignment in needs:
        pointer = pointers[index]
        if pointer is not None and pointer % alignment.bytes:
            name = func.buffers[index].name
            raise KernelArgumentError(
                f"argument '{name}': its data is not {alignment.bytes}-byte aligned ({what} "
                f"{pointer:#x}, {pointer % alignment.bytes} bytes past a multiple of "
                f"{alignment.bytes}; a view with an offset?): this kernel {alignment.why}, "
                f"which needs {alignment.bytes}-byte aligned addresses. Pass a copy "
                f"(tensor.clone(), np.ascontiguousarray of a fresh array) or a view that starts "
                f"{alignment.bytes}-byte aligned")


def allocation_offsets(arrays) -> list[int | None]:
    """The byte offset of each array's data in the allocation it views (numpy arrays and CPU
    torch tensors; None for anything else): what decides its alignment once the allocation is
    copied to the GPU, which aligns allocations to 256 bytes. The emulator ("cuda-emu") checks
    these, so a call that the GPU would refuse is refused there too, whatever the host
    allocator's own alignment."""
    offsets = []
    for array in arrays:
        if hasattr(array, "untyped_storage") and hasattr(array, "data_ptr"):   # torch
            offsets.append(array.data_ptr() - array.untyped_storage().data_ptr())
            continue
        root = array
        while getattr(root, "base", None) is not None and hasattr(root.base, "ctypes"):
            root = root.base
        offsets.append(array.ctypes.data - root.ctypes.data if hasattr(array, "ctypes")
                       else None)
    return offsets


def alignment_bytes(needs: list[tuple[int, Alignment]], func) -> dict[str, int]:
    """Buffer name -> bytes, for the export launcher's checks."""
    return {func.buffers[i].name: a.bytes for i, a in needs}


def alignment_reasons(needs: list[tuple[int, Alignment]], func) -> dict[str, str]:
    """Buffer name -> why, for the export launcher's messages."""
    return {func.buffers[i].name: a.why for i, a in needs}

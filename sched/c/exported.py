"""What an export wrote (`ExportedKernel`), and writing its files: shared by the C and the
CUDA export (`sched.c.export`, `sched.cuda.export`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ExportedKernel:
    """What `kernel.export(directory)` wrote: the function's C `name`, the `target`, the
    `directory` and its `files` (header first); for the C target, the gcc `flags` to compile
    it with."""

    name: str
    target: str
    directory: Path
    files: tuple[Path, ...]
    flags: tuple[str, ...] = ()

    @property
    def header(self) -> Path:
        return self.files[0]

    def summary(self) -> str:
        """What `sched export` prints: the files, and how to build against them."""
        listed = "\n".join(f"  {path}" for path in self.files)
        if self.target == "cuda":
            how = "cmake -S DIR -B DIR/build && cmake --build DIR/build (links CUDA::cuda_driver)"
        else:        # the flags the C target compiled the kernel with (sched/c/build.py)
            how = (f"cmake -S DIR -B DIR/build && cmake --build DIR/build, or compile NAME.c "
                   f"with gcc {' '.join(self.flags)}")
        return (f"exported {self.name!r} ({self.target}) to {self.directory}:\n{listed}\n"
                f"call it as declared in {self.header.name}; build: "
                f"{how.replace('DIR', str(self.directory)).replace('NAME', self.name)}")


# The directory's CMakeLists.txt, the same for every export, so that several exports share a
# directory: it includes each export's own NAME.sched.cmake (a static library NAME).
CMAKE_LISTS = """# Builds every sched export in this directory: each NAME.sched.cmake defines a
# static library NAME. add_subdirectory() this directory and link the names.
cmake_minimum_required(VERSION 3.18)
project(sched_exports LANGUAGES C)
file(GLOB sched_exports CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.sched.cmake)
foreach(sched_export IN LISTS sched_exports)
  include(${sched_export})
endforeach()
"""


def cmake_files(name: str, library: str) -> dict[str, str]:
    """The files that build export `name`: its `NAME.sched.cmake` (`library`, CMake commands
    defining the target) and the directory's CMakeLists.txt."""
    return {f"{name}.sched.cmake": library, "CMakeLists.txt": CMAKE_LISTS}


def write_files(directory, contents: dict[str, str]) -> tuple[Path, ...]:
    """Write each `file name -> text` under `directory` (created if missing)."""
    directory = Path(directory).expanduser()
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"export: {str(directory)!r} exists and is not a directory")
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for file_name, text in contents.items():
        path = directory / file_name
        path.write_text(text)
        paths.append(path)
    return tuple(paths)

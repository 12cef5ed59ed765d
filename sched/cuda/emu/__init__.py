"""The CUDA emulator (target "cuda-emu"): the CUDA C the "cuda" target generates, compiled as
C++ by g++ against a header of sched's and run on the CPU, one host thread per CUDA thread of
a block, blocks one after another.

    kernel = sched.build(sch.func, target="cuda-emu")     # sanitize="thread" for TSan
    kernel(a, b, c)                                       # numpy arrays or CPU torch tensors

Modules: `include/cuda_emu.h` (what CUDA C names mean on the host: indices, __shared__,
__syncthreads, warp shuffles and votes, atomics, 16-bit floats, math; `mma.h`: wmma fragments;
`cuda_pipeline.h`: asynchronous copies; `emu_ptx.h`: mma.sync, ldmatrix, cp.async as inline
PTX), `runtime/` (blocks, barriers, warp collectives, the deadlock watchdog, the launch
program), `source` (the source as g++ gets it: `__shared__` per block), `ptx` (inline PTX as
calls), `compile` (`compile_emulator`: g++, cached on disk), `kernel` (`EmulatedKernel`: a
call), `build` (`build_cuda_emu`).

Unlike an interpreter of sched's IR (or Triton's interpreter mode, which runs Triton's IR), it
runs the code that ships: a bug in the CUDA code generator shows here. The semantics of the
tensor-core and PTX functions follow the CUDA and PTX documentation; they were checked
against numpy, not against a GPU.
"""

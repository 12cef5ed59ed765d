"""The CUDA target: code generation, compilation to cubin (NVRTC or nvcc, cached on disk),
the resource report, and the runtime that launches kernels on torch's stream.

Modules: `codegen` (`generate_cuda`), `build` (`build_cuda`, what `sched.build(func,
target="cuda")` calls), `device` (is there a GPU, which arch), `compile` (`compile_cuda`),
`resources` (`Resources`), `runtime` (`CudaModule`, `CudaKernel`), `emu` (the same CUDA C run on
the CPU: target "cuda-emu"). The launch configuration is
`sched.lower.launch.LaunchConfig`: the lowering reads it off the bound loops. Importing
this package imports neither `cuda.bindings` nor torch: they load when a function needs them.
"""

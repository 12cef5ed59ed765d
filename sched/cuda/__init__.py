"""The CUDA target: code generation, compilation to cubin (NVRTC or nvcc, cached on disk),
the resource report, and the runtime that launches kernels on torch's stream.

Modules: `device` (is there a GPU, which arch), `compile` (`compile_cuda`), `resources`
(`Resources`), `launch` (`LaunchConfig`), `runtime` (`CudaModule`, `CudaKernel`). Importing
this package imports neither `cuda.bindings` nor torch: they load when a function needs them.
"""

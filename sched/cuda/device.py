"""Is there a CUDA GPU here, and which arch is it?

Nothing here is imported at `import sched` time, and these functions import `cuda.bindings` and
torch only when called. On a machine with no driver, `cuda.bindings.driver.cuInit` raises (a
`RuntimeError` subclass: the driver library cannot be found); `gpu_available()` answers False
there, and `require_gpu()` turns that into a `NoGPUError` that says what still works.
"""

from __future__ import annotations

import functools
import re

from sched.errors import CudaError, NoGPUError

DEFAULT_ARCH = "sm_90"   # the arch compiled for when there is no GPU to ask (the lent H100)
ARCH_PATTERN = re.compile(r"sm_(\d+)(\d)([af]?)")   # major, minor (one digit), suffix


@functools.cache
def gpu_available() -> bool:
    """True when the CUDA driver loads, initializes and reports at least one device.

    Cached for the process: a driver or a GPU does not appear while Python runs.
    """
    try:
        from cuda.bindings import driver
    except ImportError:
        return False
    try:
        (result,) = driver.cuInit(0)
        if result != driver.CUresult.CUDA_SUCCESS:
            return False
        result, count = driver.cuDeviceGetCount()
    except RuntimeError:          # no libcuda.so: cuda.pathfinder's DynamicLibNotFoundError
        return False
    return result == driver.CUresult.CUDA_SUCCESS and count > 0


def check(call: str, result: tuple):
    """The value(s) a `cuda.bindings.driver` call returned after its CUresult, which must be
    CUDA_SUCCESS; otherwise a CudaError naming `call` and the result.

    `check("cuDeviceGet", driver.cuDeviceGet(0))` -> the CUdevice; no value -> None.
    """
    from cuda.bindings import driver

    status, *values = result
    if status != driver.CUresult.CUDA_SUCCESS:
        try:
            _, text = driver.cuGetErrorString(status)
            text = ": " + text.decode() if isinstance(text, bytes) else ""
        except RuntimeError:        # no driver library to describe it
            text = ""
        raise CudaError(f"{call} failed: {status.name} ({int(status)}){text}")
    return None if not values else values[0] if len(values) == 1 else tuple(values)


def require_gpu(what: str) -> None:
    """Raise `NoGPUError` naming `what` (e.g. "calling kernel 'add'") unless a GPU is here."""
    if not gpu_available():
        raise NoGPUError(
            f"{what}: no CUDA GPU/driver on this machine: kernel calls need one; building and "
            f"compiling still work (name the arch, e.g. arch='{DEFAULT_ARCH}'), and the 'c' "
            f"target runs the same schedule on the CPU")


def current_device() -> int:
    """The ordinal of torch's current CUDA device (the one kernels launch on)."""
    require_gpu("querying the current CUDA device")
    import torch

    torch.cuda.init()
    return torch.cuda.current_device()


def current_device_fast() -> int:
    """`current_device()` on the launch path: torch's own C function after the first call
    (a fraction of a microsecond); call it where a GPU is known to be there."""
    return _torch_get_device()()


@functools.cache
def _torch_get_device():
    import torch

    torch.cuda.init()
    return getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)


def current_stream(driver, ordinal: int):
    """torch's current stream on device `ordinal` as a `CUstream` of `driver` (one object
    per stream handle, kept: the launch path makes none)."""
    handle = _torch_raw_stream()(ordinal)
    stream = _STREAMS.get(handle)
    if stream is None:
        if len(_STREAMS) >= 64:
            _STREAMS.clear()
        stream = _STREAMS[handle] = driver.CUstream(handle)
    return stream


_STREAMS: dict[int, object] = {}


@functools.cache
def _torch_raw_stream():
    """torch's current raw stream handle of a device: its C function where this torch has it
    (no Stream object made), else through torch.cuda.current_stream."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw if raw is not None else lambda ordinal: torch.cuda.current_stream(ordinal
                                                                                 ).cuda_stream


def device_arch(ordinal: int) -> str:
    """The arch of CUDA device `ordinal` from its compute capability: 9.0 -> "sm_90"."""
    require_gpu(f"querying the arch of CUDA device {ordinal}")
    from cuda.bindings import driver

    check("cuInit", driver.cuInit(0))
    device = check("cuDeviceGet", driver.cuDeviceGet(ordinal))
    attribute = driver.CUdevice_attribute
    major = check("cuDeviceGetAttribute", driver.cuDeviceGetAttribute(
        attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device))
    minor = check("cuDeviceGetAttribute", driver.cuDeviceGetAttribute(
        attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device))
    return f"sm_{major}{minor}"


def current_arch() -> str:
    """The arch of torch's current CUDA device, like "sm_90". Raises NoGPUError without one."""
    return device_arch(current_device())


def default_arch() -> str:
    """The current device's arch when there is a GPU, else DEFAULT_ARCH."""
    return current_arch() if gpu_available() else DEFAULT_ARCH


def parse_arch(arch: str) -> tuple[int, int, str]:
    """`"sm_90a"` -> (9, 0, "a"). Raises ValueError for anything that is not `sm_<major><minor>`
    with an optional `a`/`f` suffix."""
    match = ARCH_PATTERN.fullmatch(arch) if isinstance(arch, str) else None
    if match is None:
        raise ValueError(f"arch {arch!r}: expected 'sm_' and a compute capability, like "
                         f"'sm_80', 'sm_89', 'sm_90' or 'sm_90a'")
    return int(match[1]), int(match[2]), match[3]


def runs_on(cubin_arch: str, device_arch: str) -> bool:
    """Whether a cubin for `cubin_arch` loads on a device of `device_arch`: same major and a
    minor no newer than the device's; an `a`/`f` (arch-specific) cubin only on its own arch."""
    major, minor, suffix = parse_arch(cubin_arch)
    device_major, device_minor, _ = parse_arch(device_arch)
    if suffix:
        return (major, minor) == (device_major, device_minor)
    return major == device_major and minor <= device_minor

"""Device queries: GPU presence, archs and which cubins load where, checked driver results."""

from __future__ import annotations

import pytest

from sched.cuda import device
from sched.cuda.device import check, parse_arch, require_gpu, runs_on
from sched.errors import CudaError, NoGPUError


def test_parse_arch():
    assert parse_arch("sm_90") == (9, 0, "")
    assert parse_arch("sm_90a") == (9, 0, "a")
    assert parse_arch("sm_120") == (12, 0, "")
    with pytest.raises(ValueError, match=r"arch '90': expected 'sm_' and a compute capability"):
        parse_arch("90")


@pytest.mark.parametrize("cubin, gpu, loads", [
    ("sm_80", "sm_86", True),     # same major, older minor: binary compatible
    ("sm_86", "sm_80", False),
    ("sm_80", "sm_90", False),    # another major needs its own cubin
    ("sm_90a", "sm_90", True),
    ("sm_90a", "sm_100", False),  # arch-specific features: that arch only
])
def test_which_cubins_load_on_which_gpus(cubin, gpu, loads):
    assert runs_on(cubin, gpu) is loads


def test_require_gpu_says_what_still_works(monkeypatch):
    monkeypatch.setattr(device, "gpu_available", lambda: False)
    with pytest.raises(NoGPUError, match=r"^calling kernel 'f': no CUDA GPU/driver on this "
                                         r"machine: kernel calls need one; building and "
                                         r"compiling still work \(name the arch"):
        require_gpu("calling kernel 'f'")


def test_check_returns_values_and_names_a_failed_call():
    from cuda.bindings import driver

    success, invalid = driver.CUresult.CUDA_SUCCESS, driver.CUresult.CUDA_ERROR_INVALID_VALUE
    assert check("cuInit", (success,)) is None
    assert check("cuDeviceGetCount", (success, 2)) == 2
    assert check("cuDeviceGet", (success, 1, 2)) == (1, 2)
    with pytest.raises(CudaError, match=r"^cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE \(1\)"):
        check("cuLaunchKernel", (invalid,))


@pytest.mark.gpu
def test_current_arch_is_the_compute_capability():
    import torch

    major, minor = torch.cuda.get_device_capability()
    assert device.current_arch() == f"sm_{major}{minor}"

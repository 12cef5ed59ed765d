"""Shared test helpers: seeded random inputs and numpy comparison."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def assert_close(actual, expected, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64),
                               np.asarray(expected, dtype=np.float64), rtol=rtol, atol=atol)


NO_GPU = ("needs a CUDA GPU and driver: none on this machine (cuda.bindings.driver.cuInit "
          "failed); compile-only tests still ran")


def pytest_collection_modifyitems(config, items):
    """GPU-marked tests (`@pytest.mark.gpu`) are skipped, with the reason, without a GPU."""
    if not any("gpu" in item.keywords for item in items):
        return
    from sched.cuda.device import gpu_available

    if gpu_available():
        return
    skip = pytest.mark.skip(reason=NO_GPU)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

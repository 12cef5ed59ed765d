"""GPU-marked tests (`@pytest.mark.gpu`) are skipped, with the reason, where there is no GPU."""

from __future__ import annotations

import pytest

from sched.cuda.device import gpu_available

NO_GPU = ("needs a CUDA GPU and driver: none on this machine (cuda.bindings.driver.cuInit "
          "failed); compile-only tests still ran")


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason=NO_GPU)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
